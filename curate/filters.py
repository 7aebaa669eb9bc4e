"""Quality heuristics fit for math pages, and a plain-file URL blocklist.

datatrove's C4 filter drops every document containing `{`, i.e. most LaTeX, and its Gopher rules count `\\frac`
and `^` as symbols; these rules look at the prose with formulas taken out, so a page dense in formulas passes.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter

from curate.lid import strip_math


class UrlBlocklistFilter(BaseFilter):
    """Drops documents whose host (or a parent domain) or URL prefix is listed in a plain text file.

    One entry per line: a domain (`example.com` also blocks `www.example.com`) or a URL prefix
    (`https://example.com/ads/`); `#` starts a comment. No file, or an empty one, blocks nothing.
    """

    name = "⛔ URL blocklist"

    def __init__(self, blocklist_file: str | None = None):
        super().__init__()
        self.domains: set[str] = set()
        self.prefixes: list[str] = []
        if blocklist_file:
            path = Path(blocklist_file)
            if not path.is_file():
                raise FileNotFoundError(f"{blocklist_file}: URL blocklist file not found")
            for line in path.read_text().splitlines():
                entry = line.split("#", 1)[0].strip().lower()
                if not entry:
                    continue
                (self.prefixes.append(entry) if "/" in entry else self.domains.add(entry))

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        url = (doc.metadata.get("url") or "").lower()
        if not url or not (self.domains or self.prefixes):
            return True
        host = urlsplit(url).hostname or ""
        parts = host.split(".")
        if any(".".join(parts[i:]) in self.domains for i in range(len(parts))):
            return False, "blocklisted_url"
        if any(url.startswith(prefix) for prefix in self.prefixes):
            return False, "blocklisted_url"
        return True


class MathQualityFilter(BaseFilter):
    """Length, repetition and prose checks that leave formulas alone. Drop reasons are named per rule."""

    name = "🧹 Math-aware quality"

    def __init__(
        self,
        min_words: int = 20,
        max_duplicate_line_fraction: float = 0.5,
        min_alpha_fraction: float = 0.25,
        max_chars: int = 2_000_000,
    ):
        super().__init__()
        self.min_words = min_words
        self.max_duplicate_line_fraction = max_duplicate_line_fraction
        self.min_alpha_fraction = min_alpha_fraction
        self.max_chars = max_chars

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        text = doc.text
        if len(text) > self.max_chars:
            return False, "too_long"
        words = text.split()
        if len(words) < self.min_words:
            return False, "too_short"
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if len(lines) >= 5:
            seen: set[str] = set()
            dup_chars = 0
            for line in lines:
                if line in seen:
                    dup_chars += len(line)
                seen.add(line)
            if dup_chars / max(1, sum(len(line) for line in lines)) > self.max_duplicate_line_fraction:
                return False, "repeated_lines"
        prose = "".join(strip_math(text).split())
        if len(prose) >= 200:
            alpha = sum(ch.isalpha() for ch in prose) / len(prose)
            if alpha < self.min_alpha_fraction:
                return False, "low_alpha_prose"
        return True
