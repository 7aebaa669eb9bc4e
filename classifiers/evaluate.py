"""Evaluating a math classifier on pages it never saw: metrics, threshold choices, per-source breakdown, PR curve.

In-distribution numbers mislead (MegaMath: > 90% in distribution, 81.8% out of it), so every document whose
page or content was used for training (the model's `train-pages.tsv`) is left out before anything is measured,
and a separate out-of-distribution set is reported on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class TrainingKeys:
    """What a model was trained on, from its train-pages.tsv (see `unseen`)."""

    contents: frozenset[str]  # content keys (`content_key` of the text)
    origins: frozenset[str]  # origins (URL, or file and key: `LabelledDoc.origin`)
    # Page names of a file written before origins were (two columns): matched by name alone, as then.
    names: frozenset[str] = frozenset()


def training_keys(model_path: str | Path, card: dict[str, Any] | None = None) -> TrainingKeys:
    """The contents and origins of the documents a model was trained on (checked against its CARD's digest; read
    here when not given).

    A line is `page<TAB>content-key<TAB>origin`; a file written before origins (`page<TAB>content-key`) is read
    as before: its page names are matched by name, so a page named as a training page is left out.
    """
    path = found_train_pages_path(model_path)
    card = read_card(model_path) if card is None else card
    check_card_digest(model_path, card, "train_pages", path, "training pages")
    contents: set[str] = set()
    origins: set[str] = set()
    names: set[str] = set()
    if path.is_file():
        for line in path.read_text().splitlines():
            cols = line.split("\t", 2)
            if len(cols) == 3:
                contents.add(cols[1])
                origins.add(cols[2])
            else:
                names.update(cols[:1])
                contents.update(cols[1:])
    return TrainingKeys(frozenset(contents), frozenset(origins), frozenset(names - {""}))


def unseen(docs: list[LabelledDoc], keys: TrainingKeys) -> tuple[list[LabelledDoc], int]:
    """The documents whose content and origin were not used in training, and how many were left out.

    By content (the same text, whatever its name) or origin (its URL, or the same file and row: a page trained on
    and since re-extracted differently), not by name: a never-trained page copied under a training page's file name
    is evaluated.
    """
    kept = [
        d
        for d in docs
        if content_key(d.text) not in keys.contents
        and d.where not in keys.origins
        and d.page not in keys.names
    ]
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
    """All metrics of one labelled set at `threshold`, plus the thresholds for a precision and a keep rate.

    Precision is None without non-math documents, recall without math documents, F1 with either missing."""
    m: dict[str, Any] = at_threshold(scores, labels, threshold)  # None where a class is missing
    # Without non-math documents every document called math is right (precision 1.0, or 0.0 with none called);
    # without math documents recall is 0.0: neither says anything about the model, so they are None.
    if not (~labels).any():
        m["precision"] = m["f1"] = None
    if not labels.any():
        m["recall"] = m["f1"] = None
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
    fig.savefig(path, dpi=100, format="png")  # at PATH as given: `--plot curve` wrote curve.png
    plt.close(fig)
    return path


def _nothing_to_evaluate(
    options: str,
    inputs: Sequence,
    n_seen: int,
    model_path: str | Path,
    skipped: Skipped,
    by_name: bool = False,
) -> None:
    """Raise an InputError: metrics of no document are all 0.0 and read like a model that finds nothing."""
    shown = ", ".join(str(p) for p in inputs[:3]) + (", ..." if len(inputs) > 3 else "")
    shown += f" ({skipped.describe()})" if skipped else ""
    if n_seen:
        what = f"all {n_seen} documents" if n_seen > 1 else "the one document"
        raise InputError(
            f"nothing to evaluate from {options}: {what} of {shown} were training pages "
            f"(listed in {found_train_pages_path(model_path)}); give pages the model never saw"
            + (
                " (that file predates origins and matches pages by name too: a page named as a training page "
                "counts as one; retrain to match by content and origin)"
                if by_name
                else ""
            )
        )
    raise InputError(f"nothing to evaluate from {options}: {shown} hold no documents")


# The options of each set's two classes.
OPTIONS = {"heldout": ("--math", "--nonmath"), "ood": ("--ood-math", "--ood-nonmath")}


def evaluate_model(
    model_path: str | Path,
    math: Sequence[str | Path],
    nonmath: Sequence[str | Path],
    ood_math: Sequence[str | Path] | None = None,
    ood_nonmath: Sequence[str | Path] | None = None,
    target_precision: float = 0.95,
    top_percent: float = 10.0,
    plot_path: str | Path | None = None,
    threshold: float | None = None,
) -> dict[str, Any]:
    """Evaluate on unseen documents of the given inputs (and an OOD set); write the PR curve if asked."""
    clf = MathClassifier(model_path)
    threshold = clf.threshold if threshold is None else threshold
    keys = training_keys(model_path, clf.card)
    sets = {"heldout": (math, nonmath)}
    if ood_math or ood_nonmath:
        sets["ood"] = (ood_math or [], ood_nonmath or [])
    warnings: list[str] = [clf.card_warning] if clf.card_warning else []
    result: dict[str, Any] = {"warnings": warnings}
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, (pos_inputs, neg_inputs) in sets.items():
        skipped = Skipped()
        pos, n_pos_seen = unseen([d for p in pos_inputs for d in read_input(p, skipped)], keys)
        neg, n_neg_seen = unseen([d for p in neg_inputs for d in read_input(p, skipped)], keys)
        math_option, nonmath_option = OPTIONS[name]
        if not pos and not neg:
            _nothing_to_evaluate(
                f"{math_option}/{nonmath_option}",
                [*pos_inputs, *neg_inputs],
                n_pos_seen + n_neg_seen,
                model_path,
                skipped,
                bool(keys.names),
            )
        # A class given and left empty is refused: precision 1.000 on 0 non-math pages read as a perfect model.
        for option, given, kept, n_seen in (
            (math_option, pos_inputs, pos, n_pos_seen),
            (nonmath_option, neg_inputs, neg, n_neg_seen),
        ):
            if given and not kept:
                _nothing_to_evaluate(option, given, n_seen, model_path, skipped, bool(keys.names))
        if not neg:
            warnings.append(
                f"no non-math documents ({nonmath_option} not given): precision and F1 not measured"
            )
        if not pos:
            warnings.append(f"no math documents ({math_option} not given): recall and F1 not measured")
        scores, labels, sources = score_set(clf, pos, neg)
        result[name] = report(scores, labels, sources, threshold, target_precision, top_percent)
        result[name]["left_out_seen_in_training"] = n_pos_seen + n_neg_seen
        result[name]["skipped"] = skipped.as_dict()
        curves[name] = (scores, labels)
    if plot_path:
        result["pr_curve"] = str(plot_pr_curve(curves, result, Path(plot_path)))
    return result
