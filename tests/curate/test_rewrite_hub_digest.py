"""A rewrite model given as a hub name is recorded by the snapshot it resolves to in the local Hugging Face cache.

A local folder's weights were digested in job.json, a hub name's were not: another revision downloaded into the
cache (refs/main moved) resumed the old job's output silently. The cache here is a fake one in tmp_path, in the
layout huggingface_hub writes (models--ORG--NAME/{refs/main, blobs/SHA, snapshots/COMMIT/FILE -> blob}); nothing
is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from curate.rewrite.identity import rewrite_identity
from curate.rewrite.job import RewriteSettings
from pipelines.job_record import check_job
from tests.curate.fake_endpoint import JsonHandler, serve

REPO = "mathmix-test/tiny-rewriter"
FIRST, SECOND = "1" * 40, "2" * 40  # commits
REPO_ROOT = Path(__file__).resolve().parents[2]


def add_snapshot(cache: Path, commit: str, weights: bytes, repo: str = REPO) -> Path:
    """Snapshot COMMIT of REPO in CACHE, as huggingface_hub lays it out, with refs/main pointing at it."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name, data in {"config.json": b'{"model_type": "llama"}', "model.safetensors": weights}.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    point_main(cache, commit, repo)
    return snapshot


def point_main(cache: Path, commit: str, repo: str = REPO) -> None:
    refs = cache / f"models--{repo.replace('/', '--')}" / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    (refs / "main").write_text(commit)  # no newline, as huggingface_hub writes it


@pytest.fixture
def hf_cache(tmp_path, monkeypatch) -> Path:
    """An HF cache in tmp_path named by HF_HUB_CACHE. huggingface_hub reads the variable when it is imported (so a
    command does), long before a test runs: its constant is pointed there too (the variable alone: below)."""
    import huggingface_hub.constants

    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


@pytest.fixture
def job(tmp_path):
    """check(settings): what run_task checks before anything starts (rewrite_identity, then check_job)."""
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "text": "Worked example: $x + 1 = 2$."}) + "\n")
    inputs, out = [str(tmp_path / "in.jsonl")], tmp_path / "qa"

    def check(settings: RewriteSettings) -> bool:
        identity, earlier = rewrite_identity(inputs, settings, "qa", tmp_path, out)
        return check_job(out, identity, "rewrite", earlier=earlier)

    check.out = out  # type: ignore[attr-defined]
    check.identity = lambda s: rewrite_identity(inputs, s, "qa", tmp_path, out)[0]  # type: ignore[attr-defined]
    return check


def record(out: Path) -> dict:
    return json.loads((out / "job.json").read_text())


def test_a_cached_hub_name_is_recorded_by_its_snapshot_commit(hf_cache, job):
    from curate.rewrite.identity import weights_note  # (what summary.json says)

    add_snapshot(hf_cache, FIRST, b"\0" * 64)
    settings = RewriteSettings(model=REPO)
    identity = job.identity(settings)
    assert identity["model_digest"] == FIRST and identity["settings"]["model"] == REPO
    assert weights_note(settings, identity) == {"model_digest": FIRST}
    assert job(settings) is False and record(job.out)["model_digest"] == FIRST


def test_a_new_snapshot_of_the_same_name_is_another_job(hf_cache, job):
    """As for other weights in the same local folder: refused once the folder holds work, named as such."""
    add_snapshot(hf_cache, FIRST, b"\0" * 64)
    settings = RewriteSettings(model=REPO, max_tokens=4)
    assert job(settings) is False  # recorded
    (job.out / "checkpoints" / "last_chunk").mkdir(parents=True)  # work to resume
    (job.out / "checkpoints" / "last_chunk" / "00000.txt").write_text("0")
    assert job(settings) is True  # the same snapshot: resumes
    add_snapshot(hf_cache, SECOND, b"\1" * 64)  # a new revision downloaded: refs/main moved to it
    with pytest.raises(ValueError, match=r"another job than this rewrite \(the model's weights changed"):
        job(settings)
    assert record(job.out)["model_digest"] == FIRST  # the refused run wrote nothing
    point_main(hf_cache, FIRST)  # back to the snapshot the work was done with: resumes
    assert job(settings) is True


def test_a_record_from_before_hub_snapshots_were_kept_is_this_job(hf_cache, job):
    """job.json of a finished hub-name job written before the snapshot was recorded: a rerun resumes it (rewritten
    with the snapshot found now: which one made the old output is not known), then is held to that snapshot."""
    add_snapshot(hf_cache, FIRST, b"\0" * 64)
    settings = RewriteSettings(model=REPO)
    old = {k: v for k, v in job.identity(settings).items() if k != "model_digest"}
    job.out.mkdir()
    (job.out / "job.json").write_text(json.dumps(old))
    (job.out / "summary.json").write_text("{}")  # finished work
    assert job(settings) is False  # not refused; rewritten in today's form
    assert record(job.out) == {**old, "model_digest": FIRST}
    add_snapshot(hf_cache, SECOND, b"\1" * 64)
    with pytest.raises(ValueError, match=r"the model's weights changed"):
        job(settings)
    # anything else that differs is still named, not hidden behind the missing field
    (job.out / "job.json").write_text(json.dumps(old))
    with pytest.raises(ValueError, match=r"settings.max_tokens: 2048 -> 8"):  # qa's default cap -> 8
        job(settings.model_copy(update={"max_tokens": 8}))


@pytest.mark.parametrize("variable", ["HF_HUB_CACHE", "HF_HOME"])
def test_the_cache_is_found_where_the_environment_puts_it(tmp_path, variable):
    """In a fresh process (as `mathmix rewrite` runs), HF_HUB_CACHE or HF_HOME alone points the lookup there."""
    home = tmp_path / "hf"
    add_snapshot(home / "hub", FIRST, b"\0" * 64)
    env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE")
    }
    env[variable] = str(home / "hub" if variable == "HF_HUB_CACHE" else home)
    code = (
        "from curate.rewrite.identity import model_digest; from curate.rewrite.job import RewriteSettings; "
        f"print(model_digest(RewriteSettings(model={REPO!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == FIRST


def test_a_name_not_in_the_cache_is_recorded_by_name_and_said_not_digested(hf_cache, job):
    """A name the server fetches (not cached here) still makes a job, by its name only, and says so."""
    from curate.rewrite.identity import weights_note  # (what summary.json says)

    add_snapshot(hf_cache, FIRST, b"\0" * 64)  # another name is cached; this one is not
    settings = RewriteSettings(model="mathmix-test/not-cached")
    identity = job.identity(settings)
    assert "model_digest" not in identity and identity["settings"]["model"] == "mathmix-test/not-cached"
    note = weights_note(settings, identity)
    assert (
        list(note) == ["model_not_digested"]
        and "nor in the local Hugging Face cache" in note["model_not_digested"]
    )
    assert job(settings) is False and "model_digest" not in record(job.out)


@pytest.fixture
def endpoint():
    """An OpenAI-compatible endpoint on 127.0.0.1 that scores every document 3."""
    answer = json.dumps({
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content":
                     "The page works through an addition step by step, clear for school.\nFinal score: 3"}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
    }).encode()  # fmt: skip

    class Handler(JsonHandler):
        def do_GET(self):  # noqa: N802
            self._send(200, b'{"object": "list", "data": [{"id": "served"}]}')

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self._send(200, answer)

    with serve(Handler) as url:
        yield url


def test_a_job_through_an_endpoint_says_its_weights_were_not_digested(hf_cache, tmp_path, endpoint):
    """The name an endpoint serves is recorded as a name (even one cached here: the endpoint's weights are its
    own); the job runs, and summary.json says the weights were not digested, and why."""
    from curate.rewrite.job import run_task
    from pipelines.executors import ExecutorConfig

    add_snapshot(hf_cache, FIRST, b"\0" * 64)
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"id": f"d{i}", "text": f"Worked example: {i} + 1 = {i + 1}."}) + "\n"
                              for i in range(3)))  # fmt: skip
    out = tmp_path / "score"
    settings = RewriteSettings(model=REPO, server="endpoint", endpoint=endpoint, max_tokens=32,
                               server_ready_timeout_s=5, request_timeout_s=5)  # fmt: skip
    summary = run_task([str(inputs)], out, "score", settings, ExecutorConfig(tasks=1))
    assert summary["docs_out"] == 3 and "model_digest" not in summary
    assert summary["model_not_digested"].startswith(f"served by the endpoint {endpoint}")
    assert (
        json.loads((out / "summary.json").read_text())["model_not_digested"] == summary["model_not_digested"]
    )
    assert "model_digest" not in record(out) and record(out)["settings"]["model"] == REPO


def test_the_recipe_rewrite_stage_records_a_cached_hub_model_by_its_snapshot(tmp_path, hf_cache):
    """The recipe's rewrite stage (recipe-stage.json) digested a local model folder only: with a hub name, another
    revision cached left the finished stage "already complete" with the old revision's output."""
    from pipelines.rewrite import Config
    from pipelines.runner import _check_stage_job, _digests_of_files_read, stage_identity

    add_snapshot(hf_cache, FIRST, b"\0" * 64)
    stage = Config(model=REPO, server="transformers")
    assert _digests_of_files_read("rewrite", stage, tmp_path)["model_snapshot"] == [REPO, FIRST]
    out, inputs = tmp_path / "branches", [str(tmp_path / "corpus")]
    identity, ignore = stage_identity("rewrite", stage, inputs, tmp_path)
    _check_stage_job(out, identity, "rewrite", ignore)
    (out / "qa").mkdir(parents=True)
    (out / "qa" / "summary.json").write_text("{}")  # a finished task
    _check_stage_job(out, identity, "rewrite", ignore)  # a rerun: the same job
    add_snapshot(hf_cache, SECOND, b"\1" * 64)  # a new revision cached; refs/main moves to it
    identity, ignore = stage_identity("rewrite", stage, inputs, tmp_path)
    with pytest.raises(ValueError, match="model_snapshot"):
        _check_stage_job(out, identity, "rewrite", ignore)
    # endpoint-served and uncached names read no model (as before): only the task's prompt template
    assert "model_snapshot" not in _digests_of_files_read(
        "rewrite", Config(model=REPO, server="endpoint"), tmp_path
    )
    assert list(
        _digests_of_files_read("rewrite", Config(model="org/not-cached", server="transformers"), tmp_path)
    ) == ["prompt qa"]


def test_a_recipe_stage_record_from_before_hub_snapshots_were_recorded_is_the_same_job(tmp_path, hf_cache):
    """A finished rewrite stage recorded before `model_snapshot` existed stays this job (it is rewritten with the
    snapshot found now); any other difference is still refused."""
    from pipelines.rewrite import Config
    from pipelines.runner import RECIPE_STAGE_FILE, _check_stage_job, stage_identity

    add_snapshot(hf_cache, FIRST, b"\0" * 64)
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test.jsonl").write_text(
        json.dumps({"problem": "What is 12 + 30?", "answer": "42"}) + "\n"
    )
    stage = Config(model=REPO, server="transformers", decont_benchmarks=["{run_dir}/bench"])
    out, inputs = tmp_path / "branches", [str(tmp_path / "corpus")]
    identity, ignore = stage_identity("rewrite", stage, inputs, tmp_path)
    old = json.loads(json.dumps(identity))
    # what the code before this change recorded: the benchmarks only
    del old["file_digests"]["model_snapshot"]
    assert old["file_digests"]
    out.mkdir()
    (out / RECIPE_STAGE_FILE).write_text(json.dumps(old))
    (out / "qa").mkdir()
    (out / "qa" / "summary.json").write_text("{}")
    _check_stage_job(out, identity, "rewrite", ignore)  # adopted
    assert "model_snapshot" in json.loads((out / RECIPE_STAGE_FILE).read_text())["file_digests"]
    (out / RECIPE_STAGE_FILE).write_text(json.dumps({**old, "inputs": ["elsewhere"]}))
    with pytest.raises(ValueError):
        _check_stage_job(out, identity, "rewrite", ignore)


def test_a_recipe_stage_whose_hub_model_is_not_cached_on_the_rerun_resumes(tmp_path, hf_cache):
    """A finished stage recorded with the cached snapshot, rerun where the cache is not seen (cleared, another
    HF_HOME, another node): refused as 'file_digests differ' though nothing changed. The recorded snapshot is kept,
    as a rewrite job.json keeps its model digest, and another cached revision later is still refused."""
    import shutil

    from pipelines.rewrite import Config
    from pipelines.runner import RECIPE_STAGE_FILE, _check_stage_job, stage_identity

    add_snapshot(hf_cache, FIRST, b"\0" * 64)
    stage = Config(model=REPO, server="transformers")
    out, inputs = tmp_path / "branches", [str(tmp_path / "corpus")]
    identity, ignore = stage_identity("rewrite", stage, inputs, tmp_path)
    _check_stage_job(out, identity, "rewrite", ignore)
    (out / "qa").mkdir(parents=True)
    (out / "qa" / "summary.json").write_text("{}")
    shutil.rmtree(hf_cache / f"models--{REPO.replace('/', '--')}")  # the cache is not seen on the rerun
    identity, ignore = stage_identity("rewrite", stage, inputs, tmp_path)
    _check_stage_job(out, identity, "rewrite", ignore)  # the same job
    recorded = json.loads((out / RECIPE_STAGE_FILE).read_text())["file_digests"]
    assert recorded["model_snapshot"] == [REPO, FIRST]  # kept as recorded
    add_snapshot(hf_cache, SECOND, b"\1" * 64)
    identity, ignore = stage_identity("rewrite", stage, inputs, tmp_path)
    with pytest.raises(ValueError, match="model_snapshot"):
        _check_stage_job(out, identity, "rewrite", ignore)
