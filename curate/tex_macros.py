"""Leading macro definitions and `\\require{..}` taken off a formula: what follows them is the formula.

MathJax pages put `\\require{AMScd}` or `\\newcommand{\\R}{\\mathbb{R}}` at the start of a formula that also
typesets something; only a formula that is nothing but definitions (a hidden preamble) is dropped. A definition
whose braces do not close leaves the formula as "" (as a preamble would be), never a half-read definition.
"""

from __future__ import annotations

import re

# Definition command -> how many mandatory arguments follow it (a bare `\name` counts as one).
_ARGS = {
    "\\newcommand": 2,
    "\\renewcommand": 2,
    "\\providecommand": 2,
    "\\DeclareMathOperator": 2,
    "\\definecolor": 3,
    "\\require": 1,
    "\\def": 2,  # \def\name#1#2{body}: the name, then the body (parameters skipped)
}
_LEADING = re.compile(
    r"\s*(\\(?:newcommand|renewcommand|providecommand|DeclareMathOperator|definecolor|require|def))"
    r"(?![A-Za-z])\*?"
)
_CSNAME = re.compile(r"\s*\\(?:[A-Za-z]+|.)")
_PARAMS = re.compile(r"\s*(?:#\d)+")
_COMMENT = re.compile(r"\s*%[^\n]*")


def _group(tex: str, i: int, opening: str = "{", closing: str = "}") -> int | None:
    """Index after the balanced group opening at `tex[i]` (whitespace before it skipped), else None."""
    while i < len(tex) and tex[i].isspace():
        i += 1
    if i >= len(tex) or tex[i] != opening:
        return None
    depth = 0
    while i < len(tex):
        c = tex[i]
        if c == "\\":
            i += 2
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _skip_definition(tex: str, i: int, command: str) -> int | None:
    for n in range(_ARGS[command]):
        while (end := _group(tex, i, "[", "]")) is not None:  # options: [2], [default]
            i = end
        if command == "\\def" and n == 1 and (m := _PARAMS.match(tex, i)) is not None:
            i = m.end()
        end = _group(tex, i)
        if end is None and n == 0 and command != "\\require":
            m = _CSNAME.match(tex, i)
            end = m.end() if m is not None else None
        if end is None:
            return None
        i = end
    return i


def strip_macro_defs(tex: str) -> str:
    """`tex` without its leading definitions and `\\require{..}`s; "" when nothing else is left."""
    if not tex.lstrip().startswith("\\"):
        return tex
    i = 0
    while (m := _LEADING.match(tex, i)) is not None:
        end = _skip_definition(tex, m.end(), m.group(1))
        if end is None:
            return ""
        i = end
        while (
            c := _COMMENT.match(tex, i)
        ) is not None:  # `\newcommand{..}{..} % arrow`: the comment goes too
            i = c.end()
    return tex[i:].strip() if i else tex
