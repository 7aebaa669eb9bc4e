"""Binary classification metrics on scores: precision/recall/F1 at a threshold, ROC-AUC, threshold choices."""

from __future__ import annotations

import numpy as np


def at_threshold(scores: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, float]:
    """Precision, recall and F1 of `score >= threshold` against boolean `labels`."""
    pred = scores >= threshold
    tp = int(np.sum(pred & labels))
    fp = int(np.sum(pred & ~labels))
    fn = int(np.sum(~pred & labels))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "tp": tp, "fp": fp, "fn": fn}


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """ROC-AUC by the rank-sum (Mann-Whitney) formula, ties counted half; None without both classes."""
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if not n_pos or not n_neg:
        return None
    from scipy.stats import rankdata

    ranks = rankdata(scores)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def threshold_for_precision(scores: np.ndarray, labels: np.ndarray, target: float) -> float | None:
    """The lowest threshold (most recall) whose precision is >= target; None if no threshold reaches it."""
    best = None
    for t in np.unique(scores)[::-1]:
        m = at_threshold(scores, labels, float(t))
        if m["tp"] and m["precision"] >= target:
            best = float(t)
    return best


def threshold_for_top_percent(scores: np.ndarray, percent: float) -> float:
    """The threshold that keeps the top `percent`% of documents by score."""
    if not len(scores):
        return 1.0
    return float(np.quantile(scores, 1 - percent / 100, method="higher"))


def pr_curve(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(precision, recall, thresholds) at every distinct score, highest threshold first."""
    thresholds = np.unique(scores)[::-1]
    prec, rec = [], []
    for t in thresholds:
        m = at_threshold(scores, labels, float(t))
        prec.append(m["precision"])
        rec.append(m["recall"])
    return np.array(prec), np.array(rec), thresholds
