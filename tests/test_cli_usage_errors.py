"""Bad command lines end with one line naming what is wrong, as mathmix's own checks do (typer printed a usage
line, a hint and a boxed message), exit 2; `mathmix` alone still prints the help."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _mathmix(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mathmix", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "args, expected",
    [
        (["web", "run", "/x", "-o", "/y", "--workers", "0"], "Invalid value for '--workers'"),
        (["web", "run", "/x", "-o", "/y", "--bogus"], "No such option: --bogus"),
        (["audit", "sql", "/nope-run-dir", "SELECT 1"], "'/nope-run-dir' does not exist"),
        (["shards", "build"], "Missing argument"),
    ],
)
def test_a_bad_command_line_is_one_line_naming_the_option(args, expected):
    done = _mathmix(*args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and expected in lines[0], lines[0]
    assert "--help" in lines[0]


def test_mathmix_alone_still_prints_its_help():
    done = _mathmix()
    assert "Usage: " in done.stdout + done.stderr and "Commands" in done.stdout + done.stderr
    assert "error:" not in done.stdout + done.stderr
