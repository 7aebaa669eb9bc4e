"""`eval sweep-fit`'s slopes with their uncertainty: the intercept at the sweep's centre (not at lr = 1,
batch = 1), each slope's standard error and 90% interval, and what it says where the sweep cannot tell."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from curve_data import X, run_eval
from curve_data import curve as sigmoid

from evals.forecast_report import fit_sweep

LRS = (5e-7, 1e-6, 4e-6)
BATCHES = (32, 64, 256)


def _records(noise: float = 0.0, seed: int = 0, lrs=LRS, batches=BATCHES) -> list[dict]:
    """A sweep whose true A slopes are 0.05 (log lr) and -0.03 (log batch size), log Cmid's -0.5 and 0.3."""
    rng = np.random.default_rng(seed)
    return [
        {
            "run": f"lr{lr:g}_bs{bs}",
            "A": 0.5 + 0.05 * math.log(lr / 1e-6) - 0.03 * math.log(bs / 64) + noise * rng.standard_normal(),
            "Cmid": 60 * (lr / 1e-6) ** -0.5 * (bs / 64) ** 0.3 * math.exp(noise * rng.standard_normal()),
            "lr": lr,
            "batch_size": bs,
        }
        for lr in lrs
        for bs in batches
    ]


def test_intercept_is_the_value_at_the_sweeps_geometric_mean():
    """The intercept was A at lr = 1, batch size = 1 (natural logs): far outside any sweep."""
    fit = fit_sweep(_records())
    centre = {"lr": math.exp(np.mean(np.log(LRS))), "batch_size": math.exp(np.mean(np.log(BATCHES)))}
    assert fit["centre"] == pytest.approx(centre)
    expected = 0.5 + 0.05 * math.log(centre["lr"] / 1e-6) - 0.03 * math.log(centre["batch_size"] / 64)
    assert fit["A"]["intercept"] == pytest.approx(expected, abs=1e-9)
    assert fit["log_Cmid"]["intercept"] == pytest.approx(
        math.log(60 * (centre["lr"] / 1e-6) ** -0.5 * (centre["batch_size"] / 64) ** 0.3), abs=1e-9
    )
    assert fit["A"]["slope_log_lr"] == pytest.approx(0.05, abs=1e-9)


def test_slope_intervals_cover_the_truth_about_90_percent_of_the_time():
    """Over many noisy sweeps the 90% interval holds the true slope about 90% of the time, and the standard
    error matches the slopes' spread."""
    truth = {
        ("A", "lr"): 0.05,
        ("A", "batch_size"): -0.03,
        ("log_Cmid", "lr"): -0.5,
        ("log_Cmid", "batch_size"): 0.3,
    }
    hits = dict.fromkeys(truth, 0)
    slopes: dict[tuple[str, str], list[float]] = {k: [] for k in truth}
    errors: dict[tuple[str, str], list[float]] = {k: [] for k in truth}
    seeds = 300
    for seed in range(seeds):
        fit = fit_sweep(_records(noise=0.02, seed=seed))
        for (target, key), value in truth.items():
            lo, hi = fit[target][f"interval90_slope_log_{key}"]
            hits[(target, key)] += lo <= value <= hi
            slopes[(target, key)].append(fit[target][f"slope_log_{key}"])
            errors[(target, key)].append(fit[target][f"stderr_slope_log_{key}"])
    for key in truth:
        assert 0.84 <= hits[key] / seeds <= 0.96, (key, hits[key])
        assert np.mean(errors[key]) == pytest.approx(np.std(slopes[key]), rel=0.2)


def test_two_runs_give_no_interval_and_a_warning():
    """A 2-run sweep printed slope 0.0059 (truth 0.05) with no word: 2 runs fit an intercept and a slope exactly."""
    records = [
        {"run": f"r{i}", "A": a, "Cmid": 60.0 + i, "lr": lr}
        for i, (a, lr) in enumerate([(0.5, 1e-6), (0.51, 2e-6)])
    ]
    fit = fit_sweep(records)
    for target in ("A", "log_Cmid"):
        assert fit[target]["stderr_slope_log_lr"] is None
        assert fit[target]["interval90_slope_log_lr"] is None
        assert "2 runs for 2 fitted parameters" in fit[target]["interval_note"]
    from evals.forecast_report import sweep_warnings

    (line,) = sweep_warnings(fit)
    assert "2 runs for 2 fitted parameters" in line and "no uncertainty" in line


def test_a_slope_whose_interval_includes_zero_is_noted():
    fit = fit_sweep(_records(noise=0.02, seed=1))
    for key in ("lr", "batch_size"):  # the note is there exactly where the interval holds 0
        lo, hi = fit["log_Cmid"][f"interval90_slope_log_{key}"]
        noted = f"slope_log_{key}" in fit["log_Cmid"].get("slope_notes", {})
        assert noted == (lo <= 0 <= hi)
    assert "slope_notes" not in fit_sweep(_records())["A"]  # exact: zero-width intervals away from 0
    wobble = (0.0, 0.004, -0.003, 0.002, -0.004, 0.001, 0.003, -0.002, -0.001)
    flat = fit_sweep([{**r, "A": 0.5 + w} for r, w in zip(_records(), wobble, strict=True)])
    lo, hi = flat["A"]["interval90_slope_log_lr"]
    assert lo < 0 < hi
    assert "includes 0" in flat["A"]["slope_notes"]["slope_log_lr"]


def _probe(folder, heldout, lr, mb=64):
    """A probe folder as `eval rl-probe` writes it: validation.csv with its tracked columns, summary.json."""
    folder.mkdir(parents=True)
    lines = ["Step,rollouts,heldout_mean@4,math500,mean_response_length,train_reward"]
    lines += [f"{s:g},{s * 2048:g},{h:.5f},0.3,300,-0.5" for s, h in zip(X, heldout, strict=True)]
    (folder / "validation.csv").write_text("\n".join(lines) + "\n")
    (folder / "summary.json").write_text(json.dumps({"config": {"learning_rate": lr, "mini_batch": mb}}))


def test_sweep_fit_cli_warns_on_two_runs(tmp_path):
    """A 2-run fit printed its slopes with no warning."""
    for lr, a in ((1e-6, 0.5), (2e-6, 0.55)):
        _probe(tmp_path / "sweep" / f"lr{lr:g}_mb64", sigmoid(a, 60.0), lr)
    result = run_eval("sweep-fit", tmp_path / "sweep")
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)
    assert fit["centre"]["lr"] == pytest.approx(math.sqrt(2) * 1e-6)
    assert fit["A"]["interval90_slope_log_lr"] is None
    assert "warning: 2 runs for 2 fitted parameters" in " ".join(result.stderr.split())


def test_a_probe_folders_own_columns_are_skipped_silently(tmp_path):
    """Every probe folder printed `skipped columns 'rollouts', 'mean_response_length', 'train_reward' ... not
    accuracies` (9 identical lines for a 9-run sweep); a user's CSV with such columns keeps the line."""
    for lr, a in ((1e-6, 0.5), (2e-6, 0.55), (4e-6, 0.6)):
        _probe(tmp_path / "sweep" / f"lr{lr:g}_mb64", sigmoid(a, 60.0), lr)
    result = run_eval("sweep-fit", tmp_path / "sweep")
    assert result.exit_code == 0, result.output
    assert "skipped column" not in result.stderr
    user = tmp_path / "user.csv"  # a user's CSV keeps the line
    user.write_text((tmp_path / "sweep" / "lr1e-06_mb64" / "validation.csv").read_text())
    result = run_eval("forecast", user, "--n-boot", "0", "-o", tmp_path / "fc")
    assert "skipped columns 'rollouts'" in result.stderr


def test_sweep_help_texts():
    help_fit = " ".join(run_eval("sweep-fit", "--help").stdout.split())
    for words in ("validation.csv", "summary.json", "natural", "centred", "-o"):
        assert words in help_fit, words
    help_sweep = " ".join(run_eval("sweep", "--help").stdout.split())
    assert "--eval-every" in help_sweep and "validation" in help_sweep.split("--eval-every", 1)[1][:200]
