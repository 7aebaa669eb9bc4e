"""What a recipe stage's record holds (`stage_identity`), the older forms of it that are the same stage
(`earlier_stage_identities`, `_superseded`) and the digests of the files a stage reads besides its inputs.

Apart from `runner` because the identity is what a stage is, whatever order the run takes; `stage_records`
compares it with the record in the stage folder.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from pipelines.job_record import (
    MODEL_SNAPSHOT,
    OUTPUTS_KEY,
    file_digest,
    job_identity,
    weights_digest,
    without_settings,
    yaml_digest,
)
from pipelines.recipe import Recipe
from pipelines.stage_records import RECIPE_STAGE_FILE
from pipelines.stages import stage_module


def stage_identity(
    name: str, config: Any, inputs: list[str], run_dir: Path, previous: Mapping[str, Path] | None = None
) -> tuple[dict[str, Any], Collection[str]]:
    """(what a recipe stage's record holds, the settings left out of it). PREVIOUS: the recipe's stages before
    this one and their folders (as the stage sees them: web reads the classifier's model.bin by default).

    INPUTS: the stage's inputs as the recipe gives them (the previous document stage's data/ by default), recorded
    with their sizes; a stage that reads other files as its input says which (its module's `inputs_read`: the
    classifier's pages), and those are recorded instead. Left out: the settings that say how a stage runs, not
    what it writes (its module's `OPERATIONAL_KEYS`: rewrite's retries, max_attempts, timeouts): a stuck stage is
    unstuck by changing them, which a new job would refuse. Left out too: the settings that name files the stage
    reads (its module's `SETTINGS_AS_FILES`: decont's benchmarks, rewrite's decont_benchmarks), recorded by the
    files they resolve to, with their digests (`files_read`): a folder and the one file in it, or the same files in
    another order, are the same stage, as `mathmix decont` takes them. Paths in the run folder are recorded as
    {run_dir}/... (a copied run folder still resumes); a record from before digests were kept is this job
    (job_record.LATER_FIELDS), and so is one from before its stage said what it reads (`earlier_stage_identities`).
    """
    module = stage_module(name)
    digests = _digests_of_files_read(name, config, run_dir, previous)
    extra = {"file_digests": digests} if digests else {}
    operational: Collection[str] = getattr(module, "OPERATIONAL_KEYS", frozenset())
    # settings recorded as the files they name (`file_digests`), not as typed: decont's benchmarks
    as_files: Collection[str] = getattr(module, "SETTINGS_AS_FILES", ())
    settings = config.model_dump(mode="json", exclude={*operational, *as_files}, exclude_defaults=True)
    inputs_read = getattr(module, "inputs_read", None)
    read = inputs if inputs_read is None else inputs_read(config, run_dir, inputs, previous or {})
    return job_identity(read, settings, run_dir=run_dir, **extra), operational


def _superseded(
    name: str,
    step: dict[str, Any],
    inputs: list[str],
    recipe: Recipe,
    previous: Mapping[str, Path],
    operational: Collection[str],
    identity: dict[str, Any],
) -> str | None:
    """What to say of a finished stage whose record is the one its module's `SUPERSEDED` describes (a context in
    which the stage identity comes out as an earlier mathmix recorded it, and a note), else None: also where that
    context changes nothing (no training split under the folders), and the stage's own checks then apply."""
    superseded = getattr(stage_module(name), "SUPERSEDED", None)
    record_path = Path(step["output"]) / RECIPE_STAGE_FILE
    if superseded is None or not record_path.is_file():
        return None
    as_then, note = superseded
    try:
        with as_then():
            then, _ = stage_identity(name, step["config"], inputs, recipe.output_dir, previous=previous)
            if then == identity:
                return None
            forms = [then, *earlier_stage_identities(name, inputs, recipe.output_dir, then, step["config"])]
        record = without_settings(json.loads(record_path.read_text()), operational)
    except (OSError, ValueError):
        return None
    if isinstance(record, dict):
        record.pop(OUTPUTS_KEY, None)
    return note.format(out_dir=step["output"]) if record in forms else None


def earlier_stage_identities(
    name: str, inputs: list[str], run_dir: Path, identity: dict[str, Any], config: Any = None
) -> list[dict[str, Any]]:
    """IDENTITY (`stage_identity`) as records written before the stage said what it reads hold it: with the
    recipe's INPUTS and their sizes in place of what its module's `inputs_read` names (the classifier's `[]`); with
    its `SETTINGS_AS_FILES` as CONFIG types them (decont's `benchmarks`, recorded so until they were recorded as
    the files read). Such a record is this stage, adopted once (rewritten in today's form, job_record.check_job's
    `earlier`): a finished run was not refused after an upgrade."""
    module = stage_module(name)
    forms = [identity]
    if getattr(module, "inputs_read", None) is not None:
        given = job_identity(inputs, {}, run_dir=run_dir)
        form = {k: v for k, v in identity.items() if k not in ("inputs", "input_sizes")}
        form.update({k: given[k] for k in ("inputs", "input_sizes") if k in given})
        forms.append(form)
    as_files = getattr(module, "SETTINGS_AS_FILES", ())
    typed = config.model_dump(mode="json", include=set(as_files), exclude_defaults=True) if config else {}
    if typed:  # as job_identity wrote them: paths in the run folder as {run_dir}/...
        typed = job_identity([], typed, run_dir=run_dir)["settings"]
        forms += [{**form, "settings": {**form.get("settings", {}), **typed}} for form in forms]
    former = getattr(module, "former_default_forms", None)
    if (
        former is not None
    ):  # settings whose default changed, set to the default until then (rewrite's max_tokens)
        forms += former(identity.get("settings", {}), forms)
    unique: list[dict[str, Any]] = []
    for form in forms[1:]:
        if form != identity and form not in unique:
            unique.append(form)
    return unique


def _digests_of_files_read(
    name: str, config: Any, run_dir: Path, previous: Mapping[str, Path] | None = None
) -> dict[str, list]:
    """{what: [path, SIZE:SHA]} of the files a stage reads besides its inputs (its module's `files_read`: web's
    model, the run classifier's by default, and blocklist, decont's benchmarks, train's recipe and mixtures). A
    model retrained at the same path used to leave the finished stage "already complete" with the old model's
    output."""
    files_read = getattr(stage_module(name), "files_read", None)
    if files_read is None:
        return {}
    found = files_read(config, run_dir, previous or {})
    return {what: [path, _digest_of(what, path)] for what, path in found.items()}


def _digest_of(what: str, path: str) -> str | None:
    """A file by its bytes, train's recipe and mixtures by what they say, a model folder (rewrite's)
    by its weights, a hub name by its cached snapshot's commit."""
    from mathmix.hub import cached_snapshot

    if what == MODEL_SNAPSHOT:
        return cached_snapshot(path)
    # train's; any other file by its bytes, as recorded before
    if what == "recipe" or what.startswith("mixture "):
        return yaml_digest(path)
    return file_digest(path) if Path(path).is_file() else weights_digest(path)
