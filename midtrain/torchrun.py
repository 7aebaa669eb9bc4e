"""`python -m midtrain.torchrun ARGS` is `torchrun ARGS`, quiet about the signal that stopped it.

torchrun answers SIGTERM by forwarding it to its workers (which checkpoint and exit, mathmix.signals), then
re-raises it as an uncaught SignalException: a 25-line traceback under the workers' one-line "stopped:" message.
And a second signal while it waits for them (Slurm signals torchrun and the launcher, which passes it on) raised
again in the middle of that shutdown, with another traceback; repeats are ignored here, as the workers ignore them.
"""

from __future__ import annotations

import sys

from torch.distributed.elastic.multiprocessing import api
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.run import main

_stop_workers = api._terminate_process_handler  # registered by name when torchrun starts its workers
_received: list[int] = []


def _first_signal_only(signum, frame) -> None:
    if not _received:
        _received.append(signum)
        _stop_workers(signum, frame)


if __name__ == "__main__":
    api._terminate_process_handler = _first_signal_only
    try:
        main()
    except SignalException as err:
        sys.exit(128 + int(err.sigval))
