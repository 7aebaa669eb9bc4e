"""Export a training checkpoint (DCP folder) as a plain Hugging Face model folder.

The checkpoint carries the model's `config.json` and the tokenizer's source path, so the export needs nothing
but the checkpoint; the output is safetensors + config + tokenizer, what transformers and vLLM load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from mathmix.hub import from_pretrained
from midtrain.checkpoint import STATE_FILE, list_checkpoints, load_model_weights


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint folder itself, or the latest checkpoint of a stage folder / its `checkpoints/` folder."""
    if (path / STATE_FILE).exists():
        return path
    for folder in (path, path / "checkpoints"):
        found = list_checkpoints(folder)
        if found:
            return found[-1]
    raise FileNotFoundError(f"{path}: not a checkpoint, nor a stage folder with checkpoints")


def load_tokenizer(source: str, eos_token_id: int | None):
    """A transformers tokenizer from a HF folder, a cached hub name, or a `tokenizers` tokenizer.json file."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = Path(source)
    if not path.is_file():  # a HF folder (or a hub name already in the local cache)
        return from_pretrained(AutoTokenizer, source)
    tok = PreTrainedTokenizerFast(tokenizer_file=str(path))
    if eos_token_id is not None:
        tok.eos_token = tok.convert_ids_to_tokens(eos_token_id)
    return tok


def export_checkpoint(
    checkpoint: Path, out_dir: Path, tokenizer: str | None = None, dtype: str = "bfloat16"
) -> dict[str, Any]:
    """Write OUT_DIR as a Hugging Face model folder; return what was written.

    The tokenizer and the weights are loaded before anything is written, so a failure (ValueError naming the
    input) leaves no half-written folder behind."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = resolve_checkpoint(Path(checkpoint))
    state = json.loads((path / STATE_FILE).read_text())
    config = AutoConfig.from_pretrained(str(path))
    source = tokenizer or state.get("tokenizer")
    tok = None
    if source:
        try:
            tok = load_tokenizer(source, config.eos_token_id)
        except (OSError, ValueError) as err:
            raise ValueError(
                f"tokenizer {source}: cannot be loaded ({first_line(err)}); pass --tokenizer"
            ) from None
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    load_model_weights(path, model)
    model = model.to(getattr(torch, dtype))
    model.config.use_cache = True  # training turns the KV cache off; generation wants it on
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir}: exists and is not a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    if tok is not None:
        tok.save_pretrained(str(out_dir))
    return {
        "checkpoint": str(path),
        "out_dir": str(out_dir),
        "stage": state.get("stage"),
        "step": state.get("step"),
        "tokens": state.get("run_tokens"),
        "dtype": dtype,
        "tokenizer": source,
        "files": sorted(p.name for p in out_dir.iterdir()),
    }


def first_line(err: BaseException) -> str:
    """The first line of an error's message (transformers' loading errors run to a paragraph)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
