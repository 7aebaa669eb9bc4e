"""`mathmix eval forecast` / `compare`: the sigmoid forecast of RL validation curves, and bases ranked by it.

Each file's runs are fitted together as read (`evals.backtest.forecast_curves` pools the gain prior over them); a
run exported to two files is shown once. Tables and JSON results go to stdout, every other line to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console

from evals.forecast_runs import _check_forecast_options, _forecast_all, _note
from mathmix.cli_util import fail, write_json

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
