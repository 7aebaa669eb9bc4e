"""The runs `forecast` and `compare` show: each path's curves read, filtered by --column and by what a fit needs,
fitted per file (`evals.backtest.forecast_curves`), a run exported twice kept once, and each fit flagged.

Split from `evals.forecast_cli` (the commands, which re-export `_note`): the same runs feed both commands. Every
line here goes to stderr (`_note`); a path with nothing to forecast ends the command (`fail`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mathmix.cli_util import console, fail


def _check_forecast_options(
    fit_fraction: float, skip_fraction: float, n_boot: int | None, target: float | None, scale: str
) -> None:
    import math

    if not 0 < fit_fraction <= 1:
        fail(f"--fit-fraction must be in (0, 1] (got {fit_fraction})")
    if not 0 <= skip_fraction < 1:
        fail(f"--skip-fraction must be in [0, 1) (got {skip_fraction})")
    if n_boot is not None and n_boot < 0:
        fail(f"--n-boot must be >= 0 (got {n_boot})")
    if target is not None and not (math.isfinite(target) and target > 0):
        fail(f"--target must be a compute > 0 (got {target})")
    if scale not in ("auto", "fraction", "percent", "reward"):
        fail(f"--scale must be auto, fraction, percent or reward (got {scale!r})")


def _note(line: str) -> None:
    console.print(line, soft_wrap=True, markup=False, highlight=False)


def _read_curves(path: Path, compute_column: str | None, scale: str, step_hint: str | None = None) -> list:
    """PATH's curves as read (a run exported twice is kept in each file: each file is pooled on its own runs).

    `step_hint`: what a CSV without a Step column is told (default: --compute-column, which forecast takes).
    """
    from evals.curves import STEP_HINT, column_unit, load_curves

    if not path.exists():
        fail(f"not found: {path}")

    def skip_file(file: Path, reason: str) -> None:
        _note(f"skipped {file}: {reason.removeprefix(f'{file}: ')}")

    try:  # a single file that cannot be read is an error; in a folder it is skipped with a line
        curves = load_curves(
            path,
            compute_column,
            dedupe=False,
            on_error=None if path.is_file() else skip_file,
            report=_note,
            step_hint=step_hint or STEP_HINT,
        )
    except ValueError as err:
        fail(str(err))
    for curve in curves:
        try:
            curve.unit = column_unit(curve.y, scale)
        except ValueError as err:
            fail(f"run {curve.name!r} ({curve.source}): {err}")
    return curves


def _falls(curve: Any, k: int) -> str | None:
    """A note where the fitted points fall clearly (by 5% of the unit from their best third to their last)."""
    import numpy as np

    from evals.forecast import value_range

    seen = curve.y[:k]
    third = len(seen) // 3
    if third < 2:
        return None
    lo, hi = curve.unit or value_range(seen)
    means = np.convolve(seen, np.ones(third) / third, mode="valid")
    best, last = float(means.max()), float(means[-1])
    if best - last <= 0.05 * (hi - lo):
        return None
    return (
        f"warning: run {curve.name!r} ({curve.source}) falls over its fitted points ({best:.3g} -> {last:.3g}, "
        f"means of {third} points): the sigmoid only rises, so the forecast does not follow a fall"
    )


def _forecast_all(
    paths: list[Path],
    fit_fraction: float,
    target: float | None,
    skip_fraction: float,
    n_boot: int | None,
    compute_column: str | None,
    column: str | None,
    scale: str = "auto",
    with_source: bool = False,
    step_hint: str | None = None,
) -> list[tuple[dict, Any, Any, int]]:
    """(record, fit, curve, fitted points) per run of PATHS, a run exported twice (`curve_key`) shown once.

    Each file's runs are fitted together as read (the pooled gain prior counts every forecastable accuracy run of
    the file, whatever --column shows): a run's forecast is the same read from its file or from a folder.
    `with_source`: each record starts with "source", the PATH it was read through. `step_hint`: see `_read_curves`.
    """
    from evals.backtest import can_forecast, forecast_curves

    _check_forecast_options(fit_fraction, skip_fraction, n_boot, target, scale)
    results = []
    for path in paths:
        curves = _read_curves(path, compute_column, scale, step_hint)
        if not curves:
            from evals.curves import find_curve_files

            none = "" if path.is_file() or find_curve_files(path) else ": no CSV file in it"
            fail(
                f"no accuracy curve in {path}{none} (a CSV with a Step column, or a probe folder with "
                "validation.csv)"
            )
        shown = _shown_runs(path, curves, column, fit_fraction)
        if not shown:  # each short run was skipped with a line; the other paths are still ranked
            continue
        others = [c for c in curves if can_forecast(c, fit_fraction) and all(c is not s for s in shown)]
        pairs = forecast_curves(shown, fit_fraction, target, skip_fraction, n_boot or 0, pool_only=others)
        # "file" tells apart runs of the same column name read from a folder of CSVs.
        source = {"source": str(path)} if with_source else {}
        results += [
            (
                {**source, "run": record["run"], "file": curve.source, **record},
                fit,
                curve,
                record["fit_points"],
            )
            for (record, fit), curve in zip(pairs, shown, strict=True)
        ]
    if not results:
        from evals.backtest import MIN_FIT_POINTS

        at = f" at --fit-fraction {fit_fraction:g}" if fit_fraction < 1 else ""
        fail(f"no curve in {', '.join(map(str, paths))} has {MIN_FIT_POINTS} points or more to fit{at}")
    results = _drop_repeats(results)
    _flag_runs(results, target, fit_fraction)
    return results


def _shown_runs(path: Path, curves: list, column: str | None, fit_fraction: float) -> list:
    """The runs of PATH's CURVES that --column picks and that have the points a fit needs (each left out said)."""
    from evals.backtest import MIN_FIT_POINTS, can_forecast, fit_window
    from evals.curves import column_matches

    shown = [c for c in curves if column_matches(column or None, c.name)]
    if not shown:
        names = ", ".join(c.name for c in curves[:5]) + (", ..." if len(curves) > 5 else "")
        fail(f"no curve in {path} matches --column {column!r} (curves: {names})")
    # One rule for a short curve and a small --fit-fraction alike: the fit window must hold MIN_FIT_POINTS.
    at = f" at --fit-fraction {fit_fraction:g}" if fit_fraction < 1 else ""
    for c in shown:
        if not can_forecast(c, fit_fraction):
            _note(
                f"skipped run {c.name!r} ({c.source}): {fit_window(len(c.x), fit_fraction)} of its "
                f"{len(c.x)} points to fit{at}; a fit needs {MIN_FIT_POINTS} or more"
            )
    # none left in PATH is no error while another PATH has some: `_forecast_all` fails when none is left at all
    return [c for c in shown if can_forecast(c, fit_fraction)]


def _drop_repeats(results: list[tuple[dict, Any, Any, int]]) -> list[tuple[dict, Any, Any, int]]:
    """RESULTS with a run exported twice (`curve_key`) kept at its first, each dropped one said."""
    from evals.curves import first_of_each

    keep = first_of_each([curve for *_, curve, _ in results])
    for i in sorted(set(range(len(results))) - set(keep)):
        curve = results[i][2]
        first = next(results[j][2] for j in keep if j < i and _same(results[j][2], curve))
        _note(f"skipped run {curve.name!r} ({curve.source}): the same run and values as in {first.source}")
    return [results[i] for i in keep]


def _flag_runs(results: list[tuple[dict, Any, Any, int]], target: float | None, fit_fraction: float) -> None:
    """Each record's fit flags (`fit_flags`, and "falls" for a run that falls); a --target inside the fitted
    points of a back-test said once."""
    from evals.forecast_report import fit_flags

    for record, fit, curve, k in results:
        record["flags"] = fit_flags(fit)
        if note := _falls(curve, k):
            _note(note)
            record["flags"].append("falls")
    # a back-test (--fit-fraction < 1) whose --target lies inside the fit window compares the forecast with points
    # the fit saw: actual_final looked like a held-out check passed. Said once.
    inside = [c for r, _, c, k in results if r["actual_final"] is not None and r["target"] <= c.x[k - 1]]
    if inside and target is not None and fit_fraction < 1:
        names = ", ".join(repr(c.name) for c in inside[:3]) + (", ..." if len(inside) > 3 else "")
        _note(
            f"note: --target {target:g} lies within the fitted points of {len(inside)} run(s) ({names}): their "
            "actual_final is the mean of points the fit saw, not a held-out value"
        )


def _same(a: Any, b: Any) -> bool:
    from evals.curves import curve_key

    return curve_key(a) == curve_key(b)
