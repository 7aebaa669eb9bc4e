"""The scoring step: a datatrove filter that writes `metadata["math_score"]` and keeps math documents.

Keep rule: by threshold (argument, else the model card's, else 0.5) or by top-k% (MegaMath kept the top 10% for
ablations). A streaming step cannot know the corpus-wide percentile, so top-k% is taken per window of
`window_docs` documents of a task: memory stays bounded and, for shuffled shards, the cut is close to global.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.utils.batching import batched
from datatrove.utils.typeshelper import StatHints

# Larger documents are dropped (counted) rather than scored: nothing that size is a page of text.
MAX_DOC_CHARS = 5_000_000


class MathScoreFilter(BaseFilter):
    """Score documents with the fastText math classifier; keep those above a threshold or in the top k%.

    Args:
        model_path: the fastText model (`mathmix classifier train`); its card gives the default threshold.
        threshold: keep documents with `math_score >= threshold` (default: the card's threshold).
        keep_top_percent: keep the top k% by score instead (per window of `window_docs` documents).
        batch_size: documents per fastText call.
        window_docs: window size for `keep_top_percent`.
        max_doc_chars: documents longer than this are dropped as `too_large`.
        exclusion_writer: optional writer for dropped documents.

    Drop reasons: `empty_text` (nothing left to score), `too_short` (under 16 tokens: nothing to judge by),
    `too_large`, `low_math_score` (threshold) or
    `below_top_percent` (top-k%).
    """

    name = "🧮 Math score"
    _requires_dependencies = [("fasttext", "fasttext-numpy2-wheel")]

    def __init__(
        self,
        model_path: str | Path,
        threshold: float | None = None,
        keep_top_percent: float | None = None,
        batch_size: int = 256,
        window_docs: int = 10_000,
        max_doc_chars: int = MAX_DOC_CHARS,
        exclusion_writer=None,
    ):
        super().__init__(exclusion_writer=exclusion_writer, batch_size=batch_size)
        if threshold is not None and keep_top_percent is not None:
            raise ValueError("give either threshold or keep_top_percent, not both")
        if keep_top_percent is not None and not 0 < keep_top_percent <= 100:
            raise ValueError(f"keep_top_percent must be in (0, 100], got {keep_top_percent}")
        if threshold is not None and not 0 <= threshold <= 1:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        self.model_path = str(model_path)
        self.threshold = threshold
        self.keep_top_percent = keep_top_percent
        self.window_docs = window_docs
        self.max_doc_chars = max_doc_chars
        self._classifier = None

    @property
    def classifier(self):
        """The model, loaded on first use (in the worker, not when the pipeline is built)."""
        if self._classifier is None:
            from classifiers.model import MathClassifier

            self._classifier = MathClassifier(self.model_path)
            if self._classifier.card_warning:
                from loguru import logger

                logger.warning(self._classifier.card_warning)
            if self.threshold is None and self.keep_top_percent is None:
                self.threshold = self._classifier.threshold
        return self._classifier

    def _score_batch(self, batch: list[Document]) -> list[str | None]:
        """Write math_score into each scorable document; return a drop reason (or None) per document."""
        from classifiers.model import MIN_TOKENS
        from classifiers.preprocess import preprocess

        clf = self.classifier
        reasons: list[str | None] = []
        lines, targets = [], []
        for doc in batch:
            text = doc.text if isinstance(doc.text, str) else ""
            if len(text) > self.max_doc_chars:
                reasons.append("too_large")
                continue
            line = preprocess(text, clf.max_tokens)
            n_tokens = line.count(" ") + 1 if line else 0
            reasons.append(None if n_tokens >= MIN_TOKENS else "too_short" if n_tokens else "empty_text")
            if n_tokens >= MIN_TOKENS:
                lines.append(line)
                targets.append(doc)
        for doc, score in zip(targets, clf.score_lines(lines), strict=True):
            doc.metadata["math_score"] = round(float(score), 6)
        return reasons

    def filter_batch(self, batch: list[Document]) -> list[bool | tuple[bool, str]]:
        reasons = self._score_batch(batch)
        out: list[bool | tuple[bool, str]] = []
        for doc, reason in zip(batch, reasons, strict=True):
            if reason:
                out.append((False, reason))
            elif doc.metadata["math_score"] >= self.threshold:
                out.append(True)
            else:
                out.append((False, "low_math_score"))
        return out

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        return self.filter_batch([doc])[0]

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        if self.keep_top_percent is None:
            yield from super().run(data, rank, world_size)
            return
        with self.exclusion_writer if self.exclusion_writer else contextlib.nullcontext() as writer:
            for window in batched(data, self.window_docs):
                yield from self._keep_top(list(window), writer, rank)

    def _keep_top(self, window: list[Document], writer, rank: int) -> Iterator[Document]:
        """Score a window of documents and keep its top k%; count every other one under its drop reason."""
        reasons: list[str | None] = []
        for batch in batched(window, self.batch_size):
            reasons.extend(self._score_batch(list(batch)))
        scored = [i for i, r in enumerate(reasons) if r is None]
        n_keep = math.ceil(len(scored) * cast(float, self.keep_top_percent) / 100)  # set: see `run`
        ranked = sorted(scored, key=lambda i: -window[i].metadata["math_score"])
        keep = set(ranked[:n_keep])
        for i, doc in enumerate(window):
            self.stat_update(StatHints.total)
            if i in keep:
                self.stat_update(StatHints.forwarded)
                self.update_doc_stats(doc)
                yield doc
                continue
            reason = reasons[i] or "below_top_percent"
            self.stat_update(StatHints.dropped)
            self.stat_update(f"dropped_{reason}")
            if writer:
                doc.metadata["filter_reason"] = reason
                writer.write(doc, rank)
