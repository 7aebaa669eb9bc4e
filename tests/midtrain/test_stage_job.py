"""A rerun into the same output folder with a changed recipe is refused with the change named (STAGE/job.json);
what a resume may change (checkpoint and log intervals, micro-batch size) is not a change."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from mathmix.cli import app


def _train(path):
    result = CliRunner().invoke(app, ["train", str(path), "--no-progress"])
    assert "Traceback" not in result.output
    return result, " ".join(result.output.split())


def test_changed_recipe_is_refused_done_or_killed(tiny_shards, tmp_path, mt):
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=2 * 256, checkpoint_every=1)
    assert _train(mt.write_recipe(tmp_path / "r.yaml", recipe))[0].exit_code == 0
    stage = tmp_path / "out" / "stable"
    assert json.loads((stage / "job.json").read_text())["settings"]["model.config.hidden_size"] == 32

    changed = json.loads(json.dumps(recipe))
    changed["model"]["config"]["hidden_size"] = 64
    changed["stages"][0]["tokens"] = 4 * 256
    result, message = _train(mt.write_recipe(tmp_path / "r2.yaml", changed))
    assert result.exit_code == 2, result.output  # it printed the old done.json
    assert (
        "settings.model.config.hidden_size: 32 -> 64" in message
        and "settings.stage.tokens: 512 -> 1024" in message
    )

    (stage / "done.json").unlink()  # as if killed after a checkpoint: DCP's size-mismatch traceback before
    result, message = _train(tmp_path / "r2.yaml")
    assert result.exit_code == 2 and "hidden_size: 32 -> 64" in message

    same = dict(
        recipe, trainer={**recipe["trainer"], "checkpoint_every": 5, "log_every": 2, "micro_batch_size": 2}
    )
    result, _ = _train(mt.write_recipe(tmp_path / "r3.yaml", same))
    assert result.exit_code == 0, result.output  # resumes and finishes


def test_checkpoint_of_another_model_without_a_record_is_one_line(tiny_shards, tmp_path, mt):
    """A folder written before job.json existed: the DCP size mismatch becomes a one-line error."""
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=2 * 256, checkpoint_every=1)
    assert _train(mt.write_recipe(tmp_path / "r.yaml", recipe))[0].exit_code == 0
    stage = tmp_path / "out" / "stable"
    (stage / "job.json").unlink()
    (stage / "done.json").unlink()
    recipe["model"]["config"]["hidden_size"] = 64
    result, message = _train(mt.write_recipe(tmp_path / "r.yaml", recipe))
    assert result.exit_code == 2, result.output
    assert "step_00000002: does not fit the recipe's model" in message
