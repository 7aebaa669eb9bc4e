"""The training loop: one stage of a recipe, resumable, on 1..N processes (torchrun), CPU or GPU.

Reads top to bottom: set up ranks -> model -> optimizer -> data -> restore (own checkpoint, else the start
stage's) -> for each step: LR from tokens, micro-batches with gradient accumulation, clip, step, log, checkpoint.
What the data is (the blend's order, where a decay branch reads on) is `midtrain.data_order`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from mathmix.cli_util import first_line, write_json
from mathmix.signals import StopOnSignal, signal_name
from midtrain import checkpoint as ckpt
from midtrain.config import StageConfig, TrainRecipe, TrainRecipeError
from midtrain.data import PackedSequences
from midtrain.data_order import (
    build_documents,
    continued_streams,  # noqa: F401  (imported from here too, as before midtrain.data_order was split off)
    data_plan,
    data_sources,
    documents_plan,
    source_keys,
    stage_steps,
)
from midtrain.metrics import MetricsLogger
from midtrain.model import (
    build_model,
    flops_per_token,
    is_sharded,
    loss_function,
    matmul_parameters,
    peak_flops,
)
from midtrain.preflight import DONE_FILE, check_batch, check_run, recipe_tokenizer_print
from midtrain.schedule import wsd_lr
from midtrain.stage_job import check_stage_job
from midtrain.stop import TrainingStopped
from pipelines.job_record import JOB_FILE

_log = logging.getLogger("mathmix.midtrain")


@dataclass
class Ranks:
    rank: int
    world_size: int
    device: torch.device


def setup_ranks(device_pref: str) -> Ranks:
    """Join the torchrun process group if launched by torchrun (gloo on CPU, nccl on GPU)."""
    use_cuda = device_pref == "cuda" or (device_pref == "auto" and torch.cuda.is_available())
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    # NCCL told its GPU: no guessing from the rank
    bound: dict[str, Any] = {"device_id": device} if use_cuda else {}
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo", **bound)
    elif use_cuda and not dist.is_initialized():
        # one GPU still goes through FSDP2 (bf16 mixed precision), which needs a process group: a local one
        dist.init_process_group(backend="nccl", store=dist.HashStore(), rank=0, world_size=1, **bound)
    rank = dist.get_rank() if dist.is_initialized() else 0
    return Ranks(rank, world_size, device)


def resolve_start(recipe: TrainRecipe, stage: StageConfig) -> Path | None:
    """The checkpoint a stage starts from: the final checkpoint of a named stage, or a checkpoint folder."""
    if stage.start_from is None:
        return None
    if stage.start_from in [s.name for s in recipe.stages]:
        found = ckpt.list_checkpoints(recipe.stage_dir(stage.start_from) / "checkpoints")
        if not found or not (recipe.stage_dir(stage.start_from) / DONE_FILE).exists():
            raise FileNotFoundError(
                f"stage {stage.name} starts from {stage.start_from!r}, which has not finished"
            )
        return found[-1]
    path = Path(stage.start_from)
    if not (path / ckpt.STATE_FILE).exists():
        raise FileNotFoundError(f"stage {stage.name}: start_from {path} is not a checkpoint folder")
    return path


def build_optimizer(model, recipe: TrainRecipe) -> torch.optim.Optimizer:
    """AdamW; no weight decay on 1-D parameters (norms, biases), as in nanoGPT."""
    t = recipe.trainer
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": t.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    # one fused kernel per step for a plain module; FSDP2's DTensor parameters take the foreach path
    kind = {"foreach": True} if is_sharded(model) else {"fused": True}
    return torch.optim.AdamW(groups, lr=t.lr, betas=t.betas, eps=t.eps, **kind)


def train_stage(
    recipe: TrainRecipe,
    stage_name: str,
    progress: bool = True,
    documents=None,
    stop: StopOnSignal | None = None,
) -> dict[str, Any]:
    """Train one stage to its token budget (resuming from its latest checkpoint); return its summary.

    With `stop` open, a SIGTERM/SIGUSR1 ends the stage after the step in flight, checkpointed (TrainingStopped)."""
    t, stage = recipe.trainer, recipe.stage(stage_name)
    stage_dir = recipe.stage_dir(stage.name)
    if (finished := _finished_summary(recipe, stage)) is not None:
        if int(os.environ.get("RANK", "0")) == 0:  # its summary is printed as it was: say nothing was trained
            print(f"stage {stage.name}: finished earlier ({stage_dir / DONE_FILE}), skipped", file=sys.stderr)
        return finished
    tokenizer_sha256 = recipe_tokenizer_print(recipe)
    ranks = setup_ranks(t.device)
    total_steps = stage_steps(recipe, stage)
    peak_lr = stage.lr or t.lr

    model, loss_fn, optimizer = _model_and_optimizer(recipe, stage, ranks)
    hf_config = model.config
    ckpt_dir = stage_dir / "checkpoints"
    documents, plan, keys = _stage_documents(recipe, stage, documents, ckpt_dir)
    packer = PackedSequences(documents, t.seq_len, t.intra_document)

    state = _restore(recipe, stage, model, optimizer, packer, ckpt_dir)
    state.update(plan)  # every checkpoint says how its stream is ordered
    if ranks.rank == 0 and plan.get("data_note"):  # one line; recorded in each checkpoint and done.json
        _log.warning("%s", plan["data_note"])
    run_tokens_at_start = state["run_tokens"] - state["tokens"]

    is_main = ranks.rank == 0
    logger = MetricsLogger(stage_dir, state["step"], enabled=is_main, tensorboard=t.tensorboard)
    fpt = flops_per_token(hf_config, matmul_parameters(model), t.seq_len)
    peak = peak_flops(ranks.device, t.peak_tflops)
    config_json = hf_config.to_json_string()
    bar = _progress_bar(total_steps, state["step"], stage.name, enabled=progress and is_main)
    start_time, data_seconds, step_seconds = time.time(), 0.0, 0.0
    loss_val = state.get("loss", float("nan"))  # killed after its last checkpoint: no step left to run

    for step in range(state["step"] + 1, total_steps + 1):
        # 1) learning rate from the tokens this stage has seen (a pure function: nothing else to restore)
        lr = wsd_lr(state["tokens"], peak_lr, stage.tokens, stage.warmup_tokens, stage.decay_tokens(),
                    stage.decay_shape, t.min_lr_ratio)  # fmt: skip
        for group in optimizer.param_groups:
            group["lr"] = lr
        t0, c0 = time.perf_counter(), time.process_time()
        # 2) forward/backward over `accum` micro-batches, clip, optimizer step
        loss_sum, grad_norm, data_s = _train_step(
            model, loss_fn, optimizer, packer, t, ranks.rank, ranks.world_size
        )
        data_seconds += data_s
        loss_val, norm_val = loss_sum.item(), grad_norm.item()  # .item() syncs: the timing below is real
        dt = time.perf_counter() - t0
        step_seconds += dt
        state.update(
            step=step, tokens=state["tokens"] + t.global_batch_tokens, data=packer.state_dict(), loss=loss_val
        )
        state["run_tokens"] = run_tokens_at_start + state["tokens"]
        stop_signal = stop.agreed() if stop else 0  # the same on every rank: a collective checkpoint
        # 3) log: tokens/s over all ranks; MFU from model FLOPs against the devices' peak
        tps = t.global_batch_tokens / dt
        if step % t.log_every == 0 or step == total_steps or stop_signal:
            logger.log({
                "stage": stage.name, "step": step, "tokens": state["tokens"], "run_tokens": state["run_tokens"],
                "loss": loss_val, "lr": lr, "grad_norm": norm_val, "tokens_per_s": round(tps, 1),
                "mfu": float(f"{fpt * tps / (peak * ranks.world_size):.4g}") if peak else None,
                "step_s": round(dt, 4), "cpu_s": round(time.process_time() - c0, 4),
            })  # fmt: skip
        bar.update(1)
        bar.set_postfix(loss=f"{loss_val:.4f}", lr=f"{lr:.2e}")
        # a diverged run stops here: training on would write NaN checkpoints over the last good ones
        # (keep_checkpoints prunes them) and hand decay branches and exports NaN weights, all with exit 0
        checkpoint_due = step % t.checkpoint_every == 0 or step == total_steps or bool(stop_signal)
        if _nonfinite(loss_val, norm_val, model, checkpoint_due):
            bar.close()
            logger.close()
            _diverged(stage.name, step, loss_val, norm_val, lr, ckpt_dir)
        # 4) checkpoint every N steps and at the end of the stage
        if checkpoint_due:
            state["tokenizer"] = recipe.model.tokenizer_source
            state["tokenizer_sha256"] = tokenizer_sha256  # what `train export` checks its tokenizer against
            if keys is not None:  # where each source was left: a branch started from this checkpoint reads on
                state["data_sources"] = data_sources(documents, state["data"], keys)
            ckpt.save_checkpoint(ckpt_dir, model, optimizer, state, config_json, t.keep_checkpoints)
        if stop_signal and step < total_steps:
            bar.close()
            logger.close()
            raise _stopped(stage.name, stop_signal, step, total_steps, ckpt_dir)
    bar.close()
    logger.close()

    summary = {
        "stage": stage.name, "kind": stage.kind, "steps": state["step"], "tokens": state["tokens"],
        "final_loss": loss_val, "checkpoint": str(ckpt.list_checkpoints(ckpt_dir)[-1]),
        "world_size": ranks.world_size, "seconds": round(time.time() - start_time, 2),
        "data_fraction": round(data_seconds / step_seconds, 5) if step_seconds else None,
        **({"data_note": plan["data_note"]} if plan.get("data_note") else {}),
    }  # fmt: skip
    if is_main:
        write_json(stage_dir / DONE_FILE, summary)  # atomic: a kill mid-write left a torn done.json for good
    if dist.is_initialized():
        dist.barrier()
    return summary


def _finished_summary(recipe: TrainRecipe, stage: StageConfig) -> dict[str, Any] | None:
    """The summary of a stage that is done (its done.json), else None; checks first that the stage folder is this
    recipe's (every rank compares with its job.json: nothing is resumed or skipped for another recipe)."""
    stage_dir = recipe.stage_dir(stage.name)
    done = (stage_dir / DONE_FILE).exists()
    # before job.json is written (check_run checked it too): a batch that does not split over the ranks is no job
    if not done:
        check_batch(recipe.trainer, int(os.environ.get("WORLD_SIZE", "1")))
    check_stage_job(recipe, stage, record=False)
    if done:
        return json.loads((stage_dir / DONE_FILE).read_text())
    return None


def _model_and_optimizer(recipe: TrainRecipe, stage: StageConfig, ranks: Ranks):
    """(model, loss function, optimizer) of the stage, on this rank's device; rank 0 then records job.json."""
    t = recipe.trainer
    model = build_model(recipe.model, ranks.device, ranks.world_size, t.seed, t.intra_document)
    loss_fn = loss_function(model, recipe.model.compile)
    optimizer = build_optimizer(model, recipe)
    # rank 0 records job.json once the device, model and optimizer are set up: one that failed to set up (a
    # device without a GPU, AdamW refusing its betas) left a stage folder holding only a job.json
    if ranks.rank == 0 and not (recipe.stage_dir(stage.name) / JOB_FILE).is_file():
        check_stage_job(recipe, stage, record=True)
    return model, loss_fn, optimizer


def _stage_documents(recipe: TrainRecipe, stage: StageConfig, documents, ckpt_dir: Path):
    """(documents, data plan, source keys) of the stage: the given documents, else those the plan builds.

    A shard damaged or gone since the checks (a truncated .bin, a removed folder) is named in one line."""
    try:
        if documents is None:
            plan = data_plan(recipe, stage, ckpt.latest_state(ckpt_dir))
            documents = build_documents(recipe, stage, plan)
        else:  # what the given documents are, else what a resume without them would build
            plan = documents_plan(documents) or data_plan(recipe, stage, ckpt.latest_state(ckpt_dir))
        keys = source_keys(documents)
    except (OSError, ValueError) as err:
        raise TrainRecipeError(f"stage {stage.name}: {first_line(err)}") from None
    return documents, plan, keys


def _stopped(stage: str, signum: int, step: int, total_steps: int, ckpt_dir: Path) -> TrainingStopped:
    """The error of a stage stopped by a signal after the checkpoint of `step`."""
    return TrainingStopped(
        f"stage {stage}: stopped by {signal_name(signum)} at step {step} of {total_steps}, "
        f"checkpointed as {ckpt.list_checkpoints(ckpt_dir)[-1]}; rerun the same command to resume",
        signum,
    )


def _nonfinite(loss: float, grad_norm: float, model, checkpoint_due: bool) -> bool:
    """Whether the step's loss or gradient norm is NaN or inf, or (checked only when a checkpoint is due, on every
    rank) the weights are."""
    return not math.isfinite(loss) or not math.isfinite(grad_norm) or (checkpoint_due and not _finite(model))


def _finite(model) -> bool:
    """Whether every parameter is finite, on every rank (a sharded model checks its own shards)."""
    local = [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]
    ok = torch.stack([torch.isfinite(p).all() for p in local]).all().to(torch.int32)
    if dist.is_initialized():
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    return bool(ok.item())


def _diverged(stage: str, step: int, loss: float, grad_norm: float, lr: float, ckpt_dir: Path) -> None:
    """Raise the one-line error of a stage whose loss, gradient norm or weights stopped being finite."""
    latest = ckpt.list_checkpoints(ckpt_dir)
    kept = (
        f"the latest checkpoint, {latest[-1].name}, is from before" if latest else "no checkpoint was written"
    )
    raise TrainingDiverged(
        f"stage {stage}: training diverged at step {step} (loss {loss:.4g}, grad norm {grad_norm:.4g}, "
        f"lr {lr:.3g}; NaN or inf, in these or in the weights): stopped without checkpointing it, {kept}. "
        "Lower trainer.lr (or the stage's lr) or lengthen the warmup, and train into a new output folder"
    )


class TrainingDiverged(TrainRecipeError):
    """The loss, gradient norm or weights of a stage are no longer finite (NaN or inf)."""


def _restore(
    recipe: TrainRecipe, stage: StageConfig, model, optimizer, packer, ckpt_dir: Path
) -> dict[str, Any]:
    """This stage's latest checkpoint (resume: weights, optimizer, RNG, data position, counters), else the start
    stage's weights and optimizer with fresh counters; returns the trainer state."""
    ckpt.clean_partial(ckpt_dir)
    state = {"stage": stage.name, "step": 0, "tokens": 0, "run_tokens": 0, "data": packer.state_dict()}
    existing = ckpt.list_checkpoints(ckpt_dir)
    if existing:
        state = _load(existing[-1], model, optimizer)
        packer.load_state_dict(state["data"])
    elif (start := resolve_start(recipe, stage)) is not None:
        start_state = _load(start, model, optimizer, restore_rng=False)
        state["run_tokens"] = start_state["run_tokens"]
        state["start_from"] = str(start)
    return state


def _load(path: Path, model, optimizer, restore_rng: bool = True) -> dict[str, Any]:
    """`ckpt.load_checkpoint`, with a checkpoint of another model (e.g. written before job.json was recorded)
    reported in one line instead of DCP's traceback."""
    from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception

    try:
        return ckpt.load_checkpoint(path, model, optimizer, restore_rng=restore_rng)
    except (CheckpointException, RuntimeError, ValueError, KeyError) as err:
        # DCP wraps each rank's error with its traceback: the cause is the last line
        cause = (
            (str(err).strip().splitlines() or [""])[-1]
            if isinstance(err, CheckpointException)
            else first_line(err)
        )
        raise TrainRecipeError(f"{path}: does not fit the recipe's model ({cause})") from None


def _train_step(model, loss_fn, optimizer, packer, t, rank: int, world_size: int):
    """One optimizer step: micro-batches of [B, T] per rank with gradient accumulation (grads sync on the last
    one only), clip, step. Returns (mean loss over ranks, grad norm, seconds spent building batches)."""
    device = next(model.parameters()).device
    # pinned host memory makes the copy to the GPU asynchronous: from pageable memory it waits for the GPU to
    # finish the previous micro-batch, and the GPU then idles while the next one is launched (7% of a 1B step)
    pin = device.type == "cuda"
    accum = t.accumulation_steps(world_size)
    loss_sum, data_seconds = torch.zeros((), device=device), 0.0
    for micro in range(accum):
        d0 = time.perf_counter()
        inputs, targets, positions = (
            (torch.from_numpy(a).pin_memory() if pin else torch.from_numpy(a)).to(device, non_blocking=True)
            for a in packer.rank_batch(t.micro_batch_size, rank, world_size)
        )
        data_seconds += time.perf_counter() - d0
        if hasattr(model, "set_requires_gradient_sync"):
            model.set_requires_gradient_sync(micro == accum - 1)
        loss = loss_fn(model, inputs, targets, positions if t.intra_document else None) / accum
        loss.backward()
        loss_sum += loss.detach()
    # grad_clip 0 is no clipping (Megatron's --clip-grad 0): the norm is still measured, for the log and the
    # divergence check; torch's clip_grad_norm_ with 0 zeroes every gradient (no update, silently)
    max_norm = t.grad_clip if t.grad_clip > 0 else math.inf
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, foreach=True)
    if hasattr(grad_norm, "full_tensor"):  # a DTensor under FSDP2
        grad_norm = grad_norm.full_tensor()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if dist.is_initialized():
        dist.all_reduce(loss_sum, op=dist.ReduceOp.AVG)
    return loss_sum, grad_norm, data_seconds


def train_recipe(recipe: TrainRecipe, stages: list[str] | None = None, progress: bool = True) -> dict:
    """Run the recipe's stages in order (or only `stages`); finished stages are skipped.

    Everything the stages need is checked first (`midtrain.preflight`, TrainRecipeError), so a bad decay stage
    fails before the stable stage trains."""
    summaries = {}
    with StopOnSignal() as stop:
        for i, stage in enumerate(check_run(recipe, stages)):
            if i and (signum := stop.agreed()):  # noted as the last stage ended: the next one does not start
                raise TrainingStopped(
                    f"stopped by {signal_name(signum)} before stage {stage.name} started (stages before it "
                    f"are done); rerun the same command to go on",
                    signum,
                )
            summaries[stage.name] = train_stage(recipe, stage.name, progress=progress, stop=stop)
    return summaries


def _progress_bar(total: int, initial: int, name: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc=name, unit="step", disable=not enabled, dynamic_ncols=True)
