"""`mathmix eval sweep` / `sweep-fit`: probe runs over learning rates and batch sizes, and how A and Cmid move.

A probe folder's hyperparameters come from its summary.json (learning_rate, mini_batch); a CSV column's from its
name (`..._lr1e-6_bs64`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from mathmix.cli_util import console, fail, write_json


def sweep_records(paths: list[Path], column: str) -> list[dict[str, Any]]:
    """Forecast the `column` curve of each probe folder / CSV column and attach its lr and batch size."""
    from evals.backtest import forecast_curve
    from evals.curves import load_curves
    from evals.forecast_report import parse_hparams

    records = []
    for path in paths:
        hparams: dict[str, float] = {}
        summary = path / "summary.json"
        if summary.exists():
            config = json.loads(summary.read_text()).get("config", {})
            hparams = {"lr": config.get("learning_rate"), "batch_size": config.get("mini_batch")}
        for curve in load_curves(path):
            if column not in curve.name or len(curve.x) < 3:
                continue
            record, _ = forecast_curve(curve)
            found = {k: v for k, v in (hparams or parse_hparams(curve.name)).items() if v is not None}
            records.append({"source": str(path), **record, **found})
    return records


def add_sweep_commands(app: typer.Typer) -> None:
    """Register `sweep` and `sweep-fit` on the eval group."""

    @app.command("sweep-fit")
    def sweep_fit_cmd(
        paths: list[Path] = typer.Argument(..., help="Probe folders (or CSVs with lr/bs in column names)."),
        column: str = typer.Option("heldout", help="Curve to forecast in each run."),
        out: Path = typer.Option(None, "--out", "-o", help="Write the fit (JSON) here."),
    ) -> None:
        """Fit forecast A and log Cmid against log LR and log batch size. Reads PATHS; prints (and writes) the fit."""
        from evals.forecast_report import fit_sweep

        records = sweep_records(paths, column)
        try:
            fit = fit_sweep(records)
        except ValueError as err:
            fail(str(err))
        fit["records"] = records
        if out:
            write_json(out, fit)
        console.print_json(json.dumps({k: v for k, v in fit.items() if k != "records"}, default=str))

    @app.command("sweep")
    def sweep_cmd(
        model: str = typer.Argument(..., help="HF model folder to probe."),
        prompts: Path = typer.Option(..., help="MATH8K-style prompts."),
        lrs: str = typer.Option("5e-7,1e-6,2e-6", help="Comma-separated learning rates."),
        mini_batches: str = typer.Option("64", help="Comma-separated mini-batch sizes (prompts per update)."),
        steps: int = typer.Option(100, help="Rollout steps per run."),
        eval_every: int = typer.Option(10),
        data_dir: Path = typer.Option(Path("../shared/data/bench"), help="Benchmark folder."),
        out: Path = typer.Option(
            Path("rl-sweep"), "--out", "-o", help="Sweep folder: one probe folder per setting."
        ),
    ) -> None:
        """Run the probe for every (LR, mini-batch) pair, then fit how A and Cmid move with them.

        Reads MODEL, PROMPTS, DATA_DIR; writes OUT/lr<LR>_mb<B>/ (probe folders) and OUT/sweep.json.
        """
        from evals.forecast_report import fit_sweep
        from evals.rl_probe import ProbeConfig, run_probe

        runs = []
        for lr in (float(v) for v in lrs.split(",")):
            for mb in (int(v) for v in mini_batches.split(",")):
                run_dir = out / f"lr{lr:g}_mb{mb}"
                if not (run_dir / "summary.json").exists():  # a rerun skips finished settings
                    config = ProbeConfig(learning_rate=lr, mini_batch=mb, steps=steps, eval_every=eval_every)
                    run_probe(model, prompts, run_dir, config, data_dir if data_dir.is_dir() else None)
                runs.append(run_dir)
        records = sweep_records(runs, "heldout")
        try:
            fit = {**fit_sweep(records), "records": records}
        except ValueError as err:
            fail(str(err))
        write_json(out / "sweep.json", fit)
        console.print_json(json.dumps({k: v for k, v in fit.items() if k != "records"}, default=str))
