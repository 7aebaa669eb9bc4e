"""Processes a local stage starts end with the `mathmix` process that started them.

A local stage runs datatrove's process pool: a Manager process, a forkserver and a resource tracker, pool workers
forked by the forkserver, and per web task an extraction worker forked by its pool worker. Each test runs in a
session of its own (start_new_session) and looks for what is left in that session: a process keeps its session
when its parent dies, so what a killed run leaves behind is found even after it was reparented.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pipelines.sample import write_sample

REPO = Path(__file__).resolve().parents[2]
MATHMIX = [sys.executable, "-m", "mathmix"]

# Pipeline steps for the executor-level scripts. A module of their own next to the script, so the forkserver's
# workers import them by name (the script's folder is on the sys.path it hands them).
STEPS = '''
import os, time
from pathlib import Path

from datatrove.data import Document

HERE = Path(__file__).parent
PAGE = "<html><body><h1>Limits</h1><p>" + "The limit of $x^2$ as x goes to 0 is 0. " * 40 + "</p></body></html>"


def pages(data, rank, world_size):
    """Rank 1 sends pages on for a minute; rank 0 fails as soon as rank 1 has extracted one."""
    if rank == 0:
        while not (HERE / "extracting").exists():
            time.sleep(0.05)
        raise RuntimeError("task 0 fails")
    for i in range(6000):
        yield Document(text=PAGE, id=str(i), metadata={})
        time.sleep(0.01)


def extracted(data, rank, world_size):
    for doc in data:
        (HERE / "extracting").touch()
        yield doc


def busy(data, rank, world_size):
    """Each task says it has started, then works for a minute."""
    (HERE / f"started-{rank}").touch()
    time.sleep(60)
    yield from data
'''


def _session(sid: int) -> list[psutil.Process]:
    """The live (not zombie) processes of session `sid`."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getsid(proc.pid) == sid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def _describe(procs: list[psutil.Process]) -> list[str]:
    lines = []
    for proc in procs:
        try:
            lines.append(f"{proc.pid} (parent {proc.ppid()}): {' '.join(proc.cmdline())[:120]}")
        except psutil.Error:
            continue
    return lines


def _left_after(sid: int, seconds: float) -> list[str]:
    """What is still running in session `sid` once `seconds` have passed (returns as soon as nothing is)."""
    deadline = time.monotonic() + seconds
    while True:
        left = _session(sid)
        if not left or time.monotonic() > deadline:
            return _describe(left)
        time.sleep(0.1)


@pytest.fixture
def sessions():
    """Popen for a child in a new session; whatever a failed test leaves in those sessions is killed after it."""
    started: list[subprocess.Popen] = []

    def start(cmd: list[str], **kwargs) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.Popen(cmd, start_new_session=True, env=env, text=True, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        for left in _session(proc.pid):
            left.kill()
        proc.wait()


def _wait_for(what, proc: subprocess.Popen, log: Path, seconds: float = 60.0) -> None:
    """Wait until `what()` holds while `proc` runs; AssertionError with the end of its `log` if it never does."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if what():
            return
        time.sleep(0.05)
    state = f"exited {proc.returncode}" if proc.poll() is not None else f"running after {seconds}s"
    tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
    raise AssertionError(f"never saw {what.__doc__} ({state}):\n{tail}")


def _extraction_workers(sid: int) -> list[psutil.Process]:
    """pool workers' children: the web stage's extraction workers, one per running task"""
    found = []
    for proc in _session(sid):
        try:
            parent = proc.parent()
            grandparent = parent.parent() if parent else None
            if grandparent and "multiprocess.forkserver" in " ".join(grandparent.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> Path:
    """The sample's pages 20 times over in two folders: a web stage of a few seconds with two tasks."""
    tmp = tmp_path_factory.mktemp("leak-pages")
    write_sample(tmp / "sample")
    pages = tmp / "pages"
    for i, html in enumerate(sorted((tmp / "sample" / "html").rglob("*.html")) * 20):
        part = pages / f"part-{i % 2}"
        part.mkdir(parents=True, exist_ok=True)
        shutil.copy(html, part / f"{i:04d}-{html.name}")
    return pages


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killed_mathmix_run_leaves_no_process_and_no_task_finishes_after(tmp_path, pages, sessions, sig):
    """SIGKILL (or a plain SIGTERM) of `mathmix run` mid-stage: its pool workers went on for 15-25 s and wrote
    their completion markers, so a rerun started meanwhile ran the same ranks at once; the Manager, forkserver and
    resource tracker stayed for good. Now everything it started is gone within seconds, no task finishing."""
    recipe = tmp_path / "kill.yaml"
    recipe.write_text(
        f"name: kill\noutput_dir: {tmp_path / 'run'}\nexecutor: {{kind: local, tasks: 2, workers: 2}}\n"
        f'stages:\n  web: {{inputs: ["{pages}"], prefilter_threshold: 0.0}}\n'
    )
    log = tmp_path / "log"
    with open(log, "w") as out:
        proc = sessions([*MATHMIX, "run", str(recipe)], stdout=out, stderr=subprocess.STDOUT)

    def both_tasks_extracting():
        """an extraction worker for each of the two tasks"""
        return len(_extraction_workers(proc.pid)) >= 2

    _wait_for(both_tasks_extracting, proc, log)
    os.kill(proc.pid, sig)
    proc.wait(timeout=30)
    left = _left_after(proc.pid, 5)
    assert not left, "still running 5 s after the kill:\n" + "\n".join(left)
    completions = tmp_path / "run" / "web" / "logs" / "completions"
    assert not list(completions.glob("*")), "a task finished after the kill"


def test_failed_stage_leaves_no_process(tmp_path, sessions):
    """A task raising while another extracts: the pool was terminated, which orphaned the other task's extraction
    worker, and with it the forkserver and the resource tracker stayed after the run exited with its error."""
    (tmp_path / "steps.py").write_text(STEPS)
    script = tmp_path / "fail.py"
    script.write_text(
        "from curate.extract_step import MathAwareExtractor\n"
        "from pipelines.executors import ExecutorConfig\n"
        "import steps\n"
        "if __name__ == '__main__':\n"
        "    config = ExecutorConfig(kind='local', tasks=2, workers=2)\n"
        "    pipeline = [steps.pages, MathAwareExtractor(), steps.extracted]\n"
        f"    config.run(config.build(pipeline, {str(tmp_path / 'logs')!r}))\n"
    )
    with open(tmp_path / "err", "w") as stderr:  # a file: what the run leaves would hold a pipe open
        proc = sessions([sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=stderr)
    proc.wait(timeout=120)
    err = (tmp_path / "err").read_text()
    assert proc.returncode == 1 and "RuntimeError: task 0 fails" in err, err[-2000:]
    left = _left_after(proc.pid, 5)
    assert not left, "still running 5 s after the failed run exited:\n" + "\n".join(left)


def test_extraction_worker_dies_with_its_parent(tmp_path, sessions):
    """The web extractor's worker, outside any executor: SIGKILL of the process running the step left the worker
    waiting for pages for good."""
    (tmp_path / "steps.py").write_text(STEPS)
    script = tmp_path / "extract.py"
    script.write_text(
        "import itertools, multiprocessing\n"
        "from datatrove.data import Document\n"
        "from curate.extract_step import MathAwareExtractor\n"
        "from steps import PAGE\n"
        "docs = (Document(text=PAGE, id=str(i), metadata={}) for i in itertools.count())\n"
        "for i, doc in enumerate(MathAwareExtractor(isolation='process').run(docs)):\n"
        "    if i == 0:\n"
        "        print(*[p.pid for p in multiprocessing.active_children()], flush=True)\n"
    )
    proc = sessions([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    [worker] = proc.stdout.readline().split()
    assert psutil.pid_exists(int(worker))
    proc.kill()
    proc.wait(timeout=30)
    left = _left_after(proc.pid, 5)
    assert not left, "still running 5 s after the kill:\n" + "\n".join(left)


def _run_busy(tmp_path: Path) -> str:
    """The body of a script's `__main__` block: two busy tasks on a local executor, 'interrupted' on Ctrl-C."""
    return (
        "    config = ExecutorConfig(kind='local', tasks=2, workers=2)\n"
        "    try:\n"
        f"        config.run(config.build([steps.busy], {str(tmp_path / 'logs')!r}))\n"
        "    except KeyboardInterrupt:\n"
        "        print('interrupted', flush=True)\n"
    )


def test_ctrl_c_prints_no_worker_traceback_and_leaves_no_process(tmp_path, sessions):
    """Ctrl-C reaches the whole process group: each pool worker printed a KeyboardInterrupt traceback when it got
    the signal before the run ended it. Pool workers now leave Ctrl-C to the run, which ends them."""
    (tmp_path / "steps.py").write_text(STEPS)
    script = tmp_path / "busy.py"
    script.write_text(
        "from pipelines.executors import ExecutorConfig\n"
        "import steps\n"
        "if __name__ == '__main__':\n" + _run_busy(tmp_path)
    )
    with open(tmp_path / "out", "w") as stdout, open(tmp_path / "err", "w") as stderr:
        proc = sessions([sys.executable, str(script)], stdout=stdout, stderr=stderr)

    def both_started():
        """both tasks started"""
        return all((tmp_path / f"started-{rank}").exists() for rank in (0, 1))

    _wait_for(both_started, proc, tmp_path / "err")
    workers = [p for p in _session(proc.pid) if "multiprocess.forkserver" in " ".join(p.cmdline())]
    pool_workers = [p for p in workers if p.ppid() in {w.pid for w in workers}]
    assert len(pool_workers) == 2, _describe(workers)
    os.kill(pool_workers[0].pid, signal.SIGINT)  # a worker first, as when the run is slower to react
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=60)
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    assert out == "interrupted\n"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    left = _left_after(proc.pid, 5)
    assert not left, "still running 5 s after Ctrl-C:\n" + "\n".join(left)


def test_ctrl_c_while_the_manager_starts_ends_the_run(tmp_path, sessions):
    """Ctrl-C landing while datatrove's Manager process starts (here one slow to answer, so that it lands there):
    datatrove never shut that Manager down, and `mathmix` hung at exit waiting for it after saying 'interrupted'."""
    (tmp_path / "steps.py").write_text(STEPS)
    script = tmp_path / "manager.py"
    script.write_text(
        "import signal, time\n"
        "from multiprocess.managers import SyncManager\n"
        "from pipelines.executors import ExecutorConfig\n"
        "import steps\n"
        "_run_server = SyncManager._run_server.__func__\n"
        "def slow_run_server(cls, *args, **kwargs):\n"
        "    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the Manager's own first line\n"
        "    (steps.HERE / 'manager-starting').touch()\n"
        "    time.sleep(3)\n"
        "    _run_server(cls, *args, **kwargs)\n"
        "if __name__ == '__main__':\n"
        "    SyncManager._run_server = classmethod(slow_run_server)\n" + _run_busy(tmp_path)
    )
    with open(tmp_path / "out", "w") as stdout, open(tmp_path / "err", "w") as stderr:
        proc = sessions([sys.executable, str(script)], stdout=stdout, stderr=stderr)

    def manager_starting():
        """the Manager process started"""
        return (tmp_path / "manager-starting").exists()

    _wait_for(manager_starting, proc, tmp_path / "err")
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        raise AssertionError("the run did not exit within 15 s of Ctrl-C") from None
    assert (tmp_path / "out").read_text() == "interrupted\n"
    left = _left_after(proc.pid, 5)
    assert not left, "still running 5 s after Ctrl-C:\n" + "\n".join(left)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_ctrl_c_during_the_fork_of_the_manager_ends_the_run(tmp_path, sessions, sig):
    """Ctrl-C landing while `mathmix` forks datatrove's Manager process (sent here from an at-fork hook, where one
    that arrives during the fork is first handled): Python drops an exception raised in an at-fork hook ('Exception
    ignored in: <function _releaseLock ...>'), so the KeyboardInterrupt was lost and the run went on: 7 of 240
    Ctrl-Cs sent in the first 0.3 s of a stage. Now the run stops, and leaves no process. SIGTERM alike under
    `sigterm_as_ctrl_c` (`mathmix run`/`quickstart`), which raises KeyboardInterrupt on it."""
    (tmp_path / "steps.py").write_text(STEPS)
    script = tmp_path / "fork.py"
    body = _run_busy(tmp_path)
    if sig == "SIGTERM":
        body = "    with sigterm_as_ctrl_c():\n" + "".join(f"    {line}\n" for line in body.splitlines())
    script.write_text(
        "import os, signal\n"
        "from mathmix.signals import sigterm_as_ctrl_c\n"
        "from pipelines.executors import ExecutorConfig\n"
        "import steps\n"
        "sent = []\n"
        "def ctrl_c_in_the_fork():\n"
        "    if not sent:  # the first fork: the Manager's\n"
        "        sent.append(os.getpid())\n"
        f"        os.kill(os.getpid(), signal.{sig})\n"
        "        for _ in range(1000):  # handled here, inside the hook\n"
        "            pass\n"
        "if __name__ == '__main__':\n"
        "    os.register_at_fork(before=ctrl_c_in_the_fork)\n" + body
    )
    with open(tmp_path / "out", "w") as stdout, open(tmp_path / "err", "w") as stderr:
        proc = sessions([sys.executable, str(script)], stdout=stdout, stderr=stderr)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        err = (tmp_path / "err").read_text()[-2000:]
        raise AssertionError(f"the run went on for 30 s after Ctrl-C:\n{err}") from None
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    assert out == "interrupted\n", err[-2000:]
    assert "Exception ignored" not in err and not list(tmp_path.glob("started-*")), err[-2000:]
    left = _left_after(proc.pid, 5)
    assert not left, "still running 5 s after Ctrl-C:\n" + "\n".join(left)
