"""How many tokens a rewrite request may generate, per task, within the model's context.

One cap for every task did not fit them: 1024 tokens cut most refined pages (the prompt asks for about the
page's length, and inputs run to `max_input_chars`, ~4,000 tokens) and every long chain of thought, and an output
cut at the cap is dropped as `truncated`. Each task gets its own default, and each request is lowered to what
the model's context leaves after its prompt (vLLM refuses a request whose prompt + max_tokens exceed it).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

# Completion tokens per task when `max_tokens` is not set: a score and its one-line justification; a problem with
# a short solution; a page rewritten at about its length; a long reasoning trace.
TASK_MAX_TOKENS = {"score": 512, "qa": 2048, "refine": 4096, "longcot": 16384}
FALLBACK_CONTEXT = 8192  # the model's context where its config cannot be read (datatrove's default)
MAX_CONTEXT = (
    32768  # a 128k-context model is served with 32k: longer requests are not needed, and cost KV cache
)
CHARS_PER_TOKEN = 3  # a prompt's tokens, estimated high: English runs ~4 characters a token, LaTeX fewer
CHAT_OVERHEAD = 64  # the chat template's own tokens around the prompt


def model_context(settings: Any, model: str | None = None) -> int | None:
    """The context the requests must fit: `model_max_context` if set; None for an endpoint (its model's own,
    unknown here: nothing is lowered); else the model's `max_position_embeddings` (a local folder's config.json,
    or a hub name's in the local Hugging Face cache) up to 32,768, or 8,192 where it cannot be read."""
    if settings.model_max_context is not None:
        return int(settings.model_max_context)
    if settings.server == "endpoint":
        return None
    if settings.model == "auto":  # built later, from the inputs: the CPU server is given the fallback
        return FALLBACK_CONTEXT
    positions = _max_positions(model or settings.model)
    return min(positions, MAX_CONTEXT) if positions else FALLBACK_CONTEXT


def task_max_tokens(task: str, settings: Any) -> int:
    """The completion cap of `task`: `max_tokens` as set (one number, or one for this task), else the task's
    default. What job records and output rows hold (`sampling`); each request may get less (`request_max_tokens`)."""
    value = settings.max_tokens.get(task) if isinstance(settings.max_tokens, dict) else settings.max_tokens
    return int(value) if value is not None else TASK_MAX_TOKENS[task]


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """A high estimate of a chat prompt's tokens (3 characters a token, plus the chat template's own)."""
    chars = sum(len(str(m.get("content", ""))) for m in messages)
    return math.ceil(chars / CHARS_PER_TOKEN) + CHAT_OVERHEAD


def request_max_tokens(cap: int, context: int | None, messages: list[dict[str, Any]]) -> int:
    """`cap`, lowered to what the context leaves after this request's prompt (vLLM refuses a request whose prompt
    plus max_tokens exceed the context: the document was dropped as bad_request). At least 1: a prompt that alone
    fills the context is the server's to refuse."""
    if context is None:
        return cap
    return max(1, min(cap, context - prompt_tokens(messages)))


def _max_positions(model: str) -> int | None:
    config = Path(model) / "config.json"
    if not config.is_file():
        if model == "auto" or Path(model).exists():
            return None
        try:  # a hub name: its config in the local cache, never the network
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model, "config.json")
        except Exception:  # noqa: BLE001 - not a valid repo id: no config to read
            return None
        if not isinstance(cached, str):
            return None
        config = Path(cached)
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    data = data.get("text_config", data) if isinstance(data, dict) else {}
    for key in ("max_position_embeddings", "max_sequence_length", "n_positions", "seq_length"):
        if isinstance(value := data.get(key), int) and value > 0:
            return value
    return None
