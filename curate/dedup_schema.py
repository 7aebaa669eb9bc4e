"""Column types of the dedup / decont output when the inputs disagree, and a Parquet writer that never fails on a value.

JSONL has no schema: a column may hold 1 in one row and "two" in another, and Parquet files may disagree with each
other or with the JSONL. pyarrow takes a column's type from the first rows and fails on the first value of another
type, which killed the whole stage. So a column's type is taken over all the rows: `jsonl_types` reads the JSONL
inputs once, in the driver, before the stage runs, so that every task writes the same schema; a column whose values
disagree is written as text (lists and objects as JSON), ints with floats as float64. The writer still checks each
batch: a value that does not fit its column (no scan was given, or a file changed since) is written as text in a
text column, else as null with a warning naming the input file and the column; the document itself is always kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
from datatrove.pipeline.writers import ParquetWriter
from datatrove.pipeline.writers.disk_base import DiskWriter

SOURCE_KEY = "\x00source"  # the input file of a row, handed by the write adapter to the writer (not a column)
_CONVERT_ERRORS = (
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    pa.ArrowNotImplementedError,
    OverflowError,
    TypeError,
    ValueError,
)
_SCALAR_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def value_type(value: Any) -> pa.DataType:
    """The Arrow type of one JSON value (null for None; a value pyarrow cannot type: string)."""
    if value is None:
        return pa.null()
    scalar = _SCALAR_TYPES.get(type(value))
    if scalar is not None:
        if scalar == pa.int64() and not -(2**63) <= value < 2**63:
            return pa.string()
        return scalar
    try:
        inferred = pa.infer_type([value])
        pa.array(
            [value], type=inferred
        )  # [1, "a"] is typed list<int64> by its first item, and does not fit it
        return inferred
    except _CONVERT_ERRORS:
        return pa.string()


def merge_type(a: pa.DataType | None, b: pa.DataType) -> pa.DataType:
    """The type holding values of both A and B: null gives way, numbers widen, anything else in conflict is string."""
    if a is None or a == b or pa.types.is_null(b):
        return a if a is not None else b
    if pa.types.is_null(a):
        return b
    try:  # numbers widen (int + float: double), structs take the union of their fields
        pair = [pa.schema([("v", a)]), pa.schema([("v", b)])]
        return pa.unify_schemas(pair, promote_options="permissive").field("v").type
    except _CONVERT_ERRORS:
        return pa.string()


def add_types(types: dict[str, pa.DataType], row: dict[str, Any]) -> None:
    for name, value in row.items():
        types[name] = merge_type(types.get(name), value_type(value))


def jsonl_types(paths: Iterable[Path], skip: tuple[str, ...] = ()) -> dict[str, pa.DataType]:
    """Column -> type over every row of the JSONL files, as the readers hand the rows on (a `metadata` object's keys
    are columns). Lines that are not JSON objects are skipped (the reader drops them); a damaged file is read up to
    the damage (the reader counts it)."""
    import zlib

    import fsspec
    import orjson

    from curate.doc_readers import file_compression

    types: dict[str, pa.DataType] = {}
    for path in paths:
        try:
            # told by the first bytes, as the reader does: gzip named .jsonl, plain text named .jsonl.gz
            compression = file_compression(lambda p: fsspec.open(p, "rb"), str(path))
            with fsspec.open(str(path), "rb", compression=compression) as handle:
                for line in handle:
                    try:
                        row = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        continue
                    if isinstance(row, dict):
                        meta = row.pop("metadata", None)
                        columns = {**meta, **row} if isinstance(meta, dict) else row
                        add_types(types, {k: v for k, v in columns.items() if k not in skip})
        except (OSError, EOFError, zlib.error, ValueError):
            continue
    return types


def infer_schema(rows: list[dict[str, Any]]) -> pa.Schema:
    """A schema for ROWS (the first batch of a writer given none): conflicts as text, all-null columns as text."""
    types: dict[str, pa.DataType] = {}
    for row in rows:
        add_types(types, row)
    return pa.schema([(name, pa.string() if pa.types.is_null(t) else t) for name, t in types.items()])


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _fit(value: Any, dtype: pa.DataType) -> tuple[Any, bool]:
    """(VALUE as it goes into a DTYPE column, whether it fits). Checked here for the plain types, since pyarrow
    itself cuts 4.5 to 4 in an int64 column; other types are left to pyarrow."""
    if value is None:
        return value, True
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return _as_text(value), True
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if pa.types.is_integer(dtype):
        if number and isinstance(value, float) and value.is_integer():
            return int(value), True
        return value, number and isinstance(value, int)
    if pa.types.is_floating(dtype):
        return value, number
    if pa.types.is_boolean(dtype):
        return value, isinstance(value, bool)
    return value, True


def to_batch(rows: list[dict[str, Any]], schema: pa.Schema, sources: list[Any], warn) -> pa.RecordBatch:
    """ROWS as a record batch of SCHEMA; a value that does not fit its column is text in a text column, else null
    (`warn(source, column, type)` is called for it)."""
    arrays = []
    for field in schema:
        values = []
        for row, source in zip(rows, sources, strict=True):
            value, fits = _fit(row.get(field.name), field.type)
            if not fits:
                warn(source, field.name, field.type)
                value = None
            values.append(value)
        try:
            arrays.append(pa.array(values, type=field.type))
            continue
        except _CONVERT_ERRORS:
            pass
        for i, (value, source) in enumerate(zip(values, sources, strict=True)):  # a nested or other type
            try:
                pa.array([value], type=field.type)
            except _CONVERT_ERRORS:
                warn(source, field.name, field.type)
                values[i] = None
        arrays.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class ConformingParquetWriter(ParquetWriter):
    """datatrove's ParquetWriter; every batch is made to fit the schema (`to_batch`), and without a schema the
    first batch, not the first document, decides it (`infer_schema`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handles: dict[str, Any] = {}
        self._sources: dict[str, list[Any]] = {}
        self._warned: set[tuple[str, str]] = set()

    def _write(self, document: dict, file_handler, filename: str):
        if self.max_file_size > 0:
            filename = self._get_filename_with_file_id(filename)
        self._handles[filename] = file_handler
        self._sources.setdefault(filename, []).append(document.pop(SOURCE_KEY, None))
        self._batches[filename].append(document)
        if len(self._batches[filename]) >= self.batch_size:
            self._write_batch(filename)

    def _write_batch(self, filename):
        import pyarrow.parquet as pq

        rows, sources = self._batches.pop(filename, None), self._sources.pop(filename, [])
        if not rows:
            return
        if self.schema is None:
            self.schema = infer_schema(rows)
        if filename not in self._writers:
            self._writers[filename] = pq.ParquetWriter(
                self._handles[filename],
                schema=self.schema,
                compression=self.compression,
                use_content_defined_chunking=self.use_content_defined_chunking,
                write_page_index=self.write_page_index,
            )
        self._writers[filename].write_batch(to_batch(rows, self.schema, sources, self._warn))

    def _warn(self, source: Any, column: str, dtype: pa.DataType) -> None:
        self.stat_update("values_written_as_null")
        if (str(source), column) not in self._warned:
            from loguru import logger

            self._warned.add((str(source), column))
            logger.warning(
                f"{source}: column {column!r} holds a value that is not {dtype} (the column's type in the output); "
                "written as null, the document is kept"
            )

    def close_file(self, filename):
        # a file whose rows are still buffered has no pyarrow writer yet: it is known by its full name already
        if self.max_file_size > 0 and filename not in self._writers and filename not in self._batches:
            filename = self._get_filename_with_file_id(filename)
        self._write_batch(filename)
        if filename in self._writers:
            self._writers.pop(filename).close()
        self._handles.pop(filename, None)
        DiskWriter.close_file(self, filename)

    def close(self):
        for filename in list(self._batches):
            self.close_file(filename)
        super().close()
