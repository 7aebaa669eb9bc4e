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
from evals.probe_sampling import ValidationLog, _sample
from evals.probe_sampling import eos_token_ids as eos_token_ids  # re-exported: moved there
from evals.probe_sampling import sampling_kwargs as sampling_kwargs
from evals.probe_trainer import WEIGHTS as WEIGHTS  # re-exported: moved there
from evals.probe_trainer import (
    _stop_callback,
    grpo_args,
    last_checkpoint,
    load_policy,
    updates_per_step,
)
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


def probe_identity(model: str | Path, prompts_path: Path, data_dir: Path | None, config) -> dict:
    """What a probe folder was produced from: the model (a local folder by path, size and a sample of its weights,
    else its hub name), the prompt file, the benchmark folder and the settings that shape the curve: not
    `checkpoints`, `vllm` or `micro_batch`, which a resumed probe may change (a full disk, a GPU gone)."""
    from pipelines.job_record import model_job_identity

    settings = config.model_dump(mode="json", exclude={"checkpoints", "vllm", "micro_batch"})
    return model_job_identity(
        "rl-probe", model, [p for p in (prompts_path, data_dir) if p is not None], settings
    )


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
    resume = _resume_point(out_dir, rerun)
    bad_prompts: Counter = Counter()
    heldout, train, overlap = _split_prompts(prompts_path, out_dir, config, data_dir, bad_prompts)
    math500 = _load_math500(data_dir, config)
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
        _train(trainer, stop, config, out_dir, resume)
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


def _resume_point(out_dir: Path, rerun: bool) -> Path | None:
    """The checkpoint a rerun resumes from (None: the probe starts over, its checkpoints, if any, removed), once
    the summary of a folder without a record is gone."""
    (out_dir / "summary.json").unlink(missing_ok=True)  # a folder without a record: its summary is not ours
    resume = last_checkpoint(out_dir) if rerun else None
    if resume is None:
        if rerun:  # killed before its first checkpoint (or with --no-checkpoints): said, as for a broken one
            whole = "whole " if any((out_dir / "trainer").glob("checkpoint-*")) else ""
            console.print(
                f"no {whole}checkpoint under {out_dir}/trainer: the probe starts over", soft_wrap=True
            )
        shutil.rmtree(out_dir / "trainer", ignore_errors=True)  # checkpoints of an unrecorded job, or broken
    return resume


def _split_prompts(
    prompts_path: Path, out_dir: Path, config: ProbeConfig, data_dir: Path | None, bad_prompts: Counter
) -> tuple[list[dict], list[dict], dict]:
    """(held-out, training prompts, overlap report): the prompts read (bad records counted in BAD_PROMPTS), those
    overlapping an eval set dropped or refused (OUT_DIR/overlap.json), shuffled by the seed and split."""
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
    return heldout, train, overlap


def _load_math500(data_dir: Path | None, config: ProbeConfig) -> list[dict] | None:
    """MATH500's items for validation (None without a benchmark folder), told when the folder has none."""
    math500 = load_benchmark("math500", data_dir, limit=config.math500_limit) if data_dir else None
    if data_dir is not None and not math500:
        console.print(
            f"no MATH500 test set under {data_dir}: validation logs the held-out curve only", soft_wrap=True
        )
    return math500


def _train(trainer, stop: StopOnSignal, config: ProbeConfig, out_dir: Path, resume: Path | None) -> None:
    """Train (from RESUME) until done or a SIGTERM/SIGUSR1 stops it at a rollout step's end (StoppedBySignal)."""
    with stop if config.checkpoints else contextlib.nullcontext():  # --no-checkpoints: nothing to save
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    if stop.signum and (step := trainer.state.global_step // updates_per_step(config)) < config.steps:
        saved = last_checkpoint(out_dir)
        raise StoppedBySignal(
            f"rl-probe stopped by {signal_name(stop.signum)} at rollout step {step} of {config.steps}, "
            f"checkpointed as {saved}; rerun the same command to resume",
            stop.signum,
        )
