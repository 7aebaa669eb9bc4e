"""The data of a stage as Megatron-LM reads it: each mixture source's share and shard prefixes, the weighted
`--data-path` they make, and the comment lines on what a decay branch reads (`data_note`).

Split off `midtrain.megatron` (which re-exports every name): the command lines are there, the data here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from midtrain.config import StageConfig, TrainRecipe, TrainRecipeError

if TYPE_CHECKING:
    from shards.mixture_plan import MixtureConfig


@dataclass
class SourceShards:
    """One mixture source of a stage as Megatron reads it: its share of the stage, its shard prefixes (absolute)
    and their tokens (None where the shards are not built yet)."""

    name: str
    share: float
    prefixes: list[str]
    tokens: list[int] | None


def stage_sources(recipe: TrainRecipe, stage: StageConfig) -> list[SourceShards]:
    """Each source of the stage's mixture: its share (token budgets first, weights share the rest), and its
    shard files by the shard manifests (or the paths as given, where nothing is built there yet). The empty
    sources are those of the trainer's plan (`shards.mixture_plan.plan_mixture`): share 0, theirs goes to the
    others, whose shares are the plan's targets before rounding to whole tokens.

    Raises:
        TrainRecipeError: a mixture the trainer's plan refuses (every source empty, budgets over the stage).
    """
    from shards.indexed import IndexedDataset
    from shards.manifest import resolve_prefixes

    mixture = stage.build_mixture(recipe.run_dir)
    found = []
    for source in mixture.sources:
        try:
            prefixes = [p for path in source.paths for p in resolve_prefixes(path)]
            tokens: list[int] | None = [IndexedDataset(p).num_tokens for p in prefixes]
        except FileNotFoundError:  # shards not built yet: the paths as given (`emit` says so)
            prefixes, tokens = list(source.paths), None
        # absolute: Megatron resolves a relative prefix against the folder the command is run from
        found.append(SourceShards(source.name, 0.0, [os.path.abspath(p) for p in prefixes], tokens))
    empty = _empty_sources(stage, mixture, found)
    kept = [s for s in mixture.sources if s.name not in empty]
    budgets = {s.name: s.tokens for s in kept if s.tokens is not None}
    rest = max(0.0, 1.0 - sum(budgets.values()) / stage.tokens)
    wsum = sum(s.weight for s in kept if s.weight is not None) or 1.0
    for source, shards in zip(mixture.sources, found, strict=True):
        if source.name not in empty:
            weight = source.weight or 0.0
            shards.share = (
                budgets[source.name] / stage.tokens if source.name in budgets else rest * weight / wsum
            )
    return found


def _empty_sources(stage: StageConfig, mixture: MixtureConfig, found: list[SourceShards]) -> list[str]:
    """The sources the trainer's plan leaves out as empty (none while some shards are not built: unknown)."""
    from shards.mixture_plan import plan_mixture

    if any(s.tokens is None for s in found):
        return []
    try:
        empty, _ = plan_mixture(mixture, {s.name: sum(s.tokens or []) for s in found}, stage.tokens)
    except ValueError as err:  # as the trainer's preflight words it (midtrain.preflight.check_mixture)
        message = re.sub(r"\btotal_tokens\b", f"stage {stage.name}'s tokens", str(err))
        raise TrainRecipeError(f"--emit megatron: stage {stage.name}: {message}") from None
    return empty


def data_path_args(
    recipe: TrainRecipe, stage: StageConfig, sources: list[SourceShards] | None = None
) -> list[str]:
    """Weighted `--data-path w1 prefix1 w2 prefix2 ...`: each source's share split over its shard files by tokens.
    SOURCES: `stage_sources(recipe, stage)`, where already read."""
    args: list[str] = []
    for source in stage_sources(recipe, stage) if sources is None else sources:
        if source.tokens is not None and not sum(source.tokens):  # empty: its share goes to the others
            continue
        tokens = source.tokens or [1] * len(source.prefixes)
        total = sum(tokens) or 1
        for prefix, n in zip(source.prefixes, tokens, strict=True):
            args += [f"{source.share * n / total:.6g}", prefix]
    return args


def data_note(recipe: TrainRecipe, sources: list[SourceShards], base: int, samples: int) -> list[str]:
    """Comment lines on what a decay branch's data is in Megatron: the branch continues the stable checkpoint's
    consumed_train_samples (BASE), so Megatron builds each source's dataset for BASE + SAMPLES samples at its share
    and reads only the last SAMPLES. A dataset larger than a source is several epochs shuffled together
    (megatron/core/datasets/gpt_dataset.py: the document index tiles the epochs and shuffles them globally, but a
    short final one), so the window is a random draw: a document is read Binomial(epochs, SAMPLES / (BASE +
    SAMPLES)) times, where mathmix's trainer reads each once per pass over the source."""
    t = recipe.trainer
    total = base + samples
    f = samples / total
    lines = [
        f"# data: the branch goes on from consumed_train_samples {base:,} of the checkpoint it starts from, so",
        f"# Megatron builds each source's dataset for --train-samples {total:,} (~{total / samples:.0f}x the branch) "
        "at its share",
        f"# and the branch reads only the last {samples:,} samples. Where a source holds less than that, Megatron",
        "# shuffles its epochs together and the branch reads a random draw with repeats, not each document once",
        "# as mathmix's trainer does; no Megatron flag resets consumed samples and keeps the optimizer state.",
        "# Per source (tokens in its shards; epochs Megatron builds; the branch's reads, in multiples of its size):",
    ]
    for source in sources:
        if source.tokens is None:
            lines.append(
                f"#   {source.name}: share {source.share:.3g}, shards not built (emit again once they are)"
            )
            continue
        have = sum(source.tokens)
        if not have:  # left out of --data-path (stage_sources)
            lines.append(f"#   {source.name}: no tokens; its share goes to the others")
            continue
        epochs = total * source.share * t.seq_len / max(1, have)
        reads = samples * source.share * t.seq_len / max(1, have)  # expected reads of a document
        if epochs <= 1:  # one shuffled epoch: the window holds distinct samples
            what = f"{min(1.0, reads):.0%} of it read once, none twice"
        else:
            never = (1 - f) ** epochs
            once = epochs * f * (1 - f) ** (epochs - 1)
            what = f"about {never:.0%} of it never read, {max(0.0, 1 - never - once):.0%} read twice or more"
        lines.append(
            f"#   {source.name}: {have:,} tokens, share {source.share:.3g}: {epochs:.2f} epochs built, {reads:.2f}x "
            f"read: {what}"
        )
    return lines
