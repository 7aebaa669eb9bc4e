"""Reading RL validation curves: CSV exports (a `Step` column, one column per run) and the probe's own logs.

Two layouts are read the same way: Weights & Biases exports like `../shared/data/rl_curves/*/acc_*.csv`
(`Step`, then per run `NAME - metric`, `NAME - metric__MIN`, `NAME - metric__MAX`) and the RL probe's
`validation.csv` (`Step`, `compute`, `heldout_mean@n`, `math500`, `mean_response_length`, ...).
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Columns that are never a curve of their own: W&B's min/max bands and bookkeeping.
_SKIP_SUFFIXES = ("__MIN", "__MAX", "__step")
# Columns that are not accuracies (the forecast fits accuracies; lengths are tracked, not forecast).
_NOT_ACCURACY = (
    "length",
    "compute",
    "tokens",
    "rollouts",
    "reward",
    "truncated",
    "seconds",
    "loss",
    "epoch",
    "time",  # W&B's Wall Time / Relative Time / _runtime / _timestamp
    "global_step",
    "learning_rate",
    "grad_norm",
    "entropy",
)


@dataclass
class Curve:
    """One run's validation metric against compute (steps unless a compute column is chosen)."""

    name: str
    x: np.ndarray
    y: np.ndarray
    source: str = ""


def is_accuracy_column(name: str) -> bool:
    """True for a column that holds an accuracy/score curve (not a length, loss or compute column)."""
    # W&B names a column "RUN - metric": only the metric says what it holds (a run may be called *_long_time).
    low = name.rsplit(" - ", 1)[-1].lower()
    return not any(word in low for word in _NOT_ACCURACY)


def _float(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if np.isfinite(number) else None


def read_curves_csv(
    path: Path | str, compute_column: str | None = None, accuracy_only: bool = True
) -> list[Curve]:
    """Read every run column of a curve CSV; empty cells (runs of different lengths) are skipped.

    Args:
        path: CSV with a `Step` column (any case; else the first column) and one column per run.
        compute_column: column to use as compute instead of the step (e.g. `compute`, `tokens`).
        accuracy_only: keep only columns that look like accuracies (see `is_accuracy_column`).
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:  # -sig: a BOM would hide the Step column
            rows = list(csv.reader(handle))
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text (expected a CSV)") from None
    except csv.Error as err:
        raise ValueError(f"{path}: not a readable CSV ({err})") from None
    if not rows:
        return []
    header = rows[0]
    lower = [h.strip().lower() for h in header]
    wanted = (compute_column or "step").lower()
    if compute_column and wanted not in lower:  # the first column is a fallback for a missing Step only
        raise ValueError(f"{path}: no compute column {compute_column!r} (columns: {', '.join(header[:8])})")
    x_index = lower.index(wanted) if wanted in lower else 0
    curves = []
    for j, name in enumerate(header):
        if j == x_index or name.endswith(_SKIP_SUFFIXES) or lower[j] in ("step", "compute"):
            continue
        if accuracy_only and not is_accuracy_column(name):
            continue
        points = []
        for row in rows[1:]:
            if j < len(row) and x_index < len(row):
                cx, cy = _float(row[x_index]), _float(row[j])
                if cx is not None and cy is not None:
                    points.append((cx, cy))
        if points:
            points.sort()
            x, y = (np.array(v, dtype=float) for v in zip(*points, strict=True))
            curves.append(Curve(name=name, x=x, y=y, source=str(path)))
    return curves


def find_curve_files(path: Path | str) -> list[Path]:
    """CSV files a forecast reads from PATH: the file itself, a probe run's `validation.csv`, or every CSV below."""
    path = Path(path)
    if path.is_file():
        return [path]
    probe_log = path / "validation.csv"
    if probe_log.exists():
        return [probe_log]
    return sorted(p for p in path.rglob("*.csv") if not p.name.startswith("forecast"))


def load_curves(
    path: Path | str,
    compute_column: str | None = None,
    dedupe: bool = True,
    on_error: Callable[[Path, str], None] | None = None,
) -> list[Curve]:
    """All accuracy curves under PATH; identical (name, values) pairs exported twice are read once.

    Where PATH holds no accuracy-looking column at all (e.g. only lengths), every column is read instead.
    A file that cannot be read raises ValueError, or, with `on_error`, is reported to it and skipped (one bad
    export in a folder of CSVs should not stop the forecast of the others).
    """
    every: list[Curve] = []
    for file in find_curve_files(path):
        try:
            every += read_curves_csv(file, compute_column=compute_column, accuracy_only=False)
        except ValueError as err:
            if on_error is None:
                raise
            on_error(file, str(err))
    for curves in ([c for c in every if is_accuracy_column(c.name)], every):
        kept: list[Curve] = []
        seen: set[tuple] = set()
        for curve in curves:
            key = (curve.name, tuple(np.round(curve.y, 9)))
            if dedupe and key in seen:
                continue
            seen.add(key)
            kept.append(curve)
        if kept:
            return kept
    return []
