"""Held-out validation samples as the GRPO rollouts do (TRL: top_k 0, top_p 1.0, no min_p, no repetition
penalty), whatever the model's generation_config says: transformers' top_k of 50 and a model's top_p of 0.9 used to
truncate the held-out samples, a distribution the policy is never trained on."""

from __future__ import annotations

import pytest

from evals.rl_probe import _sample


@pytest.fixture
def chatty_model(tiny_model_dir):
    """The tiny Llama with a generation_config that truncates and penalizes, as shipped models' often do."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    config = model.generation_config
    config.do_sample, config.temperature, config.top_k, config.top_p = True, 0.6, 20, 0.9
    config.min_p, config.repetition_penalty = 0.05, 1.05
    config.eos_token_id = [3]  # not the tokenizer's EOS (2), which TRL adds
    return model, AutoTokenizer.from_pretrained(tiny_model_dir)


def _processors_built(model, monkeypatch) -> list[list[str]]:
    """The class names of the logits processors and warpers each `generate` call builds."""
    built: list[list[str]] = []
    original = model._get_logits_processor

    def record(*args, **kwargs):
        processors = original(*args, **kwargs)
        built.append([type(p).__name__ for p in processors])
        return processors

    monkeypatch.setattr(model, "_get_logits_processor", record)
    return built


def test_heldout_samples_are_untruncated_whatever_the_generation_config(chatty_model, monkeypatch):
    model, tokenizer = chatty_model
    built = _processors_built(model, monkeypatch)
    _sample(model, tokenizer, ["Question: 1+1?"], 4, 1.0, 2, 2)
    assert built and not [name for names in built for name in names]  # temperature 1: nothing to apply
    built.clear()
    _sample(model, tokenizer, ["Question: 1+1?"], 4, 0.7, 2, 2)
    assert built == [["TemperatureLogitsWarper"]]


def test_greedy_math500_has_no_repetition_penalty(chatty_model, monkeypatch):
    model, tokenizer = chatty_model
    built = _processors_built(model, monkeypatch)
    _sample(model, tokenizer, ["Question: 1+1?"], 4, 0.0, 1, 1)
    assert built == [[]]


def test_completions_end_at_the_eos_ids_trl_uses(chatty_model, monkeypatch):
    """TRL stops a rollout at the tokenizer's EOS and the model's own EOS ids; validation stops where it does."""
    model, tokenizer = chatty_model
    seen: list = []
    generate = model.generate

    def record(*args, **kwargs):
        seen.append(kwargs.get("eos_token_id"))
        return generate(*args, **kwargs)

    monkeypatch.setattr(model, "generate", record)
    _sample(model, tokenizer, ["Question: 1+1?"], 2, 1.0, 1, 1)
    assert seen == [[tokenizer.eos_token_id, 3]]
