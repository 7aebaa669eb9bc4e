"""Corpus audit: DuckDB in memory over one run folder, read-only by construction.

`AuditSession(run_dir)` creates the relations (`curate.audit_views`), then closes the connection around them:
`allowed_directories` = the run folder, `enable_external_access` off (so no file outside the run folder can be
read or written, no extension installed or loaded), `lock_configuration` on (so no SET undoes it). Every query,
the user's and the report's alike, then passes `curate.audit_guard.check_read_only` before it runs.

Queries larger than memory spill to a private temporary folder made for the session (0700, removed on close),
not DuckDB's default `<cwd>/.tmp/`: DuckDB adds its temp folder to the readable directories, and a private
empty one holds nothing but this session's own spill files.
"""

from __future__ import annotations

import base64
import decimal
import errno
import json
import math
import os
import re
import shutil
import sys
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import duckdb
import pyarrow as pa

from curate.audit_guard import AuditRefused, AuditSyntaxError, check_read_only
from curate.audit_views import (
    UNREADABLE,
    VIEW_FILES,
    create_all,
    damaged_parquet,
    unfinished_stages,
)
from mathmix.cli_util import first_line

__all__ = ["AuditRefused", "AuditSession", "AuditSyntaxError", "SettingsError", "write_result"]

OUTPUT_FORMATS = ("table", "csv", "json", "parquet")
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
MAX_ROWS = 200  # rows the text table shows by default (the CLI's --max-rows)
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
        self.relations = create_all(self.con, self.run_dir)
        self.unreadable = list(UNREADABLE)  # damaged Parquet and JSON files the views leave out
        self.view_files = {view: list(files) for view, files in VIEW_FILES.items()}  # what the views read
        self.parquet_files = list(dict.fromkeys(f for files in self.view_files.values() for f in files))
        self._pages: dict[Path, str | None] = {}  # file: why its pages do not read (None: they do), once read
        self.unfinished = unfinished_stages(
            self.run_dir, self.relations
        )  # stage folders with no summary.json
        self._lock()

    def _lock(self) -> None:
        # Order matters: the views are bound while access is open; then access is narrowed and the config locked.
        allowed = [str(self.run_dir) + "/"]
        self.con.execute("SET allowed_directories = ?", [allowed])
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
        return AuditRefused(f"refused by DuckDB (only files under {self.run_dir} can be read): {err}")

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


def check_output_path(run_dir: str | Path, output: str | Path, own_folder: str | None = None) -> None:
    """Raise ValueError if `output` is inside the run folder (symlinks resolved): the audit writes nothing there.

    `own_folder` names the one sub-folder that may hold it (the report's `RUN/audit/`, which no view reads).
    """
    run = Path(run_dir).resolve()
    target = Path(output).resolve()
    if not target.is_relative_to(run):
        return
    parts = target.relative_to(run).parts
    if own_folder and len(parts) > 1 and parts[0] == own_folder:
        return
    where = f"; only {run / own_folder}/ may hold it" if own_folder else ""
    raise ValueError(
        f"{output}: inside the run folder {run}, which the audit only reads (a file there would change "
        f"the run){where}"
    )


def output_format(fmt: str | None, path: Path | None) -> str:
    """The format to write: `fmt`, else the extension of `path` (.csv, .json, .parquet), else `table`."""
    if fmt is None:
        suffix = path.suffix.lower().lstrip(".") if path is not None else ""
        fmt = suffix if suffix in OUTPUT_FORMATS and suffix != "table" else "table"
    if fmt not in OUTPUT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(OUTPUT_FORMATS)}, got {fmt!r}")
    if fmt == "parquet" and path is None:
        raise ValueError("--format parquet needs -o FILE")
    return fmt


def write_result(
    result: pa.Table | pa.RecordBatchReader,
    fmt: str | None,
    path: Path | None,
    max_width: int = 80,
    max_rows: int = MAX_ROWS,
    out: IO[str] | None = None,
) -> None:
    """Write a result as table/csv/json/parquet to `path` (or to `out`, stdout by default).

    The result is read batch by batch (a `RecordBatchReader`, see `AuditSession.stream`), so csv, json and
    parquet are written in bounded memory; `table` shows at most `max_rows` rows (0: all) and counts the rest.
    A file is written next to `path` and renamed onto it at the end: a failed query leaves no half file.
    csv holds nested values (lists, structs, maps) as JSON text and BLOBs as base64; json writes NaN and
    infinities as null and BLOBs as base64; INTERVALs are ISO 8601 durations in csv/json and refused by parquet.
    """
    fmt = output_format(fmt, path)
    reader = result.to_reader() if isinstance(result, pa.Table) else result
    if fmt == "parquet":
        intervals = [f.name for f in reader.schema if _has_interval(f.type)]
        if intervals:
            raise ValueError(
                f"column {intervals[0]!r} is an INTERVAL, which Parquet cannot hold: cast it in the query "
                f'("{intervals[0]}"::VARCHAR, or epoch("{intervals[0]}") for seconds)'
            )
    if path is None:
        _write_text(reader, fmt, out or sys.stdout, max_width, max_rows)
        return
    path = path.resolve() if path.is_symlink() else path  # a link is written through, not replaced
    if path.exists() and not path.is_file():  # /dev/stdout, a FIFO, >(...): written through as they are
        _write_to(reader, fmt, path, max_width, max_rows)
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:  # named as the user wrote it, not as our temporary file beside it
        above = next((p for p in path.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{above} is not a folder", str(path)) from None
        raise type(err)(err.errno, err.strerror, str(path)) from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        _write_to(reader, fmt, tmp, max_width, max_rows)
        # a file written over keeps its permissions; a new one gets the umask's, as open() would give it
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_to(reader: pa.RecordBatchReader, fmt: str, path: Path, max_width: int, max_rows: int) -> None:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetWriter(path, reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
    else:
        with open(path, "w", encoding="utf-8", newline="") as stream:
            _write_text(reader, fmt, stream, max_width, max_rows)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_text(reader: pa.RecordBatchReader, fmt: str, out: IO[str], max_width: int, max_rows: int) -> None:
    if fmt == "csv":
        header = True
        for batch in reader:
            if batch.num_rows or header:
                out.write(_csv_text(pa.Table.from_batches([batch], reader.schema), header=header))
                header = False
        if header:  # no batch at all: the header alone
            out.write(_csv_text(reader.schema.empty_table()))
    elif fmt == "json":
        # json.dumps(rows, indent=1), one row at a time: "[\n {...},\n {...}\n]"
        first = True
        for batch in reader:
            for row in batch.to_pylist():
                text = json.dumps({k: _json_value(v) for k, v in row.items()}, indent=1, default=str,
                                  ensure_ascii=False, allow_nan=False)  # fmt: skip
                out.write(("[\n " if first else ",\n ") + text.replace("\n", "\n "))
                first = False
        out.write("[]\n" if first else "\n]\n")
    else:
        out.write(_table_text(reader, max_width, max_rows))


def _table_text(reader: pa.RecordBatchReader, max_width: int, max_rows: int) -> str:
    """The first `max_rows` rows (0: all) as a text table, and how many more the result holds (counted as the
    rest streams by, not kept)."""
    shown: list[pa.RecordBatch] = []
    kept = total = 0
    for batch in reader:
        total += batch.num_rows
        if max_rows and kept >= max_rows:
            continue
        take = batch.num_rows if not max_rows else min(batch.num_rows, max_rows - kept)
        shown.append(batch.slice(0, take))
        kept += take
    table = pa.Table.from_batches(shown, reader.schema)
    return format_table(table, max_width, total=total)


def _has_interval(type_: pa.DataType) -> bool:
    if pa.types.is_interval(type_):
        return True
    return any(_has_interval(type_.field(i).type) for i in range(type_.num_fields))


def _csv_text(table: pa.Table, header: bool = True) -> str:
    import io

    import pyarrow.csv as pcsv

    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        kind = field.type
        if pa.types.is_nested(kind) or pa.types.is_interval(kind):
            # pyarrow's CSV writer has no nested type: the cell holds the value as JSON text
            values = [None if v is None else _json_text(_json_value(v)) for v in column.to_pylist()]
            column = pa.chunked_array([pa.array(values, pa.string())])
        elif (
            pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind)
        ):
            column = pa.chunked_array([pa.array([_json_value(v) for v in column.to_pylist()], pa.string())])
        columns.append(column)
    buffer = io.BytesIO()
    pcsv.write_csv(
        pa.table(columns, names=table.column_names), buffer, pcsv.WriteOptions(include_header=header)
    )
    return buffer.getvalue().decode()


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value  # an INTERVAL's text, not a JSON document
    return json.dumps(value, default=str, ensure_ascii=False, allow_nan=False)


def plain_number(value: Any) -> Any:
    """A DECIMAL as a number JSON writes as one (json.dumps would make it a string): int where it is integral
    (exact: `sum()` of integers is a HUGEINT, which arrives as a DECIMAL(38,0)), else float; lists, dicts and any
    other value as they are, their DECIMALs converted alike."""
    if isinstance(value, decimal.Decimal):
        return int(value) if value.is_finite() and value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain_number(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_number(v) for v in value]
    return value


def _json_value(value: Any) -> Any:
    """A query value as JSON can hold it: NaN/inf -> None, bytes -> base64, INTERVAL -> ISO 8601 duration,
    DECIMAL -> int or float (`plain_number`)."""
    if isinstance(value, decimal.Decimal):
        return plain_number(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, pa.MonthDayNano):  # an INTERVAL
        seconds = decimal.Decimal(value.nanoseconds) / 10**9
        return f"P{value.months}M{value.days}DT{seconds.normalize():f}S"
    if isinstance(value, list | tuple):  # a map's entries are (key, value) tuples
        return [_json_value(v) for v in value]
    return value


def format_table(table: pa.Table, max_width: int = 80, total: int | None = None) -> str:
    """A plain-text table (long cells cut to max_width characters, newlines shown as spaces); `total` is the
    result's row count where `table` holds only its first rows."""
    names = table.column_names
    cells = [[_cell(v, max_width) for v in row.values()] for row in table.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    line = "  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    total = table.num_rows if total is None else total
    count = f"({total} row{'s' if total != 1 else ''})"
    if total > table.num_rows:
        count = (
            f"({table.num_rows} of {total} rows shown, {total - table.num_rows} more: add a LIMIT, raise "
            "--max-rows (0 = all), or write them all with -o FILE.csv|.json|.parquet)"
        )
    return "\n".join([line, rule, *body, count]) + "\n"


def _cell(value: Any, max_width: int) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, float):
        text = f"{value:.6g}"
    else:
        text = str(plain_number(value))  # a list of DECIMALs as [1.25, 2], not [Decimal('1.25'), ...]
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= max_width else text[: max_width - 1] + "…"


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
