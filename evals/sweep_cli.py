"""`mathmix eval sweep` / `sweep-fit`: probe runs over learning rates and batch sizes, and how A and Cmid move.

A probe folder's hyperparameters come from its summary.json (learning_rate, mini_batch); a CSV column's from its
name (`..._lr1e-6_bs64`).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from evals import probe_options as opt
from mathmix.cli_util import console, fail, write_json


def probe_runs(paths: list[Path]) -> list[Path]:
    """PATHS with a sweep folder (no validation.csv of its own, probe folders below) replaced by its probe folders."""
    runs: list[Path] = []
    for path in paths:
        below = (
            []
            if (path / "validation.csv").exists() or not path.is_dir()
            else sorted(p for p in path.iterdir() if (p / "validation.csv").is_file())
        )
        runs += below or [path]
    return runs


def _probe_hparams(folder: Path) -> dict[str, Any]:
    """lr and batch size from a probe folder's summary.json `config` (learning_rate, mini_batch); {} without one."""
    summary = folder / "summary.json"
    if not summary.is_file():
        return {}
    try:
        config = json.loads(summary.read_text()).get("config", {})
    except (ValueError, AttributeError) as err:
        raise ValueError(f"{summary}: not a probe summary ({err})") from None
    if not isinstance(config, dict):  # `"config": []` was an AttributeError traceback
        raise ValueError(
            f"{summary}: not a probe summary (its config is {type(config).__name__}, not an object)"
        )
    found = {"lr": config.get("learning_rate"), "batch_size": config.get("mini_batch")}
    for key, value in found.items():  # "1e-6" (a string) was a TypeError traceback in the fit
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            name = "learning_rate" if key == "lr" else "mini_batch"
            raise ValueError(f"{summary}: config.{name} is {value!r}, not a number")
    return found


# what a sweep varies, and what a resumed probe may change without changing its curve (`probe_identity`)
_SWEPT = {"learning_rate", "mini_batch", "checkpoints", "vllm", "micro_batch"}


def _check_same_settings(records: list[dict[str, Any]]) -> None:
    """ValueError naming the setting and the probe folders where probes differ beyond lr and mini-batch (a sweep
    rerun with another --max-response, say): one fit of both mixes two sweeps. Each probe's settings are the
    `config` of its summary.json; a run without one (a CSV column, an unfinished probe) is not compared."""
    seen: dict[str, dict[str, list[str]]] = {}  # setting -> its value (as JSON) -> the probe folders
    for record in records:
        folder = Path(str(record.get("file", ""))).parent
        if (
            Path(str(record.get("file", ""))).name != "validation.csv"
            or not (folder / "summary.json").is_file()
        ):
            continue
        try:
            config = json.loads((folder / "summary.json").read_text()).get("config", {})
        except (OSError, ValueError, AttributeError):
            continue  # `_probe_hparams` has said what is wrong with it
        if isinstance(config, dict):
            for key, value in config.items():
                if key not in _SWEPT:
                    seen.setdefault(key, {}).setdefault(json.dumps(value), []).append(str(folder))
    differ = {k: v for k, v in seen.items() if len(v) > 1}  # a setting an older summary lacks is not compared
    if differ:
        parts = []
        for key, values in differ.items():
            shown = [f"{value} in {', '.join(folders[:3])}{', ...' if len(folders) > 3 else ''}"
                     for value, folders in values.items()]  # fmt: skip
            parts.append(f"{key}: {'; '.join(shown)}")
        raise ValueError(
            "the probes differ in more than lr and mini-batch, so one fit would mix two sweeps ("
            + " | ".join(parts)
            + "): fit the probes of one sweep, or rerun them with the same settings"
        )


def sweep_records(
    paths: list[Path], column: str, report: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Forecast the `column` curve of each probe folder / CSV column and attach its lr and batch size.

    A sweep folder stands for its probe folders (`probe_runs`). Each curve is forecast as `eval forecast` and
    `compare` forecast it: the runs of its file pooled as read (a probe's held-out curve with its MATH500), the
    unit from the whole column; a run exported twice counts once. A probe's lr and batch size come from the
    summary.json next to its validation.csv, a CSV column's from its name (`..._lr1e-6_bs64`); none found for
    any run is a ValueError that says where they were looked for. `report` gets a line for each run left out
    for having fewer than 3 points (a probe killed after two validations used to vanish from the fit).
    """
    from evals.backtest import MIN_FIT_POINTS, can_forecast, forecast_curves
    from evals.curves import Curve, column_matches, column_unit, first_of_each, load_curves
    from evals.forecast_cli import NO_STEP_HINT
    from evals.forecast_report import parse_hparams, run_label

    runs = probe_runs(paths)
    found_runs: list[tuple[dict[str, Any], Curve]] = []  # (record, its curve), a run exported twice as often
    seen_names: list[str] = []  # every curve's name, for the error where --column matches none
    for path in runs:
        curves = load_curves(path, dedupe=False, report=report, step_hint=NO_STEP_HINT)
        seen_names += [c.name for c in curves if c.name not in seen_names]
        for curve in curves:
            if column_matches(column, curve.name) and not can_forecast(curve, 1.0) and report is not None:
                report(
                    f"skipped run {curve.name!r} ({curve.source}): {len(curve.x)} point(s); a fit needs "
                    f"{MIN_FIT_POINTS} or more"
                )
        curves = [c for c in curves if can_forecast(c, 1.0)]
        for curve in curves:
            curve.unit = column_unit(curve.y)
        shown = [c for c in curves if column_matches(column, c.name)]
        if not shown:
            continue
        others = [c for c in curves if all(c is not s for s in shown)]
        for (record, _), curve in zip(forecast_curves(shown, pool_only=others), shown, strict=True):
            probe = Path(curve.source).name == "validation.csv"
            hparams = (_probe_hparams(Path(curve.source).parent) if probe else {}) or parse_hparams(
                curve.name
            )
            found = {k: v for k, v in hparams.items() if v is not None}
            unit = {"unit": list(curve.unit)} if curve.unit else {}
            found_runs.append(({"source": str(path), "file": curve.source, **record, **found, **unit}, curve))
    records = [found_runs[i][0] for i in first_of_each([curve for _, curve in found_runs])]
    _check_same_settings(records)
    if not records:
        # a W&B export has no `heldout` column: the curves found say what to pass instead
        more = ", ..." if len(seen_names) > 5 else ""
        curves_found = ", ".join(seen_names[:5]) + more if seen_names else "none"
        raise ValueError(
            f"no curve of 3 points or more matches --column {column!r} in {', '.join(map(str, runs))} "
            f"(curves: {curves_found})"
        )
    if not any("lr" in r or "batch_size" in r for r in records):
        names = [run_label(r) for r in records]
        shown_names = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        unfinished = [
            str(p) for p in runs if (p / "validation.csv").is_file() and not (p / "summary.json").is_file()
        ]
        shown_unfinished = ", ".join(unfinished[:3]) + (", ..." if len(unfinished) > 3 else "")
        where = (
            f"; {shown_unfinished} ha{'ve' if len(unfinished) > 1 else 's'} no summary.json: an unfinished probe has "
            "no summary.json yet, rerun the sweep (or the probe) to finish it"
            if unfinished
            else "; pass probe folders written by `mathmix eval rl-probe` or `sweep`, or their sweep folder"
        )
        raise ValueError(
            f"no learning rate or batch size found for any of the {len(records)} run(s) ({shown_names}): a "
            "probe folder's come from its summary.json (config.learning_rate, config.mini_batch), a CSV column's "
            f"from its name (e.g. run_lr1e-6_bs64){where}"
        )
    return records


def add_sweep_commands(app: typer.Typer) -> None:
    """Register `sweep` and `sweep-fit` on the eval group, in that order in --help."""
    app.command("sweep")(sweep_cmd)
    app.command("sweep-fit")(sweep_fit_cmd)


def sweep_cmd(
    model: str = typer.Argument(..., help="HF model folder to probe."),
    prompts: Path = opt.PROMPTS,
    lrs: str = typer.Option("5e-7,1e-6,2e-6", help="Comma-separated learning rates."),
    mini_batches: str = typer.Option("64", help="Comma-separated mini-batch sizes (prompts per update)."),
    steps: int = typer.Option(100, help="Rollout steps per run."),
    eval_every: int = typer.Option(
        10,
        help="Validate (held-out and MATH500, a row of validation.csv) every N rollout steps, and at the last.",
    ),
    data_dir: Path = opt.DATA_DIR,
    no_eval_sets: bool = opt.NO_EVAL_SETS,
    prompts_per_step: int = opt.PROMPTS_PER_STEP,
    rollouts: int = opt.ROLLOUTS,
    micro_batch: int = opt.MICRO_BATCH,
    max_response: int = opt.MAX_RESPONSE,
    heldout: int = opt.HELDOUT,
    heldout_samples: int = opt.HELDOUT_SAMPLES,
    math500_limit: int = opt.MATH500_LIMIT,
    out: Path = typer.Option(
        Path("rl-sweep"), "--out", "-o", help="Sweep folder: one probe folder per setting."
    ),
) -> None:
    """Run the probe for every (LR, mini-batch) pair, then fit how A and Cmid move with them.

    Reads MODEL, PROMPTS, DATA_DIR; writes OUT/lr<LR>_mb<B>/ (probe folders) and OUT/sweep.json.
    """
    from evals.forecast_report import fit_sweep, sweep_warnings
    from evals.rl_probe import run_probe
    from mathmix.signals import StoppedBySignal, exit_stopped

    sizes = dict(
        steps=steps,
        eval_every=eval_every,
        prompts_per_step=prompts_per_step,
        rollouts=rollouts,
        micro_batch=micro_batch,
        max_response=max_response,
        heldout=heldout,
        heldout_samples=heldout_samples,
        math500_limit=math500_limit,
    )
    names = {"learning_rate": "--lrs", "mini_batch": "--mini-batches"}
    settings = {
        (lr, mb): opt.build_config(names, learning_rate=lr, mini_batch=mb, **sizes)
        for lr in _parse_list(lrs, float, "--lrs")
        for mb in _parse_list(mini_batches, int, "--mini-batches")
    }
    # the fit forecasts each run's held-out curve, which needs a held-out slice and 3 validations or more
    points = 1 + steps // eval_every + (1 if steps % eval_every else 0)
    if heldout < 1 or points < 3:
        fail(
            f"the sweep forecasts the held-out curve: needs --heldout >= 1 and 3 or more validations "
            f"(--steps {steps} / --eval-every {eval_every} give {points})"
        )
    bench_dir = opt.check_inputs(prompts, data_dir, no_eval_sets, next(iter(settings.values())))
    try:  # every probe folder already there is checked first: one refused half-way left a mix of both settings
        _check_probe_folders(out, settings, sizes, model, prompts, bench_dir)
    except ValueError as err:
        fail(f"{err} (nothing was run)")
    runs = []
    for (lr, mb), config in settings.items():
        run_dir = out / f"lr{lr:g}_mb{mb}"
        try:  # a finished probe of this job returns at once, an interrupted one resumes, another is refused
            run_probe(model, prompts, run_dir, config, bench_dir)
        except StoppedBySignal as stopped:  # a preemption: the probe checkpointed; the rerun goes on from it
            exit_stopped(stopped)
        except ValueError as err:
            fail(f"{run_dir}: {err}")
        runs.append(run_dir)
    try:
        records = sweep_records(runs, "heldout")
        fit = {**fit_sweep(records), "records": records}
    except ValueError as err:
        fail(str(err))
    write_json(out / "sweep.json", fit)
    for line in sweep_warnings(fit):
        console.print(f"[yellow]{line}[/]", soft_wrap=True)
    _print_json({k: v for k, v in fit.items() if k != "records"})


def sweep_fit_cmd(
    paths: list[Path] = typer.Argument(
        ..., help="Probe folders, a sweep folder holding them, or CSVs with lr/bs in column names."
    ),
    column: str = typer.Option(
        "heldout",
        help="Curve to forecast in each run: columns whose name contains this text, case aside.",
    ),
    out: Path = typer.Option(None, "--out", "-o", help="Write the fit (JSON) with the per-run records here."),
) -> None:
    """Fit forecast A and log Cmid against log LR and log batch size (natural logs, centred at the sweep's
    geometric mean: `intercept` is the value there, `centre` says where).

    Reads each probe folder's validation.csv (a sweep folder: its probe folders) and the lr and batch size from
    the summary.json beside it (config.learning_rate, config.mini_batch), or CSV columns named like
    run_lr1e-6_bs64. Prints the fit (JSON) to stdout; writes it, with the per-run records, only with -o. Each
    slope has a standard error and a 90% interval (null, with a warning, where there are no more runs than
    fitted parameters). A hyperparameter with one value everywhere is under `fixed`, one that only some runs
    give under `ignored`, one that moved with LR in every run under `confounded` (all left out of the fit,
    with a warning); `r2` is null, with an `r2_note`, where it means nothing.
    """
    from evals.forecast_cli import _note, check_out
    from evals.forecast_report import fit_sweep, mixes_units, record_units, sweep_warnings

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        fail(f"not found: {', '.join(missing)}")
    check_out(out, "file", "sweep-fit.json")  # a folder, or a file on the way: one line before any fitting
    try:
        records = sweep_records(paths, column, report=_note)
        if mixes_units(record_units(records)):
            _note(
                "note: some runs are in percent and the others are not: A is fitted in fractions (a percent "
                "run's A / 100); each record keeps its own unit"
            )
        fit = fit_sweep(records)
    except ValueError as err:
        fail(str(err))
    for key, why in fit["confounded"].items():
        console.print(f"[yellow]warning: {key} {why}[/]")
    for key, runs in fit["ignored"].items():
        shown = ", ".join(runs[:3]) + (", ..." if len(runs) > 3 else "")
        console.print(
            f"[yellow]warning: {key} left out of the fit: {len(runs)} run(s) do not give it ({shown})[/]"
        )
    for line in sweep_warnings(fit):
        console.print(f"[yellow]{line}[/]", soft_wrap=True)
    fit["records"] = records
    if out:
        write_json(out, fit)
    _print_json({k: v for k, v in fit.items() if k != "records"})
    if out:
        console.print(f"wrote {out}", soft_wrap=True, markup=False, highlight=False)


_PROBE_FOLDER = re.compile(r"lr(?P<lr>[^_]+)_mb(?P<mb>\d+)")


def _check_probe_folders(
    out: Path, settings: dict, sizes: dict[str, Any], model: str, prompts: Path, data_dir: Path | None
) -> None:
    """ValueError naming the folder and the difference where an OUT/lr<LR>_mb<B>/job.json is not the probe this
    sweep would run there (that folder's own lr and mini-batch, the sweep's other settings; `run_probe`'s own
    `check_job`, writing nothing). A folder outside --lrs/--mini-batches counts too: `sweep-fit OUT` fits it."""
    from evals.bench import has_eval_output
    from evals.rl_probe import ProbeConfig, probe_identity
    from pipelines.job_record import JOB_FILE, check_job

    if not out.is_dir():
        return
    by_name = {f"lr{lr:g}_mb{mb}": config for (lr, mb), config in settings.items()}
    for run_dir in sorted(p for p in out.glob("lr*_mb*") if (p / JOB_FILE).is_file()):
        config = by_name.get(run_dir.name)
        match = _PROBE_FOLDER.fullmatch(run_dir.name)
        if config is None and match:
            try:
                lr = float(match["lr"])
            except ValueError:
                continue  # not a folder name the sweep writes
            try:
                config = ProbeConfig(learning_rate=lr, mini_batch=int(match["mb"]), **sizes)
            except ValueError as err:  # pydantic's ValidationError: a mini-batch these sizes cannot take
                why = "; ".join(
                    e["msg"].removeprefix("Value error, ") for e in getattr(err, "errors", list)()
                )
                raise ValueError(
                    f"{run_dir} holds a probe of another sweep: its lr and mini-batch do not go with these "
                    f"settings ({why or err})"
                ) from None
        if config is not None:
            identity = probe_identity(model, prompts, data_dir, config)
            check_job(run_dir, identity, "rl-probe", progress=has_eval_output, write=False)


def _print_json(data: dict[str, Any]) -> None:
    """A result on stdout (messages and warnings stay on stderr)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _parse_list(text: str, kind: type, option: str) -> list:
    """`5e-7,1e-6` -> [5e-07, 1e-06], parsed before any run starts; a bad or non-positive value names OPTION."""
    values = []
    for part in text.split(","):
        try:
            value = kind(part.strip())
        except ValueError:
            fail(f"{option}: {part.strip()!r} is not a{'n integer' if kind is int else ' number'}")
        if not (value > 0 and math.isfinite(value)):
            fail(f"{option}: {part.strip()!r} must be > 0")
        values.append(value)
    return list(dict.fromkeys(values))
