"""Session 18 review of `mathmix train`: stage names that are paths, an empty stage list, an export.json's relative
checkpoint path read from another folder, and a rerun that did not say its finished stages were skipped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mathmix.cli import app


def _error(result) -> str:
    assert result.exit_code == 2, (result.output, result.exception)
    assert "Traceback" not in result.output
    return " ".join(result.output.split())  # rich wraps long lines at the terminal width


@pytest.mark.parametrize("name", ["../evil", "", ".", "..", "a/b", "a\\b", "/tmp/elsewhere", "x\x00y"])
@pytest.mark.parametrize("emit", [False, True])
def test_a_stage_name_that_is_not_a_plain_folder_name_is_refused(tiny_shards, tmp_path, mt, name, emit):
    """`name: ../evil` trained into a sibling of output_dir (an absolute name anywhere); `name: ""` wrote the
    stage's files straight into output_dir. Refused in one line naming the stage and the rule; nothing written."""
    out = tmp_path / "runs" / "out"
    recipe = mt.recipe(tiny_shards, out, stable_tokens=4 * 256, decay_tokens=256)
    recipe["stages"][0]["name"] = name
    recipe["stages"][1]["start_from"] = name
    path = mt.write_recipe(tmp_path / "r.yaml", recipe)
    args = ["--emit", "megatron", "--nproc", "1"] if emit else ["--no-progress"]
    result = CliRunner().invoke(app, ["train", str(path), *args])
    message = _error(result)
    assert len(result.output.strip().splitlines()) == 1  # one line (soft_wrap)
    assert f"stages.0.name: stage name {name!r} is not a plain folder name" in message, message
    assert not (tmp_path / "runs").exists() and not (tmp_path / "evil").exists()


@pytest.mark.parametrize("name", ["stable", "decay-short", "decay_2", "v1.5", "-x", "stage 1"])
def test_plain_stage_names_still_load(tiny_shards, tmp_path, mt, name):
    from midtrain.config import load_train_recipe

    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=256)
    recipe["stages"][0]["name"] = name
    loaded = load_train_recipe(mt.write_recipe(tmp_path / "r.yaml", recipe))
    assert loaded.stage_dir(name) == tmp_path / "out" / name


def test_an_empty_stage_list_is_refused(tiny_shards, tmp_path, mt):
    """`stages: []` was a silent no-op with exit 0 (a missing `stages:` is refused)."""
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=256)
    recipe["stages"] = []
    path = mt.write_recipe(tmp_path / "r.yaml", recipe)
    for args in (["--no-progress"], ["--emit", "megatron", "--nproc", "1"]):
        message = _error(CliRunner().invoke(app, ["train", str(path), *args]))
        assert "stages: empty; a train recipe trains at least one stage" in message, message
    assert not (tmp_path / "out").exists()


@pytest.fixture
def trained(tiny_shards, tmp_path, mt):
    recipe = mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=2 * 256, decay_tokens=256)
    recipe["model"]["tokenizer"] = str(mt.tokenizer(tmp_path / "tokenizer.json"))
    mt.train(recipe)
    return tmp_path / "run", mt.write_recipe(tmp_path / "r.yaml", recipe)


def _export(stage: str, out: str):
    return CliRunner().invoke(app, ["train", "export", stage, "-o", out, "--dtype", "float32"])


def test_an_export_records_its_checkpoint_resolved_and_is_replaced_from_another_folder(
    trained, tmp_path, monkeypatch
):
    """export.json stored the checkpoint path as typed (relative); a re-export of the same stage from another
    working folder read it against that folder and was refused as `another stage`."""
    run, _ = trained
    monkeypatch.chdir(tmp_path)
    result = _export("run/decay", "hf")
    assert result.exit_code == 0, result.output
    step = sorted((run / "decay" / "checkpoints").iterdir())[-1]
    assert json.loads((tmp_path / "hf" / "export.json").read_text())["checkpoint"] == str(step.resolve())
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    result = _export(str(run / "decay"), str(tmp_path / "hf"))
    assert result.exit_code == 0, result.output
    message = _error(_export(str(run / "stable"), str(tmp_path / "hf")))
    assert f"holds an export of {step.resolve()}, another stage than" in message, message


@pytest.mark.parametrize("typed_out", ["hf", "./sub/../hf", "ABS"])
def test_an_older_export_json_with_a_relative_checkpoint_is_read_from_its_own_folder(
    trained, tmp_path, monkeypatch, typed_out
):
    """An export.json written before paths were resolved holds the checkpoint (and -o) as typed, relative to the
    folder that export ran in: read that way, not against today's working folder; another stage still refused."""
    run, _ = trained
    monkeypatch.chdir(tmp_path)
    assert _export("run/decay", "hf").exit_code == 0
    step = sorted((run / "decay" / "checkpoints").iterdir())[-1]
    record = json.loads((tmp_path / "hf" / "export.json").read_text())
    record["checkpoint"] = os.path.relpath(step, tmp_path)  # what the older version wrote: as typed
    record["out_dir"] = str(tmp_path / "hf") if typed_out == "ABS" else typed_out
    (tmp_path / "hf" / "export.json").write_text(json.dumps(record))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    message = _error(_export(str(run / "stable"), str(tmp_path / "hf")))
    assert "another stage than" in message, message
    result = _export(str(run / "decay"), str(tmp_path / "hf"))
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "hf" / "export.json").read_text())["checkpoint"] == str(step.resolve())


def test_a_rerun_says_which_finished_stages_it_skipped(trained):
    """A rerun of a finished run printed each stage's table (its original `seconds` among them) and nothing said
    that nothing was trained. It still prints them, and is still a no-op."""
    run, recipe_path = trained
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
    result = CliRunner().invoke(app, ["train", str(recipe_path), "--no-progress"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for stage in ("stable", "decay"):
        assert f"stage {stage}: finished earlier ({run / stage / 'done.json'}), skipped" in text, text
        assert f"train {stage}" in text  # its summary table, as before
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()} == before


def _older_record(out: Path, checkpoint: str, out_dir: str) -> None:
    """export.json as the version before resolved paths wrote it: the checkpoint and -o as typed."""
    record = json.loads((out / "export.json").read_text())
    record["checkpoint"], record["out_dir"] = checkpoint, out_dir
    (out / "export.json").write_text(json.dumps(record))


def test_an_older_export_of_another_stage_made_from_inside_its_stage_folder_is_still_refused(
    trained, tmp_path, monkeypatch
):
    """Recorded `checkpoints/step_N` with an absolute -o: matching the recorded path's end alone took
    `checkpoints` as the stage, which ends every stage's folder, and replaced another stage's export."""
    run, _ = trained
    out = tmp_path / "hf"
    assert _export(str(run / "decay"), str(out)).exit_code == 0
    step = sorted((run / "decay" / "checkpoints").iterdir())[-1]
    _older_record(out, f"checkpoints/{step.name}", str(out))
    monkeypatch.chdir(tmp_path)
    message = _error(_export(str(run / "stable"), str(out)))
    assert "another stage than" in message, message
    monkeypatch.chdir(run / "decay")  # the same stage from the folder that export ran in: replaced
    assert _export(str(run / "decay"), str(out)).exit_code == 0


def test_an_older_export_made_inside_the_checkpoints_folder_is_replaced_from_there(
    trained, tmp_path, monkeypatch
):
    """Recorded `step_N` (exported from inside checkpoints/): its folder `.` has no name to match, and a re-export
    of the same checkpoint from the same folder was refused as `another stage than step_N`."""
    run, _ = trained
    out = tmp_path / "hf"
    step = sorted((run / "decay" / "checkpoints").iterdir())[-1]
    assert _export(str(step), str(out)).exit_code == 0
    _older_record(out, step.name, str(out))
    monkeypatch.chdir(step.parent)
    result = _export(step.name, str(out))
    assert result.exit_code == 0, result.output
