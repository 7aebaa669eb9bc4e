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


def test_damaged_files_are_counted_and_the_rest_is_read(tmp_path):
    import gzip

    good = pa.table({"id": ["a", "b"], "text": ["one", "two"]})
    pq.write_table(good, tmp_path / "0-good.parquet")
    (tmp_path / "1-bad.parquet").write_bytes(b"P")  # a 1-byte "Parquet" file
    reader = CountingParquetReader(str(tmp_path))
    assert [d.id for d in reader.run()] == ["a", "b"]  # the damaged file did not end the job
    assert reader.stats.stats["unreadable_files"].total == 1

    rows = "".join(json.dumps({"id": str(i), "text": f"row {i} " * 50}) + "\n" for i in range(400))
    whole = gzip.compress(rows.encode())
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    reader = CountingJsonlReader(str(tmp_path / "j"), compression="infer")
    ids = [d.id for d in reader.run()]
    assert 0 < len(ids) < 400 and ids == [str(i) for i in range(len(ids))]  # read up to the cut
    assert reader.stats.stats["unreadable_files"].total == 1


def test_a_stage_reports_rows_without_a_text_field_and_damaged_files(tmp_path):
    from pipelines.dedup import Config, run_dedup
    from pipelines.executors import ExecutorConfig

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.jsonl").write_text(json.dumps({"ident": "x", "body": "text under another name"}) + "\n")
    pq.write_table(pa.table({"id": ["k"], "text": ["a kept document with words"]}), corpus / "b.parquet")
    (corpus / "c.parquet").write_bytes(b"PAR1 damaged")
    summary = run_dedup(Config(minhash=False), [str(corpus)], tmp_path / "out", ExecutorConfig(tasks=1))
    assert summary["docs_in"] == 2 and summary["docs_out"] == 1
    assert summary["rows_without_text_field"] == 1 and summary["unreadable_files"] == 1
    assert summary["docs_in"] == summary["docs_out"] + sum(summary["dropped"].values())


def test_text_that_is_not_a_string_is_counted_not_fatal(tmp_path):
    # `{"text": 12345}` or an int64 text column killed a rewrite run without naming the row
    rows = [{"id": "a", "text": "one"}, {"id": "n", "text": 12345}, {"id": "l", "text": ["x"]}]
    rows += [{"id": "e", "text": ""}, {"id": "b", "text": "two"}]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    reader = CountingJsonlReader(str(tmp_path))
    assert [d.id for d in reader.run()] == ["a", "b"]
    assert _totals(reader) == {"documents": 2, "dropped_bad_record": 2, "dropped_empty_text": 1}
    pq.write_table(pa.table({"id": ["a", "b"], "text": [1, 2]}), tmp_path / "p.parquet")
    (tmp_path / "d.jsonl").unlink()
    reader = CountingParquetReader(str(tmp_path))
    assert list(reader.run()) == []
    assert _totals(reader)["dropped_bad_record"] == 2 and not _totals(reader).get("documents")
