"""A document stage killed after it wrote its work files but before its data/ (dedup's work/ids, decont's work/ and
contamination.jsonl) is an unfinished stage: it was read as a corpus, its work files as the input, exit 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mathmix.cli import app
from mathmix.paths import StageNotReadable, stage_data


def _killed(folder: Path, command: str, recipe_stage: bool = False) -> Path:
    """FOLDER as a dedup/decont killed before data/: its record, logs/ and work files, no summary.json."""
    (folder / "logs" / "1_exact_hashes").mkdir(parents=True)
    (folder / "work" / "ids").mkdir(parents=True)
    ids = folder / "work" / "ids" / "00000.ids.jsonl"
    ids.write_text("".join(json.dumps({"id": f"d{i}", "n": i}) + "\n" for i in range(5)))
    record = {"inputs": ["{run_dir}/web/data/000_00000.parquet"], "settings": {}, "command": command,
              "tasks": 1, "outputs": ["data", "logs", "rejects", "work"]}  # fmt: skip
    (folder / "job.json").write_text(json.dumps(record))
    if recipe_stage:
        (folder / "recipe-stage.json").write_text(
            json.dumps({"inputs": ["{run_dir}/web/data"], "settings": {}})
        )
        (folder / "upstream.json").write_text("{}")
    if command == "decont":
        (folder / "contamination.jsonl").write_text("")
    return folder


@pytest.mark.parametrize("command", ["dedup", "decont"])
@pytest.mark.parametrize("recipe_stage", [False, True])
def test_a_stage_killed_after_its_work_files_is_refused(tmp_path, command, recipe_stage):
    killed = _killed(tmp_path / command, command, recipe_stage)
    with pytest.raises(StageNotReadable, match="has not finished \\(no summary.json\\)"):
        stage_data(killed)


def test_the_dedup_command_refuses_it(tmp_path):
    killed = _killed(tmp_path / "dedup", "dedup", recipe_stage=True)
    result = CliRunner().invoke(app, ["dedup", str(killed), "-o", str(tmp_path / "dd")])
    assert result.exit_code == 2, result.output
    assert "has not finished (no summary.json)" in result.output and "finish it first" in result.output
    assert not (tmp_path / "dd").exists()


def test_a_recipe_stage_record_alone_marks_a_stage(tmp_path):
    # a recipe stage killed before its command wrote job.json, its work files already there
    killed = tmp_path / "dedup"
    (killed / "work").mkdir(parents=True)
    (killed / "work" / "x.jsonl").write_text("{}\n")
    (killed / "recipe-stage.json").write_text(json.dumps({"inputs": [], "settings": {}}))
    with pytest.raises(StageNotReadable):
        stage_data(killed)


def test_folders_that_are_no_unfinished_document_stage_are_read(tmp_path):
    # documents beside a job.json that is no document stage's record: read as they are
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.jsonl").write_text(json.dumps({"id": "a", "text": "x"}) + "\n")
    for record in ("{}", "not json", json.dumps({"inputs": [], "settings": {}, "outputs": ["checkpoints"]})):
        (docs / "job.json").write_text(record)
        assert stage_data(docs) == docs
    # a finished stage's folder is its data/ as before
    done = _killed(tmp_path / "done", "dedup")
    (done / "data").mkdir()
    (done / "summary.json").write_text("{}")
    assert stage_data(done) == done / "data"
