"""MathML -> LaTeX, for <math> elements that carry neither a TeX annotation nor alttext.

Follows the conventions of the widely used mmltex XSLT (the converter behind common extraction gold sets):
scripts as `{base}^{sup}`, non-accent `mover` as `\\stackrel`, bracket pairs in a row as `\\left(..\\right)`,
`linethickness=0` fractions as `\\genfrac`. Each element gets a node budget, a depth cap and a time budget; past any of them the
converter gives up and the caller falls back to the element's plain text.
"""

from __future__ import annotations

import time

from curate.mathml_tables import (
    _ACCENTS,
    _ALIGN,
    _BIG_OPS,
    _CHARS,
    _CLOSE,
    _FUNCS,
    _OPEN,
    _VARIANTS,
)

MAX_DEPTH = 200
MAX_NODES = 20_000  # deterministic cap (same output on every run); the time budget is the last resort
DEFAULT_BUDGET_S = 0.5


class ConversionAborted(Exception):
    """The element took longer than its budget or nested deeper than MAX_DEPTH."""


def chars_to_tex(text: str) -> str:
    """Map Unicode math characters to TeX commands; other characters are kept."""
    return "".join(_CHARS.get(c, c) for c in text)


def _tag(node) -> str:
    tag = (node.tag or "").lower()
    return tag.rsplit(":", 1)[-1]


def _elements(node) -> list:
    # Sibling walk, not `child_nodes`: iterating resiliparse collections is quadratic in their length.
    out = []
    child = node.first_element_child
    while child is not None:
        out.append(child)
        child = child.next_element_sibling
    return out


def _norm(node) -> str:
    return " ".join((node.text or "").split())


def _unwrap_fence(node):
    """MathJax wraps stretchy fences in an mrow of their own (TeXAtom-OPEN/CLOSE): see the mo inside."""
    while _tag(node) == "mrow":
        kids = _elements(node)
        if len(kids) != 1 or _tag(kids[0]) not in ("mo", "mrow"):
            break
        node = kids[0]
    return node


def _fence(t: str) -> str:
    return "\\" + t if t in ("{", "}") else t


def _scripted(tag: str, base: str, scripts: list[str]) -> str:
    scripts = scripts + [""] * (2 - len(scripts))
    if tag == "msup":
        return f"{{{base}}}^{{{scripts[0]}}}"
    if tag == "msub":
        return f"{{{base}}}_{{{scripts[0]}}}"
    return f"{{{base}}}_{{{scripts[0]}}}^{{{scripts[1]}}}"


class _Converter:
    def __init__(self, budget_s: float):
        self.deadline = time.monotonic() + budget_s
        self.nodes = 0

    def conv(self, node, depth: int = 0) -> str:
        self.nodes += 1
        if depth > MAX_DEPTH or self.nodes > MAX_NODES or time.monotonic() > self.deadline:
            raise ConversionAborted()
        tag = _tag(node)
        handler = getattr(self, "_" + tag.replace("-", "_"), None)
        if handler is not None:
            return handler(node, depth + 1)
        return self.row(_elements(node), depth + 1)

    def row(self, kids: list, depth: int) -> str:
        """A row of siblings; matched bracket pairs become \\left..\\right, also around a script's base."""
        out: list[str | None] = []
        stack: list[tuple[int, str]] = []  # (index in out, opening bracket) of unmatched openings
        for kid in kids:
            kid = _unwrap_fence(kid)
            tag = _tag(kid)
            t = _norm(kid) if tag == "mo" else ""
            if t in _OPEN:
                stack.append((len(out), t))
                out.append(None)
                continue
            if t in _CLOSE and stack and _OPEN[stack[-1][1]] == t:
                j, o = stack.pop()
                out[j] = "\\left" + _fence(o)
                out.append("\\right" + _fence(t))
                continue
            if tag in ("msup", "msub", "msubsup") and stack:
                parts = _elements(kid)
                base = _unwrap_fence(parts[0]) if parts else None
                if base is not None and _tag(base) == "mo" and _norm(base) == _OPEN[stack[-1][1]]:
                    j, o = stack.pop()
                    group = (
                        "\\left"
                        + _fence(o)
                        + "".join(x or "" for x in out[j + 1 :])
                        + "\\right"
                        + _fence(_norm(base))
                    )
                    del out[j:]
                    scripts = [self.conv(p, depth) for p in parts[1:3]]
                    out.append(_scripted(tag, group, scripts))
                    continue
            out.append(self.conv(kid, depth))
        for j, o in stack:
            out[j] = _fence(o)
        return "".join(x or "" for x in out)

    def _args(self, node, depth: int, n: int) -> list[str]:
        kids = _elements(node)
        args = [self.conv(k, depth) for k in kids[:n]]
        return args + [""] * (n - len(args))

    def _mi(self, node, depth):
        t = _norm(node)
        variant = node.getattr("mathvariant")
        if variant in _VARIANTS and t:
            return f"{_VARIANTS[variant]}{{{chars_to_tex(t)}}}"
        if len(t) > 1:
            return f"\\{t} " if t in _FUNCS else f"\\mathrm{{{chars_to_tex(t)}}}"
        return chars_to_tex(t)

    def _mo(self, node, depth):
        t = _norm(node)
        return f"\\{t} " if t in _FUNCS else chars_to_tex(t)

    def _mn(self, node, depth):
        t = _norm(node)
        variant = node.getattr("mathvariant")
        if variant in _VARIANTS and variant != "normal" and t:
            return f"{_VARIANTS[variant]}{{{chars_to_tex(t)}}}"
        return chars_to_tex(t)

    def _mtext(self, node, depth):
        t = node.text or ""
        return f"\\text{{{t}}}" if t.strip() else " "

    def _ms(self, node, depth):
        return f'\\text{{"{node.text or ""}"}}'

    def _mspace(self, node, depth):
        return " "

    def _msup(self, node, depth):
        base, sup = self._args(node, depth, 2)
        return _scripted("msup", base, [sup])

    def _msub(self, node, depth):
        base, sub = self._args(node, depth, 2)
        return _scripted("msub", base, [sub])

    def _msubsup(self, node, depth):
        base, sub, sup = self._args(node, depth, 3)
        return _scripted("msubsup", base, [sub, sup])

    def _mfrac(self, node, depth):
        num, den = self._args(node, depth, 2)
        if (node.getattr("linethickness") or "").strip() in ("0", "0px", "0pt", "0em"):
            return f"\\genfrac{{}}{{}}{{0}}{{}}{{{num}}}{{{den}}}"
        if (node.getattr("bevelled") or "") == "true":
            return f"{num}/{den}"
        return f"\\frac{{{num}}}{{{den}}}"

    def _msqrt(self, node, depth):
        return f"\\sqrt{{{self.row(_elements(node), depth)}}}"

    def _mroot(self, node, depth):
        base, index = self._args(node, depth, 2)
        return f"\\sqrt[{index}]{{{base}}}"

    def _is_big_op(self, node) -> bool:
        return _tag(node) in ("mo", "mi") and _norm(node) in _BIG_OPS

    def _mover(self, node, depth):
        kids = _elements(node)
        base, over = self._args(node, depth, 2)
        accent_char = _norm(kids[1]) if len(kids) > 1 else ""
        accent = (node.getattr("accent") or "").strip().lower()
        # The operator dictionary makes these characters accents in an <mo> (MathJax writes \dot{x} as
        # <mover><mi>x</mi><mo>˙</mo></mover>, no attribute): accent unless the page says accent="false".
        is_accent = accent == "true" or (accent != "false" and len(kids) > 1 and _tag(kids[1]) == "mo")
        if is_accent and accent_char in _ACCENTS:
            return f"{_ACCENTS[accent_char]}{{{base}}}"
        if kids and self._is_big_op(kids[0]):
            return f"{base}^{{{over}}}"
        return f"\\stackrel{{{over}}}{{{base}}}"

    def _munder(self, node, depth):
        kids = _elements(node)
        base, under = self._args(node, depth, 2)
        if kids and self._is_big_op(kids[0]):
            return f"{base}_{{{under}}}"
        if len(kids) > 1 and _norm(kids[1]) in ("_", "̲", "‾"):
            return f"\\underline{{{base}}}"
        return f"\\underset{{{under}}}{{{base}}}"

    def _munderover(self, node, depth):
        kids = _elements(node)
        base, under, over = self._args(node, depth, 3)
        if kids and self._is_big_op(kids[0]):
            return f"{base}_{{{under}}}^{{{over}}}"
        return f"\\overset{{{over}}}{{\\underset{{{under}}}{{{base}}}}}"

    def _mfenced(self, node, depth):
        opening = node.getattr("open") if node.hasattr("open") else "("
        closing = node.getattr("close") if node.hasattr("close") else ")"
        seps = (node.getattr("separators") if node.hasattr("separators") else ",") or ""
        seps = "".join(seps.split())
        parts = []
        for i, kid in enumerate(_elements(node)):
            if i and seps:
                parts.append(seps[min(i - 1, len(seps) - 1)])
            parts.append(self.conv(kid, depth))
        o = "." if not opening else ("\\{" if opening == "{" else chars_to_tex(opening))
        c = "." if not closing else ("\\}" if closing == "}" else chars_to_tex(closing))
        return f"\\left{o}{''.join(parts)}\\right{c}"

    def _menclose(self, node, depth):
        inner = self.row(_elements(node), depth)
        notation = (node.getattr("notation") or "longdiv").split()
        if "radical" in notation:
            return f"\\sqrt{{{inner}}}"
        if "top" in notation or "overline" in notation:
            return f"\\overline{{{inner}}}"
        if "bottom" in notation:
            return f"\\underline{{{inner}}}"
        if "updiagonalstrike" in notation or "downdiagonalstrike" in notation:
            return f"\\cancel{{{inner}}}"
        return f"\\boxed{{{inner}}}"

    def _mtable(self, node, depth):
        rows = [r for r in _elements(node) if _tag(r) in ("mtr", "mlabeledtr")]
        cells = []
        for r in rows:
            tds = [c for c in _elements(r) if _tag(c) == "mtd"]
            if _tag(r) == "mlabeledtr":
                tds = tds[1:]
            cells.append([self.row(_elements(td), depth + 1) for td in tds])
        ncols = max((len(r) for r in cells), default=1)
        aligns = [_ALIGN.get(a, "c") for a in (node.getattr("columnalign") or "").split()]
        spec = "".join((aligns + [aligns[-1] if aligns else "c"] * ncols)[:ncols])
        body = "\\\\ ".join("& ".join(r) for r in cells)
        return f"\\begin{{array}}{{{spec}}}{body}\\end{{array}}"

    def _semantics(self, node, depth):
        kids = _elements(node)
        return self.conv(kids[0], depth) if kids else ""

    def _mphantom(self, node, depth):
        return f"\\phantom{{{self.row(_elements(node), depth)}}}"

    def _mmultiscripts(self, node, depth):
        kids = [k for k in _elements(node) if _tag(k) != "mprescripts"]
        base = self.conv(kids[0], depth) if kids else ""
        scripts = [self.conv(k, depth) if _tag(k) != "none" else "" for k in kids[1:3]]
        sub, sup = (scripts + ["", ""])[:2]
        return f"{{{base}}}" + (f"_{{{sub}}}" if sub else "") + (f"^{{{sup}}}" if sup else "")

    def _annotation(self, node, depth):
        return ""

    _annotation_xml = _annotation
    _none = _annotation


def mathml_to_latex(node, budget_s: float = DEFAULT_BUDGET_S) -> str | None:
    """Convert a resiliparse <math> element to LaTeX; None when it ran past `budget_s` or MAX_DEPTH."""
    try:
        tex = _Converter(budget_s).row(_elements(node), 1)
    except (ConversionAborted, RecursionError):
        return None
    return " ".join(tex.split())
