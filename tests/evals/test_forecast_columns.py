"""Which columns of a curve CSV are runs: compute axes (GPU-hours, FLOPs, samples) and the chosen
`--compute-column` never are, nor W&B band columns in any case; each was forecast as a run and pooled into the
prior of the real runs of its file, moving their forecasts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from curve_data import X
from curve_data import curve as _curve
from curve_data import run_eval as _run
from curve_data import write_csv as _csv

from evals.curves import is_accuracy_column, read_curves_csv


def _forecast(path, *args: str) -> list[dict]:
    result = _run("forecast", path, "--json", "--n-boot", "0", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "column", ["gpu_hours", "GPU Hours", "total_flops", "consumed_samples", "train/epoch"]
)
def test_a_compute_column_beside_the_runs_is_neither_forecast_nor_pooled(tmp_path, column):
    acc = _curve(0.6, 40.0)
    _csv(tmp_path / "plain.csv", {"run1 - val/acc": acc})
    _csv(tmp_path / "with.csv", {column: X * 0.37, "run1 - val/acc": acc})
    plain = _forecast(tmp_path / "plain.csv", "--fit-fraction", "0.3")
    both = _forecast(tmp_path / "with.csv", "--fit-fraction", "0.3")
    assert [r["run"] for r in both] == ["run1 - val/acc"]
    assert both[0]["predicted_final"] == plain[0]["predicted_final"]


def test_the_chosen_compute_column_is_never_a_run_whatever_its_case(tmp_path):
    """`--compute-column tokens` reads the first column of that name as compute; another spelled `Tokens` (a
    re-export) was read as a run in percent."""
    path = tmp_path / "c.csv"
    rows = ["Step,tokens,Tokens,budget,run1 - val/acc"]
    rows += [
        f"{s:g},{s * 1e6:g},{s * 1e6:g},{s * 3:g},{v:.5f}" for s, v in zip(X, _curve(0.6, 40.0), strict=True)
    ]
    path.write_text("\n".join(rows) + "\n")
    assert [c.name for c in read_curves_csv(path, "TOKENS", accuracy_only=False)] == [
        "budget",
        "run1 - val/acc",
    ]
    assert [c.name for c in read_curves_csv(path, "Budget")] == ["run1 - val/acc"]


@pytest.mark.parametrize("name", ["base_40Btokens", "longtime_run", "run1 - val/acc", "hourglass_run"])
def test_runs_named_after_compute_words_inside_a_word_are_still_runs(name):
    assert is_accuracy_column(name)


def test_band_columns_in_lower_case_are_not_runs(tmp_path):
    """A script that lower-cases W&B's header writes `__min`/`__max`: they were forecast as runs of their own."""
    path = tmp_path / "a.csv"
    acc = _curve(0.6, 40.0)
    rows = ["step,run1 - val/acc,run1 - val/acc__min,run1 - val/acc__max,run1 - val/acc__STEP"]
    rows += [f"{s:g},{v:.5f},{v - 0.01:.5f},{v + 0.01:.5f},{s:g}" for s, v in zip(X, acc, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    assert [c.name for c in read_curves_csv(path)] == ["run1 - val/acc"]
    assert np.allclose(read_curves_csv(path)[0].y, np.round(acc, 5))
