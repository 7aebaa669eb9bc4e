"""Scoring cost of the math classifier against extraction cost, per document, in one run; plus eval metrics.

Target (issue 4): scoring <= 10% of the extraction cost per document. Both are timed on the same real pages of
../shared/data/html: extraction = `curate.extract.extract(html)`, scoring = preprocessing + fastText predict of
the extracted text (batched, as `MathScoreFilter` does). The model is trained here (bench sample of MATH and
GSM8K + half of the pages) and evaluated on the other half, so the metrics are on unseen pages.

Usage: .venv/bin/python bench/bench_classifier.py [--bench-rows 300] [--repeats 3]
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
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from classifiers.cli import PRESETS
    from classifiers.data import read_input, split_by_page
    from classifiers.evaluate import report, score_set
    from classifiers.model import MathClassifier
    from classifiers.train import TrainData, TrainSettings, train_model
    from curate.extract import extract

    pages = sorted((SHARED / "html").glob("*/*.html"))
    htmls = [p.read_text(encoding="utf-8", errors="replace") for p in pages]
    math, nonmath = read_input(SHARED / "html" / "math"), read_input(SHARED / "html" / "nonmath")
    bench = []
    for rel in ("bench/math_hendrycks/train.jsonl", "bench/gsm8k/train.jsonl"):
        bench += random.Random(0).sample(read_input(SHARED / rel), args.bench_rows)
    m_tr, m_te = split_by_page(math, 0.5)
    n_tr, n_te = split_by_page(nonmath, 0.5)
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model.bin"
        start = time.perf_counter()
        train_model(TrainData(bench + m_tr, n_tr), model, TrainSettings(**PRESETS["small"], bucket=100_000))
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


if __name__ == "__main__":
    main()
