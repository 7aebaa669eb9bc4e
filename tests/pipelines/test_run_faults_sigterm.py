"""SIGTERM stops `mathmix run` and `mathmix quickstart` as Ctrl-C does: the run's lock, pool and inference server
are ended on the way out and `interrupted` is printed. A plain SIGTERM used to kill `mathmix` with nothing ended."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", ["run", "quickstart"])
def test_sigterm_stops_a_run_as_ctrl_c(tmp_path, command):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: t\noutput_dir: {tmp_path / 'run'}\nstages: {{web: {{inputs: [a.warc]}}}}\n")
    # the run's work stands in for hours of stages: it says it started, then waits, as a stage does
    code = f"""
        import sys, time
        import pipelines.quickstart, pipelines.runner

        def working(*args, **kwargs):
            print("started", flush=True)
            time.sleep(60)

        pipelines.runner.run_recipe = working
        pipelines.quickstart.run_quickstart = working
        from mathmix.cli import main
        sys.argv = ["mathmix", {command!r}] + ({[str(recipe)]!r} if {command!r} == "run" else ["-o", {str(tmp_path / "qs")!r}])
        main()
        """
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - start < 10
    assert proc.returncode == 130 and "interrupted" in err, (proc.returncode, err)
