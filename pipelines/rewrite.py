"""Recipe stage `rewrite`: LLM branches from the curated corpus, one folder per task under RUN/branches/.

Writes RUN/branches/<task>/{data,rejects,raw,logs}/, <task>/summary.json and throughput.json per task, and
RUN/branches/summary.json last (all tasks together; docs_in counts each input document once per task).
`model: auto` builds a tiny random Llama in RUN/branches/_model: a plumbing-only model whose outputs are all
rejected by validation; set `model` to a real rewriter (local folder or hub name) for real branches.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

# former_default_forms: a stage record from before max_tokens defaults per task left out max_tokens 1024 and
# model_max_context 8192, the defaults then; a recipe that sets them so is that stage (runner.earlier_stage_identities)
from curate.decont_sources import as_when_training_splits_were_read
from curate.rewrite.identity import OPERATIONAL_SETTINGS, former_default_forms  # noqa: F401
from curate.rewrite.job import RewriteSettings, run_task
from curate.summary import write_summary
from pipelines.stages import StageContext

FOLDER = "branches"
# Left out of the recipe stage's record, as `mathmix rewrite` leaves them out of job.json: where and how fast it
# generates (retries, max_attempts, timeouts ...), not what.
OPERATIONAL_KEYS = OPERATIONAL_SETTINGS
# Recorded as the files they resolve to (`files_read`, with their digests), not as typed, as decont's benchmarks: a
# folder and its one file, or the same files in another order, are the same stage (pipelines.runner.stage_identity)
SETTINGS_AS_FILES = ("decont_benchmarks",)
# An earlier mathmix read decont_benchmarks folders whole, training splits too (see pipelines.decont.SUPERSEDED).
SUPERSEDED = (
    as_when_training_splits_were_read,
    "finished by an earlier mathmix that decontaminated against the training splits under its decont_benchmarks "
    "folders too: its branches also lack outputs quoting them (kept as finished; delete {out_dir} and the stages "
    "after it to redo it without)",
)
Task = Literal["refine", "qa", "longcot", "score"]


class Config(RewriteSettings):
    """Stage settings: the rewriter's settings plus which tasks to run and on what."""

    tasks: list[Task] = Field(default_factory=lambda: list[Task](["qa"]), min_length=1)
    inputs: list[str] | None = Field(
        None, description="input folders/files (default: the previous stage's data)"
    )
    task_inputs: dict[Task, list[str]] = Field(
        default_factory=dict, description="per-task inputs, e.g. longcot: ['{run_dir}/branches/qa']"
    )


def preflight(config: Config, run_dir: Path | str, plan: list[dict] | None = None) -> None:
    """What the stage reads that no earlier stage writes, checked by `mathmix run` before its first stage and in
    --dry-run, as `run_task` checks it: each task's prompt template and the decontamination benchmarks."""
    from curate.decont import validate_benchmarks
    from curate.rewrite.tasks import prompt_template

    for task in config.tasks:
        prompt_template(task, config.prompt_version)
    if config.decont_benchmarks:
        validate_benchmarks(_resolve(config.decont_benchmarks, Path(run_dir)), ngram=config.decont_ngram)


def files_read(
    config: Config, run_dir: Path | str, previous: Mapping[str, Path] | None = None
) -> dict[str, str]:
    """Files and folders the stage reads besides its inputs, whose contents the recipe stage's record holds (see
    pipelines.web.files_read): the decontamination benchmarks, each task's prompt template (`prompt TASK`), and a
    model in a local folder, or a hub name found in the local Hugging Face cache (`model_snapshot`: digested by the
    commit of its snapshot). A model retrained, another revision cached, a benchmark replaced or a template edited
    in place, left the finished stage "already complete" with old output."""
    from curate.decont_sources import benchmark_paths
    from curate.rewrite.tasks import prompt_key, prompt_path
    from mathmix.hub import cached_snapshot
    from pipelines.job_record import MODEL_SNAPSHOT

    found = benchmark_paths(_resolve(config.decont_benchmarks, Path(run_dir)))
    # each task's prompt template by its text: one edited in place left the stage "already complete"
    found |= {prompt_key(task): str(prompt_path(task, config.prompt_version)) for task in config.tasks}
    model = Path(config.model)  # as run_task reads it
    if config.model != "auto" and config.server != "endpoint":
        if model.is_dir():
            found["model"] = str(model.resolve())
        elif cached_snapshot(config.model):
            found[MODEL_SNAPSHOT] = config.model
    return found


def _resolve(paths: list[str], run_dir: Path) -> list[str]:
    """PATHS with `{run_dir}` expanded as the preflight and the stage both read them (`mathmix.paths.run_path`)."""
    from mathmix.paths import run_path

    return [run_path(p, run_dir) for p in paths]


def run_stage(config: Config, ctx: StageContext) -> dict[str, Any]:
    """Run each configured task in turn; return the combined summary."""
    start = time.time()
    settings = RewriteSettings(
        **config.model_dump(exclude={"tasks", "inputs", "task_inputs"}),
    ).model_copy(update={"decont_benchmarks": _resolve(config.decont_benchmarks, ctx.run_dir)})
    per_task: dict[str, Any] = {}
    for task in config.tasks:
        inputs = _resolve(config.task_inputs.get(task) or ctx.inputs, ctx.run_dir)
        if not inputs:
            raise ValueError(f"stages.rewrite: no inputs for task {task!r} (set inputs or task_inputs)")
        task_dir = ctx.out_dir / task
        summary_path = task_dir / "summary.json"
        if summary_path.is_file():  # finished on an earlier run: keep it
            import json

            per_task[task] = json.loads(summary_path.read_text())
            continue
        per_task[task] = run_task(
            inputs,
            task_dir,
            task,
            settings,
            ctx.executor,
            model_dir=ctx.out_dir / "_model",
            run_dir=ctx.run_dir,
        )
    dropped: Counter = Counter()
    for summary in per_task.values():
        dropped.update(summary["dropped"])
    overall = {
        "docs_in": sum(s["docs_in"] for s in per_task.values()),
        "docs_out": sum(s["docs_out"] for s in per_task.values()),
        "dropped": dict(sorted(dropped.items())),
        "seconds": round(time.time() - start, 2),
        "model": next(iter(per_task.values()))["model"],
        "tasks": {
            task: {k: s[k] for k in ("docs_in", "docs_out", "dropped")} for task, s in per_task.items()
        },
    }
    unaccounted = sum(s.get("unaccounted", 0) for s in per_task.values())
    if unaccounted:
        overall["unaccounted"] = unaccounted
    write_summary(ctx.out_dir, overall)
    return overall
