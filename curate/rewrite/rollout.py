"""The rollout function given to datatrove's InferenceRunner: one request per sample, with timeout and retries.

datatrove retries connection errors itself (5 s, 10 s, 20 s, ... apart), but a 503, a malformed JSON body or a
hung local server reach the rollout as an InferenceError or never return. Those are retried here with backoff a
few times; after that the sample is recorded as failed (`{"error": ...}`) and later counted under a reason, so a
bad request never stops the run and never vanishes. A ServerError (the server died for good) is not caught: the
task fails, and a rerun resumes from datatrove's checkpoints.
"""

from __future__ import annotations

import asyncio
from typing import Any

from loguru import logger

from curate.rewrite.tasks import build_messages, source_text


async def rewrite_rollout(
    document: Any,
    generate: Any,
    *,
    task: str,
    prompt_version: str,
    sampling: dict[str, Any],
    max_input_chars: int = 12_000,
    request_timeout_s: float = 600.0,
    retries: int = 2,
    backoff_s: float = 2.0,
) -> dict[str, Any]:
    """Generate one sample for `document`; return {"text", "reasoning", "finish_reason", "usage"} or {"error"}."""
    from datatrove.pipeline.inference.types import InferenceError

    source = source_text(task, document.text, document.metadata)
    messages = build_messages(task, source, prompt_version, max_input_chars)
    error, message = "request_failed", ""
    for attempt in range(retries + 1):
        if attempt:
            await asyncio.sleep(backoff_s * 2 ** (attempt - 1))
        try:
            # A fresh payload each time: datatrove adds keys to it, and its request cache hashes it.
            result = await asyncio.wait_for(generate({"messages": messages, **sampling}), request_timeout_s)
        except TimeoutError:
            error, message = "request_failed", f"timed out after {request_timeout_s}s"
        except InferenceError as err:
            message = str(err.error)[:500]
            if "BadRequestError" in message:  # the same request would fail again
                return {"error": "bad_request", "message": message}
            error = "request_failed"
        else:
            return {
                "text": result.text,
                "reasoning": result.reasoning or "",
                "finish_reason": result.finish_reason,
                "usage": dict(result.usage or {}),
            }
        logger.warning(f"rewrite {task} doc {document.id}: attempt {attempt + 1} failed: {message}")
    return {"error": error, "message": message}
