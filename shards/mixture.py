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
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shards.indexed import IndexedDataset
from shards.manifest import MANIFEST, read_manifest, resolve_prefixes, token_space_difference

log = logging.getLogger("mathmix.shards")
MAX_BLEND_DOCUMENTS = 500_000_000  # ~14 bytes of index per document: beyond this it is surely a mistake
# A source repeated more often than this is a typo'd total (1e11 over an 80k-token source built a 16 GB index for
# 48 s, "repeated x1256170", exit 0), not a plan: no training gains from a thousand passes over the same text.
MAX_REPEATS = 1000


class MixtureSource(BaseModel):
    """One source of a mixture: shard prefixes or shard folders, and a weight or a token budget."""

    model_config = ConfigDict(extra="forbid")

    name: str
    paths: list[str] = Field(min_length=1, description="shard prefixes, or shard folders with manifest.json")
    weight: float | None = Field(None, gt=0, description="share of the tokens the budgets leave")
    tokens: int | None = Field(None, gt=0, description="fixed token budget")
    note: str | None = None

    @model_validator(mode="after")
    def _weight_or_tokens(self) -> MixtureSource:
        if (self.weight is None) == (self.tokens is None):
            raise ValueError(f"source {self.name!r}: give exactly one of weight or tokens")
        return self


class MixtureConfig(BaseModel):
    """A mixture recipe: sources, a seed, and an optional total token count."""

    model_config = ConfigDict(extra="forbid")

    name: str = "mixture"
    description: str | None = None
    seed: int = 1234
    total_tokens: int | None = Field(None, gt=0)
    sources: list[MixtureSource] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> MixtureConfig:
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"source names must be unique, got {names}")
        return self

    @classmethod
    def from_yaml(cls, path: str | Path, run_dir: str | Path | None = None) -> MixtureConfig:
        """Load a mixture YAML; `{run_dir}` in source paths becomes `run_dir`.

        Raises:
            ValueError: not YAML, or not a mapping (a pydantic ValidationError for bad keys and values).
        """
        from mathmix.yaml_files import load_yaml

        raw = load_yaml(Path(path).read_text(), path)
        if not isinstance(raw, dict):
            raise ValueError("a mixture is a mapping with keys name, total_tokens, sources")
        config = cls.model_validate(raw)  # first: the substitution below relies on its shape
        if run_dir is not None:
            for source in config.sources:
                source.paths = [p.replace("{run_dir}", str(run_dir)) for p in source.paths]
        return config


def plan_tokens(config: MixtureConfig, available: dict[str, int], total_tokens: int | None) -> dict[str, int]:
    """Target tokens per source: budgets as given, the rest of the total shared by weight."""
    budgets = {s.name: s.tokens for s in config.sources if s.tokens is not None}
    weights = {s.name: s.weight for s in config.sources if s.weight is not None}
    wsum = sum(weights.values())
    total = total_tokens or config.total_tokens
    if total is None:
        # the largest total that needs no repetition of any weighted source
        rest = min((available[n] * wsum / w for n, w in weights.items()), default=0)
    else:
        rest = total - sum(budgets.values())
        if rest < 0:
            raise ValueError(f"token budgets ({sum(budgets.values()):,}) exceed total_tokens ({total:,})")
        if rest and not weights:
            raise ValueError(
                f"total_tokens {total:,} != sum of budgets and no weighted source takes the rest"
            )
    targets = dict(budgets)
    targets.update({n: int(round(rest * w / wsum)) for n, w in weights.items()})
    if total is None:  # float rounding must not push the scarcest source into a second epoch
        targets.update({n: min(targets[n], available[n]) for n in weights})
    return {s.name: targets[s.name] for s in config.sources}


def check_epochs(target: int, available: int, documents: int) -> None:
    """Raise ValueError where meeting `target` tokens from a source of `available` tokens in `documents` documents
    takes more epochs than a blend index can hold (MAX_BLEND_DOCUMENTS)."""
    full = target // available if available else 0
    if target > 0 and (full + 1) * documents > MAX_BLEND_DOCUMENTS:
        raise ValueError(
            f"{target:,} tokens from a source of {available:,} means {full + 1:,} epochs "
            f"({(full + 1) * documents:,} documents): lower the total or this source's share"
        )


def check_repeats(
    config: MixtureConfig, targets: dict[str, int], available: dict[str, int], total_tokens: int | None
) -> None:
    """Raise ValueError (one line, naming the source, its repeat factor and the total) where a source's target is
    more than MAX_REPEATS times the tokens it has: surely a mistyped total or budget, before any index is built."""
    total = total_tokens or config.total_tokens
    for name, target in targets.items():
        have = available.get(name, 0)
        if have and target > MAX_REPEATS * have:
            asked = f"total_tokens {total:,}" if total else "its token budget"
            factor = f"{target / have:,.0f}"
            raise ValueError(
                f"mixture {config.name}, source {name}: repeated x{factor} ({factor} epochs: {target:,} tokens from "
                f"a source of {have:,}) for {asked}; more than {MAX_REPEATS:,} repeats is surely a mistake: check "
                "total_tokens (or --total-tokens) and the source's share"
            )


def plan_mixture(
    config: MixtureConfig, available: dict[str, int], total_tokens: int | None
) -> tuple[list[str], dict[str, int]]:
    """(the empty sources, the token target of every source): an empty source's share goes to the others."""
    empty = [name for name, n in available.items() if n == 0]
    if len(empty) == len(config.sources):
        raise ValueError(f"mixture {config.name}: every source is empty ({empty})")
    kept = config.model_copy(update={"sources": [s for s in config.sources if s.name not in empty]})
    return empty, plan_tokens(kept, available, total_tokens) | {name: 0 for name in empty}


def check_mixture_plan(config: MixtureConfig, total_tokens: int | None) -> dict[str, int]:
    """The token targets `BlendedDocuments(config, total_tokens)` takes, from the shards' index files alone (no
    permutation, no token read), raising the ValueError that building the blend would raise: budgets over the
    total, every source empty, a source repeated past what a blend index holds. For checks before a run."""
    from shards.indexed import index_counts, read_index

    available, documents = {}, {}
    for spec in config.sources:
        tokens = docs = 0
        for path in spec.paths:
            for prefix in resolve_prefixes(path):
                n_docs, n_tokens = index_counts(read_index(prefix + ".idx"))
                tokens, docs = tokens + n_tokens, docs + n_docs
        available[spec.name], documents[spec.name] = tokens, docs
    _, targets = plan_mixture(config, available, total_tokens)
    check_repeats(config, targets, available, total_tokens)
    for name, target in targets.items():
        try:
            check_epochs(target, available[name], documents[name])
        except ValueError as err:
            raise ValueError(f"mixture {config.name}, source {name}: {err}") from None
    return targets


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


def top_up(targets: dict[str, int], min_tokens: int) -> dict[str, int]:
    """`targets` with what they fall short of `min_tokens` (weights rounded down, a budget that is not a whole
    number of steps: a few tokens) added to the largest one."""
    short = min_tokens - sum(targets.values())
    if short <= 0:
        return targets
    largest = max(targets, key=lambda name: targets[name])
    return targets | {largest: targets[largest] + short}


def check_token_spaces(config: MixtureConfig) -> list[str]:
    """Refuse a mixture whose shard folders were tokenized differently (`token_space_difference` between their
    manifests): blending them would train on two id spaces at once without any error. A PREFIX is checked by
    the manifest of its folder; shards with no manifest.json anywhere are not (nothing records their tokenizer):
    returns those paths.
    """
    first: tuple[str, dict[str, Any]] | None = None
    unchecked = []
    for spec in config.sources:
        for path in spec.paths:
            folder = Path(path) if Path(path).is_dir() else Path(path).parent  # PREFIX[.bin|.idx]: its folder
            if not (folder / MANIFEST).is_file():
                unchecked.append(str(path))
                continue
            manifest = read_manifest(folder)
            if first is None:
                first = (str(path), manifest)
            elif token_space_difference(first[1], manifest):
                described = "; ".join(
                    f"{where}: {_token_space(m)}" for where, m in (first, (str(path), manifest))
                )
                raise ValueError(
                    f"mixture {config.name}: its shards come from different tokenizers ({described})"
                )
    return unchecked


def _token_space(manifest: dict[str, Any]) -> str:
    tokenizer = manifest.get("tokenizer_sha256") or manifest.get("tokenizer")
    return f"tokenizer {tokenizer}, vocab {manifest.get('vocab_size')}, eos {manifest.get('eos_id')}"


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
