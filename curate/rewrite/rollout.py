"""The rollout function given to datatrove's InferenceRunner: one request per sample, with retries.

datatrove retries connection errors itself (5 s, 10 s, 20 s, ... apart), but a 503, a malformed JSON body or a
timed-out request reach the rollout as an InferenceError. Those are retried here with backoff a few times;
after that the sample is recorded as failed (`{"error": ...}`) and later counted under a reason, so a bad
request never stops the run and never vanishes. A ServerError (the server died for good, or never came up) is
not caught: the task fails, and a rerun resumes from datatrove's checkpoints.

`TimedInferenceRunner` puts the request timeout around the HTTP call itself, after the server is ready: a
timeout around the whole callback would also count a slow server start (minutes for a large model) as failures.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

from datatrove.pipeline.inference.run_inference import InferenceRunner
from datatrove.pipeline.inference.types import InferenceError
from loguru import logger

from curate.rewrite.tasks import build_messages, source_text

# The document whose rollout is running: set by the request cache lookup, read when a request goes to the server.
# Each rollout runs in its own asyncio task, so each sees its own document.
_DOC_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("rewrite_doc_id", default=None)


class TimedInferenceRunner(InferenceRunner):
    """datatrove's InferenceRunner with a per-request timeout for every server kind.

    datatrove applies `request_timeout` only to remote endpoints; its local-server client waits forever, so a hung
    server would hang the run. A timed-out request becomes an InferenceError (retried by the rollout), not a
    TimeoutError, which datatrove would take for a dead connection and retry for minutes.

    It also counts `documents_requested`: the documents this run sent a request for. On a resumed run the
    documents of finished chunks, and answers found in the request cache, cost nothing here: the throughput
    report divides this run's requests, tokens and seconds by these documents, not by every input document.
    """

    def __init__(self, *args: Any, request_timeout_s: float = 600.0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.request_timeout_s = request_timeout_s
        self._span: list[float] = []  # first request sent, last answer received (server start excluded)
        self._docs_requested: set[str] = set()

    async def _cached_request(self, payload: dict, *args: Any, **kwargs: Any):
        # datatrove 0.10 passes it by keyword (functools.partial); positionally it follows semaphore and server
        doc_id = kwargs["doc_id"] if "doc_id" in kwargs else args[2] if len(args) > 2 else None
        _DOC_ID.set(None if doc_id is None else str(doc_id))
        return await super()._cached_request(payload, *args, **kwargs)

    async def _send_request(self, server: Any, payload: dict, semaphore: asyncio.Semaphore):
        doc_id = _DOC_ID.get()  # not in the request cache: this document costs a request in this run
        if doc_id is not None and doc_id not in self._docs_requested:
            self._docs_requested.add(doc_id)
            self.stat_update("documents_requested", value=1, unit="document")
        return await super()._send_request(server, payload, semaphore)

    def _init_server(self, rank: int):
        server = super()._init_server(rank)
        inner, timeout = server._make_request, self.request_timeout_s

        async def timed_request(payload: dict) -> dict:
            start = time.monotonic()
            self._span = [min(self._span[0], start), self._span[1]] if self._span else [start, start]
            try:
                return await asyncio.wait_for(inner(payload), timeout)
            except TimeoutError as err:
                raise InferenceError(None, f"request timed out after {timeout}s") from err
            finally:
                self._span[1] = max(self._span[1], time.monotonic())

        server._make_request = timed_request
        return server

    def run(self, data: Any, rank: int = 0, world_size: int = 1) -> None:
        try:
            super().run(data, rank, world_size)
        finally:
            if self._span:  # throughput without the server's start-up (minutes for a large model)
                self.stat_update("generation_seconds", value=self._span[1] - self._span[0], unit="task")


async def rewrite_rollout(
    document: Any,
    generate: Any,
    *,
    task: str,
    prompt_version: str,
    sampling: dict[str, Any],
    max_input_chars: int = 12_000,
    retries: int = 2,
    backoff_s: float = 2.0,
) -> dict[str, Any]:
    """Generate one sample for `document`; return {"text", "reasoning", "finish_reason", "usage"} or {"error"}."""
    source = source_text(task, document.text, document.metadata)
    messages = build_messages(task, source, prompt_version, max_input_chars)
    message = ""
    for attempt in range(retries + 1):
        if attempt:
            await asyncio.sleep(backoff_s * 2 ** (attempt - 1))
        try:
            # A fresh payload each time: datatrove adds keys to it, and its request cache hashes it.
            result = await generate({"messages": messages, **sampling})
        except InferenceError as err:
            message = str(err.error)[:500]
            if "BadRequestError" in message:  # the same request would fail again
                return {"error": "bad_request", "message": message}
        else:
            return {
                "text": result.text,
                "reasoning": result.reasoning or "",
                "finish_reason": result.finish_reason,
                "usage": dict(result.usage or {}),
            }
        logger.warning(f"rewrite {task} doc {document.id}: attempt {attempt + 1} failed: {message}")
    return {"error": "request_failed", "message": message}
