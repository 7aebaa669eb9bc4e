"""Worker processes that end with the process that started them, so that nothing `mathmix` starts outlives it.

A local stage runs datatrove's process pool: a Manager process forked by `mathmix`, a forkserver it starts, pool
workers forked by the forkserver, and in the web stage one extraction worker per task forked by its pool worker.
None of them noticed its parent being SIGKILLed: pool workers went on and wrote their tasks' completion markers
(a rerun started meanwhile ran the same ranks at the same time), and the Manager, the forkserver and the resource
tracker stayed for good. A pool terminated after a failed task orphaned the extraction worker of a task still
running, which kept the forkserver and the resource tracker alive after `mathmix` had exited.

Here each of them asks Linux for PR_SET_PDEATHSIG: SIGKILL when its parent dies. A kill of `mathmix` then ends the
chain from the top (Manager and forkserver, pool workers, extraction workers); the resource tracker exits by
itself once no process holds its pipe. Elsewhere than Linux these are no-ops.

The rewrite stage's inference server (curate/cpu_server.py, vLLM, SGLang) is no fork but a program datatrove starts
with `asyncio.create_subprocess_exec`, which runs no fork hook: it stayed, ~400 MB on CPU and a whole GPU with vLLM,
once `mathmix` was killed. Within `forks_die_with_parent` such programs get PR_SET_PDEATHSIG too, set between fork
and exec (`preexec_fn`, which datatrove's calls pass through to subprocess.Popen).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# > 0: a child this process forks gets die_with_parent() (see forks_die_with_parent)
_forks_die_with_parent = 0
# this process's pid, kept up to date in children by the fork hook, which reads the parent's first
_pid = os.getpid()
_parent_at_fork: int | None = None  # in a process forked by Python with this module loaded: its parent's pid


def die_with_parent() -> bool:
    """Have this process SIGKILLed when its parent dies; False where Linux's prctl is not available.

    If this process was forked by a Python process that had this module loaded, and that parent died before the
    request (this process was reparented), it dies now. Linux sends the signal when the *thread* that forked this
    process ends: fork from a thread that lives as long as the process (the main thread), or the child dies early.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if _parent_at_fork is not None and os.getppid() != _parent_at_fork:
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def _exec_dies_with_parent(parent: int, prctl: Callable[..., int]) -> Callable[[], None]:
    """A `preexec_fn` asking for SIGKILL when PARENT dies, in the child between fork and exec (the request outlives
    exec); the child dies at once where PARENT died before it asked. PRCTL is looked up before the fork: the child
    only calls it."""

    def request() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return request


def _create_subprocess_exec(real: Callable[..., Any]) -> Callable[..., Any]:
    """`asyncio.create_subprocess_exec` that, within `forks_die_with_parent`, starts programs that die with this
    process (see the module's note)."""

    def create(*args: Any, **kwargs: Any) -> Any:
        if _forks_die_with_parent and "preexec_fn" not in kwargs and sys.platform.startswith("linux"):
            try:
                prctl = ctypes.CDLL(None, use_errno=True).prctl
            except (OSError, AttributeError):
                return real(*args, **kwargs)
            kwargs["preexec_fn"] = _exec_dies_with_parent(os.getpid(), prctl)
        return real(*args, **kwargs)

    create.__wrapped__ = real  # type: ignore[attr-defined]
    return create


def _guard_asyncio_subprocesses() -> None:
    """Wrap `asyncio.create_subprocess_exec` once (datatrove looks it up on the module at each call)."""
    import asyncio

    if not hasattr(asyncio.create_subprocess_exec, "__wrapped__"):
        asyncio.create_subprocess_exec = _create_subprocess_exec(asyncio.create_subprocess_exec)


def _after_fork_in_child() -> None:
    global _parent_at_fork, _pid
    _parent_at_fork, _pid = _pid, os.getpid()
    if _forks_die_with_parent:
        die_with_parent()


# In the child only: a Ctrl-C landing in Python code the parent runs around a fork (a `before` hook) is lost
os.register_at_fork(after_in_child=_after_fork_in_child)


@contextlib.contextmanager
def forks_die_with_parent() -> Iterator[None]:
    """Within: every child this process forks (os.fork, multiprocessing's fork start method, as datatrove's Manager
    process) dies with it, and so does every program started by `asyncio.create_subprocess_exec` (the rewrite
    stage's inference server). Not other subprocesses, which exec without running Python's fork hooks."""
    global _forks_die_with_parent
    _guard_asyncio_subprocesses()
    _forks_die_with_parent += 1
    try:
        yield
    finally:
        _forks_die_with_parent -= 1


FORKSERVER_PRELOAD = "curate.forkserver_preload"


def use_guarded_forkserver() -> None:
    """Have the `multiprocess` forkserver (datatrove's pool) import FORKSERVER_PRELOAD when it starts: its pool
    workers then die with it, and it with this process, and they leave Ctrl-C to this process. A forkserver already
    running (started by other code in this process) is left as it is."""
    import multiprocess

    # '__main__' is the default preload; setting the list replaces it
    multiprocess.get_context("forkserver").set_forkserver_preload(["__main__", FORKSERVER_PRELOAD])


def setup_forkserver() -> None:
    """Run once in the forkserver (by FORKSERVER_PRELOAD's import), before it saves its signal handlers.

    - The forkserver dies with the process that started it. Without this it waits until every process holding its
      'alive' pipe is gone, and each of its pool workers holds it.
    - Each child it forks (a pool worker) dies with the forkserver, and forks of its own (an extraction worker) die
      with it.
    - SIGINT ignored: the forkserver gives its children the handlers it had before its loop, so pool workers
      start with Ctrl-C ignored, and leave it to `mathmix`, which ends them. Each one printed a KeyboardInterrupt
      traceback, an idle one as well, whenever the signal reached it before the pool was terminated.

    Does nothing when not called from the forkserver's start (`multiprocess.forkserver.main` is not running).
    """
    global _forks_die_with_parent
    forkserver = sys.modules.get("multiprocess.forkserver")
    main = getattr(forkserver, "main", None)
    frame: FrameType | None = sys._getframe()
    while frame is not None and frame.f_code is not getattr(main, "__code__", None):
        frame = frame.f_back
    if frame is None:
        return
    die_with_parent()  # if the parent died already, no pool worker holds the 'alive' pipe yet: the loop ends
    _guard_asyncio_subprocesses()  # a pool worker's inference server
    _forks_die_with_parent += 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)
