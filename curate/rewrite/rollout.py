"""The rollout function given to datatrove's InferenceRunner: one request per sample, with retries.

Every failure of the HTTP call (a 503 or 500, a malformed JSON body, a timeout, a refused or closed connection)
reaches the rollout as an InferenceError and is retried here (`retries`, backoff doubling). datatrove's own
handling is bypassed on purpose: it retries connection errors for 5 min per request (a dead endpoint cost 16 min
for 6 documents) and takes a 500 or a connection closed without reply for a dead server, stopping the run for
one bad request. A sample still failing after the retries is `{"error": "request_failed"}`; the runner then
does not save its document as finished (see `TimedInferenceRunner`), so a rerun requests it again, up to
`max_attempts` runs; in the last one it is saved and validation drops it as `request_failed`. A 400 is
final (`bad_request`, saved). A ServerError from the server's start (it never came up) still stops the task.

`TimedInferenceRunner` puts the request timeout around the HTTP call itself, after the server is ready: a
timeout around the whole callback would also count a slow server start (minutes for a large model) as failures.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from pathlib import Path
from typing import Any

from datatrove.pipeline.inference.run_inference import InferenceRunner
from datatrove.pipeline.inference.types import InferenceError, ServerError
from loguru import logger

from curate.rewrite.budget import request_max_tokens

# How answers and failures are read is curate.rewrite.responses (split off); its names are imported from here too.
from curate.rewrite.responses import (  # noqa: F401
    CONNECTION_FAILED,
    NO_REPLY,
    REFUSALS,
    REFUSED,
    SERVER_ERROR,
    TIMED_OUT,
    malformed_answer,
    request_error,
    response_text,
)
from curate.rewrite.steps import DUPLICATE_OF
from curate.rewrite.tasks import build_messages, source_text

# The document whose rollout is running: set by the request cache lookup, read when a request goes to the server.
# Each rollout runs in its own asyncio task, so each sees its own document.
_DOC_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("rewrite_doc_id", default=None)


ATTEMPTS_DIR = "request_attempts"  # in the checkpoints folder, one {rank}.json each: failed runs per document


class RequestsFailedError(RuntimeError):
    """Documents whose requests failed after every retry: not saved as finished, so a rerun requests them again."""


FAILURES_DIR = (
    "request_failures"  # in the generation logging folder, one {rank}.json each: what run_task reports
)


class TimedInferenceRunner(InferenceRunner):
    """datatrove's InferenceRunner with a per-request timeout for every server kind.

    datatrove applies `request_timeout` only to remote endpoints; its local-server client waits forever, so a hung
    server would hang the run. A timed-out request becomes an InferenceError (retried by the rollout), not a
    TimeoutError, which datatrove would take for a dead connection and retry for minutes.

    It also counts `documents_requested`: the documents this run sent a request for. On a resumed run the
    documents of finished chunks, and answers found in the request cache, cost nothing here: the throughput
    report divides this run's requests, tokens and seconds by these documents, not by every input document.

    A document with a sample that failed its requests (`request_failed`) is not saved: datatrove would write it
    to raw/ and to the checkpoints as finished, and a rerun would never ask for it again (a dead endpoint turned
    every document into a permanent drop, with exit 0). The task finishes every other document but leaves its
    last chunk open and keeps the request cache (a document's samples that did succeed are not requested again);
    `failures_dir`/RANK.json says how many failed, for `run_task` to report and to rerun the task.

    Up to `max_attempts` runs: `attempts_dir`/RANK.json counts, per document not done, the runs that failed it (a
    document whose requests always fail made every rerun exit 1). In the last one it is saved with its failed
    samples, and the validator drops it as `request_failed` (a rejects/ row). Only a document's own failure counts
    (`_not_the_documents`): not a failure to connect (no server there), nor a 401/403/404/429 (the job's settings
    or quota), nor anything in a run where the server answered no request (nor a one-token test request), nor a
    connection closed without a reply when a test request sent then fails too (a server killed mid-run): an
    endpoint that is down, misnamed or failing for a few runs must not drop every document.
    """

    def __init__(self, *args: Any, request_timeout_s: float = 600.0, failures_dir: str | None = None,
                 max_attempts: int = 3, attempts_dir: str | None = None, **kwargs: Any):  # fmt: skip
        super().__init__(*args, **kwargs)
        self.request_timeout_s = request_timeout_s
        self.failures_dir = failures_dir
        self.max_attempts, self.attempts_dir = max_attempts, attempts_dir
        self._attempts: dict[str, int] = {}  # document id -> runs that failed it, this one included
        self._given_up = 0
        self._failed: list[tuple[str, str]] = []  # (document id, last error) of this run
        self._span: list[float] = []  # first request sent, last answer received (server start excluded)
        self._docs_requested: set[str] = set()
        self._answered = False  # a request of this run was answered
        self._probe_error: str | None = None  # the test request's error; "" when answered, None when not sent
        self._probe_lock: asyncio.Lock | None = None
        self._not_counted: list[str] = []  # why failures of this run were not counted against --max-attempts
        self._test_request: Any = None

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

        async def call(payload: dict, probe: bool = False) -> dict:
            start = time.monotonic()
            if not probe:
                self._span = [min(self._span[0], start), self._span[1]] if self._span else [start, start]
            try:
                answer = await asyncio.wait_for(inner(payload), timeout)
            except (TimeoutError, ServerError, ConnectionError, OSError, InferenceError) as err:
                error = request_error(err, timeout)
                if error is err:
                    raise
                raise error from err
            finally:
                if not probe:
                    self._span[1] = max(self._span[1], time.monotonic())
            if (missing := malformed_answer(answer, self.config.use_chat)) is not None:
                # datatrove reads it with answer["choices"][0]...: the request's error was just `'choices'`
                raise InferenceError(None, f"malformed response: {missing}")
            if probe:
                self._probe_error = ""
            else:
                self._answered = True  # the server works: this run's failures are the documents' own
            return answer

        async def test_request() -> None:
            payload = {"model": self.config.model_name_or_path, "max_tokens": 1, "temperature": 0.0,
                       "messages": [{"role": "user", "content": "Reply with OK."}]}  # fmt: skip
            for key, value in self.config.default_generation_params.items():
                payload.setdefault(key, value)
            await call(payload, probe=True)

        server._make_request = call
        self._test_request = test_request
        return server

    async def _not_the_documents(self, failed: list[dict]) -> str | None:
        """Why the failure of a document's samples FAILED is not its own (so not counted against --max-attempts),
        or None when it is: the server answered other requests of this run (or, none having been sent or
        answered yet, a one-token test request) and still failed this document's. A connection closed without a
        reply (`NO_REPLY`, which datatrove's client cannot tell from an empty 500) counts only when a test request
        sent after it is answered: a server killed mid-run answered the requests before it."""
        kinds = [str(r.get("message") or "") for r in failed]
        own = [m for m in kinds if not m.startswith((CONNECTION_FAILED, REFUSED))]
        if not own:
            if any(m.startswith(REFUSED) for m in kinds):
                return "the endpoint refused the requests (the last error says what to check)"
            return "no server answered (connection refused or reset)"
        if all(m.startswith(NO_REPLY) for m in own):  # a server killed mid-request, or an empty 500
            if probe_error := await self._test_fails(fresh=True):
                return (f"the server closed the connection without a reply and failed a test request "
                        f"({probe_error}): it stopped, not the documents")  # fmt: skip
            return None  # it answers: the documents' own failure
        if self._answered:
            return None
        if all(m.startswith(TIMED_OUT) for m in own):  # --request-timeout too short, or an overloaded server
            return ("no request of this run was answered in time: the server is overloaded, or --request-timeout "
                    "is too short for --max-tokens")  # fmt: skip
        if probe_error := await self._test_fails():
            return (f"no request of this run was answered and the server failed a test request too "
                    f"({probe_error}): the server is failing, not the documents")  # fmt: skip
        return None

    async def _test_fails(self, fresh: bool = False) -> str:
        """The error of a one-token test request to the server, "" when it answered. One per run; FRESH sends
        another when the last one was answered (a server may die after answering), not when it failed (a dead
        server stays so for the run: a document failing later is not counted either way)."""
        assert self._probe_lock is not None, "run_async creates it before any document is saved"
        async with self._probe_lock:
            if self._probe_error is None or (fresh and self._probe_error == ""):
                try:
                    await self._test_request()
                except Exception as err:  # noqa: BLE001 - any failure: the server is not working
                    self._probe_error = str(getattr(err, "error", err))[:200] or type(err).__name__
        return self._probe_error or ""

    async def _save_document(self, document: Any, output_writer_context: Any, rank: int, chunk_index: int,
                             count_processed_stat: bool = True) -> None:  # fmt: skip
        doc_id = str(document.id)
        failed = [r for r in document.metadata.get(self.metadata_key) or [] if _request_failed(r)]
        if failed:
            not_its_own = await self._not_the_documents(failed)
            attempts = self._attempts.get(doc_id, 0) + (not_its_own is None)
            # Not finished before its last attempt: neither in raw/ nor in the checkpoints, so a rerun asks again.
            if not_its_own is not None or attempts < self.max_attempts:
                if attempts:
                    self._attempts[doc_id] = attempts
                if not_its_own is not None:
                    self._not_counted.append(not_its_own)
                self._failed.append((doc_id, str(failed[0].get("message") or "")))
                self.stat_update("documents_request_failed", value=1, unit="document")
                return
            self._given_up += 1  # saved with its failed samples: dropped as request_failed by the validator
            self.stat_update("documents_given_up", value=1, unit="document")
        self._attempts.pop(doc_id, None)
        await super()._save_document(document, output_writer_context, rank, chunk_index, count_processed_stat)

    async def run_async(self, data_gen: Any, rank: int = 0) -> None:
        import json
        import os

        self._failed, self._given_up, self._not_counted = [], 0, []
        self._answered, self._probe_error, self._probe_lock = False, None, asyncio.Lock()
        path = os.path.join(self.failures_dir, f"{rank:05d}.json") if self.failures_dir else None
        attempts = os.path.join(self.attempts_dir, f"{rank:05d}.json") if self.attempts_dir else None
        self._attempts = _read_counts(attempts)
        manager, cache = self.checkpoint_manager, self.request_cache
        cleanup, close = manager.cleanup_last_chunk, cache.close

        async def cleanup_unless_failed(rank_: int, chunk_index: int) -> None:
            if not self._failed:  # else the last chunk stays open: a rerun replays it and requests the rest
                await cleanup(rank_, chunk_index)

        async def close_keeping_failed(delete_file: bool = False) -> None:
            await close(delete_file=delete_file and not self._failed)  # keeps the samples that did succeed

        manager.cleanup_last_chunk = cleanup_unless_failed  # type: ignore[method-assign]
        cache.close = close_keeping_failed  # type: ignore[method-assign]
        try:
            await super().run_async(data_gen, rank)
        finally:
            manager.cleanup_last_chunk, cache.close = cleanup, close  # type: ignore[method-assign]
            if attempts:
                _write_counts(attempts, self._attempts)
        if self._given_up:
            logger.warning(
                f"{self._given_up} document(s) failed their requests in {self.max_attempts} run(s) "
                "(--max-attempts): dropped as request_failed"
            )
        if self._failed and path:
            # Not an exception: datatrove would log a traceback for it; run_task reads this file, removes the
            # task's completion marker so that a rerun runs it again, and stops with one line.
            os.makedirs(os.path.dirname(path), exist_ok=True)
            report = {"rank": rank, "documents": len(self._failed), "last_error": self._failed[-1][1],
                      "examples": [doc_id for doc_id, _ in self._failed[:5]]}  # fmt: skip
            if self._not_counted:  # the server's failure, not the documents': no step towards --max-attempts
                report["not_counted"] = {"documents": len(self._not_counted), "why": self._not_counted[-1]}
            with open(path, "w") as handle:
                json.dump(report, handle)
            logger.warning(
                f"{len(self._failed)} document(s) failed their requests: not done, a rerun retries them"
            )

    def run(self, data: Any, rank: int = 0, world_size: int = 1) -> None:
        try:
            super().run(data, rank, world_size)
        finally:
            if self._span:  # throughput without the server's start-up (minutes for a large model)
                self.stat_update("generation_seconds", value=self._span[1] - self._span[0], unit="task")


def _read_counts(path: str | None) -> dict[str, int]:
    import json

    try:
        with open(path or "") as handle:
            counts = json.load(handle)
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else {}


def _write_counts(path: str, counts: dict[str, int]) -> None:
    """COUNTS to PATH atomically; no file when there is nothing to count."""
    from mathmix.cli_util import write_json

    if counts:
        write_json(Path(path), counts)
    else:
        Path(path).unlink(missing_ok=True)


def _request_failed(rollout: Any) -> bool:
    return isinstance(rollout, dict) and rollout.get("error") == "request_failed"


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
    context: int | None = None,
) -> dict[str, Any]:
    """Generate one sample for `document`; return {"text", "reasoning", "finish_reason", "usage"} or {"error"}.
    With the model's `context`, max_tokens is lowered to what this prompt leaves (`budget.request_max_tokens`)."""
    if document.metadata.get(DUPLICATE_OF) is not None:  # its id was read before: not sent to the model
        return {"error": "duplicate_id", "message": f"id {document.metadata[DUPLICATE_OF]} was read before"}
    source = source_text(task, document.text, document.metadata)
    messages = build_messages(task, source, prompt_version, max_input_chars)
    if "max_tokens" in sampling:
        sampling = {**sampling, "max_tokens": request_max_tokens(sampling["max_tokens"], context, messages)}
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
            if message.startswith(REFUSED) and not message.startswith(f"{REFUSED}HTTP 429"):
                logger.warning(f"rewrite {task} doc {document.id}: {message}")
                break  # 401, 403, 404: so would a retry, until the job's settings change (not counted, not saved)
        else:
            text, reasoning = response_text(result.text), response_text(result.reasoning)
            if text is None or reasoning is None:
                kinds = f"content {type(result.text).__name__}, reasoning {type(result.reasoning).__name__}"
                return {"error": "malformed_response", "message": f"not text: {kinds}"}
            return {
                "text": text,
                "reasoning": reasoning,
                "finish_reason": result.finish_reason,
                "usage": dict(result.usage or {}),
            }
        logger.warning(f"rewrite {task} doc {document.id}: attempt {attempt + 1} failed: {message}")
    return {"error": "request_failed", "message": message}
