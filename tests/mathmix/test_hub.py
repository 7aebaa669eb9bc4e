"""mathmix.hub: a model name that cannot be fetched fails at once instead of ~50 s of network retries."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from pathlib import Path

import pytest

from mathmix import hub

REACHABLE = hub.hub_reachable  # the cached function itself (one test replaces the module attribute)


@pytest.fixture(autouse=True)
def online(monkeypatch):
    """HF_HUB_OFFLINE unset (tests/conftest.py sets it) and no remembered reachability answer."""
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(key, raising=False)
    REACHABLE.cache_clear()
    yield
    REACHABLE.cache_clear()


@pytest.fixture()
def empty_cache(tmp_path, monkeypatch) -> Path:
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def local_hub():
    """An HTTP server on localhost standing in for the hub (it answers 404 to everything)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class FakeLoader:
    """Stands in for AutoTokenizer: nothing cached; records every attempt to go to the network."""

    def __init__(self):
        self.network_calls: list[str] = []

    def from_pretrained(self, name, local_files_only=False, **kwargs):
        if local_files_only:
            raise OSError(f"{name} not in the cache")
        self.network_calls.append(name)
        return "fetched"


def test_a_bare_name_in_no_cache_gets_the_same_quick_check_as_an_org_name(empty_cache, monkeypatch):
    # `gpt2`-style names are real hub ids; a mistyped folder (`nope`) fails on the reachability check, at once
    monkeypatch.setattr(hub, "hub_reachable", lambda endpoint: False)
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"model not found: nope is not a local folder.*cannot be reached"):
        hub.check_model_source("nope")
    loader = FakeLoader()
    with pytest.raises(OSError, match=r"nope is not a local folder.*cannot be reached"):
        hub.from_pretrained(loader, "nope")
    assert loader.network_calls == [] and time.monotonic() - start < 2
    monkeypatch.setattr(hub, "hub_reachable", lambda endpoint: True)
    assert hub.from_pretrained(loader, "gpt2") == "fetched" and loader.network_calls == ["gpt2"]


def test_a_cached_bare_name_is_still_accepted(empty_cache):
    snapshot = empty_cache / "models--gpt2" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (empty_cache / "models--gpt2" / "refs").mkdir()
    (empty_cache / "models--gpt2" / "refs" / "main").write_text("abc")
    hub.check_model_source("gpt2")


def test_an_org_name_is_refused_at_once_when_the_hub_cannot_be_reached(empty_cache, monkeypatch):
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    start = time.monotonic()
    with pytest.raises(ValueError, match=f"org/nope is not a local folder.*{endpoint} cannot be reached"):
        hub.check_model_source("org/nope")
    loader = FakeLoader()
    with pytest.raises(OSError, match="cannot be reached"):
        hub.from_pretrained(loader, "org/nope")
    assert loader.network_calls == [] and time.monotonic() - start < hub.REACH_TIMEOUT_S + 1


def test_offline_refuses_an_uncached_org_name(empty_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE is set"):
        hub.check_model_source("org/nope")


def test_an_org_name_goes_to_the_hub_when_it_answers(empty_cache, local_hub, monkeypatch, capsys):
    monkeypatch.setenv("HF_ENDPOINT", local_hub)
    hub.check_model_source("org/model")  # left to the loader
    loader = FakeLoader()
    assert hub.from_pretrained(loader, "org/model") == "fetched"
    assert loader.network_calls == ["org/model"] and "fetching it from the hub" in capsys.readouterr().err


def test_reachability_gives_up_after_its_timeout():
    """A host that accepts the connection and never answers: False after the timeout, not a hang."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        start = time.monotonic()
        assert not hub.hub_reachable(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.3)
        assert time.monotonic() - start < 2


def test_paths_and_deep_names_are_never_hub_names(empty_cache, tmp_path):
    for name in (str(tmp_path / "missing"), "./m", "a/b/c"):
        with pytest.raises(ValueError, match="model not found"):
            hub.check_model_source(name)
    (tmp_path / "folder").mkdir()
    with pytest.raises(ValueError, match="no config.json"):
        hub.check_model_source(tmp_path / "folder")
