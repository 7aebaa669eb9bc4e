"""The issue's measured target on real pages: F1 >= 0.90 and precision >= 0.95 on held-out pages of both kinds.

Positives: MATH and GSM8K problems with solutions (a sample, to stay fast) plus math pages of ../shared/data/html;
negatives: the non-math pages (hard negatives included: `$` amounts, forums loading MathJax with no formula).
Two folds over the pages, no page on both sides of a fold; every page is scored once by the model that never
saw it, at that model's own threshold. `bench/bench_classifier.py --splits 8` runs the same protocol on eight
page splits: seven meet the target, the worst is precision 0.971, F1 0.868 (split 6: nine ML-blog and MathJax
demo pages missed).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from classifiers.cli import PRESETS
from classifiers.data import read_input, split_by_page
from classifiers.metrics import at_threshold, roc_auc
from classifiers.model import MathClassifier
from classifiers.train import TrainData, TrainSettings, train_model

BENCH_ROWS = 300


def _bench(shared_data):
    docs = []
    for rel in ("bench/math_hendrycks/train.jsonl", "bench/gsm8k/train.jsonl"):
        rows = read_input(shared_data / rel)
        docs += random.Random(0).sample(rows, BENCH_ROWS)
    return docs


@pytest.fixture(scope="module")
def pooled(shared_data, tmp_path_factory) -> dict:
    """Held-out predictions of two folds, pooled: every page scored by the model that never saw it."""
    math = read_input(shared_data / "html" / "math")
    nonmath = read_input(shared_data / "html" / "nonmath")
    bench = _bench(shared_data)
    m_a, m_b = split_by_page(math, 0.5, seed=0)
    n_a, n_b = split_by_page(nonmath, 0.5, seed=0)
    # Every training page of a fold is fit on: a 20% held-out share (4 math pages) is too small to choose a
    # threshold (under 5 pages a class it is 0.5 anyway) and would only take training pages away.
    settings = TrainSettings(**PRESETS["small"], bucket=100_000, holdout=0.0)
    tmp = tmp_path_factory.mktemp("targets")
    preds, scores, labels = [], [], []
    for fold, (m_tr, n_tr, m_te, n_te) in enumerate([(m_a, n_a, m_b, n_b), (m_b, n_b, m_a, n_a)]):
        assert not {d.page for d in m_tr + n_tr} & {d.page for d in m_te + n_te}
        path = tmp / f"fold{fold}.bin"
        train_model(TrainData(bench + m_tr, n_tr), path, settings)
        clf = MathClassifier(path)
        s = clf.score([d.text for d in m_te + n_te])
        scores.append(s)
        preds.append(s >= clf.threshold)
        labels.append(np.array([True] * len(m_te) + [False] * len(n_te)))
    truth = np.concatenate(labels)
    assert truth.sum() == len(math) and (~truth).sum() == len(nonmath)
    pred = np.concatenate(preds).astype(float)
    result = {"at_threshold": at_threshold(pred, truth, 0.5), "auc": roc_auc(np.concatenate(scores), truth)}
    print(f"held-out pages, two folds pooled: {result}")
    return result


def test_heldout_pages_rank_math_above_nonmath(pooled):
    """What the model reaches on every split measured (splits 0-7: precision 0.97-1.0, F1 0.87-0.94, ROC-AUC 0.97+)."""
    assert pooled["auc"] >= 0.95, pooled
    assert pooled["at_threshold"]["f1"] >= 0.86, pooled
    assert pooled["at_threshold"]["precision"] >= 0.95, pooled


def test_heldout_pages_reach_issue_target(pooled):
    """The issue's target on this split (0.973 / 0.911 when measured)."""
    m = pooled["at_threshold"]
    assert m["f1"] >= 0.90, m
    assert m["precision"] >= 0.95, m
