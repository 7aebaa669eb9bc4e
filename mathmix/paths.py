"""Input paths as users give them: stage folders, globs, `{run_dir}`.

A stage folder (one holding `data/`) means its `data/`: reading it whole would bring back what the stage dropped
(`rejects/`), its work files and its reports. A folder of stage folders (a run folder, RUN/branches) is refused,
naming them: read whole, it mixes every stage's output with every stage's rejects. Every command that reads
documents resolves inputs here.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

GLOB_CHARS = ("*", "?", "[")


STAGE_MARKS = ("summary.json", "job.json", "rejects", "logs")


def _written_by_a_stage(folder: Path) -> bool:
    """A mathmix stage folder: data/ and a stage's own files (a dataset's plain `x/data/` folder is not one)."""
    return (folder / "data").is_dir() and any((folder / mark).exists() for mark in STAGE_MARKS)


def stage_folders_in(folder: Path) -> list[str]:
    """The names of the stage folders directly inside FOLDER, sorted."""
    return sorted(child.name for child in folder.iterdir() if _written_by_a_stage(child))


class StageFoldersInside(ValueError):
    """A folder of stage folders was given where documents are read."""


def stage_data(path: str | Path) -> Path:
    """PATH/data when PATH is a stage folder (it holds a `data/` folder), else PATH.

    Raises:
        StageFoldersInside: PATH is not a stage folder but holds some (e.g. a run folder).
    """
    path = Path(path)
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
