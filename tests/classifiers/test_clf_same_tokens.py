"""Training and scoring read the same tokens of the same text, on the real pages and MATH rows.

Training used to cut a document into lines before reading its formulas, scoring read the whole text: a display
formula over several lines (the extractor writes `$$\\n..\\n$$`, 504 of them on the 42 math pages; 139 MATH rows
have a multi-line `\\[..\\]`) was a formula only at scoring, and training learned `frac<cmd>` tokens that scoring
never produces (48,570 `<cmd>` tokens in the math examples of a training file, 33 in the non-math ones).
"""

from __future__ import annotations

from classifiers.data import read_input
from classifiers.preprocess import (
    MAX_DOC_TOKENS,
    MAX_LINE_TOKENS,
    PREFIX_CHARS_PER_TOKEN,
    chunk_document,
    normalize,
    preprocess,
)


def _check(texts: list[str]) -> int:
    """Assert the training tokens of each text are its scoring tokens; returns how many hold a multi-line formula."""
    multi_line = 0
    for text in texts:
        whole = normalize(text)  # what scoring reads of a text (a window, or the whole of a short document)
        assert " ".join(chunk_document(text, MAX_LINE_TOKENS)) == whole
        if len(text) <= PREFIX_CHARS_PER_TOKEN * MAX_DOC_TOKENS and len(whole.split()) <= MAX_LINE_TOKENS:
            assert chunk_document(text, MAX_LINE_TOKENS) == [preprocess(text)]
        multi_line += "$$\n" in text or "\\[\n" in text
    return multi_line


def test_real_math_pages_train_on_the_tokens_they_are_scored_on(shared_data):
    pages = [d.text for d in read_input(shared_data / "html" / "math")]
    assert _check(pages) >= 10  # pages with display formulas over several lines


def test_math_rows_with_multi_line_formulas_train_on_their_scoring_tokens(shared_data):
    rows = read_input(shared_data / "bench" / "math_hendrycks" / "train.jsonl")
    texts = [d.text for d in rows if "\\[\n" in d.text]
    assert len(texts) >= 100 and _check(texts) == len(texts)


def test_score_windows_of_real_pages_read_their_formulas_as_training_does(shared_data):
    # Windows opened inside a display formula or mid-line inside an inline one: 12 pages scored on tokens their
    # whole-page reading does not have (93 on the GAN post: `$above`, `$adds`, ...). Left: `$` signs the whole
    # page pairs across lines (a shell prompt), which a window cannot know.
    pages = read_input(shared_data / "html" / "math") + read_input(shared_data / "html" / "nonmath")
    extra = {d.page: set(preprocess(d.text).split()) - set(normalize(d.text).split()) for d in pages}
    extra = {page: tokens for page, tokens in extra.items() if tokens}
    assert len(extra) <= 3 and all(len(tokens) <= 5 for tokens in extra.values()), extra
