"""With intra-document attention on, no token attends across a document boundary (CPU masked path)."""

from __future__ import annotations

import pytest
import torch

from midtrain.config import ModelConfig
from midtrain.data import PackedSequences


def tiny_llama(attn: str):
    config = ModelConfig(config={"vocab_size": 50, "hidden_size": 32, "intermediate_size": 64,
                                 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2})  # fmt: skip
    torch.manual_seed(0)
    return config.build(attn).eval()


def logits_for(model, docs, intra_document: bool) -> torch.Tensor:
    x, _, pos = PackedSequences(docs, seq_len=12, intra_document=intra_document).next()
    with torch.no_grad():
        out = model(
            input_ids=torch.from_numpy(x)[None], position_ids=torch.from_numpy(pos)[None], use_cache=False
        )
    return out.logits[0]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_no_token_attends_across_a_boundary(attn):
    import numpy as np

    model = tiny_llama(attn)
    doc_b = np.array([7, 8, 9, 10, 11, 0])
    docs = [np.array([1, 2, 3, 4, 5, 0]), doc_b, np.array([12, 13, 14])]
    changed = [np.array([31, 32, 33, 34, 35, 0]), doc_b, np.array([12, 13, 14])]  # only document A differs
    same = logits_for(model, docs, True), logits_for(model, changed, True)
    # document B (window positions 6..11) sees nothing of A: its logits are identical
    assert torch.allclose(same[0][6:], same[1][6:], rtol=0, atol=1e-6)
    assert not torch.allclose(same[0][:6], same[1][:6])
    # without the option, B attends to A: the check above can fail
    plain = logits_for(model, docs, False), logits_for(model, changed, False)
    assert (plain[0][6:] - plain[1][6:]).abs().max() > 1e-4


def test_auto_attention_follows_device_packing_model_and_flash_attn(monkeypatch):
    import importlib.util

    from transformers import GPT2Config, LlamaConfig, MambaConfig

    from midtrain.model import resolve_attn_implementation as resolve

    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)  # a device object needs no GPU
    llama = LlamaConfig(hidden_size=256, num_attention_heads=4)  # heads of 64
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)  # no flash-attn installed
    assert resolve("auto", cpu, True, llama) == "sdpa"  # flex has no backward on CPU
    assert resolve("auto", gpu, False, llama) == "sdpa"  # plain causal: sdpa's flash kernel
    assert resolve("auto", gpu, True, llama) == "flex_attention"
    assert resolve("auto", gpu, True) == "flex_attention"  # no config to ask
    assert (
        resolve("auto", gpu, True, LlamaConfig(hidden_size=32, num_attention_heads=4)) == "sdpa"
    )  # heads of 8
    assert resolve(
        "auto", gpu, True, LlamaConfig(hidden_size=256, num_attention_heads=4, attention_dropout=0.1)
    ) == ("sdpa")  # flex refuses dropout
    assert resolve("auto", gpu, True, GPT2Config()) == "sdpa"  # a class without flex support
    assert resolve("eager", gpu, True, llama) == "eager"
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "flash_attn" else None
    )
    assert resolve("auto", gpu, True, llama) == "flash_attention_2"
    assert resolve("auto", gpu, True, MambaConfig()) == "sdpa"  # no flash support: not asked for it
    assert resolve("auto", cpu, True, llama) == "sdpa"


def test_a_model_without_attention_heads_still_builds():
    from midtrain.config import ModelConfig
    from midtrain.model import build_model

    config = ModelConfig(config={"model_type": "mamba", "vocab_size": 50, "hidden_size": 16, "num_hidden_layers": 1,
                                 "state_size": 4}, attn_implementation="eager")  # fmt: skip
    model = build_model(config, torch.device("cpu"), 1, seed=0)
    assert type(model).__name__ == "MambaForCausalLM"
