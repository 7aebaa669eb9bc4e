"""MathScoreFilter in a datatrove pipeline: math_score on every scored document, keep rules, counted drops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from datatrove.data import Document

from classifiers.data import LabelledDoc
from classifiers.model import ModelError
from classifiers.scorer import MathScoreFilter
from classifiers.train import TrainData, TrainSettings, train_model
from tests.classifiers.corpus import MATH_WORDS, TEXT_WORDS, docs


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scorer") / "model.bin"
    pos = [
        LabelledDoc(t, "m", f"m{i}") for i, t in enumerate(docs(MATH_WORDS, 30, 1, length=30, numbered=False))
    ]
    neg = [
        LabelledDoc(t, "n", f"n{i}") for i, t in enumerate(docs(TEXT_WORDS, 30, 2, length=30, numbered=False))
    ]
    train_model(TrainData(pos, neg), out, TrainSettings(dim=8, lr=0.3, word_ngrams=2, epoch=10, bucket=5000))
    return out


def _docs() -> list[Document]:
    texts = (
        docs(MATH_WORDS, 6, 3, length=30, numbered=False)
        + docs(TEXT_WORDS, 6, 4, length=30, numbered=False)
        + ["", "!!! ??? ...", "x\nSimulators — LessWrong"]
    )
    return [Document(text=t, id=str(i)) for i, t in enumerate(texts)]


def _run(step, docs):
    kept = list(step.run(iter(docs)))
    return kept, dict(step.stats.stats.items())


def _count(stats, key):
    value = stats.get(key)
    return 0 if value is None else value.total


def test_threshold_keeps_math_and_counts_every_drop(model):
    step = MathScoreFilter(model, batch_size=4)
    assert step._classifier is None  # lazy: nothing loaded until documents arrive
    docs = _docs()
    kept, stats = _run(step, docs)
    assert [d.id for d in kept] == ["0", "1", "2", "3", "4", "5"]
    assert all(d.metadata["math_score"] >= step.threshold for d in kept)
    assert all("math_score" in d.metadata for d in docs[:12])
    assert _count(stats, "dropped_low_math_score") == 6 and _count(stats, "dropped_empty_text") == 2
    assert _count(stats, "dropped_too_short") == 1 and "math_score" not in docs[14].metadata
    assert _count(stats, "total") == len(docs) == len(kept) + 9


def test_top_percent_keeps_the_best_share(model):
    step = MathScoreFilter(model, keep_top_percent=25, batch_size=3)
    docs = _docs()
    kept, stats = _run(step, docs)
    scored = sorted((d.metadata["math_score"] for d in docs[:12]), reverse=True)
    assert len(kept) == 3 and sorted(d.metadata["math_score"] for d in kept) == sorted(scored[:3])
    assert _count(stats, "dropped_below_top_percent") == 9 and _count(stats, "dropped_empty_text") == 2
    assert _count(stats, "dropped_too_short") == 1


def test_huge_documents_are_counted_drops(model):
    step = MathScoreFilter(model, max_doc_chars=1000)
    kept, stats = _run(step, [Document(text="x " * 1000, id="big")])
    assert kept == [] and _count(stats, "dropped_too_large") == 1


def test_bad_model_and_arguments_are_errors(model, tmp_path):
    with pytest.raises(ModelError, match="not found"):
        list(MathScoreFilter(tmp_path / "none.bin").run(iter(_docs())))
    with pytest.raises(ValueError, match="either threshold or keep_top_percent"):
        MathScoreFilter(model, threshold=0.5, keep_top_percent=10)


def test_card_threshold_is_used_by_default(model):
    card = json.loads(model.with_suffix(".card.json").read_text())
    step = MathScoreFilter(model)
    _run(step, _docs()[:1])
    assert step.threshold == card["threshold"]
