"""How a stage's blend is ordered (`data_plan`), and where a decay branch goes on reading each source.

A decay branch continues each source it shares with its start from where the start left it. From a stage of the
recipe that position is worked out by rebuilding the stage's blend (its mixture is in the recipe). A checkpoint
folder's mixture is nowhere to be found, so every checkpoint records, per source of its blend, the shards' key and
the stream position reached (`data_sources`): a branch starting from any checkpoint reads on from that record.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from mathmix.cli_util import first_line
from midtrain import checkpoint as ckpt
from midtrain.config import StageConfig, TrainRecipe

# How a stage's blend is ordered (recorded in its checkpoints as `data_order`; see `data_plan`). A checkpoint
# without the record is order 1: the stage resumes on the blend it began with.
DATA_ORDER = 2
# The plan's keys a stage's checkpoints record and a resume keeps (`data_note`: why a decay branch reads the
# sources it shares with its start from their start).
PLAN_KEYS = ("data_order", "data_streams", "data_note")
_log = logging.getLogger("mathmix.midtrain")


def stage_steps(recipe: TrainRecipe, stage: StageConfig) -> int:
    return max(1, stage.tokens // recipe.trainer.global_batch_tokens)


def build_documents(
    recipe: TrainRecipe,
    stage: StageConfig,
    plan: dict[str, Any] | None = None,
    cache: bool = True,
    write_cache: bool = True,
):
    """The stage's blended documents, as `plan` (`data_plan`; default: a stage that has not trained) orders them.

    With `cache` the blend index is cached in the stage folder (`blend_index/`): built once, memory-mapped by
    every rank; without `write_cache` an index cached there is read, else the index is built in memory.
    """
    from shards.mixture import BlendedDocuments, SourceStream

    plan = data_plan(recipe, stage) if plan is None else plan
    cache_dir = recipe.stage_dir(stage.name) / "blend_index" if cache else None
    mixture = stage.build_mixture(recipe.run_dir)
    if plan.get("data_order", 1) == 1:  # sized to the budget; may fall a few tokens short (the packer wraps)
        return BlendedDocuments(
            mixture, total_tokens=stage.tokens, cache_dir=cache_dir, write_cache=write_cache
        )
    consumed = stage_steps(recipe, stage) * recipe.trainer.global_batch_tokens
    streams = {name: SourceStream(*value) for name, value in plan.get("data_streams", {}).items()}
    return BlendedDocuments(
        mixture,
        total_tokens=max(stage.tokens, consumed),
        cache_dir=cache_dir,
        min_tokens=consumed + 1,  # + the target of the last window's last input
        streams=streams,
        write_cache=write_cache,
    )


def documents_plan(documents) -> dict[str, Any] | None:
    """The `data_plan` record of blended documents built by `build_documents` (None for other documents)."""
    from shards.mixture import BlendedDocuments, SourceStream

    if not isinstance(documents, BlendedDocuments):
        return None
    if documents.min_tokens is None:
        return {"data_order": 1}
    seed = documents.config.seed
    moved = {n: s.as_list() for n, s in documents.streams.items() if s != SourceStream(seed, n)}
    return {"data_order": DATA_ORDER, "data_streams": moved}


def data_plan(
    recipe: TrainRecipe, stage: StageConfig, resumed: dict[str, Any] | None = None
) -> dict[str, Any]:
    """How the stage's blend is ordered, recorded in each of its checkpoints (`data_order`, `data_streams`, and
    `data_note` where a decay branch's shared sources read from their start: `start_streams`).

    Order 2 (a stage that starts now): the blend holds what the stage consumes, and a decay branch reads each
    source that has the same shards as its start from where the start left it (`start_streams`). Order 1
    (`resumed`, a checkpoint written before the record): the blend of mathmix before, sized to the budget, every
    source read from its start: a stage resumes on the data it began with.
    """
    if resumed is not None:
        kept: dict[str, Any] = {k: resumed[k] for k in PLAN_KEYS if k in resumed}
        return kept or {"data_order": 1}
    streams, note = start_streams(recipe, stage)
    plan: dict[str, Any] = {
        "data_order": DATA_ORDER,
        "data_streams": {name: s.as_list() for name, s in streams.items()},
    }
    return plan | ({"data_note": note} if note else {})


def continued_streams(recipe: TrainRecipe, stage: StageConfig) -> dict[str, Any]:
    """For a decay branch: its sources' `SourceStream`s that go on where its start left the same shards."""
    return start_streams(recipe, stage)[0]


def start_streams(recipe: TrainRecipe, stage: StageConfig) -> tuple[dict[str, Any], str | None]:
    """(the `SourceStream` of each source of a decay branch that goes on where its `start_from` left the same
    shards; None, or one line saying why the sources it shares with its start read from their start)."""
    if stage.start_from is None:
        return {}, None
    if stage.start_from in [s.name for s in recipe.stages]:
        return _stage_streams(recipe, stage)
    return _checkpoint_streams(recipe, stage, Path(stage.start_from))


def _stage_streams(recipe: TrainRecipe, stage: StageConfig) -> tuple[dict[str, Any], str | None]:
    """`start_streams` from a stage of this recipe: each source goes on where that stage's blend left the same
    shards (what it read is known exactly: its final checkpoint's data position, else the position its planned
    steps reach); a source new to the branch reads from its start. A start-stage source the branch does not read
    needs no shards; where they are gone (the start blend cannot be rebuilt) the shared sources read from their
    start, with the note saying why. The start stage's cached blend index is read, never written."""
    from shards.mixture import source_prefixes

    start = recipe.stage(str(stage.start_from))
    branch = {spec.name: source_prefixes(spec) for spec in stage.build_mixture(recipe.run_dir).sources}
    # the start stage's sources the branch reads too: one it does not read needs no shards (they may be gone)
    shared = set(branch.values()) & {_prefixes(spec) for spec in start.build_mixture(recipe.run_dir).sources}
    if not shared:
        return {}, None
    final = ckpt.latest_state(recipe.stage_dir(start.name) / "checkpoints")
    try:  # the index cached in the start stage's folder where it trained; nothing is written there
        blend = build_documents(
            recipe, start, data_plan(recipe, start, final), final is not None, write_cache=False
        )
    except (OSError, ValueError) as err:
        return {}, (
            f"stage {stage.name}: its sources shared with stage {start.name} are read from their start: that "
            f"stage's blend cannot be rebuilt ({first_line(err)})"
        )
    if final is not None:
        position = final["data"]
    else:  # not trained yet (a plan, a test): windows of seq_len tokens, steps x batch of them
        position = _stream_position(
            blend.sizes, stage_steps(recipe, start) * recipe.trainer.global_batch_tokens
        )
    read = blend.streams_after(position["doc"], position["offset"])
    by_shards = {source_prefixes(spec): read[spec.name] for spec in blend.config.sources}
    return {name: by_shards[prefixes] for name, prefixes in branch.items() if prefixes in by_shards}, None


def _checkpoint_streams(
    recipe: TrainRecipe, stage: StageConfig, folder: Path
) -> tuple[dict[str, Any], str | None]:
    """`start_streams` from a checkpoint folder: each source goes on from the stream its checkpoint recorded for
    the same shards (`data_sources`); a source new to the branch reads from its start. A checkpoint without the
    record (written before it existed, or by a stage given its documents), or none of whose sources the branch
    reads, leaves every source at its start, with the note saying why."""
    why = f"stage {stage.name}: its sources are read from their start: start_from {folder}"
    try:
        recorded = json.loads((folder / ckpt.STATE_FILE).read_text()).get("data_sources")
    except (OSError, ValueError, AttributeError) as err:
        return {}, f"{why} has no readable {ckpt.STATE_FILE} ({first_line(err)})"
    entries = recorded.values() if isinstance(recorded, dict) else []
    by_shards = dict(pair for pair in map(_recorded_stream, entries) if pair is not None)
    if not by_shards:
        return {}, (
            f"{why} records no data position per source (`data_sources`: a checkpoint written before mathmix "
            "recorded it, or by a stage given its documents)"
        )
    branch = {spec.name: _shards_key(spec) for spec in stage.build_mixture(recipe.run_dir).sources}
    streams = {name: by_shards[key] for name, key in branch.items() if key in by_shards}
    if not streams:
        return {}, (
            f"{why} read none of the shards this stage reads (its sources: {', '.join(sorted(recorded))}; "
            "another data recipe)"
        )
    return streams, None


def _recorded_stream(entry: Any) -> tuple[str, Any] | None:
    """(shards key, `SourceStream`) of one `data_sources` entry, or None for one that is not well formed."""
    from shards.mixture import SourceStream

    if not isinstance(entry, dict) or not isinstance(entry.get("shards"), str):
        return None
    stream = entry.get("stream")
    if not (isinstance(stream, list) and [type(v) for v in stream] == [int, str, int] and stream[2] >= 0):
        return None
    return entry["shards"], SourceStream(*stream)


def source_keys(documents) -> dict[str, str | None] | None:
    """Per source of blended documents, the key of its shards (`data_sources`); None for other documents."""
    from shards.mixture import BlendedDocuments

    if not isinstance(documents, BlendedDocuments):
        return None
    return {spec.name: _shards_key(spec) for spec in documents.config.sources}


def data_sources(documents, position: dict[str, int], keys: dict[str, str | None]) -> dict[str, Any]:
    """The checkpoint record `data_sources`: per source of the blend (`keys`: `source_keys`), its shards' key and
    its stream (`[seed, stream name, documents begun]`) where a reader at the packer's `position` left it."""
    read = documents.streams_after(position["doc"], position["offset"])
    return {name: {"shards": key, "stream": read[name].as_list()} for name, key in keys.items()}


def _shards_key(spec) -> str | None:
    """A short digest of a source's absolute shard prefixes (two sources with the same ones read the same
    documents), or None where its shards cannot be found."""
    prefixes = _prefixes(spec)
    if prefixes is None:
        return None
    return hashlib.sha256(json.dumps(list(prefixes)).encode()).hexdigest()[:16]


def _prefixes(spec) -> tuple[str, ...] | None:
    """`source_prefixes`, or None for a source whose shards cannot be found (they match no source of a branch
    that reads them: its own would not be found either)."""
    from shards.mixture import source_prefixes

    try:
        return source_prefixes(spec)
    except (OSError, ValueError):
        return None


def _stream_position(sizes, tokens: int) -> dict[str, int]:
    """The packer's position (doc, offset) after `tokens` tokens of documents of these sizes (wrapping)."""
    import numpy as np

    total = int(sizes.sum())
    laps, tokens = divmod(tokens, total)
    ends = np.cumsum(sizes, dtype=np.int64)
    doc = int(np.searchsorted(ends, tokens, side="right"))
    offset = tokens - (int(ends[doc - 1]) if doc else 0)
    return {"doc": laps * len(sizes) + doc, "offset": offset}
