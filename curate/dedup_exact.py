"""Exact dedup before MinHash: canonical URL and normalised-text hash, in three datatrove stages.

1. `ExactDedupHasher` (parallel): per document (URL hash, text hash, score, length) to `hashes/RANK.npy`.
2. `ExactDedupIndex` (one task): documents sharing a canonical URL or a normalised text are one group (connected
   components over both keys); the group keeps one document by the same rule as MinHash clusters; writes
   `RANK.exact.npy` (members only: doc index, group id, group size, keep, reason). Empty documents (no text key:
   no word or number, `curate.minhash_tokens.is_empty`) and those whose text is not a string (read as " ") join no
   group: the filter drops them as `empty` / `text_not_string`, and as the keeper of a URL group they took the
   real page down with them (`duplicate_url`).
3. `ExactDedupFilter` (parallel, in front of the MinHash signature and filter stages): drops the non-kept members
   (reasons `duplicate_text` / `duplicate_url`), empty documents (`empty`) and those whose text is not a string
   (`text_not_string`).
Why 64-bit hashes and not the texts: a million documents' keys take 16 MB; a false merge needs a 64-bit collision
(about n^2 / 2^65: one in 40 million for a million documents).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from datatrove.data import Document
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter

from curate.dedup_io import TEXT_NOT_STRING, open_report
from curate.dedup_text import url_hash
from curate.minhash import _score
from curate.minhash_cluster import choose_keepers
from curate.minhash_tokens import batch_text_hashes, is_empty

HASH_DTYPE = np.dtype([("url", "<u8"), ("text", "<u8"), ("score", "<f4"), ("length", "<u4")])
GROUP_DTYPE = np.dtype([("doc", "<u4"), ("group", "<u4"), ("size", "<u4"), ("keep", "u1"), ("reason", "u1")])
REASONS = {1: "duplicate_text", 2: "duplicate_url"}


def _is_empty(text: str | None) -> bool:
    """No word or number: exactly the documents whose text key is 0 (the same tokenizer)."""
    return is_empty(text)


class ExactDedupHasher(PipelineStep):
    """Exact dedup stage 1: URL and normalised-text hashes of every document (0 = none / empty)."""

    type = "🫂 - DEDUP"
    name = "🔑 exact-dedup hashes"

    def __init__(self, output_folder: str | Path, score_key: str = "math_score", url_key: str = "url"):
        super().__init__()
        self.output_folder = Path(output_folder)
        self.score_key, self.url_key = score_key, url_key

    def run(self, data, rank: int = 0, world_size: int = 1):
        parts, batch = [], []
        for doc in data:
            batch.append(doc)
            if len(batch) == 512:
                parts.append(self._hash_batch(batch))
                batch = []
        if batch:
            parts.append(self._hash_batch(batch))
        self.output_folder.mkdir(parents=True, exist_ok=True)
        rows = np.concatenate(parts) if parts else np.empty(0, dtype=HASH_DTYPE)
        np.save(self.output_folder / f"{rank:05d}.npy", rows)
        return
        yield  # a generator step that yields nothing (datatrove runs it for its side effects)

    def _hash_batch(self, batch: list[Document]) -> np.ndarray:
        with self.track_time():
            rows = np.zeros(len(batch), dtype=HASH_DTYPE)
            rows["text"] = batch_text_hashes([d.text or "" for d in batch])
            rows["url"] = [url_hash(d.metadata.get(self.url_key)) for d in batch]
            rows["score"] = [_score(d.metadata.get(self.score_key)) for d in batch]
            rows["length"] = [len(d.text or "") for d in batch]
            self.stat_update("hashed", value=len(batch))
        return rows


def _equal_key_edges(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges joining consecutive documents with the same non-zero key."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    same = (sk[1:] == sk[:-1]) & (sk[1:] != 0)
    return order[:-1][same], order[1:][same]


class ExactDedupIndex(PipelineStep):
    """Exact dedup stage 2 (one task): groups of equal URL or text, one kept per group by `keep_rule`."""

    type = "🫂 - DEDUP"
    name = "🔑 exact-dedup groups"

    def __init__(
        self,
        hashes_folder: str | Path,
        output_folder: str | Path,
        keep_rule: Sequence[str] = ("math_score", "length"),
        by_url: bool = True,
        by_text: bool = True,
    ):
        super().__init__()
        self.hashes_folder, self.output_folder = Path(hashes_folder), Path(output_folder)
        self.keep_rule, self.by_url, self.by_text = tuple(keep_rule), by_url, by_text

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        assert world_size == 1, "the exact-dedup index runs as one task"
        with self.track_time():
            files = sorted(self.hashes_folder.glob("*.npy"))
            ranks = [int(f.stem) for f in files]
            parts = [np.load(f) for f in files]
            rows = np.concatenate(parts) if parts else np.empty(0, dtype=HASH_DTYPE)
            offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
            n = len(rows)
            rows["url"][rows["text"] == 0] = 0  # empty documents (no text key) join no group
            edges = [
                _equal_key_edges(rows[k]) for k, on in (("url", self.by_url), ("text", self.by_text)) if on
            ]
            a = np.concatenate([e[0] for e in edges] + [np.empty(0, np.int64)])
            b = np.concatenate([e[1] for e in edges] + [np.empty(0, np.int64)])
            _, labels = connected_components(coo_matrix((np.ones(len(a), np.int8), (a, b)), shape=(n, n)))
            size = np.bincount(labels, minlength=1)[labels] if n else np.empty(0, np.int64)
            members = np.flatnonzero(size > 1)
            keepers = members[
                choose_keepers(
                    labels[members], rows["score"][members], rows["length"][members], self.keep_rule
                )
            ]
            group = np.searchsorted(labels[keepers], labels[members])  # keepers are sorted by label
            keep = np.zeros(n, dtype=bool)
            keep[keepers] = True
            text_count = _key_counts(rows["text"])
            reason = np.where(keep[members], 0, np.where(text_count[members] > 1, 1, 2))
            self.output_folder.mkdir(parents=True, exist_ok=True)
            for i, r in enumerate(ranks):
                sel = (members >= offsets[i]) & (members < offsets[i + 1])
                out = np.zeros(int(sel.sum()), dtype=GROUP_DTYPE)
                out["doc"], out["group"] = members[sel] - offsets[i], group[sel]
                out["size"], out["keep"], out["reason"] = size[members[sel]], keep[members[sel]], reason[sel]
                np.save(self.output_folder / f"{r:06d}.exact.npy", out)
            self.stat_update("groups", value=len(keepers))
            self.stat_update("to_remove", value=len(members) - len(keepers))


def _key_counts(keys: np.ndarray) -> np.ndarray:
    """How many documents share each document's key (0 keys count as unique)."""
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    out = counts[inverse]
    out[keys == 0] = 1
    return out


class ExactDedupFilter(BaseFilter):
    """Exact dedup stage 3: drops empty documents and the non-kept members of each exact group; kept members
    get `exact_group_size` (1 for unique documents)."""

    name = "🔑 exact-dedup filter"

    def __init__(
        self, groups_folder: str | Path, report_folder: str | Path | None = None, exclusion_writer=None
    ):
        super().__init__(exclusion_writer=exclusion_writer)
        self.groups_folder = Path(groups_folder)
        self.report_folder = Path(report_folder) if report_folder else None

    def run(self, data, rank: int = 0, world_size: int = 1):
        path = self.groups_folder / f"{rank:06d}.exact.npy"
        groups = np.load(path) if path.is_file() else np.empty(0, dtype=GROUP_DTYPE)
        self._groups = {int(g["doc"]): g for g in groups}
        self._idx = 0
        with open_report(self.report_folder, f"{rank:05d}.exact.jsonl") as self._report:
            yield from super().run(data, rank, world_size)

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        idx, self._idx = self._idx, self._idx + 1
        doc.metadata["exact_group_size"] = 1
        if doc.metadata.get("_text_not_string"):  # `text: 12345`: read as " " (curate.dedup_io)
            doc.metadata["reason"] = TEXT_NOT_STRING
            return False, TEXT_NOT_STRING
        if _is_empty(doc.text):
            doc.metadata["reason"] = "empty"
            return False, "empty"
        g = self._groups.get(idx)
        if g is None:
            return True
        doc.metadata["exact_group_size"] = int(g["size"])
        if self._report is not None:
            row = {"group_id": int(g["group"]), "size": int(g["size"]), "id": doc.id, "kept": bool(g["keep"])}
            self._report.write(json.dumps(row) + "\n")
        if g["keep"]:
            return True
        reason = REASONS[int(g["reason"])]
        doc.metadata["reason"] = reason
        return False, reason
