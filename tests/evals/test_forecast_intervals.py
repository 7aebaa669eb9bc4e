"""The A, B, Cmid intervals are the grid posterior's 5-95% quantiles, around the posterior medians reported with
them (the MAP is reported apart): a residual bootstrap around the MAP gave zero-width intervals on flat curves
(every resample alike) and, on real curves at 20%, 43 of 324 estimates outside their own interval."""

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


def _inside(record: dict) -> list[str]:
    """The parameters whose reported value lies outside its interval, or whose interval has no width."""
    bad = []
    for key in ("A", "B", "Cmid"):
        lo, hi = record["intervals"][key]
        if not (lo <= record[key] <= hi) or hi <= lo:
            bad.append(f"{key} {record[key]} [{lo}, {hi}]")
    return bad


@pytest.mark.parametrize(
    "y",
    [
        np.zeros(len(X)),  # all zero: the bootstrap's resamples were all alike, A [0, 0]
        np.full(len(X), 0.3),  # flat
        _curve(0.6, 40.0),  # saturating
        np.where(X < 60, 0.02, 0.75),  # a jump: B at the top of its range
        _curve(0.9, 400.0, b=0.5),  # slow: still rising at the end, A far out
    ],
)
def test_every_interval_holds_its_estimate_and_has_width(y):
    ((record, fit),) = forecast_curves([Curve("run", X, y, "f.csv")], fit_fraction=0.3, n_boot=40)
    assert _inside(record) == []
    assert set(record["MAP"]) == {"R0", "A", "B", "Cmid"}


def test_intervals_are_in_the_curves_own_unit(tmp_path):
    """A percent curve's A interval is in percent, as its A is; B and Cmid are the same in either unit."""
    _csv(tmp_path / "f.csv", {"run - acc": _curve(0.6, 40.0)})
    _csv(tmp_path / "p.csv", {"run - acc": 100 * _curve(0.6, 40.0)})
    records = {}
    for name in ("f", "p"):
        result = _run("forecast", tmp_path / f"{name}.csv", "--fit-fraction", "0.3", "-o", tmp_path / name)
        assert result.exit_code == 0, result.output
        records[name] = json.loads((tmp_path / name / "forecast.json").read_text())[0]
        assert _inside(records[name]) == []
    assert records["p"]["intervals"]["A"] == pytest.approx(
        [100 * v for v in records["f"]["intervals"]["A"]], abs=1e-3
    )
    assert records["p"]["intervals"]["B"] == pytest.approx(records["f"]["intervals"]["B"], rel=1e-3)


def test_n_boot_is_still_accepted(tmp_path):
    """--n-boot is a contract: scripts pass it; it no longer changes anything, and a negative one is still refused."""
    _csv(tmp_path / "f.csv", {"run - acc": _curve(0.6, 40.0)})
    outputs = []
    for n in ("0", "40"):
        result = _run("forecast", tmp_path / "f.csv", "--n-boot", n, "-o", tmp_path / n)
        assert result.exit_code == 0, result.output
        outputs.append(json.loads((tmp_path / n / "forecast.json").read_text()))
    assert outputs[0] == outputs[1] and "intervals" in outputs[0][0]
