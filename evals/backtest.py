"""Forecasting a run's final accuracy from its first part, and back-testing that against persistence.

Protocol (the same in `mathmix eval forecast --fit-fraction`, the bench script and the tests): the fit sees the
first ceil(F * n) points of an n-point curve, and a curve whose window holds fewer than 3 is not forecast (a
four-parameter sigmoid on 2 points is no forecast; the CLI skips it with a line, the back-test leaves it out); the
final accuracy is the mean of the last ceil(n / 10) points; the
forecast is the posterior mean of the fitted curve averaged over those points' compute; the persistence forecast
is the mean of the last 3 points the fit saw. Runs of one CSV are fitted together (`fit_experiment` pools the
prior on the gain still to come), and the fitter only ever receives truncated copies of the curves (`seen_part`):
no value past any curve's fit fraction, its own or a sibling's, can reach a forecast.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from evals.curves import Curve
from evals.forecast import Priors, SigmoidFit, fit_experiment, fit_sigmoid, pooled_gain_sd

TAIL_FRACTION = 0.1
PERSISTENCE_POINTS = 3
MIN_FIT_POINTS = 3  # the fewest points a fit window may hold (F < 1, or the whole curve at F = 1)


def tail_positions(x: np.ndarray, target: float | None = None) -> np.ndarray:
    """Indices of the last 10% of the points up to the target compute (all points when no target)."""
    upto = np.nonzero(x <= target)[0] if target is not None else np.arange(len(x))
    if len(upto) == 0:
        return upto
    return upto[-max(1, math.ceil(TAIL_FRACTION * len(upto))) :]


def fit_window(n: int, fit_fraction: float) -> int:
    """How many of an n-point curve's points a forecast at fraction F fits on: ceil(F * n)."""
    return math.ceil(fit_fraction * n)


def can_forecast(curve: Curve, fit_fraction: float) -> bool:
    """Whether the curve's fit window at fraction F holds MIN_FIT_POINTS points or more."""
    return fit_window(len(curve.x), fit_fraction) >= MIN_FIT_POINTS


def seen_part(curve: Curve, fit_fraction: float) -> Curve:
    """The first ceil(F * n) points of a curve: all a forecast at fraction F may look at.

    Raises ValueError when that is fewer than MIN_FIT_POINTS (it used to be raised to 2 points silently, while a
    whole curve of 2 points was refused); callers leave such curves out first (`can_forecast`).
    """
    k = fit_window(len(curve.x), fit_fraction)
    if k < MIN_FIT_POINTS:
        raise ValueError(
            f"{curve.name}: {k} of its {len(curve.x)} points to fit at fit fraction {fit_fraction:g}; "
            f"a fit needs {MIN_FIT_POINTS} or more"
        )
    return Curve(curve.name, curve.x[:k].copy(), curve.y[:k].copy(), curve.source, curve.unit)


def forecast_curves(
    curves: list[Curve],
    fit_fraction: float = 1.0,
    target: float | None = None,
    skip_fraction: float = 0.0,
    n_boot: int = 0,
    pool: bool = True,
    pool_only: Sequence[Curve] = (),
) -> list[tuple[dict[str, Any], SigmoidFit]]:
    """Fit the first `fit_fraction` of each curve and forecast its final accuracy; one (record, fit) per curve.

    Curves with the same `source` (the run columns of one file: one experiment) are fitted together by
    `fit_experiment` (the gain prior is pooled), and
    only on their seen parts: the fitter is handed truncated copies, so nothing past ANY curve's fit fraction
    can reach a forecast. The record holds {"run", "predicted_final", "actual_final", "persistence", "target",
    posterior medians R0, A, B, Cmid, their 5-95% intervals, MAP}; `actual_final` is the mean of the last 10% of the points up to the target, or None where
    the curve does not reach the target. `pool=False` fits every curve on its own (the ablation in the bench).
    `pool_only`: more runs of the same files that are pooled with CURVES but not forecast themselves (the CLI's
    `--column` picks the runs to show; the others of their file still count in its pooled prior).
    A curve with a `unit` is fitted on that range (the fitter otherwise takes it from the seen values alone).
    """
    every = [*curves, *pool_only]
    groups: dict[Any, list[int]] = {}
    for i, curve in enumerate(every):
        groups.setdefault(curve.source if pool else i, []).append(i)
    fits: list[SigmoidFit | None] = [None] * len(curves)
    seen = [seen_part(curve, fit_fraction) for curve in every]
    for members in groups.values():
        runs = [(seen[i].x, _in_unit(seen[i])) for i in members]
        wanted = [k for k, i in enumerate(members) if i < len(curves)]
        if len(wanted) == len(members):
            group_fits = fit_experiment(runs, skip_fraction, n_boot)
        else:  # what fit_experiment does, for the wanted runs only
            priors = Priors()
            gain_sd = pooled_gain_sd(runs, skip_fraction, priors)
            group_fits = [
                fit_sigmoid(*runs[k], skip_fraction, n_boot, priors=priors, gain_sd=gain_sd) for k in wanted
            ]
        for k, fit in zip(wanted, group_fits, strict=True):
            fits[members[k]] = _from_unit(fit, seen[members[k]].unit)
    records = []
    for curve, part, curve_fit in zip(curves, seen[: len(curves)], fits, strict=True):
        assert curve_fit is not None  # every curve is in a group, and every group fits its wanted runs
        records.append(_record(curve, part, curve_fit, target))
    return records


def _in_unit(curve: Curve) -> np.ndarray:
    """A curve's values on [0, 1] of its unit (as they are where it has none: the fitter maps them itself)."""
    if curve.unit is None:
        return curve.y
    lo, hi = curve.unit
    return (curve.y - lo) / (hi - lo)  # (y - 0.0) / 1.0 is y itself: fractions fit exactly as before


def _from_unit(fit: SigmoidFit, unit: tuple[float, float] | None) -> SigmoidFit:
    """A fit made on [0, 1] of a unit, reported in the unit (as if the fitter had taken that range itself)."""
    if unit is None:
        return fit
    lo, hi = unit
    fit.scale = (lo + (hi - lo) * fit.scale[0], lo + (hi - lo) * fit.scale[1])
    if "A" in fit.intervals:
        a_lo, a_hi = fit.intervals["A"]
        fit.intervals["A"] = (lo + (hi - lo) * a_lo, lo + (hi - lo) * a_hi)
    for key in ("R0", "A"):
        if key in fit.medians:
            fit.medians[key] = lo + (hi - lo) * fit.medians[key]
    return fit


def forecast_curve(
    curve: Curve,
    fit_fraction: float = 1.0,
    target: float | None = None,
    skip_fraction: float = 0.0,
    n_boot: int = 0,
) -> tuple[dict[str, Any], SigmoidFit]:
    """`forecast_curves` for a single curve (no other runs to pool with)."""
    return forecast_curves([curve], fit_fraction, target, skip_fraction, n_boot)[0]


def _record(
    curve: Curve, seen: Curve, fit: SigmoidFit, target: float | None
) -> tuple[dict[str, Any], SigmoidFit]:
    """The forecast record: the fit predicts at the target compute; the actual value comes from the full curve."""
    x, y = curve.x, curve.y
    goal = float(target) if target is not None else float(x[-1])
    tail = tail_positions(x, goal)
    if x[-1] >= goal and len(tail):
        predicted = float(np.mean(fit.predict(x[tail])))  # where the tail is (compute only, never values)
        actual: float | None = float(np.mean(y[tail]))
    else:
        predicted, actual = float(fit.predict(goal)[0]), None
    record: dict[str, Any] = {
        "run": curve.name,
        "predicted_final": round(predicted, 6),
        "actual_final": None if actual is None else round(actual, 6),
        "persistence": round(float(np.mean(seen.y[-PERSISTENCE_POINTS:])), 6),
        "target": goal,
        "fit_points": len(seen.x),
        # the posterior medians, each inside its interval (the MAP need not be: at a bound, or where the
        # posterior is skewed, it lies outside the posterior's 5-95%)
        **{key: round(float(v), 6) for key, v in fit.estimates().items()},
        "sigma": round(fit.sigma * (fit.scale[1] - fit.scale[0]), 6),  # in the curve's own units
        "intervals": {key: [round(v, 6) for v in pair] for key, pair in fit.intervals.items()},
        "MAP": {key: round(float(v), 6) for key, v in fit.params().items()},
    }
    return record, fit


def backtest(
    curves: list[Curve], fit_fraction: float, skip_fraction: float = 0.0, pool: bool = True
) -> dict[str, Any]:
    """Median absolute error of the forecast and of persistence over curves, fitting the first `fit_fraction`.

    Curves shorter than 10 points (a first-20% / last-10% split means nothing) and curves whose fit window holds
    fewer than MIN_FIT_POINTS points are left out, as the CLI skips them.
    """
    usable = [c for c in curves if len(c.x) >= 10 and can_forecast(c, fit_fraction)]
    records = []
    for record, _ in forecast_curves(usable, fit_fraction, skip_fraction=skip_fraction, pool=pool):
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
