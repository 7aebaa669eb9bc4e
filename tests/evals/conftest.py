"""Fixtures for the eval tests: a tiny random Llama with a BPE tokenizer trained here, saved as a HF folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# probe_data.py holds inputs shared by the probe tests; importlib mode does not put this folder on sys.path
sys.path.insert(0, str(Path(__file__).parent))

CORPUS = [
    "Question: Natalia sold 48 clips in April and half as many in May. How many clips in all?",
    "Answer: 48 / 2 = 24 and 48 + 24 = 72. The answer is 72.",
    "Problem: Find x if 2x + 3 = 7. Solution: x = 2, so the answer is \\boxed{2}.",
    "Let $f(x) = x^2 + 1$. Compute $f(3)$. We get $9 + 1 = 10$, so $\\boxed{10}$.",
    "#### 18 #### 5 \\frac{1}{2} \\sqrt{2} \\pi 0 1 2 3 4 5 6 7 8 9",
] * 20


def build_tiny_model(folder: Path) -> Path:
    """A 2-layer Llama (random weights) and a byte-level BPE tokenizer, saved with save_pretrained."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """Path of a tiny random HF model folder (built once per session)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny_llama"))
