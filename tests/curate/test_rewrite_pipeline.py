"""The rewrite job end to end through datatrove's InferenceRunner against an OpenAI-compatible endpoint.

The endpoint is a scripted HTTP server in the test: it answers each document with a hand-written output or
misbehaves on purpose (malformed JSON, 503 then success, hangs, 400), so that every path from request to
Parquet row or counted drop is exercised over real HTTP.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.rewrite.job import RewriteSettings, run_task
from curate.rewrite.rollout import RequestsFailedError
from curate.summary import is_balanced
from pipelines.executors import ExecutorConfig
from tests.curate.fake_endpoint import JsonHandler, serve

QA = (
    "Question: What is ${a} + {b}$?\nSolution: Adding {a} and {b} gives {c}, so the answer is \\boxed{{{c}}}."
)
SCORE = "The page works through an addition problem step by step, clear for primary school.\nFinal score: {s}"


def qa_answer(i: int) -> str:
    return QA.format(a=i, b=i + 1, c=2 * i + 1)


class Script:
    """What the scripted endpoint answers for document `DOC-i` (found in the prompt)."""

    def __init__(self, task: str):
        self.task = task
        self.calls: dict[int, int] = {}
        self.lock = threading.Lock()
        self.broken = True  # documents 5 and 7 fail their requests while broken

    def respond(self, prompt: str) -> tuple[int, bytes, float]:
        if "DOC-" not in prompt:  # the runner's one-token test request (does the server work?): answered
            return 200, _completion("OK"), 0.0
        i = int(prompt.split("DOC-")[1].split()[0].strip(".,"))
        with self.lock:
            self.calls[i] = self.calls.get(i, 0) + 1
            n = self.calls[i]
        if self.task == "score":
            return 200, _completion(SCORE.format(s=i % 6)), 0.0
        if i == 5 and self.broken:
            return 200, b'{"choices": [{"message": {"content": "Question', 0.0  # malformed JSON, every time
        if i == 6 and n == 1:
            return 503, b'{"error": "overloaded"}', 0.0  # transient: the retry succeeds
        if i == 7 and self.broken:
            return 200, _completion(qa_answer(i)), 5.0  # hangs past the request timeout
        if i == 8:
            return 400, b'{"error": {"type": "BadRequestError", "message": "prompt too long"}}', 0.0
        if i == 9:
            return 200, _completion(qa_answer(i)[:40], finish="length"), 0.0
        text = qa_answer(0 if i == 4 else i)  # document 4 gets the same output as document 0: exact dedup
        return 200, _completion(text), 0.0


def _completion(text: str, finish: str = "stop") -> bytes:
    body = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
    return json.dumps(body).encode()


@pytest.fixture
def endpoint():
    """Start a scripted OpenAI-compatible server on 127.0.0.1; yields (url, set_script)."""
    state: dict = {}

    class Handler(JsonHandler):
        def do_GET(self):  # noqa: N802
            self._send(200, b'{"object": "list", "data": [{"id": "scripted"}]}')

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, payload, delay = state["script"].respond(body["messages"][0]["content"])
            time.sleep(delay)
            if status is None:  # close the connection without a reply
                self.close_connection = True
                self.connection.close()
                return
            try:
                self._send(status, payload)
            except OSError:  # the client gave up (timeout): nothing to answer
                pass

    with serve(Handler) as url:
        yield url, lambda script: state.__setitem__("script", script)


def write_stage_input(folder: Path, n: int = 10) -> Path:
    """A stage folder like RUN/decont/: data/*.parquet (id, text, url) plus a rejects/ that must be ignored."""
    rows = [
        {
            "id": f"web-{i}",
            "text": f"DOC-{i} Worked example: {i} + {i + 1} = {2 * i + 1}.",
            "url": f"https://x/{i}",
        }
        for i in range(n)
    ]
    (folder / "data").mkdir(parents=True)
    (folder / "rejects").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), folder / "data" / "00000.parquet")
    pq.write_table(
        pa.Table.from_pylist([{"id": "rejected", "text": "DOC-99 never read"}]),
        folder / "rejects" / "r.parquet",
    )
    return folder


def settings(url: str, **kw) -> RewriteSettings:
    base = dict(model="scripted-model", server="endpoint", endpoint=url, max_tokens=64, temperature=0.0,
                request_timeout_s=1.0, retries=1, retry_backoff_s=0.05, max_concurrent=4,
                server_ready_timeout_s=3)  # fmt: skip
    return RewriteSettings(**{**base, **kw})


def read_rows(folder: Path) -> list[dict]:
    files = sorted(folder.glob("*.parquet"))
    return [row for f in files for row in pq.read_table(f).to_pylist()]


def test_qa_end_to_end_with_misbehaving_endpoint(tmp_path, endpoint):
    url, set_script = endpoint
    script = Script("qa")
    set_script(script)
    inputs = [str(write_stage_input(tmp_path / "decont"))]
    out = tmp_path / "branches" / "qa"
    bench = tmp_path / "bench" / "toy" / "test.jsonl"  # a benchmark holding document 2's generated problem
    bench.parent.mkdir(parents=True)
    bench.write_text(
        json.dumps({"problem": "What is $2 + 3$?", "solution": qa_answer(2).split("Solution: ")[1]})
    )
    run = settings(url, decont_benchmarks=[str(bench.parent.parent)], decont_ngram=8)
    # Documents 5 and 7 fail their requests: the others are done, these are not, and the run says so.
    with pytest.raises(RequestsFailedError, match=r"2 document\(s\) failed their requests .*rerun"):
        run_task(inputs, out, "qa", run, ExecutorConfig(tasks=1))
    assert not (out / "summary.json").exists()
    assert (
        script.calls[6] == 2 and script.calls[5] == 2 and script.calls[8] == 1
    )  # retried, or not when futile
    before = dict(script.calls)
    script.broken = False  # the endpoint recovers: a rerun requests the two failed documents only
    summary = run_task(inputs, out, "qa", run, ExecutorConfig(tasks=1))
    assert {i: n - before.get(i, 0) for i, n in script.calls.items() if n != before.get(i, 0)} == {5: 1, 7: 1}

    assert summary["docs_in"] == 10 and is_balanced(summary) and "unaccounted" not in summary
    expected = {"bad_request": 1, "contaminated": 1, "duplicate": 1, "truncated": 1}
    assert summary["dropped"] == expected
    assert summary["decont"].startswith("8-gram")
    rows = read_rows(out / "data")
    assert sorted(r["source_id"] for r in rows) == ["web-0", "web-1", "web-3", "web-5", "web-6", "web-7"]
    row = next(r for r in rows if r["source_id"] == "web-3")
    assert row["id"] == "web-3/qa" and row["answer"] == "7" and row["question"] == "What is $3 + 4$?"
    assert row["task"] == "qa" and row["prompt_version"] == "qa.v1" and row["model"] == "scripted-model"
    assert json.loads(row["sampling"]) == {"max_tokens": 64, "temperature": 0.0, "top_p": 0.95}
    assert (
        row["source_url"] == "https://x/3" and row["prompt_tokens"] == 100 and row["completion_tokens"] == 20
    )
    rejects = {r["source_id"]: r["reason"] for r in read_rows(out / "rejects")}
    assert rejects == {
        "web-8": "bad_request",
        "web-9": "truncated",
    }
    report = json.loads((out / "throughput.json").read_text())
    assert report["tokens_in"] == 100 * report["requests"] and report["tokens_out_per_s"] > 0
    assert json.loads((out / "summary.json").read_text()) == summary


def test_score_task_gives_math_score_llm(tmp_path, endpoint):
    url, set_script = endpoint
    set_script(Script("score"))
    inputs = [str(write_stage_input(tmp_path / "decont", n=6))]
    summary = run_task(inputs, tmp_path / "score", "score", settings(url), ExecutorConfig(tasks=1))
    assert summary["docs_out"] == 6 and summary["dropped"] == {}
    table = pq.read_table(next((tmp_path / "score" / "data").glob("*.parquet")))
    assert table.schema.field("math_score_llm").type == pa.int64()
    scores = dict(
        zip(table.column("source_id").to_pylist(), table.column("math_score_llm").to_pylist(), strict=True)
    )
    assert scores == {f"web-{i}": i % 6 for i in range(6)}  # 0 is a score, not a missing value
    assert table.column("text").to_pylist()[0].startswith("DOC-")


def test_rerun_of_a_finished_task_changes_nothing(tmp_path, endpoint):
    url, set_script = endpoint
    script = Script("score")
    set_script(script)
    inputs = [str(write_stage_input(tmp_path / "decont", n=3))]
    first = run_task(inputs, tmp_path / "score", "score", settings(url), ExecutorConfig(tasks=1))
    before = read_rows(tmp_path / "score" / "data")
    calls = sum(script.calls.values())
    second = run_task(inputs, tmp_path / "score", "score", settings(url), ExecutorConfig(tasks=1))
    assert sum(script.calls.values()) == calls  # completion markers: no request sent again
    assert read_rows(tmp_path / "score" / "data") == before
    assert {k: second[k] for k in ("docs_in", "docs_out", "dropped")} == {
        k: first[k] for k in ("docs_in", "docs_out", "dropped")
    }


def test_endpoint_down_fails_loudly_without_a_summary(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inputs = [str(write_stage_input(tmp_path / "decont", n=2))]
    url = f"http://127.0.0.1:{port}"
    start = time.time()
    with pytest.raises(ValueError, match=f"endpoint {url} did not answer .* within 3s"):
        run_task(inputs, tmp_path / "qa", "qa", settings(url), ExecutorConfig(tasks=1))
    assert time.time() - start < 10
    assert not (tmp_path / "qa").exists()  # named before anything was written (no job.json, no logs)


def test_bad_or_dead_endpoint_is_one_line_before_anything_is_written(tmp_path, monkeypatch):
    import importlib.util

    from typer.testing import CliRunner

    from mathmix.cli import app

    inputs = str(write_stage_input(tmp_path / "decont", n=2) / "data")
    out = tmp_path / "qa"

    def rewrite(url: str, *extra: str):
        args = ["rewrite", inputs, "-o", str(out), "--task", "qa", "--model", "m", "--server", "endpoint",
                "--endpoint", url, *extra]  # fmt: skip
        result = CliRunner().invoke(app, args)
        return result, "".join(result.output.split("\n"))  # rich wraps long lines

    for url in ("notaurl", "ftp://x/y", "http:///v1", "http://127.0.0.1:port"):
        result, output = rewrite(url)
        assert result.exit_code == 2 and f"endpoint '{url}'" in output, output
        assert "Traceback" not in output and "rerun" not in output and not out.exists()
    # A non-local endpoint goes through the OpenAI client, an optional package: named up front when missing.
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "openai" else find_spec(name, *a)
    )
    result, output = rewrite("https://api.example.com/v1")
    assert result.exit_code == 2 and "https://api.example.com/v1" in output and "mathmix[endpoint]" in output
    assert not out.exists()
    monkeypatch.undo()
    result, output = rewrite("http://127.0.0.1:9", "--server-timeout", "1")  # nothing listens on port 9
    assert result.exit_code == 2 and "endpoint http://127.0.0.1:9 did not answer" in output, output
    assert len(result.output.strip().splitlines()) <= 3 and "Traceback" not in output and not out.exists()


def test_a_different_task_into_the_same_folder_names_both_tasks(tmp_path, endpoint):
    url, set_script = endpoint
    set_script(Script("score"))
    inputs = [str(write_stage_input(tmp_path / "decont", n=2))]
    run_task(inputs, tmp_path / "rw", "score", settings(url), ExecutorConfig(tasks=1))
    # the task's template is named too, by its path (the identity holds the text of the template the job reads)
    said = (
        r"another job than this rewrite \(prompt: \S*/score.v1.txt -> \S*/qa.v1.txt; task: 'score' -> 'qa'\)"
    )
    with pytest.raises(ValueError, match=said):
        run_task(inputs, tmp_path / "rw", "qa", settings(url), ExecutorConfig(tasks=1))


class HoldingScript(Script):
    """Answers documents below `upto` at once and holds the others until `release` is set (a run to kill)."""

    def __init__(self, task: str, upto: int):
        super().__init__(task)
        self.upto, self.release = upto, threading.Event()

    def respond(self, prompt: str) -> tuple[int, bytes, float]:
        if int(prompt.split("DOC-")[1].split()[0].strip(".,")) >= self.upto:
            self.release.wait(60)
        return super().respond(prompt)


RESUME_SCRIPT = """
import sys
from pathlib import Path
from curate.rewrite.job import RewriteSettings, run_task
from curate.rewrite.rollout import RequestsFailedError
from pipelines.executors import ExecutorConfig
run_task([sys.argv[1]], Path(sys.argv[2]), "score", RewriteSettings.model_validate_json(sys.argv[3]),
         ExecutorConfig(tasks=1))
"""


def test_resumed_run_reports_throughput_of_the_documents_it_generated(tmp_path, endpoint):
    """Killed after 6 of 10 documents, the rerun asks for 4: its per-document figures are over those 4, and the
    corpus (all 10 documents) is estimated from them, not from 4 documents' cost spread over 10."""
    import os
    import signal
    import subprocess
    import sys

    url, set_script = endpoint
    first = HoldingScript("score", upto=6)
    set_script(first)
    inputs = [str(write_stage_input(tmp_path / "decont", n=10))]
    out = tmp_path / "score"
    # One document at a time, checkpoint chunks of 2: documents 0-5 fill chunks 0-2, document 6 hangs.
    run = settings(url, records_per_chunk=2, max_concurrent=1, request_timeout_s=60)
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", RESUME_SCRIPT, inputs[0], str(out), run.model_dump_json()], cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    marker = out / "checkpoints" / "last_chunk" / "00000.txt"
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline:
        if marker.exists() and marker.read_text().strip() == "2":
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    first.release.set()
    assert marker.read_text().strip() == "2" and not (out / "summary.json").exists()

    set_script(Script("score"))
    summary = run_task(
        inputs, out, "score", run.model_copy(update={"request_timeout_s": 5.0}), ExecutorConfig()
    )
    assert summary["docs_in"] == 10 and summary["docs_out"] == 10 and is_balanced(summary)
    report = json.loads((out / "throughput.json").read_text())
    # The scripted endpoint: 100 prompt and 20 completion tokens per request, one request per document.
    assert report["requests"] == 4 and report["docs_generated"] == 4 and report["tokens_in"] == 400
    assert report["tokens_in_per_request"] == 100 and report["corpus_docs"] == 10
    assert report["corpus_tokens_in"] == 1000 and report["corpus_tokens_out"] == 200
    hours = 10 / 4 * report["generation_seconds"] / 3600
    assert report["corpus_hours_this_setup"] == pytest.approx(hours, abs=1e-3)
    assert "resumed" in report["note"] and summary["gpu_hours_estimate"] == report["gpu_hours_estimate"]
    # --corpus-docs scales the same per-document measurements.
    from curate.rewrite.report import inference_stats, throughput_report

    stats = inference_stats(str(out / "logs" / "generate"))
    scaled = throughput_report(stats, 1.0, 10, "endpoint", 1, 1000, 2500.0)
    assert scaled["corpus_tokens_in"] == 100_000 and scaled["corpus_tokens_out"] == 20_000


class VotingScript(Script):
    """Three samples per document: DOC-0 answers 1, 1, 2 (majority 2/3); DOC-1 answers 1, 2, 3 (no majority)."""

    def respond(self, prompt: str) -> tuple[int, bytes, float]:
        i = int(prompt.split("DOC-")[1].split()[0].strip(".,"))
        with self.lock:
            self.calls[i] = n = self.calls.get(i, 0) + 1
        answer = [1, 1, 2][n - 1] if i == 0 else n
        return 200, _completion(QA.format(a=i, b=answer - i, c=answer)), 0.0


def test_self_consistency_over_samples(tmp_path, endpoint):
    url, set_script = endpoint
    set_script(VotingScript("qa"))
    inputs = [str(write_stage_input(tmp_path / "decont", n=2))]
    summary = run_task(
        inputs, tmp_path / "qa", "qa", settings(url, samples=3, max_concurrent=1), ExecutorConfig()
    )
    assert summary["docs_out"] == 1 and summary["dropped"] == {"self_consistency": 1}
    (row,) = read_rows(tmp_path / "qa" / "data")
    assert row["source_id"] == "web-0" and row["answer"] == "1" and row["rollouts"] == 3
    assert row["agreement"] == pytest.approx(2 / 3, abs=1e-3)


def test_unreadable_input_rows_are_counted_not_lost(tmp_path, endpoint):
    url, set_script = endpoint
    set_script(Script("qa"))
    docs = tmp_path / "in" / "docs.jsonl"
    docs.parent.mkdir()
    good = [
        {"id": f"web-{i}", "text": f"DOC-{i} Worked example: {i} + {i + 1} = {2 * i + 1}."} for i in (0, 1)
    ]
    docs.write_text(
        "\n".join([json.dumps(good[0]), "{broken", json.dumps({"id": "e", "text": ""}), json.dumps(good[1])])
    )
    summary = run_task([str(docs)], tmp_path / "qa", "qa", settings(url), ExecutorConfig(tasks=1))
    assert summary["docs_in"] == 4 and summary["docs_out"] == 2 and is_balanced(summary)
    assert summary["dropped"] == {"bad_record": 1, "empty_text": 1}


class FailingScript(Script):
    """qa answers, except: document 1 gets HTTP 500 and document 2 a connection closed without reply."""

    def respond(self, prompt: str) -> tuple[int | None, bytes, float]:
        if "DOC-" not in prompt:
            return super().respond(prompt)
        i = int(prompt.split("DOC-")[1].split()[0].strip(".,"))
        with self.lock:
            self.calls[i] = self.calls.get(i, 0) + 1
        if self.broken and i == 1:
            return 500, b'{"error": "internal"}', 0.0
        if self.broken and i == 2:
            return None, b"", 0.0
        return 200, _completion(qa_answer(i)), 0.0


def test_failed_requests_are_not_finished_and_a_rerun_retries_them(tmp_path, endpoint):
    """A 500 or a dropped connection fails that document only (not the run); it is not saved as done: the run
    exits non-zero naming the count, and a rerun requests those documents again, and only those."""
    from typer.testing import CliRunner

    from mathmix.cli import app

    url, set_script = endpoint
    script = FailingScript("qa")
    set_script(script)
    inputs = str(write_stage_input(tmp_path / "decont", n=4) / "data")
    out = tmp_path / "qa"
    args = ["rewrite", inputs, "-o", str(out), "--task", "qa", "--model", "m", "--server", "endpoint",
            "--endpoint", url, "--retries", "1", "--request-timeout", "5"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    output = " ".join(result.output.split())
    assert result.exit_code == 1, output
    assert "2 document(s) failed their requests" in output and "rerun" in output and "Traceback" not in output
    assert script.calls == {0: 1, 1: 2, 2: 2, 3: 1}
    assert not (out / "summary.json").exists()
    script.broken = False
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert script.calls == {0: 1, 1: 3, 2: 3, 3: 1}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["docs_out"] == 4 and summary["dropped"] == {} and is_balanced(summary)
    # A rerun after success sends nothing.
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and script.calls == {0: 1, 1: 3, 2: 3, 3: 1}


def test_an_endpoint_dead_after_the_readiness_check_fails_fast(tmp_path, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from datatrove.pipeline.inference.servers.endpoint_server import EndpointServer

    async def ready(self) -> bool:  # the endpoint answered the readiness checks, then died
        return True

    monkeypatch.setattr("curate.rewrite.job.wait_for_endpoint", lambda url, timeout: None)
    monkeypatch.setattr(EndpointServer, "is_ready", ready)
    inputs = [str(write_stage_input(tmp_path / "decont", n=3))]
    run = settings(f"http://127.0.0.1:{port}", max_attempts=1)
    for _ in range(2):  # no server there: not the documents' failure, so not counted against --max-attempts
        start = time.time()
        with pytest.raises(RequestsFailedError, match=r"3 document\(s\) failed .*connection failed"):
            run_task(inputs, tmp_path / "qa", "qa", run, ExecutorConfig(tasks=1))
        assert time.time() - start < 30  # not datatrove's 5 min of connection retries per request
    assert not list((tmp_path / "qa" / "raw").glob("*"))


def test_output_inside_an_input_folder_is_refused_before_anything_is_written(tmp_path, endpoint):
    url, set_script = endpoint
    set_script(Script("qa"))
    data = write_stage_input(tmp_path / "decont", n=2) / "data"
    for out in (data, data / "qa"):
        with pytest.raises(ValueError, match="input"):
            run_task([str(data)], out, "qa", settings(url), ExecutorConfig(tasks=1))
        assert sorted(p.name for p in data.iterdir()) == ["00000.parquet"]


def test_a_folder_of_parquet_and_jsonl_files_reads_both(tmp_path, endpoint):
    """Only the Parquet files of a mixed folder were read: the JSONL files' documents were lost without a word."""
    url, set_script = endpoint
    set_script(Script("score"))
    folder = tmp_path / "in"
    folder.mkdir()
    rows = [{"id": f"web-{i}", "text": f"DOC-{i} Worked example: {i} + 1 = {i + 1}."} for i in range(5)]
    pq.write_table(pa.Table.from_pylist(rows[:2]), folder / "a.parquet")
    (folder / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[2:]))
    summary = run_task([str(folder)], tmp_path / "score", "score", settings(url), ExecutorConfig(tasks=1))
    assert summary["docs_in"] == 5 and summary["docs_out"] == 5 and is_balanced(summary)
    assert sorted(r["source_id"] for r in read_rows(tmp_path / "score" / "data")) == [r["id"] for r in rows]


def test_an_input_folder_without_input_files_is_one_line_before_anything_is_written(tmp_path, endpoint):
    """It was a datatrove traceback mid-run, after OUT held a job and checkpoints that refused the rerun once the
    files were there."""
    from typer.testing import CliRunner

    from mathmix.cli import app

    url, set_script = endpoint
    set_script(Script("score"))
    empty, other = tmp_path / "empty", tmp_path / "other"
    empty.mkdir()
    other.mkdir()
    (other / "notes.txt").write_text("not documents\n")
    out = tmp_path / "o"
    for folder in (empty, other):
        result = CliRunner().invoke(app, ["rewrite", str(folder), "-o", str(out), "--task", "score", "--model",
                                          "m", "--server", "endpoint", "--endpoint", url])  # fmt: skip
        output = "".join(result.output.split("\n"))
        assert result.exit_code == 2 and f"{folder}: no input files in this folder" in output, output
        assert "Traceback" not in output and "rerun" not in output and not out.exists()
    (empty / "docs.jsonl").write_text(json.dumps({"id": "web-1", "text": "DOC-1 Worked example."}) + "\n")
    result = CliRunner().invoke(app, ["rewrite", str(empty), "-o", str(out), "--task", "score", "--model", "m",
                                      "--server", "endpoint", "--endpoint", url])  # fmt: skip
    assert result.exit_code == 0 and json.loads((out / "summary.json").read_text())["docs_out"] == 1


def test_duplicate_input_ids_are_counted_and_dropped(tmp_path, endpoint, capfd):
    """Two documents under one id both went on: two output rows with one id (and a resumed chunk, which skips
    by id, redid one of them). The first is kept, the others are dropped as duplicate_id, with one warning."""
    url, set_script = endpoint
    script = Script("qa")
    script.broken = False
    set_script(script)
    folder = tmp_path / "in"
    folder.mkdir()
    docs = [("web-0", 0), ("web-1", 1), ("web-1", 2), ("web-3", 3), ("web-0", 10), ("web-5", 11)]
    rows = [{"id": doc_id, "text": f"DOC-{i} Worked example: {i} + 1 = {i + 1}."} for doc_id, i in docs]
    pq.write_table(pa.Table.from_pylist(rows[:4]), folder / "a.parquet")
    pq.write_table(pa.Table.from_pylist(rows[4:]), folder / "b.parquet")  # web-0 again, in another file
    for tasks in (1, 2):  # two generation tasks: one file each, so one duplicate is read by another task
        out = tmp_path / f"qa{tasks}"
        summary = run_task([str(folder)], out, "qa", settings(url, inference_tasks=tasks), ExecutorConfig())
        assert summary["docs_in"] == 6 and summary["docs_out"] == 4 and is_balanced(summary), summary
        assert summary["dropped"] == {"duplicate_id": 2}
        kept = {r["source_id"]: r["question"] for r in read_rows(out / "data")}
        assert kept == {"web-0": "What is $0 + 1$?", "web-1": "What is $1 + 2$?", "web-3": "What is $3 + 4$?",
                        "web-5": "What is $11 + 12$?"}  # fmt: skip
        rejects = read_rows(out / "rejects")
        assert sorted((r["id"], r["source_id"], r["reason"]) for r in rejects) == [
            ("web-0/qa", "web-0", "duplicate_id"), ("web-1/qa", "web-1", "duplicate_id")]  # fmt: skip
        assert capfd.readouterr().err.count("2 input document(s) had an id read before") == 1
    # Read by the same task, a duplicate is not even requested; read by another task (web-0 in two tasks), it is.
    assert 2 not in script.calls and script.calls[10] == 1


def test_a_document_failing_in_max_attempts_runs_is_dropped_as_request_failed(tmp_path, endpoint):
    """A document whose requests always fail made every rerun exit 1, forever. After --max-attempts runs that
    failed it, it is dropped as request_failed (a rejects/ row) and the run finishes."""
    from typer.testing import CliRunner

    from mathmix.cli import app

    url, set_script = endpoint
    script = FailingScript("qa")  # documents 1 (HTTP 500) and 2 (connection closed) fail on every request
    set_script(script)
    inputs = str(write_stage_input(tmp_path / "decont", n=4) / "data")
    out = tmp_path / "qa"
    args = ["rewrite", inputs, "-o", str(out), "--task", "qa", "--model", "m", "--server", "endpoint",
            "--endpoint", url, "--retries", "0", "--request-timeout", "5", "--max-attempts", "2"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    output = " ".join(result.output.split())
    assert (
        result.exit_code == 1
        and "2 document(s) failed their requests" in output
        and "--max-attempts" in output
    )
    assert script.calls == {0: 1, 1: 1, 2: 1, 3: 1} and not (out / "summary.json").exists()
    result = CliRunner().invoke(app, args)  # their second failed run: dropped
    assert result.exit_code == 0, result.output
    assert script.calls == {0: 1, 1: 2, 2: 2, 3: 1}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["docs_out"] == 2 and summary["dropped"] == {"request_failed": 2} and is_balanced(summary)
    rejects = {r["source_id"]: r["reason"] for r in read_rows(out / "rejects")}
    assert rejects == {"web-1": "request_failed", "web-2": "request_failed"}
    result = CliRunner().invoke(app, args)  # done: nothing is requested again
    assert result.exit_code == 0 and script.calls == {0: 1, 1: 2, 2: 2, 3: 1}


class DownScript(Script):
    """Every request fails the same way, the test request too: the endpoint is wrong or failing, not a document."""

    def __init__(self, status: int, delay: float = 0.0):
        super().__init__("qa")
        self.status, self.delay, self.tests = status, delay, 0

    def respond(self, prompt: str) -> tuple[int, bytes, float]:
        if "DOC-" not in prompt:
            self.tests += 1
        elif not self.broken:
            return super().respond(prompt)
        else:
            i = int(prompt.split("DOC-")[1].split()[0].strip(".,"))
            with self.lock:
                self.calls[i] = self.calls.get(i, 0) + 1
        if self.status == 200:  # answers, too late
            return 200, _completion(qa_answer(0)), self.delay
        return self.status, b'{"error": "down"}', self.delay


@pytest.mark.parametrize(
    ("status", "delay", "why"),
    [(404, 0.0, "check --model, the name the endpoint serves"), (401, 0.0, "API key"), (429, 0.0, "rate limit"),
     (500, 0.0, "failed a test request too"), (503, 0.0, "failed a test request too"),
     (200, 2.0, "--request-timeout is too short")],
)  # fmt: skip
def test_an_endpoint_failing_every_request_drops_no_document(tmp_path, endpoint, status, delay, why):
    """An endpoint answering 404 for a wrong --model (its GET /v1/models check passes), 401, 429, 500, 503 or
    timing out, failed every document's requests, which counted against --max-attempts: three reruns dropped the
    whole corpus as request_failed with exit 0. The server's failure is not the documents': however many runs,
    nothing is dropped, every run says why, and once the endpoint works every document is done."""
    from typer.testing import CliRunner

    from mathmix.cli import app

    url, set_script = endpoint
    script = DownScript(status, delay)
    set_script(script)
    inputs = str(write_stage_input(tmp_path / "decont", n=3) / "data")
    out = tmp_path / "qa"
    args = ["rewrite", inputs, "-o", str(out), "--task", "qa", "--model", "m", "--server", "endpoint",
            "--endpoint", url, "--retries", "0", "--request-timeout", "0.5", "--max-attempts", "2"]  # fmt: skip
    for run in range(3):  # --max-attempts + 1 runs
        result = CliRunner().invoke(app, args)
        output = " ".join(result.output.split())
        assert result.exit_code == 1, (run, output)
        assert "3 document(s) failed their requests" in output, output
        assert "not counted against --max-attempts" in output and why in output and "Traceback" not in output
        assert not (out / "summary.json").exists() and not list((out / "raw").glob("*"))
    assert script.calls == {0: 3, 1: 3, 2: 3}  # one request per document and run: --retries 0, or futile
    # the test request: sent only when a failure may be the document's
    assert script.tests == (3 if status in (500, 503) else 0)
    script.broken = False  # the endpoint works again: every document is done, none was given up
    # a timeout a loaded CI machine keeps (0.5 s failed 2 of 3 answers there); an operational setting, same job
    healthy = [
        *args[: args.index("--request-timeout") + 1],
        "30",
        *args[args.index("--request-timeout") + 2 :],
    ]
    result = CliRunner().invoke(app, healthy)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["docs_out"] == 3 and summary["dropped"] == {} and is_balanced(summary)


def test_a_remote_endpoints_500_counts_against_the_document(tmp_path, endpoint, monkeypatch):
    """A remote endpoint goes through the OpenAI client, whose 5xx datatrove re-raises as a ConnectionError (as
    for no server there): a document always answered 500 was never counted, and every rerun exited 1. The client's
    error (the cause) holds the status: a 500 counts as a local one does, and a 400 is final as a local one is."""
    from datatrove.pipeline.inference.servers.endpoint_server import EndpointServer

    url, set_script = endpoint
    set_script(Script("score"))

    class InternalServerError(Exception):  # as openai's errors: the status on the exception
        status_code = 500

    class BadRequestError(Exception):
        status_code = 400

    make_request = EndpointServer._make_request

    async def remote(self, payload: dict) -> dict:  # what EndpointServer does with the client's 5xx and 400
        from datatrove.pipeline.inference.types import InferenceError

        prompt = payload["messages"][0]["content"]
        try:
            if "DOC-1 " in prompt:
                raise InternalServerError("Error code: 500 - {'error': 'internal'}")
            if "DOC-2 " in prompt:
                raise BadRequestError("Error code: 400 - {'error': 'prompt too long'}")
        except InternalServerError as err:
            raise ConnectionError(str(err)) from err
        except BadRequestError as err:
            raise InferenceError(None, str(err)) from err
        return await make_request(self, payload)

    monkeypatch.setattr(EndpointServer, "_make_request", remote)
    inputs = [str(write_stage_input(tmp_path / "decont", n=3))]
    run = settings(url, retries=0, max_attempts=2)
    with pytest.raises(RequestsFailedError, match=r"1 document\(s\) failed .*server error: HTTP 500"):
        run_task(inputs, tmp_path / "score", "score", run, ExecutorConfig(tasks=1))
    summary = run_task(inputs, tmp_path / "score", "score", run, ExecutorConfig(tasks=1))
    assert summary["docs_out"] == 1 and is_balanced(summary)
    assert summary["dropped"] == {"request_failed": 1, "bad_request": 1}  # a 400 is final, as a local one is
