"""`mathmix quickstart`: write the sample, run recipes/quickstart.yaml on it, and say what was made where."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.table import Table

from mathmix.cli_util import console
from pipelines.recipe import load_recipe
from pipelines.run_lock import run_folder_lock
from pipelines.runner import check_run_folder, run_recipe, write_record
from pipelines.sample import write_sample
from pipelines.stages import stage_module

RECIPES_DIR = Path(__file__).resolve().parents[1] / "recipes"


def stage_notes(summary: dict) -> str:
    """A stage's key figures in a few words: its main drop reasons, and what a stage that is not about documents
    made (tokens, losses, accuracies, held-out F1)."""
    notes = []
    dropped = summary.get("dropped")
    if isinstance(dropped, dict) and dropped:
        top = sorted(dropped.items(), key=lambda kv: -kv[1])[:2]
        notes.append(", ".join(f"{reason} {n}" for reason, n in top) + (" ..." if len(dropped) > 2 else ""))
    heldout = summary.get("heldout")
    if isinstance(heldout, dict) and "f1" in heldout:
        notes.append(f"held-out F1 {heldout['f1']:.2f}")
    if "tokens_out" in summary:
        notes.append(f"{summary['tokens_out']:,} tokens")
    for name, stage in (summary.get("stages") or {}).items():
        if isinstance(stage, dict) and "final_loss" in stage:
            notes.append(f"{name}: {stage.get('steps', '?')} steps, loss {stage['final_loss']:.2f}")
    notes += [f"{key[9:]} {value:.2f}" for key, value in summary.items() if key.startswith("accuracy_")]
    return "; ".join(notes)


def run_quickstart(output_dir: Path, recipe_path: Path | None = None) -> dict:
    """Write OUTPUT_DIR/sample, run the quickstart recipe into OUTPUT_DIR, print a table of stage outputs."""
    start = time.time()
    output_dir = Path(output_dir).resolve()
    recipe = load_recipe(recipe_path or RECIPES_DIR / "quickstart.yaml")
    recipe.output_dir = output_dir
    check_run_folder(output_dir)
    # The sample is written under the run's lock too: a second quickstart on this folder is refused before it
    # rewrites a sample the first one is reading.
    with run_folder_lock(output_dir):
        sample_dir = output_dir / "sample"
        if not (sample_dir / "sample.json").exists():
            counts = write_sample(sample_dir)
            console.print(f"sample: {counts} -> {sample_dir}")
        summaries = run_recipe(recipe)
    table = Table(title=f"quickstart: {output_dir}")
    for column in ("stage", "docs_in", "docs_out", "dropped", "seconds", "folder"):
        table.add_column(column)
    for stage, summary in summaries.items():
        dropped = summary.get("dropped", {})
        table.add_row(
            stage,
            str(summary.get("docs_in", "-")),
            str(summary.get("docs_out", "-")),
            str(sum(dropped.values())) if isinstance(dropped, dict) else "-",
            str(summary.get("seconds", "-")),
            getattr(stage_module(stage), "FOLDER", stage) + "/",
        )
    console.print(table)
    for stage, summary in summaries.items():  # below the table: a column would wrap on a terminal of 80
        if notes := stage_notes(summary):
            console.print(f"  {stage}: {notes}", soft_wrap=True)
    total = round(time.time() - start, 1)
    record = output_dir / "quickstart.json"
    stamps = {stage: summary.get("finished_at") for stage, summary in summaries.items()}
    try:
        previous = json.loads(record.read_text())
    except (OSError, ValueError):
        previous = {}
    if (
        all(stamps.values()) and previous.get("finished_at") == stamps
    ):  # every stage skipped: keep the real run
        console.print(
            f"every stage was already complete: nothing ran now ({total} s); the run that made them took "
            f"{previous.get('seconds', '?')} s"
        )
    else:
        write_record(record, {"seconds": total, "stages": list(summaries), "finished_at": stamps})
    console.print(
        f"total {total} s; folders are under {output_dir}, the audit report is {output_dir}/audit/report.html"
    )
    return summaries
