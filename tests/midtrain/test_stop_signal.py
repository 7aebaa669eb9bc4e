"""SIGTERM/SIGUSR1 (a preemption) stop training after the step in flight, checkpointed; the rerun matches an
uninterrupted run. Before, every step since the last periodic checkpoint was lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

STEPS = 40


def _rows(stage_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (stage_dir / "metrics.jsonl").read_text().splitlines()]


def _wait_for_step(proc: subprocess.Popen, metrics: Path, step: int, timeout: float = 180) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        lines = metrics.read_text().splitlines() if metrics.exists() else []
        if any(json.loads(x)["step"] >= step for x in lines[-2:] if x.endswith("}")):
            return True
        time.sleep(0.01)
    return False


def _stop_with(
    sig: int, args: list[str], stage_dir: Path, mt, group: bool = False
) -> tuple[subprocess.CompletedProcess, int]:
    """Start `mathmix train ARGS`, send `sig` once step 5 is logged (to the launcher, or with GROUP to its process
    group: the launcher and torchrun, not the workers, which torchrun starts in sessions of their own); the
    finished process and its last step."""
    proc = subprocess.Popen(mt.cmd("train", *args, "--no-progress"), cwd=mt.repo, env=mt.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=group)  # fmt: skip
    try:
        reached = _wait_for_step(proc, stage_dir / "metrics.jsonl", 5)
        if not reached:
            proc.kill()
        assert reached, f"the run ended before the signal: {proc.communicate()[1][-2000:]}"
        os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), max(
        r["step"] for r in _rows(stage_dir)
    )


def _assert_matches_uninterrupted(resumed: list[dict], tmp_path: Path, mt, **recipe) -> None:
    straight = mt.train(mt.recipe(**recipe, out=tmp_path / "straight"))["stable"]
    assert [r["step"] for r in resumed] == list(range(1, STEPS + 1))  # each step once: none redone, none lost
    for a, b in zip(resumed, straight, strict=True):
        assert abs(a["loss"] - b["loss"]) <= 1e-6, (a, b)
        assert a["lr"] == b["lr"] and a["tokens"] == b["tokens"]


def test_sigterm_checkpoints_the_step_in_flight_and_the_rerun_matches(tiny_shards, tmp_path, mt):
    # checkpoint_every past the end: before, a SIGTERM here lost every step; now the stopped step is saved
    settings = dict(shards=tiny_shards, stable_tokens=STEPS * 256, checkpoint_every=1000)
    recipe = mt.write_recipe(tmp_path / "r.yaml", mt.recipe(**settings, out=tmp_path / "run"))
    stage_dir = tmp_path / "run" / "stable"
    result, stopped_at = _stop_with(signal.SIGTERM, [str(recipe)], stage_dir, mt)

    assert result.returncode == 128 + signal.SIGTERM, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    said = result.stdout + result.stderr
    assert f"stopped by SIGTERM at step {stopped_at} of {STEPS}" in said and "rerun the same command" in said
    assert not (stage_dir / "done.json").exists()
    assert 5 <= stopped_at < STEPS
    assert [p.name for p in (stage_dir / "checkpoints").iterdir()] == [f"step_{stopped_at:08d}"]

    resumed = mt.train(mt.recipe(**settings, out=tmp_path / "run"))["stable"]
    _assert_matches_uninterrupted(resumed, tmp_path, mt, **settings)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="torchrun's local workers")
@pytest.mark.parametrize("group", [False, True], ids=["launcher", "process-group"])
def test_sigusr1_to_the_launcher_stops_every_rank_at_one_checkpoint(tiny_shards, tmp_path, mt, group):
    # Slurm's `--signal=USR1@120`: the launcher passes it to torchrun as SIGTERM, torchrun to both ranks. Sent to
    # the launcher's process group, torchrun got it too and died of it (SIGUSR1's default), and the workers,
    # orphaned, trained the whole recipe while the launcher said 138
    settings = dict(shards=tiny_shards, stable_tokens=STEPS * 256, checkpoint_every=1000)
    recipe = mt.write_recipe(tmp_path / "r.yaml", mt.recipe(**settings, out=tmp_path / "run"))
    stage_dir = tmp_path / "run" / "stable"
    result, stopped_at = _stop_with(signal.SIGUSR1, [str(recipe), "--nproc", "2"], stage_dir, mt, group)

    assert result.returncode == 128 + signal.SIGUSR1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr  # torchrun's own, for the signal that stopped it, is not shown
    assert "rerun the same command to resume" in result.stdout + result.stderr
    assert [p.name for p in (stage_dir / "checkpoints").iterdir()] == [f"step_{stopped_at:08d}"]
    assert not (stage_dir / "done.json").exists()

    resumed = mt.run_cli("train", str(recipe), "--nproc", "2", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = _rows(stage_dir)
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    assert json.loads((stage_dir / "done.json").read_text())["world_size"] == 2


def test_a_signal_as_a_stage_ends_does_not_start_the_next(tiny_shards, tmp_path, mt, monkeypatch):
    from midtrain import trainer
    from midtrain.config import TrainRecipe
    from midtrain.stop import TrainingStopped

    log = trainer.MetricsLogger.log

    def log_then_signal(self, row):  # the signal lands during the stable stage's last step
        log(self, row)
        if row["stage"] == "stable" and row["step"] == 4:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(trainer.MetricsLogger, "log", log_then_signal)
    recipe = TrainRecipe.model_validate(
        mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=4 * 256, decay_tokens=2 * 256)
    )

    def reached_the_test(signum, frame):  # without the trainer's handler, not the test process killed
        raise AssertionError("SIGTERM was not handled by the trainer")

    before = signal.signal(signal.SIGTERM, reached_the_test)
    try:
        with pytest.raises(TrainingStopped, match="before stage decay started") as stopped:
            trainer.train_recipe(recipe, progress=False)
        assert signal.getsignal(signal.SIGTERM) is reached_the_test  # the trainer's handler went with the run
    finally:
        signal.signal(signal.SIGTERM, before)
    assert stopped.value.signum == signal.SIGTERM
    assert (tmp_path / "run" / "stable" / "done.json").exists()
    assert not (tmp_path / "run" / "decay" / "checkpoints").exists()

    monkeypatch.setattr(trainer.MetricsLogger, "log", log)
    trainer.train_recipe(recipe, progress=False)  # the rerun trains the decay branch
    assert json.loads((tmp_path / "run" / "decay" / "done.json").read_text())["steps"] == 2
