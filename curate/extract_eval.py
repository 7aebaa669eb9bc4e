"""Extraction quality against hand-written gold: per-page formula recall and bag-of-words F1.

Gold formulas come from the gold content list (`equation-interline` blocks and `equation-inline` spans); a
formula counts as found when its LaTeX with all whitespace removed occurs in the output with whitespace removed.
Bag-of-words F1 compares lower-cased word/number tokens of the output and the gold Markdown as multisets.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_WS = re.compile(r"\s+")
_WORD = re.compile(r"\w+", re.UNICODE)


def _walk(node: Any) -> Iterator[dict]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def gold_formulas(page: dict) -> list[str]:
    """The LaTeX of every formula in a gold page (display and inline), in order."""
    out = []
    for node in _walk(page.get("gold_content_list", [])):
        if node.get("type") == "equation-interline":
            content = node.get("content") or {}
            if content.get("math_content"):
                out.append(content["math_content"])
        elif node.get("t") == "equation-inline" and node.get("c"):
            out.append(node["c"])
    return [f for f in out if _WS.sub("", f)]


def formula_recall(text: str, formulas: list[str]) -> float | None:
    """Share of `formulas` whose whitespace-free LaTeX occurs in the whitespace-free `text` (None if none)."""
    if not formulas:
        return None
    flat = _WS.sub("", text)
    found = sum(1 for f in formulas if _WS.sub("", f) in flat)
    return found / len(formulas)


def bow_f1(text: str, gold: str) -> float:
    """Bag-of-words F1 between `text` and `gold` (lower-cased \\w+ tokens, counted as multisets)."""
    a = Counter(t.lower() for t in _WORD.findall(text))
    b = Counter(t.lower() for t in _WORD.findall(gold))
    overlap = sum((a & b).values())
    if not overlap:
        return 0.0
    p, r = overlap / sum(a.values()), overlap / sum(b.values())
    return 2 * p * r / (p + r)


def load_gold(path: Path | str) -> list[dict]:
    """Read the gold pages (JSONL with name, url, html, gold_markdown, gold_content_list)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# Math spans of the output: `$$..$$` first, then `$..$`; `\$` is an escaped dollar, not a delimiter.
_MATH_SPAN = re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<![\\$])\$([^$]+?)(?<!\\)\$", re.S)


def delimited_formula_recall(text: str, formulas: list[str]) -> float | None:
    """Formula recall counting a gold formula only when it lies inside one `$..$` / `$$..$$` span of `text`.

    The plain recall (`formula_recall`) ignores delimiters, so TeX left as bare text
    counts as found; this one does not. Whitespace is ignored as there. None when the page has no formulas.
    """
    if not formulas:
        return None
    # `\\` (a TeX line break, as in `$a\\$`) is masked so that its backslash does not escape the next `$`.
    masked = text.replace("\\\\", "\0\0")
    spans = [
        _WS.sub("", text[m.start(m.lastindex or 0) : m.end(m.lastindex or 0)])
        for m in _MATH_SPAN.finditer(masked)
    ]
    found = 0
    for formula in formulas:
        flat = _WS.sub("", formula)
        found += any(flat in span for span in spans)
    return found / len(formulas)


def score_pages(pages: list[dict], extract_fn) -> dict[str, Any]:
    """Run `extract_fn(html, url)` on each gold page; mean recall (pages with formulas), mean F1, per page."""
    rows = []
    for page in pages:
        text = extract_fn(page["html"], page.get("url"))
        rows.append(
            {
                "name": page["name"],
                "recall": formula_recall(text, gold_formulas(page)),
                "f1": bow_f1(text, page["gold_markdown"]),
            }
        )
    recalls = [r["recall"] for r in rows if r["recall"] is not None]
    return {
        "recall": sum(recalls) / len(recalls) if recalls else 0.0,
        "f1": sum(r["f1"] for r in rows) / len(rows) if rows else 0.0,
        "pages": rows,
    }
