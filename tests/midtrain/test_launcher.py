"""`mathmix train --nproc N` leaves nothing training when its launcher is killed, even by SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state, ppid, ...); None once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _descendants(pid: int) -> list[int]:
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    kids = [p for p in pids if (stat := _stat(p)) and int(stat[1]) == pid]
    return kids + [d for k in kids for d in _descendants(k)]


def _alive(pids: list[int]) -> list[int]:
    return [
        p for p in pids if (stat := _stat(p)) and stat[0] != "Z"
    ]  # a zombie has stopped; nobody reaped it


def _rows(metrics: Path) -> int:
    return len(metrics.read_text().splitlines()) if metrics.exists() else 0


def test_a_killed_launcher_takes_torchrun_and_its_workers_with_it(tiny_shards, tmp_path, mt):
    # thousands of steps: the run is mid-stage whenever it is killed
    recipe = mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=5000 * 256, checkpoint_every=10_000)
    path = mt.write_recipe(tmp_path / "run.yaml", recipe)
    metrics = tmp_path / "run" / "stable" / "metrics.jsonl"
    with open(tmp_path / "stderr.txt", "w") as err:  # a pipe nobody reads could fill and stall the workers
        launcher = subprocess.Popen(mt.cmd("train", str(path), "--nproc", "2", "--no-progress"), cwd=mt.repo,
                                    env=mt.env(), stdout=subprocess.DEVNULL, stderr=err,
                                    start_new_session=True)  # fmt: skip
    try:
        deadline = time.time() + 90
        while _rows(metrics) < 3 and launcher.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        assert _rows(metrics) >= 3, (tmp_path / "stderr.txt").read_text()[-2000:]
        tree = _descendants(launcher.pid)  # torchrun and its 2 workers
        assert len(tree) >= 3 and any(b"midtrain.torchrun" in Path(f"/proc/{p}/cmdline").read_bytes()
                                      for p in tree)  # fmt: skip
        launcher.kill()  # SIGKILL: no handler of the launcher runs
        launcher.wait()
        deadline = (
            time.time() + 30
        )  # torchrun's SIGTERM to its workers; they exit within a second or two here
        while _alive(tree) and time.time() < deadline:
            time.sleep(0.1)
        assert not _alive(tree), f"left running after the launcher was killed: {_alive(tree)}"
        rows = _rows(metrics)
        time.sleep(1)
        assert _rows(metrics) == rows  # nothing trains the folder any more: a rerun would be alone
        assert not (tmp_path / "run" / "stable" / "done.json").exists()
    finally:  # on failure, nothing of this run outlives the test (its own session, started above)
        try:
            os.killpg(launcher.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        launcher.wait()
