"""`mathmix quickstart`: write the sample, run recipes/quickstart.yaml on it, and say what was made where."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.table import Table

from mathmix.cli_util import console
from pipelines.recipe import load_recipe
from pipelines.runner import run_recipe
from pipelines.sample import write_sample
from pipelines.stages import stage_module

RECIPES_DIR = Path(__file__).resolve().parents[1] / "recipes"


def run_quickstart(output_dir: Path, recipe_path: Path | None = None) -> dict:
    """Write OUTPUT_DIR/sample, run the quickstart recipe into OUTPUT_DIR, print a table of stage outputs."""
    start = time.time()
    output_dir = Path(output_dir).resolve()
    sample_dir = output_dir / "sample"
    if not (sample_dir / "sample.json").exists():
        counts = write_sample(sample_dir)
        console.print(f"sample: {counts} -> {sample_dir}")
    recipe = load_recipe(recipe_path or RECIPES_DIR / "quickstart.yaml")
    recipe.output_dir = output_dir
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
    total = round(time.time() - start, 1)
    (output_dir / "quickstart.json").write_text(
        json.dumps({"seconds": total, "stages": list(summaries)}) + "\n"
    )
    console.print(
        f"total {total} s; folders are under {output_dir}, the audit report is {output_dir}/audit/report.html"
    )
    return summaries
