"""`mathmix audit sql|schema|report|sample`: DuckDB SQL over a run folder, read-only by construction."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import typer

from mathmix.cli_util import console, fail

audit_app = typer.Typer(
    help="Audit a run with DuckDB: views web, dedup, decont, corpus, branches, rejects, stats, summaries, "
    "task_stats, task_summaries, shards "
    "and one per stage report; read-only (only SELECT/WITH/FROM-first/DESCRIBE/SUMMARIZE/EXPLAIN/SHOW/PRAGMA show_tables run).",
    no_args_is_help=True,
)

RUN_DIR = typer.Argument(..., help="run folder (the output_dir of a recipe)", exists=True, file_okay=False)


MEMORY_LIMIT = typer.Option(
    None,
    "--memory-limit",
    help="DuckDB memory limit, e.g. 4GB (default: 80% of RAM); larger queries spill to a private temp folder",
)


def check_run_dir(run_dir: Path) -> None:
    """Fail (one line) where RUN_DIR holds no stage output: no run folder (a typo, the folder above the run), whose
    views would all be absent and whose report would be empty."""
    from curate.audit_views import stage_output_found

    if not stage_output_found(run_dir):
        fail(f"no stage output found under {run_dir}: give a run folder (the output_dir of a recipe)")


def _session(run_dir: Path, memory_limit: str | None = None):
    from curate.audit import AuditSession, SettingsError

    check_run_dir(run_dir)
    try:
        session = AuditSession(run_dir, memory_limit=memory_limit)
    except SettingsError as err:
        fail(f"--memory-limit {memory_limit or '(default: 80% of RAM)'}: {err}")
    except FileNotFoundError as err:
        fail(str(err))
    warn_unreadable(session.unreadable)
    warn(session.no_data)
    warn(session.unfinished)
    return session


def warn_unreadable(unreadable: list[str]) -> None:
    """One warning line per damaged Parquet file the views left out (on stderr)."""
    warn(f"left out of the views, unreadable: {line}" for line in unreadable)


def warn(lines: Iterable[str]) -> None:
    """One `warning: ...` line each, on stderr."""
    for line in lines:
        console.print(f"warning: {line}", markup=False, soft_wrap=True)


def error_text(err: BaseException, max_lines: int = 8) -> str:
    """DuckDB's message with its hints (`Did you mean "web"?`, `Candidate bindings: ...`, the query line and
    its caret), blank lines dropped, at most `max_lines` lines."""
    lines = [line.rstrip() for line in str(err).splitlines() if line.strip()]
    if not lines:
        return repr(err)
    if len(lines) > max_lines:
        lines = [*lines[: max_lines - 1], f"... ({len(lines) - max_lines + 1} more lines)"]
    return "\n".join(lines)


def output_option(output: str | None, what: str) -> Path | None:
    """`-o` as a Path; a trailing slash or an existing folder names a folder, which `what` cannot be."""
    if output is None:
        return None
    refuse_empty(output, what)
    path = Path(output)
    if output.endswith(("/", os.sep)) or path.is_dir():
        fail(f"{output}: is a folder; -o names the {what} to write")
    return path


def refuse_empty(output: str | None, what: str) -> None:
    """`-o ""` (an unset shell variable): Path("") is ".", the current folder, which named no file the user meant."""
    if output is not None and not output:
        fail(f"-o {output!r}: an empty path; -o names the {what} to write")


@audit_app.command("sql")
def sql_cmd(
    run_dir: Path = RUN_DIR,
    query: str = typer.Argument(
        ..., help='one read-only statement, e.g. "SELECT lang, count(*) FROM web GROUP BY 1"'
    ),
    fmt: str | None = typer.Option(
        None,
        "--format",
        "-f",
        help="table | csv | json | parquet (parquet needs -o); default: from -o's extension "
        "(.csv, .json, .parquet), else table",
    ),
    output: str | None = typer.Option(
        None, "-o", "--output", help="write the result to this file instead of stdout"
    ),
    max_width: int = typer.Option(80, "--max-width", min=1, help="table format: cut cells longer than this"),
    max_rows: int = typer.Option(
        200,
        "--max-rows",
        min=0,
        help="table format: show at most this many rows and count the rest (0 = all)",
    ),
    memory_limit: str | None = MEMORY_LIMIT,
) -> None:
    """Run one read-only SQL statement over the run's views. Reads RUN_DIR; writes stdout or -o FILE only
    (-o inside RUN_DIR is refused).

    Writes (COPY, CREATE, INSERT, ...), ATTACH, INSTALL/LOAD, SET and state-changing PRAGMAs are refused, and
    file-reading functions (read_parquet, read_csv, ...) only reach files under RUN_DIR. csv, json and parquet
    are streamed (any size, bounded memory); the table shows the first --max-rows rows.
    """
    import sys

    import duckdb

    from curate.audit import AuditRefused, AuditSyntaxError, check_output_path
    from curate.audit_output import output_format, write_result

    path = output_option(output, "file")
    try:
        fmt = output_format(fmt, path)
    except ValueError as err:
        fail(str(err))
    if path is not None:
        try:
            check_output_path(run_dir, path)
        except ValueError as err:
            fail(f"refused: {err}")
    session = _session(run_dir, memory_limit)
    try:
        write_result(session.stream(query), fmt, path, max_width=max_width, max_rows=max_rows, out=sys.stdout)
    except AuditSyntaxError as err:  # a mistake in the query, not a refusal: one line
        fail(str(err))
    except AuditRefused as err:
        fail(f"refused: {err}")
    except (duckdb.Error, ValueError) as err:
        fail(error_text(err))
    except BrokenPipeError:  # `| head`: the reader has what it wanted, as with any Unix filter
        end_quietly()
    except OSError as err:
        fail(f"{err.filename}: {err.strerror}" if err.filename and err.strerror else str(err))
    else:
        if path is not None:
            console.print(f"wrote {path} ({fmt})")
    finally:
        session.close()


@audit_app.command("schema")
def schema_cmd(
    run_dir: Path = RUN_DIR,
    fmt: str = typer.Option("table", "--format", "-f", help="table | json"),
) -> None:
    """List the views of RUN_DIR (what each is over) and their columns. Reads RUN_DIR; writes stdout."""
    import json
    import sys

    if fmt not in ("table", "json"):
        fail(f"--format must be table or json, got {fmt!r}")
    session = _session(run_dir)
    try:
        columns = session.schema()
        if fmt == "json":
            out = {name: {"source": source, "columns": {c.name: c.type for c in columns if c.relation == name}}
                   for name, source in session.relations.items()}  # fmt: skip
            typer.echo(json.dumps(out, indent=1))
        else:
            for name, source in session.relations.items():
                typer.echo(f"{name}  ({source})")
                for column in (c for c in columns if c.relation == name):
                    typer.echo(f"    {column.name:32s} {column.type}")
        sys.stdout.flush()  # a broken pipe here, not at exit (where it made the exit status 1)
    except BrokenPipeError:  # `| head`: the reader has what it wanted, as with any Unix filter
        end_quietly()
    finally:
        session.close()


@audit_app.command("report")
def report_cmd(
    run_dir: Path = RUN_DIR,
    output: str | None = typer.Option(
        None,
        "-o",
        "--output",
        help="HTML file (default RUN_DIR/audit/report.html); an existing folder or one ending in / means "
        "FOLDER/report.html; X.md means X.html + X.md",
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
    from curate.audit import SettingsError, check_output_path
    from curate.audit_sections import plots_not_drawn_line, write_report

    refuse_empty(output, "HTML file (or folder)")
    check_run_dir(run_dir)  # before RUN_DIR/audit/ is made in it
    html_path, md_path = report_paths(output or str(run_dir / "audit" / "report.html"), markdown)
    named = Path(output) if output else None
    named_folder = output is not None and (output.endswith(("/", os.sep)) or Path(output).is_dir())
    if markdown and md_path is None:
        console.print(
            f"{output}: not a regular file, so no Markdown twin (nor its plots) beside it", style="dim"
        )
    try:
        for path in (html_path, md_path):
            if path is not None:
                check_output_path(run_dir, path, own_folder="audit")
    except ValueError as err:
        fail(f"refused: {err}")
    for path in (html_path, md_path):
        if path is not None and not (is_special_file(path) or is_device_path(path)):
            check_folder_writable(path, output or str(html_path))
    try:
        result = write_report(
            run_dir,
            html_path,
            md_path,
            math_threshold=math_threshold,
            top_n=top_n,
            memory_limit=memory_limit,
            # the file -o names is the user's choice (-o X.md: that Markdown file; not FOLDER.md/report.md)
            md_named=named is not None and md_path == named,
            html_twin=named is not None and html_path != named and not named_folder,
        )
    except OSError as err:
        fail(f"{err.filename}: {err.strerror}" if err.filename else str(err))
    except SettingsError as err:  # DuckDB refused --memory-limit
        fail(f"--memory-limit {memory_limit or '(default: 80% of RAM)'}: {err}")
    except ValueError as err:  # the HTML and its Markdown twin are one file
        fail(str(err))
    warn_unreadable(result["unreadable"])
    for section in result["sections"].values():
        for note in section["notes"]:
            if note.startswith("not available"):
                console.print(f"{section['title']}: {note}", style="dim", markup=False, soft_wrap=True)
    # unbalanced or unfinished stages, sections not computed: the report says so, and so does the console
    warn(result["warnings"])
    console.print(f"wrote {', '.join(result['files'][:2])} ({result['seconds']:.1f} s)")
    # plots not drawn: each section of the report says so, and one line here for a reader of the console
    if undrawn := result["plots_not_drawn"]:
        console.print(plots_not_drawn_line(undrawn), markup=False, soft_wrap=True)


def check_folder_writable(path: Path, given: str) -> None:
    """Fail (one line, naming `given`, the user's -o) where `path`'s folder cannot be made or written in: checked
    before the queries, which take seconds to minutes on a large run (a temp file is made and removed there where
    the folder exists; else its nearest existing folder must be a writable folder)."""
    import tempfile

    folder = path.parent
    above = folder
    while not above.exists() and above != above.parent:
        if above.is_symlink():  # a dangling link: mkdir() cannot make its target
            fail(f"{given}: {above} is a link to nothing; -o names a file in a folder")
        above = above.parent
    if not above.is_dir():
        fail(f"{given}: {above} is not a folder")
    try:
        if above == folder:
            fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".check", dir=folder)
            os.close(fd)
            os.unlink(name)
        elif not os.access(above, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as err:
        fail(f"{given}: cannot write in {above} ({err.strerror or err})")


def report_paths(output: str | Path, markdown: bool) -> tuple[Path, Path | None]:
    """(HTML, Markdown or None) for `-o OUTPUT`: an existing folder or a trailing slash means FOLDER/report.html;
    X.md means X.html + X.md (the twin overwrote the HTML)."""
    path = Path(output)
    if str(output).endswith(("/", os.sep)) or path.is_dir():
        path = path / "report.html"
    elif path.suffix.lower() == ".md":
        return path.with_suffix(".html"), path if markdown else None
    if is_special_file(path) or is_device_path(path):
        # /dev/null, /dev/stdout, a FIFO: no `/dev/null.md` + `/dev/null_plots/` beside it
        return path, None
    return path, path.with_suffix(".md") if markdown else None


def is_device_path(path: Path) -> bool:
    """An existing path under /dev or /proc as given (links not followed): `/dev/stdout` redirected to a regular file
    resolves to that file, and still is no folder to write a Markdown twin and its plots beside."""
    parts = Path(os.path.abspath(path)).parts
    if len(parts) < 3 or parts[1] not in ("dev", "proc") or not os.path.lexists(path):
        return False
    # a link on the way (/dev/stdout, /dev/fd/1, /proc/self/fd/1) or no regular file: a regular file of
    # /dev/shm (a tmpfs) is a file like any other
    links = any(Path(*parts[:i]).is_symlink() for i in range(2, len(parts) + 1))
    return links or not Path(path).is_file()


def is_special_file(path: Path) -> bool:
    """An existing path that is neither a regular file nor a folder (a device, a FIFO; links followed)."""
    return path.exists() and not path.is_file() and not path.is_dir()


@audit_app.command("sample")
def sample_cmd(
    run_dir: Path = RUN_DIR,
    view: str = typer.Option("corpus", "--view", help="view to sample from (see `mathmix audit schema`)"),
    where: str | None = typer.Option(None, "--where", help='SQL condition, e.g. "math_score < 0.6"'),
    n: int = typer.Option(20, "-n", min=1, help="documents to print"),
    seed: int = typer.Option(
        0,
        "--seed",
        min=-(2**63),
        max=2**63 - 1,
        help="sampling seed, a 64-bit integer (same seed, same documents)",
    ),
    chars: int = typer.Option(1200, "--chars", min=0, help="print at most this many characters of text"),
) -> None:
    """Print a random sample of documents to eyeball. Reads RUN_DIR; writes stdout."""
    import sys

    from curate.audit import AuditRefused, AuditSyntaxError, sample_documents

    session = _session(run_dir)
    try:
        docs = sample_documents(session, view, where=where, n=n, seed=seed)
    except AuditSyntaxError as err:  # a mistake in --where: one line
        fail(str(err))
    except AuditRefused as err:
        fail(f"refused: {err}")
    except Exception as err:  # a bad --where is a user error: say it, with DuckDB's hints, no traceback
        fail(error_text(err))
    else:
        try:
            for i, doc in enumerate(docs):
                text = str(doc.pop("text", "") or "")
                header = "  ".join(f"{k}={_short(v)}" for k, v in doc.items() if v is not None)
                typer.echo(f"--- [{i + 1}/{len(docs)}] {header}")
                typer.echo(text[:chars] + (f" … (+{len(text) - chars} chars)" if len(text) > chars else ""))
            sys.stdout.flush()
        except BrokenPipeError:  # `| head`: the reader has what it wanted, as with any Unix filter
            end_quietly()
        console.print(f"{len(docs)} document(s) from {view}" + (f" where {where}" if where else ""))
    finally:
        session.close()


def end_quietly() -> None:
    """Exit 0 after a broken pipe (`| head`): stdout is pointed at /dev/null, so exit's flush raises no second
    error (which made the exit status 1)."""
    import sys

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout with no file descriptor (a test's capture)
        pass
    raise typer.Exit(0) from None


def _short(value: object, width: int = 60) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")
