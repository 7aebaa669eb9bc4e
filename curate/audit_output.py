"""Audit results written out: a text table, csv, json or parquet, to a file or a stream, in bounded memory.

Split from `curate.audit` (the session) so that module holds the DuckDB side alone; `curate.audit` still
exports `write_result`, `output_format`, `plain_number` and `format_table` for the callers that import them there.
"""

from __future__ import annotations

import base64
import decimal
import errno
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

OUTPUT_FORMATS = ("table", "csv", "json", "parquet")
MAX_ROWS = 200  # rows the text table shows by default (the CLI's --max-rows)


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
