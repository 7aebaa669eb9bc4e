"""The rewrite stage's inference server dies with the process that started it: datatrove starts it with
`asyncio.create_subprocess_exec` (no fork hook runs), and after a SIGKILL or SIGTERM of `mathmix run` the CPU
server stayed, reparented, holding ~400 MB (a vLLM server, a whole GPU)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from curate.rewrite.job import CPU_SERVER

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="Linux process semantics (/proc)"
)


def _alive(pid: int) -> bool:
    """Running (a zombie left to an init that does not reap is gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _starter(code: str) -> tuple[subprocess.Popen, int]:
    """A Python process running CODE, which prints the pid of the program it starts, then waits; (it, that pid)."""
    starter = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert starter.stdout is not None
    line = starter.stdout.readline()
    assert line.strip().isdigit(), line
    return starter, int(line)


def _kill(starter: subprocess.Popen, child: int) -> None:
    try:
        starter.kill()
        starter.wait(10)
        assert _gone_within(child, 5), f"{child} outlived the process that started it"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_program_started_through_asyncio_dies_with_its_starter():
    starter, child = _starter(
        """
        import asyncio, time
        from curate.proc_guard import forks_die_with_parent

        async def start():
            proc = await asyncio.create_subprocess_exec("sleep", "120")
            print(proc.pid, flush=True)
            await asyncio.sleep(120)

        with forks_die_with_parent():
            asyncio.run(start())
        """
    )
    _kill(starter, child)


def test_the_cpu_server_exits_when_its_starter_is_killed(tmp_path):
    from curate.rewrite.tiny_model import build_tiny_llama

    model = tmp_path / "tiny-llama"
    texts = [f"Example {i}: $x + {i} = {2 * i}$, so $x = {i}$." for i in range(20)]
    build_tiny_llama(model, texts, vocab_size=200, hidden_size=16, max_positions=256)
    log = tmp_path / "server.log"
    # a plain Popen, no death signal asked: the server's own watch is what ends it (a real model: an old server
    # loads it and serves for good)
    starter, server = _starter(
        f"""
        import subprocess, sys, time
        with open({str(log)!r}, "w") as log:
            proc = subprocess.Popen([sys.executable, {CPU_SERVER!r}, "--port", "0", "--model", {str(model)!r},
                                     "--threads", "1"], stdout=log, stderr=subprocess.STDOUT)
        print(proc.pid, flush=True)
        time.sleep(300)
        """
    )
    time.sleep(1)  # it watches its parent from its first line, before torch and the model load (seconds)
    _kill(starter, server)
    assert "Application startup complete" not in log.read_text()  # it did not wait for the model to load


def test_help_answers_even_when_init_started_it(monkeypatch, capsys):
    """The parent watch ran before argparse: started by PID 1 (a container's init), even `--help` exited 0 at
    once, printing nothing."""
    import os

    import pytest

    from curate import cpu_server

    monkeypatch.setattr(os, "getppid", lambda: 1)

    def exited(code: int) -> None:
        raise AssertionError(f"os._exit({code}) before --help was answered")

    monkeypatch.setattr(os, "_exit", exited)
    with pytest.raises(SystemExit) as done:
        cpu_server.main(["--help"])
    assert done.value.code == 0 and "--max-context" in capsys.readouterr().out
