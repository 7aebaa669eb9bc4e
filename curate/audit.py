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
import json
import math
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from curate.audit_guard import AuditRefused, check_read_only
from curate.audit_views import UNREADABLE, create_all

__all__ = ["AuditRefused", "AuditSession", "write_result"]

OUTPUT_FORMATS = ("table", "csv", "json", "parquet")


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
            raise ValueError(f"DuckDB refused the settings ({str(err).splitlines()[0]})") from None
        self.relations = create_all(self.con, self.run_dir)
        self.unreadable = list(UNREADABLE)  # damaged Parquet files the views leave out
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

    def query(self, sql: str) -> pa.Table:
        """Run one read-only statement; AuditRefused if it is not one (or reads outside the run folder)."""
        statement = check_read_only(sql)
        try:
            return self.con.sql(statement).to_arrow_table()
        except duckdb.PermissionException as err:
            raise AuditRefused(
                f"refused by DuckDB (only files under {self.run_dir} can be read): {err}"
            ) from None

    def rows(self, sql: str) -> list[dict[str, Any]]:
        """The result of `query` as a list of dicts."""
        return self.query(sql).to_pylist()

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


def write_result(table: pa.Table, fmt: str, path: Path | None, max_width: int = 80) -> str | None:
    """Write a result as csv/json/parquet to `path` (or return it as text for stdout); `table` returns text.

    csv holds nested values (lists, structs, maps) as JSON text and BLOBs as base64; json writes NaN and
    infinities as null and BLOBs as base64; INTERVALs are ISO 8601 durations in csv/json and refused by parquet.
    """
    if fmt not in OUTPUT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(OUTPUT_FORMATS)}, got {fmt!r}")
    if fmt == "parquet":
        if path is None:
            raise ValueError("--format parquet needs -o FILE")
        import pyarrow.parquet as pq

        intervals = [f.name for f in table.schema if _has_interval(f.type)]
        if intervals:
            raise ValueError(
                f"column {intervals[0]!r} is an INTERVAL, which Parquet cannot hold: cast it in the query "
                f'("{intervals[0]}"::VARCHAR, or epoch("{intervals[0]}") for seconds)'
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        return None
    if fmt == "csv":
        text = _csv_text(table)
    elif fmt == "json":
        rows = [{k: _json_value(v) for k, v in row.items()} for row in table.to_pylist()]
        text = json.dumps(rows, indent=1, default=str, ensure_ascii=False, allow_nan=False) + "\n"
    else:
        text = format_table(table, max_width)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return None
    return text


def _has_interval(type_: pa.DataType) -> bool:
    if pa.types.is_interval(type_):
        return True
    return any(_has_interval(type_.field(i).type) for i in range(type_.num_fields))


def _csv_text(table: pa.Table) -> str:
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
    pcsv.write_csv(pa.table(columns, names=table.column_names), buffer)
    return buffer.getvalue().decode()


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value  # an INTERVAL's text, not a JSON document
    return json.dumps(value, default=str, ensure_ascii=False, allow_nan=False)


def _json_value(value: Any) -> Any:
    """A query value as JSON can hold it: NaN/inf -> None, bytes -> base64, INTERVAL -> ISO 8601 duration."""
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


def format_table(table: pa.Table, max_width: int = 80) -> str:
    """A plain-text table (long cells cut to max_width characters, newlines shown as spaces)."""
    names = table.column_names
    cells = [[_cell(v, max_width) for v in row.values()] for row in table.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    line = "  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return (
        "\n".join([line, rule, *body, f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})"]) + "\n"
    )


def _cell(value: Any, max_width: int) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, float):
        text = f"{value:.6g}"
    else:
        text = str(value)
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= max_width else text[: max_width - 1] + "…"


def sample_documents(
    session: AuditSession, view: str, where: str | None = None, n: int = 20, seed: int = 0
) -> list[dict[str, Any]]:
    """A reproducible random sample of up to n rows of `view` matching `where` (which passes the same check)."""
    if view not in session.relations:
        raise AuditRefused(f"no view {view!r} in this run; views: {', '.join(session.relations) or 'none'}")
    condition = f"WHERE {where}" if where else ""
    sql = (
        f'SELECT * FROM (SELECT * FROM "{view}" {condition}) '
        f"USING SAMPLE reservoir({int(n)} ROWS) REPEATABLE ({int(seed)})"
    )
    return session.rows(sql)
