"""Damaged and odd inputs of `mathmix eval forecast / compare / sweep-fit`, as a user exporting W&B curves or
pandas tables makes them: each is read, left out with a line naming it, or refused in one line; never a traceback
and never a silent wrong number."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from evals.forecast import sigmoid_curve
from mathmix.cli import app

X = np.arange(0, 200, 5.0)


def _csv(path, columns: dict[str, np.ndarray], x: np.ndarray = X) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["Step," + ",".join(columns)]
    lines += [f"{s:g}," + ",".join(f"{columns[c][j]:.5f}" for c in columns) for j, s in enumerate(x)]
    path.write_text("\n".join(lines) + "\n")


def _run(*args: str):
    return CliRunner().invoke(app, ["eval", *map(str, args)])


def _curve(a: float, cmid: float, r0: float = 0.05, b: float = 2.0) -> np.ndarray:
    return sigmoid_curve(X, r0, a, b, cmid)


def test_a_csv_in_a_folder_that_cannot_be_opened_is_skipped_with_a_line(tmp_path):
    """A folder named *.csv (IsADirectoryError) or a dangling link (FileNotFoundError) under the input folder was
    a traceback out of the CLI; an unreadable file (PermissionError) is the same OSError."""
    folder = tmp_path / "in"
    _csv(folder / "good.csv", {"run": _curve(0.5, 50.0)})
    (folder / "old.csv").mkdir()
    (folder / "old.csv" / "inner.csv").write_text("Step,other\n0,0.1\n10,0.2\n20,0.3\n")
    (folder / "gone.csv").symlink_to(tmp_path / "nowhere.csv")
    result = _run("forecast", folder, "--json", "--n-boot", "0")
    assert result.exit_code == 0, result.output
    assert sorted(r["run"] for r in json.loads(result.stdout)) == ["other", "run"]
    assert f"skipped {folder / 'gone.csv'}: cannot be read (No such file or directory)" in result.stderr
    assert "old.csv:" not in result.stderr  # a folder is walked, not read as a file
