"""Forecast outputs: the PNG of points, fit and band; ranking bases by forecast A; the LR / batch-size sweep fit."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from evals.curves import Curve, metric_part
from evals.forecast import SigmoidFit

MAX_PANELS = 30  # a folder of 100+ curves would make an unreadable poster; forecast.json holds them all


def plot_forecasts(
    items: list[tuple[Curve, SigmoidFit, int]],
    path: Path,
    target: float | None = None,
    x_label: str = "Step",
) -> Path:
    """One panel per curve (the first MAX_PANELS, said in the title when there are more): observed points (fitted
    ones filled), posterior-mean fit, band, and the --target compute as a dashed line. `x_label`: the compute
    axis (Step, or --compute-column's; every panel said "compute", whatever the axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    total = len(items)
    items = items[:MAX_PANELS]
    cols = min(3, len(items))
    rows = math.ceil(len(items) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, (curve, fit, k) in zip(axes.flat, items, strict=False):
        end = max(float(curve.x[-1]), target or 0.0)
        grid = np.linspace(max(float(curve.x[0]), 1e-9), end, 200)
        lo, hi = fit.band(grid)
        ax.fill_between(grid, lo, hi, alpha=0.25, label="5-95% band")
        ax.plot(grid, fit.predict(grid), label="forecast")
        ax.scatter(curve.x[:k], curve.y[:k], s=10, label="fitted points")
        if k < len(curve.x):
            ax.scatter(curve.x[k:], curve.y[k:], s=10, facecolors="none", edgecolors="gray", label="held out")
        params = fit.params()
        ax.set_title(
            f"{_short(curve.name)}\nA={params['A']:.3f} B={params['B']:.2f} Cmid={params['Cmid']:.3g}",
            fontsize=8,
        )
        if target is not None:
            ax.axvline(target, color="gray", linestyle="--", linewidth=0.8, label=f"--target {target:g}")
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label(curve.name, fit.scale), fontsize=8)
    for ax in list(axes.flat)[len(items) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    top = 1.0
    if total > len(items):
        fig.suptitle(f"the first {len(items)} of {total} runs (forecast.json holds them all)", fontsize=10)
        top -= 0.5 / (3.6 * rows)  # half an inch for the title above the panels
    fig.tight_layout(rect=(0, 0, 1, top))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def y_label(name: str, scale: tuple[float, float]) -> str:
    """The metric a panel shows: its name (the part after "RUN - " in a W&B column) and what it measures."""
    metric = metric_part(name)
    if scale[0] < 0 or "reward" in metric.lower():
        kind = "reward"
    else:
        kind = "accuracy (%)" if scale[1] == 100 else "accuracy"
    return f"{_short(metric, 30)} ({kind})"


def _names(names: list[str]) -> str:
    return f"{len(names)} run(s): " + ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else "..." + name[-width:]


PERCENT = (0.0, 100.0)


AT_BOUND = 0.01  # of the metric's range: a MAP this close to an end of its range is held there by the bound


def fit_flags(fit: SigmoidFit) -> list[str]:
    """What makes a fit's A no measurement: `A at bound` where the posterior's mode (MAP) sits at the top or the
    bottom of the metric's range (1 for fractions and rewards, 100 in percent; 0, or -1 for rewards), i.e. the
    curve does not bound its asymptote and the bound does; `A unbounded above` where the MAP is below the top but
    A's posterior 95% quantile is within AT_BOUND of it (A 5-95% [0.70, 0.99] on [0, 1]): 5% or more of the
    posterior presses on the top of the grid, so the curve bounds A from below only; `B at bound` where the rise
    is as slow as the B grid allows (a near-straight line in log compute, whose A is the prior's extrapolation).
    A curve still rising at 1.6 points a step was ranked first with A 1.000 [1.000, 1.000].

    Why the 95% quantile and not a wider interval: ../shared/data/rl_curves has 1 such fit in 108 (a gsm8k run,
    MAP 0.916, A [0.832, 0.992]); the posterior's prior on A (a half-normal above the best value seen) keeps the
    others' upper quantile below the top, so the flag marks the rare fit it does not, not every rising curve."""
    from evals.forecast import B_GRID

    flags = []
    lo, hi = fit.scale
    top = (fit.intervals["A"][1] - lo) / (hi - lo) if "A" in fit.intervals and hi > lo else None
    if fit.a <= AT_BOUND or fit.a >= 1 - AT_BOUND:  # fit.a is on [0, 1] of the metric's range
        flags.append("A at bound")
    elif top is not None and top >= 1 - AT_BOUND:
        flags.append("A unbounded above")
    if fit.b <= float(B_GRID[0]) * (1 + AT_BOUND):
        flags.append("B at bound")
    return flags


def rank_by_asymptote(
    records: list[dict[str, Any]], units: list[tuple[float, float] | None] | None = None
) -> list[dict[str, Any]]:
    """Bases sorted by forecast A (highest first), with its posterior 5-95% interval; records with `flags` (A or B
    at a bound, A unbounded above, a run that falls: `fit_flags`, the CLI's falls check) after all the others,
    by A among themselves.

    `units`: each record's unit (`Curve.unit`). Where runs in percent are ranked with runs that are not (one base
    exported in percent, another as fractions), a percent run's A counts as A / 100: a raw 50.5 outranked 0.594.
    """
    factor = fraction_factors(units, len(records))
    order = sorted(
        range(len(records)), key=lambda i: (bool(records[i].get("flags")), -records[i]["A"] * factor[i])
    )
    return [{"rank": rank + 1, **records[i]} for rank, i in enumerate(order)]


def mixes_units(units: list[tuple[float, float] | None] | None) -> bool:
    """Whether runs in percent come with runs that are not (one base exported in percent, another as fractions)."""
    return units is not None and PERCENT in units and any(u != PERCENT for u in units)


def fraction_factors(units: list[tuple[float, float] | None] | None, n: int) -> list[float]:
    """Per run, what its A is multiplied by to compare with the others: 1/100 for percent runs among others."""
    mixed = mixes_units(units)
    return [0.01 if mixed and u == PERCENT else 1.0 for u in (units or [None] * n)]


# `mb` is the mini-batch (prompts per update) as `eval sweep` names its folders (`lr1e-06_mb64`) and verl / W&B
# exports name runs (`qwen_lr1e-6_mb64`); it was not read, and such a sweep was fitted on lr alone.
_HPARAM = re.compile(r"(?:^|[_\-/.])(lr|bs|mb|batch|batch_size)[=_\-]?([0-9.]+(?:e-?[0-9]+)?)", re.IGNORECASE)


def parse_hparams(name: str) -> dict[str, float]:
    """Learning rate and batch size from a run name like `probe_lr1e-6_bs64` or `qwen_lr1e-6_mb64` (empty where
    absent): `lr`, and for the batch size `bs`, `mb`, `batch` or `batch_size`, at the start of the name or after
    `_`, `-`, `/` or `.`, then the number, directly or after one `=`, `_` or `-` (`bs64`, `mb_64`, `lr=1e-6`)."""
    found: dict[str, float] = {}
    for key, value in _HPARAM.findall(name):
        try:
            found["lr" if key.lower() == "lr" else "batch_size"] = float(value.rstrip("."))
        except ValueError:
            continue
    return found


def run_label(record: dict[str, Any]) -> str:
    """What names a sweep run in a message: a probe's folder (its column is the metric, `heldout_mean@4`, in every
    probe), else the run column."""
    file = Path(str(record.get("file", "")))
    return str(file.parent) if file.name == "validation.csv" else str(record.get("run"))


def record_units(records: list[dict[str, Any]]) -> list[tuple[float, float] | None]:
    """Each sweep record's unit (`Curve.unit`, kept as `unit` by `sweep_records`), None where it has none."""
    return [tuple(r["unit"]) if "unit" in r else None for r in records]


def fit_sweep(records: list[dict[str, Any]]) -> dict[str, Any]:
    """How forecast A and log Cmid move with log LR and log batch size (least squares over the sweep's runs).

    The regressors are natural logs centred at the sweep's geometric mean (`centre`): `intercept` is the value
    at a typical setting of the sweep, not at lr = 1, batch size = 1 (far outside any sweep). Each slope comes
    with its OLS standard error and a 90% t interval (`stderr_slope_log_K`, `interval90_slope_log_K`), null
    with an `interval_note` where there are no more runs than fitted parameters (`sweep_warnings` says so on
    stderr), and a `slope_notes` entry where the interval includes 0. OLS, not weighted by the runs' posterior
    widths: the spread of A between runs is mostly the run-to-run noise a single run's posterior does not see.

    Where percent runs come with others (each record's `unit`), their A is fitted as A / 100 (as
    `rank_by_asymptote` ranks them), and the fit is in fractions.

    Each record needs `A`, `Cmid` and at least one of `lr`, `batch_size`. Returns per target the intercept and
    the slope per hyperparameter that varies, the R^2, and the best run by A. The R^2 is None, with an `r2_note`
    saying why, where it means nothing: every run has the same value (0 / 0), or there are no more runs than
    fitted parameters (any values are fitted exactly). A hyperparameter with one value in
    every run is reported under `fixed` and left out of the fit: its log column is a multiple of the intercept's,
    so lstsq would split the intercept between the two and report a slope that means nothing. One that only some
    runs carry is left out too, and listed under `ignored` with the runs that lack it. Where LR and batch size
    move together in every run (a sweep that scales one with the other), their slopes cannot be told apart: the
    fit is on LR alone and `confounded` says so.
    """
    factor = fraction_factors(record_units(records), len(records))
    present = [k for k in ("lr", "batch_size") if records and all(k in r for r in records)]
    ignored = {
        k: [run_label(r) for r in records if k not in r]
        for k in ("lr", "batch_size")
        if k not in present and any(k in r for r in records)
    }
    bad = next((r for r in records for k in present if not r[k] > 0), None)
    if bad is not None:
        raise ValueError(f"run {run_label(bad)!r}: lr and batch_size must be > 0 for a log-scale fit")
    fixed = {k: records[0][k] for k in present if np.ptp(np.log([r[k] for r in records])) < 1e-9}
    keys = [k for k in present if k not in fixed]
    if not keys:
        if not fixed and not ignored:
            raise ValueError("a sweep fit needs an lr and/or batch_size per run, and no run gives either")
        detail = [f"every run has {', '.join(f'{k} {v:g}' for k, v in fixed.items())}"] if fixed else []
        detail += [f"{k} missing for {_names(runs)}" for k, runs in ignored.items()]
        # where some runs lack a value, the others may well differ: the runs that lack it are what to fix
        need = (
            "an lr and/or batch_size from every run" if ignored else "runs whose lr and/or batch_size differ"
        )
        lacking = [r for r in records if any(k not in r for k in ignored)]
        unfinished = any(Path(str(r.get("file", ""))).name == "validation.csv" for r in lacking)
        hint = (
            ": a probe folder's lr and batch size come from its summary.json, which an unfinished probe does not have yet; "
            "rerun the sweep (or the probe) to finish it"
            if unfinished
            else ""
        )
        raise ValueError(f"a sweep fit needs {need} ({'; '.join(detail)}){hint}")
    if len(records) < len(keys) + 1:
        raise ValueError(f"a sweep fit over {' and '.join(keys)} needs {len(keys) + 1} runs or more")
    logs = {k: np.log([r[k] for r in records]) for k in keys}
    centre = {k: float(np.exp(logs[k].mean())) for k in keys}
    design = np.column_stack([np.ones(len(records))] + [logs[k] - logs[k].mean() for k in keys])
    confounded = {}
    if len(keys) == 2 and np.linalg.matrix_rank(design) < 3:  # lr and batch size moved together in every run
        confounded = {"batch_size": "moves with lr in every run (log batch_size is linear in log lr): their "
                                    "effects cannot be told apart, so the fit is on lr alone"}  # fmt: skip
        keys = ["lr"]
        design = design[:, :2]
        centre = {"lr": centre["lr"]}
    # Runs beyond the fitted parameters: with none (2 runs for intercept + 1 slope, 3 for intercept + 2 slopes)
    # any values are fitted exactly, and an R^2 of 1 says nothing.
    spare = len(records) - int(np.linalg.matrix_rank(design))
    out: dict[str, Any] = {"hyperparameters": keys, "fixed": fixed, "runs": len(records), "ignored": ignored}
    out["confounded"] = confounded
    out["centre"] = centre
    out["regressors"] = "natural log of each hyperparameter minus the log of its centre (the geometric mean)"
    for target, values in (
        ("A", [r["A"] * f for r, f in zip(records, factor, strict=True)]),
        ("log_Cmid", np.log([r["Cmid"] for r in records])),
    ):
        values = np.asarray(values, dtype=float)
        coef, *_ = np.linalg.lstsq(design, values, rcond=None)
        resid = values - design @ coef
        total = float(((values - values.mean()) ** 2).sum())
        fit: dict[str, Any] = {
            "intercept": float(coef[0]),
            **{f"slope_log_{k}": float(c) for k, c in zip(keys, coef[1:], strict=True)},
        }
        if np.ptp(values) <= 1e-12 * max(1.0, float(np.abs(values).max())):
            fit["r2"] = None  # R^2 = 1 - SS_res / SS_tot is 0 / 0: nothing varies to explain
            fit["r2_note"] = f"every run has the same {target}: no variance to explain"
        elif spare <= 0:
            fit["r2"] = None
            fit["r2_note"] = (
                f"{len(records)} runs for {design.shape[1]} fitted parameters (intercept and "
                f"{' and '.join(f'log {k}' for k in keys)}): a perfect fit by construction"
            )
        else:
            fit["r2"] = 1 - float((resid**2).sum()) / total
        fit.update(_slope_uncertainty(design, resid, keys, coef, spare))
        out[target] = fit
    out["best_by_A"] = records[max(range(len(records)), key=lambda i: records[i]["A"] * factor[i])]
    return out


def _slope_uncertainty(
    design: np.ndarray, resid: np.ndarray, keys: list[str], coef: np.ndarray, spare: int
) -> dict[str, Any]:
    """Each slope's OLS standard error and 90% t interval (df = runs - fitted parameters); null, with an
    `interval_note`, where no run is spare; `slope_notes` for a slope whose interval includes 0."""
    names = [f"slope_log_{k}" for k in keys]
    if spare <= 0:
        note = (
            f"{design.shape[0]} runs for {design.shape[1]} fitted parameters: the slopes fit the runs exactly, "
            "with no residual to tell their uncertainty (a sweep needs more runs than parameters)"
        )
        return {**{f"stderr_{n}": None for n in names}, **{f"interval90_{n}": None for n in names},
                "interval_note": note}  # fmt: skip
    from scipy.stats import t

    sigma2 = float((resid**2).sum()) / spare
    cov = sigma2 * np.linalg.pinv(design.T @ design)
    half = float(t.ppf(0.95, spare))
    out: dict[str, Any] = {}
    notes = {}
    for i, name in enumerate(names, start=1):
        err = math.sqrt(max(float(cov[i, i]), 0.0))
        lo, hi = float(coef[i]) - half * err, float(coef[i]) + half * err
        out[f"stderr_{name}"] = err
        out[f"interval90_{name}"] = [lo, hi]
        if lo <= 0 <= hi:
            notes[name] = f"90% interval [{lo:.3g}, {hi:.3g}] includes 0: the sweep does not tell its sign"
    if notes:
        out["slope_notes"] = notes
    return out


def sweep_warnings(fit: dict[str, Any]) -> list[str]:
    """The stderr lines a sweep fit needs: where no run is spare, its slopes are exact fits with no uncertainty."""
    note = fit.get("A", {}).get("interval_note")
    if not note:
        return []
    return [f"warning: {note.split(':')[0]}: the slopes have no uncertainty and may be far from the truth; "
            "run more settings"]  # fmt: skip
