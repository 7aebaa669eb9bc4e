"""The warmup -> stable -> decay (WSD) learning-rate schedule, measured in tokens.

A pure function of the tokens seen in the current stage, so the schedule needs no state of its own in a
checkpoint: restoring the token count restores the learning rate exactly.
"""

from __future__ import annotations

import math
from typing import Literal

DecayShape = Literal["cosine", "linear", "1-sqrt"]


def wsd_lr(
    tokens: int,
    peak_lr: float,
    total_tokens: int,
    warmup_tokens: int = 0,
    decay_tokens: int = 0,
    shape: DecayShape = "cosine",
    floor_ratio: float = 0.1,
) -> float:
    """Learning rate after `tokens` of a stage of `total_tokens` (warmup, then constant, then the last
    `decay_tokens` decaying to `floor_ratio * peak_lr`)."""
    floor = peak_lr * floor_ratio
    # 1) linear warmup from 0 to the peak
    if tokens < warmup_tokens:
        return peak_lr * tokens / warmup_tokens
    # 2) stable: constant at the peak until the decay window starts
    decay_start = total_tokens - decay_tokens
    if decay_tokens <= 0 or tokens < decay_start:
        return peak_lr
    # 3) decay: progress p in [0, 1] through the decay window, then the shape from the peak down to the floor
    p = min(1.0, (tokens - decay_start) / decay_tokens)
    if shape == "cosine":
        return floor + (peak_lr - floor) * 0.5 * (1.0 + math.cos(math.pi * p))
    if shape == "linear":
        return peak_lr - (peak_lr - floor) * p
    if shape == "1-sqrt":
        return floor + (peak_lr - floor) * (1.0 - math.sqrt(p))
    raise ValueError(f"unknown decay shape {shape!r}; use cosine, linear or 1-sqrt")
