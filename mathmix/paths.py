"""Input paths as users give them: stage folders, globs, `{run_dir}`.

A stage folder (one holding `data/`) means its `data/`: reading it whole would bring back what the stage dropped
(`rejects/`), its work files and its reports. A folder of stage folders (a run folder, RUN/branches) is refused,
naming them: read whole, it mixes every stage's output with every stage's rejects. Every command that reads
documents resolves inputs here.

A stage folder that a stage started (its job record or logs/) and has not finished (no `summary.json`: killed, still
running, or its Slurm jobs not done) is refused, and so is its `data/` given as it is: what it holds is part of the
stage's output, which a later stage read as if it were all of it. So is a document stage's folder that has no data/
yet (a dedup or decont killed after writing its work files): its work files are no corpus. So is anything inside a
run folder that another `mathmix run` is using (its `.mathmix-run.lock` held, `pipelines.run_lock`): its stages are
being written. A run's own stages read its earlier stages under its own lock, after they finished: neither refusal
applies to them.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

GLOB_CHARS = ("*", "?", "[")


STAGE_MARKS = ("summary.json", "job.json", "rejects", "logs")


def _written_by_a_stage(folder: Path) -> bool:
    """A mathmix stage folder: data/ and a stage's own files (a dataset's plain `x/data/` folder is not one)."""
    return (folder / "data").is_dir() and any((folder / mark).exists() for mark in STAGE_MARKS)


# A stage's records: a recipe stage's (pipelines.runner's recipe-stage.json and upstream.json, written before it
# starts) and a stage command's job record (pipelines.job_record's job.json, written before it starts)
STAGE_RECORDS = ("recipe-stage.json", "upstream.json", "job.json")


def holds_a_stage(folder: Path) -> bool:
    """FOLDER is a stage folder by its records: a recipe stage's or a stage command's, finished or not (a job
    record, or a summary.json beside data/). What `pipelines.runner.check_run_folder` asks of each folder above a
    run folder (its `_holds_a_stage`, which wants a command's summary.json too), and `cli_util.check_output` of
    each folder above a stage command's -o."""
    if any((folder / record).is_file() for record in STAGE_RECORDS):
        return True
    return (folder / "summary.json").is_file() and (folder / "data").is_dir()


def stage_folder_above(path: str | Path) -> Path | None:
    """The nearest folder above PATH (PATH itself left out) that is a stage folder (`holds_a_stage`); None if
    none. Output written there lands among that stage's files: inside its data/, every later reader of the stage
    reads it as the stage's output."""
    path = Path(path).expanduser().absolute()
    return next((folder for folder in path.parents if holds_a_stage(folder)), None)


def stage_folders_in(folder: Path) -> list[str]:
    """The names of the stage folders directly inside FOLDER, sorted."""
    return sorted(child.name for child in folder.iterdir() if _written_by_a_stage(child))


class StageFoldersInside(ValueError):
    """A folder of stage folders was given where documents are read."""


class StageNotReadable(StageFoldersInside):
    """A stage folder that cannot be read now: it has not finished, or a run that is using its run folder is
    writing it. A StageFoldersInside, so that each reader that turns that refusal into its own error (an
    InputError of the classifier's) says these the same way."""


def run_folder_in_use(path: str | Path) -> str | None:
    """Why PATH cannot be read or written now, where it is (or lies inside) a run folder whose lock
    (`pipelines.run_lock`, RUN/.mathmix-run.lock) another process holds: a line naming the run folder and the
    holder as its lock file names it; None where no such lock is held (none there, a file left by a killed run,
    one this process holds: a run reading its own stages).

    Only looks: a non-blocking shared `flock`, dropped at once, takes nothing from the holder. A file system
    without `flock` says nothing (the run itself then runs unguarded, with a warning).
    """
    from pipelines.run_lock import other_holder

    held = other_holder(Path(path).expanduser().absolute())
    return f"run folder {held[0]} is in use by a mathmix run ({held[1]})" if held else None


# What a stage writes as it starts: its record (a stage command's job.json, a recipe stage's recipe-stage.json and
# upstream.json, each written before any work) and datatrove's logs/; its summary.json comes last, when it finished
STARTED_MARKS = ("job.json", "recipe-stage.json", "upstream.json", "logs")


def _started_unfinished(stage: Path) -> bool:
    """STAGE (a folder holding data/) was started by a stage and has not finished: it holds what a stage writes
    as it starts, and no summary.json. A folder without any of it (a dataset's `NAME/data/`, a hand-made copy of a
    stage's data/ and rejects/) is read as it is."""
    return (
        (stage / "data").is_dir()
        and not (stage / "summary.json").is_file()
        and any((stage / mark).exists() for mark in STARTED_MARKS)
    )


def _document_stage_record(folder: Path) -> bool:
    """FOLDER holds the record of a stage that writes documents: a recipe stage's recipe-stage.json, or a job.json
    as `pipelines.job_record` writes it for a stage command whose outputs include data/ (web, dedup, decont; its
    `outputs` name what it writes). A job.json of another form (`{}`, a training stage's) is no such record."""
    if (folder / "recipe-stage.json").is_file():
        return True
    try:
        record = json.loads((folder / "job.json").read_text())
    except (OSError, ValueError):
        return False
    outputs = record.get("outputs") if isinstance(record, dict) else None
    return isinstance(outputs, list) and "data" in outputs and "inputs" in record and "settings" in record


def _failed_before_data(folder: Path) -> bool:
    """FOLDER (no data/ nor summary.json) is a stage that has not written its output: it holds a stage's record
    (job.json, recipe-stage.json) and nothing but what a stage writes as it starts (logs/, rejects/), a stage that
    failed before it wrote any output (a `mathmix web` refused at its first task; read as a corpus, it was `no
    .parquet or .jsonl files in ...`); or a document stage's record (`_document_stage_record`) whatever else it
    holds: a dedup or decont killed after writing its work files (work/, contamination.jsonl), read as a corpus,
    gave those files as the input."""
    if not folder.is_dir() or (folder / "summary.json").exists():
        return False
    if not any((folder / mark).is_file() for mark in ("job.json", "recipe-stage.json")):
        return False
    if all(child.name in (*STARTED_MARKS, "rejects", "job.tmp") for child in folder.iterdir()):
        return True
    return _document_stage_record(folder)


def _check_readable(path: Path) -> None:
    """StageNotReadable where PATH lies in a run folder in use, or is (the data/ of) a stage folder that has not
    finished."""
    if busy := run_folder_in_use(path):
        raise StageNotReadable(
            f"{path}: {busy}, which is still writing it; wait for that run to end (or end it), then rerun"
        )
    stage = path if (path / "data").is_dir() else path.parent if path.name == "data" else None
    if stage is not None and _started_unfinished(stage):
        held = "its data/ holds part of its output"
    elif stage is None and _failed_before_data(path):
        stage, held = path, "it holds no output yet"
    else:
        return
    raise StageNotReadable(
        f"{path}: the stage in {stage} has not finished (no summary.json), so {held}; finish it first: rerun the "
        "command that makes it"
    )


def stage_data(path: str | Path) -> Path:
    """PATH/data when PATH is a stage folder (it holds a `data/` folder), else PATH.

    Raises:
        StageFoldersInside: PATH is not a stage folder but holds some (e.g. a run folder).
        StageNotReadable (a StageFoldersInside): PATH is (the data/ of) a stage folder that has not finished (no
            summary.json), or lies in a run folder that another mathmix run is using (`run_folder_in_use`).
    """
    path = Path(path)
    _check_readable(path)
    if not path.is_dir():
        return path
    if (path / "data").is_dir():
        return path / "data"
    stages = stage_folders_in(path)
    if stages:
        shown = ", ".join(stages[:8]) + (", ..." if len(stages) > 8 else "")
        raise StageFoldersInside(
            f"{path} holds stage folders ({shown}): read whole it would mix every stage's output and rejects; "
            f"give the stage(s) to read, e.g. {path / stages[-1]}"
        )
    return path


def run_path(text: str, run_dir: str | Path) -> str:
    """TEXT (a path in a recipe) with `{run_dir}` replaced by RUN_DIR, and each `..` that follows a folder that does
    not exist yet taken lexically (`os.path.normpath`'s way).

    The kernel cannot follow `RUN/..` before RUN is made: `{run_dir}/../bench` (a folder beside the run folder) was
    "not found" in the checks made before a first run's first stage, though the stage, run once the run folder
    exists, reads it. A folder that does not exist is no symlink, so once made, its `..` is the folder above it:
    the same path the stage reads. A `..` after a folder that exists is left to the kernel (after a symlink it is
    not the folder above it)."""
    text = text.replace("{run_dir}", str(run_dir))
    path = Path(text)
    if ".." not in path.parts:
        return text
    out = Path(path.parts[0])
    for part in path.parts[1:]:
        missing = not out.exists() and not out.is_symlink()
        out = out.parent if part == ".." and missing and out.name not in ("", "..") else out / part
    return str(out)


def expand_inputs(patterns: Iterable[str | Path], run_dir: str | Path | None = None) -> list[str]:
    """`~` and `{run_dir}` substituted and globs expanded (sorted); a glob that matches nothing is an error naming it.

    Paths without glob characters are returned as given (their callers report a missing one).
    """
    out: list[str] = []
    for raw in patterns:
        text = os.path.expanduser(str(raw))  # recipes are not expanded by a shell
        if run_dir is not None:
            text = text.replace("{run_dir}", str(run_dir))
        if any(ch in text for ch in GLOB_CHARS) and not Path(text).exists():
            matches = sorted(glob.glob(text, recursive=True))
            if not matches:
                raise FileNotFoundError(f"{text}: no file matches this pattern")
            out += matches
        else:
            out.append(text)
    return out


PathT = TypeVar("PathT", str, Path)


def unique_files(files: Iterable[PathT]) -> list[PathT]:
    """FILES in order, each file once (overlapping globs, a folder and a file inside it): read twice, a file
    would put every document in the output twice under the same id."""
    seen: set[Path] = set()
    out: list[PathT] = []
    for f in files:
        key = Path(f).resolve()
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
