"""The RL probe's GRPO trainer around `run_probe`: TRL's GRPOConfig (`grpo_args`), loading the policy as TRL does,
the signal-stop callback and the checkpoints a resume reads (`last_checkpoint`).

Split from `evals.rl_probe` (which re-exports these names); what validates and what writes the probe's files stays
there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evals.rl_probe import ProbeConfig


def _stop_callback(config: ProbeConfig, stop):
    """Ends training at the first rollout step that finishes after a SIGTERM/SIGUSR1, saving a checkpoint of it."""
    from transformers import TrainerCallback

    per_step = updates_per_step(config)

    class StopCallback(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            # at rollout-step ends only (every rank gets there together): mid-step, TRL's buffered rollouts are
            # not in the checkpoint
            if state.global_step % per_step == 0 and stop.agreed():
                control.should_save = control.should_training_stop = True
            return control

    return StopCallback()


def updates_per_step(config: ProbeConfig) -> int:
    """Optimizer updates per rollout step (prompts per step / mini-batch)."""
    return max(1, config.prompts_per_step // config.mini_batch)


WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def _whole(checkpoint: Path) -> bool:
    """A checkpoint a resume can load: readable trainer state, optimizer state and weights (a kill while one was
    written or removed leaves some of them out)."""
    try:
        json.loads((checkpoint / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return (checkpoint / "optimizer.pt").is_file() and any((checkpoint / w).is_file() for w in WEIGHTS)


def last_checkpoint(out_dir: Path) -> Path | None:
    """The newest whole trainer checkpoint under OUT/trainer (see `_whole`)."""
    found = [
        (int(p.name.removeprefix("checkpoint-")), p)
        for p in (out_dir / "trainer").glob("checkpoint-*")
        if p.name.removeprefix("checkpoint-").isdigit() and _whole(p)
    ]
    return max(found)[1] if found else None


def grpo_args(config: ProbeConfig, out_dir: Path, on_gpu: bool, use_vllm: bool):
    """TRL GRPOConfig for the probe: generation batch = prompts x rollouts, optimizer batch = mini-batch x rollouts."""
    from trl import GRPOConfig

    per_update = config.mini_batch * config.rollouts
    micro = min(config.micro_batch, per_update)
    if per_update % micro or (config.prompts_per_step * config.rollouts) % micro:
        raise ValueError("micro_batch must divide mini_batch x rollouts and prompts_per_step x rollouts")
    return GRPOConfig(
        output_dir=str(out_dir / "trainer"),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=per_update // micro,
        generation_batch_size=config.prompts_per_step * config.rollouts,
        num_generations=config.rollouts,
        max_completion_length=config.max_response,
        learning_rate=config.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=config.kl_coef,
        temperature=config.temperature,
        max_steps=config.steps * updates_per_step(config),
        use_vllm=use_vllm,
        vllm_mode="colocate",
        use_cpu=not on_gpu,
        bf16=on_gpu,
        logging_steps=1,
        # at each validation, after it (a log comes before a save in a step): a resume keeps the rows up to it
        save_strategy="steps" if config.checkpoints else "no",
        save_steps=config.eval_every * updates_per_step(config),
        save_total_limit=1,
        report_to="none",
        seed=config.seed,
        disable_tqdm=False,
    )


def load_policy(model: str | Path, args: Any):
    """The model GRPO trains, loaded as `GRPOTrainer(model=NAME, args=ARGS)` loads it (TRL's
    `create_model_from_path` with `args.model_init_kwargs`, `device_map=None` when distributed, the seed set
    first), so that a failure to load it is told apart from the trainer's own errors (its output folder, say)."""
    from transformers import set_seed

    kwargs = dict(getattr(args, "model_init_kwargs", None) or {})
    kwargs.setdefault("trust_remote_code", bool(getattr(args, "trust_remote_code", False)))
    if getattr(args.distributed_state, "distributed_type", None) in ("MULTI_GPU", "DEEPSPEED"):
        kwargs["device_map"] = None  # TRL's rule: distributed training fails with device_map="auto"
    set_seed(args.seed)
    try:
        from trl.trainer.utils import create_model_from_path
    except ImportError:  # an older TRL, whose GRPOTrainer called AutoModelForCausalLM.from_pretrained itself
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(str(model), **kwargs)
    return create_model_from_path(str(model), **kwargs)
