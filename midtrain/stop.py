"""The error of a training run stopped by SIGTERM/SIGUSR1 after checkpointing (see mathmix.signals)."""

from __future__ import annotations

from mathmix.signals import StoppedBySignal
from midtrain.config import TrainRecipeError


class TrainingStopped(StoppedBySignal, TrainRecipeError):
    """A stage stopped on a signal after checkpointing its last step; rerunning the command resumes it."""
