"""`mathmix run` checks, before its first stage and in --dry-run, what later stages read that exists before the run
(web's math model, shards' tokenizer) and that no stage writes inside its own input folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mathmix.cli import app


def _out(result) -> str:
    return " ".join(result.output.split())


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": str(i), "text": f"Let x = {i} and y = {i * i}."}) + "\n"
                            for i in range(5)))  # fmt: skip
    return docs


def _pages(tmp_path: Path) -> Path:
    pages = tmp_path / "pages"
    pages.mkdir(exist_ok=True)
    (pages / "a.html").write_text("<html><body><p>Let x = 1.</p></body></html>")
    return pages


def _recipe(tmp_path: Path, run_dir: Path, stages: str) -> Path:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: t\noutput_dir: {run_dir}\nexecutor: {{tasks: 1}}\nstages:\n{stages}")
    return recipe


def _dry_run_and_run_refuse(recipe: Path, run_dir: Path, said: str) -> None:
    for dry in (["--dry-run"], []):
        result = CliRunner().invoke(app, ["run", str(recipe), *dry])
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), (dry, result.output)
        assert said in _out(result), (dry, result.output)
        assert "will run" not in result.output
        # no stage ran: "finished stages are kept" said otherwise
        assert "nothing was run" in _out(result) and "finished stages are kept" not in _out(result)
    assert not run_dir.exists()  # refused before any stage ran: nothing written


@pytest.mark.parametrize("model", ["missing", "jsonl", "folder"])
def test_a_bad_math_model_in_a_recipe_is_refused_before_any_stage(tmp_path, model):
    # /nope.bin said `will run` in --dry-run; the run failed inside the web stage, at its first scored page
    path = {"missing": tmp_path / "nope.bin", "jsonl": _docs(tmp_path), "folder": tmp_path}[model]
    run_dir = tmp_path / "run"
    recipe = _recipe(tmp_path, run_dir, f"  dedup: {{inputs: [{_docs(tmp_path)}]}}\n  web: {{inputs: [{_pages(tmp_path)}], math_model: {path}}}\n")  # fmt: skip
    said = {
        "missing": "no such model file",
        "jsonl": "not a readable fastText model",
        "folder": "is a folder",
    }
    _dry_run_and_run_refuse(recipe, run_dir, f"stage web: {path}: {said[model]}")


def test_a_math_model_the_classifier_stage_will_write_is_not_checked(tmp_path):
    run_dir = tmp_path / "run"
    recipe = _recipe(tmp_path, run_dir, f"  classifier: {{}}\n  web: {{inputs: [{_pages(tmp_path)}], math_model: '{{run_dir}}/classifier/model.bin'}}\n")  # fmt: skip
    result = CliRunner().invoke(app, ["run", str(recipe), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert _out(result).count("will run") == 2


def test_a_missing_blocklist_is_refused_before_any_stage(tmp_path):
    run_dir = tmp_path / "run"
    recipe = _recipe(
        tmp_path, run_dir, f"  web: {{inputs: [{_pages(tmp_path)}], blocklist: {tmp_path / 'nope.txt'}}}\n"
    )
    _dry_run_and_run_refuse(
        recipe, run_dir, f"stage web: {tmp_path / 'nope.txt'}: URL blocklist file not found"
    )


def test_an_output_folder_inside_a_stage_input_is_refused_by_the_dry_run_too(tmp_path):
    # the dry run said `will run`, the run `stage web: RUN/web is inside the input folder RUN` (exit 2)
    run_dir = tmp_path / "x" / "mixed"
    recipe = _recipe(tmp_path, run_dir, f"  web: {{inputs: [{run_dir}]}}\n")
    _dry_run_and_run_refuse(
        recipe, run_dir, f"stage web: {run_dir / 'web'} is inside the input folder {run_dir}"
    )
    # a later stage's too, before the earlier stage runs
    recipe = _recipe(tmp_path, run_dir, f"  web: {{inputs: [{_pages(tmp_path)}]}}\n  dedup: {{inputs: ['{{run_dir}}']}}\n")  # fmt: skip
    _dry_run_and_run_refuse(recipe, run_dir, f"stage dedup: {run_dir / 'dedup'} is inside the input folder")
    # a file in the run folder is no folder to find the output in
    docs = _docs(tmp_path)
    recipe = _recipe(tmp_path, tmp_path, f"  dedup: {{inputs: [{docs}]}}\n")
    assert CliRunner().invoke(app, ["run", str(recipe), "--dry-run"]).exit_code == 0


def test_a_missing_shards_tokenizer_is_refused_before_dedup_runs(tmp_path):
    # the run finished dedup (hours on real data) before `tokenizer not found`
    run_dir = tmp_path / "run"
    recipe = _recipe(tmp_path, run_dir, f"  dedup: {{inputs: [{_docs(tmp_path)}]}}\n  shards: {{tokenizer: {tmp_path / 'nope'}}}\n")  # fmt: skip
    _dry_run_and_run_refuse(recipe, run_dir, f"stage shards: tokenizer not found: {tmp_path / 'nope'}")
    empty = tmp_path / "tok"
    empty.mkdir()
    recipe = _recipe(tmp_path, run_dir, f"  dedup: {{inputs: [{_docs(tmp_path)}]}}\n  shards: {{tokenizer: {empty}}}\n")  # fmt: skip
    _dry_run_and_run_refuse(
        recipe, run_dir, f"stage shards: {empty}: no tokenizer.json or tokenizer_config.json"
    )


def test_a_good_tokenizer_and_a_hub_name_pass(tmp_path):
    from shards.tokenizer import train_tokenizer

    tok = train_tokenizer([f"x = {i}" for i in range(50)], tmp_path / "tok", vocab_size=300)
    for name in (str(tok), "some-org/some-tokenizer"):  # a hub name may be fetched when the stage runs
        recipe = _recipe(tmp_path, tmp_path / "run", f"  dedup: {{inputs: [{_docs(tmp_path)}]}}\n  shards: {{tokenizer: {name}}}\n")  # fmt: skip
        result = CliRunner().invoke(app, ["run", str(recipe), "--dry-run"])
        assert result.exit_code == 0, result.output


def test_a_folder_given_as_the_recipe_is_named_as_one(tmp_path):
    result = CliRunner().invoke(app, ["run", str(tmp_path)])
    assert result.exit_code == 2 and f"error: {tmp_path}: is a folder; name the recipe YAML file" in _out(
        result
    )


def test_a_tokenizer_path_with_a_tilde_is_refused_as_the_stage_would_fail_on_it(tmp_path, monkeypatch):
    # the check expanded `~` and passed; the stage does not expand it and failed later ("Repo id must use ...")
    from pipelines.prerun_checks import check_tokenizer

    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{}")
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="is not expanded"):
        check_tokenizer("~/tok")
    check_tokenizer(str(tmp_path / "tok"))


def test_the_math_model_is_loaded_once_per_version_of_its_file(tmp_path, monkeypatch):
    # mathmix web and mathmix run loaded it twice before the first page (check, then the stage's own check)
    import classifiers.model
    from pipelines.prerun_checks import check_math_model

    loads = []
    monkeypatch.setattr(classifiers.model, "MathClassifier", lambda path: loads.append(path))
    model = tmp_path / "model.bin"
    model.write_bytes(b"x" * 10)
    check_math_model(model)
    check_math_model(str(model))
    assert len(loads) == 1
    model.write_bytes(b"y" * 11)  # another file at the same path is checked again
    check_math_model(model)
    assert len(loads) == 2
