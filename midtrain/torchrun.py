"""`python -m midtrain.torchrun ARGS` is `torchrun ARGS`, quiet about the signal that stopped it.

torchrun answers SIGTERM by forwarding it to its workers (which checkpoint and exit, midtrain.stop), then
re-raises it as an uncaught SignalException: a 25-line traceback under the workers' one-line "stopped:" message.
"""

from __future__ import annotations

import sys

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.run import main

if __name__ == "__main__":
    try:
        main()
    except SignalException as err:
        sys.exit(128 + int(err.sigval))
