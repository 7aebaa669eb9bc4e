"""Loading a trained math classifier and scoring texts with it, with the checks that keep scores honest.

A model file is checked on load (exists, is a fastText model, has the `math` and `nonmath` labels) so that a
wrong file is a clear error, never a silent wrong score. The JSON card next to the model (`X.bin` ->
`X.card.json`) carries the chosen threshold and the preprocessing settings it was trained with.
"""

from __future__ import annotations

import hashlib
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


# A model file's own suffix, replaced by its companions' (`model.bin` -> `model.card.json`); any other name keeps
# its suffix and gets theirs appended (`clf.v1` -> `clf.v1.card.json`): replacing it gave `clf.v1` and `clf.v2` one
# card, and the first model was then refused as "not the model its card was written for".
MODEL_SUFFIXES = (".bin", ".ftz")


def companion_path(model_path: str | Path, suffix: str) -> Path:
    """A file named after a model: `model.bin` -> `model{suffix}`, `clf.v1` -> `clf.v1{suffix}`."""
    path = Path(model_path)
    if path.suffix.lower() in MODEL_SUFFIXES:
        return path.with_suffix(suffix)
    return path.with_name(path.name + suffix)


def card_path(model_path: str | Path) -> Path:
    """The JSON card that goes with a model: `model.bin` -> `model.card.json`, `clf.v1` -> `clf.v1.card.json`."""
    return companion_path(model_path, ".card.json")


def train_pages_path(model_path: str | Path) -> Path:
    """The list of training pages that goes with a model: `model.bin` -> `model.train-pages.tsv`."""
    return companion_path(model_path, ".train-pages.tsv")


def pr_plot_path(model_path: str | Path) -> Path:
    """Eval's default PR-curve PNG: `model.bin` -> `model.pr.png`, `clf.v1` -> `clf.v1.pr.png`."""
    return companion_path(model_path, ".pr.png")


def _legacy_set(model_path: str | Path) -> bool:
    """Whether MODEL (a name outside MODEL_SUFFIXES) has no card of its own but one under the older naming, which
    replaced every suffix (`clf.v1` -> `clf.card.json`), written for it (its `model` is MODEL's name)."""
    path = Path(model_path)
    old = path.with_suffix(".card.json") if path.suffix else None
    if old is None or old == card_path(path) or card_path(path).is_file() or not old.is_file():
        return False
    try:
        return json.loads(old.read_text()).get("model") == path.name
    except (OSError, ValueError, AttributeError):
        return False


def _found_companion(model_path: str | Path, suffix: str) -> Path:
    """MODEL's companion file as it is read: `companion_path`, or the older naming's (see `_legacy_set`)."""
    if _legacy_set(model_path):
        return Path(model_path).with_suffix(suffix)
    return companion_path(model_path, suffix)


def found_card_path(model_path: str | Path) -> Path:
    """The card MODEL is read with: `card_path`, or the older naming's card written for it (see `_legacy_set`)."""
    return _found_companion(model_path, ".card.json")


def found_train_pages_path(model_path: str | Path) -> Path:
    """The training pages eval reads for MODEL: next to the card it is read with (see `found_card_path`)."""
    return _found_companion(model_path, ".train-pages.tsv")


def card_owner(model_path: str | Path) -> Path | None:
    """Another model file whose card sits where MODEL's would be written, or None.

    `a.bin`, `a.ftz` and `a` all have the card `a.card.json`, which records the name of the model it was written
    for (`model`): training one of them over the other's card would leave that model with a card of another
    training (refused on load) or none.
    """
    path = Path(model_path)
    try:
        name = json.loads(card_path(path).read_text()).get("model")
    except (OSError, ValueError, AttributeError):
        return None
    other = path.with_name(name) if isinstance(name, str) and name and "/" not in name else None
    if other is None or other.name == path.name or found_card_path(other) != card_path(path):
        return None  # this model's own card, or one copied along with a renamed model
    return other if other.is_file() else None


def check_card_free(model_path: str | Path) -> None:
    """Raise ModelError when MODEL's card would overwrite the card of another existing model (see `card_owner`)."""
    other = card_owner(model_path)
    if other is not None:
        raise ModelError(
            f"{model_path}: its card {card_path(model_path)} would replace the card of the model {other}, which "
            f"would then be refused or scored without it; name this model differently (e.g. "
            f"{Path(model_path).with_name(Path(model_path).stem + '-2' + Path(model_path).suffix)})"
        )


def read_card(model_path: str | Path) -> dict[str, Any]:
    """The model's card, or {} when there is none; a card that is not a JSON object is a ModelError."""
    path = found_card_path(model_path)
    if not path.is_file():
        return {}
    try:
        card = json.loads(path.read_text())
    except (ValueError, OSError) as err:
        raise ModelError(f"{path}: not a readable model card ({err})") from None
    if not isinstance(card, dict):
        raise ModelError(f"{path}: not a model card (a JSON {type(card).__name__}, not an object)")
    return card


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file, read in 1 MiB blocks (0.15 s for a 200 MB model)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_card_digest(model_path: str | Path, card: dict[str, Any], key: str, path: Path, what: str) -> None:
    """Raise ModelError when MODEL's card records a SHA-256 for KEY (`model`, `train_pages`) and PATH differs.

    A training writes the model, its card and its training pages as a set; a set mixed from two trainings (one
    killed while writing) would score with another model's threshold and leave out another model's pages.
    """
    expected = (card.get("sha256") or {}).get(key)
    if not expected:
        return  # cards written before the digests: nothing to compare with
    if not path.is_file():
        raise ModelError(
            f"{path}: missing, and its card {found_card_path(model_path)} lists it: retrain the model"
        )
    if file_sha256(path) != expected:
        raise ModelError(
            f"{path}: not the {what} its card {found_card_path(model_path)} was written for (a training killed while "
            "writing its files?): retrain into this path"
        )


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


def missing_card_warning(model_path: str | Path, card: dict[str, Any]) -> str | None:
    """What scoring MODEL assumes when its card is missing, empty or has no threshold; None when it has one.

    Only model.bin copied to a scoring job scored differently and silently: threshold 0.5 instead of the card's,
    and unknown words skipped instead of read as `<unk>`.
    """
    path = found_card_path(model_path)
    if card and "threshold" in card:
        return None
    if card:
        return f"{path} has no threshold: scoring {model_path} with 0.5"
    what = f"no card {path}" if not path.is_file() else f"an empty card {path}"
    return (
        f"{model_path} has {what}: scoring with threshold {DEFAULT_THRESHOLD} and unknown words skipped (not read "
        "as <unk>), as for a model trained without a card; a model trained here scores otherwise: copy its card "
        "with it"
    )


class MathClassifier:
    """A loaded math classifier: `score(texts)` -> P(math) per text, preprocessing included."""

    def __init__(self, model_path: str | Path, card: dict[str, Any] | None = None):
        """CARD: the card to score by (training passes the one it is about to write); default MODEL's card."""
        self.path = Path(model_path)
        self.model = load_fasttext(self.path)
        self.card = read_card(self.path) if card is None else card
        check_card_digest(self.path, self.card, "model", self.path, "model")
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
        # What a model read without its card assumes: printed by the commands, logged by the scoring step.
        self.card_warning: str | None = (
            None if card is not None else missing_card_warning(self.path, self.card)
        )

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
