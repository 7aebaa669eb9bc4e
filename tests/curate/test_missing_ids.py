"""A row without an id, or with a null one: every stage that reads documents names it by its file's path from the
folder holding all the input files, then its row (`curate.doc_readers.missing_id`), the same on every run."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curate.rewrite.job import RewriteSettings, run_task
from pipelines.executors import ExecutorConfig
from tests.curate.test_rewrite_pipeline import Script, endpoint, settings  # noqa: F401 (endpoint: a fixture)


def _texts(n: int, start: int = 0) -> list[str]:
    return [f"DOC-{i} Worked example: {i} + {i + 1} = {2 * i + 1}." for i in range(start, start + n)]


def _same_named_files(root: Path) -> Path:
    """ROOT/x/000_00000.parquet and ROOT/y/000_00000.parquet, two rows each, no id column."""
    for k, sub in enumerate(("x", "y")):
        (root / sub).mkdir(parents=True)
        pq.write_table(pa.table({"text": _texts(2, 2 * k)}), root / sub / "000_00000.parquet")
    return root


def _null_ids(folder: Path) -> Path:
    """FOLDER/a.parquet (ids None, None, None, 'ok') and FOLDER/b.jsonl (ids null, missing)."""
    folder.mkdir(parents=True)
    ids = [None, None, None, "ok"]
    pq.write_table(pa.table({"id": pa.array(ids, pa.string()), "text": _texts(4)}), folder / "a.parquet")
    rows = [{"id": None, "text": _texts(1, 4)[0]}, {"text": _texts(1, 5)[0]}]
    (folder / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _read(readers) -> list[str]:
    return [doc.id for reader in readers for doc in reader.run(rank=0, world_size=1)]


def _dedup_ids(inputs: list[Path], work: Path) -> list[str]:
    from curate.dedup_io import build_readers, document_files

    return _read(build_readers(document_files(inputs), work))


def test_dedup_and_decont_name_id_less_rows_of_same_named_files_apart(tmp_path):
    root = _same_named_files(tmp_path / "same")
    expected = [
        "x/000_00000.parquet/0",
        "x/000_00000.parquet/1",
        "y/000_00000.parquet/0",
        "y/000_00000.parquet/1",
    ]
    assert _dedup_ids([root], tmp_path / "w1") == expected  # was 000_00000.parquet/0, /1 twice
    assert _dedup_ids([root / "x", root / "y"], tmp_path / "w2") == expected  # two inputs: the same ids


def test_dedup_fills_null_ids_by_the_same_rule(tmp_path):
    folder = _null_ids(tmp_path / "nullid")
    ids = _dedup_ids([folder], tmp_path / "w")
    assert ids == ["a.parquet/0", "a.parquet/1", "a.parquet/2", "ok", "b.jsonl/0", "b.jsonl/1"]


def test_rewrite_readers_fill_null_ids_as_dedup_does(tmp_path):
    from curate.rewrite.inputs import build_readers

    folder = _null_ids(tmp_path / "nullid")
    run = RewriteSettings(model="auto")
    ids = _read(build_readers([str(folder)], run))
    assert ids == ["a.parquet/0", "a.parquet/1", "a.parquet/2", "ok", "b.jsonl/0", "b.jsonl/1"]
    assert _read(build_readers([str(folder)], run)) == ids  # the same on every run
    assert ids == _dedup_ids([folder], tmp_path / "w")
    root = _same_named_files(tmp_path / "same")
    two = _read(build_readers([str(root / "x"), str(root / "y")], run))
    assert two == _dedup_ids([root / "x", root / "y"], tmp_path / "w2")
    assert len(set(two)) == 4


def test_the_shards_readers_fill_null_ids_by_the_same_rule(tmp_path):
    from curate.doc_readers import CountingJsonlReader, CountingParquetReader

    folder = _null_ids(tmp_path / "nullid")
    readers = [
        CountingParquetReader(str(folder), glob_pattern="*.parquet", read_metadata=False),
        CountingJsonlReader(str(folder), glob_pattern="*.jsonl"),
    ]
    assert _read(readers) == ["a.parquet/0", "a.parquet/1", "a.parquet/2", "ok", "b.jsonl/0", "b.jsonl/1"]


def test_rewrite_keeps_null_id_rows_traced_to_their_input_file(tmp_path, endpoint):  # noqa: F811
    url, set_script = endpoint
    set_script(Script("score"))
    folder = _null_ids(tmp_path / "nullid")
    expected = {"a.parquet/0", "a.parquet/1", "a.parquet/2", "ok", "b.jsonl/0", "b.jsonl/1"}
    for out in ("rw1", "rw2"):  # two runs: the same source ids
        summary = run_task([str(folder)], tmp_path / out, "score", settings(url), ExecutorConfig(tasks=1))
        assert (
            summary["docs_in"] == 6 and summary["dropped"] == {}
        )  # was duplicate_id: 2 (and 1 from b.jsonl)
        rows = [
            r
            for f in sorted((tmp_path / out / "data").glob("*.parquet"))
            for r in pq.read_table(f).to_pylist()
        ]
        assert {r["source_id"] for r in rows} == expected


def test_a_killed_rewrite_of_null_id_rows_resumes_with_the_same_source_ids(tmp_path, endpoint):  # noqa: F811
    """Killed after 4 of 6 null-id documents, the rerun sends the other 2 only; each output row is traced to its
    own input row (the ids were the chunk file's, chunk/1 then chunk/5, after a rerun)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.curate.test_rewrite_pipeline import RESUME_SCRIPT, HoldingScript

    url, set_script = endpoint
    first = HoldingScript("score", upto=4)
    set_script(first)
    folder = tmp_path / "nullid"
    folder.mkdir()
    pq.write_table(
        pa.table({"id": pa.array([None] * 6, pa.string()), "text": _texts(6)}), folder / "a.parquet"
    )
    out = tmp_path / "score"
    run = settings(url, records_per_chunk=2, max_concurrent=1, request_timeout_s=60)
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", RESUME_SCRIPT, str(folder), str(out), run.model_dump_json()], cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    marker = out / "checkpoints" / "last_chunk" / "00000.txt"
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline:
        if marker.exists() and marker.read_text().strip() == "1":
            break
        time.sleep(0.1)
    if proc.poll() is None:  # (before the fix it finished: all but one null-id row dropped as duplicate_id)
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    first.release.set()
    assert not (out / "summary.json").exists() and marker.read_text().strip() == "1"

    second = Script("score")
    set_script(second)
    summary = run_task([str(folder)], out, "score", run.model_copy(update={"request_timeout_s": 5.0}),
                       ExecutorConfig(tasks=1))  # fmt: skip
    assert summary["docs_out"] == 6 and summary["dropped"] == {}
    assert sorted(second.calls) == [4, 5]  # the 4 finished before the kill are not sent again
    rows = [r for f in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert {r["source_id"]: r["text"].split()[0] for r in rows} == {
        f"a.parquet/{i}": f"DOC-{i}" for i in range(6)
    }


def test_rewrite_reads_an_input_file_that_is_a_link_to_another_folder(tmp_path):
    """`mathmix rewrite in/a.parquet` with in/a.parquet a link into another folder crashed: the id root was taken
    from the link's target folder, and the reader's folder (the link's) does not lie under it."""
    from curate.rewrite.inputs import build_readers

    real = _null_ids(tmp_path / "real")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.parquet").symlink_to(real / "a.parquet")
    ids = _read(build_readers([str(tmp_path / "in" / "a.parquet")], RewriteSettings(model="auto")))
    assert ids == ["a.parquet/0", "a.parquet/1", "a.parquet/2", "ok"]
