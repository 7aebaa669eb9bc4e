"""`audit sql/report/schema/sample` outputs and errors: DuckDB's hints kept, large results streamed, `-o` folders,
formats from the extension, option values checked (a reviewer's findings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from curate.audit import write_result
from curate.audit_cli import register
from curate.audit_synth import build_synthetic_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_synthetic_run(tmp_path_factory.mktemp("audit_output") / "run", 300)


def _invoke(*args: str):
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(app, ["audit", *args])


def test_duckdb_hints_are_kept(run_dir):
    out = _invoke("sql", str(run_dir), "SELECT * FROM webb")
    assert out.exit_code == 2
    assert "Table with name webb does not exist" in out.output and 'Did you mean "web' in out.output
    out = _invoke("sql", str(run_dir), "SELECT urll FROM web")
    assert out.exit_code == 2 and "Candidate bindings:" in out.output and '"url"' in out.output
    out = _invoke("sample", str(run_dir), "--where", "urll = 1")
    assert out.exit_code == 2 and "Candidate bindings:" in out.output
    assert "Traceback" not in out.output


def test_the_table_shows_max_rows_and_counts_the_rest(run_dir):
    out = _invoke("sql", str(run_dir), "SELECT * FROM range(1000)")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert len(lines) == 2 + 200 + 1 and lines[-1].startswith("(200 of 1000 rows shown, 800 more")
    out = _invoke("sql", str(run_dir), "SELECT * FROM range(1000)", "--max-rows", "5")
    assert out.stdout.splitlines()[-1].startswith("(5 of 1000 rows shown, 995 more")
    out = _invoke("sql", str(run_dir), "SELECT * FROM range(1000)", "--max-rows", "0")
    assert out.stdout.splitlines()[-1] == "(1000 rows)"
    out = _invoke("sql", str(run_dir), "SELECT * FROM range(3)")
    assert out.stdout.splitlines()[-1] == "(3 rows)"


def _batches(n_batches: int, rows: int, seen: list[int]):
    schema = pa.schema([("i", pa.int64()), ("s", pa.string()), ("l", pa.list_(pa.float64()))])

    def gen():
        for b in range(n_batches):
            seen.append(pa.total_allocated_bytes())
            start = b * rows
            yield pa.record_batch(
                [pa.array(range(start, start + rows)), pa.array(["x" * 1000] * rows),
                 pa.array([[1.5, float("nan")]] * rows)], schema=schema)  # fmt: skip

    return pa.RecordBatchReader.from_batches(schema, gen())


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "table"])
def test_results_are_written_batch_by_batch(tmp_path, fmt):
    # 100 batches of 1 MB: a writer that kept the whole result would hold ~100 MB of Arrow memory at the end
    seen: list[int] = []
    path = tmp_path / f"out.{fmt}"
    base = pa.total_allocated_bytes()
    write_result(_batches(100, 1000, seen), fmt, path, max_rows=10)
    assert len(seen) == 100 and max(seen) - base < 20_000_000
    if fmt == "parquet":
        assert pq.read_metadata(path).num_rows == 100_000
    elif fmt == "csv":
        assert path.read_text().count("\n") == 100_001
    elif fmt == "json":
        rows = json.loads(path.read_text())
        assert len(rows) == 100_000 and rows[-1]["i"] == 99_999 and rows[0]["l"] == [1.5, None]
    else:
        assert path.read_text().splitlines()[-1].startswith("(10 of 100000 rows shown")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_json_and_csv_streamed_equal_the_whole_result_written_at_once(tmp_path):
    table = pa.table({"a": [1, 2, None], "s": ["x\ny", "é\u2028", None], "m": [{"k": 1}, None, {"k": 2}]})
    import io

    out = io.StringIO()
    write_result(table.to_reader(max_chunksize=1), "json", None, out=out)
    rows = [{k: v for k, v in r.items()} for r in table.to_pylist()]
    assert out.getvalue() == json.dumps(rows, indent=1, ensure_ascii=False) + "\n"
    out = io.StringIO()
    write_result(pa.table({"a": []}, schema=pa.schema([("a", pa.int64())])), "json", None, out=out)
    assert out.getvalue() == "[]\n"
    out = io.StringIO()
    write_result(table.select(["a", "s"]).to_reader(max_chunksize=1), "csv", None, out=out)
    assert out.getvalue() == '"a","s"\n1,"x\ny"\n2,"é\u2028"\n,\n'


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the peak from /proc (Linux)")
def test_a_large_result_streams_in_bounded_memory(run_dir, tmp_path):
    # the reviewer's case: 3M rows (here ~600 MB of text) once took 1.4 GB held in Python (864 MB as parquet)
    query = "SELECT range AS i, repeat('x', 200) AS s FROM range(3000000)"
    target = tmp_path / "big.parquet"
    # VmHWM: this process's own peak (ru_maxrss of a child would also count the forked pytest process)
    code = (
        "import atexit, sys; from mathmix.cli import main; "
        "atexit.register(lambda: print('peak_kb', open('/proc/self/status').read().split('VmHWM:')[1].split()[0], "
        "file=sys.stderr)); sys.argv[0] = 'mathmix'; sys.exit(main())"
    )
    proc = subprocess.run([sys.executable, "-c", code, "audit", "sql", str(run_dir), query, "-o", str(target),
                           "-f", "parquet"], capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert pq.read_metadata(target).num_rows == 3_000_000
    peak_kb = int(proc.stderr.split("peak_kb")[-1].split()[0])
    assert peak_kb < 500 * 1024, f"peak {peak_kb // 1024} MB"


def test_output_to_a_folder_is_one_line(run_dir, tmp_path):
    folder = tmp_path / "adir"
    folder.mkdir()
    for target in (str(folder), str(tmp_path / "newdir") + "/"):
        out = _invoke("sql", str(run_dir), "SELECT 1", "-o", target)
        assert out.exit_code == 2 and "is a folder" in out.output and "Traceback" not in out.output
        assert len(out.output.strip().splitlines()) == 1
    assert list(folder.iterdir()) == [] and not (tmp_path / "newdir").exists()


def test_an_empty_output_is_refused_in_one_line(run_dir, tmp_path, monkeypatch):
    """`-o ""` (an unset shell variable): `audit report` wrote RUN/audit/ as if there were no -o, and `audit sql`
    said `error: : is a folder`."""
    monkeypatch.chdir(tmp_path)
    before = sorted(run_dir.rglob("*"))
    for args in (
        ["report", str(run_dir), "-o", ""],
        ["report", str(run_dir), "--output", "", "--no-markdown"],
        ["sql", str(run_dir), "SELECT 1", "-o", ""],
        ["sql", str(run_dir), "SELECT 1", "-f", "csv", "--output", ""],
    ):
        out = _invoke(*args)
        assert out.exit_code == 2, (args, out.output)
        assert len(out.output.strip().splitlines()) == 1, out.output
        assert out.output.startswith("error: -o '': an empty path; -o names the "), out.output
    assert sorted(run_dir.rglob("*")) == before and list(tmp_path.iterdir()) == []


def test_report_into_a_folder_named_with_a_trailing_slash(run_dir, tmp_path):
    out = _invoke("report", str(run_dir), "-o", str(tmp_path / "rep_m") + "/")
    assert out.exit_code == 0, out.output
    assert (tmp_path / "rep_m" / "report.html").is_file() and (tmp_path / "rep_m" / "report.md").is_file()
    assert not (tmp_path / "rep_m.md").exists()


def test_format_from_the_extension(run_dir, tmp_path):
    query = "SELECT 1 AS a, 'x' AS b"
    for ext in ("parquet", "csv", "json", "txt"):
        out = _invoke("sql", str(run_dir), query, "-o", str(tmp_path / f"c.{ext}"))
        assert out.exit_code == 0, out.output
    assert pq.read_table(tmp_path / "c.parquet").to_pylist() == [{"a": 1, "b": "x"}]
    assert (tmp_path / "c.csv").read_text() == '"a","b"\n1,"x"\n'
    assert json.loads((tmp_path / "c.json").read_text()) == [{"a": 1, "b": "x"}]
    assert (tmp_path / "c.txt").read_text().splitlines()[-1] == "(1 row)"
    out = _invoke("sql", str(run_dir), query, "-o", str(tmp_path / "d.parquet"), "-f", "csv")
    assert (tmp_path / "d.parquet").read_text() == '"a","b"\n1,"x"\n'  # -f wins


def test_bad_option_values_are_refused(run_dir):
    for args in (
        ["schema", str(run_dir), "-f", "csv"],
        ["sql", str(run_dir), "SELECT 1", "-f", "xml"],
        ["sample", str(run_dir), "-n", "-5"],
        ["sample", str(run_dir), "-n", "0"],
        ["sample", str(run_dir), "--chars", "-5"],
        ["sql", str(run_dir), "SELECT 1", "--max-width", "0"],
        ["sql", str(run_dir), "SELECT 1", "--max-rows", "-1"],
    ):
        out = _invoke(*args)
        assert out.exit_code == 2, args
        assert "Parser Error" not in out.output and "Traceback" not in out.output, args


def test_a_closed_pipe_ends_quietly_with_exit_0(run_dir):
    """`audit sql ... -f csv | head -1`: exit 2 and 'error: Broken pipe' broke `set -o pipefail` scripts."""
    script = (
        f"set -o pipefail; {sys.executable} -m mathmix audit sql {run_dir} "
        "'SELECT range FROM range(300000)' -f csv | head -1"
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == '"range"\n', done.stderr
    assert "error" not in done.stderr and "Traceback" not in done.stderr


def test_output_is_written_through_links_and_special_files(run_dir, tmp_path):
    """-o through a symlink writes its target (the link was replaced by a file); a FIFO or /dev/stdout is written
    to, not replaced; a file written over keeps its permissions."""
    import os
    import threading

    target = tmp_path / "target.csv"
    target.write_text("keep\n")
    target.chmod(0o600)
    link = tmp_path / "link.csv"
    link.symlink_to(target.name)
    assert _invoke("sql", str(run_dir), "SELECT 1 AS one", "-o", str(link)).exit_code == 0
    assert link.is_symlink() and target.read_text() == '"one"\n1\n'
    assert target.stat().st_mode & 0o777 == 0o600
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    assert _invoke("sql", str(run_dir), "SELECT 2 AS two", "-f", "csv", "-o", str(fifo)).exit_code == 0
    reader.join(10)
    assert got == ['"two"\n2\n'] and fifo.is_fifo()


def test_report_to_a_special_file_writes_no_twin_beside_it(run_dir, tmp_path):
    """`-o /dev/null` (or /dev/stdout, a FIFO) wrote /dev/null.md and /dev/null_plots/ into /dev."""
    import os
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    out = _invoke("report", str(run_dir), "-o", str(fifo))
    reader.join(30)
    assert out.exit_code == 0 and "no Markdown twin" in out.output, out.output
    assert got and got[0].startswith("<!doctype html>") and fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_an_output_that_cannot_be_made_is_named_as_written(run_dir, tmp_path):
    """-o under a file said `FILE: File exists`; -o in a folder no file can be made in named our temporary
    `.x.csv.abc123.tmp` beside it instead of the -o the user wrote."""
    blocker = tmp_path / "report.html"
    blocker.write_text("x")
    out = _invoke("sql", str(run_dir), "SELECT 1", "-o", str(blocker / "x.csv"))
    assert out.exit_code == 2, out.output
    assert out.output.strip() == f"error: {blocker / 'x.csv'}: {blocker} is not a folder"
    out = _invoke("sql", str(run_dir), "SELECT 1", "-o", "/proc/x.csv")
    assert out.exit_code == 2 and out.output.startswith("error: /proc/x.csv: ") and ".tmp" not in out.output
