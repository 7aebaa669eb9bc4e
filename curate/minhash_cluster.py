"""MinHash stages 3 and 4: clusters from duplicate pairs with a keep rule, then the filter that applies them.

`MinhashClusterByRule` reads datatrove's `.dups` files (pairs `<4I`: file, doc, file, doc) and writes datatrove's
cluster outputs (`RANK.remove` `<I` sorted, `RANK.clusters` and `RANK.sizes` `<2I` pairs (doc, value)), so
datatrove's own `MinhashDedupFilter` could read them too. Unlike datatrove's cluster step (which keeps the first
document seen), it keeps the best document of each cluster by a rule over the per-document score and length the
signature step wrote (`meta/RANK.npy`), and it finds clusters with scipy's connected components instead of a
Python union-find, so a million documents cluster in seconds.

Before the components, each candidate pair is taken once (the bucket stage writes it once per band), and two
checks drop pairs that are not near-duplicates:
- the number guard: two problem-sized documents (both at most `number_guard_tokens` tokens outside `[asy]`
  drawings) whose math tokens differ (numbers, operators, one-letter variables: an order-free hash) are other
  problems, however many shingles they share. The limit is 256 by default, measured: 99.3% of the 42,850 benchmark
  problems in ../shared/data have at most 256 tokens (GSM8K at most 184), 83% of the 333 real pages have more
  (median 792), and the MATH problems above it are nearly all Asymptote code, which is not counted (8 of them
  merged with a problem whose numbers differ when it was). At the former 512, 2 of the 11 gold pages copied with
  another view count and copyright year were kept apart (3 with the tokens before operators), and so were most of
  the planted page copies that `bench_dedup_quality` missed (recall 0.925 with the math-token guard). Comparing
  only the numbers inside math would not do: GSM8K's numbers are in its prose;
- the Jaccard check: a pair of two documents whose shingle sets the signature step kept (at most 512 tokens) and
  whose exact Jaccard is below `threshold` (the bands' and rows' even-odds point) is dropped, so no cluster
  chains through a pair LSH proposed by chance.
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


_PAIR_CHUNK = 16384  # candidate pairs confirmed at once (~16k x 2 x 130 shingles: ~35 MB of keys)


def distinct_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each unordered pair once (the bucket stage writes a pair once per band it agrees in), lower index first."""
    lo, hi = np.minimum(a, b).astype(np.uint64), np.maximum(a, b).astype(np.uint64)
    keys = np.unique((lo << np.uint64(32)) | hi)
    lo, hi = (keys >> np.uint64(32)).astype(np.int64), (keys & np.uint64(0xFFFFFFFF)).astype(np.int64)
    return lo[lo != hi], hi[lo != hi]


class StoredShingleSets:
    """The shingle sets the signature step kept (`shingles/RANK.u32` + `RANK.sizes.npy`), memory-mapped: only the
    documents of the pairs confirmed are read. `sizes` (global document index) is 0 where no set was kept (a long
    document, or a folder written before the sets were)."""

    def __init__(self, folder: Path, ranks: list[int], offsets: np.ndarray):
        n = int(offsets[-1]) if len(offsets) else 0
        self.sizes = np.zeros(n, dtype=np.int32)  # 16 bytes per document in all
        self.starts = np.zeros(n, dtype=np.int64)  # where each set starts in its rank's file
        self.file_of = np.zeros(n, dtype=np.int32)
        self.files: list[np.ndarray] = []
        for r in ranks:
            values, size_path = folder / f"{r:05d}.u32", folder / f"{r:05d}.sizes.npy"
            lo, hi = offsets[r], offsets[r + 1]
            if not size_path.is_file() or not values.is_file():
                continue
            sizes = np.load(size_path).astype(np.int64)
            if len(sizes) != hi - lo or sizes.sum() * 4 != values.stat().st_size:
                continue  # not this signature run's: no confirmation for its documents
            self.sizes[lo:hi] = sizes
            self.starts[lo:hi] = np.cumsum(sizes) - sizes
            self.file_of[lo:hi] = len(self.files)
            self.files.append(
                np.memmap(values, dtype=np.uint32, mode="r") if sizes.sum() else np.empty(0, dtype=np.uint32)
            )

    def gather(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the sets of `docs` concatenated, their sizes)."""
        sizes = self.sizes[docs].astype(np.int64)
        out = np.empty(int(sizes.sum()), dtype=np.uint32)
        dst_start = np.cumsum(sizes) - sizes
        file_of = self.file_of[docs]
        for k in np.unique(file_of):
            m = file_of == k
            s = sizes[m]
            within = np.arange(int(s.sum())) - np.repeat(np.cumsum(s) - s, s)
            out[np.repeat(dst_start[m], s) + within] = self.files[k][
                np.repeat(self.starts[docs[m]], s) + within
            ]
        return out, sizes

    def jaccard(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Exact Jaccard of the shingle sets of each pair (a[i], b[i])."""
        va, sa = self.gather(a)
        vb, sb = self.gather(b)
        pair = np.arange(len(a), dtype=np.uint64)
        keys = np.concatenate(
            [(np.repeat(pair, sa) << np.uint64(32)) | va, (np.repeat(pair, sb) << np.uint64(32)) | vb]
        )
        keys.sort()
        same = keys[1:][
            keys[1:] == keys[:-1]
        ]  # each set holds a shingle once: equal keys are shared shingles
        inter = np.bincount((same >> np.uint64(32)).astype(np.int64), minlength=len(a))
        return inter / np.maximum(sa + sb - inter, 1)


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
        number_guard_tokens: int = 256,
        threshold: float = 0.0,
    ):
        super().__init__()
        self.dups_folder, self.signatures_folder = Path(dups_folder), Path(signatures_folder)
        self.output_folder = Path(output_folder)
        self.keep_rule = tuple(keep_rule)
        self.number_guard_tokens = number_guard_tokens
        self.threshold = threshold

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
            a, b = distinct_pairs(
                offsets[pairs_arr[:, 0]] + pairs_arr[:, 1], offsets[pairs_arr[:, 2]] + pairs_arr[:, 3]
            )
            self.stat_update("candidate_pairs", value=len(a))
            a, b = self._number_guard(a, b, meta)
            a, b = self._confirm(a, b, ranks, offsets)
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
        """Drop candidate pairs of two problem-sized documents whose math tokens (numbers, operators, one-letter
        variables) differ.

        Why: a 200-token problem with one number, sign or variable changed still shares ~95% of its shingles,
        but it is another problem; pages that differ in a date or a counter are still merged."""
        if self.number_guard_tokens <= 0 or not len(a):
            return a, b
        short = np.maximum(meta["n_tokens"][a], meta["n_tokens"][b]) <= self.number_guard_tokens
        blocked = short & (meta["num_hash"][a] != meta["num_hash"][b])
        self.stat_update("pairs_blocked_by_numbers", value=int(blocked.sum()))
        return a[~blocked], b[~blocked]

    def _confirm(
        self, a: np.ndarray, b: np.ndarray, ranks: list[int], offsets: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Drop candidate pairs of two short documents whose true shingle-set Jaccard is below the threshold.

        Why: LSH makes a pair of Jaccard J a candidate with probability 1 - (1 - J^rows)^bands, 10% at J = 0.63,
        where two short problems that differ in one word or variable lie (`the value of y` / `of x`, `Find
        $\\cos C$` / `$\\cos A$`); among thousands of templated problems some always meet, and components chained
        17 different `arrange the letters of the word ...` problems into one cluster. Every edge of a cluster is
        now a pair at or above the threshold wherever both documents are short (their sets are on disk)."""
        if self.threshold <= 0 or not len(a):
            return a, b
        sets = StoredShingleSets(self.signatures_folder / "shingles", ranks, offsets)
        both = np.flatnonzero((sets.sizes[a] > 0) & (sets.sizes[b] > 0))
        keep = np.ones(len(a), dtype=bool)
        for c0 in range(0, len(both), _PAIR_CHUNK):
            sel = both[c0 : c0 + _PAIR_CHUNK]
            keep[sel] = sets.jaccard(a[sel], b[sel]) >= self.threshold
        self.stat_update("pairs_below_threshold", value=int((~keep).sum()))
        return a[keep], b[keep]

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
