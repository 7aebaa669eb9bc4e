"""Loading Hugging Face models and tokenizers by folder or hub name, cache first, failing fast without a network.

Why: with no network, transformers spends ~50 s on retries before it reports that a hub name cannot be fetched,
even when the name is in the local cache. Clusters and CI here are often offline, so a name is looked up in the
cache first, and only a name missing there goes to the hub (with a line on stderr saying so). Before it does, a
name that cannot be fetched is refused at once: any name under HF_HUB_OFFLINE, and any name when the hub
(HF_ENDPOINT, default https://huggingface.co) does not answer within a few seconds. Bare names (`gpt2`) are hub
names too, so a mistyped folder such as `nope` costs that check, not ~50 s of retries.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

DEFAULT_ENDPOINT = "https://huggingface.co"
REACH_TIMEOUT_S = 3.0  # the hub answers a HEAD in well under a second where there is a network


def offline() -> bool:
    """Whether HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) asks for no network."""
    return any(
        os.environ.get(k, "").lower() in ("1", "true", "yes", "on")
        for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_endpoint() -> str:
    """The hub URL: HF_ENDPOINT (a mirror), else huggingface.co; read when called, as huggingface_hub reads it."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


@functools.lru_cache(maxsize=8)
def hub_reachable(endpoint: str, timeout: float = REACH_TIMEOUT_S) -> bool:
    """Whether ENDPOINT answers an HTTP HEAD within TIMEOUT seconds (any status counts: something is there).

    Proxies from the environment (HTTPS_PROXY, NO_PROXY) are honoured. The request runs in a daemon thread so a
    resolver that hangs cannot hold the caller past TIMEOUT. One answer per endpoint and process (a tokenizer and
    its model are loaded one after the other).
    """
    answer: list[bool] = []

    def probe() -> None:
        try:
            urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout).close()
            answer.append(True)
        except urllib.error.HTTPError:  # 4xx/5xx: the server is there
            answer.append(True)
        except (OSError, ValueError):  # URLError, DNS, refused, timeout, a malformed HF_ENDPOINT
            answer.append(False)

    thread = threading.Thread(target=probe, name="mathmix-hub-probe", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return bool(answer and answer[0])


def fetch_problem(name: str) -> str | None:
    """Why NAME (not a folder, not in the cache) cannot be fetched from the hub now; None when it may be."""
    if offline():
        return f"{name} is not a local folder nor in the Hugging Face cache (HF_HUB_OFFLINE is set)"
    endpoint = hub_endpoint()
    if not hub_reachable(endpoint):
        return (
            f"{name} is not a local folder nor in the Hugging Face cache, and {endpoint} cannot be reached "
            f"(no network? checked with a {REACH_TIMEOUT_S:g} s timeout; HF_ENDPOINT names a mirror)"
        )
    return None


def from_pretrained(loader: Any, name_or_path: str | Path, **kwargs: Any) -> Any:
    """`loader.from_pretrained(NAME)`: a path that exists locally with `local_files_only` (a file, which
    transformers would look up as a hub name, fails at once); a hub name from the cache, else from the hub.

    A name that cannot be fetched (`fetch_problem`) is an OSError at once instead of the loader's retries. Errors
    are OSError / ValueError; callers name the input in their message.
    """
    name = str(name_or_path)
    if Path(
        name
    ).exists():  # local: never the hub (transformers took a file path for a hub name, ~50 s retries)
        return loader.from_pretrained(name, **{**kwargs, "local_files_only": True})
    if offline():
        return loader.from_pretrained(name, **kwargs)
    if name.startswith((".", "/", "~")):  # written as a path: never a hub name
        raise OSError(f"{name}: no such folder")
    try:
        return loader.from_pretrained(name, local_files_only=True, **kwargs)
    except (OSError, ValueError):
        problem = fetch_problem(name)
        if problem:
            raise OSError(problem) from None
        print(
            f"mathmix: {name} is neither a local folder nor in the Hugging Face cache; fetching it from the hub "
            "(set HF_HUB_OFFLINE=1 to fail at once)",
            file=sys.stderr,
        )
    return loader.from_pretrained(name, **kwargs)


def in_cache(name: str) -> bool:
    """Whether the hub name NAME has a config.json in the local Hugging Face cache."""
    return cached_snapshot(name) is not None


def cached_snapshot(name: str) -> str | None:
    """The commit of the snapshot the hub name NAME resolves to in the local Hugging Face cache (its `main` ref,
    the revision a server given NAME loads offline; online it may fetch a newer one, and a rerun is then refused),
    or None when NAME has no config.json there. Reads the cache only, never the network; the cache is
    huggingface_hub's (HF_HUB_CACHE, else HF_HOME/hub, read at its import).
    """
    from huggingface_hub import try_to_load_from_cache

    try:
        config = try_to_load_from_cache(name, "config.json")
    except ValueError:  # HFValidationError: not a valid repo id at all
        return None
    # CACHE/models--ORG--NAME/snapshots/COMMIT/config.json (refs/main holds COMMIT)
    return Path(config).parent.name if isinstance(config, str) else None


def check_model_source(name_or_path: str | Path) -> None:
    """Fail early (ValueError naming it) when a model can be neither a local folder nor a hub name to fetch.

    A path (`./m`, `/m`, `~/m`, or an existing folder) must hold config.json; a hub name must be in the local
    cache, or be a name that can be fetched now (`fetch_problem`: not offline, the hub answering).
    """
    name = str(name_or_path)
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ValueError(f"{name}: not a Hugging Face model folder (no config.json)")
        return
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ValueError(f"model not found: {name}")
    if in_cache(name):
        return
    problem = fetch_problem(name)
    if problem:
        raise ValueError(f"model not found: {problem}")
