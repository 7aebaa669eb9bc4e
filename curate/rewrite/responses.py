"""What a request's answer or failure means: the text of an answer, what a malformed one lacks, and the
InferenceError a failed HTTP call becomes, its message starting with the kind of failure (retried or not).

Split off `curate.rewrite.rollout`, which re-exports every name here and acts on these kinds.
"""

from __future__ import annotations

import re
from typing import Any

from datatrove.pipeline.inference.types import InferenceError, ServerError

# How a failed request's message starts, by kind of failure (`request_error`):
CONNECTION_FAILED = "connection failed: "  # refused or reset: no server there
REFUSED = "refused by the endpoint: "  # HTTP 401/403/404/429: the job's settings or quota, not the document
TIMED_OUT = "request timed out"
SERVER_ERROR = "server error: "  # HTTP 5xx, or a connection closed without a status line
# datatrove's own client (a local server) reads a connection closed without a status line (a server killed
# mid-request) as an HTTP 500 with an empty body: the two cannot be told apart, so the rollout sends the server a
# test request before it counts this kind against the document (a dead server is not the document's failure)
NO_REPLY = (
    f"{SERVER_ERROR}no reply (the connection closed without a status line, or an HTTP 500 with no body): "
)
_EMPTY_500 = "Got InternalServerError from server: "  # datatrove's ServerError for a 500, its body after it
REFUSALS = {
    401: "unauthorized: check the endpoint's API key (api_key_env, $OPENAI_API_KEY by default)",
    403: "forbidden: check that the API key (api_key_env, $OPENAI_API_KEY by default) may use this model",
    404: "not found: check --model, the name the endpoint serves (GET URL/v1/models lists them), and the URL",
    429: "rate limited: the endpoint's rate limit or quota; rerun later, or lower --max-concurrent (max_concurrent)",
}
# datatrove's message for a local server's statuses other than 200, 400 and 500
_LOCAL_STATUS = re.compile(r"Error http status (\d{3})")


_SURROGATE = re.compile("[\ud800-\udfff]")


def response_text(value: Any) -> str | None:
    """The text of a message's `content` / `reasoning_content`, or None when it is not text.

    A string, or a list of parts (OpenAI multi-part format: {"type": "text", "text": ...} or plain strings) joined;
    None is "". Lone surrogates (a JSON `\\ud800` escape) become U+FFFD: they cannot be encoded as UTF-8, and
    datatrove drops a document it cannot write with nothing but a log line.
    """
    if value is None:
        return ""
    if isinstance(value, list):
        parts = [p if isinstance(p, str) else p.get("text") if isinstance(p, dict) else None for p in value]
        if not all(isinstance(p, str) for p in parts):
            return None
        value = "".join(parts)  # type: ignore[arg-type]
    if not isinstance(value, str):
        return None
    return _SURROGATE.sub("\ufffd", value)


def request_error(err: BaseException, timeout: float) -> BaseException:
    """The InferenceError the rollout gets for a failed HTTP call ERR, its message starting with the kind of failure
    (`TIMED_OUT`, `SERVER_ERROR` or `NO_REPLY`, `REFUSED` with what to check, `CONNECTION_FAILED`,
    `BadRequestError`); ERR itself for another InferenceError (e.g. a local server's other statuses).

    A local server's error is datatrove's own (`ServerError` for a 500, `Error http status N`); a remote endpoint's
    comes from the OpenAI client, which datatrove re-raises as a ConnectionError (429, 5xx, connection, timeout)
    or an InferenceError (401, 403, 404, 400) with the client's error as the cause, which holds the status.
    """
    cause = err.__cause__
    status = getattr(cause, "status_code", None)
    if not isinstance(status, int) and isinstance(err, InferenceError):
        found = _LOCAL_STATUS.search(str(err.error))
        status = int(found.group(1)) if found else None
    detail = str(getattr(err, "error", err))[:300]
    if isinstance(err, TimeoutError) or type(cause).__name__ == "APITimeoutError":
        return InferenceError(None, f"{TIMED_OUT} after {timeout}s")
    if status in REFUSALS:
        return InferenceError(None, f"{REFUSED}HTTP {status} ({REFUSALS[status]}): {detail}")
    if status == 400 and "BadRequestError" not in detail:  # final for the rollout and the request cache
        return InferenceError(None, f"BadRequestError (HTTP 400): {detail}")
    if isinstance(err, ServerError):  # a local 500, or a connection closed without a status line
        if str(err.error).strip() == _EMPTY_500.strip():  # no body: no reply at all, or an empty 500
            return InferenceError(None, f"{NO_REPLY}{err}")
        return InferenceError(None, f"{SERVER_ERROR}{err}")
    if isinstance(status, int) and status >= 500:
        return InferenceError(None, f"{SERVER_ERROR}HTTP {status}: {detail}")
    if isinstance(err, (ConnectionError, OSError)):  # refused or reset: retried by the rollout
        return InferenceError(None, f"{CONNECTION_FAILED}{type(err).__name__}: {err}")
    return err


def malformed_answer(answer: Any, chat: bool = True) -> str | None:
    """What an OpenAI-compatible answer (the parsed body of a 200) lacks that datatrove reads from it, in words
    naming the field and what the answer held; None when it has them all."""

    def held(value: Any) -> str:
        if isinstance(value, dict):
            return f"its keys: {', '.join(map(str, list(value)[:8])) or 'none'}"
        return f"a {type(value).__name__}"

    if not isinstance(answer, dict):
        return f"the answer is not a JSON object ({held(answer)})"
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices:
        return f"no `choices` (a non-empty list) in the answer ({held(answer)})"
    choice, field = choices[0], "message" if chat else "text"
    if not isinstance(choice, dict) or field not in choice or "finish_reason" not in choice:
        return f"no `{field}` and `finish_reason` in the answer's choices[0] ({held(choice)})"
    if chat and not isinstance(choice["message"], dict):
        return f"choices[0].message is not a JSON object ({held(choice['message'])})"
    if not isinstance(answer.get("usage", {}), dict):
        return f"`usage` is not a JSON object ({held(answer['usage'])})"
    return None
