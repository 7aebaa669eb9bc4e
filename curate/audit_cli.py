"""`mathmix audit sql|schema|report|sample`: DuckDB SQL over a run folder, read-only by construction."""

from __future__ import annotations

from pathlib import Path

import typer

from mathmix.cli_util import console, fail

audit_app = typer.Typer(
    help="Audit a run with DuckDB: views web, dedup, decont, corpus, branches, rejects, stats, summaries, shards "
    "and one per stage report; read-only (only SELECT/WITH/FROM-first/DESCRIBE/SUMMARIZE/EXPLAIN/SHOW/PRAGMA show_tables run).",
    no_args_is_help=True,
)

RUN_DIR = typer.Argument(..., help="run folder (the output_dir of a recipe)", exists=True, file_okay=False)


MEMORY_LIMIT = typer.Option(
    None,
    "--memory-limit",
    help="DuckDB memory limit, e.g. 4GB (default: 80% of RAM); larger queries spill to a private temp folder",
)


def _session(run_dir: Path, memory_limit: str | None = None):
    from curate.audit import AuditSession

    try:
        session = AuditSession(run_dir, memory_limit=memory_limit)
    except (FileNotFoundError, ValueError) as err:
        fail(str(err) if isinstance(err, FileNotFoundError) else f"--memory-limit {memory_limit}: {err}")
    warn_unreadable(session.unreadable)
    return session


def warn_unreadable(unreadable: list[str]) -> None:
    """One warning line per damaged Parquet file the views left out (on stderr)."""
    for line in unreadable:
        console.print(f"warning: left out of the views, unreadable: {line}", markup=False, soft_wrap=True)


@audit_app.command("sql")
def sql_cmd(
    run_dir: Path = RUN_DIR,
    query: str = typer.Argument(
        ..., help='one read-only statement, e.g. "SELECT lang, count(*) FROM web GROUP BY 1"'
    ),
    fmt: str = typer.Option(
        "table", "--format", "-f", help="table | csv | json | parquet (parquet needs -o)"
    ),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="write the result here instead of stdout"
    ),
    max_width: int = typer.Option(80, "--max-width", help="table format: cut cells longer than this"),
    memory_limit: str | None = MEMORY_LIMIT,
) -> None:
    """Run one read-only SQL statement over the run's views. Reads RUN_DIR; writes stdout or -o FILE only
    (-o inside RUN_DIR is refused).

    Writes (COPY, CREATE, INSERT, ...), ATTACH, INSTALL/LOAD, SET and state-changing PRAGMAs are refused, and
    file-reading functions (read_parquet, read_csv, ...) only reach files under RUN_DIR.
    """
    import duckdb

    from curate.audit import AuditRefused, check_output_path, write_result

    if output is not None:
        try:
            check_output_path(run_dir, output)
        except ValueError as err:
            fail(f"refused: {err}")
    session = _session(run_dir, memory_limit)
    try:
        text = write_result(session.query(query), fmt, output, max_width=max_width)
    except AuditRefused as err:
        fail(f"refused: {err}")
    except (duckdb.Error, ValueError) as err:
        fail(str(err).splitlines()[0] if str(err) else repr(err))
    else:
        if text is not None:
            typer.echo(text, nl=False)
        elif output is not None:
            console.print(f"wrote {output}")
    finally:
        session.close()


@audit_app.command("schema")
def schema_cmd(
    run_dir: Path = RUN_DIR,
    fmt: str = typer.Option("table", "--format", "-f", help="table | json"),
) -> None:
    """List the views of RUN_DIR (what each is over) and their columns. Reads RUN_DIR; writes stdout."""
    import json

    session = _session(run_dir)
    try:
        columns = session.schema()
        if fmt == "json":
            out = {name: {"source": source, "columns": {c.name: c.type for c in columns if c.relation == name}}
                   for name, source in session.relations.items()}  # fmt: skip
            typer.echo(json.dumps(out, indent=1))
            return
        if not session.relations:
            console.print(f"[yellow]no stage output found under {run_dir}[/]")
        for name, source in session.relations.items():
            typer.echo(f"{name}  ({source})")
            for column in (c for c in columns if c.relation == name):
                typer.echo(f"    {column.name:32s} {column.type}")
    finally:
        session.close()


@audit_app.command("report")
def report_cmd(
    run_dir: Path = RUN_DIR,
    output: Path | None = typer.Option(
        None,
        "-o",
        "--output",
        help="HTML file (default RUN_DIR/audit/report.html); a folder means FOLDER/report.html; "
        "X.md means X.html + X.md",
    ),
    markdown: bool = typer.Option(True, "--markdown/--no-markdown", help="also write the .md twin (+ PNGs)"),
    math_threshold: float | None = typer.Option(
        None, "--math-threshold", min=0, max=1, help="default: from web summary.json"
    ),
    top_n: int = typer.Option(20, "--top", min=1, help="rows in top-N tables (domains, languages)"),
    memory_limit: str | None = MEMORY_LIMIT,
) -> None:
    """Write the audit report: one self-contained HTML file and a Markdown twin (plots in <stem>_plots/).

    Reads RUN_DIR; writes OUTPUT (.html), OUTPUT with .md and OUTPUT's <stem>_plots/*.png (inside RUN_DIR
    only under RUN_DIR/audit/). Sections: funnel, top domains, math_score histogram, lengths, language, dedup
    clusters, contamination, rewriter, mixture.
    """
    from curate.audit import check_output_path
    from curate.audit_sections import write_report

    html_path, md_path = report_paths(output or run_dir / "audit" / "report.html", markdown)
    try:
        for path in (html_path, md_path):
            if path is not None:
                check_output_path(run_dir, path, own_folder="audit")
    except ValueError as err:
        fail(f"refused: {err}")
    try:
        result = write_report(
            run_dir, html_path, md_path, math_threshold=math_threshold, top_n=top_n, memory_limit=memory_limit
        )
    except OSError as err:
        fail(f"{err.filename}: {err.strerror}" if err.filename else str(err))
    except ValueError as err:  # DuckDB refused --memory-limit
        fail(f"--memory-limit {memory_limit}: {err}")
    warn_unreadable(result["unreadable"])
    for section in result["sections"].values():
        for note in section["notes"]:
            if note.startswith("not available"):
                console.print(f"[dim]{section['title']}: {note}[/]")
    console.print(f"wrote {', '.join(result['files'][:2])} ({result['seconds']:.1f} s)")


def report_paths(output: Path, markdown: bool) -> tuple[Path, Path | None]:
    """(HTML, Markdown or None) for `-o OUTPUT`: X.md means X.html + X.md (the twin overwrote the HTML)."""
    if output.is_dir():
        output = output / "report.html"
    elif output.suffix.lower() == ".md":
        return output.with_suffix(".html"), output if markdown else None
    return output, output.with_suffix(".md") if markdown else None


@audit_app.command("sample")
def sample_cmd(
    run_dir: Path = RUN_DIR,
    view: str = typer.Option("corpus", "--view", help="view to sample from (see `mathmix audit schema`)"),
    where: str | None = typer.Option(None, "--where", help='SQL condition, e.g. "math_score < 0.6"'),
    n: int = typer.Option(20, "-n", help="documents to print"),
    seed: int = typer.Option(0, "--seed", help="sampling seed (same seed, same documents)"),
    chars: int = typer.Option(1200, "--chars", help="print at most this many characters of text"),
) -> None:
    """Print a random sample of documents to eyeball. Reads RUN_DIR; writes stdout."""
    from curate.audit import AuditRefused, sample_documents

    session = _session(run_dir)
    try:
        docs = sample_documents(session, view, where=where, n=n, seed=seed)
    except AuditRefused as err:
        fail(f"refused: {err}")
    except Exception as err:  # a bad --where is a user error: say it in one line
        fail(str(err).splitlines()[0])
    else:
        for i, doc in enumerate(docs):
            text = str(doc.pop("text", "") or "")
            header = "  ".join(f"{k}={_short(v)}" for k, v in doc.items() if v is not None)
            typer.echo(f"--- [{i + 1}/{len(docs)}] {header}")
            typer.echo(text[:chars] + (f" … (+{len(text) - chars} chars)" if len(text) > chars else ""))
        console.print(f"{len(docs)} document(s) from {view}" + (f" where {where}" if where else ""))
    finally:
        session.close()


def _short(value: object, width: int = 60) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")
