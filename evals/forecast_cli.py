"""`mathmix eval forecast` / `compare`: the sigmoid forecast of RL validation curves, and bases ranked by it.

Each file's runs are fitted together as read (`evals.backtest.forecast_curves` pools the gain prior over them); a
run exported to two files is shown once. Tables and JSON results go to stdout, every other line to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from mathmix.cli_util import console, fail, write_json

# compare and sweep-fit read the compute from a Step column: they have no --compute-column to point to.
NO_STEP_HINT = (
    "compare and sweep-fit read the compute from a column named Step (forecast takes --compute-column)"
)


def add_forecast_commands(app: typer.Typer) -> None:
    """Register `forecast` and `compare` on the eval group."""
    app.command("forecast")(forecast_cmd)
    app.command("compare")(compare_cmd)


_SCALE_HELP = (
    "Unit of the curves: auto (from each whole column as read: [0, 1] fractions, [0, 100] percentages, [-1, 1] "
    "rewards, the narrowest that holds every value), fraction, percent or reward."
)


# --n-boot is a contract (scripts pass it): accepted, checked, and not used since the intervals come from the
# posterior the forecast already computes (a residual bootstrap around the MAP gave zero-width intervals on flat
# curves and intervals that missed the reported value).
_N_BOOT_HELP = (
    "Deprecated, not used: the A, B, Cmid intervals are the posterior's 5-95% quantiles, with no resampling "
    "(accepted, >= 0, so that scripts passing it keep working)."
)


def _results_console() -> Console:
    """Results (tables) go to stdout, messages stay on stderr (`console`); piped, a table is not cut to 80 columns."""
    return Console(width=None if sys.stdout.isatty() else 220)


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


def check_out(out: Path | None, kind: str, example: str = "ranking.json") -> None:
    """One line before any fitting where OUT cannot be written: a folder (forecast) or a JSON file (the others,
    EXAMPLE being the file name the message suggests)."""
    if out is None:
        return
    if kind == "folder" and out.exists() and not out.is_dir():
        fail(f"{out}: exists and is not a folder; -o names the folder for forecast.json and forecast.png")
    if kind == "file" and out.is_dir():
        fail(f"{out}: is a folder; -o names the JSON file to write (e.g. {out / example})")
    blocked = next((p for p in out.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        fail(f"{out}: {blocked} is a file, not a folder")


def default_forecast_out(path: Path) -> Path:
    """./forecast-NAME in the current folder, never inside PATH; NAME tells experiments apart.

    A CSV: its folder and stem (`forecast-analysis_qa-acc_math500`: every experiment has an acc_math500.csv); a
    probe's validation.csv or a folder: the folder's name.
    """
    resolved = path.resolve()
    if resolved.is_dir():
        name = resolved.name or "curves"
    elif resolved.name == "validation.csv" or not resolved.parent.name:
        name = resolved.parent.name or resolved.stem
    else:
        name = f"{resolved.parent.name}-{resolved.stem}"
    return Path(f"forecast-{name}")


def _base(file: str) -> str:
    """What a forecast row is a run of: a probe's folder, else the CSV it was read from."""
    source = Path(file)
    return str(source.parent) if source.name == "validation.csv" else str(source)


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
    from evals.backtest import MIN_FIT_POINTS, can_forecast, fit_window, forecast_curves
    from evals.curves import column_matches, first_of_each

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
        shown = [c for c in shown if can_forecast(c, fit_fraction)]
        if not shown:
            fail(f"no curve in {path} has {MIN_FIT_POINTS} points or more to fit{at}")
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
    keep = first_of_each([curve for *_, curve, _ in results])
    for i in sorted(set(range(len(results))) - set(keep)):
        curve = results[i][2]
        first = next(results[j][2] for j in keep if j < i and _same(results[j][2], curve))
        _note(f"skipped run {curve.name!r} ({curve.source}): the same run and values as in {first.source}")
    results = [results[i] for i in keep]
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
    return results


def _same(a: Any, b: Any) -> bool:
    from evals.curves import curve_key

    return curve_key(a) == curve_key(b)


def forecast_cmd(
    path: Path = typer.Argument(
        ..., help="Curve CSV (Step + one column per run), a probe folder, or a folder of CSVs."
    ),
    fit_fraction: float = typer.Option(
        1.0,
        help="Fit on the first ceil(F x n) of each curve's points (back-test); a curve left with fewer than 3 is "
        "skipped, with a line saying so.",
    ),
    target: float = typer.Option(None, help="Compute to forecast at (default: each curve's last compute)."),
    skip_fraction: float = typer.Option(0.0, help="Early fraction of the fitted points left out of the fit."),
    n_boot: int = typer.Option(None, help=_N_BOOT_HELP),
    compute_column: str = typer.Option(
        None, help="Column to use as compute instead of Step (e.g. rollouts); a CSV without Step needs it."
    ),
    column: str = typer.Option(
        None,
        help="Only show run columns whose name contains this text, case aside (each file's runs are still pooled).",
    ),
    scale: str = typer.Option("auto", help=_SCALE_HELP),
    as_json: bool = typer.Option(
        False,
        "--json",
        help='Print [{"run", "file", "predicted_final", "actual_final"}] only (with -o, also write OUT).',
    ),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        help="Folder for forecast.json and forecast.png (default: ./forecast-<folder> for a folder or probe, "
        "./forecast-<folder>-<csv stem> for a CSV; never inside PATH).",
    ),
) -> None:
    """Fit R(C) = R0 + (A - R0) / (1 + (Cmid / C)^B) to each accuracy curve and forecast the final accuracy.

    Reads PATH; prints a table to stdout (with --json, one JSON array instead) and writes OUT/forecast.json (all
    parameters, intervals) and OUT/forecast.png (points, fit, 5-95% band); --json writes them only with -o.
    """
    _check_forecast_options(fit_fraction, skip_fraction, n_boot, target, scale)
    if out is None and not as_json:
        out = default_forecast_out(path)
        if path.is_dir() and Path.cwd().resolve().is_relative_to(path.resolve()):
            fail(f"the current folder is inside {path}: the default {out} would land in the input; pass -o")
    check_out(out, "folder")
    results = _forecast_all(
        [path],
        fit_fraction,
        target,
        skip_fraction,
        n_boot,
        compute_column,
        column,
        scale,
    )
    if as_json:
        keys = ("run", "file", "predicted_final", "actual_final")
        sys.stdout.write(json.dumps([{k: r[k] for k in keys} for r, *_ in results], indent=1) + "\n")
    if out is None:
        return
    from evals.forecast_report import MAX_PANELS, plot_forecasts

    if (out / "forecast.json").exists():
        _note(f"replacing the earlier forecast in {out} (forecast.json, forecast.png)")
    write_json(out / "forecast.json", [r for r, *_ in results])
    plot_forecasts(
        [(c, f, k) for _, f, c, k in results], out / "forecast.png", target, compute_column or "Step"
    )
    if not as_json:
        _print_forecasts([r for r, *_ in results])
    if len(results) > MAX_PANELS:
        _note(
            f"forecast.png draws the first {MAX_PANELS} of {len(results)} runs; forecast.json holds them all"
        )
    _note(f"wrote {out}/forecast.json and {out}/forecast.png")


def _print_forecasts(records: list[dict], title: str = "RL forecast") -> None:
    """The table on stdout; a `base` column (probe folder or CSV) where the runs come from more than one."""
    from rich.table import Table

    bases = [_base(r["file"]) for r in records]
    ranked = bool(records) and "rank" in records[0]
    show_base = ranked or len(set(bases)) > 1
    flagged = any(r.get("flags") for r in records)
    caption = None
    if flagged:
        caption = (
            "flags: A or B held at a bound of its range, A's interval reaching the top, or a run that falls; "
        ) + ("flagged fits are ranked after the others" if ranked else "their A is no measured asymptote")
    table = Table(title=title, caption=caption)
    names = ["rank"] * ranked + ["base"] * show_base
    names += ["run", "A [5-95%]", "B", "Cmid", "predicted", "actual", "persistence"] + ["flags"] * flagged
    for name in names:
        table.add_column(
            name, justify="left" if name in ("base", "run", "flags") else "right", overflow="fold"
        )
    for r, base in zip(records, bases, strict=True):
        lo_hi = r.get("intervals", {}).get("A")
        a = f"{r['A']:.3f}" + (f" [{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]" if lo_hi else "")
        actual = "-" if r["actual_final"] is None else f"{r['actual_final']:.3f}"
        row = ([str(r["rank"])] if ranked else []) + ([_tail(base, 40)] if show_base else [])
        row += [
            _tail(r["run"], 50),
            a,
            f"{r['B']:.2f}",
            f"{r['Cmid']:.3g}",
            f"{r['predicted_final']:.3f}",
            actual,
            f"{r['persistence']:.3f}",
        ] + [", ".join(r.get("flags", []))] * flagged
        table.add_row(*row)
    _results_console().print(table)


def _tail(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def compare_cmd(
    paths: list[Path] = typer.Argument(..., help="Probe folders or curve CSVs, one or more bases."),
    column: str = typer.Option(
        "heldout",
        help="Curve to rank on: columns whose name contains this text, case aside (W&B exports: e.g. test_score).",
    ),
    n_boot: int = typer.Option(None, help=_N_BOOT_HELP),
    scale: str = typer.Option("auto", help=_SCALE_HELP),
    out: Path = typer.Option(None, "--out", "-o", help="Write the ranking to OUT (JSON)."),
) -> None:
    """Rank bases by forecast asymptote A (the accuracy RL would saturate at).

    Reads PATHS; prints the ranking to stdout (rank, base: the probe folder or CSV, run); a run given twice (a
    W&B run exported to two files) is ranked once.
    """
    from evals.forecast_report import PERCENT, mixes_units, rank_by_asymptote

    check_out(out, "file")
    results = _forecast_all(
        paths, 1.0, None, 0.0, n_boot, None, column, scale, with_source=True, step_hint=NO_STEP_HINT
    )
    units = [curve.unit for _, _, curve, _ in results]
    if mixes_units(units):
        percent = sorted({curve.source for _, _, curve, _ in results if curve.unit == PERCENT})
        shown = ", ".join(percent[:3]) + (", ..." if len(percent) > 3 else "")
        _note(
            f"note: the runs of {shown} are in percent and the others are not: they are ranked by A / 100 (the "
            "table and JSON keep each run's own unit)"
        )
    ranked = rank_by_asymptote([record for record, *_ in results], units)
    if out:
        write_json(out, ranked)
    _print_forecasts(ranked, title="bases ranked by forecast A")
    if out:
        _note(f"wrote {out}")
