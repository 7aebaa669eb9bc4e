"""The RL-curve forecast: parameter recovery on synthetic curves, the back-test targets on real GRPO curves,
the curve CSV reader and the `mathmix eval forecast --json` output."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from evals.backtest import backtest, forecast_curve, forecast_curves
from evals.curves import Curve, load_curves, read_curves_csv
from evals.forecast import Priors, a_prior_sd, fit_sigmoid, pooled_gain_sd, sigmoid_curve
from evals.forecast_report import fit_sweep, parse_hparams, rank_by_asymptote


def _synthetic(r0, a, b, cmid, sd, seed, steps=np.arange(0, 600, 10.0)):
    rng = np.random.default_rng(seed)
    return steps, sigmoid_curve(steps, r0, a, b, cmid) + rng.normal(0, sd, len(steps))


@pytest.mark.parametrize(
    ("r0", "a", "b", "cmid"), [(0.05, 0.6, 2.0, 100.0), (0.2, 0.45, 1.2, 60.0), (0.0, 0.8, 3.0, 200.0)]
)
def test_fit_recovers_known_parameters(r0, a, b, cmid):
    x, y = _synthetic(r0, a, b, cmid, sd=0.01, seed=1)
    fit = fit_sigmoid(x, y, n_boot=20)
    params = fit.params()
    assert params["A"] == pytest.approx(a, abs=0.03)
    assert params["Cmid"] == pytest.approx(cmid, rel=0.25)
    assert params["B"] == pytest.approx(b, rel=0.4)
    assert params["R0"] == pytest.approx(r0, abs=0.05)
    assert fit.predict(500.0)[0] == pytest.approx(sigmoid_curve(500.0, r0, a, b, cmid), abs=0.02)
    lo, hi = fit.intervals["A"]
    assert lo - 0.02 <= a <= hi + 0.02
    band_lo, band_hi = fit.band(np.array([50.0, 300.0]))
    assert np.all(band_lo <= band_hi)


def test_fit_on_a_reward_scale_curve_maps_back():
    """A mean reward in [-1, 1] is fitted on [0, 1] and reported in its own units."""
    x, y01 = _synthetic(0.1, 0.7, 2.0, 80.0, sd=0.005, seed=2)
    fit = fit_sigmoid(x, 2 * y01 - 1)
    assert fit.params()["A"] == pytest.approx(2 * 0.7 - 1, abs=0.06)


def test_the_record_reports_sigma_in_the_curve_units():
    """A percent curve's noise is reported in points of percent, as its A is (it read 0.01 on the 0-1 scale)."""
    x, y01 = _synthetic(0.1, 0.7, 2.0, 80.0, sd=0.02, seed=3)
    fraction, _ = forecast_curve(Curve("run", x, y01, "f.csv"))
    percent, _ = forecast_curve(Curve("run", x, 100 * y01, "p.csv"))
    assert percent["sigma"] == pytest.approx(100 * fraction["sigma"], rel=1e-3) and percent["sigma"] > 1
    assert percent["A"] == pytest.approx(100 * fraction["A"], rel=1e-3)


def test_early_forecast_of_a_known_curve_is_close():
    """Seeing the first 40% of a clean sigmoid that has passed its midpoint, the final value is forecast."""
    x, y = _synthetic(0.05, 0.55, 2.5, 60.0, sd=0.01, seed=3)
    record, _ = forecast_curve(Curve("synthetic", x, y), fit_fraction=0.4)
    assert record["predicted_final"] == pytest.approx(record["actual_final"], abs=0.02)


def test_read_curves_csv_skips_bands_lengths_and_gaps(tmp_path):
    path = tmp_path / "curves.csv"
    path.write_text(
        '"Step","run_a - val/score","run_a - val/score__MIN","run_a - val/score__MAX","run_b - val/score",'
        '"run_a - response_length"\n'
        '"0","0.1","0.1","0.1","","100"\n"4","0.2","0.2","0.2","0.3","120"\n"8","0.3","0.3","0.3","0.35","130"\n'
    )
    curves = {c.name: c for c in read_curves_csv(path)}
    assert set(curves) == {"run_a - val/score", "run_b - val/score"}
    assert curves["run_b - val/score"].x.tolist() == [4.0, 8.0]
    assert curves["run_a - val/score"].y.tolist() == [0.1, 0.2, 0.3]


def test_load_curves_falls_back_to_all_columns_when_none_is_an_accuracy(tmp_path):
    (tmp_path / "lengths.csv").write_text("Step,run_a - response_length\n0,100\n4,150\n8,180\n")
    assert [c.name for c in load_curves(tmp_path / "lengths.csv")] == ["run_a - response_length"]
    (tmp_path / "acc.csv").write_text("Step,run_a - score\n0,0.1\n4,0.2\n")
    assert [c.name for c in load_curves(tmp_path)] == ["run_a - score"]  # lengths skipped next to accuracies


def test_forecast_cli_json_prints_run_predicted_actual(tmp_path):
    from mathmix.cli import app

    x = np.arange(0, 200, 4.0)
    cols = {f"run{i}": sigmoid_curve(x, 0.02, 0.4 + 0.1 * i, 2.0, 40.0) for i in range(2)}
    lines = ["Step," + ",".join(cols)] + [
        f"{s}," + ",".join(f"{cols[c][j]:.4f}" for c in cols) for j, s in enumerate(x)
    ]
    path = tmp_path / "curves.csv"
    path.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["eval", "forecast", str(path), "--fit-fraction", "0.4", "--json"])
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert [set(r) for r in records] == [{"run", "file", "predicted_final", "actual_final"}] * 2
    assert {r["file"] for r in records} == {str(path)}
    tail = math.ceil(0.1 * len(x))
    for r in records:
        assert r["actual_final"] == pytest.approx(
            float(np.mean(np.round(cols[r["run"]][-tail:], 4))), abs=1e-5
        )
        assert r["predicted_final"] == pytest.approx(r["actual_final"], abs=0.03)


def test_forecast_cli_skips_short_runs_and_names_a_file_with_none_to_fit(tmp_path):
    from mathmix.cli import app

    path = tmp_path / "curves.csv"
    path.write_text("Step,a,b\n0,0.1,\n10,0.2,x\n20,nan,0.3\n30,0.35,0.31\n")
    result = CliRunner().invoke(app, ["eval", "forecast", str(path), "--json"])
    assert result.exit_code == 0 and [r["run"] for r in json.loads(result.stdout)] == ["a"]
    assert f"skipped run 'b' ({path}): 2 of its 2 points to fit; a fit needs 3 or more" in result.stderr
    path.write_text("Step,foo\n1,2\n")
    result = CliRunner().invoke(app, ["eval", "forecast", str(path)])
    assert result.exit_code == 2 and "no curve in" in result.stderr and "3 points" in result.stderr


def test_a_fit_window_under_3_points_is_skipped_not_raised_to_2(tmp_path):
    """--fit-fraction 0.2 of a 10-point curve leaves 2 points: it used to be fitted on 2 points silently, while a
    whole curve of 2 points was refused. One rule now: the fit window must hold 3 points."""
    from mathmix.cli import app

    x10, x20 = np.arange(0, 100, 10.0), np.arange(0, 200, 10.0)
    path = tmp_path / "curves.csv"
    lines = ["Step,short - acc,long - acc"] + [
        f"{s},{'' if s >= 100 else round(0.1 + s / 1000, 4)},{round(0.1 + s / 1000, 4)}" for s in x20
    ]
    path.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["eval", "forecast", str(path), "--fit-fraction", "0.2", "--json"])
    assert result.exit_code == 0, result.output
    assert [r["run"] for r in json.loads(result.stdout)] == ["long - acc"]  # 4 of 20 points
    line = (
        f"skipped run 'short - acc' ({path}): 2 of its 10 points to fit at --fit-fraction 0.2; a fit needs 3"
    )
    assert line in result.stderr
    result = CliRunner().invoke(app, ["eval", "forecast", str(path), "--fit-fraction", "0.1"])
    assert result.exit_code == 2, result.output
    assert f"no curve in {path} has 3 points or more to fit at --fit-fraction 0.1" in result.stderr
    short = Curve("short", x10, 0.1 + x10 / 1000)
    with pytest.raises(ValueError, match="short: 2 of its 10 points to fit at fit fraction 0.2"):
        forecast_curve(short, fit_fraction=0.2)
    assert forecast_curve(short, fit_fraction=0.3)[0]["fit_points"] == 3
    assert backtest([short, Curve("long", x20, 0.1 + x20 / 1000)], 0.2)["curves"] == 1  # as the CLI counts


def test_wandb_export_reads_only_accuracy_columns(tmp_path):
    path = tmp_path / "export.csv"
    header = '"Step","Wall Time","grpo_long_time - val/acc","grpo_long_time - val/acc__MIN","grpo - val/response_length"'
    path.write_text(
        header + "\n" + "\n".join(f"{s},{1e9 + s},{s / 100},{s / 200},{300 + s}" for s in range(5))
    )
    [curve] = read_curves_csv(path)
    assert curve.name == "grpo_long_time - val/acc" and list(curve.y) == [0.0, 0.01, 0.02, 0.03, 0.04]


def test_forecast_never_sees_past_the_fit_fraction(shared_data):
    """Scrambling every curve's unseen part (its own and its siblings') changes no forecast, only the actuals."""
    curves = load_curves(shared_data / "rl_curves" / "analysis_data_quality" / "acc_math500.csv")
    assert len(curves) >= 2
    rng = np.random.default_rng(0)
    scrambled = []
    for c in curves:
        k = math.ceil(0.2 * len(c.x))
        y = c.y.copy()
        y[k:] = rng.uniform(0, 1, len(y) - k)
        scrambled.append(Curve(c.name, c.x, y, c.source))
    honest = forecast_curves(curves, fit_fraction=0.2)
    noisy = forecast_curves(scrambled, fit_fraction=0.2)
    for (a, _), (b, _) in zip(honest, noisy, strict=True):
        assert a["actual_final"] != b["actual_final"]
        for key in ("predicted_final", "persistence", "A", "B", "Cmid", "R0", "fit_points"):
            assert a[key] == b[key], key


def test_gain_prior_scale_is_pooled_over_the_runs_of_a_file():
    """A run still flat in its fit window borrows the rise of its siblings: its forecast moves up toward them."""
    x = np.arange(0, 60, 4.0)
    rising = [sigmoid_curve(x, 0.05, 0.6, 2.0, 30.0 + 5 * i) for i in range(3)]
    flat = np.full_like(x, 0.05) + 0.002 * np.sin(x)
    runs = [(x, y) for y in [*rising, flat]]
    scales = [a_prior_sd(y, Priors()) for _, y in runs]
    assert pooled_gain_sd(runs, 0.0, Priors()) == pytest.approx(float(np.median(scales)))
    assert scales[-1] == Priors().a_above_max_min < pooled_gain_sd(runs, 0.0, Priors())
    long_x = np.arange(0, 300, 4.0)
    curves = [Curve(f"r{i}", long_x, np.interp(long_x, x, y), "exp.csv") for i, (_, y) in enumerate(runs)]
    alone, _ = forecast_curve(curves[-1], fit_fraction=0.2)
    pooled, _ = forecast_curves(curves, fit_fraction=0.2)[-1]
    assert pooled["predicted_final"] > alone["predicted_final"]


@pytest.fixture(scope="module")
def real_backtests(shared_data):
    """The back-test at 20% and 40% on ../shared/data/rl_curves, computed once for the tests below."""
    curves = load_curves(shared_data / "rl_curves")
    assert len(curves) > 50
    return {fraction: backtest(curves, fraction) for fraction in (0.2, 0.4)}


def test_backtest_beats_persistence_on_real_rl_curves(real_backtests):
    """Fitting the first 20% / 40% of each real GRPO curve, the forecast's median error is below persistence's."""
    for fraction, result in real_backtests.items():
        assert result["median_abs_error"] < result["persistence_median_abs_error"], (
            fraction,
            result["ratio"],
        )


def test_backtest_40_percent_meets_the_0_03_target(real_backtests):
    assert real_backtests[0.4]["median_abs_error"] <= 0.03


@pytest.mark.xfail(
    strict=True, reason="open: at 20% the median error is ~0.037 (target 0.03); see docs/evals.md"
)
def test_backtest_20_percent_meets_the_0_03_target(real_backtests):
    assert real_backtests[0.2]["median_abs_error"] <= 0.03


def test_sweep_fit_recovers_slopes_and_ranking():
    records = [
        {
            "run": f"lr{lr}_bs{bs}",
            "A": 0.5 + 0.02 * math.log(lr / 1e-6) - 0.01 * math.log(bs / 64),
            "Cmid": 100 * (lr / 1e-6) ** -0.5,
            "lr": lr,
            "batch_size": bs,
        }
        for lr in (5e-7, 1e-6, 2e-6)
        for bs in (32, 64, 128)
    ]
    fit = fit_sweep(records)
    assert fit["A"]["slope_log_lr"] == pytest.approx(0.02, abs=1e-9)
    assert fit["A"]["slope_log_batch_size"] == pytest.approx(-0.01, abs=1e-9)
    assert fit["log_Cmid"]["slope_log_lr"] == pytest.approx(-0.5, abs=1e-9)
    assert rank_by_asymptote(records)[0]["run"] == "lr2e-06_bs32"
    assert parse_hparams("probe_lr1e-6_bs64") == {"lr": 1e-6, "batch_size": 64.0}


def _write_sweep_csv(path, column):
    """A W&B-style sweep export at PATH: a Step column and one sigmoid curve a run over lr (5e-7, 1e-6, 2e-6) and
    batch size (32, 64), named COLUMN.format(lr=..., bs=...); a higher lr rises higher, batch size 32 a little
    higher than 64."""
    x = np.arange(0, 240, 4.0)
    runs = {column.format(lr=lr, bs=bs): (lr, bs) for lr in (5e-7, 1e-6, 2e-6) for bs in (32, 64)}
    cols = {
        name: sigmoid_curve(x, 0.05, 0.3 + 0.05 * math.log2(lr / 5e-7) + (0.02 if bs == 32 else 0), 2.0, 50.0)
        for name, (lr, bs) in runs.items()
    }
    lines = ["Step," + ",".join(cols)] + [
        f"{s}," + ",".join(f"{cols[c][j]:.4f}" for c in cols) for j, s in enumerate(x)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _sweep_fit(path, *options):
    """What `mathmix eval sweep-fit PATH OPTIONS` writes (fit.json beside PATH), after it exits 0."""
    from mathmix.cli import app

    fit_path = path.parent / "fit.json"
    result = CliRunner().invoke(app, ["eval", "sweep-fit", str(path), *options, "-o", str(fit_path)])
    assert result.exit_code == 0, result.output
    return json.loads(fit_path.read_text())


def test_compare_and_sweep_fit_cli_on_a_sweep_csv(tmp_path):
    from mathmix.cli import app

    path = _write_sweep_csv(tmp_path / "sweep.csv", "probe_lr{lr:g}_bs{bs} - heldout")
    ranking = tmp_path / "ranking.json"
    result = CliRunner().invoke(app, ["eval", "compare", str(path), "--n-boot", "5", "-o", str(ranking)])
    assert result.exit_code == 0, result.output
    ranked = json.loads(ranking.read_text())
    assert ranked[0]["run"] == "probe_lr2e-06_bs32 - heldout" and ranked[0]["rank"] == 1
    fit = _sweep_fit(path)
    assert fit["A"]["slope_log_lr"] == pytest.approx(0.05 / math.log(2), abs=0.015)
    assert fit["A"]["slope_log_batch_size"] < 0


def test_sweep_fit_leaves_a_constant_batch_size_out_of_the_fit():
    records = [
        {
            "run": f"run_lr{lr:g}_bs64",
            "A": 0.4 + 0.03 * math.log(lr / 1e-6),
            "Cmid": 80.0,
            "lr": lr,
            "batch_size": 64,
        }
        for lr in (1e-6, 2e-6, 4e-6)
    ]
    fit = fit_sweep(records)
    # lstsq used to split the intercept with log(64): a 'batch-size slope' from one batch size
    assert fit["hyperparameters"] == ["lr"] and fit["fixed"] == {"batch_size": 64}
    assert set(fit["A"]) == {
        "intercept",
        "slope_log_lr",
        "r2",
        "stderr_slope_log_lr",
        "interval90_slope_log_lr",
    }
    assert fit["A"]["slope_log_lr"] == pytest.approx(0.03, abs=1e-9)
    assert fit["centre"] == {"lr": pytest.approx(2e-6)}  # the geometric mean of 1e-6, 2e-6, 4e-6
    assert fit["A"]["intercept"] == pytest.approx(0.4 + 0.03 * math.log(2), abs=1e-9)  # A at the centre
    with pytest.raises(ValueError, match="every run has lr 1e-06, batch_size 64"):
        fit_sweep([{**r, "lr": 1e-6} for r in records])
    assert fit["ignored"] == {}


def test_sweep_fit_r2_is_null_where_it_means_nothing():
    """R^2 was 1.0 when every run had the same A (0 / 0) and when runs == fitted parameters (exact by construction)."""
    records = [
        {"run": f"run{i}", "A": 0.4, "Cmid": 80.0 * (i + 1) ** 0.5 + 3 * i**2, "lr": 1e-6 * 2**i}
        for i in range(4)
    ]
    fit = fit_sweep(records)
    assert fit["A"]["r2"] is None
    assert fit["A"]["r2_note"] == "every run has the same A: no variance to explain"
    assert 0 < fit["log_Cmid"]["r2"] < 1 and "r2_note" not in fit["log_Cmid"]
    # 2 runs for an intercept and one slope; 3 runs for an intercept and two slopes
    two = fit_sweep([{**r, "A": 0.4 + 0.01 * i} for i, r in enumerate(records[:2])])
    for target in ("A", "log_Cmid"):
        assert two[target]["r2"] is None
        assert two[target]["r2_note"] == (
            "2 runs for 2 fitted parameters (intercept and log lr): a perfect fit by construction"
        )
    three = fit_sweep(
        [{"run": f"r{i}", "A": a, "Cmid": 50.0 + i, "lr": lr, "batch_size": bs}
         for i, (a, lr, bs) in enumerate([(0.3, 1e-6, 32), (0.5, 2e-6, 32), (0.2, 1e-6, 64)])]
    )  # fmt: skip
    assert three["A"]["r2"] is None and "3 runs for 3 fitted parameters" in three["A"]["r2_note"]


def test_sweep_fit_names_a_hyperparameter_only_some_runs_give():
    records = [
        {
            "run": f"run{i}",
            "A": 0.4 + 0.03 * math.log(lr / 1e-6),
            "Cmid": 80.0,
            "lr": lr,
            "batch_size": 64 * 2**i,
        }
        for i, lr in enumerate((1e-6, 2e-6, 4e-6))
    ]
    del records[1]["batch_size"]
    fit = fit_sweep(records)
    assert fit["hyperparameters"] == ["lr"] and fit["ignored"] == {"batch_size": ["run1"]}


def _curve_csv(path, columns: dict[str, np.ndarray], x: np.ndarray) -> None:
    lines = ["Step," + ",".join(columns)]
    lines += [f"{s}," + ",".join(f"{columns[c][j]:.4f}" for c in columns) for j, s in enumerate(x)]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fit-fraction", "0"], "--fit-fraction must be in (0, 1] (got 0.0)"),  # quietly fitted 2 points
        (["--fit-fraction", "-0.2"], "--fit-fraction must be in (0, 1]"),
        (["--fit-fraction", "1.5"], "--fit-fraction must be in (0, 1]"),
        (["--skip-fraction", "1.0"], "--skip-fraction must be in [0, 1)"),
        (["--n-boot", "-1"], "--n-boot must be >= 0"),  # IndexError traceback
        (["--target", "0"], "--target must be a compute > 0"),
        (["--n-boot", "-1", "--json"], "--n-boot must be >= 0"),
        (["--compute-column", "nope"], "no compute column 'nope' (columns: Step, run_a - acc"),  # used Step
        (["--column", "heldout"], "matches --column 'heldout' (curves: run_a - acc)"),
    ],
)
def test_forecast_cli_rejects_bad_options_in_one_line(tmp_path, args, message):
    from mathmix.cli import app

    x = np.arange(0, 100, 10.0)
    path = tmp_path / "curves.csv"
    _curve_csv(path, {"run_a - acc": sigmoid_curve(x, 0.1, 0.5, 2.0, 30.0)}, x)
    result = CliRunner().invoke(app, ["eval", "forecast", str(path), *args])
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert "Traceback" not in result.output


def test_column_filter_that_matches_nothing_names_the_filter(tmp_path):
    from mathmix.cli import app

    x = np.arange(0, 100, 10.0)
    path = tmp_path / "wandb.csv"
    _curve_csv(path, {"grpo - val/acc": sigmoid_curve(x, 0.1, 0.5, 2.0, 30.0)}, x)
    result = CliRunner().invoke(app, ["eval", "compare", str(path)])  # default --column heldout
    assert result.exit_code == 2, result.output
    assert (
        "no curve in" in result.stderr
        and "matches --column 'heldout' (curves: grpo - val/acc)" in result.stderr
    )


def test_a_non_utf8_csv_fails_alone_and_is_skipped_in_a_folder(tmp_path):
    from mathmix.cli import app

    x = np.arange(0, 100, 10.0)
    for name, a in (("a", 0.5), ("b", 0.7)):
        (tmp_path / name).mkdir()
        _curve_csv(tmp_path / name / "acc.csv", {"run - acc": sigmoid_curve(x, 0.1, a, 2.0, 30.0)}, x)
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("Step,run é - acc\n0,0.1\n".encode("latin-1"))
    result = CliRunner().invoke(app, ["eval", "forecast", str(bad)])
    assert result.exit_code == 2 and "latin1.csv: not UTF-8 text" in result.stderr, result.output
    result = CliRunner().invoke(app, ["eval", "forecast", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert f"skipped {bad}: not UTF-8 text" in result.stderr
    records = json.loads(result.stdout)
    # the same column name in two files: "file" tells the runs apart
    assert sorted((r["run"], r["file"]) for r in records) == [
        ("run - acc", str(tmp_path / "a/acc.csv")),
        ("run - acc", str(tmp_path / "b/acc.csv")),
    ]
    out = tmp_path / "fc"
    result = CliRunner().invoke(app, ["eval", "forecast", str(tmp_path), "--n-boot", "0", "-o", str(out)])
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "forecast.json").read_text())
    assert [r["file"] for r in saved] == [r["file"] for r in records] and "R0" in saved[0]


def test_sweep_fit_says_when_lr_and_batch_size_moved_together():
    records = [
        {
            "run": f"r{i}",
            "A": 0.4 + 0.02 * i,
            "Cmid": 80.0 * (1 + i),
            "lr": 1e-6 * 2**i,
            "batch_size": 64 * 2**i,
        }
        for i in range(4)
    ]  # the LR scaled with the batch: one direction in the data, not two
    fit = fit_sweep(records)
    assert fit["hyperparameters"] == ["lr"] and "batch_size" in fit["confounded"]
    assert set(fit["A"]) >= {"intercept", "slope_log_lr"} and "slope_log_batch_size" not in fit["A"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("qwen_lr1e-6_mb64", {"lr": 1e-6, "batch_size": 64.0}),  # verl / W&B run names
        ("qwen_lr1e-6_mb_64", {"lr": 1e-6, "batch_size": 64.0}),
        ("qwen_lr1e-6_MB-32", {"lr": 1e-6, "batch_size": 32.0}),
        ("lr1e-06_mb64 - heldout_mean@4", {"lr": 1e-6, "batch_size": 64.0}),  # `eval sweep`'s folder names
        ("mb128_lr2e-6", {"lr": 2e-6, "batch_size": 128.0}),
        # the names read before read the same
        ("qwen_lr1e-6_bs64", {"lr": 1e-6, "batch_size": 64.0}),
        ("run_lr_1e-6_bs_64", {"lr": 1e-6, "batch_size": 64.0}),
        ("x_batch_size128_lr=3e-7", {"lr": 3e-7, "batch_size": 128.0}),
        # `mb` only as a word of the name, as `bs` and `lr`
        ("run_emb128_lr1e-6", {"lr": 1e-6}),
        ("climb64", {}),
    ],
)
def test_parse_hparams_reads_a_batch_size_written_mb(name, expected):
    """A mini-batch written `mb64` / `mb_64` (as `eval sweep` names its folders and verl runs are often named) was
    not read: a sweep over lr and batch size exported from W&B was fitted on lr alone."""
    assert parse_hparams(name) == expected


def test_sweep_fit_fits_the_batch_size_of_columns_named_mb(tmp_path):
    path = _write_sweep_csv(tmp_path / "sweep.csv", "qwen_lr{lr:g}_mb{bs} - acc")
    fit = _sweep_fit(path, "--column", "acc")
    assert sorted({r["batch_size"] for r in fit["records"]}) == [32.0, 64.0]
    assert fit["A"]["slope_log_batch_size"] < 0
