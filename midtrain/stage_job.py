"""What a stage folder was trained with, recorded in STAGE/job.json (pipelines.job_record) before it trains.

A rerun into the same output folder resumes a stage from its checkpoints, or skips it when done.json exists: with
a changed recipe it used to print the old result (or fail inside checkpoint loading). The record holds what decides
a stage's result: the model, the optimizer and schedule, the data mixture, the seed, and for a decay branch the
stage it starts from. What a resume may change without changing the result is left out: logging and checkpoint
intervals, micro-batch size, device and number of processes (every rank count walks the same global batches).

The data is recorded by what the shards hold, not only by their paths: paths inside the run folder are written as
`{run_dir}/...` (a run folder moved elsewhere still resumes), so a recipe copy whose `run_dir` has other shards
used to resume the saved stream position on another blend. Each source's `shards.NAME.*` (documents, tokens, a
digest of its files, the tokenizer fingerprint its manifests record) tells them apart.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from midtrain.config import StageConfig, TrainRecipe, TrainRecipeError

MODEL_KEYS = {"path", "config", "tokenizer"}
TRAINER_KEYS = {"seq_len", "global_batch_tokens", "intra_document", "lr", "min_lr_ratio", "weight_decay",
                "betas", "eps", "grad_clip", "seed"}  # fmt: skip
# Settings a stable stage never uses (its LR never reaches the floor): a decay branch added with another floor
# used to be refused for the finished stable stage it starts from. Older stable records holding them still match.
DECAY_ONLY = {"min_lr_ratio"}


def _unused(stage: StageConfig) -> set[str]:
    """The flat settings keys that do not make STAGE's job (`trainer.min_lr_ratio` for a stable stage)."""
    return {f"trainer.{key}" for key in DECAY_ONLY} if stage.kind == "stable" else set()


# The shard identity's keys (`shards.NAME.*`, `start.shards.NAME.*` for a decay stage's start); a mixture source
# that is itself named `shards` (`mixture.sources.shards.*`) is not one of them.
SHARD_KEY = re.compile(r"^(start\.)*shards\.")


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested settings as dotted keys (`model.config.hidden_size`), mixture sources keyed by name, so that a
    refusal names the one value that changed rather than printing whole sections."""
    if isinstance(value, dict):
        if not value:
            return {prefix.rstrip("."): value} if prefix else {}
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}{key}.").items()}
    if isinstance(value, list) and value and all(isinstance(x, dict) and "name" in x for x in value):
        return _flat({x["name"]: x for x in value}, prefix)
    return {prefix.rstrip("."): value}


def shard_identity(paths: list[str]) -> dict[str, Any] | None:
    """What one source's shards hold, wherever they lie: documents, tokens, `sha256` (16 hex digits over each
    shard file's name, sizes and checksums: the manifest's where it records them, else the .idx file's own hash
    and the .bin file's size) and the `tokenizer_sha256` of its manifests. None where a path names no readable
    shards (the preflight names that problem)."""
    from shards.indexed import index_counts, read_index
    from shards.manifest import MANIFEST, resolve_prefixes, sha256_file

    digest, documents, tokens, prints = hashlib.sha256(), 0, 0, set()
    try:
        for path in paths:
            folder = Path(path)
            manifest = _manifest(folder / MANIFEST) if folder.is_dir() else None
            entries = {f.get("prefix"): f for f in (manifest or {}).get("files", []) if isinstance(f, dict)}
            if manifest and manifest.get("tokenizer_sha256"):
                prints.add(manifest["tokenizer_sha256"])
            for prefix in resolve_prefixes(path):
                name = str(Path(prefix).relative_to(folder)) if folder.is_dir() else Path(prefix).name
                entry = entries.get(name, {})
                n_docs, n_tokens = index_counts(read_index(prefix + ".idx"))
                idx_sha = (entry.get("idx") or {}).get("sha256") or sha256_file(prefix + ".idx")
                bin_id = (entry.get("bin") or {}).get("sha256") or Path(prefix + ".bin").stat().st_size
                digest.update(json.dumps([name, n_docs, n_tokens, idx_sha, bin_id]).encode())
                documents, tokens = documents + n_docs, tokens + n_tokens
    except (OSError, ValueError):  # FileNotFoundError, IndexFormatError, a manifest that is not JSON
        return None
    identity: dict[str, Any] = {"documents": documents, "tokens": tokens, "sha256": digest.hexdigest()[:16]}
    if prints:
        identity["tokenizer_sha256"] = prints.pop() if len(prints) == 1 else sorted(prints)
    return identity


def _manifest(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text())
    return manifest if isinstance(manifest, dict) else None


def _stage_settings(
    recipe: TrainRecipe, stage: StageConfig, recorded: dict[str, Any] | None, prefix: str = ""
) -> dict[str, Any]:
    """The settings of `stage` (nested); `recorded`: the flat settings of the folder's job.json, whose shard
    identities stand in for shards that are gone (a finished stage needs none), or None to record none."""
    # Values at their defaults are left out (here and below): a setting added later is not a different job.
    config = stage.build_mixture(recipe.run_dir)
    mixture = config.model_dump(mode="json", exclude_defaults=True)
    for source in mixture["sources"]:
        source["paths"] = [str(Path(p).resolve()) for p in source["paths"]]
    settings = {
        "stage": stage.model_dump(mode="json", exclude={"mixture"}, exclude_defaults=True)
        | {"lr": stage.lr or recipe.trainer.lr},
        "mixture": mixture,
    }
    if recorded is not None:
        settings["shards"] = {}
        for source in config.sources:
            identity = shard_identity(source.paths)
            if identity is None:  # the recorded one, if any: nothing here to compare it with
                key = f"{prefix}shards.{source.name}."
                identity = {k[len(key) :]: v for k, v in recorded.items() if k.startswith(key)}
            if identity:
                settings["shards"][source.name] = identity
    names = [s.name for s in recipe.stages]
    if stage.start_from in names:
        start = recipe.stage(stage.start_from)
        settings["start"] = _stage_settings(recipe, start, recorded, f"{prefix}start.")
    elif stage.start_from is not None:
        settings["stage"]["start_from"] = str(Path(stage.start_from).resolve())
    return settings


def stage_identity(
    recipe: TrainRecipe, stage: StageConfig, recorded: dict[str, Any] | None = None, shards: bool = True
) -> dict[str, Any]:
    """The job identity of a stage folder: flat settings, paths under run_dir written as `{run_dir}`, and the
    shards' identity (`shards.NAME.*`, unless `shards` is false); `recorded` as in `_stage_settings`."""
    from pipelines.job_record import job_identity

    settings = {
        "model": recipe.model.model_dump(mode="json", include=MODEL_KEYS, exclude_defaults=True),
        "trainer": recipe.trainer.model_dump(
            mode="json",
            include=TRAINER_KEYS - (DECAY_ONLY if stage.kind == "stable" else set()),
            exclude_defaults=True,
        ),
        **_stage_settings(recipe, stage, (recorded or {}) if shards else None),
    }
    return job_identity([], _flat(settings), run_dir=recipe.run_dir)


def check_stage_job(recipe: TrainRecipe, stage: StageConfig, record: bool) -> None:
    """Refuse (TrainRecipeError) a stage folder trained with other settings or on other shards; with `record`,
    write its job.json when it has none (only one process should record)."""
    from pipelines.job_record import JOB_FILE, check_job

    check_start_stage(recipe, stage)
    stage_dir = recipe.stage_dir(stage.name)
    if not record and not (stage_dir / JOB_FILE).is_file():
        return
    identity, _ = _folder_identity(recipe, stage)
    try:
        check_job(
            stage_dir,
            identity,
            what=f"training stage ({stage.name})",
            ignore=_unused(stage),
            run_dir=recipe.run_dir,
        )
    except ValueError as err:
        raise TrainRecipeError(str(err)) from None


def _folder_identity(recipe: TrainRecipe, stage: StageConfig) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the identity the recipe gives STAGE, as its folder's record would hold it; the folder's job.json or None)."""
    from pipelines.job_record import JOB_FILE, has_progress

    stage_dir = recipe.stage_dir(stage.name)
    recorded = _recorded_settings(stage_dir / JOB_FILE)
    # A record written before shard identities were kept cannot tell the shards apart: its stage is compared
    # on its settings alone (not refused for lacking them); one without progress is simply recorded anew.
    legacy = (
        recorded is not None and not any(SHARD_KEY.match(k) for k in recorded) and has_progress(stage_dir)
    )
    try:
        previous = json.loads((stage_dir / JOB_FILE).read_text())
    except (OSError, ValueError):
        previous = None
    return stage_identity(recipe, stage, recorded, shards=not legacy), previous


def check_start_stage(recipe: TrainRecipe, stage: StageConfig) -> None:
    """Refuse (TrainRecipeError) a decay stage whose start stage's folder was trained with other settings than the
    recipe now gives it: run alone (`--stage decay`), the branch trained from the old checkpoint while recording
    the recipe's new start settings as its provenance."""
    from pipelines.job_record import LATER_FIELDS, describe_difference, has_progress, without_settings

    if stage.start_from not in [s.name for s in recipe.stages]:
        return
    start = recipe.stage(stage.start_from)
    if not has_progress(recipe.stage_dir(start.name)):
        return  # nothing trained yet: a full run trains it first (a decay stage alone is refused as too early)
    identity, previous = _folder_identity(recipe, start)
    previous = without_settings(previous, _unused(start))
    if not isinstance(previous, dict):
        return  # a folder from before job records: nothing to compare with
    seen = {k: v for k, v in identity.items() if k in previous or k not in LATER_FIELDS}
    if previous != seen:
        raise TrainRecipeError(
            f"stage {stage.name} starts from stage {start.name}, whose folder {recipe.stage_dir(start.name)} was "
            f"trained with other settings than the recipe now gives it ({describe_difference(previous, identity)}); "
            f"put them back, or train {start.name} again into another run_dir"
        )


def _recorded_settings(path: Path) -> dict[str, Any] | None:
    """The flat settings of a stage's job.json; None where there is none (or it is unreadable)."""
    try:
        settings = json.loads(path.read_text()).get("settings")
    except (OSError, ValueError, AttributeError):
        return None
    return settings if isinstance(settings, dict) else None
