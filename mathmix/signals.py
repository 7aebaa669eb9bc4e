"""Stop a training run cleanly on SIGTERM or SIGUSR1: finish the step, checkpoint it, and exit 128 + signal
(`mathmix train`, midtrain.trainer; `mathmix eval rl-probe`, evals.rl_probe).

Slurm sends SIGTERM before it kills a preempted or timed-out job (or the signal `--signal=USR1@120` names), and
torchrun forwards SIGTERM to its workers; without a handler every step since the last periodic checkpoint was lost.
The handler only notes the signal: the step in flight finishes, and all ranks agree on the step to stop at (a MAX
all-reduce each step), since a checkpoint is a collective. Repeats are ignored: Slurm signals every process of a
job and torchrun forwards the same signal again, so a second one must not kill the worker mid-checkpoint (Ctrl-C,
SIGINT, still stops at once).

`mathmix run` and `mathmix quickstart` take SIGTERM as Ctrl-C instead (`sigterm_as_ctrl_c`): they stop at once, and
finished tasks are kept.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

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
    and its lock are ended the way Ctrl-C ends them, and `interrupted` is printed), for `mathmix run` and
    `mathmix quickstart`. A plain SIGTERM used to kill `mathmix` with nothing to end what it had started. Outside
    the main thread it does nothing."""
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
