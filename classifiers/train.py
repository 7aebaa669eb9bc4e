"""Training the fastText math classifier: inputs -> balanced chunked examples -> model + JSON card.

Pages are held out whole (no page in both training and the held-out split), and the threshold is chosen on the
held-out pages for a target precision: the in-distribution training loss says little about real pages.
Balanced sampling: within a class every source gives the same number of examples (small sources repeated), and
the two classes are then made equal, so 7,500 MATH problems do not drown 20 math pages.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from classifiers.data import LabelledDoc, content_key, split_by_page
from classifiers.fit import FIT_SCRIPT, fit_fasttext
from classifiers.metrics import at_threshold, roc_auc
from classifiers.model import (
    MATH_LABEL,
    NONMATH_LABEL,
    MathClassifier,
    card_path,
    check_card_free,
    file_sha256,
    train_pages_path,
)
from classifiers.preprocess import (
    MAX_DOC_TOKENS,
    MAX_LINE_TOKENS,
    MAX_TOKEN_CHARS,
    UNKNOWN_TOKEN,
    apply_vocabulary,
    pack_chunks,
    preprocess_lines,
)
from classifiers.threshold import MIN_HELDOUT_PAGES, choose_threshold

# Fitting (classifiers.fit) and the threshold's choice (classifiers.threshold) live apart; their names are still
# imported from here, as before the split.
_FIT_SCRIPT = FIT_SCRIPT
__all__ = [
    "MIN_HELDOUT_PAGES",
    "PAGE_KINDS",
    "SettingError",
    "TrainData",
    "TrainSettings",
    "build_training_file",
    "effective_min_count",
    "evaluate_docs",
    "is_page",
    "train_model",
]

# Documents that are web pages (HTML, or rows of a text corpus: a web stage's output, recall candidates): the
# threshold is chosen, and the headline held-out metrics measured, on these alone. Benchmark rows (MATH, GSM8K)
# and LLM-seed rows are held out too, but measured apart: 1,500 held-out MATH rows beside 8 math pages printed
# "held-out pages: precision 0.999, recall 0.986" of pages at recall 0.625, and with 1,508 positives vs 58
# negatives precision stays >= 0.963 whatever the non-math pages score, so the threshold could never move.
PAGE_KINDS = frozenset({"html", "corpus"})


@dataclass
class TrainSettings:
    """Hyperparameters (DeepSeekMath defaults) and sampling settings; every field is a CLI option."""

    dim: int = 256
    lr: float = 0.1
    word_ngrams: int = 3
    min_count: int = 3
    epoch: int = 3
    # 2M buckets x 256 dims would be a 2 GB model; 200k keeps it at ~200 MB with no loss on our checks.
    bucket: int = 200_000
    chunk_tokens: int = MAX_LINE_TOKENS
    max_chunks_per_page: int = 32
    max_examples_per_source: int = 4000
    # Benchmark problems are short, number-dense and unlike web pages: at full weight they teach "numbers mean
    # math" and sports tables score as math. A benchmark source gets this share of a page source's examples
    # (0.1 since words seen in one document became `<unk>`: eight page splits, 7 meet the target vs 6 at
    # 0.3; worst precision 0.971 vs 0.947).
    bench_weight: float = 0.1
    # A word found in fewer training documents than this is written as `<unk>` (see `apply_vocabulary`).
    min_doc_freq: int = 2
    holdout: float = 0.2
    target_precision: float = 0.95
    seed: int = 0
    threads: int = 1  # one thread: fastText is deterministic only then (reruns give the same model)

    def __post_init__(self) -> None:
        for name, (ok, rule) in _RULES.items():
            value = getattr(self, name)
            if not ok(value):
                raise SettingError(name, f"must be {rule} (got {value})")


class SettingError(ValueError):
    """A training setting out of its range; `name` is the field (the CLI option is `--name-with-dashes`)."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name} {message}")
        self.name, self.message = name, message


# Checked when settings are made, so a bad value is named before hours of reading and training: holdout 1.5
# held out every page and failed as "needs a positive and a negative document"; epoch 0 wrote an untrained model.
_RULES = {
    "dim": (lambda v: v >= 1, ">= 1"),
    "lr": (lambda v: v > 0, "> 0"),
    "word_ngrams": (lambda v: v >= 1, ">= 1"),
    "min_count": (lambda v: v >= 1, ">= 1"),
    "epoch": (lambda v: v >= 1, ">= 1"),
    "bucket": (lambda v: v >= 1, ">= 1"),
    "chunk_tokens": (lambda v: v >= 1, ">= 1"),
    "max_chunks_per_page": (lambda v: v >= 1, ">= 1"),
    "max_examples_per_source": (lambda v: v >= 1, ">= 1"),
    "bench_weight": (lambda v: v > 0, "> 0"),
    "min_doc_freq": (lambda v: v >= 1, ">= 1"),
    "holdout": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "target_precision": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "threads": (lambda v: v >= 1, ">= 1"),
}


@dataclass
class TrainData:
    """Labelled documents of both classes, with their source inputs for the card."""

    positives: list[LabelledDoc]
    negatives: list[LabelledDoc]
    inputs: dict[str, list[str]] = field(default_factory=dict)  # {"positives": [...], "negatives": [...]}
    skipped: dict[str, dict[str, Any]] = field(default_factory=dict)  # what was not read (`Skipped.as_dict`)


def _examples(
    docs: list[LabelledDoc], s: TrainSettings, rng: random.Random, doc_freq: Counter[str]
) -> list[str]:
    """Chunk docs into examples and give every source the same count (repeating small ones).

    `doc_freq` is updated with the number of documents each token occurs in (for `apply_vocabulary`).
    """
    by_source: dict[str, list[str]] = {}
    bench_sources = {d.source for d in docs if d.kind == "bench"}
    for doc in docs:
        # The tokens scoring reads (formulas read on the whole document, then cut into lines), counted over the
        # whole document, not only its first chunks.
        lines = preprocess_lines(doc.text, s.chunk_tokens)
        doc_freq.update({token for line in lines for token in line.split()})
        by_source.setdefault(doc.source, []).extend(pack_chunks(lines, s.chunk_tokens, s.max_chunks_per_page))
    if not by_source:
        return []
    full = min(s.max_examples_per_source, max(len(v) for v in by_source.values()))
    out: list[str] = []
    for source in sorted(by_source):
        chunks = by_source[source]
        weight = s.bench_weight if source in bench_sources and len(bench_sources) < len(by_source) else 1.0
        target = max(1, round(full * weight))
        if not chunks:
            continue
        if len(chunks) >= target:
            out.extend(rng.sample(chunks, target))
        else:
            out.extend(chunks * (target // len(chunks)) + rng.sample(chunks, target % len(chunks)))
    return out


def build_training_file(pos: list[LabelledDoc], neg: list[LabelledDoc], s: TrainSettings, path: Path) -> dict:
    """Write the fastText training file (classes balanced, shuffled); return example counts."""
    rng = random.Random(s.seed)
    doc_freq: Counter[str] = Counter()
    pos_ex, neg_ex = _examples(pos, s, rng, doc_freq), _examples(neg, s, rng, doc_freq)
    if not pos_ex or not neg_ex:
        raise ValueError("training needs at least one positive and one negative document with text")
    known = {token for token, n in doc_freq.items() if n >= s.min_doc_freq}
    pos_ex, neg_ex = apply_vocabulary(pos_ex, known), apply_vocabulary(neg_ex, known)
    n = max(len(pos_ex), len(neg_ex))
    lines = [f"{MATH_LABEL} {x}" for x in _resample(pos_ex, n, rng)]
    lines += [f"{NONMATH_LABEL} {x}" for x in _resample(neg_ex, n, rng)]
    rng.shuffle(lines)
    path.write_text("\n".join(lines) + "\n")
    return {
        "positive_examples": len(pos_ex),
        "negative_examples": len(neg_ex),
        "examples_written": len(lines),
    }


def _resample(items: list[str], n: int, rng: random.Random) -> list[str]:
    return items * (n // len(items)) + rng.sample(items, n % len(items))


def effective_min_count(s: TrainSettings, n_examples: int) -> int:
    """minCount, lowered to 1 for tiny training sets (< 2,000 examples) where 3 would drop most words."""
    return 1 if n_examples < 2000 else s.min_count


def evaluate_docs(
    clf: MathClassifier, pos: list[LabelledDoc], neg: list[LabelledDoc], threshold: float
) -> dict:
    """Metrics of whole documents at `threshold`, plus ROC-AUC. What a missing class leaves unmeasured is None
    (no non-math: precision and F1; no math: recall and F1), as `classifier eval` reports it: a precision of 1.0
    over math documents alone is no precision."""
    scores = clf.score([d.text for d in pos] + [d.text for d in neg])
    labels = np.array([True] * len(pos) + [False] * len(neg))
    m: dict[str, Any] = {**at_threshold(scores, labels, threshold), "roc_auc": roc_auc(scores, labels)}
    if not neg:
        m["precision"] = m["f1"] = None
    if not pos:
        m["recall"] = m["f1"] = None
    return {**m, "n_math": len(pos), "n_nonmath": len(neg)}


def is_page(doc: LabelledDoc) -> bool:
    """A web page (see PAGE_KINDS), not a benchmark or LLM-seed row."""
    return doc.kind in PAGE_KINDS


def _say(message: str) -> None:
    """A line on the console (stderr, where the CLI's and the stages' messages go)."""
    from rich.markup import escape

    from mathmix.cli_util import console

    console.print(escape(message), soft_wrap=True, highlight=False)


def train_model(
    data: TrainData,
    out: str | Path,
    s: TrainSettings | None = None,
    say: Callable[[str], None] | None = _say,
) -> dict[str, Any]:
    """Train on `data`, hold out pages, choose the threshold, write MODEL, its card and its training pages.

    The threshold and `metrics.heldout` come from held-out web pages only; held-out benchmark and LLM-seed rows
    are measured apart (`metrics.heldout_rows`). `say` (default: the console) is told how the threshold was
    set, and in particular that it was left at the default when too few pages were held out to choose one.

    The three files are written under temporary names, then renamed card first and model last, and the card
    records the SHA-256 of the other two: a run killed between renames leaves a set that `MathClassifier` and
    eval refuse (never a new model scored with the old card's threshold), and MODEL exists only when whole.
    """
    s = s or TrainSettings()
    out = Path(out)
    check_card_free(out)  # `a.bin` over the card of an existing `a.ftz`
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.time()
    pos_train, pos_test, neg_train, neg_test = _hold_out_pages(data, s)
    final = {"card": card_path(out), "pages": train_pages_path(out), "model": out}
    temp = {key: path.with_name(path.name + ".tmp") for key, path in final.items()}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            train_file = Path(tmp) / "train.txt"
            counts = build_training_file(pos_train, neg_train, s, train_file)
            min_count = effective_min_count(s, counts["examples_written"])
            used = fit_fasttext(train_file, temp["model"], s, min_count)
        _write_train_pages(temp["pages"], pos_train + neg_train)
        preprocess = _preprocess_card(s)
        # Scored as the finished model will be (with `<unk>`), not by whatever card sits at OUT from before.
        clf = MathClassifier(temp["model"], card={"preprocess": preprocess})
        pos_pages, neg_pages = [d for d in pos_test if is_page(d)], [d for d in neg_test if is_page(d)]
        pos_rows, neg_rows = [d for d in pos_test if not is_page(d)], [d for d in neg_test if not is_page(d)]
        threshold, choice = choose_threshold(clf, pos_pages, neg_pages, s.target_precision)
        held_out = evaluate_docs(clf, pos_pages, neg_pages, threshold) if pos_pages and neg_pages else None
        held_rows = evaluate_docs(clf, pos_rows, neg_rows, threshold) if pos_rows or neg_rows else None
        card = {
            "model": out.name,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "labels": [MATH_LABEL, NONMATH_LABEL],
            "inputs": data.inputs,
            "counts": _card_counts(data, (pos_train, neg_train), (pos_test, neg_test), counts),
            "hyperparameters": {**asdict(s), "min_count_used": min_count, **used},
            "preprocess": preprocess,
            "threshold": threshold,
            "threshold_choice": choice,
            # `heldout`: held-out pages only (None unless both classes have one); `heldout_rows`: held-out
            # benchmark and LLM-seed rows at the same threshold (None when none was held out).
            "metrics": {"heldout": held_out, "heldout_rows": held_rows},
            "train_pages_file": final["pages"].name,
            "recall_rounds": [],
            "sha256": {"model": file_sha256(temp["model"]), "train_pages": file_sha256(temp["pages"])},
            "seconds": round(time.time() - start, 2),
        }
        temp["card"].write_text(json.dumps(card, indent=2) + "\n")
        for key in ("card", "pages", "model"):
            temp[key].replace(final[key])
    finally:
        for path in temp.values():
            path.unlink(missing_ok=True)
    if say is not None:
        _say_threshold(say, threshold, choice, held_rows)
    return card


def _hold_out_pages(data: TrainData, s: TrainSettings) -> tuple[list[LabelledDoc], ...]:
    """(math train, math held out, non-math train, non-math held out), pages held out whole; ValueError when the
    holdout leaves a class given documents with none for training."""
    pos_train, pos_test = split_by_page(data.positives, s.holdout, s.seed)
    neg_train, neg_test = split_by_page(data.negatives, s.holdout, s.seed)
    for name, docs, given in (("math", pos_train, data.positives), ("non-math", neg_train, data.negatives)):
        if given and not docs:
            raise ValueError(
                f"holdout {s.holdout} leaves no {name} page for training ({len(given)} documents given): "
                "lower the holdout or give more pages"
            )
    return pos_train, pos_test, neg_train, neg_test


def _preprocess_card(s: TrainSettings) -> dict[str, Any]:
    """The card's `preprocess`: how texts are turned into tokens, as the scorer must repeat it."""
    return {
        "max_doc_tokens": MAX_DOC_TOKENS,
        "formula_tokens": True,
        "unknown_token": UNKNOWN_TOKEN,
        "max_token_chars": MAX_TOKEN_CHARS,
        "chunk_tokens": s.chunk_tokens,
    }


def _card_counts(
    data: TrainData, train: tuple[list, list], held_out: tuple[list, list], counts: dict
) -> dict:
    """The card's `counts`: documents given, pages and rows trained on and held out (each as (math, non-math)),
    by source, skipped, and the training file's `counts`."""
    return {
        "positive_docs": len(data.positives),
        "negative_docs": len(data.negatives),
        # Web pages, and apart from them benchmark and LLM-seed rows (see PAGE_KINDS).
        "train_pages": _page_counts(*train, pages=True),
        "heldout_pages": _page_counts(*held_out, pages=True),
        "train_rows": _page_counts(*train, pages=False),
        "heldout_rows": _page_counts(*held_out, pages=False),
        "by_source": _source_counts(data.positives, data.negatives),
        "skipped": data.skipped,
        **counts,
    }


def _say_threshold(
    say: Callable[[str], None], threshold: float, choice: dict, held_rows: dict | None
) -> None:
    say(f"threshold {threshold:.3f}: {choice['reason']}")
    if held_rows is not None:
        say(
            f"held-out benchmark/LLM-seed rows, not counted in the page metrics ({held_rows['n_math']} math, "
            f"{held_rows['n_nonmath']} non-math): {_metrics_text(held_rows)}"
        )


def _metrics_text(m: dict) -> str:
    """`precision 0.900, recall 0.800, f1 0.847`: the measured ones (a missing class leaves some None)."""
    keys = ("precision", "recall", "f1", "roc_auc")
    return ", ".join(f"{k} {m[k]:.3f}" for k in keys if isinstance(m.get(k), float)) or "-"


def _page_counts(pos: list[LabelledDoc], neg: list[LabelledDoc], pages: bool) -> dict[str, int]:
    """{"math", "nonmath"}: distinct pages (`pages`) or distinct benchmark/LLM-seed rows (not `pages`)."""
    return {
        label: len({d.page for d in docs if is_page(d) == pages})
        for label, docs in (("math", pos), ("nonmath", neg))
    }


def _source_counts(pos: list[LabelledDoc], neg: list[LabelledDoc]) -> dict[str, dict[str, Any]]:
    """{source: {"label", "docs"}}; a source given in both classes gets one entry per class (`source [label]`)."""
    counts: Counter[tuple[str, str]] = Counter()
    for label, docs in (("math", pos), ("nonmath", neg)):
        counts.update((d.source, label) for d in docs)
    in_both = {src for src, label in counts if label == "math"} & {
        src for src, label in counts if label != "math"
    }
    return {
        (f"{src} [{label}]" if src in in_both else src): {"label": label, "docs": n}
        for (src, label), n in counts.items()
    }


def _write_train_pages(path: Path, docs: list[LabelledDoc]) -> None:
    """One `page<TAB>content-key<TAB>origin` line per training document: eval leaves out a document with one of
    these contents or origins (see `classifiers.evaluate.training_keys`)."""
    rows = sorted({f"{d.page}\t{content_key(d.text)}\t{d.where}" for d in docs})
    path.write_text("\n".join(rows) + "\n")
