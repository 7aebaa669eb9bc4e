"""Recipe stage `eval`: few-shot math evals of the mid-trained model (RUN/train/export/ unless configured).

Writes RUN/eval/{benchmark}.json (accuracy and per-item records), RUN/eval/results.json and summary.json
(docs_in = docs_out = items evaluated; per-benchmark accuracies as extra keys). The defaults are sized for the
quickstart: 2-shot GSM8K and MATH500 over the sample's bench folder, 8 items each, 32 new tokens.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from curate.summary import write_summary
from pipelines.stages import StageContext

FOLDER = "eval"
PRODUCES_DOCUMENTS = False
READS = "the model named in the block, the benchmark folder"  # what --dry-run shows


class Config(BaseModel):
    """Settings of the eval stage; `{run_dir}` in a path means the run folder."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field("{run_dir}/train/export", description="HF model folder (or hub name) to evaluate")
    data_dir: str = Field(
        "{run_dir}/sample/bench", description="benchmark folder (same layout as shared/data/bench)"
    )
    suite: str | None = Field(
        None, description="named suite (octothinker, quick); used where `benchmarks` is not set in the recipe"
    )
    benchmarks: str | None = Field("gsm8k:2,math500:2", description="NAME[:SHOTS],... evaluated")
    limit: int | None = Field(8, ge=1, description="items per benchmark (None: all)")
    max_new_tokens: int = Field(32, ge=1)
    zero_shot: bool = False
    prompt_file: str | None = None
    backend: str = Field("auto", description="auto | vllm | transformers")
    batch_size: int = Field(8, ge=1)
    seed: int = 0


def _resolve(path: str, run_dir: Path | str) -> str:
    """PATH with `{run_dir}` expanded as the preflight and the stage both read it (`mathmix.paths.run_path`)."""
    from mathmix.paths import run_path

    return run_path(path, run_dir)


def _benchmarks(config: Config) -> list[tuple[str, int]]:
    """[(benchmark, shots)] the stage evaluates: `suite:` alone names them (benchmarks has a default, which used to
    win over it silently)."""
    from evals.benchmarks import parse_benchmarks

    given = "benchmarks" in config.model_fields_set or not config.suite
    return parse_benchmarks(config.suite, config.benchmarks if given else None)


def preflight(config: Config, run_dir: Path | str, plan: list[dict] | None = None) -> None:
    """What the stage reads that no earlier stage writes, checked by `mathmix run` before its first stage and in
    --dry-run: the benchmark folder and the suite or benchmark list (the model may be the train stage's)."""
    data_dir = Path(_resolve(config.data_dir, run_dir))
    if not data_dir.is_dir():
        raise FileNotFoundError(f"eval stage: benchmark folder {data_dir} not found (set data_dir)")
    _benchmarks(config)


def files_read(
    config: Config, run_dir: Path | str, previous: Mapping[str, Path] | None = None
) -> dict[str, str]:
    """Files the stage reads, whose contents the recipe stage's record holds (see pipelines.web.files_read): the
    model (a local folder by a sample of its weights, as the eval job's own record holds it; a hub name by its
    snapshot in the local Hugging Face cache, `model_snapshot`, as rewrite's), each benchmark file of `data_dir` it
    evaluates on or takes exemplars from (named as decont names them: `benchmark gsm8k/test`), and the prompt file.
    Left out, a model re-exported outside the recipe, or a benchmark file replaced, left the stage "already
    complete" with the old accuracies. Benchmarks that cannot be named are left to the stage to refuse."""
    from evals.benchmarks import BENCHMARKS, find_test_file
    from mathmix.hub import cached_snapshot
    from pipelines.job_record import MODEL_SNAPSHOT

    found: dict[str, str] = {}
    model = _resolve(config.model, run_dir)
    if Path(model).is_dir():  # as run_bench loads it
        found["model"] = str(Path(model).resolve())
    elif cached_snapshot(model):
        found[MODEL_SNAPSHOT] = model
    data_dir = Path(_resolve(config.data_dir, run_dir))
    try:
        plan = _benchmarks(config)
    except ValueError:
        plan = []
    shots = [(name, 0 if config.zero_shot else n) for name, n in plan]
    for name, n in shots:
        read = [find_test_file(name, data_dir)]
        if n > 0 and not config.prompt_file:  # exemplars from the training split (load_exemplars)
            read += [next((data_dir / c for c in BENCHMARKS[name].train if (data_dir / c).exists()), None)]
        for path in (p for p in read if p is not None and p.is_file()):
            found[f"benchmark {path.relative_to(data_dir).with_suffix('').as_posix()}"] = str(path.resolve())
    if config.prompt_file and any(n > 0 for _, n in shots):
        found["prompt_file"] = str(Path(_resolve(config.prompt_file, run_dir)).resolve())
    return found


def inputs_read(
    config: Config, run_dir: Path | str, inputs: list[str], previous: Mapping[str, Path]
) -> list[str]:
    """The model folder (a local one), the benchmark folder and the prompt file, as the eval job's own record
    holds them (evals.bench.bench_identity), which the recipe stage's record holds with their sizes in place of
    INPUTS, the recipe's (the previous document stage's data/, which eval does not read)."""
    model = _resolve(config.model, run_dir)
    prompt = [_resolve(config.prompt_file, run_dir)] if config.prompt_file else []
    return [*([model] if Path(model).exists() else []), _resolve(config.data_dir, run_dir), *prompt]


def run_stage(config: Config, ctx: StageContext) -> dict[str, Any]:
    """Evaluate the model and write results into ctx.out_dir; summary.json last."""
    from evals.bench import print_results_table, run_bench

    start = time.time()
    model = _resolve(config.model, ctx.run_dir)
    data_dir = Path(_resolve(config.data_dir, ctx.run_dir))
    if "{run_dir}" in config.model or Path(model).is_absolute() or model.startswith("."):
        if not Path(model).exists():
            raise FileNotFoundError(
                f"eval stage: model folder {model} not found (run the train stage, or set model)"
            )
    preflight(config, ctx.run_dir)
    plan = _benchmarks(config)
    prompt_file = Path(_resolve(config.prompt_file, ctx.run_dir)) if config.prompt_file else None
    results = run_bench(
        model,
        plan,
        data_dir,
        ctx.out_dir,
        limit=config.limit,
        zero_shot=config.zero_shot,
        prompt_file=prompt_file,
        seed=config.seed,
        max_new_tokens=config.max_new_tokens,
        backend=config.backend,
        batch_size=config.batch_size,
        run_dir=ctx.run_dir,
    )
    print_results_table(results)
    items = sum(row["n"] for row in results["benchmarks"].values())
    summary = {
        "docs_in": items,
        "docs_out": items,
        "dropped": {},
        "seconds": round(time.time() - start, 2),
        "model": model,
        "backend": results["backend"],
        **{f"accuracy_{name}": round(row["accuracy"], 4) for name, row in results["benchmarks"].items()},
        "skipped_benchmarks": ",".join(sorted(results["skipped"])),
    }
    write_summary(ctx.out_dir, summary)
    return summary
