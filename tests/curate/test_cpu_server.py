"""The CPU server (curate/cpu_server.py) over a tiny random Llama: real HTTP, through datatrove's InferenceRunner,
and a run killed mid-way then resumed.

The model is built here: a 2-layer LlamaConfig with random weights and a BPE tokenizer trained with `tokenizers`
on a few texts, saved as a Hugging Face folder with a chat template. Its outputs are random, so every one is
rejected by validation: these tests check the plumbing (requests, usage, provenance, counting, resume).
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from curate.rewrite.job import CPU_SERVER, RewriteSettings, run_task
from curate.rewrite.report import inference_stats
from curate.rewrite.tiny_model import build_tiny_llama
from curate.summary import is_balanced
from pipelines.executors import ExecutorConfig

REPO = Path(__file__).resolve().parents[2]
TEXTS = [
    f"Example {i}: to solve $x + {i} = {2 * i}$ subtract {i} from both sides, so $x = {i}$. "
    f"Question: what is {i} + {i}? Solution: it is \\boxed{{{2 * i}}}."
    for i in range(40)
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "tiny-llama"
    build_tiny_llama(path, TEXTS, vocab_size=400, hidden_size=32, max_positions=4096)
    config = json.loads((path / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and config["model_type"] == "llama"
    assert (
        "chat_template" in (path / "tokenizer_config.json").read_text()
        or (path / "chat_template.jinja").exists()
    )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_docs(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"doc-{i}", "text": TEXTS[i]}) + "\n" for i in range(n)))
    return path


def cpu_settings(**kw) -> RewriteSettings:
    base = dict(model="", max_tokens=8, temperature=0.0, cpu_threads=1, max_concurrent=2, languages=["en"])
    return RewriteSettings(**{**base, **kw})


def test_http_api(tiny_model):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            CPU_SERVER,
            "--port",
            str(port),
            f"--model={tiny_model}",
            "--threads=1",
            "--max-context=512",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                if httpx.get(f"{base}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.25)
        chat = {
            "messages": [{"role": "user", "content": "What is 2 + 2?"}],
            "max_tokens": 5,
            "temperature": 0,
        }
        first = httpx.post(f"{base}/v1/chat/completions", json=chat, timeout=60).json()
        second = httpx.post(f"{base}/v1/chat/completions", json=chat, timeout=60).json()
        assert (
            first["choices"][0]["message"]["content"] == second["choices"][0]["message"]["content"]
        )  # greedy
        usage = first["usage"]
        assert usage["prompt_tokens"] > 5 and 1 <= usage["completion_tokens"] <= 5
        assert first["choices"][0]["finish_reason"] in ("stop", "length")
        text = httpx.post(
            f"{base}/v1/completions", json={"prompt": "Example 3:", "max_tokens": 4}, timeout=60
        )
        assert text.status_code == 200 and isinstance(text.json()["choices"][0]["text"], str)
        bad = httpx.post(f"{base}/v1/chat/completions", content=b"{not json", timeout=60)
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "BadRequestError"
        too_long = httpx.post(f"{base}/v1/chat/completions", json={**chat, "max_tokens": 10_000}, timeout=60)
        assert too_long.status_code == 400 and "exceeds the context" in too_long.json()["error"]["message"]
        assert httpx.post(f"{base}/v1/nothing", json={}, timeout=60).status_code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_through_inference_runner(tmp_path, tiny_model):
    docs = write_docs(tmp_path / "docs.jsonl", 4)
    out = tmp_path / "qa"
    summary = run_task([str(docs)], out, "qa", cpu_settings(model=str(tiny_model)), ExecutorConfig(tasks=1))
    assert summary["docs_in"] == 4 and is_balanced(summary) and "unaccounted" not in summary
    assert summary["docs_out"] == 0  # a random model never writes a valid QA pair
    raw = [json.loads(line) for f in (out / "raw").glob("*.jsonl.gz") for line in gzip.open(f, "rt")]
    assert sorted(r["id"] for r in raw) == [f"doc-{i}" for i in range(4)]
    result = raw[0]["metadata"]["rollout_results"][0]
    assert result["usage"]["completion_tokens"] >= 1 and result["finish_reason"] in ("stop", "length")
    rejects = pq.read_table(next((out / "rejects").glob("*.parquet"))).to_pylist()
    assert sorted(r["source_id"] for r in rejects) == [f"doc-{i}" for i in range(4)]
    assert all(r["model"] == str(tiny_model) and r["prompt_version"] == "qa.v1" for r in rejects)
    assert sum(summary["dropped"].values()) == 4 and set(summary["dropped"]) <= {
        "truncated",
        "empty",
        "wrong_format",
    }
    schema = pq.read_schema(next((out / "data").glob("*.parquet")))  # an empty file with the branch columns
    assert {"source_id", "task", "prompt_version", "model", "sampling", "question", "answer"} <= set(
        schema.names
    )
    report = json.loads((out / "throughput.json").read_text())
    assert report["requests"] == 4 and report["tokens_out"] >= 4 and report["tokens_in_per_s"] > 0


RESUME_SCRIPT = """
import sys
from pathlib import Path
from curate.rewrite.job import RewriteSettings, run_task
from pipelines.executors import ExecutorConfig
settings = RewriteSettings.model_validate_json(sys.argv[3])
run_task([sys.argv[1]], Path(sys.argv[2]), "qa", settings, ExecutorConfig(tasks=1))
"""


def test_killed_run_resumes_every_output_exactly_once(tmp_path, tiny_model):
    docs = write_docs(tmp_path / "docs.jsonl", 10)
    out = tmp_path / "qa"
    # One request at a time, checkpoint chunks of 2 documents, requests slow enough to kill in the middle.
    settings = cpu_settings(model=str(tiny_model), max_tokens=48, max_concurrent=1, records_per_chunk=2)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", RESUME_SCRIPT, str(docs), str(out), settings.model_dump_json()],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    marker = out / "checkpoints" / "last_chunk" / "00000.txt"
    deadline = time.time() + 240
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its server, mid-way
    proc.wait(timeout=30)
    assert marker.exists(), "the first run never finished a checkpoint chunk"
    assert not (out / "summary.json").exists(), "the first run finished before it could be killed"

    summary = run_task([str(docs)], out, "qa", settings, ExecutorConfig(tasks=1))
    raw_ids = [
        json.loads(line)["id"] for f in (out / "raw").glob("*.jsonl.gz") for line in gzip.open(f, "rt")
    ]
    assert sorted(raw_ids) == sorted(f"doc-{i}" for i in range(10))  # every output, exactly once
    assert summary["docs_in"] == 10 and is_balanced(summary) and "unaccounted" not in summary
    resumed_requests = inference_stats(str(out / "logs" / "generate")).get("successful_requests", 0)
    assert 0 < resumed_requests <= 8  # the finished chunk (2 documents at least) was not asked again
    # The cost report divides this run's requests and tokens by this run's documents, and scales to all 10.
    report = json.loads((out / "throughput.json").read_text())
    assert report["requests"] == resumed_requests and report["docs_generated"] == resumed_requests
    assert report["corpus_docs"] == 10
    assert report["corpus_tokens_in"] == pytest.approx(report["tokens_in"] / resumed_requests * 10, abs=1)


def test_serve_errors_are_one_line(tmp_path, tiny_model):
    from typer.testing import CliRunner

    from mathmix.cli import app

    def serve(*args: str) -> str:
        result = CliRunner().invoke(app, ["rewrite", "serve", *args])
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output, (
            result.output
        )
        return result.output

    assert "model not found: /nonexistent" in serve("--model", "/nonexistent")
    assert "no config.json" in serve("--model", str(tmp_path))
    with socket.socket() as taken:  # a port in use is named before the model is loaded
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        start = time.time()
        output = serve("--model", str(tiny_model), "--port", str(port))
        assert f"cannot listen on 127.0.0.1:{port}" in output and "in use" in output
        assert time.time() - start < 5
    broken = tmp_path / "broken"  # a folder that looks like a model and is not one
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    assert f"cannot load the model {broken}" in serve("--model", str(broken), "--port", str(free_port()))
