"""Corpus audit: DuckDB in memory over one run folder, read-only by construction.

`AuditSession(run_dir)` creates the relations (`curate.audit_views`), then closes the connection around them:
`allowed_directories` = the run folder, `enable_external_access` off (so no file outside the run folder can be
read or written, no extension installed or loaded), `lock_configuration` on (so no SET undoes it). Every query,
the user's and the report's alike, then passes `curate.audit_guard.check_read_only` before it runs.

Queries larger than memory spill to a private temporary folder made for the session (0700, removed on close),
not DuckDB's default `<cwd>/.tmp/`: DuckDB adds its temp folder to the readable directories, and a private
empty one holds nothing but this session's own spill files. Writing results out (table, csv, json, parquet) is
`curate.audit_output`'s.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from curate.audit_guard import AuditRefused, AuditSyntaxError, check_read_only
from curate.audit_output import (
    MAX_ROWS,
    OUTPUT_FORMATS,
    format_table,
    output_format,
    plain_number,
    write_result,
)
from curate.audit_stages import holds_run, stage_dirs
from curate.audit_views import (
    NO_DATA,
    NO_VIEW,
    NOT_REPORT_FILES,
    OUT_OF_MEMORY,
    READ_FILES,
    UNREADABLE,
    VIEW_FILES,
    create_all,
    damaged_parquet,
    unfinished_stages,
    walk_files,
)
from mathmix.cli_util import first_line

__all__ = [
    "MAX_ROWS",
    "OUTPUT_FORMATS",
    "AuditRefused",
    "AuditSession",
    "AuditSyntaxError",
    "SettingsError",
    "format_table",
    "output_format",
    "plain_number",
    "write_result",
]

# Errors a damaged Parquet page can raise (plain duckdb.Error: `Variable-length int over 10 bytes.`)
READ_ERRORS = (duckdb.Error, duckdb.IOException, duckdb.InvalidInputException, duckdb.InternalException)
# What DuckDB 2.0.1 says, naming no file, for a damaged page behind a good footer (measured by overwriting bytes
# of the pages of snappy, zstd, gzip, lz4, brotli and uncompressed files, data pages v1 and v2): the page
# header's thrift decoding, a decompressor, a decoder running past its page. Only these send the session
# reading Parquet files whole to name the damaged one; any other error (`SELECT error('typo')`, a missing
# read_json path, malformed JSON text) is a plain SQL error, returned as it is.
DAMAGED_PAGE = re.compile(
    "|".join(
        re.escape(text)
        for text in (
            "Variable-length int over",
            "Varint-decoding",
            "don't know what type",
            "TProtocolException",
            "Couldn't deserialize thrift",
            "Out of buffer",
            "decompress",
            "snappy",
            "zstd",
            "gzip",
            "lz4",
            "brotli",
            "corrupt",
            "Mismatch in parquet read",
            "dictionary offset out of range",
            "Payload value bigger than allowed",
        )
    )
    + r"|invalid \w+ page|page (?:size|header)",
    re.IGNORECASE,
)
BATCH_ROWS = 2048  # rows fetched from DuckDB at a time when a result is streamed (DuckDB's vector size)


class SettingsError(ValueError):
    """DuckDB refused a setting of the session (e.g. a --memory-limit it cannot parse)."""


@dataclass
class Column:
    """One column of one relation, as `schema` lists it."""

    relation: str
    name: str
    type: str


class AuditSession:
    """An in-memory DuckDB connection with the run's relations, locked read-only."""

    def __init__(self, run_dir: str | Path, threads: int | None = None, memory_limit: str | None = None):
        self.run_dir = Path(run_dir).resolve()
        if not self.run_dir.is_dir():
            raise FileNotFoundError(f"{run_dir}: run folder not found")
        self.spill_dir = Path(tempfile.mkdtemp(prefix="mathmix-audit-"))  # see the module docstring
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.spill_dir, ignore_errors=True)
        config: dict[str, Any] = {
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "temp_directory": str(self.spill_dir),
        }
        if threads:
            config["threads"] = threads
        if memory_limit:
            config["memory_limit"] = memory_limit
        try:
            self.con = duckdb.connect(":memory:", config=config)
        except duckdb.Error as err:  # e.g. a memory limit DuckDB cannot parse
            self._cleanup()
            raise SettingsError(f"DuckDB refused the settings ({first_line(err)})") from None
        try:
            self.relations = create_all(self.con, self.run_dir)
        except duckdb.OutOfMemoryException:  # the views' JSON tables do not fit: not a damaged file
            self.con.close()
            self._cleanup()
            raise SettingsError(
                "DuckDB ran out of memory making the views; give a larger --memory-limit"
            ) from None
        self.unreadable = list(UNREADABLE)  # damaged Parquet and JSON files the views leave out
        # finished document stages whose data/ reads nothing ({stage: summary's docs_out}) and the lines saying so
        self.no_view = dict(NO_VIEW)
        self.no_data = list(NO_DATA)
        if OUT_OF_MEMORY:  # the files are fine: a larger --memory-limit makes them
            limit = f"--memory-limit {memory_limit}" if memory_limit else "the memory limit"
            self.no_data.append(
                f"left out of the views, DuckDB ran out of memory making them (raise {limit}): "
                + ", ".join(OUT_OF_MEMORY)
            )
        self.view_files = {view: list(files) for view, files in VIEW_FILES.items()}  # what the views read
        # the files the lazy views read whose real path is outside the run (linked in): readable, one by one
        self.read_outside = list(
            dict.fromkeys(
                real
                for f in READ_FILES
                if not (real := Path(os.path.realpath(f))).is_relative_to(self.run_dir)
            )
        )
        self.parquet_files = list(dict.fromkeys(f for files in self.view_files.values() for f in files))
        self._pages: dict[Path, str | None] = {}  # file: why its pages do not read (None: they do), once read
        self.unfinished = unfinished_stages(
            self.run_dir, self.relations
        )  # stage folders with no summary.json
        self._lock()

    def _lock(self) -> None:
        # Order matters: the views are bound while access is open; then access is narrowed and the config locked.
        # Outside the run folder only the files the views read (their real paths: DuckDB checks those) are
        # readable, not their folders: a link to / or $HOME opened every file under it.
        self.con.execute("SET allowed_directories = ?", [[str(self.run_dir) + "/"]])
        self.con.execute("SET allowed_paths = ?", [[str(f) for f in self.read_outside]])
        self.con.execute("SET allow_community_extensions = false")
        self.con.execute("SET enable_external_access = false")
        self.con.execute("SET lock_configuration = true")

    def close(self) -> None:
        self.con.close()
        self._cleanup()

    def __enter__(self) -> AuditSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        """Run one read-only statement (with named `$parameters`); AuditRefused if it is not one (or reads
        outside the run folder)."""
        statement = check_read_only(sql)
        try:
            return self.con.sql(statement, params=params).to_arrow_table()
        except duckdb.PermissionException as err:
            raise self._refused(err) from None
        except duckdb.Error as err:
            raise self._name_damaged(err, statement) from None

    def stream(self, sql: str, batch_rows: int = BATCH_ROWS) -> pa.RecordBatchReader:
        """`query` as a stream of record batches of at most `batch_rows` rows: memory stays bounded whatever
        the result's size (DuckDB errors can also come while reading it)."""
        statement = check_read_only(sql)
        try:
            reader = self.con.sql(statement).to_arrow_reader(batch_rows)
        except duckdb.PermissionException as err:
            raise self._refused(err) from None
        except duckdb.Error as err:
            raise self._name_damaged(err, statement) from None

        def batches():
            try:
                yield from reader
            except duckdb.PermissionException as err:
                raise self._refused(err) from None
            except duckdb.Error as err:
                raise self._name_damaged(err, statement) from None

        return pa.RecordBatchReader.from_batches(reader.schema, batches())

    def _name_damaged(self, err: duckdb.Error, sql: str) -> duckdb.Error:
        """A damaged-page error that names no file (DuckDB's `Variable-length int over 10 bytes.` for a page of a
        Parquet file whose footer reads) gets the damaged file(s) named, from reading whole the files of the
        views `sql` names (all the views' files where it names none, e.g. a read_parquet() of its own); each file
        is read at most once per session. Any other error is returned as it is, without reading anything."""
        text = str(err)
        if type(err) not in READ_ERRORS or ".parquet" in text or not DAMAGED_PAGE.search(text):
            return err
        named = [view for view in self.view_files if re.search(rf"(?<!\w){re.escape(view)}(?!\w)", sql, re.I)]
        files = [f for view in named for f in self.view_files[view]] or self.parquet_files
        unread = list(dict.fromkeys(f for f in files if f not in self._pages))
        for path in unread:
            self._pages[path] = next(iter(damaged_parquet([path])), None)
        damaged = [why for f in dict.fromkeys(files) if (why := self._pages[f]) is not None]
        if not damaged:
            return err
        more = f" (+{len(damaged) - 3} more)" if len(damaged) > 3 else ""
        return type(err)(f"{first_line(err)} (damaged Parquet file: {'; '.join(damaged[:3])}{more})")

    def _refused(self, err: Exception) -> AuditRefused:
        n = len(self.read_outside)
        linked = f" and the {n} file(s) its views read through links" if n else ""
        return AuditRefused(f"refused by DuckDB (only files under {self.run_dir}{linked} can be read): {err}")

    def rows(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The result of `query` as a list of dicts."""
        return self.query(sql, params).to_pylist()

    def scalar(self, sql: str) -> Any:
        """The first value of the first row (None for an empty result)."""
        table = self.query(sql)
        return table.column(0)[0].as_py() if table.num_rows and table.num_columns else None

    def has(self, relation: str) -> bool:
        return relation in self.relations

    def columns(self, relation: str) -> list[str]:
        """Column names of a relation ([] where it does not exist)."""
        if relation not in self.relations:
            return []
        return [c.name for c in self.schema() if c.relation == relation]

    def schema(self) -> list[Column]:
        """Every relation's columns, from DuckDB's catalog."""
        if not hasattr(self, "_schema"):
            rows = self.con.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
            ).fetchall()
            self._schema = [Column(*row) for row in rows if row[0] in self.relations]
        return self._schema


def linked_folders(run_dir: Path) -> list[Path]:
    """The real folders, outside the run folder, of its stage folders and of their sub-folders that are links
    (`ln -s /elsewhere/web RUN/web`, `RUN/dedup/data -> /big/disk/...`): the run's too, refused as an -o. A link
    to a folder holding the run (`/`, the run's parent) is none: it is left out of the views."""
    found: list[Path] = []
    for folder in stage_dirs(run_dir):
        links = (p for p in folder.iterdir() if p.is_symlink() and p.is_dir() and not holds_run(run_dir, p))
        for path in (folder, *links):
            real = path.resolve()
            if not real.is_relative_to(run_dir) and real not in found:
                found.append(real)
    return found


def check_output_path(run_dir: str | Path, output: str | Path, own_folder: str | None = None) -> None:
    """Raise ValueError if `output` is inside the run folder (symlinks resolved): the audit writes nothing there.

    `own_folder` names the one sub-folder that may hold it (the report's `RUN/audit/`, which no view reads).
    """
    run = Path(run_dir).resolve()
    target = Path(output).resolve()
    if not target.is_relative_to(run):
        for real in linked_folders(run) if run.is_dir() else []:
            if target.is_relative_to(real):
                raise ValueError(
                    f"{output}: inside {real}, a stage folder of the run folder {run} (linked there), which the "
                    "audit only reads (a file there would change the run)"
                )
        if run.is_dir() and (read := _read_through_link(run, target)) is not None:
            raise ValueError(
                f"{output}: {read}, a file or folder of the run folder {run} (linked there), which the audit only "
                "reads (a file there would change the run)"
            )
        return
    parts = target.relative_to(run).parts
    # RUN/audit/'s own records (its summary.json, recipe-stage.json, ...) are the stage's, not the report's
    if own_folder and len(parts) > 1 and parts[0] == own_folder and not _stage_record(parts):
        return
    where = (
        f"; only {run / own_folder}/ may hold it, not its stage records (summary.json, recipe-stage.json, "
        "upstream.json, job.json, logs/)"
        if own_folder
        else ""
    )
    raise ValueError(
        f"{output}: inside the run folder {run}, which the audit only reads (a file there would change "
        f"the run){where}"
    )


def _read_through_link(run: Path, target: Path) -> Path | None:
    """A file the views read through a link (`cp -rs`, git-annex, DVC, `data/part0 -> /elsewhere/part0`) that is
    `target`, or the real folder of one that holds `target` (a new Parquet file there is read next time)."""
    for folder in stage_dirs(run):
        for path in walk_files(run, folder, "*"):
            real = Path(os.path.realpath(path))
            if real == target or real.parent == target.parent:
                return real if real == target else real.parent
    return None


def _stage_record(parts: tuple[str, ...]) -> bool:
    """RUN/audit/<a file the stage writes or the runner reads>: summary.json, recipe-stage.json, upstream.json,
    job.json (`NOT_REPORT_FILES`), or a file of its logs/ (a report over one would break the next run)."""
    return (len(parts) == 2 and parts[1] in NOT_REPORT_FILES) or (len(parts) > 2 and parts[1] == "logs")


SEED_RANGE = (-(2**63), 2**63 - 1)  # a BIGINT: what DuckDB's hash() takes as the seed


def sample_documents(
    session: AuditSession, view: str, where: str | None = None, n: int = 20, seed: int = 0
) -> list[dict[str, Any]]:
    """A reproducible random sample of up to n rows of `view` matching `where` (which passes the same check).

    The rows with the n smallest hashes of (the whole row as one struct, seed): a uniform sample without replacement over
    the whole view, the same for the same seed whatever the thread count or file order. DuckDB's
    `USING SAMPLE reservoir(n ROWS) REPEATABLE (seed)` is not: over a streamed scan it drew all 20 rows of a
    1M-row corpus from its first 8%. Not `hash(COLUMNS(*), seed)`: that expands to one sort key per column, so
    the rows were ordered by their first column's hash (a view opening with `kind` gave one kind only).
    """
    if view not in session.relations:
        raise AuditRefused(f"no view {view!r} in this run; views: {', '.join(session.relations) or 'none'}")
    if not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        raise ValueError(f"seed {seed} is not a 64-bit integer ({SEED_RANGE[0]} to {SEED_RANGE[1]})")
    condition = f"WHERE {where}" if where else ""
    sql = (
        f'SELECT row_.* FROM (SELECT * FROM "{view}" {condition}) row_ '
        f"ORDER BY hash(row_, $seed::BIGINT) LIMIT {int(n)}"
    )
    return session.rows(sql, {"seed": int(seed)})
