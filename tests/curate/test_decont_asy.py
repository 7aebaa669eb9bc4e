"""An `[asy]` without its closing tag hides its own paragraph only, not the rest of the text: decont's normalisation
and the dedup signer's token count (the number guard's size) strip drawings alike."""

from __future__ import annotations

from curate.dedup_text import normalize_math_text
from curate.minhash import _tokens_outside_drawings
from curate.minhash_tokens import batch_token_kinds

PAGE = (
    "Tip: in AoPS posts you start a drawing with [asy] and the forum renders it.\n\n"
    "The volume of the cylinder shown is $45\\pi$ cubic cm. What is the height of the cylinder?"
)


def test_unclosed_asy_removes_its_paragraph_only():
    text = normalize_math_text(PAGE)
    assert "the forum renders" not in text
    assert "volume of the cylinder shown is" in text


def test_closed_asy_still_removed_whole_and_unclosed_at_end_goes_to_the_end():
    closed = "Find $x$.\n[asy]\nsize(100);\n\ndraw((0,0)--(1,1));\n[/asy]\nThen the rest."
    assert "draw" not in normalize_math_text(closed) and "the rest" in normalize_math_text(closed)
    assert "draw" not in normalize_math_text("Look:\n[asy] size(100); draw((0,0)--(1,1));")
    # an unclosed tag does not swallow a later drawing's closing tag and the text between
    two = "Start [asy] in passing.\n\nKept words here. [asy]draw(a);[/asy] tail"
    out = normalize_math_text(two)
    assert "kept words here" in out and "draw" not in out and "tail" in out


def test_dedup_guard_counts_the_tokens_after_an_unclosed_asy():
    counts = batch_token_kinds([PAGE])[1]
    # only "[asy] and the forum renders it" (6 tokens) is left out, not the problem after the blank line
    assert counts[0] - _tokens_outside_drawings([PAGE], counts)[0] == 6
