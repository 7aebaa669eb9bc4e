"""What a rewrite job is, as recorded in OUT/job.json: a rerun of another job into a folder with work is refused.

The identity holds the inputs (paths and sizes), the settings that change the output, the task, the
decontamination benchmarks with their contents (`file_digests`, as decont records them) and, for a model in a
local folder, a digest of its weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.job_record import JOB_FILE

# How a rerun may differ from the run it resumes: where and how fast it generates, not what.
OPERATIONAL_SETTINGS = {"server", "endpoint", "api_key_env", "max_concurrent", "request_timeout_s",
                        "server_ready_timeout_s", "retries", "retry_backoff_s", "max_attempts", "tp", "dp",
                        "cpu_threads", "corpus_docs", "gpu_output_tokens_per_s"}  # fmt: skip


def model_digest(settings: Any) -> str | None:
    """A digest of the weights of the local model folder the job generates with; None for `auto` (built from the
    inputs, whose sizes are recorded), a hub name (no folder here) and `server: endpoint` (no local weights).

    `pipelines.job_record.weights_digest`: each weight file's name and size (*.safetensors, *.bin, *.pt, ...) and
    1 MiB from its start, middle and end. Not a hash of every byte: that would read a 16 GB model on every rerun;
    not sizes or mtimes alone: a model retrained or re-exported into the same folder has the same sizes, and a
    copy gets new mtimes. Weights replaced at the same path resumed the old run silently before this was recorded.
    """
    from pipelines.job_record import weights_digest

    if settings.server == "endpoint" or settings.model == "auto":
        return None
    return weights_digest(settings.model)


def benchmark_digests(paths: list[str]) -> dict[str, list]:
    """{"benchmark NAME": [file, SIZE:SHA]} of the benchmark files a job decontaminates against: a benchmark file
    replaced at the same path resumed the old job, whose kept documents were checked against the old problems.
    Empty while a path is missing (the job's own check names it)."""
    from curate.decont_sources import benchmark_paths
    from pipelines.job_record import file_digest

    return {what: [path, file_digest(path)] for what, path in benchmark_paths(paths).items()}


def rewrite_identity(
    inputs: list[str], settings: Any, task: str, run_dir: Path, out_dir: Path
) -> tuple[dict, list[dict]]:
    """(identity, earlier forms for `check_job`).

    A record without a model digest (from before digests were kept, or of a run through an endpoint) is this job
    with one when nothing else differs (the earlier form), and any other difference is named against it (not as
    `model_digest in one record only`); the record is rewritten with the digest. A job without one (through an
    endpoint: no local weights) keeps the recorded digest in its identity, so in the record: written without it,
    a later local run with other weights matched the record-from-before-digests form and resumed silently.
    Where both have one, a different digest is another job: `the model's weights changed (same path)`.
    """
    from pipelines.job_record import job_identity

    what = settings.model_dump(
        mode="json", exclude=OPERATIONAL_SETTINGS | {"decont_benchmarks"}, exclude_defaults=True
    )
    benchmarks = [str(Path(b).resolve()) for b in settings.decont_benchmarks]  # as files, not as typed
    extra = {"file_digests": digests} if (digests := benchmark_digests(settings.decont_benchmarks)) else {}
    identity = job_identity(inputs, what, run_dir, task=task, decont_benchmarks=benchmarks, **extra)
    digest = model_digest(settings)
    if digest is not None:
        identity["model_digest"] = digest
    recorded = _recorded(Path(out_dir) / JOB_FILE)
    if recorded is None or "model_digest" not in recorded:
        base = {k: v for k, v in identity.items() if k != "model_digest"}
        return identity, [base] if recorded is not None and digest is not None else []
    if digest is None:  # kept: no weights to see here, and a later local run is checked against them
        identity["model_digest"] = recorded["model_digest"]
    return identity, []


def _recorded(path: Path) -> dict | None:
    import json

    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
