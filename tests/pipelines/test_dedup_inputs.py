"""`mathmix dedup` (and `mathmix decont`, which reads and writes through the same helpers) on odd inputs: columns
whose type differs between rows or files, duplicate ids, and paths that hold no documents."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from curate.summary import is_balanced
from mathmix.cli import app

WORDS = (
    "algebra geometry calculus limits sequences primes integrals matrices vectors groups rings fields".split()
)


def _text(i: int) -> str:
    return f"document {i} about " + " ".join(WORDS[(i + k) % len(WORDS)] + str(i * 7 + k) for k in range(30))


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _out(result) -> str:
    return " ".join(result.output.split())


def _data(out: Path) -> pa.Table:
    return pq.read_table(out / "data")  # one schema for every file, or this fails


def _decont(inputs: list[Path], out: Path, tmp_path: Path, workers: int = 1):
    bench = _jsonl(
        tmp_path / "bench" / "gsm8k" / "test.jsonl",
        [
            {
                "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?"
            }
        ],
    )
    args = [
        "decont",
        *map(str, inputs),
        "-o",
        str(out),
        "--benchmarks",
        str(bench.parent),
        "--workers",
        str(workers),
    ]
    return CliRunner().invoke(app, args)


HETERO = [
    {"id": "a", "text": _text(1), "extra": 1, "math_score": 0.3},
    {"id": "b", "text": _text(2), "extra": "two", "math_score": "high"},
    {"id": "c", "text": _text(3), "extra": {"k": 1}, "math_score": None},
]


def test_a_column_of_mixed_types_is_written_as_text_by_dedup_and_decont(tmp_path):
    src = _jsonl(tmp_path / "hetero" / "a.jsonl", HETERO)
    for command in ("dedup", "decont"):
        out = tmp_path / f"{command}_out"
        if command == "dedup":
            result = CliRunner().invoke(app, ["dedup", str(src.parent), "-o", str(out)])
        else:
            result = _decont([src.parent], out, tmp_path)
        assert result.exit_code == 0, result.output
        rows = {r["id"]: r for r in _data(out).to_pylist()}
        assert set(rows) == {"a", "b", "c"}, command
        assert [rows[i]["extra"] for i in "abc"] == ["1", "two", '{"k": 1}'], command
        assert [rows[i]["math_score"] for i in "abc"] == ["0.3", "high", None], command
        assert is_balanced(json.loads((out / "summary.json").read_text()))


def test_types_that_differ_between_files_and_formats_give_one_schema(tmp_path):
    folder = tmp_path / "in"
    _jsonl(folder / "a.jsonl", [{"id": f"a{i}", "text": _text(i), "extra": i, "n": 1} for i in range(3)])
    _jsonl(
        folder / "b.jsonl",
        [{"id": f"b{i}", "text": _text(10 + i), "extra": f"x{i}", "n": 2.5} for i in range(3)],
    )
    table = pa.table({"id": ["p0"], "text": [_text(20)], "extra": [7], "only_parquet": [True]})
    pq.write_table(table, folder / "c.parquet")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["dedup", str(folder), "-o", str(out), "--workers", "3"])
    assert result.exit_code == 0, result.output
    data = _data(out)
    assert data.schema.field("extra").type == pa.string() and data.schema.field("n").type == pa.float64()
    rows = {r["id"]: r for r in data.to_pylist()}
    assert (
        len(rows) == 7
        and rows["a1"]["extra"] == "1"
        and rows["b1"]["extra"] == "x1"
        and rows["p0"]["extra"] == "7"
    )
    assert (
        rows["a0"]["n"] == 1.0 and rows["p0"]["only_parquet"] is True and rows["a0"]["only_parquet"] is None
    )


def test_inputs_without_documents_are_named_plainly(tmp_path):
    readme, notes = tmp_path / "readme.txt", tmp_path / "notes"
    readme.write_text("not documents")
    notes.mkdir()
    result = CliRunner().invoke(app, ["dedup", str(readme), str(notes), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert f"error: no .parquet or .jsonl files in {readme}, {notes}" in _out(result)
    assert "[" not in result.output and "'" not in result.output


def test_duplicate_ids_are_warned_about(tmp_path):
    folder = tmp_path / "ddin"
    _jsonl(folder / "a.jsonl", [{"id": f"orig{i}", "text": _text(i)} for i in range(4)])
    _jsonl(
        folder / "b.jsonl",
        [
            {"id": "exact_copy", "text": _text(0)},  # removes a.jsonl's orig0 (or is removed by it)
            {"id": "orig0", "text": _text(30)},  # another document under the same id
            {"id": "orig1", "text": _text(31)},
            {"id": "orig1", "text": _text(32)},
        ],
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["dedup", str(folder), "-o", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["duplicate_ids"] == {"ids": 2, "documents": 5, "examples": ["orig0", "orig1"]}
    assert "warning: 2 ids are shared by 5 documents (orig0, orig1)" in _out(result)


def test_dedup_into_a_folder_inside_its_input_folder_is_refused_up_front(tmp_path):
    # `dedup ddin -o ddin/out` worked once, then every rerun was refused: "ddin holds stage folders (out)"
    docs = _jsonl(tmp_path / "ddin" / "a.jsonl", [{"id": f"d{i}", "text": _text(i)} for i in range(4)])
    result = CliRunner().invoke(app, ["dedup", str(docs.parent), "-o", str(docs.parent / "out")])
    assert result.exit_code == 2, result.output
    assert "inside the input folder" in _out(result)
    assert not (docs.parent / "out").exists()


def test_a_dedup_taking_over_a_killed_dedup_folder_leaves_no_file_of_it(tmp_path):
    first = _jsonl(tmp_path / "a.jsonl", [{"id": f"a{i}", "text": _text(i)} for i in range(4)])
    second = _jsonl(tmp_path / "b.jsonl", [{"id": f"b{i}", "text": _text(i + 20)} for i in range(3)])
    out = tmp_path / "out"
    assert CliRunner().invoke(app, ["dedup", str(first), "-o", str(out)]).exit_code == 0
    (out / "summary.json").unlink()  # as a killed job leaves it: nothing finished, a 0-byte Parquet file
    for marker in out.glob("logs/**/completions/*"):
        marker.unlink()
    (out / "data" / "000_00009.parquet").write_bytes(b"")
    result = CliRunner().invoke(app, ["dedup", str(second), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert not (out / "data" / "000_00009.parquet").exists()
    assert sorted(_data(out).column("id").to_pylist()) == ["b0", "b1", "b2"]


def test_a_stage_folder_that_failed_before_writing_data_is_named_unfinished(tmp_path):
    # a `mathmix web` refused at its first task leaves job.json and logs/: it was `no .parquet or .jsonl files in`
    failed = tmp_path / "web"
    (failed / "logs").mkdir(parents=True)
    (failed / "job.json").write_text("{}")
    result = CliRunner().invoke(app, ["dedup", str(failed), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert f"error: {failed}: the stage in {failed} has not finished (no summary.json)" in _out(result)
    assert "finish it first" in _out(result) and not (tmp_path / "o").exists()
    # a folder of documents that happens to hold a job.json besides them is read as it is
    _jsonl(failed / "docs.jsonl", [{"id": "a", "text": _text(1)}])
    result = CliRunner().invoke(app, ["dedup", str(failed), "-o", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
