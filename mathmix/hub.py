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
    try:
        return loader.from_pretrained(name, local_files_only=True, **kwargs)
    except (OSError, ValueError):
        print(
            f"mathmix: {name} is neither a local folder nor in the Hugging Face cache; fetching it from the hub "
            "(set HF_HUB_OFFLINE=1 to fail at once)",
            file=sys.stderr,
        )
    return loader.from_pretrained(name, **kwargs)
