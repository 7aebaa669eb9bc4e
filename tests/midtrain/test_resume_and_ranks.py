"""A run killed with SIGKILL and restarted matches an uninterrupted run; 2 processes match 1 process."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import numpy as np


def _losses(stage_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (stage_dir / "metrics.jsonl").read_text().splitlines()]


def _wait_for_step(proc: subprocess.Popen, metrics: Path, step: int, timeout: float = 120) -> bool:
    """Poll metrics.jsonl until it holds `step`; False if the process ended first."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and any(json.loads(x)["step"] >= step for x in metrics.read_text().splitlines()[-2:]
                                    if x.endswith("}")):  # fmt: skip
            return True
        time.sleep(0.01)
    return False


def test_sigkill_and_restart_matches_uninterrupted(tiny_shards, tmp_path, mt):
    steps = 40
    killed = mt.recipe(tiny_shards, tmp_path / "killed", stable_tokens=steps * 256, checkpoint_every=8)
    recipe = mt.write_recipe(tmp_path / "killed.yaml", killed)
    stage_dir = tmp_path / "killed" / "stable"
    proc = subprocess.Popen(mt.cmd("train", str(recipe), "--no-progress"), cwd=mt.repo, env=mt.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        reached = _wait_for_step(proc, stage_dir / "metrics.jsonl", 11)  # past the step-8 checkpoint
        assert reached, f"the run ended before it could be killed: {proc.stderr.read()[-2000:]}"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (stage_dir / "done.json").exists()
    ckpts = sorted(p.name for p in (stage_dir / "checkpoints").iterdir())
    assert ckpts and ckpts[-1] < f"step_{steps:08d}"  # it died mid-stage
    killed_at = max(r["step"] for r in _losses(stage_dir))

    resumed = mt.train(killed)["stable"]  # restart: resumes from the latest complete checkpoint
    straight = mt.train(mt.recipe(tiny_shards, tmp_path / "straight", stable_tokens=steps * 256,
                                  checkpoint_every=8))["stable"]  # fmt: skip
    assert [r["step"] for r in resumed] == list(range(1, steps + 1))  # each step once, steps after 8 redone
    assert killed_at > 8
    for a, b in zip(resumed, straight, strict=True):
        assert abs(a["loss"] - b["loss"]) <= 1e-6, (a, b)
        assert a["lr"] == b["lr"] and a["tokens"] == b["tokens"]
        assert abs(a["grad_norm"] - b["grad_norm"]) <= 1e-5


def test_two_processes_match_one_process(tiny_shards, tmp_path, mt):
    steps = 8  # 8 sequences per step: 1 rank x 2 micro-batches of 4, or 2 ranks x 1 micro-batch of 4
    two = mt.recipe(tiny_shards, tmp_path / "two", stable_tokens=steps * 256, decay_tokens=4 * 256)
    result = mt.run_cli(
        "train", str(mt.write_recipe(tmp_path / "two.yaml", two)), "--nproc", "2", "--no-progress"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "two" / "stable" / "done.json").read_text())["world_size"] == 2
    one = mt.train(mt.recipe(tiny_shards, tmp_path / "one", stable_tokens=steps * 256, decay_tokens=4 * 256))
    for stage in ("stable", "decay"):  # the decay branch starts from the sharded stable checkpoint
        two_rows = _losses(tmp_path / "two" / stage)
        assert len(two_rows) == len(one[stage])
        np.testing.assert_allclose(
            [r["loss"] for r in two_rows], [r["loss"] for r in one[stage]], rtol=0, atol=1e-5
        )
    # sharded (FSDP2) checkpoints of 2 ranks load into 1 process: exported weights give the same logits
    from midtrain.export import export_checkpoint

    export_checkpoint(tmp_path / "two" / "stable", tmp_path / "hf2", dtype="float32")
    export_checkpoint(tmp_path / "one" / "stable", tmp_path / "hf1", dtype="float32")
    from safetensors.torch import load_file

    w2, w1 = (
        load_file(tmp_path / "hf2" / "model.safetensors"),
        load_file(tmp_path / "hf1" / "model.safetensors"),
    )
    assert w2.keys() == w1.keys()
    wdiff = max((w2[k] - w1[k]).abs().max().item() for k in w1)
    assert wdiff < 1e-5  # measured: 0.0 (same sums in the same order)


def test_restart_after_the_last_checkpoint_only_finishes_the_stage(tiny_shards, tmp_path, mt):
    recipe = mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=2 * 256)
    rows = mt.train(recipe)["stable"]
    (
        tmp_path / "run" / "stable" / "done.json"
    ).unlink()  # as if killed between the final checkpoint and done.json
    again = mt.train(recipe)["stable"]
    assert again == rows  # nothing retrained, nothing logged twice
    done = json.loads((tmp_path / "run" / "stable" / "done.json").read_text())
    assert done["steps"] == 2 and done["final_loss"] == rows[-1]["loss"]


def test_a_diverged_run_stops_before_checkpointing_nan_weights(tiny_shards, tmp_path, mt):
    # lr 1e10 trained 16 steps of NaN with exit 0: NaN checkpoints replaced the good ones and done.json was written
    import pytest

    from midtrain.checkpoint import list_checkpoints
    from midtrain.config import TrainRecipeError

    recipe = mt.recipe(
        tiny_shards, tmp_path / "out", stable_tokens=16 * 256, lr=1e10, checkpoint_every=1, keep_checkpoints=2
    )
    with pytest.raises(TrainRecipeError, match=r"diverged at step 3 .*step_00000002, is from before"):
        mt.train(recipe)
    stage = tmp_path / "out" / "stable"
    assert [p.name for p in list_checkpoints(stage / "checkpoints")] == ["step_00000001", "step_00000002"]
    assert not (stage / "done.json").exists() and len(_losses(stage)) == 3


def test_a_kill_while_done_json_is_written_reruns(tiny_shards, tmp_path, mt, monkeypatch):
    # done.json was written in place: killed half-way, every rerun skipped the stage and died on its JSON
    import pytest

    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=2 * 256)
    real = Path.write_text

    def torn(self, text, *args, **kwargs):
        if self.name.startswith("done.json"):
            real(self, text[: len(text) // 2])
            raise KeyboardInterrupt  # the kill
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", torn)
    with pytest.raises(KeyboardInterrupt):
        mt.train(recipe)
    monkeypatch.setattr(Path, "write_text", real)
    rows = mt.train(recipe)["stable"]
    done = json.loads((tmp_path / "out" / "stable" / "done.json").read_text())
    assert done["steps"] == 2 and len(rows) == 2
