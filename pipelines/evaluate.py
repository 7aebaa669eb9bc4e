"""Recipe stage `eval`: few-shot math evals of the mid-trained model (RUN/train/export/ unless configured).

Writes RUN/eval/{benchmark}.json (accuracy and per-item records), RUN/eval/results.json and summary.json
(docs_in = docs_out = items evaluated; per-benchmark accuracies as extra keys). The defaults are sized for the
quickstart: 2-shot GSM8K and MATH500 over the sample's bench folder, 8 items each, 32 new tokens.
"""

from __future__ import annotations

import time
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


def _resolve(path: str, run_dir: Path) -> str:
    return path.replace("{run_dir}", str(run_dir))


def run_stage(config: Config, ctx: StageContext) -> dict[str, Any]:
    """Evaluate the model and write results into ctx.out_dir; summary.json last."""
    from evals.bench import print_results_table, run_bench
    from evals.benchmarks import parse_benchmarks

    start = time.time()
    model = _resolve(config.model, ctx.run_dir)
    data_dir = Path(_resolve(config.data_dir, ctx.run_dir))
    if "{run_dir}" in config.model or Path(model).is_absolute() or model.startswith("."):
        if not Path(model).exists():
            raise FileNotFoundError(
                f"eval stage: model folder {model} not found (run the train stage, or set model)"
            )
    if not data_dir.is_dir():
        raise FileNotFoundError(f"eval stage: benchmark folder {data_dir} not found (set data_dir)")
    # `suite:` alone names the benchmarks (benchmarks has a default, which used to win over it silently)
    given = "benchmarks" in config.model_fields_set or not config.suite
    plan = parse_benchmarks(config.suite, config.benchmarks if given else None)
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
