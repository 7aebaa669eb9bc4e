"""What wrote an output folder: its inputs and settings, recorded in OUT/job.json before any work starts.

datatrove skips a task whose completion marker exists, whatever the task read: rerunning into a folder with other
inputs, settings or task count would silently keep the old results (or mix them with new ones). A rerun of the
same job resumes; a different one is refused with the differences named.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from pipelines.file_digests import file_digest, input_size, weights_digest, yaml_digest
from pipelines.output_folder import (
    _holds_files,
    check_output_outside_inputs,
    foreign_files,
    has_progress,
    take_over,
)
from pipelines.record_compare import (
    LATER_FIELDS,
    LATER_FILE_DIGESTS,
    MODEL_SNAPSHOT,
    OUTPUTS_KEY,
    UNSEEN_FILE_DIGESTS,
    _closest_form,
    _older_record_of,
    _with_unseen_entries,
    describe_difference,
    without_settings,
)

# Moved out, still importable from here (callers across mathmix name them as job_record's): file_digests (sizes
# and digests of files read), record_compare (older records and differences), output_folder (a folder's files).
__all__ = [
    "JOB_FILE",
    "LATER_FIELDS",
    "LATER_FILE_DIGESTS",
    "MODEL_SNAPSHOT",
    "OUTPUTS_KEY",
    "SOURCE_ROOT",
    "UNSEEN_FILE_DIGESTS",
    "check_foreign_files",
    "check_job",
    "check_output_outside_inputs",
    "describe_difference",
    "file_digest",
    "foreign_files",
    "has_progress",
    "input_size",
    "job_identity",
    "model_job_identity",
    "take_over",
    "weights_digest",
    "without_settings",
    "yaml_digest",
]

JOB_FILE = "job.json"


def job_identity(
    inputs: Sequence[str | Path], config: Any, run_dir: Path | str | None = None, **extra: Any
) -> dict:
    """The inputs (absolute paths), the settings (a pydantic model or a dict) and any extra fields (e.g. tasks).

    Paths inside RUN_DIR are written as `{run_dir}/...`, so a run folder copied or moved elsewhere still resumes.
    """
    # Values left at their defaults are left out: a field added later (with a default) is not a different job.
    settings = (
        config.model_dump(mode="json", exclude_defaults=True)
        if hasattr(config, "model_dump")
        else dict(config)
    )
    identity = json.loads(json.dumps({"inputs": [str(Path(p).resolve()) for p in inputs], "settings": settings,
                                      **extra}, default=str))  # fmt: skip
    # The same paths with other contents (a stage redone elsewhere, a file replaced) are other inputs.
    if inputs:
        identity["input_sizes"] = [input_size(p) for p in inputs]
    if run_dir is None:
        return identity
    forms = sorted({str(Path(run_dir).resolve()), str(Path(run_dir))} - {"", "."}, key=len, reverse=True)

    def relative(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: relative(v) for k, v in value.items()}
        if isinstance(value, list):
            return [relative(v) for v in value]
        if isinstance(value, str):
            for form in forms:  # whole path parts only: /x/run2 is not inside /x/run
                if value == form or value.startswith(form.rstrip("/") + "/"):
                    return "{run_dir}" + value[len(form.rstrip("/")) :]
        return value

    return _shipped_files_by_place(relative(identity))


# mathmix's own files (a rewrite prompt template, a shipped train recipe) are recorded as {mathmix}/...: recorded
# by absolute path, a run folder resumed with another checkout or install of mathmix was refused over the path.
SOURCE_ROOT = Path(__file__).resolve().parent.parent


def _shipped_files_by_place(identity: dict[str, Any]) -> dict[str, Any]:
    """IDENTITY with the `file_digests` paths under SOURCE_ROOT written `{mathmix}/...`."""
    digests = identity.get("file_digests")
    if not isinstance(digests, dict):
        return identity
    root = str(SOURCE_ROOT).rstrip("/") + "/"

    def place(entry: Any) -> Any:
        if isinstance(entry, list) and entry and isinstance(entry[0], str) and entry[0].startswith(root):
            return ["{mathmix}/" + entry[0][len(root) :], *entry[1:]]
        return entry

    return {**identity, "file_digests": {k: place(v) for k, v in digests.items()}}


def model_job_identity(
    command: str,
    model: str | Path,
    inputs: Sequence[str | Path],
    settings: dict[str, Any],
    run_dir: Path | str | None = None,
) -> dict[str, Any]:
    """The identity of a job that reads MODEL: a local folder is an input (path, size) with a digest of its
    weights (`weights_digest`); a hub name is a setting (`model`). COMMAND names the job kind, so that another
    command's folder is told apart (`describe_difference`)."""
    local = Path(model).exists()
    settings = dict(settings) if local else {**settings, "model": str(model)}
    extra = {"model_digest": digest} if (digest := weights_digest(model)) else {}
    paths = [model, *inputs] if local else list(inputs)
    return job_identity(paths, settings, run_dir=run_dir, command=command, **extra)


def check_job(
    out_dir: Path | str,
    identity: dict[str, Any],
    what: str = "job",
    filename: str = JOB_FILE,
    progress: Callable[[Path], bool] | None = None,
    ignore: Collection[str] = (),
    outputs: Collection[str] = (),
    earlier: Sequence[dict[str, Any]] = (),
    run_dir: Path | str | None = None,
    write: bool = True,
) -> bool:
    """Record IDENTITY in OUT/job.json, or refuse (ValueError) when OUT holds the work of a different job.

    `progress(OUT)` says whether OUT holds finished work (default `has_progress`). `ignore`: settings an older
    record may hold that no longer make a job (`without_settings`). `earlier`: older forms of IDENTITY (before
    the command recorded its name, say): a record equal to one is this job, rewritten in today's form.
    `outputs`: the files and folders this job writes in OUT (`data`, `logs` ...); see `take_over`.
    `run_dir`: the folder IDENTITY's `{run_dir}/...` paths stand for (`job_identity`; default OUT's parent), named
    in a refusal by its path: the user gave paths, not the record's placeholder.
    A record that cannot be read (emptied, cut short, not a mapping) in a folder holding finished work is refused,
    naming it: taken as no record, it let any job adopt that work. `write=False` checks without writing or
    clearing anything (`mathmix run --dry-run`).
    Returns True when OUT already held the record of this very job (a rerun: its finished work may be kept),
    False when it was written now (or would be).
    """
    out, path = Path(out_dir), Path(out_dir) / filename
    previous: Any = None
    if path.is_file():
        try:
            previous = without_settings(json.loads(path.read_text()), ignore)
        except (OSError, ValueError) as err:
            previous, damage = None, str(err)
        else:
            damage = "" if isinstance(previous, dict) else "not a mapping"
        if damage and (progress or has_progress)(out):
            raise ValueError(
                f"{path} (the record of what wrote {out_dir}) cannot be read ({damage}), and {out_dir} holds "
                "finished work: delete the folder to start over, or restore the file"
            )
        if damage:  # nothing finished to protect: the record is written anew
            previous = None
    written = previous.pop(OUTPUTS_KEY, None) if isinstance(previous, dict) else None
    identity = _with_unseen_entries(previous, identity)
    if previous == identity:
        return True
    if isinstance(previous, dict) and any(_older_record_of(previous, form) for form in (identity, *earlier)):
        previous = None  # an older record of the same job: rewritten below with the new fields
    if previous is not None:
        difference = describe_difference(previous, _closest_form(previous, identity, earlier))
        difference = difference.replace("{run_dir}", str(Path(run_dir or out.parent).resolve()))
        difference = difference.replace("{mathmix}", str(SOURCE_ROOT))
        other = f"another job than this {what} ({difference})"
        if (progress or has_progress)(out):
            raise ValueError(
                f"{out_dir} holds the output of {other}; write to a new folder, or delete this one to start over"
            )
        take_over(out, written, outputs, filename, other, delete=write)
    if not write:
        return False
    # the outputs that hold nothing yet: only those are this job's to clear if another job takes OUT over
    record = (
        {**identity, OUTPUTS_KEY: [n for n in outputs if not _holds_files(out / n)]} if outputs else identity
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return False


def check_foreign_files(out_dir: Path | str, outputs: Collection[str], what: str) -> None:
    """ValueError when OUT has no job record and holds files other than OUTPUTS: the command would write among
    files it did not write (a rerun of the same job, with its record, is `check_job`'s to judge). WHAT names the
    command in the message: `holds files not written by WHAT (the first 5 names, ...)`."""
    if (Path(out_dir) / JOB_FILE).is_file():
        return
    others = foreign_files(out_dir, outputs)
    if others:
        more = ", ..." if len(others) > 5 else ""
        raise ValueError(
            f"{out_dir}: holds files not written by {what} ({', '.join(others[:5])}{more}); write to a new folder"
        )
