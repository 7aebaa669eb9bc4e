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

import hashlib
import json
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from rich.markup import escape

from mathmix.cli_util import console, print_summary, write_json
from mathmix.paths import expand_inputs
from pipelines.executors import JobsSubmitted, live_submissions
from pipelines.job_record import (
    MODEL_SNAPSHOT,
    OUTPUTS_KEY,
    SOURCE_ROOT,
    check_job,
    describe_difference,
    file_digest,
    has_progress,
    job_identity,
    weights_digest,
    without_settings,
    yaml_digest,
)
from pipelines.recipe import Recipe
from pipelines.run_lock import run_folder_lock
from pipelines.stages import STAGES, StageContext, stage_module

RECIPE_STAGE_FILE = "recipe-stage.json"  # the recipe's settings and inputs of a finished stage
UPSTREAM_FILE = "upstream.json"  # {earlier stage: sha256 of its summary.json} when this stage started


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
    mixtures and the shards the plan will make for them, eval's benchmark folder) before any stage runs; StageFailed naming the first stage refused. A stage refused only when reached
    ran after the stages before it in full: hours of web and dedup on a crawl before decont said it had none.

    A stage already complete is checked too: the files such a check reads are in its record (`files_read`), so a
    rerun after they were deleted was refused at that stage anyway, naming a digest; now it is refused first, with
    the stage's own message. Only what no earlier stage writes is checked (a module's `preflight` reads no stage
    output)."""
    for step in steps:
        name = step["stage"]
        check = getattr(stage_module(name), "preflight", None)
        if check is None or (only and name not in only):
            continue
        try:
            check(step["config"], recipe.output_dir, plan=steps)
        except (OSError, ValueError) as err:
            raise StageFailed(name, err) from None


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
    if write:
        _record_upstream(out_dir, upstream)
    return inputs, kept or None


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


def _check_after_redone(out_dir: Path, name: str, redone: list[str], later: list[str]) -> None:
    """ValueError where OUT holds work built from earlier stages that the run will redo first (`_check_upstream`
    refuses it then, once they are redone)."""
    if (out_dir / UPSTREAM_FILE).is_file() and has_progress(out_dir):
        after = f" and the stages after it ({', '.join(later)})" if later else ""
        raise ValueError(
            f"{out_dir} was built from earlier output: {', '.join(redone)} will be redone before {name} runs. "
            f"Delete {out_dir}{after} to redo {'them' if later else 'it'} from the new input"
        )


def read_record(path: Path, what: str) -> Any:
    """The JSON in PATH, a record or summary mathmix wrote; ValueError naming it where it cannot be read (cut short,
    emptied): a damaged record taken as none adopted a changed stage, and a damaged summary stopped the run on a
    JSON error that named no file."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(
            f"{path} ({what}) cannot be read ({err}); delete {path.parent} to redo that stage, or restore the file"
        ) from None


def write_record(path: Path, value: Any) -> None:
    """`write_json` (whole or not at all: a run killed mid-write left a record cut short), with an OSError that
    names PATH (a full disk said only `[Errno 28] No space left on device`)."""
    try:
        write_json(path, value)
    except OSError as err:
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err


def _forget_unstarted_stage(out_dir: Path, made_now: bool) -> None:
    """Remove the stage's records (recipe-stage.json, upstream.json) when the stage stopped before writing anything
    else (a missing input, an input of a kind it does not read, a bad model path), and the stage folder too where
    this run made it and it is left empty.

    The records are written before the stage starts, so that a changed recipe is refused on a started stage; left
    in an otherwise empty folder they made it look like one (`mathmix run -o` into it and `mathmix web -o` refuse
    a folder holding them). A folder holding anything else keeps them: its work may be resumed, and a changed
    recipe is refused there. A folder holding only the records had no work to protect: a changed recipe took it
    over anyway.
    """
    records = {RECIPE_STAGE_FILE, UPSTREAM_FILE}
    try:
        if any(p.name not in records or p.parent != out_dir for p in out_dir.rglob("*") if not p.is_dir()):
            return
        for record in records:
            (out_dir / record).unlink(missing_ok=True)
        if made_now and not any(out_dir.iterdir()):
            out_dir.rmdir()
    except OSError:  # the stage's own error is the one to report
        pass


def _holds_a_stage(folder: Path) -> bool:
    """A stage folder by its records: a recipe stage's, or a stage command's (job.json, summary.json and data/)."""
    if (folder / RECIPE_STAGE_FILE).is_file() or (folder / UPSTREAM_FILE).is_file():
        return True
    return (
        (folder / "job.json").is_file() and (folder / "summary.json").is_file() and (folder / "data").is_dir()
    )


def check_run_folder(run_dir: Path) -> None:
    """ValueError where the run folder is a file or lies inside one (the first stage failed on `[Errno 20] Not a
    directory`), or is a stage folder or lies inside one (`mathmix run R -o OTHER_RUN/web`): the run's stage
    folders were nested in that stage's folder, next to its data/, and its run's audit made views of them."""
    run_dir = Path(run_dir).expanduser().absolute()
    for folder in (run_dir, *run_dir.parents):
        if folder.exists() and not folder.is_dir():  # `[Errno 20] Not a directory` from the first stage
            where = "is" if folder == run_dir else f"lies inside {folder}, which is"
            raise ValueError(f"output folder {run_dir} {where} a file, not a folder")
        if _holds_a_stage(folder):
            inside = "is" if folder == run_dir else f"lies inside {folder}, which is"
            raise ValueError(
                f"output folder {run_dir} {inside} a stage folder (it holds that stage's records); a run writes "
                f"one folder per stage inside its output folder: give the run folder ({folder.parent}) to resume "
                "that run, or a new folder"
            )


def _upstream(steps: list[dict[str, Any]], i: int) -> dict[str, str]:
    """{stage before step I: sha256 of its summary.json}; ValueError naming an earlier stage that has not finished,
    or one that was built from an older version of a stage before it (`--only` would otherwise run on it)."""
    name = steps[i]["stage"]
    hashes: dict[str, str] = {}
    for j, step in enumerate(steps[:i]):
        out = Path(step["output"])
        summary = out / "summary.json"
        if not summary.is_file():
            raise ValueError(
                f"{step['stage']}, which comes before {name} in this recipe, has not finished (no {summary}); "
                f"run it first (without --only, or with --only {step['stage']})"
            )
        record = out / UPSTREAM_FILE
        # a folder from before upstream.json: nothing to compare; a damaged one is refused, not taken as none
        recorded = _upstream_record(record, step["stage"]) if record.is_file() else {}
        stale = [s for s in hashes if s in recorded and recorded[s] != hashes[s]]
        if stale:
            later = ", ".join(str(Path(t["output"]).name) for t in steps[j + 1 :])
            raise ValueError(
                f"{step['stage']}, which comes before {name}, was built from earlier output: {', '.join(stale)} "
                f"was redone since {step['stage']} ran. Delete {out} and the stages after it ({later}) to redo "
                "them from the new input"
            )
        hashes[step["stage"]] = hashlib.sha256(summary.read_bytes()).hexdigest()[:16]
    return hashes


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


def _check_stage_job(
    out_dir: Path,
    identity: dict[str, Any],
    name: str,
    ignore: Collection[str] = (),
    earlier: list[dict[str, Any]] | None = None,
    run_dir: Path | None = None,
    write: bool = True,
) -> None:
    """`check_job` for a recipe stage, where Slurm jobs still queued count as work: a recipe edited while they were
    queued used to be taken as a new job, and the stage then kept those jobs' output under the new settings.
    EARLIER: older forms of IDENTITY (`earlier_stage_identities`). RUN_DIR: the folder the records' `{run_dir}/...`
    paths stand for (default OUT's parent), named by its path in a refusal."""
    live = live_submissions(out_dir)
    try:
        check_job(
            out_dir,
            identity,
            f"recipe stage ({name})",
            RECIPE_STAGE_FILE,
            progress=lambda out: bool(live) or has_progress(out),
            ignore=ignore,  # a record from before they were left out still matches
            earlier=earlier or (),
            run_dir=run_dir,
            write=write,
        )
    except ValueError as err:
        if live and not has_progress(out_dir):
            try:
                recorded = json.loads((out_dir / RECIPE_STAGE_FILE).read_text())
                recorded.pop("outputs", None)
                how = f": {describe_difference(recorded, identity)}"
            except (OSError, ValueError, AttributeError):
                how = ""
            # the records' placeholders as the paths the user gave (as check_job names them)
            how = how.replace("{run_dir}", str(Path(run_dir or out_dir.parent).resolve()))
            how = how.replace("{mathmix}", str(SOURCE_ROOT))
            raise ValueError(
                f"{out_dir}: Slurm jobs submitted with other settings than the recipe's {name} stage now has are "
                f"still queued ({', '.join(live)}){how}. Wait for them to finish, or cancel them (scancel --name "
                f"{live[0]}), then rerun"
            ) from err
        raise


def _check_upstream(out_dir: Path, name: str, upstream: dict[str, str], later: list[str]) -> None:
    """ValueError when OUT holds work that started after other versions of the earlier stages."""
    path = out_dir / UPSTREAM_FILE
    if not path.is_file() or not has_progress(out_dir):
        return
    recorded = _upstream_record(path, name)
    changed = [stage for stage in upstream if recorded.get(stage) != upstream[stage]]
    if not changed:
        return
    how = ", ".join(f"{s} {'was redone' if s in recorded else 'was added'}" for s in changed)
    after = f" and the stages after it ({', '.join(later)})" if later else ""
    raise ValueError(
        f"{out_dir} was built from earlier output: {how} since {name} ran. Delete {out_dir}{after} to redo "
        f"{'them' if later else 'it'} from the new input"
    )


def _upstream_record(path: Path, name: str) -> dict[str, str]:
    """A stage's upstream.json; ValueError naming it where it is damaged (emptied, cut short, not a mapping)."""
    recorded = read_record(path, f"what the {name} stage was built from")
    if not isinstance(recorded, dict):
        raise ValueError(
            f"{path} (what the {name} stage was built from) is not a mapping; delete {path.parent} to redo that "
            "stage, or restore the file"
        )
    return recorded


def _record_upstream(out_dir: Path, upstream: dict[str, str]) -> None:
    write_record(out_dir / UPSTREAM_FILE, upstream)
