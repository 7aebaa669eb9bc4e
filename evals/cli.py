"""`mathmix eval`: bench (few-shot evals), rl-probe (GRPO), forecast, compare, sweep, sweep-fit."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from evals import probe_options as opt
from mathmix.cli_util import check_output, console, fail, on_interrupt, write_json

eval_app = typer.Typer(
    help="Few-shot math evals, the GRPO RL-readiness probe and the sigmoid forecast of its final accuracy.",
    no_args_is_help=True,
)


def default_bench_out(model: str) -> Path:
    """./eval-NAME; a run's export folder (RUN/train/export, RUN/train/STAGE/export) is named after its run."""
    path = Path(model)
    name = path.name or "model"
    if path.is_dir() and name == "export":
        above = [p.name for p in path.resolve().parents if p.name and p.name not in ("train", "branches")]
        name = f"{above[0]}-export" if above else name
    return Path(f"eval-{name}")


@eval_app.command("bench")
def bench_cmd(
    model: str = typer.Argument(..., help="HF model folder (e.g. RUN/train/export) or hub name."),
    suite: str = typer.Option(
        None,
        help="Named suite: octothinker (GSM8K 8, MATH500 4, OlympiadBench 4, "
        "AMC23 0, AIME24 0, OCW 4 shots; the default) or quick.",
    ),
    benchmarks: str = typer.Option(None, help="Instead of a suite: NAME[:SHOTS],... e.g. gsm8k:8,math500:4."),
    data_dir: Path = typer.Option(
        None,
        help="Benchmark folder (gsm8k/, math500/, qwen_eval/, ...); default ../shared/data/bench from the cwd, "
        "else next to the checkout.",
    ),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        help="Results folder (default ./eval-<model name>; for RUN/train/export, ./eval-<RUN>-export).",
    ),
    limit: int = typer.Option(None, help="Evaluate only the first N items of each benchmark (N >= 1)."),
    zero_shot: bool = typer.Option(
        False, help="No exemplars, a step-by-step \\boxed{} instruction (RL-tuned models)."
    ),
    prompt_file: Path = typer.Option(
        None, help="JSONL exemplars (question/problem + solution) instead of train splits."
    ),
    seed: int = typer.Option(0, help="Seed for drawing exemplars from each training split."),
    max_new_tokens: int = typer.Option(512, help="Generation budget per answer."),
    backend: str = typer.Option("auto", help="auto (vLLM on GPU, else transformers), vllm or transformers."),
    batch_size: int = typer.Option(8, help="Prompts per forward pass (transformers backend)."),
) -> None:
    """Greedy few-shot evals graded by math-verify.

    Reads MODEL and DATA_DIR; writes OUT/{benchmark}.json (accuracy + per-item records), OUT/results.json and
    OUT/job.json (the model, data and settings). A rerun of the same command keeps the benchmarks already
    finished and evaluates the rest; another model or other settings into the same OUT are refused.
    """

    from evals.bench import print_results_table, run_bench
    from evals.bench_dir import find_bench_dir
    from evals.benchmarks import parse_benchmarks

    if suite is not None and benchmarks:
        fail("--suite and --benchmarks exclude each other (--benchmarks names the benchmarks itself)")
    try:
        plan = parse_benchmarks(suite, benchmarks)
    except ValueError as err:
        fail(f"{'--benchmarks' if benchmarks else '--suite'}: {err}")
    for name, value in (
        ("--limit", limit),
        ("--max-new-tokens", max_new_tokens),
        ("--batch-size", batch_size),
    ):
        if value is not None and value < 1:
            fail(f"{name} must be >= 1 (got {value})")
    if backend not in ("auto", "vllm", "transformers"):
        fail(f"--backend must be auto, vllm or transformers (got {backend!r})")
    if prompt_file is not None and not prompt_file.is_file():
        fail(f"prompt file not found: {prompt_file} (--prompt-file)")
    try:
        data_dir = find_bench_dir(data_dir)
    except ValueError as err:
        fail(str(err))
    out = out or default_bench_out(model)
    check_output(out)
    on_interrupt(
        f"interrupted: the benchmarks finished are kept in {out}; rerun the same command to evaluate the rest"
    )
    try:
        summary = run_bench(
            model,
            plan,
            data_dir,
            out,
            limit=limit,
            zero_shot=zero_shot,
            prompt_file=prompt_file,
            seed=seed,
            max_new_tokens=max_new_tokens,
            backend=backend,
            batch_size=batch_size,
        )
    except ValueError as err:
        fail(str(err))
    print_results_table(summary)
    console.print(f"results: {out}/results.json")


@eval_app.command("rl-probe")
def rl_probe_cmd(
    model: str = typer.Argument(..., help="HF model folder to probe."),
    prompts: Path = opt.PROMPTS,
    data_dir: Path = opt.DATA_DIR,
    no_eval_sets: bool = opt.NO_EVAL_SETS,
    out: Path = typer.Option(Path("rl-probe"), "--out", "-o", help="Probe run folder."),
    steps: int = typer.Option(100, help="Rollout steps."),
    eval_every: int = typer.Option(10, help="Validate every K rollout steps."),
    prompts_per_step: int = opt.PROMPTS_PER_STEP,
    rollouts: int = opt.ROLLOUTS,
    mini_batch: int = typer.Option(64, help="Prompts per optimizer update."),
    micro_batch: int = opt.MICRO_BATCH,
    lr: float = typer.Option(1e-6),
    kl: float = typer.Option(0.0),
    temperature: float = typer.Option(1.0),
    max_response: int = opt.MAX_RESPONSE,
    heldout: int = opt.HELDOUT,
    heldout_samples: int = opt.HELDOUT_SAMPLES,
    math500_limit: int = opt.MATH500_LIMIT,
    seed: int = typer.Option(0),
    on_overlap: str = typer.Option("drop", help="drop | fail | warn on prompts overlapping eval sets."),
    vllm: str = typer.Option("auto", help="auto | on | off: vLLM generation (GPU)."),
    checkpoints: bool = typer.Option(
        True,
        help="Save the trainer state at each validation (the last one only, removed when the probe finishes), "
        "so a rerun resumes a killed probe; --no-checkpoints saves disk (a 3B model with Adam: ~36 GB).",
    ),
) -> None:
    """GRPO on MATH8K-style prompts with OctoThinker's settings, validated every K steps.

    Reads MODEL, PROMPTS and DATA_DIR; writes OUT/validation.csv (Step, rollouts, heldout_mean@n, math500,
    mean_response_length, ...), OUT/overlap.json, OUT/job.json, OUT/summary.json and, while it runs, the last
    checkpoint under OUT/trainer/; `mathmix eval forecast OUT` reads them. A rerun of the same command resumes
    from that checkpoint; another model, prompt file or settings into the same OUT are refused.
    """
    from evals.rl_probe import run_probe

    config = opt.build_config(
        prompts_per_step=prompts_per_step,
        rollouts=rollouts,
        mini_batch=mini_batch,
        micro_batch=micro_batch,
        learning_rate=lr,
        kl_coef=kl,
        temperature=temperature,
        max_response=max_response,
        steps=steps,
        eval_every=eval_every,
        heldout=heldout,
        heldout_samples=heldout_samples,
        math500_limit=math500_limit,
        seed=seed,
        on_overlap=on_overlap,
        vllm=vllm,
        checkpoints=checkpoints,
    )
    bench_dir = opt.check_inputs(prompts, data_dir, no_eval_sets, config)
    check_output(out)
    on_interrupt(
        f"interrupted: the probe resumes from its last checkpoint in {out}/trainer (saved at each validation) "
        "when the same command is rerun"
        if checkpoints
        else "interrupted: with --no-checkpoints a rerun of the same command starts the probe over"
    )
    try:
        summary = run_probe(model, prompts, out, config, bench_dir)
    except ValueError as err:
        fail(str(err))
    console.print_json(json.dumps(summary["last_validation"]))
    console.print(f"validation log: {out}/validation.csv")


_SCALE_HELP = (
    "Unit of the curves: auto (from each whole column as read: [0, 1] fractions, [0, 100] percentages, [-1, 1] "
    "rewards, the narrowest that holds every value), fraction, percent or reward."
)


def _results_console() -> Console:
    """Results (tables) go to stdout, messages stay on stderr (`console`); piped, a table is not cut to 80 columns."""
    return Console(width=None if sys.stdout.isatty() else 220)


def _check_forecast_options(
    fit_fraction: float, skip_fraction: float, n_boot: int, target: float | None, scale: str
) -> None:
    import math

    if not 0 < fit_fraction <= 1:
        fail(f"--fit-fraction must be in (0, 1] (got {fit_fraction})")
    if not 0 <= skip_fraction < 1:
        fail(f"--skip-fraction must be in [0, 1) (got {skip_fraction})")
    if n_boot < 0:
        fail(f"--n-boot must be >= 0 (got {n_boot})")
    if target is not None and not (math.isfinite(target) and target > 0):
        fail(f"--target must be a compute > 0 (got {target})")
    if scale not in ("auto", "fraction", "percent", "reward"):
        fail(f"--scale must be auto, fraction, percent or reward (got {scale!r})")


def _note(line: str) -> None:
    console.print(line, soft_wrap=True, markup=False, highlight=False)


def _check_out(out: Path | None, kind: str) -> None:
    """One line before any fitting where OUT cannot be written: a folder (forecast) or a JSON file (the others)."""
    if out is None:
        return
    if kind == "folder" and out.exists() and not out.is_dir():
        fail(f"{out}: exists and is not a folder; -o names the folder for forecast.json and forecast.png")
    if kind == "file" and out.is_dir():
        fail(f"{out}: is a folder; -o names the JSON file to write (e.g. {out / 'ranking.json'})")
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


def _base(curve_or_file: Any) -> str:
    """What a forecast row is a run of: a probe's folder, else the CSV it was read from."""
    source = Path(getattr(curve_or_file, "source", curve_or_file))
    return str(source.parent) if source.name == "validation.csv" else str(source)


def _read_curves(path: Path, compute_column: str | None, scale: str) -> list:
    """PATH's curves as read (a run exported twice is kept in each file: each file is pooled on its own runs)."""
    from evals.curves import column_unit, load_curves

    if not path.exists():
        fail(f"not found: {path}")

    def skip_file(file: Path, reason: str) -> None:
        _note(f"skipped {file}: {reason.removeprefix(f'{file}: ')}")

    try:  # a single file that cannot be read is an error; in a folder it is skipped with a line
        curves = load_curves(
            path, compute_column, dedupe=False, on_error=None if path.is_file() else skip_file, report=_note
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
    n_boot: int,
    compute_column: str | None,
    column: str | None,
    scale: str = "auto",
    with_source: bool = False,
) -> list[tuple[dict, Any, Any, int]]:
    """(record, fit, curve, fitted points) per run of PATHS, a run exported twice (`curve_key`) shown once.

    Each file's runs are fitted together as read (the pooled gain prior counts every forecastable accuracy run of
    the file, whatever --column shows): a run's forecast is the same read from its file or from a folder.
    `with_source`: each record starts with "source", the PATH it was read through.
    """
    from evals.backtest import MIN_FIT_POINTS, can_forecast, fit_window, forecast_curves
    from evals.curves import first_of_each

    _check_forecast_options(fit_fraction, skip_fraction, n_boot, target, scale)
    results = []
    for path in paths:
        curves = _read_curves(path, compute_column, scale)
        if not curves:
            fail(
                f"no accuracy curve in {path} (a CSV with a Step column, or a probe folder with validation.csv)"
            )
        shown = [c for c in curves if not column or column in c.name]
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
        pairs = forecast_curves(shown, fit_fraction, target, skip_fraction, n_boot, pool_only=others)
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
    for _, _, curve, k in results:
        if note := _falls(curve, k):
            _note(note)
    return results


def _same(a: Any, b: Any) -> bool:
    from evals.curves import curve_key

    return curve_key(a) == curve_key(b)


@eval_app.command("forecast")
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
    n_boot: int = typer.Option(40, help="Bootstrap resamples for the A, B, Cmid intervals (0: none)."),
    compute_column: str = typer.Option(
        None, help="Column to use as compute instead of Step (e.g. rollouts); a CSV without Step needs it."
    ),
    column: str = typer.Option(
        None, help="Only show run columns whose name contains this text (each file's runs are still pooled)."
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
    _check_out(out, "folder")
    results = _forecast_all(
        [path],
        fit_fraction,
        target,
        skip_fraction,
        0 if as_json and out is None else n_boot,  # --json alone prints no interval: no resamples
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
    plot_forecasts([(c, f, k) for _, f, c, k in results], out / "forecast.png", target)
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
    table = Table(title=title)
    names = ["rank"] * ranked + ["base"] * show_base
    names += ["run", "A [5-95%]", "B", "Cmid", "predicted", "actual", "persistence"]
    for name in names:
        table.add_column(name, justify="left" if name in ("base", "run") else "right", overflow="fold")
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
        ]
        table.add_row(*row)
    _results_console().print(table)


def _tail(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3) :]


@eval_app.command("compare")
def compare_cmd(
    paths: list[Path] = typer.Argument(..., help="Probe folders or curve CSVs, one or more bases."),
    column: str = typer.Option("heldout", help="Curve to rank on: columns whose name contains this text."),
    n_boot: int = typer.Option(40, help="Bootstrap resamples for the A intervals."),
    scale: str = typer.Option("auto", help=_SCALE_HELP),
    out: Path = typer.Option(None, "--out", "-o", help="Write the ranking to OUT (JSON)."),
) -> None:
    """Rank bases by forecast asymptote A (the accuracy RL would saturate at).

    Reads PATHS; prints the ranking to stdout (rank, base: the probe folder or CSV, run); a run given twice (a
    W&B run exported to two files) is ranked once.
    """
    from evals.forecast_report import rank_by_asymptote

    _check_out(out, "file")
    results = _forecast_all(paths, 1.0, None, 0.0, n_boot, None, column, scale, with_source=True)
    ranked = rank_by_asymptote([record for record, *_ in results])
    if out:
        write_json(out, ranked)
    _print_forecasts(ranked, title="bases ranked by forecast A")
    if out:
        _note(f"wrote {out}")


def register(app: typer.Typer) -> None:
    """Add the `eval` group to the root CLI."""
    from evals.sweep_cli import add_sweep_commands

    add_sweep_commands(eval_app)
    app.add_typer(eval_app, name="eval")
