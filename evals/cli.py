"""`mathmix eval`: bench (few-shot evals), rl-probe (GRPO), forecast, compare, sweep, sweep-fit."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from evals import probe_options as opt
from mathmix.cli_util import check_output, console, fail, on_interrupt

eval_app = typer.Typer(
    help="Few-shot math evals, the GRPO RL-readiness probe and the sigmoid forecast of its final accuracy.",
    no_args_is_help=True,
)


def default_bench_out(model: str) -> Path:
    """./eval-NAME; an export folder is named after the folder above it (RUN/train/export: eval-RUN-export,
    RUN/train/STAGE/export: eval-STAGE-export), so two runs' exports do not share one results folder."""
    path = Path(model)
    name = path.name or "model"
    if path.is_dir() and name == "export":
        above = [p.name for p in path.resolve().parents if p.name and p.name not in ("train", "branches")]
        name = f"{above[0]}-export" if above else name
    return Path(f"eval-{name}")


@eval_app.command("bench")
def bench_cmd(
    model: str = typer.Argument(..., help="HF model folder (e.g. RUN/train/export) or hub name."),
    suite: str = typer.Option(
        None,
        help="Named suite: octothinker (GSM8K 8, MATH500 4, OlympiadBench 4, "
        "AMC23 0, AIME24 0, OCW 4 shots; the default) or quick.",
    ),
    benchmarks: str = typer.Option(None, help="Instead of a suite: NAME[:SHOTS],... e.g. gsm8k:8,math500:4."),
    data_dir: Path = typer.Option(
        None,
        help="Benchmark folder (gsm8k/, math500/, qwen_eval/, ...); default ../shared/data/bench from the cwd, "
        "else next to the checkout.",
    ),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        help="Results folder (default ./eval-<model name>; for RUN/train/export, ./eval-<RUN>-export).",
    ),
    limit: int = typer.Option(None, help="Evaluate only the first N items of each benchmark (N >= 1)."),
    zero_shot: bool = typer.Option(
        False, help="No exemplars, a step-by-step \\boxed{} instruction (RL-tuned models)."
    ),
    prompt_file: Path = typer.Option(
        None, help="JSONL exemplars (question/problem + solution) instead of train splits."
    ),
    seed: int = typer.Option(0, help="Seed for drawing exemplars from each training split."),
    max_new_tokens: int = typer.Option(512, help="Generation budget per answer."),
    backend: str = typer.Option("auto", help="auto (vLLM on GPU, else transformers), vllm or transformers."),
    batch_size: int = typer.Option(8, help="Prompts per forward pass (transformers backend)."),
) -> None:
    """Greedy few-shot evals graded by math-verify.

    Reads MODEL and DATA_DIR; writes OUT/{benchmark}.json (accuracy + per-item records), OUT/results.json and
    OUT/job.json (the model, data and settings). A rerun of the same command keeps the benchmarks already
    finished and evaluates the rest; another model or other settings into the same OUT are refused.
    """

    from evals.bench import print_results_table, run_bench
    from evals.bench_dir import find_bench_dir
    from evals.benchmarks import parse_benchmarks
    from evals.generate import check_backend_installed

    if suite is not None and benchmarks:
        fail("--suite and --benchmarks exclude each other (--benchmarks names the benchmarks itself)")
    try:
        plan = parse_benchmarks(suite, benchmarks)
    except ValueError as err:
        fail(f"{'--benchmarks' if benchmarks else '--suite'}: {err}")
    for name, value in (
        ("--limit", limit),
        ("--max-new-tokens", max_new_tokens),
        ("--batch-size", batch_size),
    ):
        if value is not None and value < 1:
            fail(f"{name} must be >= 1 (got {value})")
    if backend not in ("auto", "vllm", "transformers"):
        fail(f"--backend must be auto, vllm or transformers (got {backend!r})")
    if prompt_file is not None and not prompt_file.is_file():
        fail(f"prompt file not found: {prompt_file} (--prompt-file)")
    try:
        check_backend_installed(backend)  # before OUT is made: nothing is left behind
        data_dir = find_bench_dir(data_dir)
    except ValueError as err:
        fail(str(err))
    out = out or default_bench_out(model)
    check_output(out)
    on_interrupt(
        f"interrupted: the benchmarks finished are kept in {out}; rerun the same command to evaluate the rest"
    )
    try:
        summary = run_bench(
            model,
            plan,
            data_dir,
            out,
            limit=limit,
            zero_shot=zero_shot,
            prompt_file=prompt_file,
            seed=seed,
            max_new_tokens=max_new_tokens,
            backend=backend,
            batch_size=batch_size,
        )
    except ValueError as err:
        fail(str(err))
    print_results_table(summary)
    console.print(f"results: {out}/results.json")


@eval_app.command("rl-probe")
def rl_probe_cmd(
    model: str = typer.Argument(..., help="HF model folder to probe."),
    prompts: Path = opt.PROMPTS,
    data_dir: Path = opt.DATA_DIR,
    no_eval_sets: bool = opt.NO_EVAL_SETS,
    out: Path = typer.Option(Path("rl-probe"), "--out", "-o", help="Probe run folder."),
    steps: int = typer.Option(100, help="Rollout steps."),
    eval_every: int = typer.Option(10, help="Validate every K rollout steps."),
    prompts_per_step: int = opt.PROMPTS_PER_STEP,
    rollouts: int = opt.ROLLOUTS,
    mini_batch: int = typer.Option(64, help="Prompts per optimizer update."),
    micro_batch: int = opt.MICRO_BATCH,
    lr: float = typer.Option(1e-6),
    kl: float = typer.Option(0.0),
    temperature: float = typer.Option(1.0),
    max_response: int = opt.MAX_RESPONSE,
    heldout: int = opt.HELDOUT,
    heldout_samples: int = opt.HELDOUT_SAMPLES,
    math500_limit: int = opt.MATH500_LIMIT,
    seed: int = typer.Option(0),
    on_overlap: str = typer.Option("drop", help="drop | fail | warn on prompts overlapping eval sets."),
    vllm: str = typer.Option("auto", help="auto | on | off: vLLM generation (GPU)."),
    checkpoints: bool = typer.Option(
        True,
        help="Save the trainer state at each validation (the last one only, removed when the probe finishes), "
        "so a rerun resumes a killed probe; --no-checkpoints saves disk (a 3B model with Adam: ~36 GB each, two "
        "while the next is written).",
    ),
) -> None:
    """GRPO on MATH8K-style prompts with OctoThinker's settings, validated every K steps.

    Reads MODEL, PROMPTS and DATA_DIR; writes OUT/validation.csv (Step, rollouts, heldout_mean@n, math500,
    mean_response_length, ...), OUT/overlap.json, OUT/job.json, OUT/summary.json and, while it runs, the last
    checkpoint under OUT/trainer/; `mathmix eval forecast OUT` reads them. A rerun of the same command resumes
    from that checkpoint; another model, prompt file or settings into the same OUT are refused.
    """
    from evals.rl_probe import run_probe

    config = opt.build_config(
        prompts_per_step=prompts_per_step,
        rollouts=rollouts,
        mini_batch=mini_batch,
        micro_batch=micro_batch,
        learning_rate=lr,
        kl_coef=kl,
        temperature=temperature,
        max_response=max_response,
        steps=steps,
        eval_every=eval_every,
        heldout=heldout,
        heldout_samples=heldout_samples,
        math500_limit=math500_limit,
        seed=seed,
        on_overlap=on_overlap,
        vllm=vllm,
        checkpoints=checkpoints,
    )
    bench_dir = opt.check_inputs(prompts, data_dir, no_eval_sets, config)
    check_output(out)
    on_interrupt(
        f"interrupted: rerun the same command to resume from the last checkpoint in {out}/trainer (saved after "
        "each validation; before the first one, the probe starts over)"
        if checkpoints
        else "interrupted: with --no-checkpoints a rerun of the same command starts the probe over"
    )
    from mathmix.signals import StoppedBySignal, exit_stopped

    try:
        summary = run_probe(model, prompts, out, config, bench_dir)
    except StoppedBySignal as stopped:  # SIGTERM/SIGUSR1 (a preemption): checkpointed
        exit_stopped(stopped)
    except ValueError as err:
        fail(str(err))
    console.print_json(json.dumps(summary["last_validation"]))
    console.print(f"validation log: {out}/validation.csv")


def register(app: typer.Typer) -> None:
    """Add the `eval` group to the root CLI: bench and rl-probe (here), forecast and compare
    (`evals.forecast_cli`), sweep and sweep-fit (`evals.sweep_cli`), in that order in --help."""
    from evals.forecast_cli import add_forecast_commands
    from evals.sweep_cli import add_sweep_commands

    add_forecast_commands(eval_app)
    add_sweep_commands(eval_app)
    app.add_typer(eval_app, name="eval")
