"""Evaluating a math classifier on pages it never saw: metrics, threshold choices, per-source breakdown, PR curve.

In-distribution numbers mislead (MegaMath: > 90% in distribution, 81.8% out of it), so every document whose
page or content was used for training (the model's `train-pages.tsv`) is left out before anything is measured,
and a separate out-of-distribution set is reported on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from classifiers.data import InputError, LabelledDoc, Skipped, content_key, read_input
from classifiers.metrics import (
    at_threshold,
    pr_curve,
    roc_auc,
    threshold_for_precision,
    threshold_for_top_percent,
)
from classifiers.model import MathClassifier, check_card_digest, found_train_pages_path, read_card


def training_keys(model_path: str | Path) -> set[str]:
    """Page names and content keys of the documents a model was trained on (checked against the card's digest)."""
    path = found_train_pages_path(model_path)
    check_card_digest(model_path, read_card(model_path), "train_pages", path, "training pages")
    keys: set[str] = set()
    if path.is_file():
        for line in path.read_text().splitlines():
            keys.update(k for k in line.split("\t") if k)
    return keys


def unseen(docs: list[LabelledDoc], keys: set[str]) -> tuple[list[LabelledDoc], int]:
    """The documents whose page and content were not used in training, and how many were left out."""
    kept = [d for d in docs if d.page not in keys and content_key(d.text) not in keys]
    return kept, len(docs) - len(kept)


def score_set(clf: MathClassifier, math: list[LabelledDoc], nonmath: list[LabelledDoc]):
    """(scores, labels, sources) of a labelled set."""
    docs = math + nonmath
    scores = clf.score([d.text for d in docs]) if docs else np.zeros(0, dtype=np.float32)
    labels = np.array([True] * len(math) + [False] * len(nonmath), dtype=bool)
    return scores, labels, [d.source for d in docs]


def report(
    scores: np.ndarray,
    labels: np.ndarray,
    sources: list[str],
    threshold: float,
    target_precision: float = 0.95,
    top_percent: float = 10.0,
) -> dict[str, Any]:
    """All metrics of one labelled set at `threshold`, plus the thresholds for a precision and a keep rate."""
    m = at_threshold(scores, labels, threshold)
    by_source: dict[str, dict[str, Any]] = {}
    for src in sorted(set(sources)):
        idx = np.array([s == src for s in sources])
        is_math = bool(labels[idx][0])
        kept = scores[idx] >= threshold
        by_source[src] = {
            "label": "math" if is_math else "nonmath",
            "n": int(idx.sum()),
            "mean_score": round(float(scores[idx].mean()), 4),
            # share called math: the recall of a math source, the false-positive rate of a non-math one
            "predicted_math": round(float(kept.mean()), 4),
        }
    return {
        "precision": m["precision"],
        "recall": m["recall"],
        "f1": m["f1"],
        "threshold": threshold,
        "n_math": int(labels.sum()),
        "n_nonmath": int((~labels).sum()),
        "roc_auc": roc_auc(scores, labels),
        "tp": m["tp"],
        "fp": m["fp"],
        "fn": m["fn"],
        f"threshold_for_precision_{target_precision:g}": threshold_for_precision(
            scores, labels, target_precision
        ),
        f"threshold_for_top_{top_percent:g}_percent": threshold_for_top_percent(scores, top_percent),
        "by_source": by_source,
    }


def plot_pr_curve(
    curves: dict[str, tuple[np.ndarray, np.ndarray]], threshold_points: dict, path: Path
) -> Path:
    """Write a PR-curve PNG with one curve per set and the model's operating point marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4))
    for name, (scores, labels) in curves.items():
        if labels.any() and (~labels).any():
            prec, rec, _ = pr_curve(scores, labels)
            ax.plot(rec, prec, label=name, drawstyle="steps-post")
            point = threshold_points.get(name)
            if point:
                ax.scatter([point["recall"]], [point["precision"]], marker="o")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(0, 1.02)
    ax.set_title("math classifier: precision-recall")
    if ax.get_legend_handles_labels()[
        0
    ]:  # no curve (one class only): an empty legend is a matplotlib warning
        ax.legend(loc="lower left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _nothing_to_evaluate(
    name: str, inputs: list, n_seen: int, model_path: str | Path, skipped: Skipped
) -> None:
    """Raise an InputError: metrics of no document are all 0.0 and read like a model that finds nothing."""
    options = {"heldout": "--math/--nonmath", "ood": "--ood-math/--ood-nonmath"}[name]
    shown = ", ".join(str(p) for p in inputs[:3]) + (", ..." if len(inputs) > 3 else "")
    shown += f" ({skipped.describe()})" if skipped else ""
    if n_seen:
        what = f"all {n_seen} documents" if n_seen > 1 else "the one document"
        raise InputError(
            f"nothing to evaluate from {options}: {what} of {shown} were training pages "
            f"(listed in {found_train_pages_path(model_path)}); give pages the model never saw"
        )
    raise InputError(f"nothing to evaluate from {options}: {shown} hold no documents")


def evaluate_model(
    model_path: str | Path,
    math: list[str],
    nonmath: list[str],
    ood_math: list[str] | None = None,
    ood_nonmath: list[str] | None = None,
    target_precision: float = 0.95,
    top_percent: float = 10.0,
    plot_path: str | Path | None = None,
    threshold: float | None = None,
) -> dict[str, Any]:
    """Evaluate on unseen documents of the given inputs (and an OOD set); write the PR curve if asked."""
    clf = MathClassifier(model_path)
    threshold = clf.threshold if threshold is None else threshold
    keys = training_keys(model_path)
    sets = {"heldout": (math, nonmath)}
    if ood_math or ood_nonmath:
        sets["ood"] = (ood_math or [], ood_nonmath or [])
    result: dict[str, Any] = {}
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, (pos_inputs, neg_inputs) in sets.items():
        skipped = Skipped()
        pos, n_pos_seen = unseen([d for p in pos_inputs for d in read_input(p, skipped)], keys)
        neg, n_neg_seen = unseen([d for p in neg_inputs for d in read_input(p, skipped)], keys)
        if not pos and not neg:
            _nothing_to_evaluate(
                name, [*pos_inputs, *neg_inputs], n_pos_seen + n_neg_seen, model_path, skipped
            )
        scores, labels, sources = score_set(clf, pos, neg)
        result[name] = report(scores, labels, sources, threshold, target_precision, top_percent)
        result[name]["left_out_seen_in_training"] = n_pos_seen + n_neg_seen
        result[name]["skipped"] = skipped.as_dict()
        curves[name] = (scores, labels)
    if plot_path:
        result["pr_curve"] = str(plot_pr_curve(curves, result, Path(plot_path)))
    return result
