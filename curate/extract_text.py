"""The text pass after extraction: code kept verbatim, TeX left in page text delimited, lone `$` escaped.

Page text may hold TeX that a client-side renderer would typeset: `\\(..\\)`, `\\[..\\]`, `$$..$$`, `$..$`.
`$`-delimited spans are read as math only when they follow pandoc's rule (no space inside the delimiters, no digit
right after the closing `$`), do not read as prose or an amount, and either the page loads a TeX renderer
(MathJax, KaTeX) or the span holds unmistakable TeX (a command like `\\frac`, a script like `x_{n}`);
every other `$` is written `\\$`, so `$60 million` stays text and can never pair up with another `$` downstream.
"""

from __future__ import annotations

import re

from curate.dom_rewrite import (
    CODE_CLOSE,
    CODE_OPEN,
    DISPLAY_CLOSE,
    DISPLAY_OPEN,
    INLINE_CLOSE,
    INLINE_OPEN,
    PRE_CLOSE,
    PRE_OPEN,
)
from curate.tex_macros import strip_macro_defs

_CODE_SPAN = re.compile(f"({PRE_OPEN}[^{PRE_CLOSE}]*{PRE_CLOSE}|{CODE_OPEN}[^{CODE_CLOSE}]*{CODE_CLOSE})")
_MATH_SPAN = re.compile(
    f"({INLINE_OPEN}[^{INLINE_CLOSE}]*{INLINE_CLOSE}|{DISPLAY_OPEN}[^{DISPLAY_CLOSE}]*{DISPLAY_CLOSE})"
)
_PAD_BEFORE_PUNCT = re.compile(f"({INLINE_CLOSE}) ([,.;:!?)\\]])")
_PAD_AFTER_BRACKET = re.compile(f"([(\\[]) ({INLINE_OPEN})")
_STRAY = re.compile(
    f"[{CODE_OPEN}{CODE_CLOSE}{PRE_OPEN}{PRE_CLOSE}{INLINE_OPEN}{INLINE_CLOSE}{DISPLAY_OPEN}{DISPLAY_CLOSE}]"
)
# Bounded lengths keep every alternative linear: an unclosed delimiter scans at most a few thousand chars.
# The leading lookahead lets the regex engine skip to candidate characters (5x faster than trying every
# alternative, with its lookbehinds, at every position).
_PAGE_TEX_ALTS = (
    r"(?<!\\)\\\[(?P<d1>.{1,8000}?)(?<!\\)\\\]"
    r"|(?<!\\)\\\((?P<i1>.{1,3000}?)(?<!\\)\\\)"
    r"|\\begin\{(?P<env>equation|align|alignat|aligned|gather|gathered|multline|eqnarray|displaymath|cases|"
    r"array|matrix|pmatrix|bmatrix|vmatrix)(?P<star>\*?)\}"
    r"(?P<d3>.{1,8000}?)\\end\{(?P=env)(?P=star)\}"
    r"|\[(?P<bb>itex|imath|tex|math|latex)\](?P<bbtex>.{1,8000}?)\[/(?P=bb)\]"
    r"|(?<![\\$])\$\$(?P<d2>[^$]{1,8000}?)\$\$"
    r"|(?<![\\$\w])\$(?P<i2>[^\s$](?:[^$\n]{0,1000}?[^\s$\\])?)\$(?![\d$])"
    r"|(?P<lone>(?<!\\)\$)"
)
_PAGE_TEX = re.compile(r"(?=[\\$\[])(?:" + _PAGE_TEX_ALTS + ")", re.S | re.I)
# On a TeX page, a `$..$` span with whitespace inside its delimiters (`$ \vert x \vert $`, which MathJax
# typesets) is tried before a lone `$`; it is math only when it holds strong TeX, else its `$` is a lone one.
_TEX_PAGE_TEX = re.compile(
    r"(?=[\\$\[])(?:"
    + _PAGE_TEX_ALTS.replace(r"|(?P<lone>", r"|(?<![\\$\w])\$(?P<i3>[^$\n]{1,1000}?)\$(?![\d$])|(?P<lone>")
    + ")",
    re.S | re.I,
)
_CURRENCY = re.compile(
    r"^\d[\d,.]*\s*(?:[kKmMbB]n?|million|billion|thousand|USD|dollars|per|each|for|and|or|to)\b", re.I
)
_STRONG_TEX = re.compile(r"\\[A-Za-z]{2,}|[_^]\{|[A-Za-z\)][_^][A-Za-z0-9]")
_TEX_GROUP = re.compile(r"\\[A-Za-z]+\*?(?:\{[^{}]{0,200}\})?")
_PROSE = re.compile(r"[\"]|(?<![A-Za-z])[A-Za-z]{3,}[,;.]?\s+[A-Za-z]{2,}\s+[A-Za-z]{2,}")
_RENDERER_MARKS = ("mathjax", "katex", "rendermathinelement", "math/tex", "asciimath")


def has_tex_renderer(tree) -> bool:
    """True when the page loads or configures a client-side TeX renderer (MathJax, KaTeX) or has TeX scripts."""
    # Looks at <script>/<link> only: lower-casing and scanning whole pages costs more than the extraction.
    # Their attributes and inline code are joined and lower-cased once ("\n" between parts, which no mark holds).
    doc = tree.document
    if doc is None:
        return False
    parts = []
    for node in doc.query_selector_all("script, link[href]").values():
        parts.append(node.getattr("src") or "")
        parts.append(node.getattr("href") or "")
        parts.append(node.getattr("type") or "")
        if node.tag == "script" and not node.hasattr("src"):
            parts.append((node.text or "")[:20_000])
    seen = "\n".join(parts).lower()
    return any(mark in seen for mark in _RENDERER_MARKS)


def _inline(tex: str) -> str:
    tex = strip_macro_defs(" ".join(tex.split()))
    return f"${tex}$" if tex else ""


def _display(tex: str) -> str:
    tex = strip_macro_defs(tex.strip())
    return f"\n$$\n{tex}\n$$\n" if tex else ""


def _dollar_repl(m: re.Match, renderer: bool) -> str:
    tex = m.group("d2") if m.group("d2") is not None else m.group("i2")
    if tex is None:
        return "\\$"
    # Without a renderer on the page only spans with unmistakable TeX (commands, braced scripts) count.
    plausible = renderer or _STRONG_TEX.search(tex) is not None
    if m.group("d2") is not None:
        return _display(tex) if plausible else "\\$\\$" + _escape_dollars(tex) + "\\$\\$"
    if plausible and not _CURRENCY.match(tex) and not _PROSE.search(_TEX_GROUP.sub(" ", tex)):
        return _inline(tex)
    return "\\$" + _escape_dollars(tex) + "\\$"


def _escape_dollars(text: str) -> str:
    return re.sub(r"(?<!\\)\$", r"\\$", text)


def _page_tex_repl(m: re.Match, renderer: bool) -> str:
    if m.group("d1") is not None:
        return _display(m.group("d1"))
    if m.group("i1") is not None:
        return _inline(m.group("i1"))
    if m.group("d3") is not None:
        return _display(m.group(0))
    if m.group("bbtex") is not None:  # forum BBCode math: [itex]/[imath] inline, [tex]/[math]/[latex] display
        tex = m.group("bbtex")
        return _inline(tex) if m.group("bb").lower() in ("itex", "imath") else _display(tex)
    return _dollar_repl(m, renderer)


def _plain_text(text: str, tex_page: bool) -> str:
    """Page text: TeX delimiters normalised, `$` read as math where plausible, escaped elsewhere.

    One regex, leftmost match first, so an environment inside `$$..$$` is part of that span.
    """
    if "$" not in text and "\\" not in text and "[" not in text:
        return text
    if not tex_page:
        return _PAGE_TEX.sub(lambda m: _page_tex_repl(m, tex_page), text)
    out = []
    pos = 0
    while (m := _TEX_PAGE_TEX.search(text, pos)) is not None:
        out.append(text[pos : m.start()])
        spaced = m.group("i3")
        if spaced is None:
            out.append(_page_tex_repl(m, tex_page))
            pos = m.end()
        elif _spaced_tex(spaced):
            out.append(_inline(spaced))
            pos = m.end()
        else:  # not math: its first `$` is a lone one, and the text after it is read again
            out.append("\\$")
            pos = m.start() + 1
    out.append(text[pos:])
    return "".join(out)


def _spaced_tex(tex: str) -> bool:
    """A `$..$` span with edge whitespace on a TeX page: math when it holds strong TeX and reads as no prose."""
    tex = tex.strip()
    return (
        bool(tex)
        and not tex.endswith("\\")
        and _STRONG_TEX.search(tex) is not None
        and not _CURRENCY.match(tex)
        and not _PROSE.search(_TEX_GROUP.sub(" ", tex))
    )


def _math_and_text(text: str, tex_page: bool) -> str:
    parts = _MATH_SPAN.split(text)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(_plain_text(part, tex_page))
        elif part[0] == INLINE_OPEN:
            # the marks anchor the padding clean-up below; _STRAY removes them
            out.append(INLINE_OPEN + _inline(part[1:-1]) + INLINE_CLOSE)
        else:
            out.append(_display(part[1:-1]))
    return "".join(out)


def finalize_text(raw: str, tex_page: bool = True) -> str:
    """Turn extracted text with sentinels into the final text: code fenced, math in `$`/`$$`."""
    parts = _CODE_SPAN.split(raw)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(_math_and_text(part, tex_page))
        elif part[0] == PRE_OPEN:
            body = _STRAY.sub("", part[1:-1]).strip("\n")
            out.append(f"\n```\n{body}\n```\n" if body.strip() else "")
        else:
            body = _STRAY.sub("", part[1:-1])
            out.append(f"`{body}`" if body.strip() else body)
    text = "".join(out)
    text = _PAD_BEFORE_PUNCT.sub(r"\1\2", text)
    text = _PAD_AFTER_BRACKET.sub(r"\1\2", text)
    text = _STRAY.sub("", text)
    # trailing blanks of each line (a regex `[ \t]+\n` retries every blank of a long run: quadratic)
    text = "\n".join(line.rstrip(" \t") for line in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()
