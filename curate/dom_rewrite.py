"""DOM rewrite before extraction: every piece of math markup becomes a text node holding delimited LaTeX.

Math found in markup is wrapped in rare printable sentinels instead of `$`, so the text pass after extraction
(`curate.extract_text`) can escape `$` signs that were page text (prices) while keeping math it found itself;
code is wrapped the same way so that its `$` (shell prompts) is never read as math. Rendered duplicates of a
formula (MathJax previews, KaTeX HTML, MathJax CHTML/SVG, Wikipedia fallback images) are removed so each formula
appears once. Printable sentinels (not private-use ones) because trafilatura drops unprintable characters.
"""

from __future__ import annotations

import re

from resiliparse.parse.html import NodeType

from curate.dom_images import rewrite_images
from curate.dom_lists import number_lists
from curate.dom_tables import rewrite_tables
from curate.mathml import mathml_to_latex
from curate.tex_macros import strip_macro_defs

INLINE_OPEN, INLINE_CLOSE = "\u2e28", "\u2e29"
DISPLAY_OPEN, DISPLAY_CLOSE = "\u2983", "\u2984"
CODE_OPEN, CODE_CLOSE = "\u2e22", "\u2e23"
PRE_OPEN, PRE_CLOSE = "\u2e24", "\u2e25"
SENTINELS = (
    INLINE_OPEN,
    INLINE_CLOSE,
    DISPLAY_OPEN,
    DISPLAY_CLOSE,
    CODE_OPEN,
    CODE_CLOSE,
    PRE_OPEN,
    PRE_CLOSE,
)

# Rendered math output that duplicates a source read elsewhere (script tags, annotations).
_RENDERED = (
    ".MathJax_Preview, .MathJax, .MathJax_Display, .MathJax_SVG, .MathJax_SVG_Display, .MathJax_CHTML, "
    ".MathJax_MathML, .mjx-chtml, .katex-html, mjx-container > svg, mjx-container > mjx-math, "
    ".mwe-math-fallback-image-inline, .mwe-math-fallback-image-display"
)
MACRO_DEFS = (
    "\\newcommand",
    "\\renewcommand",
    "\\def\\",
    "\\DeclareMathOperator",
    "\\definecolor",
    "\\require{",
)
_MATH_TAGS = "math, mml\\:math, m\\:math"  # namespaced MathML from XHTML / publisher pages
_ANY_MATH_MARKUP = (
    f'script[type^="math/" i], .katex, .mwe-math-element, mjx-container, .math, .math-inline, .math-display, '
    f"{_MATH_TAGS}, {_RENDERED}"
)
# A cheaper test that every page with math markup passes (8 selectors, not 22: lexbor walks the tree once per
# selector of a list); the exact one runs only where it finds something.
_MAYBE_MATH_MARKUP = f'script[type^="math/" i], mjx-container, {_MATH_TAGS}, [class*="math" i], [class*="katex" i], [class*="mjx" i]'
_TEX_ENCODINGS = ("application/x-tex", "tex", "latex", "application/x-latex", "text/x-tex")


def strip_sentinels(text: str) -> str:
    """Remove sentinel characters that were already in the page."""
    for s in SENTINELS:
        if s in text:
            text = text.replace(s, "")
    return text


def wrap_math(tex: str, display: bool) -> str:
    """Wrap LaTeX in the sentinels of its kind; sentinels inside the TeX are dropped."""
    # leading \require{..} and macro definitions go; a formula of nothing else (a hidden preamble) is dropped
    tex = strip_macro_defs(strip_sentinels(tex).strip())
    if not tex:
        return ""
    # Inline math is padded: resiliparse may drop the whitespace between a replaced node and its neighbour text;
    # the text pass removes the padding again before punctuation.
    return f"{DISPLAY_OPEN}{tex}{DISPLAY_CLOSE}" if display else f" {INLINE_OPEN}{tex}{INLINE_CLOSE} "


def replace_node(tree, node, text: str) -> None:
    """Replace `node` by a text node (or remove it when `text` is empty)."""
    parent = node.parent
    if parent is None:
        return
    if text:
        parent.replace_child(tree.create_text_node(text), node)
    else:
        parent.remove_child(node)


def _classes(node) -> str:
    return node.class_name or ""


def _rewrite_scripts(tree, body) -> None:
    for node in body.query_selector_all('script[type^="math/"]').values():
        kind = (node.getattr("type") or "").lower()
        tex = (node.text or "").strip()
        display = "mode=display" in kind
        if "asciimath" in kind:
            # AsciiMath is kept as written, marked so a reader can tell it from TeX.
            replace_node(tree, node, wrap_math(f"\\text{{asciimath:}}`{tex}`", display) if tex else "")
        elif "mml" in kind or "mathml" in kind:
            replace_node(tree, node, wrap_math(_mathml_source_tex(tex), display))
        else:
            replace_node(tree, node, wrap_math(tex, display))


def _mathml_source_tex(source: str) -> str:
    """TeX for MathML kept as source text (`<script type="math/mml">`): parsed, then converted."""
    from resiliparse.parse.html import HTMLTree

    inner = HTMLTree.parse(f"<html><body>{source[:200_000]}</body></html>")
    if inner.body is None:
        return ""
    math = inner.body.query_selector(_MATH_TAGS)
    return _math_tex(math) if math is not None else " ".join((inner.body.text or "").split())


def _tex_annotation(node) -> str | None:
    for ann in node.query_selector_all("annotation").values():
        if (ann.getattr("encoding") or "").lower() in _TEX_ENCODINGS:
            return ann.text or ""
    return None


def _rewrite_katex(tree, body) -> None:
    for node in body.query_selector_all(".katex").values():
        tex = _tex_annotation(node)
        if tex is None:  # rendered without its MathML: keep the visible text rather than lose the formula
            visible = node.query_selector(".katex-html")
            text = " ".join(((visible or node).text or "").split())
            replace_node(tree, node, f" {text} " if text else "")
            continue
        parent = node.parent
        display = parent is not None and "katex-display" in _classes(parent)
        replace_node(tree, node, wrap_math(tex, display))


def _rewrite_wikipedia(tree, body) -> None:
    for node in body.query_selector_all(".mwe-math-element").values():
        math = node.query_selector("math")
        tex = _tex_annotation(math) if math is not None else None
        if not tex and math is not None:
            tex = math.getattr("alttext")
        if not tex:
            img = node.query_selector("img")
            tex = img.getattr("alt") if img is not None else None
        if tex is None:
            continue
        display = (
            node.query_selector(".mwe-math-mathml-display, .mwe-math-fallback-image-display") is not None
        )
        replace_node(tree, node, wrap_math(tex, display))


def _math_tex(node) -> str:
    """TeX of a <math> element: its TeX annotation, else alttext, else the MathML converter."""
    tex = _tex_annotation(node)
    if not tex:
        tex = node.getattr("alttext")
    if not tex:
        tex = mathml_to_latex(node)
    # conversion gave up (time/depth) or found no MathML: keep what a reader sees
    if tex is None or not tex.strip():
        tex = " ".join((node.text or "").split())
    return tex


# Rendered MathJax output inside a container: glyphs, not source.
_MJX_OUTPUT = "mjx-math, mjx-assistive-mml, svg, img"
# Text that carries its own TeX delimiters is left to the text pass, which reads them (a `$` anywhere too).
_DELIMITED = ("\\(", "\\[")
# Raw TeX in a `.math` element: a command (`\frac`), a braced script or a script on a letter (`k_n`) ...
_TEX_MARK = re.compile(r"\\[A-Za-z]{2,}|[_^]\{|[A-Za-z0-9)}][_^][A-Za-z0-9{]")
# ... and, once commands with their first argument are taken out, no run of words (prose).
_TEX_CMD = re.compile(r"\\[A-Za-z]+\*?(?:\{[^{}]{0,200}\})?")
_WORDS = re.compile(r"(?<![A-Za-z])[A-Za-z]{3,}[,;.]?\s+[A-Za-z]{2,}\s+[A-Za-z]{2,}")


def _raw_tex(node) -> str | None:
    """The element's text when it is undelimited TeX source a renderer would typeset, else None."""
    text = node.text or ""
    tex = text.strip()
    if not tex or tex.startswith(_DELIMITED) or "$" in tex or any(s in tex for s in SENTINELS):
        return None
    return tex


def _rewrite_mjx(tree, body) -> None:
    """MathJax v3 output saved after rendering: the assistive MathML inside mjx-container is the source.

    A container without MathML and without rendered output holds its TeX source as text (a page that fills
    containers itself and typesets them later): it is math, inline or display by its `display` attribute.
    """
    for node in body.query_selector_all("mjx-container").values():
        math = node.query_selector("math")
        container_display = (node.getattr("display") or "").lower() in ("true", "block")
        if math is None:
            tex = _raw_tex(node) if node.query_selector(_MJX_OUTPUT) is None else None
            if tex is not None:
                replace_node(tree, node, wrap_math(tex, container_display))
            continue
        display = container_display or (math.getattr("display") or "").lower() == "block"
        replace_node(tree, node, wrap_math(_math_tex(math), display))


def _rewrite_math_class(tree, body) -> None:
    """Raw TeX in an element of class `math` (the element a KaTeX/MathJax page script typesets), no delimiters.

    Only on pages that load a renderer, only elements holding nothing but text that reads as TeX, not prose
    (`<p class="math">1 yr = 525600 min</p>` stays text). Display for block elements and class `display`,
    inline for `<span>` and class `inline`. Delimited text (pandoc's `<span class="math">\\(..\\)</span>`, Sphinx)
    is left to the text pass, which reads the delimiters.
    """
    for node in body.query_selector_all(".math").values():
        if node.first_element_child is not None or node.closest("pre, code") is not None:
            continue
        tex = _raw_tex(node)
        if tex is None or _TEX_MARK.search(tex) is None or _WORDS.search(_TEX_CMD.sub(" ", tex)):
            continue
        classes = _classes(node).split()
        display = "display" in classes or (node.tag != "span" and "inline" not in classes)
        replace_node(tree, node, wrap_math(tex, display))


_DOLLAR_SPAN = re.compile(r"^(\$\$?)([^$]+)\1$")


def _rewrite_dollar_class(tree, body) -> None:
    """An element of class `math`/`math-inline`/`math-display` whose whole text is one `$..$` / `$$..$$` span.

    The class says it is math whatever the page loads (a renderer added by a script we cannot see), so it is
    not left to the text pass, which reads `$` as math only on renderer pages or for unmistakable TeX.
    """
    for node in body.query_selector_all(".math, .math-inline, .math-display").values():
        if node.first_element_child is not None or node.closest("pre, code") is not None:
            continue
        m = _DOLLAR_SPAN.match((node.text or "").strip())
        if m is None or any(s in m.group(2) for s in SENTINELS):
            continue
        display = m.group(1) == "$$" or "math-display" in _classes(node).split()
        replace_node(tree, node, wrap_math(m.group(2), display))


def _rewrite_mathml(tree, body) -> None:
    for node in body.query_selector_all(_MATH_TAGS).values():
        display = (node.getattr("display") or "").lower() == "block"
        replace_node(tree, node, wrap_math(_math_tex(node), display))


def _rewrite_scripts_marks(tree, body) -> None:
    """<sup>/<sub> outside math as ^{..}/_{..}; footnote markers (links, [1]) stay as they are."""
    for node in body.query_selector_all("sup, sub").values():
        text = " ".join((node.text or "").split())
        if not text or len(text) > 20 or node.query_selector("a") is not None or text.startswith("["):
            continue
        if node.closest("pre, code") is not None:  # code is kept verbatim: x<sup>2</sup> stays x2
            continue
        mark = "^" if node.tag == "sup" else "_"
        replace_node(tree, node, f"{mark}{{{text}}}")


def _set_text(tree, node, text: str) -> None:
    # One text node replacing the children: resiliparse's main-content pass drops a separate text node that
    # holds only punctuation (a lone sentinel or "## "), so markers must share a node with the text.
    node.replace_children(tree.create_text_node(text))


_PRE_BLOCKS = frozenset(
    ("div", "p", "li", "tr", "table", "ul", "ol", "section", "h1", "h2", "h3", "h4", "h5", "h6")
)


_PRE_LINE_ENDS = ", ".join(("br", *sorted(_PRE_BLOCKS)))


def _pre_text(node, depth: int = 0) -> str:
    """Text of a <pre> with its line structure: `<br>` and block children (one `<div>` per line) end a line.

    Plain textContent would join such lines into one (highlighters write each line as its own element).
    """
    if node.type == NodeType.TEXT:
        return node.text or ""
    if node.tag == "br":
        return "\n"
    if node.type != NodeType.ELEMENT:  # comments
        return ""
    if depth > 50:
        return node.text or ""
    inner = "".join(_pre_text(child, depth + 1) for child in node.child_nodes)
    if depth and node.tag in _PRE_BLOCKS and inner and not inner.endswith("\n"):
        inner += "\n"
    return inner


def _protect_code(tree, body) -> None:
    """Mark <pre> and inline <code> so the text pass keeps them verbatim (no `$` handling)."""
    for node in body.query_selector_all("pre").values():
        # walked only where a line may end in markup: the walk costs a Python object per node of a highlighted block
        text = _pre_text(node) if node.query_selector(_PRE_LINE_ENDS) is not None else (node.text or "")
        if text.strip():
            _set_text(tree, node, f"{PRE_OPEN}{text}{PRE_CLOSE}")
    for node in body.query_selector_all("code").values():
        text = node.text or ""
        if text.strip() and node.closest("pre") is None:
            _set_text(tree, node, f"{CODE_OPEN}{text}{CODE_CLOSE}")


def _mark_headings(tree, body) -> None:
    """Markdown heading markers, so section structure survives plain-text extraction."""
    for node in body.query_selector_all("h1, h2, h3, h4, h5, h6").values():
        text = " ".join((node.text or "").split())
        if text and len(text) < 300:
            _set_text(tree, node, "#" * int(node.tag[1]) + " " + text)


def rewrite_tree(tree, headings: bool = True, tex_page: bool = False) -> None:
    """Rewrite the math (and code, tables, images) of a resiliparse HTMLTree in place.

    `headings=False` (for trafilatura) leaves headings alone (it marks them itself) and keeps other scripts.
    `tex_page`: the page loads a TeX renderer (`curate.extract_text.has_tex_renderer`), so raw TeX in `.math`
    elements is math.
    """
    body = tree.body
    # One query first: most pages of a crawl hold no math markup and skip the per-construct queries.
    if (
        body.query_selector(_MAYBE_MATH_MARKUP) is not None
        and body.query_selector(_ANY_MATH_MARKUP) is not None
    ):
        _rewrite_scripts(tree, body)
        _rewrite_katex(tree, body)
        _rewrite_wikipedia(tree, body)
        _rewrite_mjx(tree, body)
        for node in body.query_selector_all(_RENDERED).values():
            replace_node(tree, node, "")
        _rewrite_mathml(tree, body)
        _rewrite_dollar_class(tree, body)
        if tex_page:
            _rewrite_math_class(tree, body)
    if headings:
        # Scripts left now are code, not math: drop them so element text (tables, headings) never holds them.
        # Not for trafilatura: its content scoring shifts on some pages when they go (it drops them itself).
        for node in body.query_selector_all("script, style, template").values():
            replace_node(tree, node, "")
    rewrite_images(tree, body, wrap_math, replace_node)
    number_lists(tree, body, as_divs=headings)
    _rewrite_scripts_marks(tree, body)
    _protect_code(tree, body)
    if headings:
        _mark_headings(tree, body)
    rewrite_tables(tree, body)
