"""A tiny randomly initialised Llama with a BPE tokenizer trained on given texts: a PLUMBING-ONLY model.

It exists so that the whole rewrite path (server, HTTP, InferenceRunner, checkpoints, validation, Parquet) runs
on a CPU in seconds, in tests and in the quickstart (`model: auto`). Its outputs are random tokens: every one is
rejected by validation, as it should be. It is never a rewriter.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int = 512):
    """A byte-level BPE tokenizer trained on `texts`, as a transformers fast tokenizer with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token="<|endoftext|>"
    )
    hf.chat_template = CHAT_TEMPLATE
    return hf


def build_tiny_llama(
    out_dir: str | Path,
    texts: Iterable[str],
    vocab_size: int = 512,
    hidden_size: int = 64,
    layers: int = 2,
    max_positions: int = 4096,
    seed: int = 0,
) -> Path:
    """Save a random `layers`-layer Llama and its tokenizer to `out_dir` (a plain Hugging Face folder)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out_dir = Path(out_dir)
    tokenizer = train_bpe_tokenizer(texts, vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "PLUMBING_ONLY.txt").write_text(
        "Random weights: for testing the pipeline only, never a rewriter.\n"
    )
    tmp.replace(out_dir)  # a half-written model folder is never mistaken for a finished one
    return out_dir
