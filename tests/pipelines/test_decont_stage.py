"""The decont stage's job record and summary: benchmark files by their contents and resolved paths, documents
counted once however many benchmarks they hit, the index built once, and an output folder inside an input."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.decont import Config, run_decont
from pipelines.executors import ExecutorConfig

QUESTION = "Tom has {n} {x} and buys 4 more {x} at the market today. How many {x} does he have now?"
THINGS = ["apples", "pears", "plums", "books", "coins", "shells", "cards", "stamps"]
PROBLEM = (
    "Find the smallest positive integer n such that the sum of the first n odd numbers exceeds {n} in total."
)
ONE_TASK = ExecutorConfig(tasks=1, workers=1)


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _question(i: int) -> str:
    """Question i: its own 13-grams (each window holds one of its nouns)."""
    return QUESTION.format(n=3 + i, x=THINGS[i])


def _bench(root: Path, n: int) -> Path:
    """ROOT/gsm8k/test.jsonl with N questions (3 apples, 4 apples ...)."""
    return _jsonl(
        root / "gsm8k" / "test.jsonl", [{"question": _question(i), "answer": "7"} for i in range(n)]
    )


def _docs(path: Path, n: int) -> Path:
    """N documents, each quoting question i (and, for the first, a MATH problem too)."""
    rows = [{"id": f"d{i}", "text": "Forum post. " + _question(i) + " Anyone?"} for i in range(n)]
    rows[0]["text"] += " Also: " + PROBLEM.format(n=100)
    return _jsonl(
        path, rows + [{"id": "clean", "text": "The weather was fine and the match went on all day long."}]
    )


def test_a_benchmark_file_with_other_contents_at_the_same_path_is_another_job(tmp_path):
    docs = _docs(tmp_path / "docs.jsonl", 6)
    bench = _bench(tmp_path / "bench", 2)
    out = tmp_path / "out"
    first = run_decont(Config(), [str(docs)], out, ONE_TASK, [str(bench)])
    assert first["dropped"]["contaminated"] == 2
    _bench(tmp_path / "bench", 6)  # the full set, at the same path
    with pytest.raises(
        ValueError, match=r"another job than this decont run \(benchmark gsm8k/test: other contents"
    ):
        run_decont(Config(), [str(docs)], out, ONE_TASK, [str(bench)])
    # the same size, other contents
    _jsonl(bench, [{"question": _question(i).replace("Tom", "Ann"), "answer": "7"} for i in range(2)])
    with pytest.raises(ValueError, match="other contents"):
        run_decont(Config(), [str(docs)], out, ONE_TASK, [str(bench)])


def test_a_benchmark_folder_and_the_files_in_it_are_the_same_job(tmp_path):
    docs = _docs(tmp_path / "docs.jsonl", 3)
    bench = _bench(tmp_path / "bench", 2)
    out = tmp_path / "out"
    first = run_decont(Config(), [str(docs)], out, ONE_TASK, [str(bench)])
    again = run_decont(Config(), [str(docs)], out, ONE_TASK, [str(bench.parent) + "/"])
    assert again["hits_per_benchmark"] == first["hits_per_benchmark"] == {"gsm8k/test": 2}
    record = json.loads((out / "job.json").read_text())
    assert record["benchmarks"] == ["{run_dir}/bench/gsm8k/test.jsonl"] and record["command"] == "decont"


def test_a_record_of_benchmark_paths_as_typed_is_still_this_job(tmp_path):
    """Records written before benchmarks were resolved to files held the folder as given."""
    docs = _docs(tmp_path / "docs.jsonl", 3)
    bench = _bench(tmp_path / "bench", 2)
    out = tmp_path / "out"
    run_decont(Config(), [str(docs)], out, ONE_TASK, [str(bench.parent)])
    record = json.loads((out / "job.json").read_text())
    old = {k: v for k, v in record.items() if k not in ("command", "file_digests", "outputs")}
    (out / "job.json").write_text(json.dumps({**old, "benchmarks": ["{run_dir}/bench/gsm8k"]}))
    run_decont(Config(), [str(docs)], out, ONE_TASK, [str(bench.parent)])
    assert json.loads((out / "job.json").read_text())["benchmarks"] == record["benchmarks"]


def test_flagged_counts_documents_not_document_benchmark_pairs(tmp_path):
    docs = _docs(tmp_path / "docs.jsonl", 3)
    bench = _bench(tmp_path / "bench", 3)
    _jsonl(tmp_path / "bench" / "math" / "test.jsonl", [{"problem": PROBLEM.format(n=100), "answer": "11"}])
    summary = run_decont(
        Config(mode="flag"), [str(docs)], tmp_path / "out", ONE_TASK, [str(bench.parent.parent)]
    )
    assert summary["hits_per_benchmark"] == {"gsm8k/test": 3, "math/test": 1}
    assert summary["flagged"] == 3
    flagged = pq.read_table(tmp_path / "out" / "data").column("contaminated").to_pylist()
    assert flagged.count(True) == 3


def test_the_benchmark_index_is_built_once(tmp_path, monkeypatch, capfd):
    import curate.decont

    built = []
    original = curate.decont.BenchmarkIndex.__init__

    def counting(self, *args, **kwargs):
        built.append(args)
        original(self, *args, **kwargs)

    monkeypatch.setattr(curate.decont.BenchmarkIndex, "__init__", counting)
    docs = _docs(tmp_path / "docs.jsonl", 3)
    bench = _bench(tmp_path / "bench", 3)
    summary = run_decont(Config(), [str(docs)], tmp_path / "out", ONE_TASK, [str(bench)])
    assert summary["dropped"]["contaminated"] == 3 and len(built) == 1
    assert "indexing 1 benchmark file" in capfd.readouterr().err
    assert not list((tmp_path / "out" / "work").glob("*index*"))  # the saved index is removed when done


def test_tasks_in_other_processes_read_the_saved_index(tmp_path):
    folder = tmp_path / "docs"
    _docs(folder / "a.jsonl", 3)
    _jsonl(folder / "b.jsonl", [{"id": "b", "text": "Notes. " + _question(1) + " Thanks."}])
    bench = _bench(tmp_path / "bench", 3)
    two = run_decont(
        Config(), [str(folder)], tmp_path / "two", ExecutorConfig(tasks=2, workers=2), [str(bench)]
    )
    one = run_decont(Config(), [str(folder)], tmp_path / "one", ONE_TASK, [str(bench)])
    assert two["dropped"] == one["dropped"] == {"contaminated": 4}
    assert two["docs_in"] == two["docs_out"] + sum(two["dropped"].values())


def test_a_job_taking_over_a_killed_decont_folder_leaves_no_file_of_it(tmp_path):
    docs = _docs(tmp_path / "docs.jsonl", 3)
    out = tmp_path / "out"
    run_decont(Config(), [str(docs)], out, ONE_TASK, [str(_bench(tmp_path / "a", 3))])
    (out / "summary.json").unlink()  # as a killed job leaves it: nothing finished, a 0-byte Parquet file
    for marker in (out / "logs" / "completions").iterdir():
        marker.unlink()
    (out / "data" / "000_00001.parquet").write_bytes(b"")
    summary = run_decont(Config(), [str(docs)], out, ONE_TASK, [str(_bench(tmp_path / "b", 1))])
    assert summary["dropped"]["contaminated"] == 1
    assert pq.read_table(out / "data").num_rows == summary["docs_out"]
    assert len((out / "contamination.jsonl").read_text().splitlines()) == 1


def test_an_output_folder_inside_an_input_or_benchmark_folder_is_refused(tmp_path):
    docs = _docs(tmp_path / "docs" / "d.jsonl", 3)
    bench = _bench(tmp_path / "bench", 2)
    for out in (docs.parent / "out", bench.parent / "out"):
        with pytest.raises(ValueError, match="is inside the (input|benchmark) folder"):
            run_decont(Config(), [str(docs.parent)], out, ONE_TASK, [str(bench.parent)])
        assert not out.exists()
