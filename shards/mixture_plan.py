"""Mixture recipes and their token plan: sources by weight or token budget, each source's token target, and the
checks made before any blend index is built (budgets over the total, a source repeated past reason, shards from
different tokenizers).

Split from `shards.mixture` (the blend index the trainer reads), which still exports every name here; the
checks need the shards' index files alone, so `mathmix train`'s preflight runs them without building a blend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shards.manifest import MANIFEST, read_manifest, resolve_prefixes, token_space_difference

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
