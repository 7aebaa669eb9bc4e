"""cli_util: refused commands leave no empty folders behind (one they did not make stays); one-line validation errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mathmix.cli import app


def _docs(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "a", "text": "x + 1 = 2"}) + "\n")
    return docs


def test_a_refused_run_removes_the_output_folders_it_made(tmp_path):
    out = tmp_path / "new" / "nested" / "out"
    result = CliRunner().invoke(
        app, ["decont", str(_docs(tmp_path)), "-o", str(out), "--benchmarks", str(tmp_path / "missing")]
    )
    assert result.exit_code == 2 and "not found" in result.output
    assert not (tmp_path / "new").exists()  # every level it made is gone


def test_a_refused_run_keeps_a_folder_that_was_there(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    result = CliRunner().invoke(
        app, ["shards", "build", str(_docs(tmp_path)), "-o", str(out), "--tokenizer", str(tmp_path / "none")]
    )
    assert result.exit_code == 2 and "tokenizer not found" in result.output
    assert out.is_dir()


def test_a_refusal_leaves_the_empty_folders_of_an_earlier_command_in_the_same_process(tmp_path):
    from mathmix.cli_util import check_output

    check_output(tmp_path / "earlier")  # a command that made its folder and ended without fail()
    result = CliRunner().invoke(
        app,
        ["decont", str(_docs(tmp_path)), "-o", str(tmp_path / "later"), "--benchmarks", str(tmp_path / "no")],
    )
    assert result.exit_code == 2
    assert (tmp_path / "earlier").is_dir() and not (tmp_path / "later").exists()


def test_a_recipe_stage_folder_without_a_job_record_is_not_overwritten(tmp_path):
    stage = tmp_path / "run" / "shards"  # as `mathmix run` leaves its shards, eval, audit or classifier stage
    stage.mkdir(parents=True)
    (stage / "recipe-stage.json").write_text("{}")
    (stage / "summary.json").write_text('{"docs_in": 1}')
    result = CliRunner().invoke(app, ["dedup", str(_docs(tmp_path)), "-o", str(stage)])
    assert result.exit_code == 2 and "a stage folder of a `mathmix run` recipe" in result.output
    assert (stage / "summary.json").read_text() == '{"docs_in": 1}'


def test_a_refused_classifier_train_removes_the_model_folders_it_made(tmp_path):
    model = tmp_path / "models" / "math" / "model.bin"
    result = CliRunner().invoke(
        app,
        [
            "classifier",
            "train",
            "-p",
            str(tmp_path / "no-pos"),
            "-n",
            str(tmp_path / "no-neg"),
            "-o",
            str(model),
        ],
    )
    assert result.exit_code == 2 and not (tmp_path / "models").exists()


def test_a_recipe_wide_error_does_not_quote_the_whole_recipe():
    from pydantic import BaseModel, ValidationError, model_validator

    from mathmix.cli_util import format_validation_errors

    class Recipe(BaseModel):
        stages: list[str]
        lr: float = 1.0

        @model_validator(mode="after")
        def _unique(self):
            if len(set(self.stages)) != len(self.stages):
                raise ValueError(f"stage names must be unique, got {self.stages}")
            return self

    with pytest.raises(ValidationError) as dup:
        Recipe.model_validate({"stages": ["s", "s"], "lr": 1.0})
    assert format_validation_errors(dup.value) == "stage names must be unique, got ['s', 's']"
    with pytest.raises(ValidationError) as bad:
        Recipe.model_validate({"stages": ["s"], "lr": "abc"})
    assert format_validation_errors(bad.value).startswith(
        "lr: "
    ) and "(got 'abc')" in format_validation_errors(bad.value)


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys):
    import typer

    import mathmix.cli as cli

    stub = typer.Typer()

    @stub.command()
    def work() -> None:
        raise KeyboardInterrupt  # what Ctrl-C raises in a command

    monkeypatch.setattr(cli, "app", stub)
    monkeypatch.setattr("sys.argv", ["mathmix"])
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert done.value.code == 130 and "interrupted: finished work is kept" in capsys.readouterr().err


def test_a_run_folder_is_not_an_output_folder(tmp_path):
    run = tmp_path / "run"
    for stage in ("web", "dedup"):
        (run / stage / "data").mkdir(parents=True)
        (run / stage / "summary.json").write_text("{}")
    result = CliRunner().invoke(app, ["dedup", str(_docs(tmp_path)), "-o", str(run)])
    assert result.exit_code == 2 and "holds stage folders (dedup, web)" in " ".join(result.output.split())
    assert sorted(p.name for p in run.iterdir()) == ["dedup", "web"]
