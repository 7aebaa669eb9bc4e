"""Synthetic two-class corpora the classifier tests train fastText on: math-like and news-like word salads."""

from __future__ import annotations

import json
import random
from pathlib import Path

from classifiers.train import TrainSettings

MATH_WORDS = (
    "let x be integer prove theorem equation solve derivative integral $x^2$ \\frac{1}{2} lemma".split()
)
TEXT_WORDS = "the match team season city mayor said market shares film actor recipe weather tour".split()
# Bigrams: unigram fastText in the wheel we ship is nondeterministic (see recipes/quickstart.yaml).
FAST = TrainSettings(dim=16, lr=0.3, word_ngrams=2, epoch=10, bucket=10_000, holdout=0.25)


def docs(words: list[str], n: int, seed: int, length: int = 40, numbered: bool = True) -> list[str]:
    """n pages of `length` words drawn from `words`; numbered pages end in a distinct line (no duplicates)."""
    rng = random.Random(seed)
    pages = [" ".join(rng.choice(words) for _ in range(length)) for _ in range(n)]
    return [f"{p}\npage {i}" for i, p in enumerate(pages)] if numbered else pages


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
