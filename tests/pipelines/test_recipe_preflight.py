"""`mathmix run` checks a stage's benchmarks before the first stage runs (and in --dry-run); a recipe's decont
stage is the same stage for the same benchmark files however the block names them; a recipe with no stage is an
error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mathmix.cli import app
from pipelines.recipe import Recipe, RecipeError, load_recipe
from pipelines.runner import RECIPE_STAGE_FILE, StageFailed, run_recipe
from tests.pipelines.test_decont_stage import _jsonl, _question


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    """docs.jsonl (two quoting a benchmark question, one clean) and bench/{gsm8k,math500}/test.jsonl."""
    bench = tmp_path / "bench"
    _jsonl(bench / "gsm8k" / "test.jsonl", [{"question": _question(0), "answer": "7"}])
    _jsonl(bench / "math500" / "test.jsonl", [{"problem": _question(1), "answer": "8"}])
    docs = [
        {"id": "a", "text": "Forum post. " + _question(0) + " Anyone?"},
        {"id": "b", "text": "Homework: " + _question(1) + " Thanks."},
        {"id": "clean", "text": "The weather was fine and the match went on all day long."},
    ]
    return _jsonl(tmp_path / "docs.jsonl", docs), bench


def _said(capsys) -> str:
    """What the run printed (the console writes to stderr, wrapped), on one line."""
    captured = capsys.readouterr()
    return "".join((captured.out + captured.err).split("\n"))


def _recipe(run_dir: Path, docs: Path, decont: dict) -> Recipe:
    return Recipe.model_validate(
        {
            "name": "t",
            "output_dir": str(run_dir),
            "executor": {"tasks": 1},
            "stages": {"dedup": {"inputs": [str(docs)]}, "decont": decont},
        }
    )


def _bad_blocks(bench: Path, tmp_path: Path) -> dict[str, tuple[dict, str]]:
    unusable = _jsonl(tmp_path / "unusable" / "test.jsonl", [{"answer": "7"}, {"id": 3}])
    return {
        "no benchmarks": ({}, "no benchmarks to decontaminate against"),
        "missing path": ({"benchmarks": [str(bench / "nope")]}, "benchmark file or folder not found"),
        "no checkable record": ({"benchmarks": [str(unusable)]}, str(unusable)),
    }


@pytest.mark.parametrize("case", ["no benchmarks", "missing path", "no checkable record"])
def test_bad_benchmarks_are_refused_before_the_first_stage_runs(corpus, tmp_path, case):
    docs, bench = corpus
    decont, said = _bad_blocks(bench, tmp_path)[case]
    run_dir = tmp_path / "run"
    with pytest.raises(StageFailed, match=said) as err:
        run_recipe(_recipe(run_dir, docs, decont))
    assert err.value.stage == "decont"
    assert not (run_dir / "dedup").exists()  # dedup did not run first (hours on a crawl)
    with pytest.raises(StageFailed, match=said):  # nor is a plan printed as if it would run
        run_recipe(_recipe(run_dir, docs, decont), dry_run=True)
    # --only the stages before it: decont is not run, so not checked
    assert run_recipe(_recipe(run_dir, docs, decont), dry_run=True, only=["dedup"]) == {}


def test_cli_dry_run_exits_2_naming_the_stage(corpus, tmp_path):
    docs, _bench = corpus
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nstages:\n  dedup: {{inputs: [{docs}]}}\n  decont: {{}}\n"
    )
    result = CliRunner().invoke(app, ["run", str(recipe), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "stage decont: no benchmarks to decontaminate against" in result.output
    assert "dedup" not in result.output.split("stage decont")[0]  # no plan printed before it


def _finished_run(corpus, tmp_path, benchmarks: list[str]) -> tuple[Path, Path]:
    docs, _bench = corpus
    run_dir = tmp_path / "run"
    run_recipe(_recipe(run_dir, docs, {"benchmarks": benchmarks}))
    return run_dir, docs


def test_the_same_benchmark_files_named_otherwise_are_the_same_stage(corpus, tmp_path, capsys):
    docs, bench = corpus
    gsm, math = bench / "gsm8k", bench / "math500"
    run_dir, _ = _finished_run(corpus, tmp_path, [str(gsm), str(math)])
    capsys.readouterr()
    for same in (
        [str(math), str(gsm)],  # another order
        [str(gsm / "test.jsonl"), str(math / "test.jsonl")],  # each folder's only file
        [str(bench)],  # the folder holding both
    ):
        run_recipe(_recipe(run_dir, docs, {"benchmarks": same}))
        assert "decont: already complete" in _said(capsys), same
    # other benchmark files, or other contents, are another stage still
    with pytest.raises(StageFailed, match="benchmark math500/test: read by one job only"):
        run_recipe(_recipe(run_dir, docs, {"benchmarks": [str(gsm)]}))
    _jsonl(math / "test.jsonl", [{"problem": _question(2), "answer": "9"}])
    with pytest.raises(StageFailed, match="benchmark math500/test: other contents at the same path"):
        run_recipe(_recipe(run_dir, docs, {"benchmarks": [str(gsm), str(math)]}))


def test_an_unfinished_decont_resumes_with_its_benchmarks_reordered(corpus, tmp_path):
    """The decont job's own record (decont/job.json) takes the same files in another order as the same job."""
    docs, bench = corpus
    gsm, math = bench / "gsm8k", bench / "math500"
    run_dir, _ = _finished_run(corpus, tmp_path, [str(gsm), str(math)])
    (run_dir / "decont" / "summary.json").unlink()  # killed after its tasks finished
    summaries = run_recipe(_recipe(run_dir, docs, {"benchmarks": [str(math), str(gsm)]}))
    assert summaries["decont"]["docs_out"] == 1


def test_a_record_of_the_benchmarks_as_typed_is_adopted(corpus, tmp_path, capsys):
    """A run folder finished before benchmarks were recorded as files reruns with every stage skipped."""
    docs, bench = corpus
    _jsonl(tmp_path / "run" / "bench" / "gsm8k" / "test.jsonl", [{"question": _question(0), "answer": "7"}])
    typed = [str(bench / "math500"), "{run_dir}/bench/gsm8k"]
    run_dir, _ = _finished_run(corpus, tmp_path, typed)
    path = run_dir / "decont" / RECIPE_STAGE_FILE
    record = json.loads(path.read_text())
    assert "benchmarks" not in record["settings"]
    record["settings"]["benchmarks"] = typed  # the record as the previous code wrote it
    path.write_text(json.dumps(record))
    capsys.readouterr()
    run_recipe(_recipe(run_dir, docs, {"benchmarks": typed}))
    out = _said(capsys)
    assert "dedup: already complete" in out and "decont: already complete" in out
    assert "benchmarks" not in json.loads(path.read_text())["settings"]  # rewritten in today's form
    # and one that typed other benchmarks than the files recorded is refused, as before
    record["settings"]["benchmarks"] = [str(bench / "gsm8k")]
    record["file_digests"].pop("benchmark math500/test")
    path.write_text(json.dumps(record))
    with pytest.raises(StageFailed, match="read by one job only"):
        run_recipe(_recipe(run_dir, docs, {"benchmarks": typed}))


def test_a_finished_decont_whose_benchmarks_were_deleted_is_refused_up_front(corpus, tmp_path):
    docs, bench = corpus
    run_dir, _ = _finished_run(corpus, tmp_path, [str(bench)])
    (bench / "math500" / "test.jsonl").unlink()
    (bench / "gsm8k" / "test.jsonl").unlink()
    with pytest.raises(StageFailed, match="holds no .jsonl file"):
        run_recipe(_recipe(run_dir, docs, {"benchmarks": [str(bench)]}), dry_run=True)


@pytest.mark.parametrize("stages", ["stages: {}\n", "stages:\n", ""])
def test_a_recipe_without_stages_is_an_error(tmp_path, stages):
    path = tmp_path / "r.yaml"
    path.write_text("name: x\n" + stages)
    with pytest.raises(RecipeError, match="no stage to run"):
        load_recipe(path)
    result = CliRunner().invoke(app, ["run", str(path)])
    assert result.exit_code == 2 and "no stage to run" in result.output


@pytest.mark.parametrize(
    "stage, block, said",
    [
        ("train", {"recipe": "no/such/train.yaml"}, "train recipe not found"),
        ("rewrite", {"prompt_version": "v9"}, "no prompt version 'v9'"),
        ("eval", {"data_dir": "no/such/bench"}, "benchmark folder .* not found"),
    ],
)
def test_a_later_stage_reading_a_missing_file_is_refused_before_the_first_stage(
    corpus, tmp_path, stage, block, said
):
    """train's recipe, rewrite's prompt template and eval's benchmark folder are no earlier stage's output: a bad
    one was found only after the stages before it had run in full."""
    docs, _ = corpus
    run_dir = tmp_path / "run"
    recipe = Recipe.model_validate(
        {
            "name": "t",
            "output_dir": str(run_dir),
            "executor": {"tasks": 1},
            "stages": {"dedup": {"inputs": [str(docs)]}, stage: block},
        }
    )
    with pytest.raises(StageFailed, match=said) as err:
        run_recipe(recipe)
    assert err.value.stage == stage
    assert not (run_dir / "dedup").exists()
    with pytest.raises(StageFailed, match=said):
        run_recipe(recipe, dry_run=True)


def test_a_benchmark_folder_beside_a_run_folder_not_made_yet_passes_the_checks(corpus, tmp_path, capsys):
    """`{run_dir}/../bench` on a first run: the kernel cannot follow `run/..` before run/ is made, and the checks
    made before the first stage said "not found" of a folder the stage reads."""
    docs, _bench = corpus
    run_dir = tmp_path / "run"
    beside = {"benchmarks": ["{run_dir}/../bench"]}
    assert run_recipe(_recipe(run_dir, docs, beside), dry_run=True) == {}
    assert not run_dir.exists()
    assert run_recipe(_recipe(run_dir, docs, beside))["decont"]["docs_out"] == 1
    capsys.readouterr()
    run_recipe(_recipe(run_dir, docs, beside))  # the same files as the stage recorded them
    assert "decont: already complete" in _said(capsys)
    with pytest.raises(StageFailed, match="not found: .*nope"):  # one that is not there is still refused
        run_recipe(_recipe(tmp_path / "other", docs, {"benchmarks": ["{run_dir}/../nope"]}), dry_run=True)


@pytest.mark.parametrize(
    "stage, block",
    [
        ("rewrite", {"decont_benchmarks": ["{run_dir}/../bench"]}),
        ("eval", {"data_dir": "{run_dir}/../bench"}),
    ],
)
def test_a_later_stage_reading_beside_a_run_folder_not_made_yet_passes_the_checks(
    corpus, tmp_path, stage, block
):
    docs, _ = corpus
    run_dir = tmp_path / "run"
    stages = {"dedup": {"inputs": [str(docs)]}, stage: block}
    recipe = Recipe.model_validate({"name": "t", "output_dir": str(run_dir), "stages": stages})
    assert run_recipe(recipe, dry_run=True) == {}
    bad = {k: ["{run_dir}/../nope"] if isinstance(v, list) else "{run_dir}/../nope" for k, v in block.items()}
    recipe = Recipe.model_validate({"name": "t", "output_dir": str(run_dir), "stages": {stage: bad}})
    with pytest.raises(StageFailed, match="nope.* not found|not found: .*nope"):
        run_recipe(recipe, dry_run=True)
