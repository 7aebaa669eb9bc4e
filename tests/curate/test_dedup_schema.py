"""The dedup / decont output schema when inputs disagree on a column's type, and the writer that never fails on a
value (`curate.dedup_schema`)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.data import Document

from curate.dedup_io import build_writer
from curate.dedup_schema import infer_schema, merge_type, value_type


def test_types_merge_to_the_narrowest_type_holding_both():
    assert merge_type(value_type(1), value_type(2.5)) == pa.float64()
    assert merge_type(value_type(None), value_type("a")) == pa.string()
    assert merge_type(value_type(1), value_type("two")) == pa.string()
    assert merge_type(value_type(True), value_type(1)) == pa.string()
    assert merge_type(value_type({"k": 1}), value_type({"j": "x"})) == pa.struct(
        [("k", pa.int64()), ("j", pa.string())]
    )
    assert value_type(2**70) == pa.string() and value_type([1, "a"]) == pa.string()
    assert infer_schema([{"a": None, "b": 1}, {"a": None, "b": "x"}]) == pa.schema(
        [("a", pa.string()), ("b", pa.string())]
    )


def _docs(values: list) -> list[Document]:
    return [
        Document(text=f"t{i}", id=str(i), metadata={"extra": v, "file_path": f"in/{i // 2}.jsonl"})
        for i, v in enumerate(values)
    ]


def test_a_value_that_does_not_fit_its_column_never_fails_the_writer(tmp_path):
    writer = build_writer(tmp_path / "inferred", None)
    writer.batch_size = 2  # the first batch (1, 2) makes `extra` int64; "three" and 4.5 come later
    with writer:
        for doc in _docs([1, 2, "three", 4.5, None]):
            writer.write(doc, rank=0)
    rows = pq.read_table(tmp_path / "inferred").to_pylist()
    assert [(r["id"], r["extra"]) for r in rows] == [
        ("0", 1),
        ("1", 2),
        ("2", None),
        ("3", None),
        ("4", None),
    ]
    assert writer.stats["values_written_as_null"].total == 2

    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("extra", pa.string())])
    with build_writer(tmp_path / "text", schema) as writer:
        for doc in _docs([1, "two", {"k": [1]}, None, 2.5]):
            writer.write(doc, rank=0)
    rows = pq.read_table(tmp_path / "text").to_pylist()
    assert [r["extra"] for r in rows] == ["1", "two", '{"k": [1]}', None, "2.5"]
