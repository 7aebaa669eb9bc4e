"""`mathmix dedup` / `decont` / `web` on inputs a user review found mishandled: gzip told by the name, not the
bytes; decont's two modes mixed; `--check -o FOLDER`; rows without the field a stage reads; non-string text; the
keep rule `first` depending on --workers."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.summary import is_balanced
from mathmix.cli import app

WORDS = "algebra geometry calculus limits sequences primes integrals matrices vectors groups rings".split()


def _text(i: int) -> str:
    return f"document {i} about " + " ".join(WORDS[(i + k) % len(WORDS)] + str(i * 7 + k) for k in range(30))


def _lines(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _flat(result) -> str:
    return "".join(result.output.split())  # rich wraps lines anywhere


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _rejects(out: Path) -> list[dict]:
    return [r for f in sorted((out / "rejects").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    path = tmp_path / "bench" / "gsm8k" / "test.jsonl"
    path.parent.mkdir(parents=True)
    problem = (
        "Janet has seventeen ducks that lay sixteen eggs every single day and she sells the rest at market"
    )
    path.write_bytes(_lines([{"question": problem, "answer": "18"}]))
    return path


# 1. compression is told by the first bytes --------------------------------------------------------------------


def test_jsonl_compression_is_told_by_the_bytes_not_the_name(tmp_path: Path) -> None:
    """gzip data named .jsonl: every line a bad_record, exit 0; plain text named .jsonl.gz: docs_in 0 and a
    'damaged or truncated' warning."""
    rows = [{"id": f"d{i}", "text": _text(i)} for i in range(3)]
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "gz_named_plain.jsonl").write_bytes(gzip.compress(_lines(rows)))
    (folder / "plain_named.jsonl.gz").write_bytes(_lines([{**r, "id": f"p{i}"} for i, r in enumerate(rows)]))
    for name in ("gz_named_plain.jsonl", "plain_named.jsonl.gz"):
        out = tmp_path / f"out_{name}"
        result = CliRunner().invoke(app, ["dedup", str(folder / name), "-o", str(out), "--no-minhash"])
        assert result.exit_code == 0, result.output
        summary = _summary(out)
        assert summary["docs_in"] == 3 and summary["docs_out"] == 3 and summary["dropped"] == {}, summary
        assert "unreadable_files" not in summary and "damaged" not in result.output
        data = pq.read_table(out / "data").to_pylist()
        assert sorted(r["text"] for r in data) == sorted(r["text"] for r in rows)  # columns found too


def test_reader_sniffs_gzip_and_plain(tmp_path: Path) -> None:
    from curate.doc_readers import CountingJsonlReader

    (tmp_path / "a.jsonl").write_bytes(gzip.compress(_lines([{"id": "a", "text": "one"}])))
    (tmp_path / "b.jsonl.gz").write_bytes(_lines([{"id": "b", "text": "two"}]))
    assert [d.id for d in CountingJsonlReader(str(tmp_path)).run()] == ["a", "b"]


# 2, 3, 7. decont: --check -o FOLDER, mixed modes, the hits table ----------------------------------------------


def _prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    problem = (
        "Janet has seventeen ducks that lay sixteen eggs every single day and she sells the rest at market"
    )
    path.write_bytes(
        _lines([{"prompt": problem}, {"prompt": "a new question about trains and their speeds"}])
    )
    return path


def test_check_output_that_is_a_folder_is_refused_up_front(tmp_path: Path, bench: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    args = ["decont", "--check", str(_prompts(tmp_path)), "--against", str(bench), "-o", str(folder)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no IsADirectoryError
    assert "isafolder" in _flat(result) and "overlapaneval" not in _flat(result)  # before the checking
    assert list(folder.iterdir()) == []


def test_check_report_and_hits_table(tmp_path: Path, bench: Path) -> None:
    report = tmp_path / "r" / "report.json"
    args = ["decont", "--check", str(_prompts(tmp_path)), "--against", str(bench), "-o", str(report)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output  # a contaminated prompt
    assert json.loads(report.read_text())["contaminated"] == 1
    flat = _flat(result)
    assert "hitsperbenchmark" in flat and "contaminateddocuments" not in flat and "prompts" in flat


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["INPUT", "-o", "x11", "--benchmarks", "BENCH"], ["INPUT", "--benchmarks"]),
        (["--flag", "--workers", "3"], ["--flag", "--workers"]),
    ],
)
def test_decont_modes_do_not_mix(tmp_path: Path, bench: Path, extra: list[str], named: list[str]) -> None:
    """`decont corp -o x11 --benchmarks B --check p.jsonl --against B` ignored INPUT and --benchmarks and wrote x11
    as a report file; --flag and --workers were ignored under --check."""
    corpus = tmp_path / "corp.jsonl"
    corpus.write_bytes(_lines([{"id": "c", "text": _text(1)}]))
    subs = {"INPUT": str(corpus), "BENCH": str(bench), "x11": str(tmp_path / "x11")}
    args = ["decont", *[subs.get(a, a) for a in extra]]
    args += ["--check", str(_prompts(tmp_path)), "--against", str(bench)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    flat = _flat(result)
    assert flat.startswith("error:--checkdoesnotgowith") and all(n in flat for n in named), result.output
    assert not (tmp_path / "x11").exists()


def test_against_without_check_is_refused(tmp_path: Path, bench: Path) -> None:
    corpus = tmp_path / "corp.jsonl"
    corpus.write_bytes(_lines([{"id": "c", "text": _text(1)}]))
    args = [
        "decont",
        str(corpus),
        "-o",
        str(tmp_path / "o"),
        "--benchmarks",
        str(bench),
        "--against",
        str(bench),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--againstgoeswith--check" in _flat(result), result.output
    assert not (tmp_path / "o").exists()


# 4. web: JSONL rows without `html` -----------------------------------------------------------------------------


def test_web_warns_about_rows_without_html(tmp_path: Path) -> None:
    """A folder of benchmark JSONL read as pages: every row a bad_record, exit 0 and no word about why."""
    folder = tmp_path / "gsm8k"
    folder.mkdir()
    (folder / "test.jsonl").write_bytes(_lines([{"question": "q1", "answer": "1"}, {"question": "q2"}]))
    out = tmp_path / "web"
    result = CliRunner().invoke(app, ["web", str(folder), "-o", str(out)])
    assert result.exit_code == 0, result.output
    summary = _summary(out)
    assert summary["dropped"] == {"bad_record": 2} and summary["rows_without_html_field"] == 2
    assert "2of2inputrowshaveno`html`field" in _flat(result), result.output


# 5. non-string text --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["dedup", "decont"])
def test_text_that_is_not_a_string_is_named_in_rejects(tmp_path: Path, bench: Path, command: str) -> None:
    """`{"id": "m4", "text": 12345}` was a bad_record of the reader: no warning, and its id in no rejects file."""
    docs = tmp_path / "docs.jsonl"
    docs.write_bytes(
        _lines([{"id": "k", "text": _text(1)}, {"id": "m4", "text": 12345}, {"id": "l", "text": [1]}])
    )
    out = tmp_path / command
    args = [command, str(docs), "-o", str(out)]
    args += ["--benchmarks", str(bench), "--workers", "1"] if command == "decont" else ["--no-minhash"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = _summary(out)
    assert summary["dropped"] == {"text_not_string": 2} and is_balanced(summary), summary
    assert {r["id"]: r["reason"] for r in _rejects(out)} == {"m4": "text_not_string", "l": "text_not_string"}
    assert "2inputrowshavea`text`thatisnotastring" in _flat(result), result.output


# 6. keep rule `first`: the same document for any --workers -----------------------------------------------------


def test_keep_first_does_not_depend_on_workers(tmp_path: Path) -> None:
    """A Parquet file and two JSONL files, an exact pair across the JSONL ones: with files dealt to the tasks
    round-robin, 2 workers kept the second file's copy (task 0 read c.parquet and b.jsonl, task 1 a.jsonl)."""
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(pa.table({"id": ["p0"], "text": [_text(1)]}), folder / "c.parquet")
    (folder / "a.jsonl").write_bytes(_lines([{"id": "a0", "text": _text(2)}, {"id": "a1", "text": _text(3)}]))
    (folder / "b.jsonl").write_bytes(
        _lines([{"id": "b0", "text": _text(2).upper()}, {"id": "b1", "text": _text(4)}])
    )
    kept = {}
    for workers in (1, 2, 3):
        out = tmp_path / f"w{workers}"
        args = ["dedup", str(folder), "-o", str(out), "--no-url", "--no-minhash", "--keep", "first"]
        result = CliRunner().invoke(app, [*args, "--workers", str(workers)])
        assert result.exit_code == 0, result.output
        groups = [json.loads(line) for line in (out / "clusters.jsonl").read_text().splitlines()]
        kept[workers] = [(g["kept"], g["removed"]) for g in groups]
        ids = {r["id"] for r in pq.read_table(out / "data").to_pylist()}
        assert ids == {"p0", "a0", "a1", "b1"}, (workers, ids)
    assert kept == {w: [("a0", ["b0"])] for w in (1, 2, 3)}


def test_reader_blocks_follow_input_order(tmp_path: Path) -> None:
    """Every task reads a contiguous block of the one list of files (Parquet, then JSONL)."""
    from curate.dedup_io import build_readers, document_files

    for name in ("a", "b"):
        pq.write_table(pa.table({"id": [f"{name}p"], "text": ["x"]}), tmp_path / f"{name}.parquet")
    for name in ("c", "d", "e"):
        (tmp_path / f"{name}.jsonl").write_bytes(_lines([{"id": f"{name}j", "text": "x"}]))
    files = document_files([tmp_path])
    for world in (1, 2, 3, 4, 5):
        order = []
        for rank in range(world):
            data = None
            for reader in build_readers(files, tmp_path / "work"):
                data = reader.run(data, rank, world)
            order += [d.id for d in data or []]
        assert order == ["ap", "bp", "cj", "dj", "ej"], (world, order)


def _two_task_folder(tmp_path: Path, command: str, bench: Path) -> tuple[Path, list[str]]:
    """A finished `mathmix dedup` or `decont` folder of two tasks (one input file each); the command's arguments."""
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a", "b"):
        rows = [{"id": f"{name}{i}", "text": _text(ord(name) * 10 + i)} for i in range(3)]
        (folder / f"{name}.jsonl").write_bytes(_lines(rows))
    out = tmp_path / "out"
    args = [command, str(folder), "-o", str(out), "--workers", "2"]
    args += ["--no-minhash"] if command == "dedup" else ["--benchmarks", str(bench)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out, args


def _as_an_earlier_mathmix_left_it(out: Path) -> None:
    """The folder as a mathmix that dealt the files to the tasks round-robin left it: its record names no split."""
    record = json.loads((out / "job.json").read_text())
    record.pop("file_split", None)
    (out / "job.json").write_text(json.dumps(record))
    (out / "work" / "inputs_in_blocks").unlink(missing_ok=True)  # written by the mathmix after it


def _delete_task(out: Path, rank: int) -> None:
    """One task's output deleted by hand, with its completion markers: that task runs again."""
    (written,) = (out / "data").glob(f"*{rank:05d}.parquet")
    written.unlink()
    for marker in out.glob(f"logs/**/completions/{rank:05d}"):
        marker.unlink()


def _documents(out: Path) -> list[dict]:
    return [r for f in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


@pytest.mark.parametrize("command", ["dedup", "decont"])
def test_a_finished_folder_of_an_earlier_file_split_reruns_as_complete(tmp_path, bench, command):
    out, args = _two_task_folder(tmp_path, command, bench)
    _as_an_earlier_mathmix_left_it(out)
    before = _documents(out)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert _documents(out) == before
    # kept as it was: the folder is still told apart on the next rerun
    assert "file_split" not in json.loads((out / "job.json").read_text())
    (out / "summary.json").unlink()  # killed after its tasks finished: no task reads again
    assert CliRunner().invoke(app, args).exit_code == 0 and _documents(out) == before


@pytest.mark.parametrize("command", ["dedup", "decont"])
def test_a_task_of_an_earlier_file_split_is_not_run_again_in_blocks(tmp_path, bench, command):
    """Task 1 of a folder whose files were dealt round-robin, run again with blocks, would read other documents
    than it did (some twice, others never): refused in one line, naming the folder."""
    out, args = _two_task_folder(tmp_path, command, bench)
    _as_an_earlier_mathmix_left_it(out)
    _delete_task(out, 1)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    flat = _flat(result)
    assert "writtenbyanearliermathmixthatsplittheinputfilesamongthetasksotherwise" in flat, result.output
    assert f"{out}:" in flat and "rerunintoanewfolder" in flat, result.output
    assert not (out / "data" / "00001.parquet").exists()  # nothing was run


@pytest.mark.parametrize("command", ["dedup", "decont"])
def test_a_task_deleted_from_a_folder_read_in_blocks_is_run_again(tmp_path, bench, command):
    out, args = _two_task_folder(tmp_path, command, bench)
    assert json.loads((out / "job.json").read_text())["file_split"] == "blocks"
    before = _documents(out)
    _delete_task(out, 1)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert _documents(out) == before


def test_a_folder_read_in_blocks_before_its_record_said_so_is_adopted(tmp_path, bench):
    """A folder of the mathmix that read in blocks and marked it in work/ only: the same job, record rewritten."""
    out, args = _two_task_folder(tmp_path, "dedup", bench)
    _as_an_earlier_mathmix_left_it(out)
    (out / "work" / "inputs_in_blocks").write_text("input files are read in contiguous blocks\n")
    before = _documents(out)
    _delete_task(out, 1)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert _documents(out) == before
    assert json.loads((out / "job.json").read_text())["file_split"] == "blocks"
