"""Input paths as users give them: stage folders, globs, `{run_dir}`.

A stage folder (one holding `data/`) means its `data/`: reading it whole would bring back what the stage dropped
(`rejects/`), its work files and its reports. Every command that reads documents resolves inputs here.
"""

from __future__ import annotations

import glob
from collections.abc import Iterable
from pathlib import Path

GLOB_CHARS = ("*", "?", "[")


def stage_data(path: str | Path) -> Path:
    """PATH/data when PATH is a stage folder (it holds a `data/` folder), else PATH."""
    path = Path(path)
    return path / "data" if path.is_dir() and (path / "data").is_dir() else path


def expand_inputs(patterns: Iterable[str | Path], run_dir: str | Path | None = None) -> list[str]:
    """`{run_dir}` substituted and globs expanded (sorted); a glob that matches nothing is an error naming it.

    Paths without glob characters are returned as given (their callers report a missing one).
    """
    out: list[str] = []
    for raw in patterns:
        text = str(raw)
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
