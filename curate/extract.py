"""Math-aware HTML -> text: rewrite math markup in the DOM to delimited LaTeX, then extract the main content.

`fast` runs resiliparse main-content extraction on the rewritten DOM, `clean` serialises the rewritten DOM and
runs trafilatura on it. Rewritten math is wrapped in private-use sentinels (not `$`) so that the text pass after
extraction can tell TeX that came from markup apart from `$` signs that were in the page text.
"""

from __future__ import annotations

from curate.dom_rewrite import rewrite_tree, strip_sentinels
from curate.extract_text import finalize_text, has_tex_renderer

ENGINES = ("fast", "clean")


def extract(html: str, url: str | None = None, engine: str = "fast") -> str:
    """Extract the main content of `html` as Markdown-like text with math as `$...$` / `$$...$$`.

    Args:
        html: the page as a str.
        url: the page URL (used by trafilatura for the clean engine).
        engine: "fast" (resiliparse) or "clean" (trafilatura).

    Returns:
        The extracted text ("" when nothing is found).
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(strip_sentinels(html))
    if tree.body is None:
        return ""
    rewrite_tree(tree)
    if engine == "fast":
        raw = _extract_fast(tree)
    else:
        raw = _extract_clean(tree, url)
    return finalize_text(raw, tex_page=has_tex_renderer(html))


def _extract_fast(tree) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(
        tree,
        preserve_formatting=True,
        main_content=True,
        list_bullets=True,
        alt_texts=False,
        links=False,
        comments=True,
    )


def _extract_clean(tree, url: str | None) -> str:
    import trafilatura

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
