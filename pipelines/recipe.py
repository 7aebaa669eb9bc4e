"""Recipes: one YAML file describes a whole run (executor + the stages to run, each with its settings).

Every key is validated by pydantic with extra keys forbidden, so a typo is an error that names the key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from mathmix.cli_util import console, format_validation_errors
from mathmix.yaml_files import load_yaml
from pipelines.executors import ExecutorConfig
from pipelines.stages import STAGES, parse_stage_config


class RecipeError(ValueError):
    """A recipe that cannot be read or does not validate; the message names the file and the key."""


class Recipe(BaseModel):
    """A run: name, output folder, executor, and stage settings (run in the registry's order)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str
    output_dir: Path = Path("runs/mathmix")
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    # checked when left out too: a recipe with no stage ran nothing, printed nothing and exited 0
    stages: dict[str, Any] = Field(default_factory=dict, validate_default=True)
    _source: Path | None = PrivateAttr(default=None)  # the file it was read from (load_recipe), for messages

    @property
    def source(self) -> str:
        """The recipe file's path, or `the recipe` for one not read from a file."""
        return str(self._source) if self._source is not None else "the recipe"

    @field_validator("stages", mode="before")
    @classmethod
    def _validate_stages(cls, raw: Any) -> dict[str, Any]:
        if raw is None or raw == {}:
            raise ValueError(
                f"no stage to run: list one or more of {list(STAGES)} under stages, each with its settings"
            )
        if not isinstance(raw, dict):
            raise ValueError("stages must be a mapping of stage name -> settings")
        unknown = [name for name in raw if name not in STAGES]
        if unknown:
            raise ValueError(f"unknown stage(s) {unknown}; known stages: {list(STAGES)}")
        out, errors = {}, []
        for name in STAGES:  # registry order, whatever the order in the file
            if name in raw:
                try:
                    out[name] = parse_stage_config(name, raw[name])
                except ValidationError as err:  # every bad stage is named, not only the first
                    errors.append(format_validation_errors(err, prefix=f"stages.{name}"))
        if errors:
            raise ValueError("; ".join(errors))
        return out

    @field_validator("output_dir")
    @classmethod
    def _home(cls, value: Path) -> Path:
        return value.expanduser()  # `~/runs/x` is the user's home, not a folder named `~`


# `{name}` in a recipe string: {recipe_dir} is replaced as the recipe is read, {run_dir} where a stage reads it
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
RUN_PLACEHOLDERS = ("run_dir",)


def with_recipe_dir(raw: Any, recipe_dir: Path, where: str = "") -> Any:
    """RAW (a parsed recipe) with `{recipe_dir}` in its strings replaced by RECIPE_DIR; ValueError naming the key of
    any other placeholder than `{run_dir}` (`{recipe_dir}` was taken literally: a folder named so was made)."""
    if isinstance(raw, dict):
        return {
            k: with_recipe_dir(v, recipe_dir, f"{where}.{k}" if where else str(k)) for k, v in raw.items()
        }
    if isinstance(raw, list):
        return [with_recipe_dir(v, recipe_dir, f"{where}[{i}]") for i, v in enumerate(raw)]
    if not isinstance(raw, str):
        return raw
    unknown = [m for m in PLACEHOLDER.findall(raw) if m not in ("recipe_dir", *RUN_PLACEHOLDERS)]
    if unknown:
        raise ValueError(
            f"{where}: unknown placeholder {', '.join('{' + u + '}' for u in unknown)} in {raw!r} (a recipe knows "
            "{recipe_dir}, the recipe file's folder, and {run_dir}, the run folder)"
        )
    return raw.replace("{recipe_dir}", str(recipe_dir))


def load_recipe(path: str | Path) -> Recipe:
    """Read and validate a recipe YAML file; raise RecipeError naming the file and the bad key.

    `{recipe_dir}` in any string is the recipe file's folder (as in train recipes); other relative paths are
    relative to the current folder, as they always were; `{run_dir}` is the run folder.
    """
    path = Path(path)
    if path.is_dir():  # was "recipe file not found"
        raise RecipeError(f"{path}: is a folder; name the recipe YAML file")
    if not path.is_file():
        raise RecipeError(f"{path}: recipe file not found")
    try:
        raw = load_yaml(path.read_text(), path)
    except ValueError as err:
        raise RecipeError(str(err)) from None
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}: a recipe is a mapping with keys name, output_dir, executor, stages")
    if isinstance(raw.get("stages"), list) and ("trainer" in raw or "model" in raw):
        raise RecipeError(f"{path} is a train recipe (model, trainer, stages as a list): run it with `mathmix train "
                          f"{path}`, or name it in a run recipe's train stage (train: {{recipe: {path}}})")  # fmt: skip
    if "sources" in raw and "stages" not in raw:
        raise RecipeError(f"{path} is a data mixture (sources): use it with `mathmix shards mix` or in a train "
                          "recipe's stage (mixture: PATH)")  # fmt: skip
    try:
        raw = with_recipe_dir(raw, path.resolve().parent)
    except ValueError as err:
        raise RecipeError(f"{path}: {err}") from None
    try:
        recipe = Recipe.model_validate(raw)
    except ValidationError as err:
        raise RecipeError(f"{path}: {format_validation_errors(err)}") from None
    recipe._source = path
    unused = recipe.executor.unused_keys()
    if unused:
        console.print(
            f"warning: {path}: executor.kind {recipe.executor.kind} does not read executor."
            f"{', executor.'.join(unused)}; they are ignored",
            markup=False,
            soft_wrap=True,
        )
    return recipe
