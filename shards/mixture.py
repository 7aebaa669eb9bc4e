"""Mixtures of shard sources by weight or token budget, and the blended document index the trainer reads.

A source has either a `weight` (a share of what the budgets leave of the total) or a `tokens` budget. Without a
total, weighted sources get the largest total that repeats none of them (one epoch of the scarcest). Each source
takes whole documents from seeded permutations, epoch after epoch, until its target is met (the last document
is kept or dropped, whichever lands closer; kept, with `min_tokens`, so the blend holds what a trainer consumes),
so per-source token counts are exact and reported. A source may read its stream from a later position
(`SourceStream.skip`: a decay branch goes on where the stable stage left the same shards). Documents are
interleaved by their token position within their source, so every prefix of the blend holds each source in
about its share (what a trainer that stops early, or packs sequences, needs).

The index is three arrays per blended document (source, document, size): 14 bytes a document, ~2.8 GB at 200M
documents (200B tokens); building it peaks at ~44 bytes a document (measured, 3.3M documents). With `cache_dir`,
the first process builds it under a file lock and saves it as .npy files named by a hash of the mixture and its
shards' document sizes; every other rank (and every rerun) memory-maps them, so the ranks of a node share one
copy in the page cache (Megatron caches its blend index the same way). A rank that loads it holds ~5 bytes per
document of its own (the sources' int32 sizes; the shards' sizes and offsets stay memory-mapped).

The recipe (`MixtureConfig`) and its token plan and checks are `shards.mixture_plan`'s, exported here too.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from shards.indexed import IndexedDataset
from shards.manifest import resolve_prefixes
from shards.mixture_plan import (
    MAX_BLEND_DOCUMENTS,
    MAX_REPEATS,
    MixtureConfig,
    MixtureSource,
    check_epochs,
    check_mixture_plan,
    check_repeats,
    check_token_spaces,
    plan_mixture,
    plan_tokens,
    top_up,
)

__all__ = [
    "MAX_BLEND_DOCUMENTS",
    "MAX_REPEATS",
    "BlendedDocuments",
    "MixtureConfig",
    "MixtureSource",
    "SourceStream",
    "check_epochs",
    "check_mixture_plan",
    "check_repeats",
    "check_token_spaces",
    "plan_mixture",
    "plan_tokens",
    "select_documents",
    "source_prefixes",
    "top_up",
]

log = logging.getLogger("mathmix.shards")


def select_documents(
    sizes: np.ndarray, target: int, rng: np.random.Generator, skip: int = 0, meet_target: bool = False
) -> np.ndarray:
    """Document ids whose sizes sum as close to `target` as possible, read from the source's stream: one seeded
    permutation per epoch (`rng`), from stream position `skip` (the documents an earlier stage read).

    With `meet_target` the last document is always kept: the sizes sum to at least `target` (a trainer that
    consumes the whole budget must not run out), at most one document more."""
    available = int(sizes.sum())
    if target <= 0:
        return np.zeros(0, np.int64)
    if available == 0:
        raise ValueError("source has no tokens")
    check_epochs(target, available, len(sizes))
    epoch, start = divmod(skip, len(sizes))
    for _ in range(epoch):  # the epochs an earlier stage read: drawn so the stream goes on where it left off
        rng.permutation(len(sizes))
    parts, have = [], 0
    while have < target:
        perm = rng.permutation(len(sizes))[start:]
        start = 0
        cum = have + np.cumsum(sizes[perm], dtype=np.int64)
        if cum[-1] < target:
            parts.append(perm)
            have = int(cum[-1])
            continue
        k = int(np.searchsorted(cum, target))  # cum[k] >= target
        take = k + 1
        if not meet_target and k > 0 and target - cum[k - 1] < cum[k] - target:
            take = k
        parts.append(perm[:take])
        break
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


@dataclass(frozen=True)
class SourceStream:
    """Where a source's documents are read from: its stream of seeded permutations, one per epoch
    (`np.random.default_rng([seed, crc32(key)])`), from position `skip`. A blend's own source reads
    (mixture seed, source name, 0); a decay branch goes on from where the stage it starts from left the same
    shards' stream."""

    seed: int
    key: str
    skip: int = 0

    def as_list(self) -> list[Any]:
        return [self.seed, self.key, self.skip]


def source_prefixes(spec: MixtureSource) -> tuple[str, ...]:
    """The absolute shard prefixes of a source: two sources with the same ones read the same documents."""
    return tuple(str(Path(p).resolve()) for path in spec.paths for p in resolve_prefixes(path))


class _Source:
    """The shards of one source seen as one list of documents."""

    def __init__(self, spec: MixtureSource) -> None:
        self.name = spec.name
        self.datasets = [IndexedDataset(p) for path in spec.paths for p in resolve_prefixes(path)]
        self.starts = np.cumsum([0] + [len(d) for d in self.datasets])
        sizes = [d.sizes for d in self.datasets]
        # int32 like the .idx lengths (4 bytes per document per rank); sums and cumsums widen to int64
        self.sizes = np.concatenate(sizes) if sizes else np.zeros(0, np.int32)

    def __getitem__(self, doc: int) -> np.ndarray:
        k = int(np.searchsorted(self.starts, doc, side="right")) - 1
        return self.datasets[k][doc - int(self.starts[k])]


class BlendedDocuments:
    """A deterministic blend of the documents of a mixture's sources.

    Args:
        config: the mixture.
        total_tokens: tokens in the blend (overrides `config.total_tokens`; None: see the module docstring).
        cache_dir: where the index is saved and memory-mapped from (None: built in memory).
        write_cache: with False, `cache_dir` is only read: an index saved there is memory-mapped, else the index
            is built in memory and nothing is written (the folder of a finished stage).
        min_tokens: the blend holds at least this many tokens: each source keeps the document that meets its
            target, and targets short of it (rounding) are topped up on the largest. None: each source's last
            document is kept or dropped, whichever lands closer to its target (the blend may fall short).
        streams: per source name, where its documents are read from (default: the mixture's seed and the
            source's name, from the start).

    `len()` documents; `[i]` -> tokens of the i-th document of the blend; `source_of(i)` -> its source name;
    `sizes` -> tokens per blended document; `report()` -> per-source accounting, epochs and repetition;
    `unchecked` -> the source paths whose tokenizer no manifest records (not compared with the others').
    """

    def __init__(
        self,
        config: MixtureConfig,
        total_tokens: int | None = None,
        cache_dir: str | Path | None = None,
        *,
        min_tokens: int | None = None,
        streams: dict[str, SourceStream] | None = None,
        write_cache: bool = True,
    ) -> None:
        self.config = config
        self.unchecked = check_token_spaces(config)  # paths with no manifest: their tokenizer is unknown
        self.sources = [_Source(spec) for spec in config.sources]
        self.min_tokens = min_tokens
        self.streams = {
            s.name: (streams or {}).get(s.name) or SourceStream(config.seed, s.name) for s in self.sources
        }
        available = {s.name: int(s.sizes.sum()) for s in self.sources}
        # A branch that produced nothing (e.g. every rewrite rejected) leaves an empty shard folder: its share
        # goes to the other sources, with a warning, rather than failing the whole run.
        self.empty, self.targets = plan_mixture(config, available, total_tokens)
        check_repeats(config, self.targets, available, total_tokens)
        if min_tokens is not None:
            self.targets = top_up(self.targets, min_tokens)
        for name in self.empty:
            log.warning(
                "mixture %s: source %s has no tokens; its share goes to the others", config.name, name
            )
        if cache_dir is None:
            self._source_ids, self._doc_ids, self.sizes = self._build()
        else:
            self._source_ids, self._doc_ids, self.sizes = self._cached(Path(cache_dir), write_cache)
        for row in self.report()["sources"]:
            if row["repeated"]:
                log.warning(
                    "mixture %s: source %s repeated %.2f epochs to meet its share",
                    config.name,
                    row["name"],
                    row["epochs"],
                )

    def _build(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source id, document id, size) of every blended document, in blend order."""
        config = self.config
        source_ids, doc_ids, positions = [], [], []
        for k, src in enumerate(self.sources):
            stream = self.streams[src.name]
            rng = np.random.default_rng([stream.seed, zlib.crc32(stream.key.encode())])
            try:
                docs = select_documents(
                    src.sizes,
                    self.targets[src.name],
                    rng,
                    stream.skip,
                    meet_target=self.min_tokens is not None,
                )
            except ValueError as err:
                raise ValueError(f"mixture {config.name}, source {src.name}: {err}") from None
            sizes = src.sizes[docs]
            tokens = max(int(sizes.sum()), 1)
            positions.append((np.cumsum(sizes) - sizes / 2) / tokens)  # token midpoint, fraction of source
            source_ids.append(np.full(len(docs), k, np.uint16))
            doc_ids.append(docs)
        all_sources = np.concatenate(source_ids)
        order = np.lexsort((all_sources, np.concatenate(positions)))
        del positions
        blend_sources = all_sources[order]
        blend_docs = np.concatenate(doc_ids)[order]
        del order, doc_ids
        blend_sizes = np.empty(len(blend_docs), np.int32)  # a document's tokens (Megatron's .idx keeps int32)
        for k, src in enumerate(self.sources):
            mask = blend_sources == k
            blend_sizes[mask] = src.sizes[blend_docs[mask]]
        return blend_sources, blend_docs, blend_sizes

    def cache_key(self) -> str:
        """Hash of what decides the index: the mixture, the token targets and every source's document sizes."""
        digest = hashlib.sha256()
        decided: list[Any] = [self.config.model_dump(mode="json"), self.targets]
        moved = {
            name: stream.as_list()
            for name, stream in self.streams.items()
            if stream != SourceStream(self.config.seed, name)
        }
        if self.min_tokens is not None or moved:  # left out otherwise: the index saved before they existed
            decided.append({"min_tokens": self.min_tokens, "streams": moved})
        digest.update(json.dumps(decided, sort_keys=True).encode())
        for src in self.sources:
            digest.update(np.ascontiguousarray(src.sizes).tobytes())
        return digest.hexdigest()[:20]

    def _cached(self, cache_dir: Path, write: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The index from `cache_dir` (memory-mapped), built and saved first by whichever process gets the lock;
        without `write`, built in memory where it is not saved there (each file is saved whole, by a rename)."""
        stem = f"blend-{self.cache_key()}"
        paths = [cache_dir / f"{stem}.{name}.npy" for name in ("source", "doc", "size")]
        if not write:
            if not all(p.is_file() for p in paths):
                return self._build()
            arrays = [np.load(p, mmap_mode="r") for p in paths]
            return arrays[0], arrays[1], arrays[2]
        cache_dir.mkdir(parents=True, exist_ok=True)
        with open(cache_dir / f"{stem}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # other ranks wait here while the first one builds
            if not all(p.exists() for p in paths):
                for path, array in zip(paths, self._build(), strict=True):
                    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
                    with open(tmp, "wb") as handle:
                        np.save(handle, array)
                    os.replace(tmp, path)
                log.info("mixture %s: blend index saved to %s/%s.*.npy", self.config.name, cache_dir, stem)
        arrays = [np.load(p, mmap_mode="r") for p in paths]
        return arrays[0], arrays[1], arrays[2]

    def __len__(self) -> int:
        return len(self._doc_ids)

    def __getitem__(self, i: int) -> np.ndarray:
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"blend index {i} out of range for {len(self)} documents")
        return self.sources[self._source_ids[i]][int(self._doc_ids[i])]

    def source_of(self, i: int) -> str:
        return self.sources[self._source_ids[i]].name

    def streams_after(self, doc: int, offset: int) -> dict[str, SourceStream]:
        """Each source's stream where a reader of the blend left it at stream position (`doc`, `offset`, as
        `midtrain.data.StreamPosition`): past every document it began. A reader past the end (it wrapped)
        has begun them all."""
        end = min(doc + (offset > 0), len(self))
        begun = np.bincount(np.asarray(self._source_ids[:end]), minlength=len(self.sources))
        return {
            src.name: replace(self.streams[src.name], skip=self.streams[src.name].skip + int(begun[k]))
            for k, src in enumerate(self.sources)
        }

    @property
    def num_tokens(self) -> int:
        return int(self.sizes.sum())

    def report(self) -> dict[str, Any]:
        """Per source: target and actual tokens, documents, available tokens, epochs, share, repetition."""
        total = max(self.num_tokens, 1)
        rows = []
        for k, src in enumerate(self.sources):
            mask = self._source_ids == k
            tokens = int(self.sizes[mask].sum())
            available = int(src.sizes.sum())
            epochs = tokens / available if available else 0.0
            rows.append(
                {
                    "name": src.name,
                    "target_tokens": self.targets[src.name],
                    "tokens": tokens,
                    "documents": int(mask.sum()),
                    "available_tokens": available,
                    "available_documents": len(src.sizes),
                    "share": tokens / total,
                    "epochs": round(epochs, 4),
                    "repeated": epochs > 1.0,
                    "empty": available == 0,
                }
            )
        return {
            "name": self.config.name,
            "seed": self.config.seed,
            "documents": len(self),
            "tokens": self.num_tokens,
            "sources": rows,
        }
