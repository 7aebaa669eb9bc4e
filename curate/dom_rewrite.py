"""DOM rewrite before extraction: every piece of math markup becomes a text node holding delimited LaTeX.

Math found in markup is wrapped in private-use sentinels (`INLINE_OPEN`...`INLINE_CLOSE`,
`DISPLAY_OPEN`...`DISPLAY_CLOSE`) instead of `$`, so the text pass after extraction (`curate.extract_text`) can
escape `$` signs that were page text (prices) while keeping math it found itself. Rendered duplicates of the
same formula (MathJax previews, KaTeX HTML, MathJax CHTML/SVG) are removed so the formula appears once.
"""

from __future__ import annotations

# Printable but rare brackets: trafilatura drops unprintable (private-use) characters. Any already in the page
# are removed before parsing (`strip_sentinels`).
INLINE_OPEN, INLINE_CLOSE = "\u2e28", "\u2e29"
DISPLAY_OPEN, DISPLAY_CLOSE = "\u2983", "\u2984"
SENTINELS = (INLINE_OPEN, INLINE_CLOSE, DISPLAY_OPEN, DISPLAY_CLOSE)

# Rendered math output that duplicates a source we read elsewhere (script tags, annotations).
_RENDERED_SELECTORS = (
    ".MathJax_Preview",
    ".MathJax",
    ".MathJax_Display",
    ".MathJax_SVG",
    ".MathJax_SVG_Display",
    ".MathJax_CHTML",
    ".MathJax_MathML",
    ".mjx-chtml",
    ".katex-html",
)


def strip_sentinels(text: str) -> str:
    """Remove sentinel characters that were already in the page."""
    for s in SENTINELS:
        if s in text:
            text = text.replace(s, "")
    return text


def wrap_math(tex: str, display: bool) -> str:
    """Wrap LaTeX in the sentinels of its kind; sentinels inside the TeX are dropped."""
    for s in SENTINELS:
        tex = tex.replace(s, "")
    tex = tex.strip()
    if not tex:
        return ""
    if display:
        return f"{DISPLAY_OPEN}{tex}{DISPLAY_CLOSE}"
    return f"{INLINE_OPEN}{tex}{INLINE_CLOSE}"


def _replace(tree, node, text: str) -> None:
    parent = node.parent
    if parent is None:
        return
    if text:
        parent.replace_child(tree.create_text_node(text), node)
    else:
        parent.remove_child(node)


def _rewrite_scripts(tree, body) -> None:
    for node in body.query_selector_all('script[type^="math/tex"], script[type^="math/asciimath"]'):
        kind = (node.getattr("type") or "").lower()
        tex = node.text or ""
        if "asciimath" in kind:
            _replace(tree, node, wrap_math(f"`{tex.strip()}`", "display" in kind) if tex.strip() else "")
        else:
            _replace(tree, node, wrap_math(tex, "mode=display" in kind))


def _rewrite_katex(tree, body) -> None:
    for node in body.query_selector_all(".katex"):
        ann = node.query_selector('annotation[encoding="application/x-tex"]')
        if ann is None:
            continue
        display = node.parent is not None and "katex-display" in (node.parent.class_name or "")
        _replace(tree, node, wrap_math(ann.text or "", display))


def _rewrite_mathml(tree, body) -> None:
    from curate.mathml import mathml_to_latex

    for node in body.query_selector_all("math"):
        display = (node.getattr("display") or "").lower() == "block"
        ann = node.query_selector('annotation[encoding="application/x-tex"], annotation[encoding="TeX"]')
        tex = ann.text if ann is not None else None
        if not tex:
            tex = node.getattr("alttext")
        if not tex:
            tex = mathml_to_latex(node)
        _replace(tree, node, wrap_math(tex or "", display))


def rewrite_tree(tree) -> None:
    """Rewrite the math in a resiliparse HTMLTree in place."""
    body = tree.body
    _rewrite_scripts(tree, body)
    _rewrite_katex(tree, body)
    for sel in _RENDERED_SELECTORS:
        for node in body.query_selector_all(sel):
            _replace(tree, node, "")
    _rewrite_mathml(tree, body)
