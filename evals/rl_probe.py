"""`mathmix eval rl-probe`: GRPO (TRL) on MATH8K-style prompts with OctoThinker's settings, and validation curves.

Settings follow OctoThinker: 128 prompts x 16 rollouts per step, mini-batch 64 prompts (so two optimizer updates per
rollout step), LR 1e-6 constant, no KL, temperature 1.0, responses up to 4096 tokens, reward +1/-1 from
math-verify on the last \\boxed{}. A held-out slice of the training prompts (mean@n, sampled at the training
temperature) and MATH500 (greedy) are scored every K steps into `validation.csv`, the file the forecast reads.
Before training, prompts overlapping an eval set (13-gram, `curate.decont.find_overlaps`) are dropped or refused.
"""

from __future__ import annotations

import csv
import random
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evals.benchmarks import load_benchmark
from evals.generate import load_pretrained
from evals.grading import boxed_reward
from evals.probe_prompts import check_overlap, eval_set_files, load_prompts
from mathmix.cli_util import console, write_json
from mathmix.hub import check_model_source

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

    def __init__(self, path: Path):
        self.path = path
        self.rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        fields = list(dict.fromkeys(k for r in self.rows for k in r))
        tmp = self.path.with_suffix(".csv.tmp")
        with tmp.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            writer.writerows(self.rows)
        tmp.replace(self.path)


def _sample(
    model, tokenizer, prompts: list[str], max_new_tokens: int, temperature: float, n: int, batch: int
):
    """n completions per prompt with the current policy (temperature 0 = greedy)."""
    import torch

    tokenizer.padding_side = "left"
    outputs: list[list[str]] = []
    was_training = model.training
    model.eval()
    for start in range(0, len(prompts), batch):
        enc = tokenizer(prompts[start : start + batch], return_tensors="pt", padding=True).to(model.device)
        kwargs = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
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

    updates_per_step = max(1, config.prompts_per_step // config.mini_batch)

    class ValidationCallback(TrainerCallback):
        """Scores the policy at step 0 and every `eval_every` rollout steps; keeps the last train metrics."""

        last_train: dict[str, float] = {}

        def _run(self, step: int, model) -> None:
            row = {"Step": step, "rollouts": step * config.prompts_per_step * config.rollouts}
            row.update(validate(model, tokenizer, heldout, math500, config))
            row.update({k: v for k, v in self.last_train.items()})
            log.add(row)

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self._run(0, model)

        def on_log(self, args, state, control, logs=None, model=None, **kwargs):
            # Validation runs here, not in on_step_end, so the row carries this step's train metrics.
            if not logs or "reward" not in logs:
                return
            self.last_train = {
                "train_reward": logs["reward"],
                "train_response_length": logs.get("completions/mean_length", 0.0),
            }
            if state.global_step % updates_per_step:
                return
            step = state.global_step // updates_per_step
            if step % config.eval_every == 0 or step == config.steps:
                self._run(step, model)

    return ValidationCallback()


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
        max_steps=config.steps * max(1, config.prompts_per_step // config.mini_batch),
        use_vllm=use_vllm,
        vllm_mode="colocate",
        use_cpu=not on_gpu,
        bf16=on_gpu,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=config.seed,
        disable_tqdm=False,
    )


def run_probe(
    model: str | Path, prompts_path: Path, out_dir: Path, config: ProbeConfig, data_dir: Path | None
) -> dict:
    """Run the probe; writes validation.csv, overlap.json and summary.json under OUT_DIR; returns the summary.

    The model is checked first: a missing one is a ValueError before OUT_DIR is made or written to.
    """
    check_model_source(model)
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from evals.generate import vllm_available

    start = time.time()
    out_dir.mkdir(parents=True, exist_ok=True)
    prompts = load_prompts(prompts_path)
    prompts, overlap = check_overlap(prompts, eval_set_files(data_dir), config.on_overlap)
    write_json(out_dir / "overlap.json", overlap)
    random.Random(config.seed).shuffle(prompts)
    heldout, train = prompts[: config.heldout], prompts[config.heldout :]
    if len(train) < config.prompts_per_step:
        raise ValueError(
            f"{len(train)} training prompts left after the held-out slice; need >= {config.prompts_per_step}"
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
    log = ValidationLog(out_dir / "validation.csv")
    trainer = GRPOTrainer(
        model=str(model),
        reward_funcs=reward,
        args=grpo_args(config, out_dir, on_gpu, use_vllm),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[_validation_callback(config, heldout, math500 or [], log, tokenizer)],
    )
    trainer.train()
    summary = {
        "model": str(model),
        "prompts": str(prompts_path),
        "train_prompts": len(train),
        "heldout_prompts": len(heldout),
        "math500_items": len(math500 or []),
        "overlap": {k: overlap.get(k) for k in ("checked", "overlapping_prompts", "dropped", "reason")},
        "config": config.model_dump(),
        "validation_rows": len(log.rows),
        "last_validation": log.rows[-1] if log.rows else {},
        "seconds": round(time.time() - start, 2),
    }
    write_json(out_dir / "summary.json", summary)
    return summary
