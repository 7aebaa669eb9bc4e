"""SIGTERM stops every stage command (`mathmix web`, `dedup`, `rewrite`...) as Ctrl-C does, as it stops `mathmix run`:
at once, its pool and inference server ended, exit 130, and a rerun finishes with the output an uninterrupted run
writes. A plain SIGTERM killed them (exit -15) with nothing to end what they had started. The trainers keep theirs:
they checkpoint and exit 128 + the signal (mathmix.signals.StopOnSignal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from tests.pipelines.test_process_leaks import (  # noqa: F401  (pages, sessions: fixtures)
    MATHMIX,
    _extraction_workers,
    _left_after,
    _session,
    _wait_for,
    pages,
    sessions,
)


def test_every_command_but_the_trainers_takes_sigterm_as_ctrl_c():
    from mathmix.cli import STOP_ON_SIGNAL, app

    found: dict[tuple[str, ...], bool] = {}

    def walk(group, path=()):
        for command in group.registered_commands:
            name = command.name or command.callback.__name__.replace("_", "-")
            found[(*path, name)] = getattr(command.callback, "sigterm_as_ctrl_c", False)
        for sub in group.registered_groups:
            walk(sub.typer_instance, (*path, sub.name))

    walk(app)
    assert STOP_ON_SIGNAL == {("train", "run"), ("eval", "rl-probe")}
    assert {path for path, wrapped in found.items() if not wrapped} == STOP_ON_SIGNAL
    for path in [("web", "run"), ("dedup",), ("decont",), ("rewrite", "run"), ("shards", "build"), ("run",)]:
        assert found[path], path


def _rows(out: Path, folder: str = "data") -> list[dict]:
    """The rows of OUT/FOLDER/*.parquet, in a fixed order (the files' names and row order follow the tasks)."""
    rows = [row for f in sorted((out / folder).glob("*.parquet")) for row in pq.read_table(f).to_pylist()]
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True, default=str))


def _stop_and_rerun(tmp_path, sessions, command: list[str], out: Path, started) -> None:  # noqa: F811
    """Start COMMAND (writing OUT), SIGTERM it once `started(its pid)` holds: exit 130 with `interrupted`, nothing
    left running, no summary; then the same command again finishes, with the rows of an uninterrupted run."""
    log = tmp_path / "log"
    with open(log, "w") as sink:
        proc = sessions([*MATHMIX, *command, "-o", str(out)], stdout=sink, stderr=subprocess.STDOUT)

    def ready():
        return started(proc.pid)

    ready.__doc__ = started.__doc__
    _wait_for(ready, proc, log, 240)
    assert not (out / "summary.json").exists(), "finished before the signal"
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running 30 s after SIGTERM:\n{log.read_text()[-2000:]}") from None
    said = log.read_text()
    assert proc.returncode == 130 and "interrupted" in said, (proc.returncode, said[-2000:])
    left = _left_after(proc.pid, 5)
    assert not left, "still running 5 s after SIGTERM:\n" + "\n".join(left)
    assert not (out / "summary.json").exists()

    for folder in (out, tmp_path / "whole"):  # the rerun, then an uninterrupted run to compare with
        done = subprocess.run(
            [*MATHMIX, *command, "-o", str(folder)], capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for folder in ("data", "rejects"):
        assert _rows(out, folder) == _rows(tmp_path / "whole", folder), folder
    summary = json.loads((out / "summary.json").read_text())
    assert summary["docs_out"] == len(_rows(out)) and summary["docs_out"] + len(_rows(out, "rejects")) > 0


def _pool_workers(sid: int) -> list[psutil.Process]:
    procs = [p for p in _session(sid) if "multiprocess.forkserver" in " ".join(p.cmdline())]
    servers = {p.pid for p in procs}
    return [p for p in procs if p.ppid() in servers]


def test_sigterm_stops_mathmix_web_and_a_rerun_finishes_it(tmp_path, pages, sessions):  # noqa: F811
    def started(sid):
        """an extraction worker for each of the two tasks"""
        return len(_extraction_workers(sid)) >= 2

    _stop_and_rerun(tmp_path, sessions, ["web", str(pages), "--workers", "2"], tmp_path / "web", started)


def _documents(folder: Path, files: int = 2, per_file: int = 1500) -> Path:
    """JSONL documents with `id` and `text`, one in five a near copy of the one before it."""
    folder.mkdir()
    for f in range(files):
        rows = []
        for i in range(per_file):
            n = f * per_file + i
            seed = n - 1 if n % 5 == 4 else n
            words = " ".join(f"w{(seed * 7919 + k * 104729) % 5003}" for k in range(120))
            rows.append({"id": f"doc-{n}", "text": f"Problem {seed}: solve x + {seed} = {2 * seed}. {words}"})
        (folder / f"part-{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_sigterm_stops_mathmix_dedup_and_a_rerun_finishes_it(tmp_path, sessions):  # noqa: F811
    docs = _documents(tmp_path / "docs")

    def started(sid):
        """the pool's two workers"""
        return len(_pool_workers(sid)) >= 2

    _stop_and_rerun(tmp_path, sessions, ["dedup", str(docs), "--workers", "2"], tmp_path / "dedup", started)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from curate.rewrite.tiny_model import build_tiny_llama

    path = tmp_path_factory.mktemp("model") / "tiny-llama"
    build_tiny_llama(path, _texts(), vocab_size=400, hidden_size=32, max_positions=4096)
    return path


def _texts() -> list[str]:
    return [
        f"Example {i}: to solve $x + {i} = {2 * i}$ subtract {i} from both sides, so $x = {i}$. "
        f"Question: what is {i} + {i}? Solution: it is \\\\boxed{{{2 * i}}}."
        for i in range(40)
    ]


def test_sigterm_stops_mathmix_rewrite_and_its_server(tmp_path, sessions, tiny_model):  # noqa: F811
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(json.dumps({"id": f"doc-{i}", "text": t}) + "\n" for i, t in enumerate(_texts()[:6]))
    )
    command = ["rewrite", str(docs), "--task", "qa", "--server", "transformers", "--model", str(tiny_model)]
    command += ["--max-tokens", "32", "--temperature", "0", "--max-concurrent", "1"]

    def started(sid):
        """the CPU inference server"""
        return any("cpu_server.py" in " ".join(p.cmdline()) for p in _session(sid))

    _stop_and_rerun(tmp_path, sessions, command, tmp_path / "qa", started)
