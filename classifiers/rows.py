"""Rows of one corpus file (Parquet, JSONL plain or gzipped, JSON), each with where it is in the file, and a
row's text; a file that cannot be read is an InputError naming it. Split off `classifiers.data`, which
re-exports every name here: that module decides which files are read and what becomes a document.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from mathmix.cli_util import first_line
from mathmix.records import read_records

# Benchmark field pairs (question-like, answer-like), tried in order: MATH, GSM8K, OlympiadBench, MATH8K.
BENCH_FIELDS = [
    ("problem", "solution"),
    ("question", "answer"),
    ("question", "final_answer"),
    ("prompt", "answer"),
]
# Matched case-insensitively; `.jsonl.gz` as web and dedup read it.
CORPUS_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz", ".json")


def is_corpus_file(path: Path) -> bool:
    """A Parquet, JSONL (gzipped or not) or JSON file, by its name in any case."""
    return path.name.lower().endswith(CORPUS_SUFFIXES)


def file_kind(path: Path) -> str:
    """`parquet`, `jsonl`, `jsonl.gz` or `json`: how a corpus file is read (named in errors)."""
    return next(
        s[1:] for s in sorted(CORPUS_SUFFIXES, key=len, reverse=True) if path.name.lower().endswith(s)
    )


class InputError(ValueError):
    """An input path that cannot be read as a classifier corpus; the message names the path."""


def _gzip_records(path: Path) -> Iterator[tuple[int, object]]:
    """(0-based line, JSON value) of a gzipped JSONL file, with `read_records`' errors (file and line named)."""
    from mathmix.records import jsonl_lines

    with gzip.open(path, "rb") as f:
        yield from jsonl_lines(path, f)


class BadLine(Protocol):
    """Called with (where, why) for a line of a JSONL file that is not read (see `iter_located_rows`), REASON
    `bad_record`; a gzip stream that ends mid-file is one call with `truncated_file` where the cut falls."""

    def __call__(self, where: str, why: str, reason: str = "bad_record") -> None: ...


def _lenient_jsonl(path: Path, bad: BadLine) -> Iterator[tuple[int, object]]:
    """(0-based line, JSON value) of a JSONL file (plain or gzipped); a line that is not UTF-8 JSON goes to BAD.

    A gzip stream cut mid-file (a copy interrupted) ends the file at the cut: the lines before it are read, and
    the cut is one `truncated_file` call naming its line (the line the stream ends in is never read: gzip gives
    no part of it)."""
    from mathmix.records import jsonl_lines

    with (gzip.open if file_kind(path) == "jsonl.gz" else open)(path, "rb") as f:
        line_no = -1
        lines = iter(f)
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                return
            except EOFError as err:  # "Compressed file ended before the end-of-stream marker was reached"
                bad(f"line {line_no + 2}", f"gzip stream cut ({first_line(err)})", "truncated_file")
                return
            line_no += 1
            try:
                values = list(jsonl_lines(path, [raw]))  # the shared reader's parsing and reasons
            except ValueError as err:
                bad(f"line {line_no + 1}", str(err).removeprefix(f"{path}:1: "))
                continue
            yield from ((line_no, value) for _, value in values)


def _is_json_array(path: Path) -> bool:
    """A `.json` file, or a plain JSONL-named file holding an array: read whole, as `read_records` reads it."""
    from mathmix.records import is_json_array

    return file_kind(path) == "json" or (file_kind(path) == "jsonl" and is_json_array(path))


def _iter_json_rows(path: Path, bad: BadLine | None = None) -> Iterator[tuple[str, dict]]:
    gzipped = file_kind(path) == "jsonl.gz"
    if bad is not None and not _is_json_array(path):
        records = _lenient_jsonl(path, bad)
    else:  # MATH ships one problem per .json file
        records = _gzip_records(path) if gzipped else read_records(path, one_object=True)
    json_file = file_kind(path) == "json"
    # A JSONL-named file holding an array is read as one array: its positions are records, not lines.
    array = _is_json_array(path)
    try:
        for position, record in records:
            # 1-based, as the reader's errors count lines: `record 1` is an array's first
            where = f"record {position + 1}" if array else f"line {position + 1}"
            if not isinstance(record, dict):
                if bad is not None and not json_file:
                    bad(where, "not a JSON object")
                    continue
                raise InputError(f"{path}: {where} is not a JSON object (a row with a `text` field)")
            yield where, record
    except InputError:
        raise
    except ValueError as err:
        raise InputError(str(err)) from None


def iter_rows(path: Path) -> Iterator[dict]:
    """Rows of a Parquet, JSONL (.gz) or JSON file as dicts; a file that cannot be read is an InputError naming it."""
    for _, row in iter_located_rows(path):
        yield row


def iter_located_rows(path: Path, bad: BadLine | None = None) -> Iterator[tuple[str, dict]]:
    """(where, row) of every row: `where` is `line N` (JSONL, the file's line), `row N` (Parquet) or `record N`
    (a .json file), counted from 1 as errors count lines; an unreadable file is an InputError naming it.

    BAD: a JSONL line that is not UTF-8 JSON or not an object is passed to it (`line 2`, `not valid JSON (...)`)
    and skipped, instead of failing the file."""
    try:
        if file_kind(path) == "parquet":
            import pyarrow.parquet as pq

            n = 0
            for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
                for row in batch.to_pylist():
                    n += 1
                    yield f"row {n}", row
        else:
            yield from _iter_json_rows(path, bad)
    except InputError:
        raise
    # pyarrow's ArrowInvalid is a ValueError, UnicodeDecodeError too; a cut gzip stream is an EOFError
    except (OSError, ValueError, EOFError, zlib.error) as err:
        raise InputError(f"{path}: cannot be read as {file_kind(path)} ({first_line(err)})") from None


def row_text(row: dict) -> str | None:
    """The text of a corpus row (`text`) or of a benchmark row (problem + solution, question + answer, ...)."""
    if isinstance(row.get("text"), str):
        return row["text"]
    for first, second in BENCH_FIELDS:
        if isinstance(row.get(first), str) and row.get(second) is not None:
            return f"{row[first]}\n{row[second]}"
    return None
