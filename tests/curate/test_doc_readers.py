"""The counting readers: every row is read or counted under a reason, and one bad line does not end a file."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from curate.doc_readers import CountingJsonlReader, CountingParquetReader


def _totals(step) -> dict:
    return {
        name: stat.total for name, stat in step.stats.stats.items() if name in ("docs_in", "documents")
    } | {name: stat.total for name, stat in step.stats.stats.items() if name.startswith("dropped_")}


def test_jsonl_bad_lines_and_empty_rows_are_counted(tmp_path):
    lines = [json.dumps({"id": "a", "text": "one"}).encode(), b"\xff\xfe not utf-8", b"", b"[1, 2]"]
    lines += [json.dumps({"id": "e", "text": ""}).encode(), json.dumps({"id": "b", "text": "two"}).encode()]
    (tmp_path / "d.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    reader = CountingJsonlReader(str(tmp_path))
    assert [d.id for d in reader.run()] == ["a", "b"]  # the line after the invalid UTF-8 is still read
    assert _totals(reader) == {"documents": 2, "dropped_bad_record": 2, "dropped_empty_text": 1}


def test_parquet_rows_without_text_are_counted(tmp_path):
    pq.write_table(pa.table({"id": ["a", "e", "b"], "text": ["one", "", "two"]}), tmp_path / "d.parquet")
    reader = CountingParquetReader(str(tmp_path))
    assert [d.id for d in reader.run()] == ["a", "b"]
    assert _totals(reader) == {"documents": 2, "dropped_empty_text": 1}
