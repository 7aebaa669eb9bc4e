"""The processes of a local datatrove run: they end with mathmix (`_processes_end_with_mathmix`), and a Ctrl-C that
lands while the run forks still stops it (`_ctrl_c_kept_across_forks`).

Apart from `executors` because this is process plumbing (fork hooks, signal handlers) that no executor setting
touches; `ExecutorConfig.run` wraps a local executor's run in it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def _processes_end_with_mathmix() -> Iterator[None]:
    """Around a LocalPipelineExecutor's run: every process its pool starts dies with its parent, up to this one
    (`curate.proc_guard`), and pool workers leave Ctrl-C to this process, which ends them. Child processes the run
    leaves (a Manager whose start Ctrl-C interrupted: datatrove never shuts it down, and the exit of `mathmix`
    waited on it for ever after printing 'interrupted') are ended when it returns or raises.

    Through stdlib hooks, not a datatrove subclass: datatrove starts its Manager process and its pool inside
    `run()` with no initializer to pass, so its Manager is reached by a fork hook (`os.register_at_fork`) and its
    pool workers by the forkserver's preload (`set_forkserver_preload`).
    """
    import multiprocess

    from curate.proc_guard import forks_die_with_parent, use_guarded_forkserver

    use_guarded_forkserver()
    before = set(multiprocess.active_children())
    try:
        with forks_die_with_parent(), _ctrl_c_kept_across_forks():
            yield
    finally:
        left = [child for child in multiprocess.active_children() if child not in before]
        for child in left:
            child.terminate()
        for child in left:
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join(5)


@contextlib.contextmanager
def _ctrl_c_kept_across_forks() -> Iterator[None]:
    """Within: a Ctrl-C that lands while this process forks (datatrove's Manager process) stops the run.

    Python runs its at-fork hooks (logging's, loguru's, filelock's: Python functions) before and after the fork,
    and an exception raised in one is printed as 'Exception ignored in: ...' and dropped. A SIGINT that arrived
    during the fork (a few ms) raised its KeyboardInterrupt in one of them, and the run went on: 7 of 240 Ctrl-Cs
    sent in the first 0.3 s of a local stage with 2 workers, 54 of 240 sent 20-100 ms in. It also cut those hooks
    short (loguru's locks released unacquired; in the child, `curate.proc_guard`'s die_with_parent).

    Here `os.fork` in the main thread runs with a SIGINT handler that only notes the signal (blocking SIGINT in
    this thread would not do: the kernel hands it to another thread, and Python still runs the handler in the
    main thread, in a hook). Once the hooks are done the handler before it is restored and called for a signal it
    noted (KeyboardInterrupt), after ending the child the fork made (no Process object holds it: its start was cut
    short). A SIGINT ignored or left to C (SIG_IGN, SIG_DFL) is left alone, and so are forks from other threads
    (only the main thread may set handlers). In the child the handler is restored and a Ctrl-C noted there is
    dropped: the parent got it too, and ends it. SIGTERM alike where a Python handler is set for it
    (`mathmix.signals.sigterm_as_ctrl_c` raises KeyboardInterrupt on it, and lost it the same way).
    """
    import os
    import signal
    import threading

    real_fork = os.fork

    def fork() -> int:
        if threading.current_thread() is not threading.main_thread():
            return real_fork()
        # SIGINT, and SIGTERM where `sigterm_as_ctrl_c` made it raise too: Python-level handlers only
        previous = {
            sig: handler
            for sig in (signal.SIGINT, signal.SIGTERM)
            if callable(handler := signal.getsignal(sig))
        }
        if not previous:
            return real_fork()
        noted: list[tuple[Any, Any]] = []

        def restore_and_deliver() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if noted:
                signum, frame = noted[0]
                previous[signum](signum, frame)  # the default SIGINT handler raises KeyboardInterrupt

        for sig in previous:
            signal.signal(sig, lambda signum, frame: noted.append((signum, frame)))
        try:
            pid = None if noted else real_fork()
        except BaseException:
            restore_and_deliver()
            raise
        if pid == 0:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            return 0
        try:
            restore_and_deliver()
        except BaseException:
            if pid:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            raise
        if pid is None:  # noted before the fork, and the handler let it go: fork now
            return fork()
        return pid

    os.fork = fork
    try:
        yield
    finally:
        os.fork = real_fork
