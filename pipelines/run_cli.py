"""`mathmix run RECIPE.yaml` and `mathmix quickstart`."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from mathmix.cli_util import console, fail
from mathmix.signals import sigterm_as_ctrl_c


def run(
    recipe: Path = typer.Argument(..., help="recipe YAML (see recipes/)"),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="print the plan (stages, inputs, outputs) and what the run would do per stage, and exit",
    ),
    output_dir: Path | None = typer.Option(
        None, "-o", "--output-dir", help="override the recipe's output_dir"
    ),
    only: list[str] | None = typer.Option(None, "--only", help="run only these stages (repeatable)"),
) -> None:
    """Run a recipe's stages in order. Reads the recipe and its inputs; writes OUTPUT_DIR/STAGE/ per stage.

    Each stage is resumable: a rerun skips finished stages (summary.json present) and finished datatrove tasks.
    SIGTERM stops the run as Ctrl-C does (exit 130, finished work kept).

    --dry-run says per stage what the run would do (complete, skipped / will run / refused: why; exit 2 if any is
    refused) and writes nothing. Paths in the recipe: `{recipe_dir}` is the recipe file's folder, `{run_dir}` the
    run folder; any other relative path is relative to the current folder (not the recipe's).

    With a Slurm executor and `wait: false`, the run stops after submitting a stage's jobs (exit 0, no summary.json
    for that stage yet): rerun the same command once they have finished; a rerun while they are queued says so,
    and one after a task failed reports it (exit 2) before the next rerun submits it again. With `wait: true`, a
    rerun after a kill waits for the jobs the killed run left queued. See docs/scaling.md.
    """
    from pipelines.recipe import RecipeError, load_recipe
    from pipelines.runner import RefusedBeforeRun, StageFailed, run_recipe

    try:
        parsed = load_recipe(recipe)
    except RecipeError as err:
        fail(str(err))
        return
    if output_dir is not None:
        parsed.output_dir = output_dir
    try:
        with sigterm_as_ctrl_c():
            run_recipe(parsed, dry_run=dry_run, only=only)
    except StageFailed as err:
        if os.environ.get("MATHMIX_DEBUG"):
            raise
        # the message carries its own advice (delete a folder, run --only X first): the suffix only adds the facts
        before = isinstance(err, RefusedBeforeRun)
        done = "checked before any stage ran: nothing was run" if before else "finished stages are kept"
        fail(f"{err} ({done}; MATHMIX_DEBUG=1 shows the traceback)")
    except ValueError as err:
        fail(str(err))


def quickstart(
    output_dir: Path = typer.Option(
        Path("quickstart-run"), "-o", "--output-dir", help="where to write the run"
    ),
) -> None:
    """Run the whole chain on the small sample mathmix ships (pages written here, packed into a WARC).

    Writes OUTPUT_DIR/sample/ (the WARC, the pages, tiny benchmark files, RL prompts) and one folder per stage,
    each with its summary.json.
    """
    from pipelines.quickstart import run_quickstart
    from pipelines.runner import StageFailed

    try:
        with sigterm_as_ctrl_c():
            run_quickstart(output_dir)
    except StageFailed as err:
        if os.environ.get("MATHMIX_DEBUG"):
            raise
        fail(f"{err} (MATHMIX_DEBUG=1 shows the traceback)")
    except ValueError as err:  # a refused folder (in use by another run, a file, inside a stage folder)
        fail(str(err))
    console.print(f"[bold green]quickstart done[/]: {output_dir.resolve()}")


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("quickstart")(quickstart)
