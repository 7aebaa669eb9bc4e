"""Synthetic curve CSVs and the eval CLI runner shared by the forecast tests (on sys.path via conftest.py)."""

from __future__ import annotations

import numpy as np
from typer.testing import CliRunner

from evals.forecast import sigmoid_curve
from mathmix.cli import app

X = np.arange(0, 200, 5.0)


def write_csv(path, columns: dict[str, np.ndarray], x: np.ndarray = X) -> None:
    """A W&B-style export at PATH: a Step column (X) and one column per run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["Step," + ",".join(columns)]
    lines += [f"{s:g}," + ",".join(f"{columns[c][j]:.5f}" for c in columns) for j, s in enumerate(x)]
    path.write_text("\n".join(lines) + "\n")


def run_eval(*args: str):
    """`mathmix eval ARGS...` in process."""
    return CliRunner().invoke(app, ["eval", *map(str, args)])


def curve(a: float, cmid: float, r0: float = 0.05, b: float = 2.0) -> np.ndarray:
    """The sigmoid R(C) over X with these parameters."""
    return sigmoid_curve(X, r0, a, b, cmid)
