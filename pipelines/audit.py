"""Recipe stage `audit`: the canned audit report over the whole run folder (DuckDB, read-only).

Writes RUN/audit/report.html (self-contained), report.md (+ report_plots/*.png) and summary.json, whose
`sections` hold every number of the report. It reads the run folder, not the previous stage's data, so it runs
last and audits whatever stages the recipe ran.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from curate.summary import write_summary
from pipelines.stages import StageContext

FOLDER = "audit"
PRODUCES_DOCUMENTS = False
READS = "every stage folder of the run"  # what --dry-run shows


class Config(BaseModel):
    """Settings of the audit stage (all optional)."""

    model_config = ConfigDict(extra="forbid")

    math_threshold: float | None = Field(
        None, description="threshold line on the math_score plot (default: web)"
    )
    top_n: int = Field(20, ge=1, description="rows in top-N tables (domains, languages)")
    markdown: bool = Field(True, description="also write report.md and report_plots/")
    threads: int | None = Field(None, ge=1, description="DuckDB threads (default: all cores)")
    memory_limit: str | None = Field(
        None, description="DuckDB memory limit, e.g. 4GB (default: 80% of RAM); larger queries spill to disk"
    )

    @field_validator("memory_limit")
    @classmethod
    def _duckdb_reads_it(cls, value: str | None) -> str | None:
        """Checked when the recipe is read (DuckDB parses it), not after the stages before the audit ran."""
        if value is not None:
            import duckdb

            from mathmix.cli_util import first_line

            try:
                duckdb.connect(":memory:", config={"memory_limit": value}).close()
            except duckdb.Error as err:
                raise ValueError(first_line(err)) from None
        return value


def inputs_read(
    config: Config, run_dir: Path | str, inputs: list[str], previous: Mapping[str, Path]
) -> list[str]:
    """None of its own: the recipe stage's record held INPUTS, the recipe's default (the previous document stage's
    data/, RUN/branches/data after a rewrite stage: a folder that does not exist). The audit reads every stage
    folder; the summaries of the recipe's stages before it are in its upstream.json. Its sizes are not recorded:
    the run folder holds the audit's own output."""
    return []


def run_stage(config: Config, ctx: StageContext) -> dict[str, Any]:
    """Write the report into ctx.out_dir and return the summary (docs_in = docs_out = corpus documents)."""
    from curate.audit_sections import plots_not_drawn_line, write_report

    start = time.time()
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    result = write_report(
        ctx.run_dir,
        ctx.out_dir / "report.html",
        ctx.out_dir / "report.md" if config.markdown else None,
        math_threshold=config.math_threshold,
        top_n=config.top_n,
        threads=config.threads,
        memory_limit=config.memory_limit,
    )
    summary = {
        "docs_in": result["corpus_docs"],
        "docs_out": result["corpus_docs"],
        "dropped": {},
        "seconds": round(time.time() - start, 2),
        "report": "report.html",
        "relations": sorted(result["relations"]),
        "sections": result["sections"],
        # numbers that do not add up, unfinished stages, sections not computed
        "warnings": result.get("warnings", []),
        "plots_not_drawn": result.get("plots_not_drawn", []),  # their tables are in the report
    }
    write_summary(ctx.out_dir, summary)
    from rich.markup import escape

    from mathmix.cli_util import console

    for warning in summary["warnings"]:  # `mathmix run` shows them, not only audit/summary.json
        console.print(f"[yellow]warning:[/] audit: {escape(str(warning))}", soft_wrap=True)
    if undrawn := summary["plots_not_drawn"]:  # as `audit report` says it
        console.print(f"audit: {plots_not_drawn_line(undrawn)}", markup=False, soft_wrap=True)
    return summary
