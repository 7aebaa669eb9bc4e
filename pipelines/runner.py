"""`mathmix run`: run a recipe's stages in order; each stage is resumable through datatrove completion markers.

A stage that already wrote its `summary.json` is skipped as a whole on a rerun; a stage killed mid-way reruns
only its unfinished datatrove tasks (completion markers under `STAGE/logs`).

A skipped stage must still match what came before it: each stage records the summaries of the recipe's earlier
stages as it starts (`upstream.json`, a hash of each `summary.json`). An earlier stage that was redone, added
or left unfinished since then is refused, naming the folders to redo: skipping would keep output built from
the old (or partial) input, and the chain would no longer be what an uninterrupted run makes.

One run at a time per run folder (`run_lock`): a second run on a folder in use is refused at once, naming the
holder; two used to run the same stages into the same outputs and records.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.markup import escape

from mathmix.cli_util import console, print_summary
from mathmix.paths import expand_inputs
from pipelines.executors import JobsSubmitted
from pipelines.recipe import Recipe
from pipelines.run_lock import run_folder_lock
from pipelines.stage_identity import (
    _digest_of,
    _digests_of_files_read,
    _superseded,
    earlier_stage_identities,
    stage_identity,
)
from pipelines.stage_records import (
    RECIPE_STAGE_FILE,
    UPSTREAM_FILE,
    _check_after_redone,
    _check_stage_job,
    _check_upstream,
    _forget_unstarted_stage,
    _record_upstream,
    _upstream,
    check_run_folder,
    read_record,
    write_record,
)
from pipelines.stages import STAGES, StageContext, stage_module

# Moved out, still importable from here (tests and callers name them as pipelines.runner's):
# stage_records (the stage folder's records) and stage_identity (what a stage's record holds).
__all__ = [
    "RECIPE_STAGE_FILE",
    "UPSTREAM_FILE",
    "StageFailed",
    "_check_stage_job",
    "_digest_of",
    "_digests_of_files_read",
    "_upstream",
    "check_inputs_given",
    "check_run_folder",
    "earlier_stage_identities",
    "plan",
    "preflight",
    "read_record",
    "run_recipe",
    "stage_identity",
    "write_record",
]


class StageFailed(Exception):
    """A stage stopped on bad input or settings (an OSError or ValueError) or unfinished tasks: `stage` names it."""

    def __init__(self, stage: str, error: Exception):
        super().__init__(f"stage {stage}: {error}")
        self.stage, self.error = stage, error


class RefusedBeforeRun(StageFailed):
    """A stage refused by the checks made before the first stage runs (`preflight`): no stage ran."""


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

    The run holds the run folder's lock (`run_lock.run_folder_lock`) from its first stage to its end; a dry run
    takes none: it writes nothing (not even the run folder) and may print the plan while a run is going on.

    Raises:
        ValueError: `only` names a stage that is not in the recipe.
        RunFolderBusy (a ValueError): another run is using the run folder; nothing was written.
        StageFailed: a stage's settings were refused before any stage ran (`preflight`), in a dry run too; or a
            stage stopped on an OSError or ValueError (a missing input, a bad model, bad settings) or a
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
    check_run_folder(recipe.output_dir)  # a plan of a run nested in a stage folder is no plan to print
    preflight(recipe, steps, only)  # before the first stage runs, and in a dry run: not hours into the run
    check_inputs_given(recipe, steps)
    if dry_run:
        _dry_run(recipe, steps, only)
        return {}
    made = _folders_to_make(recipe.output_dir)
    try:
        with run_folder_lock(recipe.output_dir):  # its file is removed before the empty folders it made
            return _run_steps(recipe, steps, only)
    except BaseException:
        _remove_empty(made)
        raise


def preflight(recipe: Recipe, steps: list[dict[str, Any]], only: list[str] | None = None) -> None:
    """Run each selected stage's cheap checks of what it reads (its module's optional `preflight(config, run_dir,
    plan)`, PLAN being STEPS: decont's and rewrite's benchmarks, rewrite's prompt templates, train's recipe and
    mixtures and the shards the plan will make for them, eval's benchmark folder, web's math model, shards'
    tokenizer), and that its output folder is not inside one of its inputs (`prerun_checks`), before any stage
    runs; StageFailed naming the first stage refused. A stage refused only when reached ran after the stages
    before it in full: hours of web and dedup on a crawl before decont said it had none.

    A stage already complete is checked too: the files such a check reads are in its record (`files_read`), so a
    rerun after they were deleted was refused at that stage anyway, naming a digest; now it is refused first, with
    the stage's own message. Only what no earlier stage writes is checked (a module's `preflight` reads no stage
    output)."""
    from pipelines.prerun_checks import check_output_outside_inputs

    for step in steps:
        name = step["stage"]
        if only and name not in only:
            continue
        check = getattr(stage_module(name), "preflight", None)
        try:
            check_output_outside_inputs(step)  # the stage refuses it too, but only once reached
            if check is not None:
                check(step["config"], recipe.output_dir, plan=steps)
        except (OSError, ValueError) as err:
            raise RefusedBeforeRun(name, err) from None


def check_inputs_given(recipe: Recipe, steps: list[dict[str, Any]]) -> None:
    """ValueError naming the recipe file where a stage that reads documents has no `inputs` and no earlier stage
    feeds it (`stages: {dedup: {}}` alone): it passed the dry run and then failed on `no .parquet or .jsonl
    files in ` (an empty path). Stages that read something else (the classifier's pages, train's shards) and
    rewrite tasks given their own `task_inputs` are left alone, and so is a stage already complete."""
    for step in steps:
        module, config = stage_module(step["stage"]), step["config"]
        if step["inputs"] or hasattr(module, "READS") or hasattr(module, "inputs_read"):
            continue
        if (Path(step["output"]) / "summary.json").is_file():
            continue
        tasks = getattr(config, "tasks", None)
        own = getattr(config, "task_inputs", None) or {}
        if tasks and all(own.get(task) for task in tasks):
            continue
        raise ValueError(
            f"{recipe.source}: stages.{step['stage']}.inputs is required (no earlier stage feeds it)"
        )


def _folders_to_make(folder: Path) -> list[Path]:
    """FOLDER and those above it that do not exist yet (the deepest first): what a run may create to write in."""
    folder = Path(folder).expanduser().absolute()
    return [f for f in (folder, *folder.parents) if not f.exists() and not f.is_symlink()]


def _remove_empty(folders: list[Path]) -> None:
    """Remove each of FOLDERS (the deepest first) that is empty, up to the first that is not: a failed or refused
    `mathmix run` removed the stage folder it made and left the run folder it made, empty."""
    for folder in folders:
        try:
            folder.rmdir()  # only ever an empty folder
        except FileNotFoundError:  # never made (the run stopped before it wrote anything)
            continue
        except OSError:  # not empty, or not ours to remove: the command's own error is the one to report
            return


def _run_steps(recipe: Recipe, steps: list[dict[str, Any]], only: list[str] | None) -> dict[str, Any]:
    """`run_recipe`'s stages, in order (see there)."""
    summaries: dict[str, Any] = {}
    previous: dict[str, Path] = {}
    for i, step in enumerate(steps):
        name, out_dir = step["stage"], Path(step["output"])
        if only and name not in only:
            previous[name] = out_dir
            continue
        summary_path = out_dir / "summary.json"
        existed = out_dir.exists()
        try:
            inputs, kept = _checked_stage(recipe, steps, i, previous)
            if kept:  # finished under a record an earlier mathmix wrote: kept as it is, the record too
                console.print(f"[yellow]{escape(name)}: {escape(kept)}[/]", soft_wrap=True)
            if summary_path.exists():
                summary = read_record(summary_path, f"the {name} stage's summary")
                console.print(f"[dim]{name}: already complete ({summary_path}), skipped[/]")
                summaries[name] = summary
                previous[name] = out_dir
                continue
        except (OSError, ValueError) as err:
            raise StageFailed(name, err) from None
        console.rule(f"[bold]{name}")
        start = time.time()
        try:
            ctx = StageContext(
                run_dir=recipe.output_dir,
                out_dir=out_dir,
                inputs=inputs,
                executor=recipe.executor,
                previous=dict(previous),
            )
            try:
                summary = stage_module(name).run_stage(step["config"], ctx)
            except BaseException:
                _forget_unstarted_stage(out_dir, made_now=not existed)
                raise
        except JobsSubmitted as err:  # no result yet: the stages after it cannot run
            console.print(f"[bold]{escape(name)}[/]: {escape(str(err))}", soft_wrap=True)
            return summaries
        except (OSError, ValueError, RuntimeError) as err:
            raise StageFailed(name, err) from err
        summary.setdefault("seconds", round(time.time() - start, 2))
        print_summary(summary, title=f"{name} summary")
        summaries[name] = summary
        previous[name] = out_dir
    return summaries


def _checked_stage(
    recipe: Recipe,
    steps: list[dict[str, Any]],
    i: int,
    previous: Mapping[str, Path],
    write: bool = True,
) -> tuple[list[str], str | None]:
    """The checks before step I runs or is skipped: (its inputs, globs and ~ expanded; what to say of a finished
    stage kept under an earlier mathmix's record, else None). OSError or ValueError for a stage to refuse.

    WRITE: record the stage's identity and upstream.json (a run); False checks the same without writing (a dry
    run, which is then refused where the run would be)."""
    step = steps[i]
    name, out_dir = step["stage"], Path(step["output"])
    later = [Path(s["output"]).name for s in steps[i + 1 :]]  # folders to delete with this one
    inputs = expand_inputs(step["inputs"])  # the sizes of what the stage reads count
    upstream = _upstream(steps, i)
    _check_upstream(out_dir, name, upstream, later)
    # A finished stage is kept, and a killed one resumed, only for the same recipe block (recorded before the
    # stage runs); folders written before upstream.json existed adopt it.
    identity, operational = stage_identity(name, step["config"], inputs, recipe.output_dir, previous=previous)
    kept = (out_dir / "summary.json").exists() and _superseded(
        name, step, inputs, recipe, previous, operational, identity
    )
    if not kept:
        earlier = earlier_stage_identities(name, inputs, recipe.output_dir, identity, step["config"])
        _check_stage_job(
            out_dir,
            identity,
            name,
            ignore=operational,
            earlier=earlier,
            run_dir=recipe.output_dir,
            write=write,
        )
        if refusal := _earlier_version(name, out_dir):  # refused by the stage's own command, said here too
            raise refusal
    if write:
        _record_upstream(out_dir, upstream)
    return inputs, kept or None


def _earlier_version(name: str, out_dir: Path) -> ValueError | None:
    """The refusal of a stage folder holding unfinished work of an earlier reader (web) or matcher (decont): the
    stage's command refuses it when it runs; checked here too, so that a dry run says so."""
    if name == "web":
        from pipelines.web import earlier_reader_refusal

        return earlier_reader_refusal(out_dir)
    if name == "decont":
        from pipelines.decont import earlier_matcher_refusal

        return earlier_matcher_refusal(out_dir)
    return None


def _dry_run(recipe: Recipe, steps: list[dict[str, Any]], only: list[str] | None) -> None:
    """Print each stage's plan and what a run would do with it (`complete, skipped`, `will run`, `refused: ...`),
    checking what the run checks (`_checked_stage`) without writing; StageFailed for the first stage the run
    would refuse, once every stage is printed. The plan alone listed every stage as to run, a changed setting the
    run refuses included, and exited 0."""
    previous: dict[str, Path] = {}
    redone: list[str] = []  # stages before this one that the run would run (their summary.json changes)
    refused: StageFailed | None = None
    for i, step in enumerate(steps):
        name, out_dir = step["stage"], Path(step["output"])
        if only and name not in only:  # --only: the stages that would run, the others named
            console.print(f"[dim]{name}: not run (--only)[/]")
            previous[name] = out_dir
            continue
        console.print(f"[bold]{name}[/]: {step['reads'] or '-'} -> {step['output']}")
        console.print(f"    {step['config'].model_dump(exclude_defaults=True)}")
        if refused is not None:
            console.print(f"    [dim]not reached ({refused.stage} is refused)[/]")
            continue
        try:
            if redone:  # its inputs do not exist yet, or will change: a folder holding work is refused then
                _check_after_redone(out_dir, name, redone, [Path(s["output"]).name for s in steps[i + 1 :]])
                status = "will run"
            else:
                _, kept = _checked_stage(recipe, steps, i, previous, write=False)
                if (out_dir / "summary.json").exists():
                    read_record(out_dir / "summary.json", f"the {name} stage's summary")
                    status = "complete, skipped" + (f" ({kept})" if kept else "")
                else:
                    status = "will run"
        except (OSError, ValueError) as err:
            refused = StageFailed(name, err)
            console.print(f"    [bold red]refused:[/] {escape(str(err))}", soft_wrap=True)
            continue
        console.print(f"    {escape(status)}", soft_wrap=True)
        if status == "will run":
            redone.append(name)
        previous[name] = out_dir
    if refused is not None:
        raise refused
