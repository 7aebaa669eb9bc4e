"""Forecasting a run's final accuracy from its first part, and back-testing that against persistence.

Protocol (the same in `mathmix eval forecast --fit-fraction`, the bench script and the tests): the fit sees the
first ceil(F * n) points of an n-point curve; the final accuracy is the mean of the last ceil(n / 10) points; the
forecast is the posterior mean of the fitted curve averaged over those points' compute; the persistence forecast
is the mean of the last 3 points the fit saw.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from evals.curves import Curve
from evals.forecast import SigmoidFit, fit_sigmoid

TAIL_FRACTION = 0.1
PERSISTENCE_POINTS = 3


def tail_positions(x: np.ndarray, target: float | None = None) -> np.ndarray:
    """Indices of the last 10% of the points up to the target compute (all points when no target)."""
    upto = np.nonzero(x <= target)[0] if target is not None else np.arange(len(x))
    if len(upto) == 0:
        return upto
    return upto[-max(1, math.ceil(TAIL_FRACTION * len(upto))) :]


def forecast_curve(
    curve: Curve,
    fit_fraction: float = 1.0,
    target: float | None = None,
    skip_fraction: float = 0.0,
    n_boot: int = 0,
) -> tuple[dict[str, Any], SigmoidFit]:
    """Fit the first `fit_fraction` of a curve and forecast the final accuracy.

    Returns ({"run", "predicted_final", "actual_final", "persistence", "target", params, intervals}, fit).
    `actual_final` is the mean of the last 10% of the points up to the target, or None where the curve does not
    reach the target.
    """
    x, y = curve.x, curve.y
    k = max(2, math.ceil(fit_fraction * len(x)))
    fit = fit_sigmoid(x[:k], y[:k], skip_fraction=skip_fraction, n_boot=n_boot)
    goal = float(target) if target is not None else float(x[-1])
    reaches = x[-1] >= goal
    tail = tail_positions(x, goal)
    if reaches and len(tail):
        predicted = float(np.mean(fit.predict(x[tail])))
        actual: float | None = float(np.mean(y[tail]))
    else:
        predicted, actual = float(fit.predict(goal)[0]), None
    record = {
        "run": curve.name,
        "predicted_final": round(predicted, 6),
        "actual_final": None if actual is None else round(actual, 6),
        "persistence": round(float(np.mean(y[:k][-PERSISTENCE_POINTS:])), 6),
        "target": goal,
        "fit_points": int(k),
        **{key: round(float(v), 6) for key, v in fit.params().items()},
        "sigma": round(fit.sigma, 6),
    }
    if fit.intervals:
        record["intervals"] = {key: [round(v, 6) for v in pair] for key, pair in fit.intervals.items()}
    return record, fit


def backtest(curves: list[Curve], fit_fraction: float, skip_fraction: float = 0.0) -> dict[str, Any]:
    """Median absolute error of the forecast and of persistence over curves, fitting the first `fit_fraction`."""
    records = []
    for curve in curves:
        if len(curve.x) < 10:  # too short for a first-20% / last-10% split to mean anything
            continue
        record, _ = forecast_curve(curve, fit_fraction=fit_fraction, skip_fraction=skip_fraction)
        record["error"] = abs(record["predicted_final"] - record["actual_final"])
        record["persistence_error"] = abs(record["persistence"] - record["actual_final"])
        records.append(record)
    model = float(np.median([r["error"] for r in records])) if records else float("nan")
    persistence = float(np.median([r["persistence_error"] for r in records])) if records else float("nan")
    return {
        "fit_fraction": fit_fraction,
        "curves": len(records),
        "median_abs_error": model,
        "persistence_median_abs_error": persistence,
        "ratio": model / persistence if persistence else float("nan"),
        "records": records,
    }
