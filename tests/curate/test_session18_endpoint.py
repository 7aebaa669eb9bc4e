"""A local server killed mid-run (kill -9) closes the requests in flight without a status line, which datatrove's
own client reads as an HTTP 500 with an empty body: with --retries 0 --max-attempts 1 those documents were
dropped as request_failed (exit 0), although a dead server is not the documents' failure."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from datatrove.pipeline.inference.types import ServerError

from curate.rewrite.job import RewriteSettings, run_task
from curate.rewrite.responses import NO_REPLY, SERVER_ERROR, request_error
from curate.rewrite.rollout import RequestsFailedError
from curate.summary import is_balanced
from pipelines.executors import ExecutorConfig

# An OpenAI-compatible server in its own process, so that the test can kill it as a user would: every request
# is answered with a score, except (HOLD=1) those of documents DOC-2 and up, which it holds until it is killed.
SERVER = r"""
import http.server, json, sys, time
port, log, hold = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
ANSWER = json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
    "content": "The page works through an addition problem step by step.\nFinal score: 3"}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()

class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._send(b'{"object": "list", "data": [{"id": "scripted"}]}')

    def do_POST(self):
        text = self.rfile.read(int(self.headers["Content-Length"])).decode()
        if hold and "DOC-" in text and int(text.split("DOC-")[1].split()[0].strip('.,"\\')) >= 2:
            with open(log, "a") as handle:
                handle.write("held\n")
            time.sleep(600)  # until killed
        self._send(ANSWER)

http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(script: Path, port: int, log: Path, hold: bool) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(script), str(port), str(log), "1" if hold else "0"])
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("the test server did not start")


def test_a_server_killed_mid_run_drops_no_document_and_a_rerun_sends_them_again(tmp_path):
    script, log, port = tmp_path / "server.py", tmp_path / "held.log", _free_port()
    script.write_text(SERVER)
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": f"DOC-{i} Worked example: {i} + 1."}) + "\n"
                            for i in range(6)))  # fmt: skip
    run = RewriteSettings(model="scripted-model", server="endpoint", endpoint=f"http://127.0.0.1:{port}",
                          max_tokens=64, temperature=0.0, request_timeout_s=60.0, retries=0, max_attempts=1,
                          retry_backoff_s=0.05, max_concurrent=4, server_ready_timeout_s=5)  # fmt: skip
    server = _start(script, port, log, hold=True)

    def kill_when_four_are_held() -> None:  # documents 0 and 1 answered, 2 to 5 in flight: kill -9
        for _ in range(600):
            if log.exists() and log.read_text().count("held") >= 4:
                break
            time.sleep(0.05)
        server.send_signal(signal.SIGKILL)

    killer = threading.Thread(target=kill_when_four_are_held)
    killer.start()
    try:
        with pytest.raises(RequestsFailedError, match=r"4 document\(s\) failed .*not counted"):
            run_task([str(docs)], tmp_path / "score", "score", run, ExecutorConfig(tasks=1))
    finally:
        killer.join()
        server.kill()
        server.wait()
    assert not (tmp_path / "score" / "summary.json").exists()
    server = _start(
        script, port, log, hold=False
    )  # the server is back: the rerun sends the 4 documents again
    try:
        summary = run_task([str(docs)], tmp_path / "score", "score", run, ExecutorConfig(tasks=1))
    finally:
        server.kill()
        server.wait()
    assert summary["docs_out"] == 6 and summary["dropped"] == {} and is_balanced(summary)


def test_an_empty_500_is_told_from_one_with_a_body():
    """datatrove's client makes a connection closed without a status line a 500 with an empty body: that kind is
    NO_REPLY (the rollout asks the server whether it still answers); a 500 with a body stays a server error."""
    closed = request_error(ServerError("Got InternalServerError from server: "), 5.0)
    assert str(closed.error).startswith(NO_REPLY)
    real = request_error(ServerError('Got InternalServerError from server: {"error": "boom"}'), 5.0)
    assert str(real.error).startswith(SERVER_ERROR) and not str(real.error).startswith(NO_REPLY)
    assert "boom" in str(real.error)
