"""Options shared by `eval rl-probe` and `eval sweep`, and the checks both run before any model is loaded.

The sweep passes the probe's size options through, so a sweep can be made as small as a probe; every setting is
checked up front (one line naming the option), not after the first runs finished.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from mathmix.cli_util import fail

PROMPTS = typer.Option(..., help="MATH8K-style prompts: JSONL/JSON with prompt (or problem) and answer.")
DATA_DIR = typer.Option(
    None,
    help="Benchmark folder: MATH500 validation + overlap check "
    "(default ../shared/data/bench from the cwd, else next to the checkout).",
)
NO_EVAL_SETS = typer.Option(
    False, "--no-eval-sets", help="Run without a benchmark folder: no overlap check, no MATH500 curve."
)
PROMPTS_PER_STEP = typer.Option(128, help="Prompts per rollout step.")
ROLLOUTS = typer.Option(16, help="Completions per prompt (the GRPO group).")
MICRO_BATCH = typer.Option(16, help="Completions per forward pass (memory only).")
MAX_RESPONSE = typer.Option(4096, help="Response length cap in tokens.")
HELDOUT = typer.Option(256, help="Held-out training prompts.")
HELDOUT_SAMPLES = typer.Option(4, help="n of the held-out mean@n.")
MATH500_LIMIT = typer.Option(500, help="MATH500 items scored at each validation.")

# ProbeConfig field -> the option that sets it, so a bad value is reported under the name the user typed.
_OPTION_NAMES = {"learning_rate": "--lr", "kl_coef": "--kl", "mini_batch": "--mini-batch"}


def build_config(option_names: dict[str, str] | None = None, **settings: Any):
    """A ProbeConfig from CLI settings; a bad value exits with one line naming its option.

    `option_names` maps a ProbeConfig field to the option that set it where the command names it differently
    (the sweep's --lrs, --mini-batches).
    """
    from pydantic import ValidationError

    from evals.rl_probe import ProbeConfig

    names = {**_OPTION_NAMES, **(option_names or {})}

    def option(field: str) -> str:
        return names.get(field, "--" + field.replace("_", "-"))

    try:
        return ProbeConfig(**settings)
    except ValidationError as err:
        parts = []
        for e in err.errors():
            field = ".".join(str(p) for p in e["loc"])
            message = e["msg"].removeprefix("Value error, ")
            # the cross-field checks name fields (prompts_per_step, mini_batch): say the options instead
            for name in sorted((n for n in ProbeConfig.model_fields if "_" in n), key=len, reverse=True):
                message = message.replace(name, option(name))
            parts.append(f"{option(field)}: {message} (got {e['input']!r})" if field else message)
        fail("; ".join(parts))


def check_inputs(prompts: Path, data_dir: Path | None, no_eval_sets: bool, config) -> Path | None:
    """Fail early on the prompt file and the benchmark folder; returns the folder (None with --no-eval-sets).

    Also refuses a prompt file too small for the held-out slice plus one rollout step (before overlap drops).
    """
    from evals.bench_dir import find_bench_dir
    from evals.rl_probe import load_prompts

    if not prompts.is_file():
        fail(f"prompt file not found: {prompts} (--prompts)")
    if no_eval_sets and data_dir is not None:
        fail("--data-dir and --no-eval-sets exclude each other")
    try:
        found = None if no_eval_sets else find_bench_dir(data_dir)
        records = load_prompts(prompts)
    except ValueError as err:
        fail(f"{err}{' (or --no-eval-sets)' if 'benchmark folder' in str(err) else ''}")
    if config.vllm == "on":  # TRL raised a traceback for this after the overlap check and the model load
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            fail(
                "--vllm on: vLLM is not installed (pip install mathmix[gpu]); --vllm auto uses it where present"
            )
    need = config.heldout + config.prompts_per_step
    if len(records) < need:
        fail(
            f"{len(records)} prompts in {prompts}; need >= {need} "
            f"(--heldout {config.heldout} + --prompts-per-step {config.prompts_per_step})"
        )
    return found
