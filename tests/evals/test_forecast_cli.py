"""`mathmix eval forecast / compare / sweep-fit` as a user meets them: which run a row is, the same forecast for a
run read from its file or from a folder, columns and files left out with a line, units, outputs, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from curve_data import X
from curve_data import curve as _curve
from curve_data import run_eval as _run
from curve_data import write_csv as _csv

from evals.curves import load_curves, read_curves_csv
from evals.forecast import sigmoid_curve


def _probe(folder, heldout: np.ndarray, math500: np.ndarray, lr: float | None = None, mb: int = 64) -> None:
    """A probe run folder: validation.csv (as `eval rl-probe` writes it) and, with an lr, summary.json."""
    folder.mkdir(parents=True)
    lines = ["Step,rollouts,heldout_mean@4,math500,mean_response_length,train_reward"]
    lines += [
        f"{s:g},{s * 2048:g},{h:.5f},{m:.5f},300,-0.5" for s, h, m in zip(X, heldout, math500, strict=True)
    ]
    (folder / "validation.csv").write_text("\n".join(lines) + "\n")
    if lr is not None:
        config = {"learning_rate": lr, "mini_batch": mb}
        (folder / "summary.json").write_text(json.dumps({"config": config}))


def test_compare_table_names_rank_and_base_and_keeps_identical_probes_apart(tmp_path, monkeypatch):
    """Three probes of one column name used to print three rows all named `heldout_mean@4`, no rank, no folder;
    two probes that logged the same values were merged into one."""
    for name, a in (("lr5e-07_mb64", 0.45), ("lr1e-06_mb64", 0.55), ("lr2e-06_mb64", 0.55)):
        _probe(tmp_path / name, _curve(a, 60.0), _curve(0.3, 60.0))
    monkeypatch.chdir(tmp_path)
    ranking = tmp_path / "ranking.json"
    result = _run("compare", "lr5e-07_mb64", "lr1e-06_mb64", "lr2e-06_mb64", "--n-boot", "0", "-o", ranking)
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if "rank" in line and "ranked" not in line)
    assert "base" in header and "run" in header
    rows = [line for line in result.stdout.splitlines() if "heldout_mean@4" in line]
    assert len(rows) == 3
    assert [next(n for n in ("lr5e-07", "lr1e-06", "lr2e-06") if n in row) for row in rows][-1] == "lr5e-07"
    ranked = json.loads(ranking.read_text())
    assert [r["rank"] for r in ranked] == [1, 2, 3]
    assert {r["file"] for r in ranked} == {
        f"{n}/validation.csv" for n in ("lr5e-07_mb64", "lr1e-06_mb64", "lr2e-06_mb64")
    }
    # the same two probes read as one folder: still two runs, told apart by their folder
    result = _run("forecast", tmp_path, "--column", "heldout", "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 3


def test_compare_ranks_a_run_given_twice_once(tmp_path):
    runs = {"grpo_a - val/acc": _curve(0.5, 50.0), "grpo_b - val/acc": _curve(0.4, 70.0)}
    _csv(tmp_path / "exp1" / "acc.csv", runs)
    _csv(
        tmp_path / "exp2" / "export.csv",
        {"grpo_a - val/acc": runs["grpo_a - val/acc"], "grpo_c - val/acc": _curve(0.3, 40.0)},
    )
    ranking = tmp_path / "ranking.json"
    paths = (tmp_path / "exp1" / "acc.csv", tmp_path / "exp2")
    result = _run("compare", *paths, "--column", "acc", "--n-boot", "0", "-o", ranking)
    assert result.exit_code == 0, result.output
    assert [r["run"] for r in json.loads(ranking.read_text())] == [f"grpo_{n} - val/acc" for n in "abc"]
    assert sum("grpo_a" in line for line in result.stdout.splitlines()) == 1
    assert (
        "skipped run 'grpo_a - val/acc'" in result.stderr and "the same run and values as in" in result.stderr
    )


def test_a_run_gets_the_same_forecast_read_from_its_file_or_a_folder(tmp_path):
    """Duplicates used to be dropped before fitting: the second file lost a run from its pooled prior, and its
    other runs got another forecast read as part of a folder than read alone."""
    shared = _curve(0.6, 40.0, b=3.0)
    _csv(tmp_path / "a.csv", {"shared - acc": shared, "flat_a - acc": 0.05 + 0.002 * np.sin(X)})
    _csv(tmp_path / "b.csv", {"shared - acc": shared, "flat_b - acc": 0.06 + 0.002 * np.cos(X)})
    folder = _run("forecast", tmp_path, "--fit-fraction", "0.3", "--json")
    assert folder.exit_code == 0, folder.output
    records = json.loads(folder.stdout)
    assert sorted(r["run"] for r in records) == ["flat_a - acc", "flat_b - acc", "shared - acc"]  # shown once
    for name in ("a.csv", "b.csv"):
        alone = {
            r["run"]: r
            for r in json.loads(_run("forecast", tmp_path / name, "--fit-fraction", "0.3", "--json").stdout)
        }
        for r in records:
            if r["file"] == str(tmp_path / name):
                assert r["predicted_final"] == alone[r["run"]]["predicted_final"], (name, r["run"])
        # --column picks the runs shown, not the runs pooled
        [picked] = json.loads(
            _run("forecast", tmp_path / name, "--fit-fraction", "0.3", "--json", "--column", "flat").stdout
        )
        assert picked["predicted_final"] == alone[picked["run"]]["predicted_final"]


def test_bench_still_reads_the_duplicated_real_curves_once(shared_data):
    assert len(load_curves(shared_data / "rl_curves")) == 108
    assert len(load_curves(shared_data / "rl_curves", dedupe=False)) == 142


def test_non_accuracy_words_match_the_metric_not_the_run_name_and_each_skip_says_so(tmp_path):
    path = tmp_path / "names.csv"
    cols = {
        n: _curve(0.4, 50.0) + 0.01 * i for i, n in enumerate(("base_20B", "base_40Btokens", "longtime_run"))
    }
    _csv(path, {**cols, "mean_response_length": 300 + X, "grpo_tokens - val/response_length": 200 + X})
    result = _run("forecast", path, "--json")
    assert result.exit_code == 0, result.output
    assert [r["run"] for r in json.loads(result.stdout)] == list(cols)
    assert (
        f"skipped columns 'mean_response_length', 'grpo_tokens - val/response_length' ({path}): not accuracies "
        "('length' in their names)" in result.stderr
    )


def test_a_percent_curve_flat_below_1_in_its_fit_window_stays_in_percent(tmp_path):
    """The unit came from the fitted points only: a percent curve still <= 1 at 20% was fitted as a fraction and
    its forecast capped at 1 (0.9 where the run ends at 45)."""
    path = tmp_path / "pct.csv"
    _csv(path, {"aime": sigmoid_curve(X, 0.0, 48.0, 6.0, 90.0)})
    result = _run("forecast", path, "--fit-fraction", "0.2", "--json")
    assert result.exit_code == 0, result.output
    [auto] = json.loads(result.stdout)
    assert auto["actual_final"] > 40 and auto["predicted_final"] > 1
    [percent] = json.loads(
        _run("forecast", path, "--fit-fraction", "0.2", "--json", "--scale", "percent").stdout
    )
    assert percent["predicted_final"] == auto["predicted_final"]
    result = _run("forecast", path, "--fit-fraction", "0.2", "--scale", "fraction")
    assert result.exit_code == 2 and "outside [0, 1] (--scale fraction)" in result.stderr, result.output
    result = _run("forecast", path, "--scale", "percentage")
    assert result.exit_code == 2 and "--scale must be auto, fraction, percent or reward" in result.stderr


def test_a_csv_without_a_step_column_is_refused_unless_compute_column_names_one(tmp_path):
    path = tmp_path / "nostep.csv"
    path.write_text("iteration,runA\n" + "\n".join(f"{s:g},{0.1 + s / 1000:.4f}" for s in X) + "\n")
    result = _run("forecast", path, "--json")
    assert result.exit_code == 2, result.output
    assert f"{path}: no Step column (columns: iteration, runA); --compute-column NAME" in result.stderr
    result = _run("forecast", path, "--json", "--compute-column", "iteration")
    assert result.exit_code == 0 and [r["run"] for r in json.loads(result.stdout)] == ["runA"]


def test_sweep_fit_takes_the_sweep_folder_and_says_when_no_lr_or_batch_size_is_found(tmp_path):
    for lr, a in ((5e-7, 0.4), (1e-6, 0.5), (2e-6, 0.55)):
        _probe(tmp_path / "sweep" / f"lr{lr:g}_mb64", _curve(a, 60.0), _curve(0.3, 60.0), lr=lr)
    result = _run("sweep-fit", tmp_path / "sweep")
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)  # the fit on stdout, nothing else
    assert fit["hyperparameters"] == ["lr"] and fit["runs"] == 3 and fit["fixed"] == {"batch_size": 64}
    for name in ("a", "b", "c"):
        _probe(tmp_path / "bare" / name, _curve(0.4, 60.0), _curve(0.3, 60.0))
    result = _run("sweep-fit", tmp_path / "bare")
    assert result.exit_code == 2, result.output
    assert "no learning rate or batch size found for any of the 3 run(s)" in result.stderr
    assert "summary.json (config.learning_rate, config.mini_batch)" in result.stderr
    assert "needs runs whose lr and/or batch_size differ" not in result.stderr


def test_an_output_that_cannot_be_written_is_one_line_before_any_fit(tmp_path, monkeypatch):
    import evals.backtest

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before checking -o")

    monkeypatch.setattr(evals.backtest, "forecast_curves", no_fit)
    path = tmp_path / "curves.csv"
    _csv(path, {"run": _curve(0.5, 50.0)})
    (tmp_path / "afile").write_text("")
    (tmp_path / "adir").mkdir()
    result = _run("forecast", path, "-o", tmp_path / "afile")
    assert result.exit_code == 2 and "afile: exists and is not a folder" in result.stderr, result.output
    result = _run("compare", path, "--column", "run", "-o", tmp_path / "adir")
    assert result.exit_code == 2 and "adir: is a folder; -o names the JSON file" in result.stderr, (
        result.output
    )
    assert not (tmp_path / "adir.tmp").exists()
    result = _run("forecast", path, "-o", tmp_path / "afile" / "sub")
    assert result.exit_code == 2 and "is a file, not a folder" in result.stderr, result.output


def test_default_output_is_in_the_current_folder_and_tells_experiments_apart(tmp_path, monkeypatch):
    for exp in ("exp1", "exp2"):
        _csv(tmp_path / "data" / exp / "acc_math500.csv", {"run - acc": _curve(0.5, 50.0)})
    _probe(tmp_path / "data" / "probe", _curve(0.5, 50.0), _curve(0.3, 50.0))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for exp in ("exp1", "exp2"):
        result = _run("forecast", tmp_path / "data" / exp / "acc_math500.csv", "--n-boot", "0")
        assert result.exit_code == 0, result.output
        assert f"wrote forecast-{exp}-acc_math500/forecast.json" in result.stderr
        assert "RL forecast" in result.stdout  # the table is a result: stdout
    result = _run("forecast", tmp_path / "data" / "probe", "--n-boot", "0")
    assert result.exit_code == 0, result.output
    assert (work / "forecast-probe" / "forecast.json").is_file()
    assert not (tmp_path / "data" / "probe" / "forecast").exists()  # never inside the input
    result = _run("forecast", tmp_path / "data" / "exp1" / "acc_math500.csv", "--n-boot", "0")
    assert "replacing the earlier forecast in forecast-exp1-acc_math500" in result.stderr
    monkeypatch.chdir(tmp_path / "data" / "probe")
    result = _run("forecast", ".", "--n-boot", "0")
    assert result.exit_code == 2 and "would land in the input; pass -o" in result.stderr


def test_two_rows_at_one_step_are_averaged_with_a_line(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("Step,run\n0,0.1\n10,0.2\n10,0.4\n20,0.35\n30,0.4\n")
    notes: list[str] = []
    [curve] = read_curves_csv(path, report=notes.append)
    assert curve.x.tolist() == [0.0, 10.0, 20.0, 30.0] and curve.y[1] == pytest.approx(0.3)
    assert notes == [
        f"run 'run' ({path}): 1 Step value(s) given more than once (10); their values are averaged"
    ]
    result = _run("forecast", path, "--json")
    assert result.exit_code == 0 and "their values are averaged" in result.stderr, result.output


def test_cells_that_are_not_numbers_are_left_out_with_a_line(tmp_path):
    path = tmp_path / "odd.csv"
    path.write_text(
        "Step,a,b,pct\n0,0.1,nan,10%\n10,0.2,0.2,20%\nx,0.9,0.9,\n20,abc,0.3,30%\n30,0.35,inf,\n40,0.4,,\n"
    )
    notes: list[str] = []
    curves = read_curves_csv(path, report=notes.append)
    assert [(c.name, c.x.tolist()) for c in curves] == [("a", [0, 10, 30, 40]), ("b", [10, 20])]
    assert (
        notes
        == [
            f"{path}: 1 row(s) skipped, their Step not a number (x)",
            f"run 'a' ({path}): 1 cell(s) not a number, left out (Step 20: 'abc')",
            f"run 'b' ({path}): 2 cell(s) not a number, left out (Step 0: 'nan', Step 30: 'inf')",  # not the empty one
            f"skipped column 'pct' ({path}): no number at any Step (cells such as '10%')",
        ]
    )


def test_rows_at_a_negative_step_are_left_out_with_one_line_per_file(tmp_path):
    # a negative Step was fitted as compute 0, i.e. taken for the curve's start R0, without a word
    path = tmp_path / "neg.csv"
    path.write_text("Step,a,b\n-20,0.5,0.6\n-10,0.45,\n-0,0.1,0.1\n10,0.2,0.2\n20,0.3,0.3\n30,0.35,0.4\n")
    notes: list[str] = []
    curves = read_curves_csv(path, report=notes.append)
    assert [(c.name, c.x.tolist(), c.y.tolist()) for c in curves] == [
        ("a", [0, 10, 20, 30], [0.1, 0.2, 0.3, 0.35]),
        ("b", [0, 10, 20, 30], [0.1, 0.2, 0.3, 0.4]),
    ]
    assert notes == [f"{path}: 2 row(s) skipped, their Step negative (the first: -20)"]
    result = _run("forecast", path, "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr.count("their Step negative") == 1, result.stderr


def test_two_columns_of_one_name_are_two_runs_told_apart(tmp_path):
    # the second 'acc' gave a second {"run": "acc", "file": ...} record: two forecasts no one could tell apart
    path = tmp_path / "twice.csv"
    columns = [("acc", _curve(0.5, 50.0)), ("acc (2)", _curve(0.6, 40.0)), ("acc", _curve(0.4, 60.0))]
    columns += [("acc", _curve(0.3, 70.0))]
    lines = ["Step," + ",".join(name for name, _ in columns)]
    lines += [f"{s:g}," + ",".join(f"{y[j]:.5f}" for _, y in columns) for j, s in enumerate(X)]
    path.write_text("\n".join(lines) + "\n")
    result = _run("forecast", path, "--json")
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert [r["run"] for r in records] == ["acc", "acc (2)", "acc (3)", "acc (4)"]
    assert [round(r["actual_final"], 2) for r in records] == [round(y[-1], 2) for _, y in columns]
    line = f"{path}: 2 column(s) named as an earlier column, read as 'acc (3)', 'acc (4)'"
    assert result.stderr.count("named as an earlier column") == 1 and line in result.stderr, result.stderr


def test_a_curve_falling_over_its_fitted_points_gets_a_warning(tmp_path):
    path = tmp_path / "fall.csv"
    rise_fall = np.where(X < 100, 0.1 + X / 250, 0.5 - (X - 100) / 500)
    _csv(path, {"falls": rise_fall, "rises": _curve(0.5, 50.0)})
    result = _run("forecast", path, "--json")
    assert result.exit_code == 0, result.output
    assert f"warning: run 'falls' ({path}) falls over its fitted points" in result.stderr
    assert "run 'rises'" not in result.stderr


def test_json_with_out_writes_out_and_odd_files_in_a_folder_are_skipped_with_a_line(tmp_path):
    _csv(tmp_path / "in" / "good.csv", {"run": _curve(0.5, 50.0)})
    (tmp_path / "in" / "semi.csv").write_text("Step;run\n0;0.1\n10;0.2\n20;0.3\n")
    out = tmp_path / "out"
    result = _run("forecast", tmp_path / "in", "--json", "-o", out, "--n-boot", "0")
    assert result.exit_code == 0, result.output
    assert [r["run"] for r in json.loads(result.stdout)] == ["run"]
    assert json.loads((out / "forecast.json").read_text())[0]["run"] == "run"
    assert f"skipped {tmp_path / 'in' / 'semi.csv'}: separated by semicolons, not commas" in result.stderr


def test_png_y_label_says_the_metric():
    from evals.forecast_report import y_label

    assert y_label("grpo - val/reward", (-1.0, 1.0)) == "val/reward (reward)"
    assert y_label("heldout_mean@4", (0.0, 1.0)) == "heldout_mean@4 (accuracy)"
    assert y_label("aime", (0.0, 100.0)) == "aime (accuracy (%))"


def test_sweep_fit_output_under_a_file_is_one_line_before_any_fit(tmp_path, monkeypatch):
    """sweep-fit checked only for a folder: `-o FILE/fit.json` was a FileExistsError traceback after fitting."""
    import evals.backtest

    for lr, a in ((5e-7, 0.4), (1e-6, 0.5), (2e-6, 0.55)):
        _probe(tmp_path / "sweep" / f"lr{lr:g}_mb64", _curve(a, 60.0), _curve(0.3, 60.0), lr=lr)
    (tmp_path / "afile").write_text("")

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before checking -o")

    monkeypatch.setattr(evals.backtest, "forecast_curves", no_fit)
    result = _run("sweep-fit", tmp_path / "sweep", "-o", tmp_path / "afile" / "fit.json")
    assert result.exit_code == 2 and "afile is a file, not a folder" in result.stderr, result.output
    (tmp_path / "adir").mkdir()
    result = _run("sweep-fit", tmp_path / "sweep", "-o", tmp_path / "adir")
    assert result.exit_code == 2 and "is a folder; -o names the JSON file" in result.stderr, result.output
    assert "sweep-fit.json" in result.stderr


def test_compare_and_sweep_fit_do_not_point_a_csv_without_step_to_an_option_they_lack(tmp_path):
    """The error for a CSV without Step said `--compute-column NAME uses one of them`: only forecast has it."""
    path = tmp_path / "nostep.csv"
    path.write_text(
        "iteration,run_lr1e-6_bs64,run_lr2e-6_bs64\n" + "\n".join(f"{s:g},0.1,0.2" for s in X) + "\n"
    )
    for command in ("compare", "sweep-fit"):
        result = _run(command, path, "--column", "run")
        assert result.exit_code == 2, result.output
        assert (
            f"{path}: no Step column (columns: iteration, run_lr1e-6_bs64, run_lr2e-6_bs64)" in result.stderr
        )
        assert "read the compute from a column named Step" in result.stderr
        assert "uses one of them as compute" not in result.stderr
    result = _run("forecast", path, "--json")
    assert result.exit_code == 2 and "--compute-column NAME uses one of them as compute" in result.stderr


def test_one_probe_given_by_two_paths_is_ranked_once(tmp_path, monkeypatch):
    """`probe` and `/abs/probe` were two folders: the same probe was ranked twice."""
    _probe(tmp_path / "probe", _curve(0.5, 60.0), _curve(0.3, 60.0))
    _probe(tmp_path / "other", _curve(0.5, 60.0), _curve(0.3, 60.0))  # same values, another probe
    monkeypatch.chdir(tmp_path)
    ranking = tmp_path / "ranking.json"
    result = _run("compare", "probe", tmp_path / "probe", "other", "--n-boot", "0", "-o", ranking)
    assert result.exit_code == 0, result.output
    assert [r["file"] for r in json.loads(ranking.read_text())] == [
        "probe/validation.csv",
        "other/validation.csv",
    ]
    assert f"skipped run 'heldout_mean@4' ({tmp_path / 'probe' / 'validation.csv'})" in result.stderr


def test_plural_non_accuracy_words_are_not_forecast(tmp_path):
    """Whole-word matching let verl's `critic/rewards/mean` and `actor/losses` through as accuracies (the word
    used to match anywhere in the metric)."""
    from evals.curves import is_accuracy_column

    assert not is_accuracy_column("grpo - critic/rewards/mean")
    assert not is_accuracy_column("actor/losses") and not is_accuracy_column("epochs")
    assert is_accuracy_column("grpo_40Btokens - val/test_score/MATH500") and is_accuracy_column(
        "longtime_run"
    )
    path = tmp_path / "verl.csv"
    _csv(path, {"grpo - val/acc": _curve(0.5, 50.0), "grpo - critic/rewards/mean": 2 * _curve(0.5, 50.0) - 1})
    result = _run("forecast", path, "--json")
    assert result.exit_code == 0, result.output
    assert [r["run"] for r in json.loads(result.stdout)] == ["grpo - val/acc"]
    assert (
        "skipped column 'grpo - critic/rewards/mean'" in result.stderr
        and "'reward' in its name" in result.stderr
    )


def test_auto_units_are_fraction_percent_reward_or_none():
    """[-0.5, 50] was given the unit [-1, 100], which is none of the three."""
    from evals.curves import column_unit

    assert column_unit(np.array([0.1, 0.9])) == (0.0, 1.0)
    assert column_unit(np.array([0.1, 45.0])) == (0.0, 100.0)
    assert column_unit(np.array([-0.8, 0.4])) == (-1.0, 1.0)
    assert column_unit(np.array([-0.5, 50.0])) is None
    assert column_unit(np.array([3.0, 450.0])) is None


def test_sweep_fit_forecasts_a_probe_as_compare_does(tmp_path):
    """sweep-fit fitted the held-out curve alone: its A for a probe differed from `compare` and `forecast` on the
    same folder, which pool it with the probe's MATH500 curve."""
    for lr, a in ((5e-7, 0.25), (1e-6, 0.3), (2e-6, 0.35)):
        heldout = sigmoid_curve(X, 0.1, a, 2.0, 240.0)  # still rising: the pooled gain prior matters
        _probe(tmp_path / "sweep" / f"lr{lr:g}_mb64", heldout, sigmoid_curve(X, 0.1, 0.7, 3.0, 60.0), lr=lr)
    out = tmp_path / "fit.json"
    result = _run("sweep-fit", tmp_path / "sweep", "-o", out)
    assert result.exit_code == 0, result.output
    ranking = tmp_path / "ranking.json"
    result = _run("compare", tmp_path / "sweep", "--n-boot", "0", "-o", ranking)
    assert result.exit_code == 0, result.output
    compared = {r["file"]: r["A"] for r in json.loads(ranking.read_text())}
    swept = {r["file"]: r["A"] for r in json.loads(out.read_text())["records"]}
    assert swept == compared and len(swept) == 3


def test_sweep_fit_names_the_probe_without_an_lr(tmp_path):
    """A sweep with an unfinished probe (no summary.json yet) was told 'needs runs whose lr and/or batch_size
    differ (lr missing for 1 run(s))', though the lr differed; a probe was named by its column, heldout_mean@4."""
    for lr, a in ((5e-7, 0.4), (1e-6, 0.5), (2e-6, 0.55)):
        _probe(tmp_path / "sweep" / f"lr{lr:g}_mb64", _curve(a, 60.0), _curve(0.3, 60.0), lr=lr)
    _probe(tmp_path / "sweep" / "lr4e-06_mb64", _curve(0.6, 60.0), _curve(0.3, 60.0))  # still running
    result = _run("sweep-fit", tmp_path / "sweep")
    assert result.exit_code == 2, result.output
    unfinished = tmp_path / "sweep" / "lr4e-06_mb64"
    assert (
        f"a sweep fit needs an lr and/or batch_size from every run (lr missing for 1 run(s): {unfinished}; "
        f"batch_size missing for 1 run(s): {unfinished})" in result.stderr
    )


def test_sweep_fit_says_which_probe_it_leaves_out_for_too_few_points(tmp_path):
    """A probe killed after two validations was left out of the fit without a word ("runs": 2 of 3)."""
    for lr, a in ((5e-7, 0.4), (1e-6, 0.5), (2e-6, 0.6)):
        _probe(tmp_path / "sweep" / f"lr{lr:g}_mb64", _curve(a, 60.0), _curve(0.3, 60.0), lr=lr)
    short = tmp_path / "sweep" / "lr2e-06_mb64" / "validation.csv"
    short.write_text("\n".join(short.read_text().splitlines()[:3]) + "\n")  # header + 2 validations
    result = _run("sweep-fit", tmp_path / "sweep")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runs"] == 2
    assert f"skipped run 'heldout_mean@4' ({short}): 2 point(s); a fit needs 3 or more" in result.stderr


def test_sweep_fit_says_which_rows_of_a_probe_it_leaves_out(tmp_path):
    """forecast and compare name rows they leave out (a negative step); sweep-fit read the same files silently."""
    for lr, a in ((5e-7, 0.4), (1e-6, 0.5), (2e-6, 0.6)):
        _probe(tmp_path / "sweep" / f"lr{lr:g}_mb64", _curve(a, 60.0), _curve(0.3, 60.0), lr=lr)
    odd = tmp_path / "sweep" / "lr2e-06_mb64" / "validation.csv"
    header, *rows = odd.read_text().splitlines()
    odd.write_text("\n".join([header, "-20" + rows[0][rows[0].index(",") :], *rows]) + "\n")
    result = _run("sweep-fit", tmp_path / "sweep")
    assert result.exit_code == 0, result.output
    assert f"{odd}: 1 row(s) skipped, their Step negative (the first: -20)" in " ".join(result.stderr.split())


@pytest.mark.parametrize(
    "name",
    [
        "actor/kl_loss",
        "actor/lr",
        "train/kl",
        "critic/lr",
        "actor/ppo_kl",
        "actor/kl_coef",
        "kl",
        "LR",
        "run - train/kl",
    ],
)
def test_kl_and_lr_metric_columns_are_not_accuracies(name):
    """A W&B `run.history()` export holds verl's `actor/lr` and `train/kl` next to the accuracies: they were
    forecast as accuracies (a KL of 0.002 rising to 0.01 got a sigmoid and a rank)."""
    from evals.curves import is_accuracy_column

    assert not is_accuracy_column(name)


@pytest.mark.parametrize(
    "name",
    [
        "run_lr_1e-6",
        "qwen_kl0.001",
        "run_kl_0.001",
        "qwen_lr1e-6_mb64",
        "run_lr_high",
        "qwen_kl0.001 - val/test_score/math500",
        "grpo_lr_2e-6/val/acc",
    ],
)
def test_runs_named_after_their_kl_or_lr_are_still_accuracies(name):
    """Only a metric path component (`.../kl`, `actor/kl_coef`, `/lr`) or the bare word is a kl/lr metric: a run
    column named by its setting is kept."""
    from evals.curves import is_accuracy_column

    assert is_accuracy_column(name)


def test_a_history_export_forecasts_the_accuracies_and_names_the_kl_and_lr_columns(tmp_path):
    path = tmp_path / "history.csv"
    _csv(
        path,
        {
            "val/test_score/math500": _curve(0.5, 50.0),
            "actor/lr": np.full(len(X), 1e-6),
            "train/kl": 0.01 * _curve(0.5, 50.0),
        },
    )
    result = _run("forecast", path, "--json", "--n-boot", "0")
    assert result.exit_code == 0, result.output
    assert [r["run"] for r in json.loads(result.stdout)] == ["val/test_score/math500"]
    assert (
        f"skipped columns 'actor/lr', 'train/kl' ({path}): not accuracies ('lr', 'kl' in their names)"
        in result.stderr
    )
    runs = tmp_path / "runs.csv"
    _csv(runs, {"run_lr_1e-6": _curve(0.5, 50.0), "qwen_kl0.001": _curve(0.55, 50.0)})
    result = _run("forecast", runs, "--json", "--n-boot", "0")
    assert result.exit_code == 0, result.output
    assert [r["run"] for r in json.loads(result.stdout)] == ["run_lr_1e-6", "qwen_kl0.001"]
    assert "skipped column" not in result.stderr
