"""The recipe stage `rewrite` (model: auto, as in the quickstart) and the `mathmix rewrite` command line."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.summary import is_balanced
from pipelines.executors import ExecutorConfig
from pipelines.recipe import Recipe
from pipelines.stages import StageContext

QUICKSTART_BLOCK = {
    "tasks": ["qa"],
    "model": "auto",
    "max_docs": 10,
    "max_tokens": 16,
    "temperature": 0.0,
    "max_input_chars": 2000,
    "cpu_threads": 1,
    "decont_benchmarks": ["{run_dir}/sample/bench"],
}


def test_stage_with_auto_model(tmp_path):
    from pipelines.rewrite import Config, run_stage

    rows = [
        {"id": f"web-{i}", "text": f"Worked example {i}: $x + {i} = {2 * i}$ gives $x = {i}$."}
        for i in range(12)
    ]
    (tmp_path / "decont" / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "decont" / "data" / "00000.parquet")
    bench = tmp_path / "sample" / "bench" / "gsm8k"
    bench.mkdir(parents=True)
    (bench / "test.jsonl").write_text(
        json.dumps(
            {
                "question": "Tom has 3 apples and buys 4 more apples. How many apples does he have?",
                "answer": "3 + 4 = 7\n#### 7",
            }
        )
        + "\n"
    )
    ctx = StageContext(
        run_dir=tmp_path,
        out_dir=tmp_path / "branches",
        inputs=[str(tmp_path / "decont" / "data")],
        executor=ExecutorConfig(tasks=1),
    )
    start = time.time()
    summary = run_stage(Config.model_validate(QUICKSTART_BLOCK), ctx)
    seconds = time.time() - start
    assert summary["docs_in"] == 10 and is_balanced(summary) and "unaccounted" not in summary
    assert summary["tasks"]["qa"]["docs_in"] == 10
    assert json.loads((tmp_path / "branches" / "summary.json").read_text()) == summary
    task_summary = json.loads((tmp_path / "branches" / "qa" / "summary.json").read_text())
    assert task_summary["decont"].startswith("13-gram") and task_summary["model"].endswith("_model")
    assert (tmp_path / "branches" / "_model" / "PLUMBING_ONLY.txt").is_file()
    assert list((tmp_path / "branches" / "qa" / "data").glob("*.parquet"))
    assert seconds < 180, f"the quickstart share of the rewrite stage took {seconds:.0f}s"
    # A rerun of a finished stage reuses each task's summary.
    again = run_stage(Config.model_validate(QUICKSTART_BLOCK), ctx)
    assert {k: again[k] for k in ("docs_in", "docs_out", "dropped")} == {
        k: summary[k] for k in ("docs_in", "docs_out", "dropped")
    }


def test_recipe_block_validates_and_names_bad_keys():
    recipe = Recipe.model_validate({"name": "q", "stages": {"rewrite": QUICKSTART_BLOCK}})
    assert recipe.stages["rewrite"].tasks == ["qa"]
    with pytest.raises(ValueError, match="max_tokenz"):
        Recipe.model_validate({"name": "q", "stages": {"rewrite": {"max_tokenz": 3}}})
    with pytest.raises(ValueError, match="tasks"):
        Recipe.model_validate({"name": "q", "stages": {"rewrite": {"tasks": ["poem"]}}})


def test_cli_help_and_bad_options(tmp_path):
    from mathmix.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["rewrite", "run", "--help"])
    assert result.exit_code == 0 and "--task" in result.output and "--server" in result.output
    # --max-docs applies per input and kind of file (it said "per input": a mixed folder reads 2 N documents)
    help_text = " ".join(result.output.replace("│", " ").split())
    assert (
        "per input and kind of file: a folder's Parquet files and its JSONL files are two inputs" in help_text
    )
    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "x"}\n')
    bad_task = runner.invoke(app, ["rewrite", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o"), "--task", "poem",
                                   "--model", "auto"])  # fmt: skip
    assert bad_task.exit_code == 2 and "--task" in bad_task.output
    no_url = runner.invoke(app, ["rewrite", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o"), "--task", "qa",
                                 "--model", "m", "--server", "endpoint"])  # fmt: skip
    assert no_url.exit_code == 2 and "--endpoint" in no_url.output


def test_cli_names_a_missing_model_before_any_server_starts(tmp_path):
    from mathmix.cli import app

    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "x"}\n')
    start = time.time()
    result = CliRunner().invoke(app, ["rewrite", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o"), "--task",
                                      "qa", "--model", str(tmp_path / "no-model")])  # fmt: skip
    output = "".join(result.output.split("\n"))  # rich wraps long lines
    assert result.exit_code == 2 and f"model not found: {tmp_path / 'no-model'}" in output
    assert "rerun" not in output and time.time() - start < 10


def test_no_usable_input_document_gives_an_empty_branch(tmp_path):
    """Rows without text: nothing to generate, so nothing to validate; counted, and an empty data/ is left."""
    from curate.rewrite.job import RewriteSettings, run_task

    (tmp_path / "in.jsonl").write_text(
        '{"id": "a", "body": "text under another name"}\n{"id": "b", "text": ""}\n'
    )
    settings = RewriteSettings(
        **{k: v for k, v in QUICKSTART_BLOCK.items() if k not in ("tasks", "decont_benchmarks")}
    )
    summary = run_task([str(tmp_path / "in.jsonl")], tmp_path / "qa", "qa", settings, ExecutorConfig(tasks=1))
    assert summary["docs_in"] == 2 and summary["docs_out"] == 0 and is_balanced(summary)
    assert summary["rows_without_text_field"] == 1
    assert pq.read_table(tmp_path / "qa" / "data").num_rows == 0


def test_a_bad_decont_benchmark_is_named_before_generation(tmp_path):
    from mathmix.cli import app

    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "x"}\n')
    start = time.time()
    result = CliRunner().invoke(app, ["rewrite", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o"), "--task",
                                      "qa", "--model", "auto", "--decont", str(tmp_path / "nope")])  # fmt: skip
    output = "".join(result.output.split("\n"))
    assert result.exit_code == 2 and str(tmp_path / "nope") in output and "rerun" not in output, output
    assert not (tmp_path / "o" / "raw").exists() and time.time() - start < 10


def test_a_run_folder_as_input_is_refused_before_anything_is_written(tmp_path):
    from mathmix.cli import app

    for stage in ("web", "dedup"):  # a run folder: stage folders with their data and summary
        (tmp_path / "run" / stage / "data").mkdir(parents=True)
        (tmp_path / "run" / stage / "data" / "a.jsonl").write_text('{"id": "a", "text": "x"}\n')
        (tmp_path / "run" / stage / "summary.json").write_text("{}")
    result = CliRunner().invoke(app, ["rewrite", str(tmp_path / "run"), "-o", str(tmp_path / "o"), "--task", "qa",
                                      "--model", "auto"])  # fmt: skip
    output = "".join(result.output.split("\n"))
    assert result.exit_code == 2 and "holds stage folders (dedup, web)" in output, output
    assert not (tmp_path / "o" / "job.json").exists()


@pytest.mark.parametrize(("server", "extra"), [("vllm", "mathmix[gpu]"), ("sglang", "mathmix[sglang]")])
def test_a_server_whose_package_is_missing_is_named_before_anything_is_written(
    tmp_path, monkeypatch, server, extra
):
    """It was datatrove's ImportError traceback from inside the job, after job.json and logs were written."""
    import importlib.util

    from mathmix.cli import app

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == server else find_spec(name, *a)
    )
    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "x"}\n')
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["rewrite", str(tmp_path / "in.jsonl"), "-o", str(out), "--task", "qa",
                                      "--model", "auto", "--server", server])  # fmt: skip
    output = "".join(result.output.split("\n"))
    assert result.exit_code == 2 and f"server '{server}' needs the {server} package" in output, output
    assert extra in output and "Traceback" not in output and "rerun" not in output and not out.exists()


def test_an_endpoint_with_model_auto_is_refused(tmp_path):
    """`auto` built a tiny local model and sent its folder as the model name to an endpoint that never serves it."""
    from mathmix.cli import app

    message = "server 'endpoint' needs the name of the model the endpoint serves"
    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "x"}\n')
    result = CliRunner().invoke(app, ["rewrite", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o"), "--task",
                                      "qa", "--model", "auto", "--server", "endpoint", "--endpoint",
                                      "http://127.0.0.1:9", "--server-timeout", "1"])  # fmt: skip
    output = "".join(result.output.split("\n"))
    assert result.exit_code == 2 and message in output and "--model" in output, output
    assert not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match=message):  # the recipe block too (model: auto is its default)
        Recipe.model_validate(
            {"name": "q", "stages": {"rewrite": {"server": "endpoint", "endpoint": "http://h"}}}
        )


COUNT_OPTIONS = {"--max-docs": ("max_docs", int), "--corpus-docs": ("corpus_docs", int), "--samples": ("samples", int),
                 "--tp": ("tp", int), "--max-tokens": ("max_tokens", int), "--temperature": ("temperature", float),
                 "--retries": ("retries", int), "--max-attempts": ("max_attempts", int),
                 "--request-timeout": ("request_timeout_s", float),
                 "--server-timeout": ("server_ready_timeout_s", float),
                 "--max-concurrent": ("max_concurrent", int)}  # fmt: skip


@pytest.mark.parametrize(
    ("option", "value"),
    [("--max-docs", "-5"), ("--max-docs", "0"), ("--corpus-docs", "-3"), ("--corpus-docs", "0"),
     ("--samples", "0"), ("--tp", "0"), ("--max-tokens", "0"), ("--temperature", "-1"), ("--retries", "-1"),
     ("--max-attempts", "0"), ("--request-timeout", "0"), ("--server-timeout", "0.5"), ("--max-concurrent", "0")],
)  # fmt: skip
def test_count_options_out_of_range_are_refused_naming_the_option(tmp_path, option, value):
    """--max-docs -5 read nothing (an empty branch) and --corpus-docs -3 gave a negative cost, without a word. The
    rules are the settings model's (the recipe's keys too), written once: the command line names the option and
    gives the model's message, on one line (they were written twice, and differed: --server-timeout 0.5)."""
    from pydantic import ValidationError

    from curate.rewrite.job import RewriteSettings
    from mathmix.cli import app

    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "x"}\n')
    result = CliRunner().invoke(app, ["rewrite", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o"), "--task",
                                      "qa", "--model", "m", "--server", "endpoint", "--endpoint",
                                      "http://127.0.0.1:9", option, value])  # fmt: skip
    key, kind = COUNT_OPTIONS[option]
    with pytest.raises(ValidationError, match=key) as refused:  # the recipe's key
        RewriteSettings(**{key: kind(value)})
    message = refused.value.errors()[0]["msg"].removeprefix("Value error, ")
    expected = f"Invalid value for '{option}': {message[:1].lower()}{message[1:]} (got {kind(value)!r})"
    assert result.exit_code == 2 and expected in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_other_weights_at_the_same_model_path_are_another_job(tmp_path):
    """A model replaced by one with other weights (same files, same sizes) resumed the old run silently.

    What run_task checks before anything starts (rewrite_identity, then check_job), on a model folder of a config
    and a weights file and an OUT holding a checkpoint: no server, no generation."""
    from curate.rewrite.identity import rewrite_identity
    from curate.rewrite.job import RewriteSettings
    from pipelines.job_record import check_job

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    (model / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "d0", "text": "Worked example: $x + 1 = 2$."}))
    inputs, out = [str(tmp_path / "in.jsonl")], tmp_path / "qa"
    settings = RewriteSettings(model=str(model), max_tokens=4, temperature=0.0)

    def check(settings: RewriteSettings) -> bool:
        identity, earlier = rewrite_identity(inputs, settings, "qa", out.parent, out)
        return check_job(out, identity, "rewrite", earlier=earlier)

    assert check(settings) is False  # recorded
    (out / "checkpoints" / "last_chunk").mkdir(parents=True)  # work to resume: another job is refused
    (out / "checkpoints" / "last_chunk" / "00000.txt").write_text("0")
    assert check(settings) is True  # the same weights: resumes
    record = json.loads((out / "job.json").read_text())
    sizes = sorted(p.stat().st_size for p in model.iterdir())
    # retrained into the same folder: same files, same sizes, other bytes
    (model / "model.safetensors").write_bytes(bytes(reversed(range(256))) * 64)
    assert sorted(p.stat().st_size for p in model.iterdir()) == sizes
    with pytest.raises(ValueError, match=r"another job than this rewrite \(the model's weights changed"):
        check(settings)
    # A record from before the digest was kept is this job (rewritten with it); so is a run through an endpoint,
    # which keeps the recorded digest.
    (out / "job.json").write_text(json.dumps({k: v for k, v in record.items() if k != "model_digest"}))
    assert check(settings) is False
    digest = json.loads((out / "job.json").read_text())["model_digest"]
    assert digest != record["model_digest"]  # the weights now in the folder
    assert check(settings.model_copy(update={"server": "endpoint", "endpoint": "http://127.0.0.1:9"})) is True
    assert json.loads((out / "job.json").read_text())["model_digest"] == digest


def test_a_run_through_an_endpoint_keeps_the_recorded_weights_digest(tmp_path):
    """A rerun through --server endpoint (no local weights, no digest) rewrote job.json without the digest; a later
    local rerun with other weights then matched the 'record from before the digest' form and resumed silently."""
    from curate.rewrite.identity import rewrite_identity
    from curate.rewrite.job import RewriteSettings
    from pipelines.job_record import check_job

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "text": "Some math text."}) + "\n")
    inputs, out = [str(tmp_path / "in.jsonl")], tmp_path / "qa"

    def check(settings: RewriteSettings) -> bool:
        identity, earlier = rewrite_identity(inputs, settings, "qa", tmp_path, out)
        return check_job(out, identity, "rewrite", earlier=earlier)

    local = RewriteSettings(model=str(model))
    endpoint = local.model_copy(update={"server": "endpoint", "endpoint": "http://127.0.0.1:9"})
    assert check(local) is False
    digest = json.loads((out / "job.json").read_text())["model_digest"]
    (out / "summary.json").write_text("{}")  # the folder holds finished work
    assert check(endpoint) is True  # the same job
    assert json.loads((out / "job.json").read_text())["model_digest"] == digest  # still recorded
    (model / "model.safetensors").write_bytes(b"\1" * 64)  # other weights at the same path
    with pytest.raises(ValueError, match=r"another job than this rewrite \(the model's weights changed"):
        check(local)


def test_a_benchmark_replaced_at_the_same_path_is_another_rewrite_job(tmp_path):
    """Rewrite decontaminates its outputs against benchmark files; one replaced at the same path (same size) resumed
    the old job, whose kept documents were checked against the old problems. The recipe stage's record too."""
    from curate.rewrite.identity import rewrite_identity
    from curate.rewrite.job import RewriteSettings
    from pipelines.job_record import check_job
    from pipelines.rewrite import Config
    from pipelines.runner import _digests_of_files_read

    bench = tmp_path / "bench" / "test.jsonl"
    bench.parent.mkdir()
    bench.write_text(
        json.dumps({"problem": "What is 12 + 30 in base ten arithmetic?", "answer": "42"}) + "\n"
    )
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "text": "Some math text."}) + "\n")
    inputs, out = [str(tmp_path / "in.jsonl")], tmp_path / "qa"
    settings = RewriteSettings(decont_benchmarks=[str(tmp_path / "bench")])
    identity, earlier = rewrite_identity(inputs, settings, "qa", tmp_path, out)
    assert check_job(out, identity, "rewrite", earlier=earlier) is False  # recorded
    stage = Config(decont_benchmarks=["{run_dir}/bench"])
    recorded = _digests_of_files_read("rewrite", stage, tmp_path)
    assert list(recorded) == ["benchmark bench/test", "prompt qa"]
    bench.write_text(bench.read_text().replace("12 + 30", "11 + 31"))  # same size, other problem
    identity, earlier = rewrite_identity(inputs, settings, "qa", tmp_path, out)
    (out / "summary.json").write_text("{}")  # the folder holds finished work: another job is refused
    with pytest.raises(ValueError, match="benchmark bench/test"):
        check_job(out, identity, "rewrite", earlier=earlier)
    assert _digests_of_files_read("rewrite", stage, tmp_path) != recorded


def test_the_recipe_rewrite_stage_records_its_local_model_by_weights(tmp_path):
    from pipelines.rewrite import Config
    from pipelines.runner import _digests_of_files_read

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    stage = Config(model=str(model))
    before = _digests_of_files_read("rewrite", stage, tmp_path)
    assert before["model"][0] == str(model.resolve())
    (model / "model.safetensors").write_bytes(b"\1" * 64)  # retrained into the same folder
    assert _digests_of_files_read("rewrite", stage, tmp_path)["model"] != before["model"]
    assert list(_digests_of_files_read("rewrite", Config(), tmp_path)) == [
        "prompt qa"
    ]  # auto: from the inputs


def test_the_recipe_rewrite_stage_takes_new_retry_settings_but_not_new_output_settings(tmp_path):
    """docs/rewrite.md: raising max_attempts (or retries, timeouts) unsticks a stage without making it another job;
    `mathmix rewrite` held to that, a recipe's rewrite stage refused it once the stage had work."""
    from pipelines.rewrite import Config
    from pipelines.runner import _check_stage_job, stage_identity

    out = tmp_path / "branches"
    inputs = [str(tmp_path / "corpus")]
    first = Config(max_attempts=3, retries=1)
    identity, ignore = stage_identity("rewrite", first, inputs, tmp_path)
    _check_stage_job(out, identity, "rewrite", ignore)
    (out / "qa" / "checkpoints").mkdir(parents=True)
    (out / "qa" / "checkpoints" / "00000.jsonl").write_text("{}\n")  # generation under way
    identity, ignore = stage_identity("rewrite", Config(max_attempts=5, retries=4), inputs, tmp_path)
    _check_stage_job(out, identity, "rewrite", ignore)  # the same job
    identity, ignore = stage_identity(
        "rewrite", Config(max_attempts=5, prompt_version="v2"), inputs, tmp_path
    )
    with pytest.raises(ValueError, match="prompt_version"):
        _check_stage_job(out, identity, "rewrite", ignore)


def test_the_recipe_rewrite_stage_records_its_decont_benchmarks_as_the_files_read(tmp_path, capsys):
    """As the decont stage's benchmarks: a folder and its one file, or the same files in another order, are the
    same rewrite stage (skipped on a rerun, not refused as another job); a record of them as typed is adopted."""
    from pipelines.runner import RECIPE_STAGE_FILE, StageFailed, run_recipe

    bench = tmp_path / "bench"
    for name, problem in (
        ("gsm8k", "Tom has 3 apples and buys 4 more"),
        ("math500", "Find x if 2x + 6 equals 20"),
    ):
        (bench / name).mkdir(parents=True)
        (bench / name / "test.jsonl").write_text(
            json.dumps({"problem": problem + " in all?", "answer": "7"}) + "\n"
        )
    corpus = tmp_path / "corpus.parquet"
    pq.write_table(
        pa.Table.from_pylist([{"id": "a", "text": "Worked example: $x + 1 = 2$ gives $x = 1$."}]), corpus
    )
    gsm, math = str(bench / "gsm8k"), str(bench / "math500")
    block = {k: v for k, v in QUICKSTART_BLOCK.items() if k != "decont_benchmarks"} | {
        "inputs": [str(corpus)]
    }

    def run(benchmarks: list[str]) -> str:
        stages = {"rewrite": {**block, "decont_benchmarks": benchmarks}}
        run_dir = str(tmp_path / "run")
        run_recipe(
            Recipe.model_validate(
                {"name": "t", "output_dir": run_dir, "executor": {"tasks": 1}, "stages": stages}
            )
        )
        captured = capsys.readouterr()
        return "".join((captured.out + captured.err).split())

    run([gsm, math])
    for same in ([math, gsm], [f"{gsm}/test.jsonl", f"{math}/test.jsonl"], [str(bench)]):
        assert "rewrite:alreadycomplete" in run(same), same
    record_path = tmp_path / "run" / "branches" / RECIPE_STAGE_FILE
    record = json.loads(record_path.read_text())
    assert "decont_benchmarks" not in record["settings"]
    record["settings"]["decont_benchmarks"] = [math, gsm]  # as the previous code recorded them
    record_path.write_text(json.dumps(record))
    assert "rewrite:alreadycomplete" in run([math, gsm])
    assert (
        "decont_benchmarks" not in json.loads(record_path.read_text())["settings"]
    )  # rewritten in today's form
    with pytest.raises(StageFailed, match="benchmark math500/test: read by one job only"):
        run([gsm])  # other benchmark files are another stage still
