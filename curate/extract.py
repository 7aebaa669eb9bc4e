"""Math-aware HTML -> text: rewrite math markup in the DOM to delimited LaTeX, then extract the main content.

`fast` runs resiliparse main-content extraction on the rewritten DOM, `clean` serialises the rewritten DOM and
runs trafilatura on it. Rewritten math is wrapped in private-use sentinels (not `$`) so that the text pass after
extraction can tell TeX that came from markup apart from `$` signs that were in the page text.
"""

from __future__ import annotations

import re

from curate.dom_rewrite import MACRO_DEFS, rewrite_tree, strip_sentinels
from curate.dom_sites import drop_site_chrome
from curate.extract_text import finalize_text, has_tex_renderer

ENGINES = ("fast", "clean")
# resiliparse's main-content pass is superlinear in nesting depth (10k levels: seconds, 100k: hours).
MAX_DOM_DEPTH = 2000
# fast engine: a main-content text shorter than this (stripped) on a page whose whole text is at least
# FALLBACK_MIN_PAGE_CHARS is a miss of resiliparse's main-content pass; the clean engine is tried instead.
FALLBACK_MAX_MAIN_CHARS = 200
FALLBACK_MIN_PAGE_CHARS = 2000
# A formula that is only `\begingroup` or `\endgroup` (MathJax no-op groups StackExchange puts around every
# post): not content. Code spans and fences are left alone.
# Leading blanks only from the first blank of a run (a match tried at each blank of a long run and scanned the rest of
# it: quadratic); a match right after the previous one (whose trailing blanks it took) starts at its `$`.
_EMPTY_GROUP = re.compile(r"(?:(?<![ \t])[ \t]++)?(?<![\\$])(\$\$?)\s*\\(?:begin|end)group\s*\1(?!\$)[ \t]*")
_CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)


class PageTooDeep(ValueError):
    """The page nests elements deeper than MAX_DOM_DEPTH (real pages stay far below)."""


def nesting_probe(body, limit: int = MAX_DOM_DEPTH) -> int:
    """Depth of the first-child and last-child chains below <body>, stopping at `limit` (O(depth), cheap).

    Catches the usual nesting bombs (one long chain); other shapes are left to the step's per-page timeout.
    """
    deepest = 0
    for attr in ("first_element_child", "last_element_child"):
        node, depth = body, 0
        while node is not None and depth <= limit:
            node = getattr(node, attr)
            depth += 1
        deepest = max(deepest, depth)
    return deepest


def extract(html: str, url: str | None = None, engine: str = "fast") -> str:
    """Extract the main content of `html` as Markdown-like text with math as `$...$` / `$$...$$`.

    Args:
        html: the page as a str.
        url: the page URL (used by trafilatura for the clean engine).
        engine: "fast" (resiliparse) or "clean" (trafilatura).

    Returns:
        The extracted text ("" when nothing is found or the page is a nesting bomb).
    """
    try:
        return extract_strict(html, url, engine)
    except PageTooDeep:
        return ""


def extract_strict(html: str, url: str | None = None, engine: str = "fast") -> str:
    """`extract`, but raises `PageTooDeep` for nesting bombs (so the datatrove step can count the reason)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    from resiliparse.parse.html import HTMLTree

    html = strip_sentinels(html)
    try:
        tree = HTMLTree.parse(html)
    except UnicodeEncodeError:  # lone surrogates (bytes decoded with surrogateescape): replace them
        html = html.encode("utf-8", errors="replace").decode("utf-8")
        tree = HTMLTree.parse(html)
    if tree.body is None:
        return ""
    if nesting_probe(tree.body) > MAX_DOM_DEPTH:
        raise PageTooDeep(f"elements nested deeper than {MAX_DOM_DEPTH}")
    tex_page = has_tex_renderer(tree)
    drop_site_chrome(tree)
    rewrite_tree(tree, headings=engine == "fast", tex_page=tex_page)
    if engine == "fast":
        raw = _extract_fast(tree)
        if _main_content_missed(tree, raw):
            fallback = _extract_clean(_rewritten_for_clean(html, tex_page), url)
            if len(fallback.strip()) > len(raw.strip()):
                raw = fallback
    else:
        raw = _extract_clean(tree, url)
    return drop_empty_groups(finalize_text(raw, tex_page=tex_page))


def _main_content_missed(tree, raw: str) -> bool:
    """True when the main-content pass found (nearly) nothing although the page holds substantial text."""
    if len(raw.strip()) >= FALLBACK_MAX_MAIN_CHARS:
        return False
    return len(_extract_fast(tree, main_content=False).strip()) >= FALLBACK_MIN_PAGE_CHARS


def _rewritten_for_clean(html: str, tex_page: bool):
    """A fresh tree rewritten as the clean engine rewrites it (headings and scripts left to trafilatura)."""
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(html)
    drop_site_chrome(tree)
    rewrite_tree(tree, headings=False, tex_page=tex_page)
    return tree


def drop_empty_groups(text: str) -> str:
    """Remove formulas that are only `\\begingroup` / `\\endgroup` (outside code); no-op without them."""
    # the regex needs one of them ("group" alone is a common word)
    if "\\begingroup" not in text and "\\endgroup" not in text:
        return text
    parts = _CODE.split(text)
    for i in range(0, len(parts), 2):  # even parts are outside code
        parts[i] = _drop_groups_outside_code(parts[i])
    text = re.sub(r"\n{3,}", "\n\n", "".join(parts))
    return text.strip()


def _drop_groups_outside_code(text: str) -> str:
    def gap(m: re.Match) -> str:
        # At a line edge the marker goes with its spaces; between words one space is kept.
        start, end = m.start(), m.end()
        at_edge = start == 0 or text[start - 1] == "\n" or end == len(text) or text[end] == "\n"
        return "" if at_edge else " "

    return _EMPTY_GROUP.sub(gap, text)


def _extract_fast(tree, main_content: bool = True) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(
        tree,
        preserve_formatting=True,
        main_content=main_content,
        list_bullets=True,
        alt_texts=False,
        links=False,
        comments=True,
    )


_MACRO_NAMES = tuple(m.lstrip("\\") for m in MACRO_DEFS)


def _drop_invisible(tree) -> None:
    """Remove hidden elements and TeX macro preambles: trafilatura (unlike resiliparse) may pick them as content."""
    hidden = tree.body.query_selector_all('[hidden], [style*="display:none"], [style*="display: none"]')
    for node in hidden.values():
        if node.parent is not None:
            node.parent.remove_child(node)
    for node in tree.body.query_selector_all("p").values():
        text = (node.text or "")[:100].lstrip("\\([$ \u00a0\n\t")
        if text.startswith(_MACRO_NAMES) and node.parent is not None:
            node.parent.remove_child(node)


def _extract_clean(tree, url: str | None) -> str:
    import trafilatura

    _drop_invisible(tree)
    html = tree.document.html
    text = trafilatura.extract(
        html,
        url=url,
        output_format="txt",
        include_comments=False,
        include_tables=True,
        include_formatting=True,
        favor_recall=True,
        deduplicate=False,
    )
    return text or ""
