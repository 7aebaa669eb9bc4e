"""`decont_tokens` takes shortcuts (a regex for the Unicode symbols, ASCII pages skip it, one lower-casing, no
LaTeX pass without a backslash): its tokens must be those of the plain composition of the steps it documents,
on the real pages and the benchmark records of ../shared/data (a saved index and a finished job depend on them)."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from curate import decont_tokens as dt
from curate.dedup_text import _LATEX_SPACING_RE, _LATEX_SYNONYMS, ASY_RE

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
_TABLE = str.maketrans(dt._UNICODE_MATH_SPELLED)


def plain_tokens(text: str) -> list[str]:
    """The steps one after another, as written before the shortcuts (session 15's decont_tokens, with
    `bare_commands` since)."""
    text = unicodedata.normalize("NFKC", ASY_RE.sub(" ", text) if "[asy]" in text.lower() else text).lower()
    for pattern, repl in _LATEX_SYNONYMS:
        text = pattern.sub(repl, text)
    text = _LATEX_SPACING_RE.sub(" ", text).lower()
    if "frac" in text:
        text = dt._FRAC_OF_DIGITS.sub(r" \1 \2 ", text)
    text = dt.bare_commands(text)
    text = text.translate(_TABLE)
    canon = dt.CANONICAL_MATH_TOKENS
    return [c for t in dt._DECONT_TOKEN_RE.findall(text) if (c := canon.get(t, t))]


SAMPLES = [
    "Plain ASCII, no LaTeX: 2x + 3 = 7~ever.",
    "$\\dfrac{1}{2}\\pi r^2 \\leqslant 3 \\times \\sqrt{x}$, $90^\\circ$ \\text{cm}\\,\\quad done",
    "Unicode: 45π, √(3x−5), x² ≤ ∞, ∠ABC = 30°, ﬁ ligature, ＡＢＣ fullwidth, ΑΣ final sigma",
    "Draw: [ASY] size(100); draw((0,0)--(1,1)); [/asy] after \\frac12 and frac{1}{2}",
    "中文 混合 text with \\alpha and α and alpha; Straße İstanbul",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_tokens_equal_the_plain_steps_on_samples(text):
    assert dt.decont_tokens(text) == plain_tokens(text)


def test_tokens_equal_the_plain_steps_on_the_real_pages_and_benchmarks():
    if not (DATA / "html").is_dir() or not (DATA / "bench").is_dir():
        pytest.skip(f"no real data at {DATA} (html/ and bench/): the shared data folder is not checked out")
    texts = [
        p.read_bytes().decode("utf-8", errors="replace") for p in sorted((DATA / "html").rglob("*.html"))
    ]
    for path in sorted((DATA / "bench").rglob("test.jsonl"))[:6]:
        for line in path.read_text(encoding="utf-8").splitlines()[:300]:
            texts += [v for v in json.loads(line).values() if isinstance(v, str)]
    assert len(texts) > 1000
    differ = [t[:80] for t in texts if dt.decont_tokens(t) != plain_tokens(t)]
    assert not differ, f"{len(differ)} texts tokenized otherwise, e.g. {differ[:3]}"
    assert any(re.search(r"\\[a-z]+", t) for t in texts) and not all(t.isascii() for t in texts)


def test_the_prefilter_changes_no_overlap_and_is_not_pickled():
    """`BenchmarkIndex._lookup` skips the binary search for n-grams whose hash's top bits no indexed n-gram has:
    the overlaps must be those found with every n-gram searched (a prefilter that lets everything through)."""
    import pickle

    import numpy as np

    from curate.decont import BenchmarkIndex

    bench = DATA / "bench"
    if not (DATA / "html").is_dir() or not (bench / "math500").is_dir():
        pytest.skip(
            f"no real data at {DATA} (html/ and bench/math500): the shared data folder is not checked out"
        )
    index = BenchmarkIndex([bench / "math500", bench / "gsm8k" / "test.jsonl"])
    problems = [json.loads(line) for line in (bench / "math500" / "test.jsonl").read_text().splitlines()]
    pages = [
        p.read_bytes().decode("utf-8", errors="replace") for p in sorted((DATA / "html").rglob("*.html"))
    ]
    docs = pages[:150] + [
        pages[i] + "\n" + r["problem"] + "\n" + pages[i + 1] for i, r in enumerate(problems[:150])
    ]
    fast = [[o.to_dict() for o in index.find(d)] for d in docs]
    assert index._prefilter.mean() < 0.5  # it does turn n-grams away
    again = pickle.loads(pickle.dumps(index))
    assert "_prefilter" not in again.__dict__
    again._prefilter = np.ones_like(index._prefilter)  # every n-gram searched
    assert [[o.to_dict() for o in again.find(d)] for d in docs] == fast
    assert sum(map(bool, fast[150:])) > 100 and any(o["n_matched"] > 1 for f in fast for o in f)
