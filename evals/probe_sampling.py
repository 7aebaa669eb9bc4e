"""How the RL probe's validation samples and what it writes: completions drawn as the GRPO rollouts draw them
(`sampling_kwargs`: TRL's settings, not the model's generation_config) and `validation.csv` (`ValidationLog`).

Split from `evals.rl_probe` (which re-exports these names); `validate`, which scores the samples, stays there.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any


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
