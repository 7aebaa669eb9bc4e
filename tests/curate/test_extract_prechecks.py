"""The fast engine's cheap tests before its exact ones (they may let more pages through, never fewer), and its
regexes in linear time on long runs of one character."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from resiliparse.parse.html import HTMLTree

from curate.dom_images import _PROSE_ALT
from curate.dom_rewrite import _ANY_MATH_MARKUP, _MAYBE_MATH_MARKUP, _WORDS
from curate.extract import drop_empty_groups, extract
from curate.extract_text import _PROSE, finalize_text

HTML = Path(__file__).resolve().parents[3] / "shared" / "data" / "html"


def _element_for(selector: str) -> str:
    """Minimal markup matching one selector of `_ANY_MATH_MARKUP` (`.cls`, `tag`, `a > b`, `script[type^=..]`)."""
    if ">" in selector:
        outer, inner = (_element_for(part.strip()) for part in selector.split(">"))
        tag = outer[1 : outer.index(">")].split()[0]
        return outer.replace(f"</{tag}>", inner + f"</{tag}>")
    if selector.startswith("script["):
        return '<script type="Math/TeX">x^2</script>'
    if selector.startswith("."):
        return f'<span class="other {selector[1:]}">x</span>'
    tag = selector.replace("\\", "")
    return f"<{tag}>x</{tag}>"


@pytest.mark.parametrize("selector", [s.strip() for s in _ANY_MATH_MARKUP.split(",")])
def test_every_kind_of_math_markup_passes_the_cheap_test(selector):
    body = HTMLTree.parse(f"<html><body><p>text</p>{_element_for(selector)}</body></html>").body
    assert body.query_selector(selector) is not None, f"the test page does not hold {selector}"
    assert body.query_selector(_MAYBE_MATH_MARKUP) is not None, f"{selector} fails the cheap test"


def test_on_the_real_pages_the_cheap_test_misses_no_page_with_math_markup():
    if not HTML.is_dir():
        pytest.skip(f"{HTML} not found (../shared/data is needed)")
    exact = cheap = 0
    for path in sorted(HTML.glob("*/*.html")):
        body = HTMLTree.parse(path.read_bytes().decode("utf-8", errors="replace")).body
        if body is None:
            continue
        found = body.query_selector(_ANY_MATH_MARKUP) is not None
        passed = body.query_selector(_MAYBE_MATH_MARKUP) is not None
        assert passed or not found, f"{path.name}: math markup, but the cheap test fails"
        exact, cheap = exact + found, cheap + passed
    assert exact >= 10, f"only {exact} pages with math markup: the check proves little"
    assert cheap <= exact + exact // 2, f"the cheap test passes {cheap} pages for {exact} with math markup"


def test_a_long_run_of_blanks_costs_linear_time():
    # `re.sub(r"[ \t]+\n")` retried every blank of a run: 100,000 blanks took ~8 s (a 1 MB run, minutes)
    text = "a" + " " * 100_000 + "x\n" + "b \t\nc"
    start = time.perf_counter()
    assert finalize_text(text) == "a" + " " * 100_000 + "x\nb\nc"
    page = f"<html><body><p>a{' ' * 100_000}x</p><pre>y{' ' * 100_000}z</pre></body></html>"
    assert "x" in extract(page)
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize(
    "name, call, text",
    [
        ("empty groups", drop_empty_groups, "$\\begingroup$ a" + " " * 100_000 + "x"),
        ("prose in an alt text", _PROSE_ALT.search, "a" * 100_000 + "1"),
        ("words in a .math element", _WORDS.search, "a" * 100_000),
        ("prose in a $..$ span", _PROSE.search, "a" * 100_000),
    ],
)
def test_regexes_take_linear_time_on_a_long_run(name, call, text):
    # each started a match at every character of the run and scanned the rest of it: 100,000 chars, ~80 s
    start = time.perf_counter()
    call(text)
    assert time.perf_counter() - start < 1.0, f"{name}: quadratic on a long run"


@pytest.mark.parametrize(
    "pattern, text, found",
    [
        (_PROSE, "x is the set of all", True),
        (_PROSE, "abc def", False),
        (_PROSE, "1abc de fg", True),
        (_WORDS, "the sum of", True),
        (_PROSE_ALT, "Figure 3: loss curve", False),
        (_PROSE_ALT, "plot of the loss", True),
    ],
)
def test_anchoring_a_word_at_its_start_finds_what_it_found(pattern, text, found):
    assert (pattern.search(text) is not None) is found


OLD_EMPTY_GROUP = (
    r"[ \t]*(?<![\\$])(\$\$?)\s*\\(?:begin|end)group\s*\1(?!\$)[ \t]*"  # before the linear rewrite
)


def test_empty_groups_are_removed_as_the_old_pattern_removed_them():
    # a first rewrite refused a group right after another (`$\begingroup$ $\endgroup$` kept the second)
    import random
    import re

    from curate.extract import _EMPTY_GROUP

    old = re.compile(OLD_EMPTY_GROUP)
    rng = random.Random(0)
    tokens = ["$", "$$", "\\begingroup", "\\endgroup", " ", "  ", "\t", "\n", "a", "\\", "x$"]
    matched = 0
    for _ in range(20_000):
        text = "".join(rng.choice(tokens) for _ in range(rng.randint(1, 14)))
        spans = [m.span() for m in old.finditer(text)]
        assert [m.span() for m in _EMPTY_GROUP.finditer(text)] == spans, repr(text)
        matched += bool(spans)
    assert matched > 500
    assert drop_empty_groups("$\\begingroup$ $\\endgroup$") == ""
    assert drop_empty_groups("a $\\endgroup$ $\\begingroup$ b") == "a  b"
