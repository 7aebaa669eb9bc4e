"""vLLM and SGLang servers through the rewrite job (GPU only: skipped where there is no CUDA or no server)."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from curate.rewrite.job import RewriteSettings, run_task
from curate.rewrite.tiny_model import build_tiny_llama
from curate.summary import is_balanced
from pipelines.executors import ExecutorConfig

TEXTS = [f"Example {i}: $x + {i} = {2 * i}$ so $x = {i}$; the answer is \\boxed{{{i}}}." for i in range(30)]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("server", ["vllm", "sglang"])
def test_gpu_server_end_to_end(tmp_path, server):
    if importlib.util.find_spec(server) is None:
        pytest.skip(f"{server} is not installed")
    # head_dim 64: the attention kernels of both servers support it
    model = build_tiny_llama(tmp_path / "model", TEXTS, vocab_size=512, hidden_size=256, max_positions=4096)
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS[:8])))
    settings = RewriteSettings(
        model=str(model), server=server, max_tokens=16, temperature=0.0, model_max_context=2048,
        server_ready_timeout_s=600,
    )  # fmt: skip
    out = tmp_path / server
    summary = run_task([str(docs)], out, "qa", settings, ExecutorConfig(tasks=1))
    assert summary["docs_in"] == 8 and is_balanced(summary) and "unaccounted" not in summary
    report = json.loads((out / "throughput.json").read_text())
    assert report["requests"] == 8 and report["tokens_out"] > 0
    assert report["gpu_hours_basis"].startswith("measured")
