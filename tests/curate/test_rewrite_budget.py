"""Completion caps per rewrite task, fitted per request to the model's context. One default of 1024 tokens for
every task cut most refined pages and every long chain of thought, which were then dropped as `truncated`."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from curate.rewrite.budget import model_context, request_max_tokens
from curate.rewrite.job import RewriteSettings


def test_each_task_has_its_own_default_cap_and_a_recipe_may_set_one_per_task():
    defaults = RewriteSettings()
    assert {t: defaults.sampling(t)["max_tokens"] for t in ("score", "qa", "refine", "longcot")} == {
        "score": 512, "qa": 2048, "refine": 4096, "longcot": 16384,
    }  # fmt: skip
    per_task = RewriteSettings(max_tokens={"longcot": 8000})
    assert (
        per_task.sampling("longcot")["max_tokens"] == 8000 and per_task.sampling("qa")["max_tokens"] == 2048
    )
    assert RewriteSettings(max_tokens=300).sampling("refine")["max_tokens"] == 300
    with pytest.raises(ValidationError, match="no task 'summarize'"):
        RewriteSettings(max_tokens={"summarize": 100})
    with pytest.raises(ValidationError, match="positive number of tokens"):
        RewriteSettings(max_tokens={"qa": 0})


def test_the_context_is_the_models_own_up_to_32k(tmp_path):
    def model(positions: int):
        folder = tmp_path / f"m{positions}"
        folder.mkdir(exist_ok=True)
        (folder / "config.json").write_text(json.dumps({"max_position_embeddings": positions}))
        return str(folder)

    assert model_context(RewriteSettings(model=model(4096))) == 4096  # Qwen2.5-Math: 4k
    assert model_context(RewriteSettings(model=model(131072))) == 32768  # Llama 3.1: served with 32k
    assert model_context(RewriteSettings(model=model(131072), model_max_context=65536)) == 65536
    assert model_context(RewriteSettings(model="auto")) == 8192
    assert model_context(RewriteSettings(model="org/not-in-the-cache")) == 8192
    endpoint = RewriteSettings(model="served", server="endpoint", endpoint="http://127.0.0.1:9")
    assert model_context(endpoint) is None  # the endpoint's own: nothing is lowered


def test_a_request_gets_what_its_prompt_leaves_of_the_context():
    short = [{"role": "user", "content": "x" * 300}]
    long = [{"role": "user", "content": "x" * 15_000}]
    assert request_max_tokens(4096, 32768, long) == 4096
    assert request_max_tokens(4096, 8192, short) == 4096
    assert request_max_tokens(4096, 8192, long) == 8192 - (5000 + 64)  # 3 characters a token, estimated high
    assert request_max_tokens(4096, None, long) == 4096
    assert request_max_tokens(4096, 2000, long) == 1  # the prompt alone fills it: the server's to refuse


def test_the_rollout_sends_each_document_its_own_cap():
    from datatrove.pipeline.inference.types import InferenceResult

    from curate.rewrite.rollout import rewrite_rollout

    sent = []

    async def generate(payload):
        sent.append(payload["max_tokens"])
        return InferenceResult(text="Refined.", finish_reason="stop", usage={}, reasoning=None)

    settings = RewriteSettings(model_max_context=8192)
    for text in ("A short page about $x^2$.", "A long page. " * 900):  # ~11,700 characters
        doc = SimpleNamespace(id="d", text=text, metadata={})
        asyncio.run(rewrite_rollout(doc, generate, task="refine", prompt_version="v1",
                                    sampling=settings.sampling("refine"), context=8192))  # fmt: skip
    assert sent[0] == 4096 and 3000 < sent[1] < 4096


def test_a_job_recorded_with_the_old_single_default_is_another_job(tmp_path):
    """Its record had no max_tokens (1024 was the default, left out): resumed under the new default, its outputs
    would mix two caps. The refusal names the setting."""
    from curate.rewrite.identity import check_out_dir, rewrite_identity

    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "text": "Worked example: $x + 1 = 2$."}) + "\n")
    inputs, out = [str(tmp_path / "in.jsonl")], tmp_path / "refine"
    identity, earlier = rewrite_identity(inputs, RewriteSettings(), "refine", tmp_path, out)
    assert identity["settings"]["max_tokens"] == 4096
    old = {**identity, "settings": {k: v for k, v in identity["settings"].items() if k != "max_tokens"}}
    out.mkdir()
    (out / "job.json").write_text(json.dumps(old))
    (out / "raw").mkdir()  # work to resume
    (out / "raw" / "00000_chunk_0.jsonl.gz").write_bytes(b"")
    with pytest.raises(
        ValueError, match=r"another job than this rewrite \(settings.max_tokens: \(default\) -> 4096"
    ) as refused:
        check_out_dir(out, identity, earlier, tmp_path)
    assert "--max-tokens 1024 (max_tokens: 1024) resumes it as it was" in str(refused.value)
    as_it_was = RewriteSettings(max_tokens=1024)
    check_out_dir(out, *rewrite_identity(inputs, as_it_was, "refine", tmp_path, out), tmp_path)  # resumes
    assert json.loads((out / "job.json").read_text())["settings"]["max_tokens"] == 1024  # rewritten in full


def test_a_record_from_before_resumes_when_its_former_defaults_are_set(tmp_path):
    """max_tokens 1024 and model_max_context 8192 were the defaults, left out of records: set to them, a job or a
    recipe stage is the one such a record describes. Set in the recipe, the stage record now held them, and an
    unfinished stage of an earlier mathmix could resume neither way."""
    from curate.rewrite.identity import check_out_dir, rewrite_identity
    from pipelines.rewrite import Config
    from pipelines.runner import earlier_stage_identities, stage_identity

    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "text": "Worked example: $x + 1 = 2$."}) + "\n")
    inputs, out = [str(tmp_path / "in.jsonl")], tmp_path / "qa"
    then = RewriteSettings(max_tokens=1024, model_max_context=8192)
    identity, earlier = rewrite_identity(inputs, then, "qa", tmp_path, out)
    old = {**identity, "settings": {k: v for k, v in identity["settings"].items()
                                    if k not in ("max_tokens", "model_max_context")}}  # fmt: skip
    out.mkdir()
    (out / "job.json").write_text(json.dumps(old))
    (out / "raw").mkdir()
    (out / "raw" / "00000_chunk_0.jsonl.gz").write_bytes(b"")
    check_out_dir(out, identity, earlier, tmp_path)  # refused before: "model_max_context: (default) -> 8192"

    config = Config.model_validate({"inputs": inputs, "max_tokens": 1024, "model_max_context": 8192})
    stage, _ = stage_identity("rewrite", config, inputs, tmp_path)
    assert stage["settings"]["max_tokens"] == 1024
    forms = earlier_stage_identities("rewrite", inputs, tmp_path, stage, config)
    recorded_then = {
        k: v for k, v in stage["settings"].items() if k not in ("max_tokens", "model_max_context")
    }
    assert {**stage, "settings": recorded_then} in forms
