"""Checks `mathmix run` makes of every stage before the first one runs (and in --dry-run): files a stage reads that
exist before the run (web's math model, shards' tokenizer), and each stage's output folder against its inputs.

Each was checked only when its stage was reached: a bad tokenizer after hours of dedup, a stage folder inside its
own input folder after the stages before it ran. A path an earlier stage of the same recipe writes (inside its
output folder) is left to that stage: it may not exist yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def written_by_earlier_stage(path: str | Path, plan: Sequence[dict[str, Any]] | None, stage: str) -> bool:
    """Whether PATH lies in the output folder of a stage that PLAN (the runner's steps) runs before STAGE."""
    target = Path(path).expanduser().resolve()
    for step in plan or []:
        if step["stage"] == stage:
            return False
        folder = Path(step["output"]).expanduser().resolve()
        if target == folder or folder in target.parents:
            return True
    return False


def check_math_model(path: str | Path) -> None:
    """`_check_math_model`, done once per file version in a process: `mathmix web` and `mathmix run` check before
    the run and again where the stage starts, and a large fastText model takes seconds to load."""
    try:
        stat = Path(path).stat()
        version = (str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)
    except OSError:
        _check_math_model(path)  # names the missing file
        return
    if version not in _CHECKED_MODELS:
        _check_math_model(path)
        _CHECKED_MODELS.add(version)


_CHECKED_MODELS: set[tuple[str, int, int]] = set()


def _check_math_model(path: str | Path) -> None:
    """ModelError (a ValueError) unless PATH loads as the math classifier the web stage scores with: a file, a
    fastText model, with the math labels, and the card it was trained with (as `mathmix classifier score`
    loads it). The scoring step loads its model lazily, at the first page it scores: a bad one failed inside a
    datatrove task with OUT half-written, or never (no page reached it) and the run was recorded as scored."""
    from classifiers.model import MathClassifier, ModelError

    if Path(path).is_dir():
        raise ModelError(
            f"{path}: is a folder; the math model is a fastText model file (`mathmix classifier train`)"
        )
    if not Path(path).exists():
        raise ModelError(f"{path}: no such model file (a fastText model from `mathmix classifier train`)")
    MathClassifier(path)


def check_tokenizer(name_or_path: str) -> None:
    """FileNotFoundError or ValueError where NAME_OR_PATH is a path `shards build` cannot load a tokenizer from: one
    that does not exist (a name written as a path: `/x`, `./x`, `~/x`, `a/b/c`), or a folder with neither
    tokenizer.json nor tokenizer_config.json. Its contents are the stage's to read (a finished stage's are in its
    record); a hub name is left to the stage too (it may be fetched then)."""
    path = Path(name_or_path)  # not expanded: the stage does not expand `~` either (it looked a hub name up)
    if path.is_dir() and not any(
        (path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")
    ):
        raise ValueError(f"{name_or_path}: no tokenizer.json or tokenizer_config.json in this folder")
    if not path.exists() and (name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") > 1):
        tilde = " (`~` is not expanded here: write the full path)" if name_or_path.startswith("~") else ""
        raise FileNotFoundError(f"tokenizer not found: {name_or_path}: no such file or folder{tilde}")


def check_output_outside_inputs(step: dict[str, Any]) -> None:
    """ValueError when STEP's (a runner step's) output folder is one of its inputs or lies inside one (`output_dir:
    X` with `web: {inputs: [X]}`), as the stage itself refuses it when it runs. An input that does not exist yet
    is a folder the run will make, where the output lies inside it."""
    from pipelines.output_folder import check_output_outside_inputs as check

    check(step["output"], step["inputs"], missing_is_folder=True)
