"""Sweep and compare findings of session 18's review: a sweep rerun with other settings is refused before any probe
runs, sweep-fit refuses probes of other settings, compare skips a short run per path, and the messages for an
unfinished probe and a probe starting over."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from probe_data import probe_inputs
from typer.testing import CliRunner

TINY = [
    "--prompts-per-step", "2", "--rollouts", "2", "--micro-batch", "4", "--max-response", "8",
    "--heldout", "2", "--heldout-samples", "2", "--math500-limit", "2", "--eval-every", "1",
]  # fmt: skip
HELDOUT = [0.10, 0.20, 0.32, 0.41, 0.47, 0.50]


def _eval(*args: str):
    from mathmix.cli import app

    return CliRunner().invoke(app, ["eval", *args])


def _probe_folder(folder: Path, points: int = 6, summary: bool = True, **config) -> Path:
    """A hand-written probe folder: validation.csv of POINTS rows and, with SUMMARY, its summary.json."""
    folder.mkdir(parents=True)
    rows = ["Step,rollouts,heldout_mean@2,math500"]
    rows += [f"{i},{4 * i},{y},{y / 2}" for i, y in enumerate(HELDOUT[:points])]
    (folder / "validation.csv").write_text("\n".join(rows) + "\n")
    if summary:
        settings = {"learning_rate": 1e-6, "mini_batch": 2, "max_response": 8, "steps": 5, **config}
        (folder / "summary.json").write_text(json.dumps({"config": settings}))
    return folder


@pytest.mark.parametrize("folder", ["lr2e-06_mb2", "lr5e-07_mb2"])
def test_sweep_rerun_with_other_settings_is_refused_before_any_probe_runs(
    tiny_model_dir, tmp_path, monkeypatch, folder
):
    """A rerun with other sizes ran the probes it reached first, then refused: a folder of both settings. Each
    OUT/lr*_mb*/job.json (in the grid or not) is compared first, with its own lr and mini-batch."""
    import evals.rl_probe as rl_probe
    from evals.bench import has_eval_output
    from evals.rl_probe import ProbeConfig, probe_identity
    from pipelines.job_record import check_job

    prompts, bench = probe_inputs(tmp_path)
    out = tmp_path / "sweep"
    lr = float(folder.removeprefix("lr").split("_")[0])
    old = ProbeConfig(prompts_per_step=2, rollouts=2, micro_batch=4, max_response=16, heldout=2, heldout_samples=2,
                      math500_limit=2, eval_every=1, steps=2, learning_rate=lr, mini_batch=2)  # fmt: skip
    check_job(
        out / folder,
        probe_identity(tiny_model_dir, prompts, bench, old),
        "rl-probe",
        progress=has_eval_output,
    )
    (out / folder / "validation.csv").write_text("Step,heldout_mean@2\n0,0.1\n")
    ran: list[Path] = []
    monkeypatch.setattr(rl_probe, "run_probe", lambda model, p, run_dir, *a: ran.append(run_dir) or {})
    args = ["sweep", str(tiny_model_dir), "--prompts", str(prompts), "--data-dir", str(bench), "-o", str(out)]
    result = _eval(*args, "--lrs", "1e-6,2e-6", "--mini-batches", "2", "--steps", "2", *TINY)
    assert result.exit_code == 2, result.output
    assert ran == [], f"probes ran before the refusal: {ran}"
    assert folder in result.stderr and "settings.max_response: 16 -> 8" in result.stderr, result.stderr
    assert "Traceback" not in result.output


def test_sweep_fit_refuses_probes_run_with_other_settings(tmp_path):
    from evals.sweep_cli import sweep_records

    _probe_folder(tmp_path / "lr1e-06_mb2")
    _probe_folder(tmp_path / "lr2e-06_mb2", learning_rate=2e-6)
    _probe_folder(tmp_path / "lr5e-07_mb2", learning_rate=5e-7, max_response=16)
    with pytest.raises(ValueError, match="max_response") as err:
        sweep_records([tmp_path], "heldout")
    assert "lr5e-07_mb2" in str(err.value) and "lr1e-06_mb2" in str(err.value)
    # lr and mini-batch differing is what a sweep is
    (tmp_path / "lr5e-07_mb2/summary.json").unlink()
    _probe_folder(tmp_path / "lr1e-06_mb4", mini_batch=4)
    assert len(sweep_records([tmp_path / "lr1e-06_mb2", tmp_path / "lr1e-06_mb4"], "heldout")) == 2


def test_compare_skips_a_short_run_and_ranks_the_others(tmp_path):
    done = _probe_folder(tmp_path / "done")
    killed = _probe_folder(tmp_path / "killed", points=2, summary=False)
    result = _eval("compare", str(done), str(killed))
    assert result.exit_code == 0, result.output
    assert "skipped run" in result.stderr and str(killed) in result.stderr
    assert "done" in result.stdout
    both = _eval("compare", str(killed), str(_probe_folder(tmp_path / "killed2", points=2)))
    assert both.exit_code == 2 and "3 points or more" in both.stderr, both.output


def test_sweep_fit_names_unfinished_probes(tmp_path):
    _probe_folder(tmp_path / "lr1e-06_mb2")
    _probe_folder(tmp_path / "lr2e-06_mb2", summary=False)
    result = _eval("sweep-fit", str(tmp_path))
    assert result.exit_code == 2, result.output
    text = " ".join(result.stderr.split())
    assert "lr2e-06_mb2" in text and "which an unfinished probe does not have yet" in text, text
    (tmp_path / "lr1e-06_mb2/summary.json").unlink()
    result = _eval("sweep-fit", str(tmp_path))
    text = " ".join(result.stderr.split())
    assert result.exit_code == 2 and "unfinished probe has no summary.json yet" in text, text
    assert "lr1e-06_mb2" in text and "lr2e-06_mb2" in text, text


def test_a_probe_killed_before_its_first_checkpoint_says_it_starts_over(tmp_path, capsys):
    from evals.rl_probe import _resume_point

    assert _resume_point(tmp_path, rerun=True) is None
    assert "starts over" in capsys.readouterr().err
