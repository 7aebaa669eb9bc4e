"""Stage folders as inputs and outputs: an unfinished stage is not read as if it were whole, a run folder that
another run is writing is neither read nor written, and -o never lands inside another stage's folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from mathmix.cli import app
from mathmix.paths import stage_data

LOCK_FILE = ".mathmix-run.lock"


def _stage(folder: Path, finished: bool = True, record: str = "job.json") -> Path:
    """A stage folder as a stage command leaves it: data/, logs/, its record and (finished) summary.json."""
    (folder / "data").mkdir(parents=True)
    (folder / "logs").mkdir()
    pq.write_table(
        pa.table({"id": ["a", "b"], "text": ["x + 1 = 2", "y = 3"]}), folder / "data" / "00000.parquet"
    )
    (folder / record).write_text("{}")
    if finished:
        (folder / "summary.json").write_text(json.dumps({"docs_in": 2, "docs_out": 2, "dropped": {}}))
    return folder


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "a", "text": "x + 1 = 2"}) + "\n")
    return docs


def _one_line_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0]


@pytest.fixture
def held_lock(tmp_path):
    """Hold RUN/.mathmix-run.lock from another process, as a running `mathmix run` does; yields RUN."""
    run = tmp_path / "run3"
    run.mkdir()
    holder = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(run / LOCK_FILE)!r}, os.O_RDWR | os.O_CREAT, 0o666)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "os.write(fd, f'pid {os.getpid()} on host here, since now\\n'.encode())\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield run
    finally:
        proc.communicate("")  # its stdin closed: it ends, and the kernel drops its lock


def test_an_unfinished_stage_folder_is_refused_as_input(tmp_path):
    from mathmix.paths import StageNotReadable

    wk5 = _stage(tmp_path / "wk5", finished=False)  # `mathmix web ... -o wk5` killed after 2 of 4 tasks
    for given in (wk5, wk5 / "data"):
        result = CliRunner().invoke(app, ["dedup", str(given), "-o", str(tmp_path / "d17")])
        assert result.exit_code == 2, result.output
        line = _one_line_error(result.output)
        assert "has not finished (no summary.json)" in line and "finish it first" in line
        assert not (tmp_path / "d17").exists()  # nothing written, the folder it made removed
    with pytest.raises(StageNotReadable):
        stage_data(wk5)
    (wk5 / "summary.json").write_text("{}")  # finished: read as before
    assert stage_data(wk5) == wk5 / "data" and stage_data(wk5 / "data") == wk5 / "data"


def test_a_folder_no_stage_started_is_still_read(tmp_path):
    data = tmp_path / "openwebmath" / "data"  # a dataset laid out as NAME/data/
    data.mkdir(parents=True)
    assert stage_data(data.parent) == data and stage_data(data) == data
    copy = tmp_path / "copy"  # a stage's data/ and rejects/ copied by hand: no record, no logs/ of a start
    (copy / "data").mkdir(parents=True)
    (copy / "rejects").mkdir()
    assert stage_data(copy) == copy / "data"


def test_a_run_folder_in_use_is_neither_read_nor_written(tmp_path, held_lock):
    from mathmix.paths import run_folder_in_use

    run = held_lock
    _stage(run / "web", record="recipe-stage.json")  # web finished, the run is at its dedup stage
    assert "is in use by a mathmix run (pid" in (run_folder_in_use(run / "web") or "")
    result = CliRunner().invoke(app, ["dedup", str(run / "web"), "-o", str(tmp_path / "elsewhere")])
    assert result.exit_code == 2 and "in use by a mathmix run (pid" in _one_line_error(result.output)
    assert not (tmp_path / "elsewhere").exists()
    result = CliRunner().invoke(app, ["dedup", str(_docs(tmp_path)), "-o", str(run / "dedup")])
    assert result.exit_code == 2 and "in use by a mathmix run (pid" in _one_line_error(result.output)
    assert not (run / "dedup").exists()


def test_a_lock_file_left_by_a_killed_run_is_no_refusal(tmp_path):
    from mathmix.paths import run_folder_in_use

    run = tmp_path / "run"
    _stage(run / "web", record="recipe-stage.json")
    (run / LOCK_FILE).write_text("pid 1 on host gone, since then\n")  # nobody holds it
    assert run_folder_in_use(run / "web") is None and stage_data(run / "web") == run / "web" / "data"


def test_a_run_reads_its_own_stages_under_its_own_lock(tmp_path):
    from mathmix.paths import run_folder_in_use
    from pipelines.run_lock import run_folder_lock

    run = tmp_path / "run"
    _stage(run / "web", record="recipe-stage.json")
    with run_folder_lock(run):  # as `mathmix run` holds it while its later stages read the earlier ones
        assert (run / LOCK_FILE).is_file()
        assert run_folder_in_use(run / "web" / "data") is None
        assert stage_data(run / "web" / "data") == run / "web" / "data"


def test_a_run_folder_lock_held_in_a_child_is_seen(tmp_path, held_lock):
    from mathmix.paths import run_folder_in_use

    # the lock of another process, however this process opened the file: a second descriptor, a symlink
    link = tmp_path / "link"
    os.symlink(held_lock, link)
    assert run_folder_in_use(link / "web" / "data") is not None


@pytest.mark.parametrize("record", ["recipe-stage.json", "job.json"])
def test_output_inside_another_stage_folder_is_refused(tmp_path, record):
    web = _stage(tmp_path / "run2ref" / "web", record=record)
    before = sorted(p.relative_to(web) for p in web.rglob("*"))
    for out in (web / "data", web / "data" / "nested", web / "other"):
        result = CliRunner().invoke(app, ["dedup", str(_docs(tmp_path)), "-o", str(out)])
        assert result.exit_code == 2, result.output
        line = _one_line_error(result.output)
        assert f"inside the stage folder {web}" in line
    assert sorted(p.relative_to(web) for p in web.rglob("*")) == before  # nothing written into web/


def test_output_inside_an_unfinished_stage_command_folder_is_refused(tmp_path):
    web = _stage(tmp_path / "wk5", finished=False)
    result = CliRunner().invoke(app, ["dedup", str(_docs(tmp_path)), "-o", str(web / "data")])
    assert result.exit_code == 2 and "inside the stage folder" in _one_line_error(result.output)


def test_output_beside_stage_folders_is_not_refused_for_them(tmp_path):
    from mathmix.paths import stage_folder_above

    run = tmp_path / "run"
    _stage(run / "web", record="recipe-stage.json")
    assert stage_folder_above(run / "mydedup") is None  # a run folder is no stage folder
    # the stage's own folder (a rerun into it) is its job record's to judge
    assert stage_folder_above(run / "web") is None
    assert stage_folder_above(run / "web" / "data") == run / "web"
