"""What an output folder holds apart from its job record: finished work (`has_progress`), files no command of
ours wrote (`foreign_files`), an input folder around it (`check_output_outside_inputs`), and clearing a job's
unfinished output before another job takes the folder (`take_over`).

Apart from `job_record` (which re-exports all of it) because these look at the folder's files, not the record.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any


def take_over(
    out: Path, written: Any, outputs: Collection[str], record_file: str, other: str, delete: bool = True
) -> None:
    """Clear what the job recorded in OUT wrote (nothing of it finished), before another job writes there.

    WRITTEN: the outputs that job's record lists, only those that did not exist when it started: nothing else is
    deleted (a user's files, a folder that held files before). Refused (ValueError, naming OTHER) while any of
    this job's OUTPUTS still holds files: new output would mix with files no record says are disposable.
    Refused too (ValueError naming the jobs) while Slurm jobs of an earlier submission for OUT are still queued or
    running: they write into the folders that would be cleared (a `tasks` edited while they ran lost their output,
    and their completion markers then made the new submission skip tasks).
    DELETE=False: only the refusal (a dry run).
    """
    import shutil

    from pipelines.slurm_queue import SlurmQueueError, writing_jobs

    try:
        live = writing_jobs(out)
    except SlurmQueueError as err:
        raise ValueError(
            f"{out} holds the submission of earlier Slurm jobs and the queue cannot be read ({err}), so whether "
            f"they still write into it is unknown; nothing was deleted. Rerun once squeue answers"
        ) from None
    if live:
        ids = " ".join(live)
        raise ValueError(
            f"{out} is still being written by Slurm jobs {ids} of an earlier submission (queued or running), "
            f"submitted for {other}; nothing was deleted. Wait for them to finish, or cancel them (scancel {ids}), "
            "then rerun"
        )
    names = [n for n in written if _plain_name(n, record_file)] if isinstance(written, list) else []
    left = [name for name in outputs if name not in names and _holds_files(out / name)]
    if left:  # refused before anything is deleted
        raise ValueError(
            f"{out} holds unfinished output of {other}: {', '.join(left)}, which its record does not list as its "
            f"own; delete {' and '.join(left)} (or the folder), or write to a new folder"
        )
    for name in names if delete else ():
        target = out / name
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)


def _plain_name(name: Any, record_file: str) -> bool:
    """A file or folder directly in OUT (a damaged record: never a path outside OUT, never the record itself)."""
    return isinstance(name, str) and name not in ("", ".", "..", record_file) and not {"/", "\\"} & set(name)


def _holds_files(path: Path) -> bool:
    if path.is_symlink() or path.is_file():
        return True
    return path.is_dir() and any(not p.is_dir() for p in path.rglob("*"))


def check_output_outside_inputs(
    out_dir: Path | str, inputs: Sequence[str | Path], what: str = "input", missing_is_folder: bool = False
) -> None:
    """ValueError when OUT is an input folder or lies inside one.

    A rerun would read OUT's own files as inputs, or refuse the input folder for the stage folder now in it.
    A file input in the same folder is fine: a rerun reads that file alone. MISSING_IS_FOLDER: an input that does
    not exist yet is a folder (checked before a run, where an earlier stage or the run itself will make it).
    """
    from mathmix.paths import expand_inputs

    out = Path(out_dir).expanduser().resolve()
    for raw in inputs:
        try:
            paths = expand_inputs([raw])
        except (OSError, ValueError):
            continue  # a glob that matches nothing: its reader names it
        for given in paths:
            folder = Path(given).resolve()
            is_folder = folder.is_dir() or (missing_is_folder and not folder.exists())
            if is_folder and (out == folder or folder in out.parents):
                raise ValueError(
                    f"{out_dir} is inside the {what} folder {given}: a rerun would find this output among the "
                    f"{what}s; write to a folder outside {given}"
                )


def has_progress(out_dir: Path) -> bool:
    """Whether OUT (or a folder in it) holds finished work: a summary, a datatrove completion marker, generation
    checkpoints or raw generations, training checkpoints or a finished training stage.

    A job that failed before finishing anything (a bad model path, say) may be rerun with other settings.
    """
    for pattern in ("summary.json", "*/summary.json", "**/completions/*", "**/checkpoints/**/*", "**/raw/*",
                    "**/done.json"):  # fmt: skip
        if any(p.is_file() for p in out_dir.glob(pattern)):
            return True
    return False


def stage_seconds(out_dir: Path, start: float, executor: Any = None) -> float:
    """A stage's seconds for its summary: since START (time.time()), or for a Slurm EXECUTOR that does not wait,
    whose tasks ran under earlier submissions, `submitted_seconds`."""
    import time

    seconds = time.time() - start
    if getattr(executor, "kind", "") == "slurm" and not getattr(executor, "wait", True):
        return submitted_seconds(out_dir, seconds)
    return seconds


def submitted_seconds(out_dir: Path, this_run: float, record_file: str = "job.json") -> float:
    """The seconds of a stage whose tasks ran in Slurm jobs submitted without waiting (`wait: false`), from its job
    record (written as the stage was first submitted) to its last task's completion marker: queue waits and the
    time between reruns count, as a waiting run's do. THIS_RUN (the rerun that writes the summary, which ran
    nothing itself and took under a second) where larger, or where OUT has no record or no completion marker."""
    record = Path(out_dir) / record_file
    try:
        began = record.stat().st_mtime
        ended = max(
            (p.stat().st_mtime for p in Path(out_dir).glob("**/completions/*") if p.is_file()), default=0.0
        )
    except OSError:
        return this_run
    return max(this_run, round(ended - began, 2)) if ended else this_run


def foreign_files(out_dir: Path | str, outputs: Collection[str]) -> list[str]:
    """The names in OUT that are none of OUTPUTS, what a command writes there (sorted); [] for no such folder."""
    out = Path(out_dir)
    if not out.is_dir():
        return []
    return sorted(p.name for p in out.iterdir() if p.name not in outputs)
