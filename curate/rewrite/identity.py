"""What a rewrite job is, as recorded in OUT/job.json: a rerun of another job into a folder with work is refused.

The identity holds the inputs (paths and sizes), the settings that change the output, the task, the
decontamination benchmarks and the task's prompt template with their contents (`file_digests`, as decont records
them) and, for a model in a local folder, a digest of its weights (for a hub name in the local Hugging Face cache,
its snapshot's commit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.job_record import JOB_FILE

# What a rewrite job writes in OUT: anything else there is not its own (`check_out_dir`).
OUTPUTS = ("data", "rejects", "raw", "checkpoints", "decont", "logs", "_model", "throughput.json", "summary.json",
           JOB_FILE, Path(JOB_FILE).with_suffix(".tmp").name)  # fmt: skip
# The one cap of every task before each got its own (`curate.rewrite.budget`), left out of records as the default:
# a record without max_tokens is a job of this cap.
OLD_MAX_TOKENS = 1024
# Settings whose default changed, by their default until then: a record left them out, so a job that sets them to
# that value is the job such a record describes (max_tokens by the cap the task gets: `what` holds it).
FORMER_DEFAULTS = {"max_tokens": OLD_MAX_TOKENS, "model_max_context": 8192}
# How a rerun may differ from the run it resumes: where and how fast it generates, not what.
OPERATIONAL_SETTINGS = {"server", "endpoint", "api_key_env", "max_concurrent", "request_timeout_s",
                        "server_ready_timeout_s", "retries", "retry_backoff_s", "max_attempts", "tp", "dp",
                        "cpu_threads", "corpus_docs", "gpu_output_tokens_per_s"}  # fmt: skip


def model_digest(settings: Any) -> str | None:
    """What identifies the weights the job generates with: a digest of a local model folder's weights, or the
    commit of the snapshot a hub name resolves to in the local Hugging Face cache. None for `auto` (built from the
    inputs, whose sizes are recorded), `server: endpoint` (no local weights: the endpoint serves what it serves)
    and a hub name not in the cache (the server fetches it; nothing here to digest yet).

    A folder: `pipelines.job_record.weights_digest`, each weight file's name and size (*.safetensors, *.bin, *.pt,
    ...) and 1 MiB from its start, middle and end. Not a hash of every byte: that would read a 16 GB model on every
    rerun; not sizes or mtimes alone: a model retrained or re-exported into the same folder has the same sizes,
    and a copy gets new mtimes. Weights replaced at the same path resumed the old run silently before this.
    A hub name: the snapshot's commit (`mathmix.hub.cached_snapshot`), not a digest of its files: it names every
    file of the revision (a new chat template or tokenizer too) and costs one small read; another revision
    downloaded into the cache (`refs/main` moved) used to resume the old run silently, as a new folder did.
    """
    from mathmix.hub import cached_snapshot
    from pipelines.job_record import weights_digest

    if settings.server == "endpoint" or settings.model == "auto":
        return None
    if Path(settings.model).is_dir():
        return weights_digest(settings.model)
    return cached_snapshot(settings.model)


def weights_note(settings: Any, identity: dict) -> dict[str, str]:
    """What summary.json says of the model's weights: {"model_digest": what the job record holds} when this run
    digested them, {"model_not_digested": why} when it could not ({} for `auto`, built from the inputs).

    Without it a job through an endpoint, or of a hub name the server fetched, read like one checked against its
    weights: a rerun cannot see a model changed behind that name.
    """
    from mathmix.hub import cached_snapshot

    if settings.model == "auto":
        return {}
    if settings.server == "endpoint":
        why = f"served by the endpoint {settings.endpoint}, whose weights cannot be read here"
    elif "model_digest" in identity and (Path(settings.model).is_dir() or cached_snapshot(settings.model)):
        return {"model_digest": identity["model_digest"]}
    else:
        where = "neither a local folder nor in the local Hugging Face cache"
        why = f"{settings.model} is {where} (the server fetches it)"
    if "model_digest" in identity:  # kept from an earlier run that had the weights here (rewrite_identity)
        why += "; job.json keeps the digest recorded by an earlier run"
    return {"model_not_digested": why}


def prompt_digest(task: str, version: str) -> dict[str, list]:
    """{"prompt": [template file, SIZE:SHA]}: a template edited in place kept its version, so a rerun took the old
    prompt's finished (and cached) answers for the new prompt's, without a word. `prompt`, not the recipe stage's
    `prompt TASK` (`pipelines.rewrite.files_read`): a job is of one task, and another task is named once, as
    `task: 'score' -> 'qa'` (and the other template's path)."""
    from curate.rewrite.tasks import prompt_path
    from pipelines.job_record import file_digest

    path = prompt_path(task, version)
    return {"prompt": [str(path), file_digest(path)]}


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

    A record without a model digest (from before digests were kept, before a hub name's snapshot was, or of a run
    through an endpoint) is this job with one when nothing else differs (the earlier form: it cannot tell which
    weights made the old output, so the ones found now are taken), and any other difference is named against it
    (not as `model_digest in one record only`); the record is rewritten with the digest. A job without one
    (through an endpoint: no local weights) keeps the recorded digest in its identity, so in the record: written
    without it, a later local run with other weights matched the record-from-before-digests form and resumed
    silently.
    Where both have one, a different digest is another job: `the model's weights changed (same path or hub name)`.
    """
    from pipelines.job_record import job_identity

    what = settings.model_dump(
        mode="json", exclude=OPERATIONAL_SETTINGS | {"decont_benchmarks"}, exclude_defaults=True
    )
    # the cap this task's requests get, whether set (one number, one per task) or the task's default fitted to
    # the model's context: unset, it was left out of the record, and a new default would resume an old job
    what["max_tokens"] = settings.sampling(task)["max_tokens"]
    from curate.decont_sources import benchmark_paths

    # the files read, sorted: a folder and its one file, or the same files in another order, are one job (the
    # recipe stage's record holds them so too); the typed list, resolved, is how records held them before
    typed = [str(Path(b).resolve()) for b in settings.decont_benchmarks]
    benchmarks = sorted(set(benchmark_paths(settings.decont_benchmarks).values())) or typed
    digests = {
        **benchmark_digests(settings.decont_benchmarks),
        **prompt_digest(task, settings.prompt_version),
    }
    identity = job_identity(
        inputs, what, run_dir, task=task, decont_benchmarks=benchmarks, file_digests=digests
    )
    digest = model_digest(settings)
    if digest is not None:
        identity["model_digest"] = digest
    recorded = _recorded(Path(out_dir) / JOB_FILE)
    if recorded is None or "model_digest" not in recorded:
        base = {k: v for k, v in identity.items() if k != "model_digest"}
        earlier = [base] if recorded is not None and digest is not None else []
    else:
        if digest is None:  # kept: no weights to see here, and a later local run is checked against them
            identity["model_digest"] = recorded["model_digest"]
        earlier = []
    if typed != benchmarks:
        earlier += [{**form, **_as_typed(typed, run_dir)} for form in (identity, *earlier)]
    earlier += former_default_forms(identity["settings"], [identity, *earlier])
    return identity, earlier


def former_default_forms(settings: dict, forms: list[dict]) -> list[dict]:
    """FORMS as a record from before would hold them: without the `FORMER_DEFAULTS` settings SETTINGS gives their
    former default (each alone, and all of them)."""
    keys = [k for k, v in FORMER_DEFAULTS.items() if settings.get(k) == v]
    drops = [{k} for k in keys] + ([set(keys)] if len(keys) > 1 else [])
    return [
        {**form, "settings": {k: v for k, v in form.get("settings", {}).items() if k not in drop}}
        for drop in drops
        for form in forms
    ]


def _as_typed(typed: list[str], run_dir: Path) -> dict:
    from pipelines.job_record import job_identity

    return {"decont_benchmarks": job_identity([], {}, run_dir, decont_benchmarks=typed)["decont_benchmarks"]}


def _recorded(path: Path) -> dict | None:
    import json

    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def check_out_dir(out_dir: Path, identity: dict, earlier: list[dict], run_dir: Path) -> None:
    """Record the job in OUT/job.json (`pipelines.job_record.check_job`), or ValueError when OUT is not this job's.

    Refused, as `classifier recall` refuses them: a folder with files a rewrite job does not write and no job
    record (they were written among: `check_foreign_files`), and another job's folder that holds its finished
    work (`has_progress`) or any file a rewrite job does not write (a recall round's domains.json: recall records
    no progress marker, so its folder was taken over, its job.json replaced). A rerun of this job into its own
    folder resumes.
    """
    from pipelines.job_record import check_foreign_files, check_job, foreign_files, has_progress

    check_foreign_files(out_dir, OUTPUTS, "rewrite")
    try:
        check_job(out_dir, identity, "rewrite", earlier=earlier, run_dir=run_dir,
                  progress=lambda out: has_progress(out) or bool(foreign_files(out, OUTPUTS)))  # fmt: skip
    except ValueError as err:
        if "settings.max_tokens: (default) ->" not in str(err):
            raise
        raise ValueError(
            f"{err}; it was made when every task's default max_tokens was {OLD_MAX_TOKENS}: --max-tokens "
            f"{OLD_MAX_TOKENS} (max_tokens: {OLD_MAX_TOKENS}) resumes it as it was"
        ) from None
