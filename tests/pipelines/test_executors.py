"""Executor plumbing that needs no cluster: Slurm queue reads, job names, the Ray address check, recipe warnings."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pipelines import executors
from pipelines.executors import ExecutorConfig, SlurmQueueError, slurm_jobs, wait_for_slurm_jobs


class FakeSlurm:
    """Stands in for subprocess.run: squeue answers from a script of (returncode, stdout); scancel is recorded."""

    def __init__(self, answers: list[tuple[int, str]]):
        self.answers, self.calls = list(answers), []

    def __call__(self, cmd, **kwargs):
        self.calls.append(cmd[0])
        if cmd[0] == "squeue":
            code, out = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            err = "slurm_load_jobs error: Socket timed out on send/recv operation" if code else ""
            return subprocess.CompletedProcess(cmd, code, out, err)
        return subprocess.CompletedProcess(cmd, 0, "", "")


def test_a_failing_squeue_is_not_an_empty_queue(monkeypatch):
    # one timed-out squeue used to read as "no jobs": the wait ended and run() cancelled the running jobs
    fake = FakeSlurm([(1, ""), (0, "17_0 None\n18 Dependency\n"), (1, ""), (0, "18 None\n"), (0, "")])
    monkeypatch.setattr(executors.subprocess, "run", fake)
    with pytest.raises(SlurmQueueError, match="squeue failed .*Socket timed out"):
        slurm_jobs("mathmix-web-abc123")
    fake.answers = [(1, ""), (0, "17_0 None\n18 Dependency\n"), (1, ""), (0, "18 None\n"), (0, "")]
    fake.calls.clear()
    wait_for_slurm_jobs("mathmix-web-abc123", poll_seconds=0.01)
    assert fake.calls == ["squeue"] * 5, "the wait stopped before the queue was seen empty"


def test_a_squeue_that_keeps_failing_ends_the_wait_without_cancelling(monkeypatch):
    fake = FakeSlurm([(1, "")])
    monkeypatch.setattr(executors.subprocess, "run", fake)
    with pytest.raises(RuntimeError, match="squeue failed .* left as they are: rerun"):
        wait_for_slurm_jobs("mathmix-web-abc123", poll_seconds=0.01, patience_s=0.1)
    assert "scancel" not in fake.calls


def test_a_rerun_that_cannot_read_the_queue_submits_nothing(monkeypatch, tmp_path):
    fake = FakeSlurm([(1, "")])
    monkeypatch.setattr(executors.subprocess, "run", fake)
    config = ExecutorConfig(kind="slurm", partition="debug")
    executor = config.build([], tmp_path / "logs", tasks=1)
    with pytest.raises(ValueError, match="squeue failed.*nothing was submitted"):
        config.run(executor)
    assert fake.calls == ["squeue"]


def test_slurm_job_names_differ_for_one_relative_folder_under_two_working_folders(monkeypatch, tmp_path):
    # output_dir: relrun started from two folders gave both runs one job name: each waited on the other's jobs
    config = ExecutorConfig(kind="slurm", partition="debug")
    names = []
    for where in ("a", "b"):
        (tmp_path / where).mkdir()
        monkeypatch.chdir(tmp_path / where)
        names.append(config.build([], "relrun/web/logs", tasks=1).job_name)
    assert names[0] != names[1]
    monkeypatch.chdir(tmp_path / "a")
    assert config.build([], str(tmp_path / "a" / "relrun/web/logs"), tasks=1).job_name == names[0]


def _serve(reply: bytes) -> tuple[int, threading.Event]:
    """A TCP server on a free port that answers every connection with `reply` (a service that is not Ray)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def loop():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(reply)
                time.sleep(0.5)
        server.close()

    threading.Thread(target=loop, daemon=True).start()
    return server.getsockname()[1], stop


@pytest.mark.parametrize("reply", [b"", b"HTTP/1.1 400 Bad Request\r\n\r\n"])
def test_a_ray_address_where_another_service_answers_fails_at_once(reply):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'mathmix[ray]')")
    from pipelines.executors import start_ray

    if ray.is_initialized():
        ray.shutdown()
    port, stop = _serve(reply)
    start = time.time()
    try:
        with pytest.raises(
            ValueError, match=f"127.0.0.1:{port}: something answers there, but not a Ray cluster"
        ):
            start_ray(ExecutorConfig(kind="ray", ray_address=f"127.0.0.1:{port}"))
    finally:
        stop.set()
    assert time.time() - start < 30  # ray.init against it retried for minutes


def test_keys_another_executor_kind_reads_are_named_in_a_warning(tmp_path, capsys):
    from pipelines.recipe import load_recipe

    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "name: r\noutput_dir: out\nexecutor: {kind: local, tasks: 1, partition: gpu, wait: false, ray_address: x}\n"
        "stages:\n  web: {inputs: [a.warc.gz]}\n"
    )
    load_recipe(recipe)
    err = capsys.readouterr().err
    assert "executor.kind local does not read executor.partition, executor.ray_address, executor.wait" in err
    recipe.write_text(recipe.read_text().replace(", partition: gpu, wait: false, ray_address: x", ""))
    load_recipe(recipe)
    assert "does not read" not in capsys.readouterr().err


def test_sbatch_reason_comes_from_a_test_submission_of_the_saved_script(monkeypatch, tmp_path):
    # datatrove runs sbatch without capturing stderr: the error said only "sbatch refused the job (exit 1)"
    (tmp_path / "launch_script.slurm").write_text("#!/bin/bash\n#SBATCH --partition=nosuch\n")

    def fake_run(cmd, **kwargs):
        assert cmd[:2] == ["sbatch", "--test-only"] and Path(cmd[2]).name == "launch_script.slurm"
        return subprocess.CompletedProcess(cmd, 1, "", "sbatch: error: invalid partition specified: nosuch\n")

    monkeypatch.setattr(executors.subprocess, "run", fake_run)
    err = subprocess.CalledProcessError(1, ["sbatch"])
    assert executors._sbatch_reason(err, tmp_path) == "sbatch: error: invalid partition specified: nosuch"
