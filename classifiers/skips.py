"""What reading classifier inputs left out, by reason, with a few names: every command reports it in one line.

A folder is read whole (every supported file in every subfolder); what cannot be used is counted and named, not
dropped unseen: a training card, a score or an eval that silently read 1 of 20 files looks like a finished run.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

EXAMPLES = 3  # names kept per reason: enough to find the files, short enough for one line

# Reasons of whole files; the others (empty_text, too_deep, extract_error, no_text_field and the web reader's
# truncated_record, bad_record, not_html, binary_body, empty_page, too_large, undecodable, http_status,
# warc_read_error) are of one page or row.
FILE_REASONS = ("unsupported_file", "bad_file", "given_twice")


class Skipped:
    """Counts by reason and the first few names (a file relative to its input, a page, `file line N`)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}

    def add(self, reason: str, name: str, n: int = 1) -> None:
        self.counts[reason] += n
        names = self.examples.setdefault(reason, [])
        if len(names) < EXAMPLES and name not in names:
            names.append(name)

    def update(self, other: Skipped) -> None:
        """Add OTHER's counts and names."""
        for reason, n in other.counts.items():
            self.counts[reason] += n
            names = self.examples.setdefault(reason, [])
            names += [x for x in other.examples[reason] if x not in names][: EXAMPLES - len(names)]

    def __bool__(self) -> bool:
        return bool(self.counts)

    def total(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, dict[str, Any]]:
        """{reason: {"n": count, "examples": [names]}}, reasons sorted (for a model card)."""
        return {r: {"n": self.counts[r], "examples": list(self.examples[r])} for r in sorted(self.counts)}

    def describe(self) -> str:
        """`skipped 4: 1 unsupported_file (notes.txt); 2 empty_text (a.html, b.html); ...` ('' when none)."""
        return describe(self.as_dict())


def describe(skipped: dict[str, dict[str, Any]]) -> str:
    """The one-line report of `Skipped.as_dict()` (as a card or a summary holds it); '' when nothing was skipped."""
    if not skipped:
        return ""
    parts = []
    for reason, entry in skipped.items():
        n, names = entry["n"], entry["examples"]
        parts.append(f"{n} {reason} ({', '.join(names)}{', ...' if n > len(names) else ''})")
    return f"skipped {sum(e['n'] for e in skipped.values())}: " + "; ".join(parts)
