"""What a stage folder was trained with, recorded in STAGE/job.json (pipelines.job_record) before it trains.

A rerun into the same output folder resumes a stage from its checkpoints, or skips it when done.json exists: with
a changed recipe it used to print the old result (or fail inside checkpoint loading). The record holds what decides
a stage's result: the model, the optimizer and schedule, the data mixture, the seed, and for a decay branch the
stage it starts from. What a resume may change without changing the result is left out: logging and checkpoint
intervals, micro-batch size, device and number of processes (every rank count walks the same global batches).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from midtrain.config import StageConfig, TrainRecipe, TrainRecipeError

MODEL_KEYS = {"path", "config", "tokenizer"}
TRAINER_KEYS = {"seq_len", "global_batch_tokens", "intra_document", "lr", "min_lr_ratio", "weight_decay",
                "betas", "eps", "grad_clip", "seed"}  # fmt: skip


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


def _stage_settings(recipe: TrainRecipe, stage: StageConfig) -> dict[str, Any]:
    # Values at their defaults are left out (here and below): a setting added later is not a different job.
    mixture = stage.build_mixture(recipe.run_dir).model_dump(mode="json", exclude_defaults=True)
    for source in mixture["sources"]:
        source["paths"] = [str(Path(p).resolve()) for p in source["paths"]]
    settings = {
        "stage": stage.model_dump(mode="json", exclude={"mixture"}, exclude_defaults=True)
        | {"lr": stage.lr or recipe.trainer.lr},
        "mixture": mixture,
    }
    names = [s.name for s in recipe.stages]
    if stage.start_from in names:
        settings["start"] = _stage_settings(recipe, recipe.stage(stage.start_from))
    elif stage.start_from is not None:
        settings["stage"]["start_from"] = str(Path(stage.start_from).resolve())
    return settings


def stage_identity(recipe: TrainRecipe, stage: StageConfig) -> dict[str, Any]:
    """The job identity of a stage folder: flat settings, paths under run_dir written as `{run_dir}`."""
    from pipelines.job_record import job_identity

    settings = {
        "model": recipe.model.model_dump(mode="json", include=MODEL_KEYS, exclude_defaults=True),
        "trainer": recipe.trainer.model_dump(mode="json", include=TRAINER_KEYS, exclude_defaults=True),
        **_stage_settings(recipe, stage),
    }
    return job_identity([], _flat(settings), run_dir=recipe.run_dir)


def check_stage_job(recipe: TrainRecipe, stage: StageConfig, record: bool) -> None:
    """Refuse (TrainRecipeError) a stage folder trained with other settings; with `record`, write its job.json
    when it has none (only one process should record)."""
    from pipelines.job_record import JOB_FILE, check_job

    stage_dir = recipe.stage_dir(stage.name)
    if not record and not (stage_dir / JOB_FILE).is_file():
        return
    try:
        check_job(stage_dir, stage_identity(recipe, stage), what=f"training stage ({stage.name})")
    except ValueError as err:
        raise TrainRecipeError(str(err)) from None
