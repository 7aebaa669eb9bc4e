"""The text pass after extraction: page-text `$`, `\\(..\\)`, `\\[..\\]` handling, then sentinels -> `$`/`$$`."""

from __future__ import annotations

import re

from curate.dom_rewrite import DISPLAY_CLOSE, DISPLAY_OPEN, INLINE_CLOSE, INLINE_OPEN

_SENTINEL_SPAN = re.compile(
    f"({INLINE_OPEN}[^{INLINE_CLOSE}]*{INLINE_CLOSE}|{DISPLAY_OPEN}[^{DISPLAY_CLOSE}]*{DISPLAY_CLOSE})"
)


def finalize_text(raw: str) -> str:
    """Turn extracted text with sentinel-wrapped math into the final `$`/`$$` text."""
    parts = _SENTINEL_SPAN.split(raw)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 1:
            if part[0] == INLINE_OPEN:
                out.append(f"${part[1:-1].strip()}$")
            else:
                out.append(f"\n$$\n{part[1:-1].strip()}\n$$\n")
        else:
            out.append(part)
    text = "".join(out)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()
