"""The pieces the audit report is made of: its tables, figures and sections, and `ReportBuilder`, which runs a
section's SQL through the audit session and finds the columns (tokens, lengths, scores) a run has.

Split off `curate.audit_report` (the sections' content), which re-exports every name here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from curate.audit import AuditRefused, AuditSession
from curate.audit_output import plain_number
from mathmix.cli_util import first_line

TOKEN_COLUMNS = ("token_count", "n_tokens", "num_tokens", "tokens")
LENGTH_COLUMNS = ("n_chars", "length", "num_chars", "char_count")
SCORE_COLUMNS = ("math_score", "score")
THRESHOLD_KEYS = ("math_threshold", "threshold", "math_score_threshold")
DOCUMENT_VIEWS = ("web", "dedup", "decont")


def with_tasks(b: ReportBuilder, table: str, total: bool = True) -> str:
    """`summaries` or `stats` with the rewriter's per-task rows (`task_summaries`, `task_stats`) added, as SQL for
    a FROM; without TOTAL, the rewriter's total (branches/summary.json, which sums its tasks) is left out where its
    tasks are listed, so that each rewriter document and drop is counted once."""
    if not b.session.has(f"task_{table}"):
        return table
    kept = "" if total else " WHERE stage <> 'branches'"
    return f"(SELECT * FROM {table}{kept} UNION ALL BY NAME SELECT * EXCLUDE (task) FROM task_{table})"


@dataclass
class ReportTable:
    """One table of the report: the SQL that made it and its rows."""

    key: str
    title: str
    sql: str
    columns: list[str]
    rows: list[list[Any]]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


@dataclass
class ReportFigure:
    """A plot of one of the section's tables: x column, y column, optional series column."""

    key: str
    title: str
    table: str
    x: str
    y: str
    kind: str = "bar"  # bar | barh | line
    series: str | None = None
    vline: float | None = None
    logy: bool = False
    xlabel: str = ""
    step: float | None = None  # a line over bins of this width: an empty bin (no row) is drawn as 0


@dataclass
class Section:
    key: str
    title: str
    tables: list[ReportTable] = field(default_factory=list)
    figures: list[ReportFigure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plots_not_drawn: list[str] = field(default_factory=list)  # "'TITLE' (why)", also a note of the section

    def table(self, key: str) -> ReportTable | None:
        return next((t for t in self.tables if t.key == key), None)


class ReportBuilder:
    """Runs a section's queries through the session and records them."""

    def __init__(self, session: AuditSession, math_threshold: float | None = None, top_n: int = 20):
        self.session = session
        self.math_threshold = math_threshold
        self.top_n = top_n

    def add(self, section: Section, key: str, title: str, sql: str) -> ReportTable | None:
        """Run one table's SQL into the section; a table whose SQL fails on these outputs (a column of another
        type, a damaged file, memory) is a `could not be computed: TITLE: ...` note, and the section's other
        tables and checks are still computed."""
        try:
            table = self.session.query(sql)
        except (duckdb.Error, AuditRefused) as err:
            section.notes.append(f"could not be computed: {title}: {first_line(err)}")
            return None
        # DECIMALs (a sum() not cast, a literal 1.5) as numbers: summary.json would hold them as strings
        rows = [[plain_number(v) for v in r.values()] for r in table.to_pylist()]
        result = ReportTable(key, title, " ".join(sql.split()), table.column_names, rows)
        section.tables.append(result)
        return result

    def find_column(
        self, relation: str, candidates: tuple[str, ...], contains: str | None = None
    ) -> str | None:
        """The first of `candidates` the relation has (else one whose name contains `contains`)."""
        columns = self.session.columns(relation)
        for name in candidates:
            if name in columns:
                return name
        if contains:
            return next((c for c in columns if contains in c.lower()), None)
        return None

    def tokens(self, relation: str) -> tuple[str, str]:
        """SQL for a document's tokens in `relation` and its label (a real count, else chars / 4)."""
        column = self.find_column(relation, TOKEN_COLUMNS)
        if column:
            return f'"{column}"', "tokens"
        # Characters everywhere (the stage's column, else length(text)), so that every estimate is alike and
        # chains from stage to stage; strlen() would count UTF-8 bytes (a math page's symbols count 2-3 times).
        return f"{self.length(relation)} / 4", "est. tokens (chars/4)"

    def length(self, relation: str) -> str:
        """SQL for a document's length in characters (the stage's column, else the text's; NULLs filled)."""
        column = self.find_column(relation, LENGTH_COLUMNS)
        if column and "text" in self.session.columns(relation):
            return (
                f'coalesce("{column}", length(text))'  # union views (rejects) mix files with and without it
            )
        return f'"{column}"' if column else "length(text)"

    def threshold(self) -> float | None:
        """The math-score threshold: the report option, else the web stage summary's threshold key."""
        if self.math_threshold is not None:
            return self.math_threshold
        if not self.session.has("summaries"):
            return None
        extra = self.session.scalar("SELECT extra FROM summaries WHERE stage = 'web'")
        values = json.loads(extra) if extra else {}
        for key in THRESHOLD_KEYS:
            if isinstance(values.get(key), int | float):
                return float(values[key])
        return _scorer_threshold(self.session.run_dir / "web" / "logs" / "executor.json")


def _scorer_threshold(executor_json: Path) -> float | None:
    """The math scorer's threshold as datatrove saved the web pipeline (the step with a model and a threshold)."""
    try:
        steps = json.loads(executor_json.read_text()).get("pipeline", [])
    except (OSError, ValueError, AttributeError):
        return None
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict) or "model_path" not in step:
            continue
        if isinstance(step.get("threshold"), int | float):
            return float(step["threshold"])
        if step.get("keep_top_percent") is None:  # the scorer then takes the threshold from the model's card
            from classifiers.model import DEFAULT_THRESHOLD, read_card

            return float(read_card(step["model_path"]).get("threshold", DEFAULT_THRESHOLD))
    return None
