"""Stop a training run cleanly on SIGTERM or SIGUSR1: finish the step, checkpoint it, and exit 128 + signal
(`mathmix train`, midtrain.trainer; `mathmix eval rl-probe`, evals.rl_probe).

Slurm sends SIGTERM before it kills a preempted or timed-out job (or the signal `--signal=USR1@120` names), and
torchrun forwards SIGTERM to its workers; without a handler every step since the last periodic checkpoint was lost.
The handler only notes the signal: the step in flight finishes, and all ranks agree on the step to stop at (a MAX
all-reduce each step), since a checkpoint is a collective. Repeats are ignored: Slurm signals every process of a
job and torchrun forwards the same signal again, so a second one must not kill the worker mid-checkpoint (Ctrl-C,
SIGINT, still stops at once).

Every other `mathmix` command takes SIGTERM as Ctrl-C instead (`sigterm_as_ctrl_c`, `ctrl_c_on_sigterm`): it stops
at once, its pool and inference server are ended, finished tasks are kept, exit 130.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class StoppedBySignal(ValueError):
    """A run stopped on a signal after checkpointing its last step; rerunning the command resumes it."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


class StopOnSignal:
    """Context manager: while it is open, SIGTERM/SIGUSR1 are noted instead of killing the process.

    Outside the main thread (where Python cannot install handlers) it does nothing and `signum` stays 0.
    """

    def __init__(self) -> None:
        self.signum = 0
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._note)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _note(self, signum: int, frame) -> None:
        self.signum = self.signum or signum

    def agreed(self) -> int:
        """The signal to stop on, the same on every rank (0: go on). A collective: every rank calls it each step."""
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            return self.signum
        on_gpu = dist.get_backend() == "nccl"  # NCCL reduces GPU tensors only
        device = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
        flag = torch.tensor(self.signum, dtype=torch.int32, device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item())


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Within: SIGTERM stops the process as Ctrl-C does (KeyboardInterrupt: the run's pool, its inference server
    and its lock are ended the way Ctrl-C ends them, and `interrupted` is printed), for every `mathmix` command but
    the trainers' (mathmix.cli). A plain SIGTERM used to kill `mathmix` with nothing to end what it had started.
    Outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def ctrl_c_on_sigterm(command: F) -> F:
    """A command (a typer callback) run within `sigterm_as_ctrl_c`; its signature is kept for typer."""
    if getattr(command, "sigterm_as_ctrl_c", False):
        return command

    @functools.wraps(command)
    def run(*args, **kwargs):
        with sigterm_as_ctrl_c():
            return command(*args, **kwargs)

    run.sigterm_as_ctrl_c = True  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]


def exit_now_if_held(code: int) -> None:
    """After an interrupt: where a thread that is not a daemon still runs, end this process's children and exit now.

    Interrupted in its asyncio loop, datatrove's inference runner left its request cache's aiosqlite thread (not a
    daemon) running, and its server alive: Python's exit waits for such a thread, so `mathmix rewrite` hung for
    ever after printing `interrupted`, its server with it. Nothing is lost: the work kept is on disk by then."""
    import os
    import sys
    import time

    if not [
        t for t in threading.enumerate() if t.is_alive() and not t.daemon and t is not threading.main_thread()
    ]:
        return
    children = _children()
    for pid in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while children and time.monotonic() < deadline:
        children = [pid for pid in children if not _reaped(pid)]
        time.sleep(0.05)
    for pid in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _children() -> list[int]:
    """This process's child processes (Linux: /proc; elsewhere none are found)."""
    import os
    from pathlib import Path

    found: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(pid) for pid in (task / "children").read_text().split()]
    return found


def _reaped(pid: int) -> bool:
    import os

    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:  # not ours to wait for (reaped elsewhere): gone or not, no longer ours
        return True


def exit_stopped(err: StoppedBySignal, show: bool = True):
    """End a command stopped by a signal: its one line (`stopped: ...`), exit 128 + the signal, as a kill would."""
    import typer
    from rich.markup import escape

    from mathmix.cli_util import console

    if show:
        console.print(f"[bold yellow]stopped:[/] {escape(str(err))}", soft_wrap=True)
    raise typer.Exit(128 + err.signum) from None


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
