"""MinHash stages 3 and 4: clusters from duplicate pairs with a keep rule, then the filter that applies them.

`MinhashClusterByRule` reads datatrove's `.dups` files (pairs `<4I`: file, doc, file, doc) and writes datatrove's
cluster outputs (`RANK.remove` `<I` sorted, `RANK.clusters` and `RANK.sizes` `<2I` pairs (doc, value)), so
datatrove's own `MinhashDedupFilter` could read them too. Unlike datatrove's cluster step (which keeps the first
document seen), it keeps the best document of each cluster by a rule over the per-document score and length the
signature step wrote (`meta/RANK.npy`), and it finds clusters with scipy's connected components instead of a
Python union-find, so a million documents cluster in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from datatrove.data import Document
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter

from curate.dedup_io import open_report
from curate.minhash import META_DTYPE

KEEP_KEYS = ("math_score", "length", "first")
SENTINEL = (1 << 32) - 1


def choose_keepers(
    labels: np.ndarray, score: np.ndarray, length: np.ndarray, rule: Sequence[str]
) -> np.ndarray:
    """Index of the document each cluster keeps: by `rule` keys in order (highest math_score, longest,
    first = lowest position), ties broken by position. `labels` gives each document's cluster."""
    keys: list[np.ndarray] = [np.arange(len(labels))]  # last tie-break: first document
    for key in reversed(list(rule)):
        if key == "math_score":
            keys.append(-score.astype(np.float64))
        elif key == "length":
            keys.append(-length.astype(np.int64))
        elif key == "first":
            keys.append(np.arange(len(labels)))
        else:
            raise ValueError(f"unknown keep rule key {key!r}; use {KEEP_KEYS}")
    keys.append(labels)
    order = np.lexsort(keys)
    first_of_cluster = np.ones(len(order), dtype=bool)
    first_of_cluster[1:] = labels[order][1:] != labels[order][:-1]
    return order[first_of_cluster]


def load_meta(folder: Path) -> tuple[list[int], np.ndarray, list[int]]:
    """(ranks, concatenated per-document meta, documents per rank) of the signature step's `meta/RANK.npy`."""
    files = sorted((folder / "meta").glob("*.npy"))
    ranks = [int(f.stem) for f in files]
    metas = [np.load(f) for f in files]
    return ranks, (np.concatenate(metas) if metas else np.empty(0, dtype=META_DTYPE)), [len(m) for m in metas]


class MinhashClusterByRule(PipelineStep):
    """MinHash stage 3 (one task): duplicate pairs -> clusters -> one kept document per cluster by `keep_rule`."""

    type = "🫂 - DEDUP"
    name = "🎯 MinHash clusters (keep rule)"

    def __init__(
        self,
        dups_folder: str | Path,
        signatures_folder: str | Path,
        output_folder: str | Path,
        keep_rule: Sequence[str] = ("math_score", "length"),
        number_guard_tokens: int = 512,
    ):
        super().__init__()
        self.dups_folder, self.signatures_folder = Path(dups_folder), Path(signatures_folder)
        self.output_folder = Path(output_folder)
        self.keep_rule = tuple(keep_rule)
        self.number_guard_tokens = number_guard_tokens

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        assert world_size == 1, "the cluster stage runs as one task"
        with self.track_time():
            ranks, meta, sizes = load_meta(self.signatures_folder)
            offsets = np.zeros(max(ranks, default=-1) + 2, dtype=np.int64)
            for r, size in zip(ranks, sizes, strict=True):
                offsets[r + 1] = size
            offsets = np.cumsum(offsets)
            pairs = [
                np.fromfile(f, dtype="<u4").reshape(-1, 4) for f in sorted(self.dups_folder.glob("*.dups"))
            ]
            pairs_arr = np.concatenate(pairs) if pairs else np.empty((0, 4), dtype=np.uint32)
            pairs_arr = pairs_arr[pairs_arr[:, 0] != SENTINEL]  # matches against an external index: not used
            a = offsets[pairs_arr[:, 0]] + pairs_arr[:, 1]
            b = offsets[pairs_arr[:, 2]] + pairs_arr[:, 3]
            a, b = self._number_guard(a, b, meta)
            n = int(offsets[-1])
            graph = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n))
            _, labels = connected_components(graph, directed=False)
            cluster_size = np.bincount(labels, minlength=1)[labels] if n else np.empty(0, dtype=np.int64)
            members = np.flatnonzero(cluster_size > 1)
            keepers = members[
                choose_keepers(
                    labels[members], meta["score"][members], meta["length"][members], self.keep_rule
                )
            ]
            removed = np.setdiff1d(members, keepers)
            # keepers come sorted by component label, and labels are numbered in order of each component's first
            # document, so cluster ids are stable across reruns
            cluster_id = np.full(n, SENTINEL, dtype=np.int64)
            cluster_id[members] = np.searchsorted(labels[keepers], labels[members])
            self._write(ranks, offsets, members, removed, cluster_id, cluster_size)
            self.stat_update("clusters", value=len(keepers))
            self.stat_update("docs_in_clusters", value=len(members))
            self.stat_update("to_remove", value=len(removed))

    def _number_guard(self, a: np.ndarray, b: np.ndarray, meta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Drop candidate pairs of two short documents (problem-sized) whose numbers differ.

        Why: a 200-token problem with one number changed still shares ~95% of its shingles, but it is another
        problem; long pages that differ in a date or a counter are still merged."""
        if self.number_guard_tokens <= 0 or not len(a):
            return a, b
        short = np.maximum(meta["n_tokens"][a], meta["n_tokens"][b]) <= self.number_guard_tokens
        blocked = short & (meta["num_hash"][a] != meta["num_hash"][b])
        self.stat_update("pairs_blocked_by_numbers", value=int(blocked.sum()))
        return a[~blocked], b[~blocked]

    def _write(self, ranks, offsets, members, removed, cluster_id, cluster_size) -> None:
        self.output_folder.mkdir(parents=True, exist_ok=True)
        for r in ranks:
            lo, hi = offsets[r], offsets[r + 1]
            rem = removed[(removed >= lo) & (removed < hi)] - lo
            rem.astype("<u4").tofile(self.output_folder / f"{r:06d}.remove")
            mem = members[(members >= lo) & (members < hi)]
            docs = (mem - lo).astype("<u4")
            np.stack([docs, cluster_id[mem].astype("<u4")], 1).tofile(
                self.output_folder / f"{r:06d}.clusters"
            )
            np.stack([docs, cluster_size[mem].astype("<u4")], 1).tofile(self.output_folder / f"{r:06d}.sizes")
        (self.output_folder / "keep_rule.json").write_text(json.dumps({"keep_rule": list(self.keep_rule)}))


def _read_pairs(path: Path) -> dict[int, int]:
    if not path.is_file():
        return {}
    arr = np.fromfile(path, dtype="<u4").reshape(-1, 2)
    return dict(zip(arr[:, 0].tolist(), arr[:, 1].tolist(), strict=True))


class MinhashClusterFilter(BaseFilter):
    """MinHash stage 4: drops the non-kept members of each cluster (reason `near_duplicate`); every document
    gets `minhash_cluster_id` (-1 outside clusters) and `minhash_cluster_size` (1 outside clusters)."""

    name = "🎯 MinHash filter"

    def __init__(
        self, clusters_folder: str | Path, report_folder: str | Path | None = None, exclusion_writer=None
    ):
        super().__init__(exclusion_writer=exclusion_writer)
        self.clusters_folder = Path(clusters_folder)
        self.report_folder = Path(report_folder) if report_folder else None

    def run(self, data, rank: int = 0, world_size: int = 1):
        remove_path = self.clusters_folder / f"{rank:06d}.remove"
        self._remove = set(np.fromfile(remove_path, dtype="<u4").tolist()) if remove_path.is_file() else set()
        self._clusters = _read_pairs(self.clusters_folder / f"{rank:06d}.clusters")
        self._sizes = _read_pairs(self.clusters_folder / f"{rank:06d}.sizes")
        self._idx = 0
        with open_report(self.report_folder, f"{rank:05d}.minhash.jsonl") as self._report:
            yield from super().run(data, rank, world_size)

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        idx, self._idx = self._idx, self._idx + 1
        cid = self._clusters.get(idx, -1)
        doc.metadata["minhash_cluster_id"] = cid
        doc.metadata["minhash_cluster_size"] = self._sizes.get(idx, 1)
        keep = idx not in self._remove
        if cid != -1 and self._report is not None:
            row = {
                "cluster_id": cid,
                "size": doc.metadata["minhash_cluster_size"],
                "id": doc.id,
                "kept": keep,
            }
            self._report.write(json.dumps(row) + "\n")
        if keep:
            return True
        doc.metadata["reason"] = "near_duplicate"
        return False, "near_duplicate"
