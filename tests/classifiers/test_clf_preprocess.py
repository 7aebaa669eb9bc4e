"""Exact-string tests of the classifier preprocessing (the same function runs at training and scoring time)."""

from __future__ import annotations

import random

from classifiers.preprocess import (
    PREFIX_CHARS_PER_TOKEN,
    SCORE_WINDOWS,
    chunk_document,
    normalize,
    normalize_line,
    normalize_lines,
    preprocess,
    preprocess_lines,
)


def test_normalize_nfkc_lowercase_digits_and_symbols():
    assert normalize_line("Ｆｕｌｌ Width ① and CAPS") == ["full", "width", "<NUM>", "and", "caps"]
    assert normalize_line("x2 + 3.14 = y_1") == ["x", "<NUM>", "<NUM>", "<NUM>", "y", "<NUM>"]
    assert normalize_line("don't stop—now!") == ["don", "t", "stop", "now"]


def test_formula_parts_become_their_own_tokens():
    assert normalize_line(r"Let $\frac{1}{2}$ be $x^2 = y_1$") == [
        "let",
        "$frac",
        "$<NUM>",
        "$<NUM>",
        "be",
        "$x",
        "$sup",
        "$<NUM>",
        "$eq",
        "$y",
        "$sub",
        "$<NUM>",
    ]
    assert normalize_line(r"\(a<b\) and \[n!\] and $$E=mc^2$$") == [
        "$a", "$lt", "$b", "and", "$n", "$bang", "and", "$e", "$eq", "$mc", "$sup", "$<NUM>"
    ]  # fmt: skip
    # an escaped dollar (what the extractor writes for `$60 million`) is not a formula delimiter; an unpaired `$`
    # is a symbol like any other; a TeX command in prose keeps its name
    assert normalize_line(r"paid \$60 million, $5 more") == ["paid", "<NUM>", "million", "<NUM>", "more"]
    assert normalize_line(r"use \require here") == ["use", "require<cmd>", "here"]


def test_tokens_over_100_characters_are_dropped():
    long_token = "a" * 101
    assert normalize_line(f"keep {long_token} this {'b' * 100}") == ["keep", "this", "b" * 100]


def test_greek_letters_survive_and_symbols_go():
    assert normalize_line("α ≤ β ∫ dx") == ["α", "β", "dx"]


def test_lines_split_when_over_long_and_empty_lines_dropped():
    text = "one two three four five\n\n  \nsix"
    assert preprocess_lines(text, max_line_tokens=2) == ["one two", "three four", "five", "six"]


def test_preprocess_is_one_line_capped():
    assert preprocess("A b\nC d\n\nE 7", max_tokens=5) == "a b c d e"
    assert preprocess("") == ""
    assert "\n" not in preprocess("a\nb\r\nc")


def test_long_documents_are_scored_on_windows_spread_over_them():
    words = [a + b for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"]  # 676 words
    text = " ".join(words)  # 2,027 characters
    out = preprocess(text, max_tokens=40).split()
    # 200 characters read as 4 windows of 50 (16-17 words each, cut words dropped), at most 10 tokens a window
    assert PREFIX_CHARS_PER_TOKEN * 40 < len(text) and SCORE_WINDOWS == 4
    assert len(out) == 40 and out == sorted(out)  # 4 x 10 tokens, windows in document order
    assert out[:10] == words[:10]  # the first window starts the document
    assert (
        out[-10:] == words[words.index(out[-10]) :][:10] and out[-10] in words[-17:]
    )  # the last one ends it
    assert all(w in words[100:600] for w in out[10:-10])  # two windows from the middle
    assert preprocess(" ".join(words[:30]), max_tokens=40).split() == words[:30]  # short text: read whole


def test_chunks_pack_whole_lines():
    assert chunk_document("a b c\nd e\nf g h i", chunk_tokens=4) == ["a b c", "d e", "f g h i"]
    assert chunk_document("a\nb\nc\nd\ne", chunk_tokens=2, max_chunks=2) == ["a b", "c d"]


def test_cjk_characters_become_one_shared_token():
    assert normalize_line("中文abc 한국 x") == ["<cjk>", "<cjk>", "abc", "<cjk>", "<cjk>", "x"]


def test_score_windows_start_on_a_line_so_formulas_pair_up():
    # Every window of this text would open mid-line; cut inside `$x+y$`, the prose after it became `$delta`.
    text = "\n".join(f"alpha beta gamma $x+y$ delta epsilon zeta {'eta ' * (i % 7)}" for i in range(300))
    tokens = preprocess(text).split()
    assert "$x" in tokens and "delta" in tokens
    assert not any(t in tokens for t in ("$alpha", "$beta", "$delta", "$zeta", "$eta"))


QUADRATIC = "The roots are\n$$\nx = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}\n$$\nfor every quadratic."


def test_a_training_chunk_has_the_tokens_scoring_reads_of_the_same_text():
    # The extractor writes display math as `$$\n..\n$$`. Cut into lines before formulas were read, training saw
    # `x frac<cmd> b pm<cmd> sqrt<cmd> ...` while scoring read `$x $eq $frac $minus $b $pm $sqrt ...`.
    scored = preprocess(QUADRATIC)
    assert scored.split()[:9] == ["the", "roots", "are", "$x", "$eq", "$frac", "$minus", "$b", "$pm"]
    assert chunk_document(QUADRATIC) == [scored]
    formula = scored.removeprefix("the roots are ").removesuffix(" for every quadratic")
    assert preprocess_lines(QUADRATIC) == ["the roots are", formula, "for every quadratic"]
    # MATH's multi-line `\[..\]`, and a document of several chunks: each chunk is what scoring reads of its text.
    blocks = [
        f"Step {i}: we get\n\\[\n\\int_0^{i} x\\,dx = \\frac{{{i}^2}}{{2}}\n\\]\nas claimed."
        for i in range(6)
    ]
    chunks = chunk_document("\n".join(blocks), chunk_tokens=40)
    assert chunks == [preprocess("\n".join(blocks[k : k + 2])) for k in (0, 2, 4)]
    assert not any("<cmd>" in chunk for chunk in chunks)


def test_normalized_lines_join_to_the_normalized_text():
    text = "a $$\nE = mc^2\n$$ b\n\n中文 x2 \\alpha\n$y$ and $z\nw$ end\n" + "q" * 120 + " r"
    assert " ".join(normalize_lines(text)) == normalize(text)
    assert normalize_lines(text)[0] == "a $e $eq $mc $sup $<NUM> b"


def _page(pad: int) -> str:
    """A long page: paragraphs on one line each with inline formulas, and display formulas over 14 lines."""
    rng = random.Random(pad)
    parts = ["intro " * pad]
    for i in range(12):
        words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(40))
        parts.append(f"{words} with $x_{i} + y$ and $z^{i}$ {words}")
        parts.append("$$\n" + "\n".join(f"a_{j} = \\frac{{{j}}}{{2}} + b" for j in range(12)) + "\n$$")
    return "\n".join(parts)


def test_score_windows_read_formulas_as_the_whole_page_does():
    # A window edge inside a display formula (or inside an inline one on a line with no break near the edge)
    # paired the `$` signs the wrong way round: prose became `$alpha`, formulas `frac<cmd>` (32 of these 40 pages).
    for pad in range(40):
        text = _page(pad)
        assert len(text) > PREFIX_CHARS_PER_TOKEN * 512  # read as windows
        scored, whole = preprocess(text).split(), set(normalize(text).split())
        assert set(scored) <= whole, (pad, sorted(set(scored) - whole))
        assert "$frac" in scored and "frac<cmd>" not in scored
