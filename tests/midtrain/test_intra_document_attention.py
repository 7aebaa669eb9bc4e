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


def test_auto_attention_follows_device_packing_and_flash_attn(monkeypatch):
    import importlib.util

    from midtrain.model import resolve_attn_implementation

    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)  # a device object needs no GPU
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)  # no flash-attn installed
    assert resolve_attn_implementation("auto", cpu, intra_document=True) == "sdpa"  # flex has no CPU backward
    assert resolve_attn_implementation("auto", gpu, intra_document=False) == "sdpa"
    assert resolve_attn_implementation("auto", gpu, intra_document=True, head_dim=64) == "flex_attention"
    assert (
        resolve_attn_implementation("auto", gpu, intra_document=True, head_dim=8) == "sdpa"
    )  # too narrow for flex
    assert resolve_attn_implementation("eager", gpu, intra_document=True) == "eager"
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "flash_attn" else None
    )
    assert resolve_attn_implementation("auto", gpu, intra_document=True) == "flash_attention_2"
    assert resolve_attn_implementation("auto", cpu, intra_document=True) == "sdpa"
