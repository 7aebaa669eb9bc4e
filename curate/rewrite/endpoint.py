"""The endpoint a rewrite job talks to (server: endpoint): its URL as datatrove takes it, checked and waited on
before anything is written, so a wrong or dead endpoint costs one line.
"""

from __future__ import annotations

import importlib.util
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from urllib.parse import ParseResult

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")  # reached by datatrove itself, not through the OpenAI client


def _is_local(parsed: ParseResult) -> bool:
    """Whether a parsed endpoint URL (`urllib.parse.urlparse`) is a local `http://` one, which datatrove reaches
    itself (and takes for the server's root); any other goes through the OpenAI client. ValueError from a host
    that does not parse."""
    return parsed.scheme == "http" and parsed.hostname in LOCAL_HOSTS


def local_server_root(url: str | None) -> str | None:
    """URL without a trailing `/v1` where datatrove takes it for the server's root: a local `http://` endpoint,
    to which it appends `/v1/chat/completions` and `/v1/models` itself (`http://127.0.0.1:8000/v1`, the OpenAI
    style of base URL, was probed at /v1/v1/models and refused after the whole wait). A remote endpoint's URL is
    the OpenAI client's base URL, where /v1 belongs: kept as given."""
    from urllib.parse import urlparse

    if not url:
        return url
    try:
        parsed = urlparse(url)
        local = _is_local(parsed)
    except ValueError:
        return url  # not a URL: check_endpoint_url names it
    path = parsed.path.rstrip("/")
    if not local or not path.endswith("/v1") or parsed.query or parsed.fragment:
        return url
    return parsed._replace(path=path[: -len("/v1")]).geturl()


def check_endpoint_url(url: str | None) -> None:
    """ValueError (one line naming URL) unless URL is an http(s) URL with a host that datatrove can use.

    datatrove talks to a local `http://` endpoint (localhost, 127.0.0.1, ::1) itself and to any other through
    the OpenAI client, which is not installed with mathmix: that case needs the `endpoint` extra (openai).
    """
    from urllib.parse import urlparse

    if not url:
        raise ValueError("server 'endpoint' needs an endpoint URL (--endpoint / endpoint:)")
    try:
        parsed = urlparse(url)
        host, _ = parsed.hostname, parsed.port  # .port raises on a port that is not a number
    except ValueError as err:
        raise ValueError(f"endpoint {url!r}: not a valid URL ({err})") from None
    if parsed.scheme not in ("http", "https") or not host:
        raise ValueError(
            f"endpoint {url!r}: not an http:// or https:// URL with a host (e.g. http://127.0.0.1:8000)"
        )
    if not _is_local(parsed) and importlib.util.find_spec("openai") is None:
        raise ValueError(
            f"endpoint {url}: a non-local endpoint is reached through the OpenAI client, which is not "
            "installed: pip install 'mathmix[endpoint]' (or openai)"
        )


def wait_for_endpoint(url: str, timeout_s: float) -> None:
    """Wait up to `timeout_s` for URL to answer datatrove's readiness check (GET URL/v1/models with 200), else
    ValueError naming URL. Run before anything is written, so a wrong or dead endpoint costs one line.

    A 404 is final (a server that is up, with nothing at that path: waiting does not change it), and the error
    says which part of the URL to check."""
    import httpx

    probe = url.rstrip("/") + "/v1/models"
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        left = deadline - time.monotonic()
        try:
            response = httpx.get(probe, timeout=max(0.5, min(5.0, left)))
            if response.status_code == 200:
                return
            if response.status_code == 404:
                raise ValueError(
                    f"endpoint {url}: GET {probe} answered 404 (not found); {_not_found_hint(url)}"
                )
            last = f"HTTP {response.status_code}"
        except httpx.HTTPError as err:
            last = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(0.5, left))
    raise ValueError(
        f"endpoint {url} did not answer GET {probe} with 200 within {timeout_s:g}s ({last}); is the server "
        "up at that URL? (--server-timeout / server_ready_timeout_s to wait longer)"
    )


def _not_found_hint(url: str) -> str:
    from urllib.parse import urlparse

    parsed = urlparse(url)
    if _is_local(parsed):
        return ("a local --endpoint is the server's root, the part before /v1/models and /v1/chat/completions "
                "(e.g. http://127.0.0.1:8000; a trailing /v1 is dropped): check its port and path")  # fmt: skip
    if parsed.path.rstrip("/").endswith("/v1"):
        return ("datatrove checks an endpoint with GET URL/v1/models, so a remote URL ending in /v1 (the OpenAI "
                "client's base URL) must answer there too; this one does not")  # fmt: skip
    return "a remote --endpoint is the OpenAI client's base URL, usually ending in /v1: check its path"
