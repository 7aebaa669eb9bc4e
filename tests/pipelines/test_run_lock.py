"""One `mathmix run` at a time per run folder: a second run on a folder in use is refused at once and writes
nothing (two used to run the same stages into the same outputs); the lock file trips no other check. Also: the
refusal for Slurm jobs still queued names real paths, not the records' `{run_dir}` placeholder."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipelines import executors
from pipelines.executors import SUBMITTED_FILE, JobsSubmitted
from pipelines.recipe import load_recipe
from pipelines.run_lock import RETRY_SECONDS, RunFolderBusy, run_folder_lock
from pipelines.runner import StageFailed, run_recipe
from pipelines.sample import write_sample

REPO = Path(__file__).resolve().parents[2]
LOCK = ".mathmix-run.lock"
HOLD = """
import sys
from pathlib import Path
from pipelines.run_lock import run_folder_lock
with run_folder_lock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes it (or kills this process)
"""


def _web_recipe(tmp_path: Path, run: Path) -> Path:
    pages = tmp_path / "pages"
    pages.mkdir(exist_ok=True)
    (pages / "news.html").write_text("<html><body><p>The council met on Tuesday.</p></body></html>")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {run}\nexecutor: {{tasks: 1, workers: 1}}\nstages:\n  web: {{inputs: ['{pages}']}}\n"
    )
    return recipe


def _holder(run: Path) -> subprocess.Popen:
    """A process holding RUN's lock as a run does, until its stdin is closed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _mathmix(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mathmix", *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def test_a_second_mathmix_run_on_a_folder_in_use_is_refused_at_once_and_writes_nothing(tmp_path):
    run = tmp_path / "run"
    recipe = _web_recipe(tmp_path, run)
    holder = _holder(run)
    try:
        before = _files(run)
        assert f"pid {holder.pid} on host {socket.gethostname()}" in before[LOCK].decode()
        start = time.monotonic()
        refused = _mathmix("run", str(recipe))
        assert refused.returncode == 2, refused.stderr
        assert time.monotonic() - start < 120  # at once: not waiting for the holder
        lines = [line for line in refused.stderr.splitlines() if "error:" in line]
        assert len(lines) == 1, refused.stderr  # one line, whatever the terminal width
        said = lines[0]
        assert f"{run}: another mathmix run is using this run folder" in said, said
        assert f"pid {holder.pid} on host {socket.gethostname()}" in said and "wait for it to end" in said, (
            said
        )
        assert "Traceback" not in refused.stderr
        assert _files(run) == before  # no stage folder, no record, the holder's text as it was

        # a dry run writes nothing and takes no lock: it prints the plan while the run goes on
        plan = _mathmix("run", str(recipe), "--dry-run")
        assert plan.returncode == 0 and "web" in plan.stderr, plan.stderr
        assert _files(run) == before
    finally:
        if holder.stdin:
            holder.stdin.close()
        holder.wait(timeout=60)
    assert not (run / LOCK).exists()  # the holder removed its file as it ended

    done = _mathmix("run", str(recipe))  # the holder is gone: the run proceeds
    assert done.returncode == 0, done.stderr
    assert json.loads((run / "web" / "summary.json").read_text())["docs_in"] == 1
    assert not (run / LOCK).exists()


def test_run_recipe_refuses_a_folder_whose_lock_another_holder_has(tmp_path):
    # quickstart and the tests call run_recipe in-process: the lock is taken there, not only by the CLI
    run = tmp_path / "run"
    run.mkdir()
    recipe = _web_recipe(tmp_path, run)
    with open(run / LOCK, "w") as held:  # another open file: flock refuses it even in this same process
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("pid 4242 on host elsewhere, since 2026-01-01 00:00:00\n")
        held.flush()
        before = _files(run)
        with pytest.raises(ValueError) as refused:
            run_recipe(load_recipe(recipe))
        said = str(refused.value)
        assert f"{run}: another mathmix run is using this run folder" in said
        assert "pid 4242 on host elsewhere" in said and "wait for it to end, or end that run" in said
        assert "\n" not in said
        assert _files(run) == before
    assert run_recipe(load_recipe(recipe))["web"]["docs_in"] == 1  # released: the run proceeds
    assert not (run / LOCK).exists()


def test_the_lock_is_held_for_the_whole_run_and_a_failed_run_still_removes_the_folder_it_made(
    tmp_path, monkeypatch
):
    import pipelines.web

    run = tmp_path / "new" / "run"
    recipe = _web_recipe(tmp_path, run)
    seen = []

    def fails(config, ctx):
        with open(ctx.run_dir / LOCK) as other:  # the run holds it while its stages run
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        seen.append((ctx.run_dir / LOCK).read_text())
        raise ValueError("bad settings")

    monkeypatch.setattr(pipelines.web, "run_stage", fails)
    with pytest.raises(StageFailed, match="bad settings"):
        run_recipe(load_recipe(recipe))
    assert seen and seen[0].startswith(f"pid {os.getpid()} on host {socket.gethostname()}, since ")
    assert not (tmp_path / "new").exists()  # the lock file did not keep the run folder it made


CURATION = """
stages:
  web: {inputs: ["{run_dir}/sample/pages.warc.gz"]}
  dedup: {}
  decont: {benchmarks: ["{run_dir}/sample/bench"]}
  audit: {}
"""


def test_a_finished_run_reruns_with_every_stage_skipped_and_takes_over_a_killed_runs_lock_file(
    tmp_path, capsys
):
    run = tmp_path / "run"
    write_sample(run / "sample")
    recipe = tmp_path / "curation.yaml"
    recipe.write_text(f"name: c\noutput_dir: {run}\nexecutor: {{tasks: 1, workers: 1}}\n{CURATION}")
    summaries = run_recipe(load_recipe(recipe))
    assert list(summaries) == ["web", "dedup", "decont", "audit"]
    assert not (run / LOCK).exists()
    report = (run / "audit" / "report.md").read_text()
    assert "mathmix-run" not in report  # the audit ran beside the lock file and did not take it for output

    holder = _holder(run)  # a run killed mid-way leaves its lock file, with its pid in it
    holder.kill()
    holder.wait(timeout=60)
    assert f"pid {holder.pid} " in (run / LOCK).read_text()
    capsys.readouterr()
    again = run_recipe(load_recipe(recipe))
    assert again == summaries
    said = " ".join(capsys.readouterr().err.split())
    for stage in summaries:
        assert f"{stage}: already complete" in said, said
    assert not (run / LOCK).exists()  # taken over (its holder is gone) and removed as the rerun ended
    plan = _mathmix("run", str(recipe), "--dry-run")
    assert plan.returncode == 0, plan.stderr


def test_the_refusal_for_queued_slurm_jobs_names_real_paths_not_the_run_dir_placeholder(
    tmp_path, monkeypatch
):
    import pipelines.web

    run = tmp_path / "run"
    (run / "in").mkdir(parents=True)
    for name in ("a.warc.gz", "b.warc.gz"):
        (run / "in" / name).write_bytes(b"not read: the stage is replaced below")

    def submits(config, ctx):  # a `wait: false` Slurm stage: a submission marker, no result yet
        (ctx.out_dir / "logs").mkdir(parents=True, exist_ok=True)
        (ctx.out_dir / "logs" / SUBMITTED_FILE).write_text(
            json.dumps({"job_name": "mathmix-web-x", "ranks": [0]})
        )
        raise JobsSubmitted("submitted 1 task; rerun once it has finished")

    def squeue(cmd, **kwargs):  # the submitted job is still pending
        assert cmd[0] == "squeue", cmd
        return subprocess.CompletedProcess(cmd, 0, "17 Priority\n", "")

    monkeypatch.setattr(pipelines.web, "run_stage", submits)
    monkeypatch.setattr(executors.subprocess, "run", squeue)
    recipe = tmp_path / "r.yaml"

    def write(name: str) -> None:
        recipe.write_text(
            f"name: q\noutput_dir: {run}\nexecutor: {{tasks: 1, workers: 1}}\n"
            f'stages:\n  web: {{inputs: ["{{run_dir}}/in/{name}"]}}\n'
        )

    write("a.warc.gz")
    assert run_recipe(load_recipe(recipe)) == {}
    write("b.warc.gz")  # edited while the job is queued
    with pytest.raises(StageFailed, match="still queued") as refused:
        run_recipe(load_recipe(recipe))
    said = str(refused.value)
    assert "{run_dir}" not in said, said
    assert f"{run.resolve()}/in/b.warc.gz" in said and f"{run.resolve()}/in/a.warc.gz" in said, said
    assert "scancel --name mathmix-web-x" in said


def test_a_file_system_without_flock_runs_unguarded_with_a_warning(tmp_path, monkeypatch, capsys):
    # Lustre mounted without `-o flock` answers ENOSYS, some NFS setups ENOLCK: refusing every run there would be
    # worse than the race the lock guards against
    import pipelines.run_lock
    import pipelines.web

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(pipelines.run_lock.fcntl, "flock", no_locks)
    monkeypatch.setattr(pipelines.web, "run_stage", lambda config, ctx: {"docs_in": 1, "docs_out": 1})
    run = tmp_path / "run"
    assert run_recipe(load_recipe(_web_recipe(tmp_path, run)))["web"]["docs_in"] == 1
    said = " ".join(capsys.readouterr().err.split())
    assert f"{run}: no file lock on this file system" in said and "No locks available" in said, said
    assert not (run / LOCK).exists()


def test_a_lock_file_removed_by_its_ending_holder_as_it_was_opened_is_not_taken(tmp_path, monkeypatch):
    # the holder removes its file as it ends: a run that opened it just before holds, once locked, a removed file
    # whose lock guards nothing (a third run would make a new file and lock that): it locks the file at the path
    from pipelines import run_lock

    run = tmp_path / "run"
    run.mkdir()
    real_open, opened = run_lock._open, []

    def opened_then_removed(path):
        fd = real_open(path)
        if not opened:
            path.unlink()  # what the ending holder did just now
        opened.append(os.fstat(fd).st_ino)
        return fd

    monkeypatch.setattr(run_lock, "_open", opened_then_removed)
    with run_lock.run_folder_lock(run):
        assert len(opened) == 2 and (run / LOCK).stat().st_ino == opened[1]
        with open(run / LOCK) as other:  # the file at the path is the one held
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert not (run / LOCK).exists()


def test_quickstart_on_a_folder_in_use_is_one_line_not_a_traceback(tmp_path):
    run = tmp_path / "qs"
    holder = _holder(run)
    try:
        done = _mathmix("quickstart", "-o", str(run))
    finally:
        holder.communicate(timeout=30)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert "another mathmix run is using this run folder" in done.stderr + done.stdout
    assert not (run / "sample").exists()  # refused before it wrote the sample


def test_run_recipe_inside_a_hold_of_the_same_process_runs(tmp_path):
    """quickstart holds the lock around its sample and its run_recipe, which takes it again (flock alone would
    refuse the process its own lock)."""
    from pipelines.run_lock import run_folder_lock

    run = tmp_path / "run"
    recipe = load_recipe(_web_recipe(tmp_path, run))
    with run_folder_lock(run):
        summaries = run_recipe(recipe)
        assert (run / LOCK).exists()
    assert summaries["web"]["docs_in"] == 1
    assert not (run / LOCK).exists()


def _probe(run: Path, seconds: float) -> threading.Thread:
    """A shared lock on RUN's lock file held for SECONDS, as `other_holder` takes one for a moment (a stage command
    asking whether the folder is in use) of the file a killed run left; held when this returns."""
    (run / LOCK).write_text("pid 1 on host gone, since 2026-01-01 00:00:00\n")
    fd = os.open(run / LOCK, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)

    def release() -> None:
        time.sleep(seconds)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def test_a_run_starting_while_the_folder_is_probed_is_not_refused(tmp_path):
    """A run starting in the moment a stage command probed the folder was told it was in use, by nobody."""
    run = tmp_path / "run"
    run.mkdir()
    probe = _probe(run, 0.1)
    try:
        with run_folder_lock(run):
            assert f"pid {os.getpid()}" in (run / LOCK).read_text()
    finally:
        probe.join()
    assert not (run / LOCK).exists()


def test_a_real_holder_is_still_refused_within_the_retry_window(tmp_path):
    run = tmp_path / "run"
    holder = _holder(run)
    try:
        start = time.monotonic()
        with pytest.raises(RunFolderBusy, match=f"pid {holder.pid}"):
            with run_folder_lock(run):
                pass
        assert RETRY_SECONDS <= time.monotonic() - start < RETRY_SECONDS + 1.0  # tried again, briefly
    finally:
        if holder.stdin:
            holder.stdin.close()
        holder.wait(timeout=60)
