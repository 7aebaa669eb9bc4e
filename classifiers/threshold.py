"""Choosing the classifier's threshold for a target precision on held-out web pages (`choose_threshold`).

The default (0.5) is kept, and the record says why, when the pages are too few or no threshold reaches the target.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from classifiers.data import LabelledDoc
from classifiers.metrics import at_threshold, threshold_for_precision
from classifiers.model import DEFAULT_THRESHOLD, MathClassifier

# Under this many held-out pages of a class the threshold is not chosen (the default is kept, and said).
MIN_HELDOUT_PAGES = 5


def choose_threshold(
    clf: MathClassifier, pos: list[LabelledDoc], neg: list[LabelledDoc], target: float
) -> tuple[float, dict[str, Any]]:
    """(threshold, how it was set) for `target` precision on held-out pages `pos`/`neg` (pages only).

    The default (0.5) is kept when the pages are too few to trust (< MIN_HELDOUT_PAGES a class), when precision
    at 0.5 already reaches the target, or when no threshold reaches it; the record says which.
    """
    n_math, n_nonmath = len({d.page for d in pos}), len({d.page for d in neg})
    record: dict[str, Any] = {
        "chosen_on": "held-out pages (not benchmark or LLM-seed rows)",
        "target_precision": target,
        "heldout_pages": {"math": n_math, "nonmath": n_nonmath},
    }
    pages = f"{n_math} math and {n_nonmath} non-math held-out pages"
    if not n_math and not n_nonmath:
        return DEFAULT_THRESHOLD, {
            **record,
            "chosen": False,
            "reason": "the default, not chosen: no page held out",
        }
    if n_math < MIN_HELDOUT_PAGES or n_nonmath < MIN_HELDOUT_PAGES:
        return DEFAULT_THRESHOLD, {
            **record,
            "chosen": False,
            "reason": (
                f"the default, not chosen: too few held-out pages to choose a threshold for precision {target} "
                f"({pages}; {MIN_HELDOUT_PAGES} a class needed; benchmark and LLM-seed rows do not count)"
            ),
        }
    scores = clf.score([d.text for d in pos] + [d.text for d in neg])
    labels = np.array([True] * len(pos) + [False] * len(neg))
    chosen = threshold_for_precision(scores, labels, target)
    if chosen is None:
        return DEFAULT_THRESHOLD, {
            **record,
            "chosen": False,
            "reason": f"the default, not chosen: no threshold reaches precision {target} on the {pages}",
        }
    if at_threshold(scores, labels, DEFAULT_THRESHOLD)["precision"] >= target:
        return DEFAULT_THRESHOLD, {
            **record,
            "chosen": True,
            "reason": f"the default already reaches precision {target} on the {pages}",
        }
    # Midway between the chosen score and the next score below it keeps the same pages with a margin; never
    # below 0.5: lower would only fit this split's few pages, not the next crawl.
    below = scores[scores < chosen]
    threshold = max(DEFAULT_THRESHOLD, (chosen + below.max()) / 2 if len(below) else chosen)
    return round(float(threshold), 6), {
        **record,
        "chosen": True,
        "reason": f"the lowest threshold reaching precision {target} on the {pages}",
    }
