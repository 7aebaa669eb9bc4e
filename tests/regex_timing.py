"""Shared by the regex timing tests (tests/evals/test_answer_regex_time.py, tests/curate/test_rewrite_regex_time.py):
the length of the degenerate runs they time, and a timer."""

from __future__ import annotations

import os
import time

# 100,000 by default; the old patterns were seen failing with REGEX_TIME_RUN=30000 (~40 s to minutes each; 30 for
# the rewrite scores' blanks, which were exponential)
RUN = int(os.environ.get("REGEX_TIME_RUN", "100000"))


def seconds(call, *args) -> float:
    """Wall seconds of call(*args)."""
    start = time.perf_counter()
    call(*args)
    return time.perf_counter() - start
