"""`mathmix eval rl-probe`: GRPO (TRL) on MATH8K-style prompts with OctoThinker's settings, and validation curves.

Settings follow OctoThinker: 128 prompts x 16 rollouts per step, mini-batch 64 prompts (so two optimizer updates per
rollout step), LR 1e-6 constant, no KL, temperature 1.0, responses up to 4096 tokens, reward +1/-1 from
math-verify on the last \\boxed{}. A held-out slice of the training prompts (mean@n, sampled at the training
temperature) and MATH500 (greedy) are scored every K steps into `validation.csv`, the file the forecast reads.
Before training, prompts overlapping an eval set (13-gram, `curate.decont.find_overlaps`) are dropped or refused.

A probe runs for hours on a GPU, so it resumes: the trainer state is checkpointed at each validation (only the
last is kept, under OUT/trainer/, and removed when the probe finishes) and OUT/job.json records the model, the
prompts and the settings. Rerunning the same job resumes from the last checkpoint, keeping the validation rows up
to it; another job into the same folder is refused. A SIGTERM/SIGUSR1 (a preemption) checkpoints at the end of the
rollout step in flight and stops (mathmix.signals): a rollout step is the unit a resume replays exactly.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import random
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evals.bench import format_reasons, has_eval_output
from evals.benchmarks import load_benchmark
from evals.generate import cannot_load, error_text, load_pretrained, model_load_errors
from evals.grading import boxed_reward
from evals.probe_prompts import check_overlap, eval_set_files, load_prompts
from mathmix.cli_util import console, write_json
from mathmix.hub import check_model_source
from mathmix.signals import StopOnSignal, StoppedBySignal, signal_name

__all__ = ["ProbeConfig", "check_overlap", "grpo_args", "load_prompts", "run_probe"]

PROMPT_TEMPLATE = (
    "Question: {question}\nPlease reason step by step, and put your final answer within \\boxed{{}}.\n"
    "Answer: Let's think step by step."
)


class ProbeConfig(BaseModel):
    """RL probe settings; the defaults are OctoThinker's."""

    model_config = ConfigDict(extra="forbid")

    prompts_per_step: int = Field(128, ge=1)
    rollouts: int = Field(16, ge=2)  # GRPO's advantage is relative to the group: one rollout has none
    mini_batch: int = Field(64, ge=1)  # prompts per optimizer update
    micro_batch: int = Field(16, ge=1)  # completions per forward pass (memory, not math)
    learning_rate: float = Field(1e-6, gt=0)
    kl_coef: float = Field(0.0, ge=0)
    temperature: float = Field(1.0, gt=0)
    max_response: int = Field(4096, ge=1)
    steps: int = Field(100, ge=1)  # rollout steps
    eval_every: int = Field(10, ge=1)
    heldout: int = Field(256, ge=0)  # training prompts held out for validation
    heldout_samples: int = Field(4, ge=1)  # n of mean@n
    math500_limit: int | None = Field(500, ge=1)
    val_max_tokens: int | None = Field(None, ge=1)  # defaults to max_response
    seed: int = 0
    on_overlap: Literal["drop", "fail", "warn"] = "drop"
    vllm: Literal["auto", "on", "off"] = "auto"
    checkpoints: bool = True  # save the trainer state at each validation, to resume a killed probe

    @model_validator(mode="after")
    def _batches_divide(self) -> ProbeConfig:
        """Checked here, not in grpo_args, so a bad size fails before the model is loaded."""
        if self.prompts_per_step % self.mini_batch:
            raise ValueError("prompts_per_step must be a multiple of mini_batch (prompts per update)")
        per_update = self.mini_batch * self.rollouts
        micro = min(self.micro_batch, per_update)
        if per_update % micro or (self.prompts_per_step * self.rollouts) % micro:
            raise ValueError("micro_batch must divide mini_batch x rollouts and prompts_per_step x rollouts")
        return self


class ValidationLog:
    """Appends validation rows and rewrites `validation.csv` (Step first, as the forecast expects)."""

    def __init__(self, path: Path, keep_upto: int | None = None):
        """A new log; `keep_upto` keeps the rows of an existing file up to that step (a resumed probe)."""
        self.path = path
        self.rows: list[dict[str, Any]] = []
        if keep_upto is not None and path.is_file():
            with path.open(newline="") as handle:
                for row in csv.DictReader(handle):
                    if int(row["Step"]) <= keep_upto:
                        self.rows.append({k: _number(v) for k, v in row.items()})

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        fields = list(dict.fromkeys(k for r in self.rows for k in r))
        tmp = self.path.with_suffix(".csv.tmp")
        with tmp.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            writer.writerows(self.rows)
        tmp.replace(self.path)


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def eos_token_ids(model, tokenizer) -> list[int]:
    """The ids that end a completion, as TRL's GRPOTrainer takes them: the tokenizer's EOS, then the model's own."""
    ids = getattr(model.generation_config, "eos_token_id", None)
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids = [tokenizer.eos_token_id, *ids]
    return ids


def sampling_kwargs(model, tokenizer, temperature: float) -> dict[str, Any]:
    """`generate` settings that sample as the GRPO rollouts do (TRL's defaults: top_k 0, top_p 1.0, no min_p, no
    repetition penalty, TRL's EOS ids), whatever the model's generation_config says: left to it, transformers
    sampled held-out answers with its top_k of 50 and a model's own top_p (Llama 3.2: 0.9), a truncated
    distribution the policy is never trained on. Temperature 0 is greedy (MATH500), still without a penalty."""
    fixed: dict[str, Any] = {"repetition_penalty": 1.0, "eos_token_id": eos_token_ids(model, tokenizer)}
    if temperature <= 0:
        return {"do_sample": False, "temperature": None, "top_k": None, "top_p": None, "min_p": None, **fixed}
    return {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0, "min_p": None, **fixed}


def _sample(
    model, tokenizer, prompts: list[str], max_new_tokens: int, temperature: float, n: int, batch: int
) -> list[list[tuple[str, int]]]:
    """n completions per prompt with the current policy (temperature 0 = greedy), sampled as in training
    (`sampling_kwargs`)."""
    import torch

    tokenizer.padding_side = "left"
    outputs: list[list[tuple[str, int]]] = []
    was_training = model.training
    model.eval()
    for start in range(0, len(prompts), batch):
        enc = tokenizer(prompts[start : start + batch], return_tensors="pt", padding=True).to(model.device)
        kwargs = sampling_kwargs(model, tokenizer, temperature)
        with torch.no_grad():
            out = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                num_return_sequences=n,
                pad_token_id=tokenizer.pad_token_id,
                **kwargs,
            )
        new = out[:, enc["input_ids"].shape[1] :]
        lengths = (new != tokenizer.pad_token_id).sum(-1).tolist()
        texts = tokenizer.batch_decode(new, skip_special_tokens=True)
        for i in range(0, len(texts), n):
            outputs.append(list(zip(texts[i : i + n], lengths[i : i + n], strict=True)))
    if was_training:
        model.train()
    return outputs


def validate(model, tokenizer, heldout, math500, config: ProbeConfig) -> dict[str, float]:
    """Held-out mean@n (sampled at the training temperature), MATH500 accuracy (greedy), mean response length."""
    max_tokens = config.val_max_tokens or config.max_response
    batch = max(1, config.micro_batch // max(1, config.heldout_samples))
    row: dict[str, float] = {}
    lengths: list[int] = []
    if heldout:
        prompts = [PROMPT_TEMPLATE.format(question=p["question"]) for p in heldout]
        samples = _sample(
            model, tokenizer, prompts, max_tokens, config.temperature, config.heldout_samples, batch
        )
        scores = [
            (boxed_reward(text, p["answer"]) + 1) / 2
            for p, group in zip(heldout, samples, strict=True)
            for text, _ in group
        ]
        lengths += [length for group in samples for _, length in group]
        row[f"heldout_mean@{config.heldout_samples}"] = sum(scores) / len(scores)
    if math500:
        prompts = [PROMPT_TEMPLATE.format(question=p["question"]) for p in math500]
        samples = _sample(model, tokenizer, prompts, max_tokens, 0.0, 1, config.micro_batch)
        scores = [(boxed_reward(g[0][0], p["answer"]) + 1) / 2 for p, g in zip(math500, samples, strict=True)]
        lengths += [g[0][1] for g in samples]
        row["math500"] = sum(scores) / len(scores)
    row["mean_response_length"] = sum(lengths) / len(lengths) if lengths else 0.0
    row["truncated_fraction"] = sum(x >= max_tokens for x in lengths) / len(lengths) if lengths else 0.0
    return row


def _validation_callback(config: ProbeConfig, heldout, math500, log: ValidationLog, tokenizer):
    from transformers import TrainerCallback

    per_step = updates_per_step(config)

    class ValidationCallback(TrainerCallback):
        """Scores the policy at step 0 and every `eval_every` rollout steps; keeps the last train metrics."""

        last_train: dict[str, float] = {}

        def _run(self, step: int, model) -> None:
            row: dict[str, Any] = {"Step": step, "rollouts": step * config.prompts_per_step * config.rollouts}
            row.update(validate(model, tokenizer, heldout, math500, config))
            row.update({k: v for k, v in self.last_train.items()})
            log.add(row)

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            if not log.rows:  # a resumed probe already holds its step-0 row
                self._run(0, model)

        def on_log(self, args, state, control, logs=None, model=None, **kwargs):
            # Validation runs here, not in on_step_end, so the row carries this step's train metrics.
            if not logs:
                return
            if "reward" in logs:  # TRL logs the rollouts' metrics with the first optimizer update after them
                self.last_train = {
                    "train_reward": logs["reward"],
                    "train_response_length": logs.get("completions/mean_length", 0.0),
                }
            # a training log ("loss"; not the end-of-training summary) at the rollout step's last update. Taking
            # only logs with "reward" here never validated past step 0 when a rollout step is 2+ updates
            # (OctoThinker's 128 prompts in mini-batches of 64): their last update's log has no "reward".
            if "loss" not in logs or state.global_step % per_step:
                return
            step = state.global_step // per_step
            if step % config.eval_every == 0 or step == config.steps:
                self._run(step, model)

    return ValidationCallback()


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


def probe_identity(model: str | Path, prompts_path: Path, data_dir: Path | None, config) -> dict:
    """What a probe folder was produced from: the model (a local folder by path, size and a sample of its weights,
    else its hub name), the prompt file, the benchmark folder and the settings that shape the curve: not
    `checkpoints`, `vllm` or `micro_batch`, which a resumed probe may change (a full disk, a GPU gone)."""
    from pipelines.job_record import model_job_identity

    settings = config.model_dump(mode="json", exclude={"checkpoints", "vllm", "micro_batch"})
    return model_job_identity(
        "rl-probe", model, [p for p in (prompts_path, data_dir) if p is not None], settings
    )


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


def run_probe(
    model: str | Path, prompts_path: Path, out_dir: Path, config: ProbeConfig, data_dir: Path | None
) -> dict:
    """Run the probe; writes validation.csv, overlap.json, job.json and summary.json under OUT_DIR; returns the
    summary. A rerun of the same job resumes from its last checkpoint (or returns the finished summary).

    The model is checked first: a missing one is a ValueError before OUT_DIR is made or written to.
    Raises ValueError for OUT_DIR holding another job's probe.
    """
    if (world := int(os.environ.get("WORLD_SIZE", "1"))) > 1:
        raise ValueError(
            f"rl-probe runs in one process (one GPU, vLLM colocated), not under torchrun/accelerate (WORLD_SIZE="
            f"{world}): each process would validate and write {out_dir}, and every update would be {world} "
            "mini-batches; run it as a plain command"
        )
    check_model_source(model)
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from evals.generate import vllm_available
    from pipelines.job_record import check_job

    start = time.time()
    out_dir.mkdir(parents=True, exist_ok=True)
    rerun = check_job(out_dir, probe_identity(model, prompts_path, data_dir, config), "rl-probe",
                      progress=has_eval_output)  # fmt: skip
    if rerun and (out_dir / "summary.json").is_file():
        console.print(f"{out_dir}: this probe already finished; its summary.json is kept", soft_wrap=True)
        shutil.rmtree(out_dir / "trainer", ignore_errors=True)  # killed while its checkpoints were removed
        return json.loads((out_dir / "summary.json").read_text())
    (out_dir / "summary.json").unlink(missing_ok=True)  # a folder without a record: its summary is not ours
    resume = last_checkpoint(out_dir) if rerun else None
    if resume is None:
        if rerun and any((out_dir / "trainer").glob("checkpoint-*")):
            console.print(
                f"no whole checkpoint under {out_dir}/trainer: the probe starts over", soft_wrap=True
            )
        shutil.rmtree(out_dir / "trainer", ignore_errors=True)  # checkpoints of an unrecorded job, or broken
    bad_prompts: Counter = Counter()
    prompts = load_prompts(prompts_path, bad_prompts)
    if bad_prompts:
        console.print(
            f"skipped {sum(bad_prompts.values())} record(s) of {prompts_path} without a prompt and an answer "
            f"({format_reasons(bad_prompts)}); counted under dropped_prompts in {out_dir}/summary.json",
            soft_wrap=True,
            markup=False,
        )
    prompts, overlap = check_overlap(prompts, eval_set_files(data_dir), config.on_overlap)
    write_json(out_dir / "overlap.json", overlap)
    if overlap.get("dropped"):
        console.print(
            f"dropped {overlap['dropped']} prompt(s) overlapping the eval sets (listed in {out_dir}/overlap.json)",
            soft_wrap=True,
        )
    random.Random(config.seed).shuffle(prompts)
    heldout, train = prompts[: config.heldout], prompts[config.heldout :]
    if len(train) < config.prompts_per_step:
        raise ValueError(
            f"{len(train)} training prompts left after the held-out slice; need >= {config.prompts_per_step}"
        )
    if (needed := config.steps * config.prompts_per_step) > len(train):
        console.print(
            f"note: {config.steps} steps x {config.prompts_per_step} prompts = {needed:,} prompts drawn from "
            f"{len(train):,} training prompts: each is seen ~{needed / len(train):.1f} times",
            soft_wrap=True,
        )
    math500 = load_benchmark("math500", data_dir, limit=config.math500_limit) if data_dir else None
    if data_dir is not None and not math500:
        console.print(
            f"no MATH500 test set under {data_dir}: validation logs the held-out curve only", soft_wrap=True
        )
    tokenizer = load_pretrained(AutoTokenizer, model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dataset = Dataset.from_list(
        [{"prompt": PROMPT_TEMPLATE.format(question=p["question"]), "answer": p["answer"]} for p in train]
    )

    def reward(prompts, completions, answer, **kwargs):  # noqa: ARG001 - TRL passes every dataset column
        return [boxed_reward(c, a) for c, a in zip(completions, answer, strict=True)]

    on_gpu = torch.cuda.is_available()
    use_vllm = config.vllm == "on" or (config.vllm == "auto" and vllm_available())
    done_steps = int(resume.name.removeprefix("checkpoint-")) // updates_per_step(config) if resume else None
    log = ValidationLog(out_dir / "validation.csv", keep_upto=done_steps)
    if resume is not None:
        console.print(f"resuming from {resume} (rollout step {done_steps})", soft_wrap=True)
    args = grpo_args(config, out_dir, on_gpu, use_vllm)
    stop = StopOnSignal()
    try:  # a corrupt weights file ("header too large") was a traceback
        policy = load_policy(model, args)
    except model_load_errors() as err:
        raise cannot_load(model, "the model for GRPO", err) from None
    try:  # the model is loaded: an OSError here is the trainer's (its output folder), not the model's
        trainer = GRPOTrainer(
            model=policy,
            reward_funcs=reward,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[
                _validation_callback(config, heldout, math500 or [], log, tokenizer),
                *([_stop_callback(config, stop)] if config.checkpoints else []),
            ],
        )
    except OSError as err:
        what = f"{type(err).__name__}: {error_text(err)}"
        raise ValueError(f"{out_dir}: cannot set up the GRPO trainer: {what}") from None
    if (
        done_steps is None or done_steps < config.steps
    ):  # killed after its last checkpoint: nothing left to train
        with stop if config.checkpoints else contextlib.nullcontext():  # --no-checkpoints: nothing to save
            trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        if stop.signum and (step := trainer.state.global_step // updates_per_step(config)) < config.steps:
            saved = last_checkpoint(out_dir)
            raise StoppedBySignal(
                f"rl-probe stopped by {signal_name(stop.signum)} at rollout step {step} of {config.steps}, "
                f"checkpointed as {saved}; rerun the same command to resume",
                stop.signum,
            )
    summary = {
        "model": str(model),
        "prompts": str(prompts_path),
        "train_prompts": len(train),
        "heldout_prompts": len(heldout),
        "math500_items": len(math500 or []),
        "dropped_prompts": dict(sorted(bad_prompts.items())),
        "overlap": {k: overlap.get(k) for k in ("checked", "overlapping_prompts", "dropped", "reason")},
        "config": config.model_dump(),
        "validation_rows": len(log.rows),
        "last_validation": log.rows[-1] if log.rows else {},
        "seconds": round(time.time() - start, 2),  # of this run (a resumed probe: since the resume)
        "resumed_from_step": done_steps,
    }
    write_json(out_dir / "summary.json", summary)
    shutil.rmtree(out_dir / "trainer", ignore_errors=True)  # the checkpoints were for resuming only
    return summary
