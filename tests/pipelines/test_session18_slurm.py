"""A stage folder's output is never deleted under Slurm jobs of an earlier submission that still write into it.

A recipe whose executor's `tasks` was edited while the jobs of its earlier submission were queued or running was
taken as another job that had finished nothing: its data/ and logs/ were deleted under those jobs (a `wait: true`
rerun then ended exit 0 with pages missing). The rerun must be refused, naming the jobs, and delete nothing.

Uses the real single-node Slurm that scripts/slurm-up.sh starts (partition `debug`); skipped where none answers. The
jobs are submitted held (`sbatch --hold`), so they stay queued whatever else runs on the node, and are cancelled by
their ids at the end.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pipelines.recipe import load_recipe
from pipelines.runner import StageFailed, run_recipe
from pipelines.slurm_queue import SUBMITTED_FILE, slurm_jobs

PAGE = (
    "<html><head><title>{t}</title></head><body><article><h1>{t}</h1><p>{body}</p>"
    "<p>Let $x^2 + {n}x + 1 = 0$; then the roots are given by the quadratic formula, and we check them.</p>"
    "</article></body></html>"
)


@pytest.fixture
def slurm():
    if shutil.which("sbatch") is None or shutil.which("squeue") is None:
        pytest.skip("no Slurm client tools (scripts/slurm-up.sh starts a single-node Slurm)")
    info = subprocess.run(["sinfo", "-h", "-p", "debug", "-o", "%P"], capture_output=True, text=True)
    if info.returncode != 0 or not info.stdout.strip():
        pytest.skip("no Slurm partition `debug` answers (scripts/slurm-up.sh starts one)")


def _recipe(tmp: Path, tasks: int) -> Path:
    html = tmp / "html"
    if not html.is_dir():
        html.mkdir()
        for n in range(4):
            text = " ".join(["A worked example of solving a quadratic equation step by step."] * 12)
            (html / f"page{n}.html").write_text(PAGE.format(t=f"Quadratics {n}", body=text, n=n + 2))
    recipe = tmp / "held.yaml"
    recipe.write_text(
        f"name: held\noutput_dir: {tmp / 'run'}\n"
        f"executor: {{kind: slurm, partition: debug, tasks: {tasks}, cpus_per_task: 1, mem_per_cpu_gb: 1, "
        'wait: false, sbatch_args: {hold: ""}}\n'
        f'stages:\n  web: {{inputs: ["{html}"]}}\n'
    )
    return recipe


def test_changed_tasks_while_jobs_are_queued_is_refused_and_deletes_nothing(tmp_path, slurm):
    web = tmp_path / "run" / "web"
    job_name = ""
    try:
        assert run_recipe(load_recipe(_recipe(tmp_path, 2))) == {}  # submitted, held in the queue
        job_name = json.loads((web / "logs" / SUBMITTED_FILE).read_text())["job_name"]
        ids = sorted({job_id.split("_")[0] for job_id, _ in slurm_jobs(job_name)})
        assert ids, "the submitted jobs are not in the queue"
        before = sorted(p.relative_to(web) for p in web.rglob("*"))
        with pytest.raises(StageFailed) as refused:
            run_recipe(load_recipe(_recipe(tmp_path, 3)))
        message = str(refused.value)
        assert str(web) in message and "tasks: 2 -> 3" in message and "scancel" in message, message
        assert all(job_id in message for job_id in ids), message
        assert "\n" not in message.split(" (finished stages are kept")[0], message
        assert sorted(p.relative_to(web) for p in web.rglob("*")) == before, (
            "files were deleted under the jobs"
        )
        assert (web / "logs" / "executor.pik").is_file()
        # the same settings: told to rerun once the jobs have finished, as before
        assert run_recipe(load_recipe(_recipe(tmp_path, 2))) == {}
        assert slurm_jobs(job_name), "the earlier jobs were cancelled"
    finally:
        if job_name:
            subprocess.run(["scancel", "--name", job_name], check=False)  # this test's jobs only


def test_a_finished_submission_leaves_the_folder_to_a_changed_job(tmp_path):
    """A marker whose jobs have left the queue (or a machine without squeue) does not block the take-over."""
    from pipelines.job_record import check_job

    out = tmp_path / "web"
    (out / "logs").mkdir(parents=True)
    check_job(out, {"tasks": 2}, "web run", outputs=("data", "logs"))
    (out / "logs" / SUBMITTED_FILE).write_text(
        json.dumps({"job_name": "mathmix-web-nosuch", "ranks": [0, 1]})
    )
    (out / "logs" / "executor.pik").write_text("x")
    assert check_job(out, {"tasks": 3}, "web run", outputs=("data", "logs")) is False
    assert not (out / "logs").exists()


def test_a_stage_run_without_waiting_records_its_own_seconds_not_the_last_reruns(tmp_path, slurm):
    """With `wait: false` the summary is written by the rerun that finds every task done: its `seconds` were that
    rerun's half second, whatever the tasks took. They are the stage's: from its job record, written as it was
    first submitted, to its last task's completion marker."""
    import time

    recipe = _recipe(tmp_path, 2)
    recipe.write_text(recipe.read_text().replace(', sbatch_args: {hold: ""}', ""))
    web = tmp_path / "run" / "web"
    job_name = ""
    try:
        assert run_recipe(load_recipe(recipe)) == {}  # submitted
        job_name = json.loads((web / "logs" / SUBMITTED_FILE).read_text())["job_name"]
        deadline, summaries = time.monotonic() + 240, {}
        while "web" not in summaries and time.monotonic() < deadline:
            time.sleep(2)
            summaries = run_recipe(load_recipe(recipe))
        assert "web" in summaries, "the submitted jobs did not finish within 4 minutes"
    finally:
        if job_name:
            subprocess.run(["scancel", "--name", job_name], check=False)  # this test's jobs only
    began = (web / "job.json").stat().st_mtime
    ended = max(p.stat().st_mtime for p in (web / "logs" / "completions").iterdir())
    seconds = json.loads((web / "summary.json").read_text())["seconds"]
    assert seconds >= round(ended - began, 2) > 0, (seconds, ended - began)


def _marked_folder(tmp_path) -> Path:
    from pipelines.job_record import check_job

    out = tmp_path / "web"
    (out / "logs").mkdir(parents=True)
    check_job(out, {"tasks": 2}, "web run", outputs=("data", "logs"))
    (out / "logs" / SUBMITTED_FILE).write_text(json.dumps({"job_name": "mathmix-web-held", "ranks": [0, 1]}))
    (out / "logs" / "executor.pik").write_text("x")
    return out


def test_a_queue_that_cannot_be_read_leaves_a_submitted_folder_as_it_is(tmp_path, monkeypatch):
    """squeue failing (a busy slurmctld timing out) was read as an empty queue: the folder was deleted under jobs
    that were still queued. Refused, nothing deleted; with no squeue at all (no Slurm here) it is taken over."""
    from pipelines.job_record import check_job

    out = _marked_folder(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue = bin_dir / "squeue"
    squeue.write_text(
        "#!/bin/sh\necho 'squeue: error: Socket timed out on send/recv operation' >&2\nexit 1\n"
    )
    squeue.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    with pytest.raises(ValueError, match="the queue cannot be read .*Socket timed out.*nothing was deleted"):
        check_job(out, {"tasks": 3}, "web run", outputs=("data", "logs"))
    assert (out / "logs" / "executor.pik").is_file()
    squeue.unlink()
    monkeypatch.setenv("PATH", str(bin_dir))  # no squeue on PATH
    assert check_job(out, {"tasks": 3}, "web run", outputs=("data", "logs")) is False
    assert not (out / "logs").exists()
