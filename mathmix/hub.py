"""Loading Hugging Face models and tokenizers by folder or hub name, cache first.

Why: with no network, transformers spends ~50 s on retries before it reports that a hub name cannot be fetched,
even when the name is in the local cache. Clusters and CI here are often offline, so a name is looked up in the
cache first, and only a name missing there goes to the hub (with a line on stderr saying so).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any


def offline() -> bool:
    """Whether HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) asks for no network."""
    return any(
        os.environ.get(k, "").lower() in ("1", "true", "yes", "on")
        for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def from_pretrained(loader: Any, name_or_path: str | Path, **kwargs: Any) -> Any:
    """`loader.from_pretrained(NAME)`: a local folder as is; a hub name from the cache, else from the hub.

    Errors are the loader's own (OSError / ValueError); callers name the input in their message.
    """
    name = str(name_or_path)
    if Path(name).exists() or offline():
        return loader.from_pretrained(name, **kwargs)
    if name.startswith((".", "/", "~")):  # written as a path: never a hub name
        raise OSError(f"{name}: no such folder")
    try:
        return loader.from_pretrained(name, local_files_only=True, **kwargs)
    except (OSError, ValueError):
        print(
            f"mathmix: {name} is neither a local folder nor in the Hugging Face cache; fetching it from the hub "
            "(set HF_HUB_OFFLINE=1 to fail at once)",
            file=sys.stderr,
        )
    return loader.from_pretrained(name, **kwargs)


def check_model_source(name_or_path: str | Path) -> None:
    """Fail early (ValueError naming it) when a model can be neither a local folder nor a hub name to fetch.

    A path (`./m`, `/m`, `~/m`, or an existing folder) must hold config.json; a hub name must be in the local cache
    when HF_HUB_OFFLINE is set. A name that may be fetched is left to the loader.
    """
    name = str(name_or_path)
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ValueError(f"{name}: not a Hugging Face model folder (no config.json)")
        return
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ValueError(f"model not found: {name}")
    if offline():
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(name, "config.json"), str):
            raise ValueError(
                f"model not found: {name} is not a local folder nor in the Hugging Face cache (offline)"
            )
