"""Checkpoints with torch.distributed.checkpoint (DCP), written atomically.

A checkpoint is a folder `STAGE/checkpoints/step_NNNNNNNN/`: the DCP shards of model and optimizer (any number of
ranks can load them), `trainer_state.json` (step, tokens, data position), `rng_rank{R}.pt`, and the model's
`config.json` so that export needs nothing else. It is written as `step_N.tmp/` and renamed once every rank has
finished, so a run killed mid-write leaves only a `.tmp` folder that the next run ignores and removes.
"""

from __future__ import annotations

import json
import random
import shutil
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)

STATE_FILE = "trainer_state.json"


@contextmanager
def _single_process_ok():
    """A single process without a process group is a supported DCP case (a plain model), not a mistake."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*assuming the intent is to (save|load) in a single process.*"
        )
        yield


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def list_checkpoints(ckpt_dir: Path) -> list[Path]:
    """Complete checkpoints of a stage, oldest first."""
    if not ckpt_dir.is_dir():
        return []
    done = [p for p in ckpt_dir.glob("step_*") if p.is_dir() and not p.name.endswith(".tmp")]
    return sorted(p for p in done if (p / STATE_FILE).exists())


def latest_state(ckpt_dir: Path) -> dict[str, Any] | None:
    """The trainer state of a stage's latest checkpoint (what a resume goes on from), or None."""
    found = list_checkpoints(ckpt_dir)
    return json.loads((found[-1] / STATE_FILE).read_text()) if found else None


def save_checkpoint(
    ckpt_dir: Path, model, optimizer, trainer_state: dict[str, Any], model_config_json: str, keep: int
) -> Path:
    """Write step_N/ atomically (all ranks call this); prune to the newest `keep` checkpoints."""
    step = trainer_state["step"]
    final = ckpt_dir / f"step_{step:08d}"
    tmp = ckpt_dir / f"step_{step:08d}.tmp"
    if _rank() == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    _barrier()
    model_sd, optim_sd = get_state_dict(model, optimizer)
    with _single_process_ok():
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(tmp))
    torch.save(rng_state(), tmp / f"rng_rank{_rank()}.pt")
    _barrier()
    if _rank() == 0:
        (tmp / "config.json").write_text(model_config_json)
        (tmp / STATE_FILE).write_text(json.dumps(trainer_state, indent=2))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in list_checkpoints(ckpt_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    _barrier()
    return final


def load_checkpoint(path: Path, model, optimizer, restore_rng: bool = True) -> dict[str, Any]:
    """Load model + optimizer (+ this rank's RNG) from `path`; return its trainer state."""
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state: dict[str, Any] = {"model": model_sd, "optim": optim_sd}
    with _single_process_ok():
        dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    rng_file = path / f"rng_rank{_rank()}.pt"
    if restore_rng and rng_file.exists():
        set_rng_state(torch.load(rng_file, weights_only=False))
    return json.loads((path / STATE_FILE).read_text())


def load_model_weights(path: Path, model) -> None:
    """Load only the model weights of a checkpoint (any number of ranks, sharded or not)."""
    model_sd = get_model_state_dict(model)
    state = {"model": model_sd}
    with _single_process_ok():
        dcp.load(state, checkpoint_id=str(path))
    set_model_state_dict(model, state["model"], options=StateDictOptions(strict=True))


def clean_partial(ckpt_dir: Path) -> None:
    """Remove `.tmp` folders left by a run killed while writing (rank 0 only)."""
    if _rank() == 0 and ckpt_dir.is_dir():
        for tmp in ckpt_dir.glob("step_*.tmp"):
            shutil.rmtree(tmp, ignore_errors=True)
    _barrier()
