"""`mathmix rewrite` refusing what it cannot do well, in one line and before it writes: another command's folder
or a folder of other files as OUT, an OUT that is a file, a kind of input file it does not read, an endpoint URL
with a path the server does not serve; and what it says when a file yields no document, a prompt template was
edited, or a response lacks `choices`.

The endpoint is a small OpenAI-compatible HTTP server in the test (GET /v1/models, POST /v1/chat/completions);
anything else is a 404, as on a real server.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curate.rewrite.job import RewriteSettings, run_task
from mathmix.cli import app
from pipelines.executors import ExecutorConfig
from tests.curate.fake_endpoint import JsonHandler, serve

SCORE = "The page works through an addition problem step by step, clear for primary school.\nFinal score: 3"


def completion(text: str) -> bytes:
    return json.dumps({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }).encode()  # fmt: skip


@pytest.fixture
def endpoint():
    """(url, state): state["answer"] is the body of every completion (a score by default), but a 500 for a request
    holding state["fail"]; state["gets"] the paths of the GETs it was sent."""
    state: dict = {"answer": completion(SCORE), "gets": []}

    class Handler(JsonHandler):
        def do_GET(self):  # noqa: N802
            state["gets"].append(self.path)
            if self.path == "/v1/models":
                self._send(200, b'{"object": "list", "data": [{"id": "m"}]}')
            else:
                self._send(404, b'{"error": "not found"}')

        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            if state.get("fail") and state["fail"] in body:
                self._send(500, b'{"error": "boom"}')
            elif self.path == "/v1/chat/completions":
                self._send(200, state["answer"])
            else:
                self._send(404, b'{"error": "not found"}')

    with serve(Handler) as url:
        yield url, state


def write_docs(path: Path, n: int = 3) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": f"Worked example: {i} + 1 = {i + 1}."}) + "\n"
                            for i in range(n)))  # fmt: skip
    return path


def settings(url: str, **kw) -> RewriteSettings:
    base = dict(model="m", server="endpoint", endpoint=url, max_tokens=32, temperature=0.0, request_timeout_s=5,
                retries=0, retry_backoff_s=0.05, server_ready_timeout_s=20)  # fmt: skip
    return RewriteSettings(**{**base, **kw})


def rewrite(inputs: list[Path], out: Path, url: str, *extra: str) -> tuple[int, str]:
    """`mathmix rewrite ... --task score` through the endpoint: (exit code, output on one line)."""
    args = ["rewrite", *map(str, inputs), "-o", str(out), "--task", "score", "--model", "m", "--server", "endpoint",
            "--endpoint", url, "--server-timeout", "20", *extra]  # fmt: skip
    result = CliRunner().invoke(app, args)
    return result.exit_code, "".join(result.output.split("\n"))  # rich wraps long lines


def test_another_commands_folder_or_a_folder_of_other_files_is_refused(tmp_path, endpoint):
    """A `classifier recall` round folder (its job.json, domains.json, candidates.jsonl) was taken over: rewrite
    wrote its files among them and replaced the round's job.json, exit 0; so was a folder holding notes.txt."""
    url, _ = endpoint
    docs = write_docs(tmp_path / "in.jsonl")
    recall = tmp_path / "recall"
    recall.mkdir()
    record = {"inputs": ["/x/corpus.jsonl"], "settings": {"threshold": 0.5}, "command": "classifier recall"}
    (recall / "job.json").write_text(json.dumps(record))
    (recall / "domains.json").write_text("{}")
    (recall / "candidates.jsonl").write_text("")
    code, output = rewrite([docs], recall, url)
    assert code == 2 and "holds the output of another job than this rewrite" in output, output
    assert "classifier recall" in output and "rerun" not in output
    assert json.loads((recall / "job.json").read_text()) == record
    assert sorted(p.name for p in recall.iterdir()) == ["candidates.jsonl", "domains.json", "job.json"]

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine\n")
    code, output = rewrite([docs], busy, url)
    assert code == 2 and f"{busy}: holds files not written by rewrite (notes.txt)" in output, output
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]

    own = tmp_path / "own"  # its own folder: the rerun resumes (nothing left to do), with a file added since
    assert rewrite([docs], own, url)[0] == 0
    (own / "notes.txt").write_text("added after the run\n")
    code, output = rewrite([docs], own, url)
    assert code == 0 and json.loads((own / "summary.json").read_text())["docs_out"] == 3, output


def test_an_output_that_is_a_file_or_lies_under_one_is_one_line_up_front(tmp_path, endpoint):
    """`-o afile` failed late with FileExistsError, `-o f/out` under a file with NotADirectoryError, both with the
    advice to rerun to resume."""
    url, _ = endpoint
    docs = write_docs(tmp_path / "in.jsonl")
    afile = tmp_path / "afile"
    afile.write_text("")
    for out, said in (
        (afile, "exists and is not a folder"),
        (afile / "out", "cannot create the output folder"),
    ):
        code, output = rewrite([docs], out, url)
        assert code == 2 and f"{out}: {said}" in output and "rerun" not in output, output
    assert afile.read_text() == ""


def test_the_mismatch_error_names_inputs_by_their_paths(tmp_path, endpoint):
    """The record writes paths under OUT's parent as `{run_dir}/...`; the refusal showed that placeholder."""
    url, _ = endpoint
    first, second = write_docs(tmp_path / "a.jsonl"), write_docs(tmp_path / "b.jsonl", n=2)
    run_task([str(first)], tmp_path / "score", "score", settings(url), ExecutorConfig(tasks=1))
    with pytest.raises(ValueError, match="another job than this rewrite") as err:
        run_task([str(second)], tmp_path / "score", "score", settings(url), ExecutorConfig(tasks=1))
    assert f"added: {second}" in str(err.value) and f"left out: {first}" in str(err.value)
    assert "{run_dir}" not in str(err.value)


def test_a_kind_of_file_rewrite_does_not_read_is_refused_naming_it(tmp_path, endpoint):
    """Any file given was read as JSONL: a MATH-style .json array (one document over many lines), an .arrow, .html
    or .csv file was every line a bad_record, exit 0, and no word of it."""
    url, _ = endpoint
    out = tmp_path / "out"
    files = {
        "math.json": json.dumps([{"problem": "1+1?", "solution": "2"}] * 3, indent=1),
        "train.arrow": "ARROW1\0\0binary",
        "page.html": "<html><body>$x^2$</body></html>",
        "table.csv": "id,text\n1,hello\n",
    }
    for name, content in files.items():
        (tmp_path / name).write_text(content)
        code, output = rewrite([tmp_path / name], out, url)
        assert code == 2 and f"{tmp_path / name}: not a kind of file rewrite reads" in output, output
        assert "Parquet (*.parquet) and JSONL (*.jsonl" in output and not out.exists()
    output = rewrite([tmp_path / "math.json"], out, url)[1]
    assert "a file of one JSON object per line can be renamed to .jsonl" in output


def test_a_jsonl_file_without_a_document_is_named_in_a_warning(tmp_path, endpoint):
    """A JSON array saved as .jsonl: each of its lines a bad_record, counted with the rest under `dropped`; no word
    said which file it was."""
    url, _ = endpoint
    good = write_docs(tmp_path / "in" / "good.jsonl")
    array = tmp_path / "in" / "array.jsonl"
    array.write_text(json.dumps([{"id": "a", "text": "x"}, {"id": "b", "text": "y"}], indent=1))
    partly = tmp_path / "in" / "partly.jsonl"  # some lines bad, one document: no warning
    partly.write_text('{"id": "p", "text": "Worked example: 9 + 1 = 10."}\n[1, 2]\nnot json\n')
    code, output = rewrite([tmp_path / "in"], tmp_path / "out", url)
    assert code == 0, output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["docs_out"] == 4 and summary["dropped"] == {"bad_record": 10 + 2}
    assert summary["files_all_bad_records"] == [str(array)]
    assert f"warning: no line of {array} is a document" in output and str(partly) not in output
    assert str(good) not in output.split("warning: no line of")[-1]


def test_an_endpoint_url_ending_in_v1_is_its_server_root_and_a_404_is_final(tmp_path, endpoint):
    """`--endpoint http://127.0.0.1:PORT/v1` was probed at /v1/v1/models and refused after the whole wait (60 s);
    any URL whose probe answered 404 waited the same, for an answer that does not change."""
    url, state = endpoint
    docs = write_docs(tmp_path / "in.jsonl")
    code, output = rewrite([docs], tmp_path / "v1", f"{url}/v1/")
    assert code == 0 and json.loads((tmp_path / "v1" / "summary.json").read_text())["docs_out"] == 3, output
    assert state["gets"] == ["/v1/models"] * len(state["gets"])
    start = time.monotonic()
    code, output = rewrite([docs], tmp_path / "api", f"{url}/api")  # --server-timeout 20
    assert code == 2 and time.monotonic() - start < 10, output
    assert f"endpoint {url}/api: GET {url}/api/v1/models answered 404 (not found)" in output
    assert "the server's root" in output and not (tmp_path / "api").exists()


@pytest.fixture
def prompts(tmp_path, monkeypatch):
    """A copy of the prompt templates, which a test may edit (never the shipped ones)."""
    import shutil

    from curate.rewrite import tasks

    folder = tmp_path / "prompts"
    shutil.copytree(tasks.PROMPTS_DIR, folder)
    monkeypatch.setattr(tasks, "PROMPTS_DIR", folder)
    tasks.prompt_template.cache_clear()
    yield folder
    tasks.prompt_template.cache_clear()


def test_a_prompt_template_edited_in_place_is_another_job(tmp_path, endpoint, prompts):
    """job.json held the prompt's version, not its text: a rerun after the template was edited took the old
    prompt's answers for the new one's, without a word."""
    url, _ = endpoint
    docs = write_docs(tmp_path / "in.jsonl")
    out = tmp_path / "score"
    run_task([str(docs)], out, "score", settings(url), ExecutorConfig(tasks=1))
    record = json.loads((out / "job.json").read_text())
    assert record["file_digests"]["prompt"][0].endswith("/prompts/score.v1.txt")
    del record["file_digests"]  # a record from before templates were digested: this job, rewritten with it
    (out / "job.json").write_text(json.dumps(record))
    assert run_task([str(docs)], out, "score", settings(url), ExecutorConfig(tasks=1))["docs_out"] == 3
    assert "prompt" in json.loads((out / "job.json").read_text())["file_digests"]
    template = prompts / "score.v1.txt"
    template.write_text(template.read_text() + "\nAnswer in one line.\n")
    with pytest.raises(
        ValueError, match=r"another job than this rewrite \(prompt: other contents at the same"
    ):
        run_task([str(docs)], out, "score", settings(url), ExecutorConfig(tasks=1))
    with pytest.raises(FileNotFoundError, match="no prompt version 'v9'"):  # up front, not mid-run
        run_task([str(docs)], tmp_path / "v9", "score", settings(url, prompt_version="v9"), ExecutorConfig())
    assert not (tmp_path / "v9").exists()


def test_the_recipe_rewrite_stage_records_its_prompt_templates(tmp_path, prompts):
    """A template edited in place left the recipe's finished rewrite stage "already complete" with the old
    prompt's branches. A stage record from before templates were digested is adopted."""
    from pipelines.rewrite import Config
    from pipelines.runner import RECIPE_STAGE_FILE, _check_stage_job, stage_identity

    stage = Config(tasks=["qa", "score"])
    out, inputs = tmp_path / "branches", [str(tmp_path / "corpus")]
    identity, ignore = stage_identity("rewrite", stage, inputs, tmp_path)
    assert sorted(identity["file_digests"]) == ["prompt qa", "prompt score"]
    out.mkdir()
    old = {
        k: v for k, v in identity.items() if k != "file_digests"
    }  # model auto, no benchmarks: none recorded
    (out / RECIPE_STAGE_FILE).write_text(json.dumps(old))
    (out / "qa").mkdir()
    (out / "qa" / "summary.json").write_text("{}")  # a finished task
    _check_stage_job(out, identity, "rewrite", ignore)  # adopted
    assert json.loads((out / RECIPE_STAGE_FILE).read_text())["file_digests"] == identity["file_digests"]
    template = prompts / "qa.v1.txt"
    template.write_text(template.read_text().replace("Question:", "Problem:"))
    identity, ignore = stage_identity("rewrite", stage, inputs, tmp_path)
    with pytest.raises(ValueError, match="prompt qa: other contents at the same path"):
        _check_stage_job(out, identity, "rewrite", ignore)


def test_a_response_without_choices_says_what_it_lacked(tmp_path, endpoint):
    """datatrove reads answer["choices"][0]: the error of every request was just `'choices'`."""
    from curate.rewrite.rollout import RequestsFailedError

    url, state = endpoint
    state["answer"] = json.dumps({"id": "x", "object": "chat.completion"}).encode()
    docs = write_docs(tmp_path / "in.jsonl", n=2)
    with pytest.raises(RequestsFailedError) as err:
        run_task([str(docs)], tmp_path / "out", "score", settings(url), ExecutorConfig(tasks=1))
    said = str(err.value)
    assert (
        "last error: malformed response: no `choices` (a non-empty list) in the answer (its keys: id, object)"
        in said
    )
    from curate.rewrite.rollout import malformed_answer

    assert malformed_answer({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}) is None
    assert "not a JSON object (a list)" in malformed_answer([1])
    assert "no `message` and `finish_reason`" in malformed_answer({"choices": [{"text": "x"}]})
    assert "`usage` is not a JSON object" in malformed_answer(
        {"choices": [{"message": {}, "finish_reason": "stop"}], "usage": None}
    )


def test_throughput_of_a_run_whose_only_requests_failed_says_so(tmp_path, endpoint):
    """A rerun that sent only the failing document's request, given up in it (--max-attempts), wrote
    `"requests": 0, "failed_requests": 1` with the note "no request was sent in this run"."""
    from curate.rewrite.rollout import RequestsFailedError

    url, state = endpoint
    state["fail"] = "1 + 1 = 2"  # document d1's text
    docs, out = write_docs(tmp_path / "in.jsonl", n=2), tmp_path / "out"
    with pytest.raises(RequestsFailedError):
        run_task([str(docs)], out, "score", settings(url, max_attempts=2), ExecutorConfig(tasks=1))
    summary = run_task([str(docs)], out, "score", settings(url, max_attempts=2), ExecutorConfig(tasks=1))
    assert summary["dropped"] == {"request_failed": 1}
    report = json.loads((out / "throughput.json").read_text())
    assert report["requests"] == 0 and report["failed_requests"] == 1, report
    assert report["note"] == "no request of this run was answered: the 1 it sent failed", report
