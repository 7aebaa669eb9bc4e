"""Scoring cost of the math classifier against extraction cost, per document, in one run; plus eval metrics.

Target (issue 4): scoring <= 10% of the extraction cost per document. Both are timed on the same real pages of
../shared/data/html: extraction = `curate.extract.extract(html)`, scoring = preprocessing + fastText predict of
the extracted text (batched, as `MathScoreFilter` does). The model is trained here (bench sample of MATH and
GSM8K + half of the pages) and evaluated on the other half, so the metrics are on unseen pages. `--splits N`
also runs the accuracy target's protocol (two folds over the pages, pooled) on page splits 0..N-1 and prints
each and the worst, next to the issue target (F1 >= 0.90, precision >= 0.95).

Usage: .venv/bin/python bench/bench_classifier.py [--bench-rows 300] [--bench-seed 0] [--repeats 3] [--splits 3]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench-rows", type=int, default=300)
    parser.add_argument("--bench-seed", type=int, default=0, help="seed of the MATH/GSM8K row sample")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--splits", type=int, default=3, help="page splits for the pooled two-fold metrics")
    args = parser.parse_args()

    from classifiers.cli import PRESETS
    from classifiers.data import read_input, split_by_page
    from classifiers.evaluate import report, score_set
    from classifiers.model import MathClassifier
    from classifiers.train import TrainData, TrainSettings, train_model
    from curate.extract import extract

    SETTINGS = TrainSettings(**PRESETS["small"], bucket=100_000, holdout=0.0)  # as the target test trains

    pages = sorted((SHARED / "html").glob("*/*.html"))
    htmls = [p.read_text(encoding="utf-8", errors="replace") for p in pages]
    math, nonmath = read_input(SHARED / "html" / "math"), read_input(SHARED / "html" / "nonmath")
    bench = []
    for rel in ("bench/math_hendrycks/train.jsonl", "bench/gsm8k/train.jsonl"):
        bench += random.Random(args.bench_seed).sample(read_input(SHARED / rel), args.bench_rows)
    m_tr, m_te = split_by_page(math, 0.5)
    n_tr, n_te = split_by_page(nonmath, 0.5)
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model.bin"
        start = time.perf_counter()
        train_model(TrainData(bench + m_tr, n_tr), model, SETTINGS, say=None)
        train_s = time.perf_counter() - start
        clf = MathClassifier(model)
        texts = [extract(h) for h in htmls]
        extract_s = _time(lambda: [extract(h) for h in htmls], args.repeats)
        score_s = _time(lambda: clf.score(texts), args.repeats)
        scores, labels, sources = score_set(clf, m_te, n_te)
        r = report(scores, labels, sources, clf.threshold)
    n = len(pages)
    print(f"pages: {n} ({sum(len(h) for h in htmls) / 1e6:.1f} MB of HTML); training: {train_s:.1f} s")
    print(f"extraction: {extract_s / n * 1e3:.2f} ms/doc   scoring: {score_s / n * 1e3:.3f} ms/doc")
    print(f"scoring / extraction = {score_s / extract_s:.1%}  (target <= 10%)")
    print(
        f"held-out pages ({r['n_math']} math, {r['n_nonmath']} non-math) at threshold {r['threshold']:.3f}: "
        f"precision {r['precision']:.3f} recall {r['recall']:.3f} F1 {r['f1']:.3f} ROC-AUC {r['roc_auc']:.3f}"
    )

    if args.splits:
        _splits(math, nonmath, bench, SETTINGS, args.splits)


def _splits(math, nonmath, bench, settings, n_splits: int) -> None:
    """Pooled two-fold held-out metrics on page splits 0..n-1 (every page scored by the model that never saw it)."""
    import numpy as np

    from classifiers.data import split_by_page
    from classifiers.metrics import at_threshold, roc_auc
    from classifiers.model import MathClassifier
    from classifiers.train import TrainData, train_model

    rows = []
    for seed in range(n_splits):
        (m_a, m_b), (n_a, n_b) = split_by_page(math, 0.5, seed), split_by_page(nonmath, 0.5, seed)
        scores, preds, truth = [], [], []
        with tempfile.TemporaryDirectory() as tmp:
            for fold, (m_tr, n_tr, m_te, n_te) in enumerate([(m_a, n_a, m_b, n_b), (m_b, n_b, m_a, n_a)]):
                path = Path(tmp) / f"fold{fold}.bin"
                train_model(TrainData(bench + m_tr, n_tr), path, settings, say=None)
                clf = MathClassifier(path)
                s = clf.score([d.text for d in m_te + n_te])
                scores.append(s)
                preds.append((s >= clf.threshold).astype(float))
                truth.append(np.array([True] * len(m_te) + [False] * len(n_te)))
        labels = np.concatenate(truth)
        m = at_threshold(np.concatenate(preds), labels, 0.5)
        auc = roc_auc(np.concatenate(scores), labels)
        rows.append(m)
        print(
            f"page split {seed}: precision {m['precision']:.3f} recall {m['recall']:.3f} F1 {m['f1']:.3f} "
            f"ROC-AUC {auc:.3f} (fp {m['fp']}, fn {m['fn']})"
        )
    worst_p, worst_f1 = min(r["precision"] for r in rows), min(r["f1"] for r in rows)
    print(
        f"worst of {n_splits} splits: precision {worst_p:.3f} (target 0.95, ratio {worst_p / 0.95:.3f}), "
        f"F1 {worst_f1:.3f} (target 0.90, ratio {worst_f1 / 0.90:.3f})"
    )


if __name__ == "__main__":
    main()
