"""`compare` flags fits whose A is no measurement (A or B held at a bound of its range, a run that falls) and
ranks them after the others: a curve still rising in a straight line was ranked first with A 1.000 [1.000, 1.000],
and a run collapsing from 0.736 to 0.351 was ranked with no word in the table."""

from __future__ import annotations

import json

import numpy as np
import pytest
from curve_data import X
from curve_data import curve as _curve
from curve_data import run_eval as _run
from curve_data import write_csv as _csv

from evals.backtest import forecast_curves
from evals.curves import Curve
from evals.forecast import B_GRID, SigmoidFit
from evals.forecast_report import fit_flags

LINEAR = np.clip(0.45 + 0.0025 * X, 0, 1)  # rising at the same pace to the end: nothing bounds A but 1


def test_compare_ranks_flagged_fits_after_the_others_and_says_so(tmp_path):
    _csv(tmp_path / "good.csv", {"good - acc": _curve(0.6, 40.0)})
    _csv(tmp_path / "linear.csv", {"linear - acc": LINEAR})
    _csv(tmp_path / "falls.csv", {"falls - acc": np.where(X < 100, _curve(0.7, 30.0), 0.3)})
    out = tmp_path / "ranking.json"
    paths = [tmp_path / f"{name}.csv" for name in ("linear", "falls", "good")]
    result = _run("compare", *paths, "--column", "acc", "-o", out)
    assert result.exit_code == 0, result.output
    ranking = {r["run"]: r for r in json.loads(out.read_text())}
    assert {name: (r["rank"], r["flags"]) for name, r in ranking.items()} == {
        "good - acc": (1, []),
        "linear - acc": (2, ["A at bound"]),  # the highest A, ranked after the unflagged run
        "falls - acc": (3, ["falls"]),
    }
    assert ranking["linear - acc"]["A"] > ranking["good - acc"]["A"]
    assert "flagged fits are ranked after the others" in " ".join(result.stdout.split())
    assert "A at bound" in result.stdout


@pytest.mark.parametrize(("unit", "scale"), [("fraction", 1.0), ("percent", 100.0), ("reward", None)])
def test_a_at_the_top_of_its_range_is_flagged_in_every_unit(unit, scale):
    """The top is 1 for fractions, 100 in percent and 1 for rewards on [-1, 1]."""
    y = 2 * LINEAR - 1 if scale is None else scale * LINEAR
    lo_hi = {"fraction": (0.0, 1.0), "percent": (0.0, 100.0), "reward": (-1.0, 1.0)}[unit]
    curve = Curve("linear", X, y, "f.csv", lo_hi)
    ((record, fit),) = forecast_curves([curve])
    assert fit_flags(fit) == ["A at bound"]
    assert record["MAP"]["A"] == pytest.approx(lo_hi[1], abs=0.01 * (lo_hi[1] - lo_hi[0]))


def _fit(a: float, b: float) -> SigmoidFit:
    return SigmoidFit(0.0, a, b, 50.0, 0.01, (0.0, 100.0), np.zeros((1, 4)), np.ones(1))


def test_fit_flags_name_a_at_either_end_and_b_at_the_bottom_of_its_grid():
    assert fit_flags(_fit(0.6, 2.0)) == []
    assert fit_flags(_fit(0.0, 2.0)) == ["A at bound"]  # flat at the bottom of the range: nothing learned
    assert fit_flags(_fit(0.999, 2.0)) == ["A at bound"]
    assert fit_flags(_fit(0.6, float(B_GRID[0]))) == ["B at bound"]
    assert fit_flags(_fit(0.6, float(B_GRID[-1]))) == []  # a jump: its plateau is measured


def _with_a_interval(fit: SigmoidFit, low: float, high: float) -> SigmoidFit:
    fit.intervals = {"A": (low, high)}
    return fit


def test_an_a_whose_interval_reaches_the_top_of_its_range_is_flagged_whatever_its_map():
    """The MAP alone missed a posterior that reaches the bound: A 5-95% [70, 99.5] on [0, 100] with MAP 80."""
    assert fit_flags(_with_a_interval(_fit(0.8, 2.0), 70.0, 99.5)) == ["A unbounded above"]
    assert fit_flags(_with_a_interval(_fit(0.8, 2.0), 70.0, 99.0)) == [
        "A unbounded above"
    ]  # within 1% of 100
    assert fit_flags(_with_a_interval(_fit(0.8, 2.0), 70.0, 97.0)) == []
    assert fit_flags(_with_a_interval(_fit(0.999, 2.0), 90.0, 100.0)) == ["A at bound"]  # said once


# b 0.6: a slow rise, as the real curves' (B ~0.4-0.6); 2% noise
MID_RISE = _curve(0.85, 100.0, b=0.6)  # ends at ~0.56, far below A: nothing in the curve bounds A from above
SEEN = _curve(0.7, 30.0, b=0.6)  # ends at ~0.57, past its midpoint: A 5-95% about [0.70, 0.96]


@pytest.mark.parametrize(("unit", "scale"), [("fraction", 1.0), ("percent", 100.0), ("reward", None)])
def test_a_curve_whose_posterior_reaches_the_top_is_flagged_in_every_unit(unit, scale):
    """Synthetic curves of known shape: mid-rise to 0.85 (its posterior of A reaches 1 while its MAP is below
    0.99), against one past its midpoint and one at its plateau (their intervals stop short of the top)."""
    noise = np.random.default_rng(0).normal(0, 0.02, len(X))
    lo_hi = {"fraction": (0.0, 1.0), "percent": (0.0, 100.0), "reward": (-1.0, 1.0)}[unit]
    flags = {}
    for name, y in (("mid-rise", MID_RISE), ("seen", SEEN), ("plateau", _curve(0.6, 40.0))):
        y = np.clip(y + noise, 0, 1)
        y = 2 * y - 1 if scale is None else scale * y
        ((record, fit),) = forecast_curves([Curve(name, X, y, "f.csv", lo_hi)])
        flags[name] = fit_flags(fit)
        if name == "mid-rise":
            assert record["MAP"]["A"] < lo_hi[1] - 0.01 * (
                lo_hi[1] - lo_hi[0]
            )  # the MAP rule alone misses it
    assert flags == {"mid-rise": ["A unbounded above"], "seen": [], "plateau": []}


def test_compare_ranks_an_a_unbounded_above_after_the_others(tmp_path):
    noise = np.random.default_rng(0).normal(0, 0.02, len(X))
    _csv(tmp_path / "mid.csv", {"mid - acc": np.clip(MID_RISE + noise, 0, 1)})
    _csv(tmp_path / "seen.csv", {"seen - acc": np.clip(SEEN + noise, 0, 1)})
    out = tmp_path / "ranking.json"
    result = _run("compare", tmp_path / "mid.csv", tmp_path / "seen.csv", "--column", "acc", "-o", out)
    assert result.exit_code == 0, result.output
    ranking = {r["run"]: r for r in json.loads(out.read_text())}
    assert {name: (r["rank"], r["flags"]) for name, r in ranking.items()} == {
        "seen - acc": (1, []),
        "mid - acc": (2, ["A unbounded above"]),
    }
    assert ranking["mid - acc"]["A"] > ranking["seen - acc"]["A"]  # ranked after it all the same
    assert "A unbounded above" in result.stdout
