"""A recipe stage's records in its folder, and the checks made of them before the stage runs or is skipped.

recipe-stage.json holds what the stage was run with (`check_job`'s record, here with Slurm jobs still queued
counted as work); upstream.json the summaries of the recipe's earlier stages when it started. Apart from
`runner` so that the run's order (runner) reads apart from what each record says (here).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from mathmix.cli_util import write_json
from pipelines.executors import live_submissions
from pipelines.job_record import SOURCE_ROOT, check_job, describe_difference, has_progress

RECIPE_STAGE_FILE = "recipe-stage.json"  # the recipe's settings and inputs of a finished stage
UPSTREAM_FILE = "upstream.json"  # {earlier stage: sha256 of its summary.json} when this stage started


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
