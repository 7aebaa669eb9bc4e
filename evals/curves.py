"""Reading RL validation curves: CSV exports (a `Step` column, one column per run) and the probe's own logs.

Two layouts are read the same way: Weights & Biases exports like `../shared/data/rl_curves/*/acc_*.csv`
(`Step`, then per run `NAME - metric`, `NAME - metric__MIN`, `NAME - metric__MAX`) and the RL probe's
`validation.csv` (`Step`, `rollouts`, `heldout_mean@n`, `math500`, `mean_response_length`, ...).
"""

from __future__ import annotations

import csv
import fnmatch
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evals.curve_columns import SCALES as SCALES  # re-exported: moved there
from evals.curve_columns import column_matches as column_matches
from evals.curve_columns import column_unit as column_unit
from evals.curve_columns import is_accuracy_column, is_probe_tracked, non_accuracy_word
from evals.curve_columns import metric_part as metric_part

# Columns that are never a curve of their own: W&B's min/max bands and bookkeeping, in any case (`__min` bands
# written by a script that lower-cased the header were forecast as runs and pooled with them).
_SKIP_SUFFIXES = ("__min", "__max", "__step")
# Names that are a compute axis, not a run, whatever the file's chosen axis (`_step`: W&B's run.history() step).
_COMPUTE_NAMES = ("step", "_step", "compute")
# A column without a name is a row index (pandas' to_csv writes one as "", read back and written again as
# "Unnamed: 0"): it rises 0, 1, 2, ... and was forecast as a run in percent, and pooled with the real runs.
_UNNAMED_RE = re.compile(r"\s*(?:Unnamed: \d+)?\s*")

# What a CSV without a Step column is told (`forecast` takes another compute axis; compare and sweep-fit do not).
STEP_HINT = "--compute-column NAME uses one of them as compute"


@dataclass
class Curve:
    """One run's validation metric against compute (steps unless a compute column is chosen).

    `unit`: the range the metric lives in ((0, 1) fractions, (0, 100) percentages, (-1, 1) rewards), set from
    the whole column as read from its file (`column_unit`); None leaves it to the fitted points (`value_range`).
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    source: str = ""
    unit: tuple[float, float] | None = None


def run_folder(curve: Curve) -> str | None:
    """The probe run folder a curve was read from (its `validation.csv`'s folder); None for other CSVs.

    A probe's columns are named after the metric (`heldout_mean@4`), not the run: its folder is the run.
    """
    source = Path(curve.source)  # resolved: `probe` and `/abs/probe` are one folder
    return str(source.resolve().parent) if source.name == "validation.csv" else None


def curve_key(curve: Curve) -> tuple:
    """What makes two curves one run: a W&B run exported to several files has the same name and values in each;
    probe runs are told apart by their folder (two probes may log the same column name and values)."""
    return (curve.name, tuple(np.round(curve.y, 9)), run_folder(curve))


def first_of_each(curves: list[Curve]) -> list[int]:
    """Indices of the first curve of each `curve_key`, in order (a run exported twice counts once)."""
    seen: set[tuple] = set()
    kept = []
    for i, curve in enumerate(curves):
        key = curve_key(curve)
        if key not in seen:
            seen.add(key)
            kept.append(i)
    return kept


def _float(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if np.isfinite(number) else None


def _examples(cells: list[str], shown: int = 3) -> str:
    """The first few of CELLS, then how many more."""
    return ", ".join(cells[:shown]) + (f", ... {len(cells) - shown} more" if len(cells) > shown else "")


def read_curves_csv(
    path: Path | str,
    compute_column: str | None = None,
    accuracy_only: bool = True,
    report: Callable[[str], None] | None = None,
    step_hint: str = STEP_HINT,
) -> list[Curve]:
    """Read every run column of a curve CSV; empty cells (runs of different lengths) are skipped.

    Args:
        path: CSV with a `Step` column (any case) and one column per run; a file without one is a ValueError
            unless `compute_column` names the column to use.
        compute_column: column to use as compute instead of the step (e.g. `compute`, `tokens`).
        accuracy_only: keep only columns that look like accuracies (see `is_accuracy_column`).
        report: called with a line for each column that holds no number, for each run with cells that are not
            a number (left out; empty cells are not reported: runs of different lengths leave them), for rows
            whose compute is not a number, for rows whose compute is negative (left out: the fit would take
            them as compute 0), for columns named as an earlier one (read as `NAME (2)`, ...), and for each run
            given two values at one step (they are averaged: the run is a function of compute).
        step_hint: what the error for a file without a Step column tells the user to do.
    """
    path = Path(path)
    rows = _csv_rows(path)
    if not any(
        any(cell.strip() for cell in row) for row in rows
    ):  # an empty file (or blank lines) was silent
        if report is not None:
            report(f"skipped {path}: empty file")
        return []
    # names without their surrounding spaces (` Step , runA `): a run named " runA " in the table and --json
    rows[0] = header = [h.strip() for h in rows[0]]
    lower = [h.lower() for h in header]
    wanted = (compute_column or "step").strip().lower()
    x_index = _compute_index(path, header, compute_column, step_hint)
    if not any(any(cell.strip() for cell in row) for row in rows[1:]):
        if report is not None:  # an export cut after its header was silent in a folder of CSVs
            report(f"skipped {path}: a header and no rows")
        return []
    # each row's step (or compute), parsed once: None where the row has no such cell or it is not a number
    xs = [_float(row[x_index]) if x_index < len(row) else None for row in rows[1:]]
    if report is not None:
        _report_bad_compute(path, rows, xs, x_index, report)
    unnamed = [j for j, name in enumerate(header) if j != x_index and _UNNAMED_RE.fullmatch(name)]
    filled = [j for j in unnamed if any(j < len(row) and row[j].strip() for row in rows[1:])]
    if filled and report is not None:  # an empty column (a trailing comma) is not worth a line
        listed = ", ".join(repr(header[j]) for j in filled)
        columns = "column" if len(filled) == 1 else "columns"
        report(f"skipped {columns} {listed} ({path}): no name (a row index, as pandas' to_csv writes)")
    read = [
        j
        for j, name in enumerate(header)
        if j != x_index
        and j not in unnamed
        and not lower[j].endswith(_SKIP_SUFFIXES)
        and lower[j] not in (*_COMPUTE_NAMES, wanted)  # the chosen axis is never a run, whatever its case
        and (not accuracy_only or is_accuracy_column(name))
    ]
    names = _distinct_names(header, read, path, report)
    curves = []
    for j in read:
        curve = _column_curve(path, rows, xs, x_index, j, names[j], report)
        if curve is not None:
            curves.append(curve)
    return curves


def _csv_rows(path: Path) -> list[list[str]]:
    """The rows of a CSV file; a file that cannot be read as one is a ValueError saying why."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:  # -sig: a BOM would hide the Step column
            return list(csv.reader(handle))
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text (expected a CSV)") from None
    except csv.Error as err:
        raise ValueError(f"{path}: not a readable CSV ({err})") from None
    except OSError as err:  # unreadable (permissions), a folder named *.csv, a broken link
        raise ValueError(f"{path}: cannot be read ({err.strerror or err})") from None


def _compute_index(path: Path, header: list[str], compute_column: str | None, step_hint: str) -> int:
    """The index of the compute column (the Step column unless COMPUTE_COLUMN names one); a ValueError where there
    is none, or where the file is not comma-separated."""
    for sep, word in ((";", "semicolons"), ("\t", "tabs")):
        if len(header) == 1 and sep in header[0]:
            raise ValueError(f"{path}: separated by {word}, not commas (export it as a comma-separated CSV)")
    lower = [h.strip().lower() for h in header]
    wanted = (compute_column or "step").strip().lower()
    if wanted not in lower:
        found = ", ".join(header[:8]) + (", ..." if len(header) > 8 else "")
        if compute_column:
            raise ValueError(f"{path}: no compute column {compute_column!r} (columns: {found})")
        raise ValueError(f"{path}: no Step column (columns: {found}); {step_hint}")
    return lower.index(wanted)


def _report_bad_compute(
    path: Path, rows: list[list[str]], xs: list[float | None], x_index: int, report: Callable[[str], None]
) -> None:
    """Say which rows are left out for their step (or compute): not a number, or negative."""
    header = rows[0]
    bad_x = [
        row[x_index]
        for row, cx in zip(rows[1:], xs, strict=True)
        if cx is None and x_index < len(row) and row[x_index].strip()
    ]
    if bad_x:
        report(
            f"{path}: {len(bad_x)} row(s) skipped, their {header[x_index]} not a number ({_examples(bad_x)})"
        )
    # a negative step or compute was fitted as compute 0, i.e. as the curve's start R0: such rows are left out
    negative = [
        row[x_index].strip() for row, cx in zip(rows[1:], xs, strict=True) if cx is not None and cx < 0
    ]
    if negative:
        report(
            f"{path}: {len(negative)} row(s) skipped, their {header[x_index]} negative (the first: {negative[0]})"
        )


def _column_curve(
    path: Path,
    rows: list[list[str]],
    xs: list[float | None],
    x_index: int,
    j: int,
    name: str,
    report: Callable[[str], None] | None,
) -> Curve | None:
    """Column J's run: its numbers against the rows' compute XS (one value per step, two at one step averaged),
    its cells that are not a number left out and said; None where it holds no number at all."""
    header = rows[0]
    points, bad = [], []  # bad: cells that are neither empty nor a finite number ("abc", "12%", "inf")
    for row, cx in zip(rows[1:], xs, strict=True):
        if cx is None or cx < 0 or j >= len(row):
            continue  # no step, or one not a number or negative (said once for the file, above)
        cy = _float(row[j])
        if cy is not None:
            points.append((cx, cy))
        elif row[j].strip():
            bad.append(f"{header[x_index]} {row[x_index].strip()}: {row[j].strip()!r}")
    if not points:
        if report is not None and len(rows) > 1:
            such = f" (cells such as {bad[0].split(': ', 1)[1]})" if bad else ""
            report(f"skipped column {name!r} ({path}): no number at any {header[x_index]}{such}")
        return None
    if bad and report is not None:  # a cell that is not a number is left out, never silently
        report(f"run {name!r} ({path}): {len(bad)} cell(s) not a number, left out ({_examples(bad)})")
    points.sort()
    x, y = (np.array(v, dtype=float) for v in zip(*points, strict=True))
    steps, index, counts = np.unique(x, return_inverse=True, return_counts=True)
    if len(steps) < len(x):  # two rows at one step: one value per step, their mean
        y = np.bincount(index, weights=y) / counts
        if report is not None:
            twice = steps[counts > 1]
            shown = ", ".join(f"{s:g}" for s in twice[:5]) + (", ..." if len(twice) > 5 else "")
            report(
                f"run {name!r} ({path}): {len(twice)} {header[x_index]} value(s) given more than once "
                f"({shown}); their values are averaged"
            )
        x = steps
    return Curve(name=name, x=x, y=y, source=str(path))


def _distinct_names(
    header: list[str], read: list[int], path: Path, report: Callable[[str], None] | None
) -> list[str]:
    """HEADER with each read column named as an earlier read one renamed `NAME (2)`, `NAME (3)`, ...: two runs of
    one name were two records with the same run and file, not to be told apart. Said once per file."""
    names, taken, seen, renamed = list(header), set(header), set(), []
    for j in read:
        if header[j] in seen:
            k = 2
            while f"{header[j]} ({k})" in taken:  # not a name another column has already
                k += 1
            names[j] = f"{header[j]} ({k})"
            taken.add(names[j])
            renamed.append(repr(names[j]))
        seen.add(header[j])
    if renamed and report is not None:
        report(f"{path}: {len(renamed)} column(s) named as an earlier column, read as {_examples(renamed)}")
    return names


def find_curve_files(path: Path | str, report: Callable[[str], None] | None = None) -> list[Path]:
    """CSV files a forecast reads from PATH: the file itself, a probe run's `validation.csv`, or every CSV below.

    `report` gets a line for each folder below PATH that cannot be listed (permissions): its CSVs are not read.
    """
    path = Path(path)
    if path.is_file():
        return [path]
    probe_log = path / "validation.csv"
    if probe_log.exists():
        return [probe_log]
    # os.walk, not Path.rglob: rglob skips a folder it may not list without a word, and its runs went missing from
    # a forecast or a sweep fit; os.walk hands the error to `onerror`. Files only: a folder named *.csv is no curve
    # file (reading it raised IsADirectoryError out of the CLI). Every CSV, whatever its name: `forecast*.csv` files
    # were left out silently (forecast writes no CSV of its own).
    unreadable: list[OSError] = []
    files = [
        Path(folder) / name
        for folder, _, names in os.walk(path, onerror=unreadable.append)
        for name in names
        if fnmatch.fnmatchcase(name, "*.csv")
    ]
    if report is not None:
        for err in unreadable:
            report(
                f"skipped folder {err.filename}: cannot be read ({err.strerror or err}); no CSV below it is read"
            )
    return sorted(files)


def load_curves(
    path: Path | str,
    compute_column: str | None = None,
    dedupe: bool = True,
    on_error: Callable[[Path, str], None] | None = None,
    report: Callable[[str], None] | None = None,
    step_hint: str = STEP_HINT,
) -> list[Curve]:
    """All accuracy curves under PATH; with `dedupe`, a run exported twice (same `curve_key`) is read once.

    Where PATH holds no accuracy-looking column at all (e.g. only lengths), every column is read instead.
    A file that cannot be read raises ValueError, or, with `on_error`, is reported to it and skipped (one bad
    export in a folder of CSVs should not stop the forecast of the others). `report` gets a `skipped column`
    line for each column left out (not an accuracy, or no number), a `skipped folder` line for each folder below
    PATH that cannot be read, and the notes of `read_curves_csv`.
    The CLI reads with `dedupe=False`: each file's runs are forecast together as read, and a run exported twice
    is dropped from the output only (`first_of_each`).
    """
    every: list[Curve] = []
    for file in find_curve_files(path, report):
        try:
            every += read_curves_csv(
                file, compute_column=compute_column, accuracy_only=False, report=report, step_hint=step_hint
            )
        except ValueError as err:
            if on_error is None:
                raise
            on_error(file, str(err))
    accurate = [c for c in every if is_accuracy_column(c.name)]
    if accurate and report is not None:  # one line per file, naming every column left out
        left_out: dict[str, list[tuple[str, str]]] = {}
        for curve in every:
            if (word := non_accuracy_word(curve.name)) and not is_probe_tracked(curve.source, curve.name):
                left_out.setdefault(curve.source, []).append((curve.name, word))
        for source, columns in left_out.items():
            names = ", ".join(repr(name) for name, _ in columns)
            words = ", ".join(repr(word) for word in dict.fromkeys(word for _, word in columns))
            if len(columns) == 1:
                report(f"skipped column {names} ({source}): not an accuracy ({words} in its name)")
            else:
                report(f"skipped columns {names} ({source}): not accuracies ({words} in their names)")
    kept = accurate or every
    return [kept[i] for i in first_of_each(kept)] if dedupe else kept
