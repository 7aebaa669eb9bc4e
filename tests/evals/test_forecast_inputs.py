"""Damaged and odd inputs of `mathmix eval forecast / compare / sweep-fit`, as a user exporting W&B curves or
pandas tables makes them: each is read, left out with a line naming it, or refused in one line; never a traceback
and never a silent wrong number."""

from __future__ import annotations

import json

import numpy as np
from curve_data import X
from curve_data import curve as _curve
from curve_data import run_eval as _run
from curve_data import write_csv as _csv


def test_a_csv_in_a_folder_that_cannot_be_opened_is_skipped_with_a_line(tmp_path):
    """A folder named *.csv (IsADirectoryError) or a dangling link (FileNotFoundError) under the input folder was
    a traceback out of the CLI; an unreadable file (PermissionError) is the same OSError."""
    folder = tmp_path / "in"
    _csv(folder / "good.csv", {"run": _curve(0.5, 50.0)})
    (folder / "old.csv").mkdir()
    (folder / "old.csv" / "inner.csv").write_text("Step,other\n0,0.1\n10,0.2\n20,0.3\n")
    (folder / "gone.csv").symlink_to(tmp_path / "nowhere.csv")
    result = _run("forecast", folder, "--json", "--n-boot", "0")
    assert result.exit_code == 0, result.output
    assert sorted(r["run"] for r in json.loads(result.stdout)) == ["other", "run"]
    assert f"skipped {folder / 'gone.csv'}: cannot be read (No such file or directory)" in result.stderr
    assert "old.csv:" not in result.stderr  # a folder is walked, not read as a file


def test_an_unnamed_index_column_is_not_forecast_nor_pooled(tmp_path):
    """pandas' to_csv writes its row index as a column named "" ("Unnamed: 0" once read and written again): it
    was forecast as a run named '' in percent (0, 1, 2, ...) and pooled with the real runs, moving their forecasts."""
    runs = {"a - acc": _curve(0.6, 40.0), "b - acc": _curve(0.5, 60.0)}
    _csv(tmp_path / "plain.csv", runs)
    plain = json.loads(_run("forecast", tmp_path / "plain.csv", "--json", "--n-boot", "0").stdout)
    for name in ("", "Unnamed: 0"):
        path = tmp_path / f"indexed{len(name)}.csv"
        lines = (tmp_path / "plain.csv").read_text().splitlines()
        path.write_text(
            "\n".join([f"{name},{lines[0]}"] + [f"{i},{line}" for i, line in enumerate(lines[1:])])
        )
        result = _run("forecast", path, "--json", "--n-boot", "0")
        assert result.exit_code == 0, result.output
        records = json.loads(result.stdout)
        assert [r["run"] for r in records] == ["a - acc", "b - acc"]
        assert [r["predicted_final"] for r in records] == [r["predicted_final"] for r in plain]
        assert f"skipped column {name!r} ({path}): no name (a row index" in result.stderr
    (tmp_path / "trailing.csv").write_text("Step,run,\n0,0.1,\n10,0.2,\n20,0.3,\n30,0.35,\n")
    result = _run("forecast", tmp_path / "trailing.csv", "--json", "--n-boot", "0")
    assert [r["run"] for r in json.loads(result.stdout)] == ["run"]
    assert "skipped column" not in result.stderr  # an empty trailing column is no column worth a line


def test_compare_ranks_a_base_exported_in_percent_with_one_in_fractions_on_one_scale(tmp_path):
    """A raw A of 50.5 (percent) outranked 0.594 (a fraction): one base exported in percent went to the top."""
    _csv(tmp_path / "frac.csv", {"better - acc": _curve(0.6, 40.0)})
    _csv(tmp_path / "pct.csv", {"worse - acc": 100 * _curve(0.45, 40.0)})
    ranking = tmp_path / "ranking.json"
    result = _run(
        "compare",
        tmp_path / "pct.csv",
        tmp_path / "frac.csv",
        "--column",
        "acc",
        "--n-boot",
        "0",
        "-o",
        ranking,
    )
    assert result.exit_code == 0, result.output
    assert [r["run"] for r in json.loads(ranking.read_text())] == ["better - acc", "worse - acc"]
    assert f"the runs of {tmp_path / 'pct.csv'} are in percent and the others are not" in result.stderr
    assert json.loads(ranking.read_text())[1]["A"] > 40  # each run keeps its own unit


def _probe(folder, heldout: np.ndarray, config: dict) -> None:
    """A probe run folder as `eval rl-probe` leaves it: validation.csv and summary.json (with CONFIG)."""
    folder.mkdir(parents=True)
    lines = ["Step,rollouts,heldout_mean@4,math500"]
    lines += [f"{s:g},{s * 2048:g},{h:.5f},{h / 2:.5f}" for s, h in zip(X, heldout, strict=True)]
    (folder / "validation.csv").write_text("\n".join(lines) + "\n")
    (folder / "summary.json").write_text(json.dumps({"config": config}))


def test_sweep_fit_names_a_summary_whose_config_is_not_numbers(tmp_path):
    """A hand-edited summary.json with `"learning_rate": "1e-6"` was a TypeError traceback in the fit, and one
    whose config is not an object an AttributeError traceback."""
    for lr, a in ((5e-7, 0.4), (1e-6, 0.5)):
        _probe(
            tmp_path / "sweep" / f"lr{lr:g}_mb64", _curve(a, 60.0), {"learning_rate": lr, "mini_batch": 64}
        )
    odd = tmp_path / "sweep" / "lr2e-06_mb64"
    _probe(odd, _curve(0.55, 60.0), {"learning_rate": "2e-6", "mini_batch": 64})
    result = _run("sweep-fit", tmp_path / "sweep")
    assert result.exit_code == 2, result.output
    assert f"error: {odd / 'summary.json'}: config.learning_rate is '2e-6', not a number" in result.stderr
    (odd / "summary.json").write_text(json.dumps({"config": [2e-6, 64]}))
    result = _run("sweep-fit", tmp_path / "sweep")
    assert result.exit_code == 2, result.output
    assert f"error: {odd / 'summary.json'}: not a probe summary (its config is list" in result.stderr


def test_every_csv_of_a_folder_is_read_whatever_its_name(tmp_path):
    """A CSV whose name starts with `forecast` (`forecast_runs.csv`) was left out of a folder silently."""
    _csv(tmp_path / "in" / "acc.csv", {"a": _curve(0.5, 50.0)})
    _csv(tmp_path / "in" / "forecast_runs.csv", {"b": _curve(0.6, 50.0)})
    result = _run("forecast", tmp_path / "in", "--json", "--n-boot", "0")
    assert result.exit_code == 0, result.output
    assert sorted(r["run"] for r in json.loads(result.stdout)) == ["a", "b"]


def test_column_ignores_case_as_the_export_names_the_metric(tmp_path):
    """W&B names the metric `val/test_score/MATH500` (the file is acc_math500.csv, the probe logs `math500`):
    `--column math500` found nothing in forecast, compare and sweep-fit."""
    path = tmp_path / "acc_math500.csv"
    _csv(path, {"base_lr1e-6_bs64 - val/test_score/MATH500": _curve(0.5, 50.0)})
    _csv(tmp_path / "other.csv", {"base_lr2e-6_bs64 - val/test_score/MATH500": _curve(0.55, 50.0)})
    _csv(tmp_path / "third.csv", {"base_lr4e-6_bs64 - val/test_score/MATH500": _curve(0.52, 50.0)})
    result = _run("forecast", path, "--column", "math500", "--json", "--n-boot", "0")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 1
    result = _run("compare", path, tmp_path / "other.csv", "--column", "math500", "--n-boot", "0")
    assert result.exit_code == 0, result.output
    paths = [path, tmp_path / "other.csv", tmp_path / "third.csv"]
    result = _run("sweep-fit", *paths, "--column", "math500")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runs"] == 3


def test_empty_and_header_only_csvs_and_a_folder_without_csvs_are_named(tmp_path):
    """An empty CSV or one cut after its header was left out of a folder silently, and as PATH it was told it needs
    a Step column it had; a folder without any CSV was told the same as one whose CSVs hold no accuracy."""
    folder = tmp_path / "in"
    _csv(folder / "good.csv", {"run": _curve(0.5, 50.0)})
    (folder / "empty.csv").write_text("")
    (folder / "cut.csv").write_text("Step,run2\r\n")
    result = _run("forecast", folder, "--json", "--n-boot", "0")
    assert result.exit_code == 0, result.output
    assert [r["run"] for r in json.loads(result.stdout)] == ["run"]
    assert f"skipped {folder / 'empty.csv'}: empty file" in result.stderr
    assert f"skipped {folder / 'cut.csv'}: a header and no rows" in result.stderr
    result = _run("forecast", folder / "cut.csv", "--json")
    assert result.exit_code == 2
    assert f"skipped {folder / 'cut.csv'}: a header and no rows" in result.stderr
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("curves to come")
    result = _run("forecast", tmp_path / "notes", "--json")
    assert result.exit_code == 2
    assert f"no accuracy curve in {tmp_path / 'notes'}: no CSV file in it" in result.stderr


def test_a_back_test_target_inside_the_fit_window_says_actual_final_was_seen(tmp_path):
    """`--fit-fraction 0.5 --target 20` compared the forecast with the mean of points the fit saw, silently: the
    actual_final looked like a held-out check the forecast had passed."""
    path = tmp_path / "acc.csv"
    _csv(path, {"run": _curve(0.5, 50.0)})
    result = _run("forecast", path, "--fit-fraction", "0.5", "--target", "20", "--json", "--n-boot", "0")
    assert result.exit_code == 0, result.output
    assert "note: --target 20 lies within the fitted points of 1 run(s) ('run')" in result.stderr
    for args in (("--fit-fraction", "0.5", "--target", "150"), ("--target", "20"), ("--fit-fraction", "0.5")):
        result = _run("forecast", path, *args, "--json", "--n-boot", "0")
        assert result.exit_code == 0, result.output
        assert "lies within the fitted points" not in result.stderr


def test_sweep_fit_names_the_curves_found_when_column_matches_none(tmp_path):
    """On a W&B export (no `heldout` column) sweep-fit said only that nothing matched: forecast and compare list
    the curves found, so the user sees what to pass as --column."""
    path = tmp_path / "acc.csv"
    _csv(path, {"base_lr1e-6_bs64 - val/test_score/MATH500": _curve(0.5, 50.0)})
    result = _run("sweep-fit", path)
    assert result.exit_code == 2, result.output
    assert "matches --column 'heldout'" in result.stderr
    assert "(curves: base_lr1e-6_bs64 - val/test_score/MATH500)" in result.stderr


def test_png_x_axis_is_named_after_the_compute_column(tmp_path, monkeypatch):
    """Every panel's x axis said "compute", whether the curve was read against Step or --compute-column rollouts."""
    import matplotlib.pyplot as plt

    labels: list[str] = []
    close = plt.close

    def keep_labels(fig=None):
        labels.extend(ax.get_xlabel() for ax in fig.axes if ax.get_xlabel())
        close(fig)

    monkeypatch.setattr(plt, "close", keep_labels)
    path = tmp_path / "validation.csv"
    lines = ["Step,rollouts,heldout_mean@4"] + [
        f"{s:g},{s * 2048:g},{h:.5f}" for s, h in zip(X, _curve(0.5, 50.0), strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")
    for args, label in (((), "Step"), (("--compute-column", "rollouts"), "rollouts")):
        labels.clear()
        result = _run("forecast", path, *args, "--n-boot", "0", "-o", tmp_path / "out")
        assert result.exit_code == 0, result.output
        assert labels == [label]


def test_sweep_fit_puts_runs_in_percent_and_in_fractions_on_one_scale(tmp_path):
    """A sweep exported half in percent (A ~ 50) and half as fractions (A ~ 0.5) was one A regression in mixed
    units: the slope measured the export format, and the best run by A was whichever file was in percent."""
    _csv(
        tmp_path / "frac.csv",
        {f"run_lr{lr:g}_bs64 - acc": _curve(a, 40.0) for lr, a in ((1e-6, 0.5), (4e-6, 0.6))},
    )
    _csv(tmp_path / "pct.csv", {"run_lr2e-6_bs64 - acc": 100 * _curve(0.55, 40.0)})
    result = _run("sweep-fit", tmp_path / "frac.csv", tmp_path / "pct.csv", "--column", "acc")
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)
    assert "A is fitted in fractions" in result.stderr
    assert fit["best_by_A"]["run"] == "run_lr4e-06_bs64 - acc"
    assert 0 < fit["A"]["slope_log_lr"] < 0.2  # in fractions, rising with lr
    assert fit["best_by_A"]["unit"] == [0.0, 1.0]


def test_a_folder_that_cannot_be_read_is_named_by_forecast_compare_and_sweep_fit(tmp_path, monkeypatch):
    """A subfolder that cannot be listed (permission denied) was skipped without a word: its runs were missing
    from the forecast, the ranking and the sweep fit. The tests run as root (who may list any folder), so listing
    that folder is made to fail as it does for another user."""
    import os

    folder = tmp_path / "in"
    _csv(
        folder / "acc.csv",
        {f"run_lr{lr:g}_bs64 - acc": _curve(a, 40.0) for lr, a in ((1e-6, 0.5), (4e-6, 0.6))},
    )
    locked = folder / "locked"
    _csv(locked / "more.csv", {"run_lr2e-6_bs64 - acc": _curve(0.55, 40.0)})
    scandir = os.scandir

    def refuse_locked(path="."):
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse_locked)
    line = f"skipped folder {locked}: cannot be read (Permission denied); no CSV below it is read"
    for command, args in (
        ("forecast", ("--json", "--n-boot", "0")),
        ("compare", ("--column", "acc", "--n-boot", "0")),
        ("sweep-fit", ("--column", "acc")),
    ):
        result = _run(command, folder, *args)
        assert result.exit_code == 0, (command, result.output)
        assert result.stderr.count(line) == 1, (command, result.stderr)
    assert json.loads(result.stdout)["runs"] == 2  # the readable runs are still fitted
