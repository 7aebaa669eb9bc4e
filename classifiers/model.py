"""Loading a trained math classifier and scoring texts with it, with the checks that keep scores honest.

A model file is checked on load (exists, is a fastText model, has the `math` and `nonmath` labels) so that a
wrong file is a clear error, never a silent wrong score. The JSON card next to the model (`X.bin` ->
`X.card.json`) carries the chosen threshold and the preprocessing settings it was trained with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from classifiers.preprocess import MAX_DOC_TOKENS, apply_vocabulary, preprocess

MATH_LABEL = "__label__math"
NONMATH_LABEL = "__label__nonmath"
DEFAULT_THRESHOLD = 0.5
# Fewer tokens than this say nothing about a page (a title and a stray `x` scored 1.0): such texts score 0 and
# the scoring step drops them as `too_short`.
MIN_TOKENS = 16


class ModelError(ValueError):
    """A model file that is missing, unreadable, or not a math classifier."""


def card_path(model_path: str | Path) -> Path:
    """The JSON card that goes with a model: `model.bin` -> `model.card.json`."""
    return Path(model_path).with_suffix(".card.json")


def train_pages_path(model_path: str | Path) -> Path:
    """The list of training pages that goes with a model: `model.bin` -> `model.train-pages.tsv`."""
    return Path(model_path).with_suffix(".train-pages.tsv")


def read_card(model_path: str | Path) -> dict[str, Any]:
    """The model's card, or {} when there is none."""
    path = card_path(model_path)
    return json.loads(path.read_text()) if path.is_file() else {}


def load_fasttext(model_path: str | Path):
    """Load a fastText model, raising ModelError for a missing, corrupt or wrongly-labelled file."""
    import fasttext

    path = Path(model_path)
    if not path.is_file():
        raise ModelError(f"{path}: model file not found")
    try:
        model = fasttext.load_model(str(path))
    except Exception as err:  # fastText raises ValueError or RuntimeError depending on how the file is broken
        raise ModelError(f"{path}: not a readable fastText model ({err})") from None
    labels = set(model.get_labels())
    if not {MATH_LABEL, NONMATH_LABEL} <= labels:
        raise ModelError(
            f"{path}: not a math classifier: labels are {sorted(labels)[:5]}, expected {MATH_LABEL} and "
            f"{NONMATH_LABEL}"
        )
    return model


class MathClassifier:
    """A loaded math classifier: `score(texts)` -> P(math) per text, preprocessing included."""

    def __init__(self, model_path: str | Path):
        self.path = Path(model_path)
        self.model = load_fasttext(self.path)
        self.card = read_card(self.path)
        if self.card and not self.card.get("preprocess", {}).get("formula_tokens"):
            # Trained when formulas were `<math>` delimiter tokens: today's tokens would give it wrong scores.
            raise ModelError(
                f"{self.path}: trained with an older preprocessing (no formula tokens); retrain it"
            )
        self.max_tokens = int(self.card.get("preprocess", {}).get("max_doc_tokens", MAX_DOC_TOKENS))
        # Models trained with `<unk>` see every token they do not know as `<unk>` (see preprocess.apply_vocabulary);
        # older ones (and models without a card) skip unknown words, as fastText does.
        unknown = self.card.get("preprocess", {}).get("unknown_token")
        self.vocabulary: frozenset[str] | None = frozenset(self.model.get_words()) if unknown else None

    @property
    def threshold(self) -> float:
        """The threshold chosen at training time (0.5 when the model has no card)."""
        return float(self.card.get("threshold", DEFAULT_THRESHOLD))

    def score_lines(self, lines: list[str]) -> np.ndarray:
        """P(math) for already-preprocessed lines (one batched fastText call)."""
        if not lines:
            return np.zeros(0, dtype=np.float32)
        if self.vocabulary is not None:
            lines = apply_vocabulary(lines, self.vocabulary)
        labels, probs = self.model.predict(lines, k=2, threshold=0.0)
        out = np.zeros(len(lines), dtype=np.float32)
        for i, (labs, ps) in enumerate(zip(labels, probs, strict=True)):
            for lab, p in zip(labs, ps, strict=False):
                if lab == MATH_LABEL:
                    out[i] = min(float(p), 1.0)
        return out

    def score(self, texts: list[str]) -> np.ndarray:
        """P(math) for raw texts; a text with fewer than MIN_TOKENS tokens after preprocessing scores 0."""
        lines = [preprocess(t, self.max_tokens) for t in texts]
        scores = np.zeros(len(texts), dtype=np.float32)
        keep = [i for i, line in enumerate(lines) if line.count(" ") + 1 >= MIN_TOKENS]
        if keep:
            scores[keep] = self.score_lines([lines[i] for i in keep])
        return scores
