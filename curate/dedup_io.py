"""Readers and writer shared by the dedup and decont jobs: Parquet / JSONL documents with `id` and `text`.

Documents keep their ids (a row without one, or with a null id, gets its file's path from the folder holding all
the input files, then its row: `x/000_00000.parquet/0`, `curate.doc_readers.missing_id`); every other input column
travels in metadata and comes back as a column of OUT/data/*.parquet (schema: the inputs' Parquet schemas and
JSONL columns plus the stage's own columns, so every output file has the same columns; a column whose type differs
between inputs is text: `curate.dedup_schema`). Rows with empty or missing text are read as a single space (and
written back empty), so that they are counted (dedup drops them as `empty`) instead of datatrove's readers skipping
them silently; a row whose text is not a string (`text: 12345`, a list, an int64 column) is read the same way
and dropped as `text_not_string` (its id in rejects/, not lost as a `bad_record` of the reader); a JSONL line that
is not a JSON object is dropped as `bad_record` by the reader (`curate.doc_readers`).

The readers cut the input files into one contiguous block per task (`curate.doc_readers`), so the documents,
taken task by task in rank order, are in input order: Parquet files, then JSONL files, each in the order given
(a folder's files sorted by path), then row by row. That is what the keep rule `first` means, for any --workers.
The job record says so (`file_split`): a task of a folder whose files were dealt round-robin is not run again in
blocks (`file_split_field`).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from mathmix.paths import stage_data, unique_files

PARQUET_SUFFIXES = (".parquet",)
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst")
_INTERNAL = ("file_path", "reason", "filter_reason", "_empty_text", "_text_not_string")
TEXT_NOT_STRING = "text_not_string"  # drop reason: a `text` value that is a number, a list or an object


def document_files(inputs: Sequence[str | Path]) -> tuple[list[Path], list[Path]]:
    """(Parquet files, JSONL files) given or under the folders given (a stage folder: its data/ only); error naming
    a missing path."""
    parquet, jsonl = [], []
    for raw in inputs:
        path = stage_data(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            found = [path]
        else:
            raise FileNotFoundError(f"input not found: {path}")
        parquet += [p for p in found if p.name.endswith(PARQUET_SUFFIXES)]
        jsonl += [p for p in found if p.name.endswith(JSONL_SUFFIXES)]
    if not parquet and not jsonl:
        raise FileNotFoundError(f"no .parquet or .jsonl files in {', '.join(str(p) for p in inputs)}")
    return unique_files(parquet), unique_files(jsonl)


def _read_adapter(self, data: dict, path: str, id_in_file: int | str) -> dict:
    from curate.doc_readers import missing_id

    text = data.pop("text", None)
    # the readers fill a missing or null id in (`curate.doc_readers.missing_id`): for this adapter used alone
    doc_id = data.pop("id", None)
    metadata = data.pop("metadata", None)
    meta = dict(metadata) if isinstance(metadata, dict) else {}
    meta.update(data)
    if not (isinstance(text, str) and text):
        meta["_empty_text"] = True  # written back as "" by the writer
    if text is not None and not isinstance(text, str):
        meta["_text_not_string"] = True  # dropped as text_not_string by the stage's first filter
    return {
        "text": text if isinstance(text, str) and text else " ",
        "id": str(doc_id)
        if doc_id is not None
        else missing_id(path, id_in_file, getattr(self, "id_prefix", "")),
        "metadata": meta,
    }


def build_readers(files: tuple[list[Path], list[Path]], work_dir: Path) -> list[Any]:
    """datatrove readers for the Parquet and JSONL files (file lists written to WORK/inputs_*.txt)."""
    from curate.doc_readers import CountingJsonlReader, CountingParquetReader, id_prefix, id_root

    readers = []
    ids_from = id_root([*files[0], *files[1]])  # a missing id names its file from here: x/000_00000.parquet/0
    kinds = (("parquet", files[0], CountingParquetReader), ("jsonl", files[1], CountingJsonlReader))
    for kind, paths, cls in kinds:
        if not paths:
            continue
        root = Path(_common_root(paths))
        listing = work_dir / f"inputs_{kind}.txt"
        listing.parent.mkdir(parents=True, exist_ok=True)
        listing.write_text("".join(f"{p.resolve().relative_to(root)}\n" for p in paths))
        reader = cls(str(root), paths_file=str(listing), adapter=_read_adapter)
        # one list of all files, cut into a contiguous block per task: documents in input order for any task count
        reader.rank_offset = len(files[0]) if kind == "jsonl" else 0
        reader.total_files = len(files[0]) + len(files[1])
        reader.pass_non_string_text = True  # dropped by the stage as text_not_string, with a rejects row
        reader.id_prefix = id_prefix(root, ids_from)
        readers.append(reader)
    return readers


# Recorded in the job record (job.json) of a dedup or decont job: the tasks read contiguous blocks of the files.
FILE_SPLIT = {"file_split": "blocks"}
# In WORK/ of a folder written after the split changed and before the record said so: read in blocks too.
FILE_ORDER_MARK = "inputs_in_blocks"


def file_split_field(out_dir: Path, reading: Sequence[str], tasks: int) -> dict[str, str]:
    """The `file_split` field of the job record of a dedup or decont job writing OUT_DIR (`FILE_SPLIT`); {} for a
    folder that an earlier mathmix, which dealt the files to the tasks round-robin, finished: its record (no
    `file_split`) is kept as it is, so that it is told apart on every rerun.

    READING: the logs folders (relative to OUT_DIR) of the job's stages that read the input files; TASKS: their
    task count (the record's own, where it has one).

    Raises:
        ValueError: OUT_DIR was written by that earlier mathmix and a task of such a stage must run again (killed,
            or its completion deleted by hand): read in blocks, it would read other documents than that task did
            (some read twice, others never, and dedup's document indices mismatched between its jobs). A folder
            whose tasks all finished reruns as complete: no task reads again.
    """
    try:
        record = json.loads((out_dir / "job.json").read_text())
    except (OSError, ValueError):
        record = None
    record = record if isinstance(record, dict) else {}
    work = out_dir / "work"
    if "file_split" in record or (work / FILE_ORDER_MARK).is_file():
        return dict(FILE_SPLIT)  # a record that says another split is another job (check_job names it)
    recorded = record.get("tasks")
    count = recorded if isinstance(recorded, int) else tasks
    markers = [out_dir / logs / "completions" / f"{rank:05d}" for logs in reading for rank in range(count)]
    todo = [m.relative_to(out_dir).as_posix() for m in markers if not m.is_file()]
    # what a task of that mathmix wrote as it started, or finished: where there is none, nothing was read
    listed = any((work / f"inputs_{kind}.txt").is_file() for kind in ("parquet", "jsonl"))
    if not listed and len(todo) == len(markers):
        return dict(FILE_SPLIT)
    if todo:
        raise ValueError(
            f"{out_dir}: written by an earlier mathmix that split the input files among the tasks otherwise (its "
            f"job.json records no file_split), and a task of it must run again (no {todo[0]}), which would read "
            "other documents than that task did; rerun into a new folder (or delete this one)"
        )
    return {}


def _common_root(paths: list[Path]) -> str:
    import os

    return os.path.commonpath([str(p.resolve().parent) for p in paths])


def output_schema(
    parquet_files: list[Path], extra: list[tuple[str, pa.DataType]], jsonl_files: list[Path] | None = None
) -> pa.Schema | None:
    """id and text (strings), the inputs' columns and `extra` (the stage's own, with their types).

    Input columns: the Parquet files' schemas and, given `jsonl_files`, the columns of every JSONL row (one pass
    over them, `curate.dedup_schema.jsonl_types`); a column whose type differs between files or rows is text.
    None when there is neither (JSONL not scanned: the writer takes the schema from its first batch)."""
    import pyarrow.parquet as pq

    from curate.dedup_schema import merge_type

    types: dict[str, pa.DataType] = {"id": pa.string(), "text": pa.string()}
    found = False
    for path in parquet_files:
        try:
            schema = pq.read_schema(path)
        except (pa.ArrowException, OSError):  # a damaged file: the reader counts it as unreadable
            continue
        found = True
        for field in schema:
            if field.name not in _INTERNAL and field.name != "metadata":
                types[field.name] = merge_type(types.get(field.name), field.type)
    if jsonl_files:
        from curate.dedup_schema import jsonl_types

        found = True
        for name, dtype in jsonl_types(jsonl_files, skip=_INTERNAL).items():
            types[name] = merge_type(types.get(name), dtype)
    if not found:
        return None
    types.update(extra)  # the stage writes these itself
    types["id"] = types["text"] = pa.string()  # the readers hand both on as strings
    return pa.schema([(name, pa.string() if pa.types.is_null(t) else t) for name, t in types.items()])


def minimal_schema(extra: list[tuple[str, pa.DataType]]) -> pa.Schema:
    """id, text and `extra`: the columns of an empty output when the inputs gave no schema (JSONL)."""
    return pa.schema([("id", pa.string()), ("text", pa.string()), *extra])


def _write_adapter(names: tuple[str, ...] | None, self, document) -> dict:
    from curate.dedup_schema import SOURCE_KEY

    row = {"id": document.id, "text": "" if document.metadata.get("_empty_text") else document.text}
    row.update((k, v) for k, v in document.metadata.items() if k not in _INTERNAL and k not in row)
    if names is not None:
        row = {name: row.get(name) for name in names}
    row[SOURCE_KEY] = document.metadata.get("file_path")  # named in a warning if a value does not fit
    return row


def build_writer(out_folder: Path, schema: pa.Schema | None, filename: str = "${rank}.parquet") -> Any:
    """A Parquet writer with the given schema (metadata flattened into columns); a value that does not fit its
    column is written as text or null, never fails the task (`curate.dedup_schema.ConformingParquetWriter`)."""
    from curate.dedup_schema import ConformingParquetWriter

    names = tuple(schema.names) if schema is not None else None
    return ConformingParquetWriter(
        str(out_folder),
        output_filename=filename,
        adapter=functools.partial(_write_adapter, names),
        schema=schema,
    )


def drop_empty_text(exclusion_writer: Any = None) -> Any:
    """A datatrove filter dropping the documents with no `text`, or only whitespace, counted as `empty` (as dedup),
    and those whose text is not a string as `text_not_string`.

    The readers keep such rows (as one space) so that they are counted; a stage with no filter of its own for
    them (decont) would otherwise write them out as empty documents while the summary warned they were dropped.
    """
    from datatrove.pipeline.filters.base_filter import BaseFilter

    class DropEmptyText(BaseFilter):
        name = "∅ empty text"

        def filter(self, doc: Any) -> bool | tuple[bool, str]:
            if doc.metadata.get("_text_not_string"):
                doc.metadata["reason"] = TEXT_NOT_STRING
                return False, TEXT_NOT_STRING
            if doc.metadata.get("_empty_text") or not doc.text.strip():
                doc.metadata["reason"] = "empty"
                return False, "empty"
            return True

    return DropEmptyText(exclusion_writer=exclusion_writer)


def build_rejects_writer(out_folder: Path, filename: str) -> Any:
    """A ParquetWriter for dropped documents: id, text, reason (and the stage's metadata columns)."""
    from datatrove.pipeline.writers import ParquetWriter

    return ParquetWriter(str(out_folder), output_filename=filename, adapter=_rejects_adapter)


def _rejects_adapter(self, document) -> dict:
    text = "" if document.metadata.get("_empty_text") else document.text
    return {"id": document.id, "text": text, "reason": document.metadata.get("reason", "")}


@contextlib.contextmanager
def open_report(folder: Path | None, name: str) -> Iterator[Any]:
    """A JSONL report file `folder/name` open for writing, or None when no report folder is set."""
    if folder is None:
        yield None
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / name, "w", encoding="utf-8") as handle:
        yield handle
