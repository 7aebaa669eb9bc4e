"""`mathmix run`: run a recipe's stages in order; each stage is resumable through datatrove completion markers.

A stage that already wrote its `summary.json` is skipped as a whole on a rerun; a stage killed mid-way reruns
only its unfinished datatrove tasks (completion markers under `STAGE/logs`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from mathmix.cli_util import console, print_summary
from mathmix.paths import expand_inputs
from pipelines.executors import JobsSubmitted
from pipelines.job_record import check_job, job_identity
from pipelines.recipe import Recipe
from pipelines.stages import STAGES, StageContext, stage_module

RECIPE_STAGE_FILE = "recipe-stage.json"  # the recipe's settings and inputs of a finished stage


class StageFailed(Exception):
    """A stage stopped on bad input or settings (an OSError or ValueError) or unfinished tasks: `stage` names it."""

    def __init__(self, stage: str, error: Exception):
        super().__init__(f"stage {stage}: {error}")
        self.stage, self.error = stage, error


def plan(recipe: Recipe) -> list[dict[str, Any]]:
    """The stages a recipe will run, with their input and output folders."""
    steps = []
    previous: Path | None = None
    for name in STAGES:
        if name not in recipe.stages:
            continue
        config = recipe.stages[name]
        module = stage_module(name)
        out_dir = recipe.output_dir / getattr(module, "FOLDER", name)
        explicit = [
            s.replace("{run_dir}", str(recipe.output_dir)) for s in (getattr(config, "inputs", None) or [])
        ]
        inputs = explicit or ([str(previous / "data")] if previous else [])
        reads = getattr(module, "READS", None)  # stages that do not read the previous stage's data/
        shown = explicit or ([reads.replace("{run_dir}", str(recipe.output_dir))] if reads else inputs)
        steps.append(
            {"stage": name, "inputs": inputs, "reads": shown, "output": str(out_dir), "config": config}
        )
        if getattr(module, "PRODUCES_DOCUMENTS", True):
            previous = out_dir
    return steps


def run_recipe(recipe: Recipe, dry_run: bool = False, only: list[str] | None = None) -> dict[str, Any]:
    """Run every stage of `recipe` in order; return {stage: summary}.

    Raises:
        ValueError: `only` names a stage that is not in the recipe.
        StageFailed: a stage stopped on an OSError or ValueError (a missing input, a bad model, bad settings) or a
            RuntimeError (tasks that did not complete); the stages before it are finished and a rerun goes on
            from it. Slurm jobs submitted without waiting stop the run after their stage, with a message.
    """
    steps = plan(recipe)
    unknown = sorted(set(only or []) - {step["stage"] for step in steps})
    if unknown:
        raise ValueError(
            f"--only {', '.join(unknown)}: not a stage of this recipe (its stages: "
            f"{', '.join(step['stage'] for step in steps)})"
        )
    if dry_run:
        for step in steps:
            console.print(f"[bold]{step['stage']}[/]: {step['reads'] or '-'} -> {step['output']}")
            console.print(f"    {step['config'].model_dump(exclude_defaults=True)}")
        return {}
    summaries: dict[str, Any] = {}
    previous: dict[str, Path] = {}
    for step in steps:
        name, out_dir = step["stage"], Path(step["output"])
        if only and name not in only:
            previous[name] = out_dir
            continue
        summary_path = out_dir / "summary.json"
        identity = job_identity(step["inputs"], step["config"], run_dir=recipe.output_dir)
        if summary_path.exists():
            try:  # a finished stage is kept only if the recipe still asks for the same thing
                check_job(out_dir, identity, f"recipe stage ({name})", RECIPE_STAGE_FILE)
            except ValueError as err:
                raise StageFailed(name, err) from None
            console.print(f"[dim]{name}: already complete ({summary_path}), skipped[/]")
            summaries[name] = json.loads(summary_path.read_text())
            previous[name] = out_dir
            continue
        console.rule(f"[bold]{name}")
        start = time.time()
        try:
            # recorded before the stage runs: a killed stage is then resumed only by the same recipe block
            check_job(out_dir, identity, f"recipe stage ({name})", RECIPE_STAGE_FILE)
            ctx = StageContext(
                run_dir=recipe.output_dir,
                out_dir=out_dir,
                inputs=expand_inputs(step["inputs"]),
                executor=recipe.executor,
                previous=dict(previous),
            )
            summary = stage_module(name).run_stage(step["config"], ctx)
        except JobsSubmitted as err:  # no result yet: the stages after it cannot run
            console.print(f"[bold]{name}[/]: {err}", soft_wrap=True, markup=False)
            return summaries
        except (OSError, ValueError, RuntimeError) as err:
            raise StageFailed(name, err) from err
        summary.setdefault("seconds", round(time.time() - start, 2))
        print_summary(summary, title=f"{name} summary")
        summaries[name] = summary
        previous[name] = out_dir
    return summaries
