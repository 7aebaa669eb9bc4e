"""`mathmix eval rl-probe`: GRPO (TRL) on MATH8K-style prompts with OctoThinker's settings, and validation curves.

Settings follow OctoThinker: 128 prompts x 16 rollouts per step, mini-batch 64 prompts (so two optimizer updates per
rollout step), LR 1e-6 constant, no KL, temperature 1.0, responses up to 4096 tokens, reward +1/-1 from
math-verify on the last \\boxed{}. A held-out slice of the training prompts (mean@n, sampled at the training
temperature) and MATH500 (greedy) are scored every K steps into `validation.csv`, the file the forecast reads.
Before training, prompts overlapping an eval set (13-gram, `curate.decont.find_overlaps`) are dropped or refused.
"""

from __future__ import annotations

import csv
import json
import random
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from evals.benchmarks import BENCHMARKS, SUITES, load_benchmark
from evals.generate import check_model, load_pretrained
from evals.grading import boxed_reward
from mathmix.cli_util import write_json

PROMPT_TEMPLATE = (
    "Question: {question}\nPlease reason step by step, and put your final answer within \\boxed{{}}.\n"
    "Answer: Let's think step by step."
)


class ProbeConfig(BaseModel):
    """RL probe settings; the defaults are OctoThinker's."""

    model_config = ConfigDict(extra="forbid")

    prompts_per_step: int = 128
    rollouts: int = 16
    mini_batch: int = 64  # prompts per optimizer update
    micro_batch: int = 16  # completions per forward pass (memory, not math)
    learning_rate: float = 1e-6
    kl_coef: float = 0.0
    temperature: float = 1.0
    max_response: int = 4096
    steps: int = 100  # rollout steps
    eval_every: int = 10
    heldout: int = 256  # training prompts held out for validation
    heldout_samples: int = 4  # n of mean@n
    math500_limit: int | None = 500
    val_max_tokens: int | None = None  # defaults to max_response
    seed: int = 0
    on_overlap: Literal["drop", "fail", "warn"] = "drop"
    vllm: Literal["auto", "on", "off"] = "auto"


def load_prompts(path: Path) -> list[dict[str, str]]:
    """MATH8K-style prompts: JSONL (or a JSON array) of records with `prompt` (or problem/question) and `answer`."""
    text = path.read_text()
    records = (
        json.loads(text)
        if text.lstrip().startswith("[")
        else [json.loads(x) for x in text.splitlines() if x.strip()]
    )
    out = []
    for r in records:
        question = r.get("prompt") or r.get("problem") or r.get("question")
        answer = r.get("answer", r.get("gt_answer", r.get("final_answer")))
        if question and answer not in (None, ""):
            out.append({"question": str(question), "answer": str(answer)})
    return out


def check_overlap(
    prompts: list[dict[str, str]],
    eval_files: list[Path],
    policy: str,
    ngram: int = 13,
    min_fraction: float = 0.5,
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Drop (or refuse, or only report) prompts that are eval problems: 13-gram hits over >= min_fraction of them,
    or an eval problem too short for a 13-gram found whole in them.

    A bare 13-gram hit is not enough: competition boilerplate ("where m and n are relatively prime positive
    integers. Find m+n") is shared by unrelated problems (187 of MATH8K's 8,521 prompts hit AIME24 that way).
    """
    try:
        from curate.decont import decont_tokens, find_overlaps
    except ImportError:  # the decontamination package is optional for a probe run elsewhere
        return prompts, {"checked": False, "reason": "curate.decont not importable"}
    if not eval_files:
        return prompts, {"checked": False, "reason": "no eval set found"}
    texts = [p["question"] for p in prompts]
    hits = find_overlaps(texts, [str(f) for f in eval_files], ngram=ngram)
    any_hit = [i for i, h in enumerate(hits) if h]
    bad = []
    for i in any_hit:
        positions = max(1, len(decont_tokens(texts[i])) - ngram + 1)
        # a short eval problem found whole in the prompt is that problem, whatever else the prompt says
        if any(o.whole for o in hits[i]) or max(o.n_matched for o in hits[i]) / positions >= min_fraction:
            bad.append(i)
    report = {
        "checked": True,
        "eval_sets": [str(f) for f in eval_files],
        "ngram": ngram,
        "min_fraction": min_fraction,
        "prompts_with_any_hit": len(any_hit),
        "overlapping_prompts": len(bad),
        "examples": [{"prompt": i, "overlaps": [o.to_dict() for o in hits[i][:2]]} for i in bad[:5]],
    }
    if bad and policy == "fail":
        raise ValueError(
            f"{len(bad)} RL prompts overlap eval sets (first: prompt {bad[0]}); see --on-overlap"
        )
    if policy == "drop":
        drop = set(bad)
        prompts = [p for i, p in enumerate(prompts) if i not in drop]
        report["dropped"] = len(bad)
    return prompts, report


def eval_set_files(data_dir: Path | None) -> list[Path]:
    """Test files of the OctoThinker suite's benchmarks (MATH500 included) present under the bench data folder.

    The full MATH test set is not one of them: MATH8K is drawn from MATH train + test by design.
    """
    if data_dir is None:
        return []
    files = []
    for name, _ in SUITES["octothinker"]:
        spec = BENCHMARKS[name]
        found = next((data_dir / c for c in spec.test if (data_dir / c).exists()), None)
        if found is not None and found not in files:
            files.append(found)
    return files


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
    """Run the probe; writes validation.csv, overlap.json and summary.json under OUT_DIR; returns the summary."""
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
    check_model(model)
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
