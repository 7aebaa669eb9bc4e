"""A rerun into the same output folder with a changed recipe is refused with the change named (STAGE/job.json);
what a resume may change (checkpoint and log intervals, micro-batch size) is not a change."""

from __future__ import annotations

import json

import pytest
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


def _run_shards(run, mt, seed: int) -> None:
    from shards.indexed import write_indexed

    for i, name in enumerate(("a", "b")):
        (run / "shards" / name).mkdir(parents=True)
        write_indexed(run / "shards" / name / "part", mt.markov_documents(300, seed + i), vocab_size=64)


def test_a_recipe_copy_on_other_shards_does_not_resume(tmp_path, mt):
    """Paths inside run_dir are recorded as `{run_dir}/...`, so a recipe copy with another run_dir (other shards)
    resumed the saved stream position on another blend: the shards' identity is recorded and compared too."""
    import shutil
    from pathlib import Path

    run1, run2 = tmp_path / "run1", tmp_path / "run2"
    _run_shards(run1, mt, seed=1)
    _run_shards(run2, mt, seed=5)
    recipe = mt.recipe(Path("{run_dir}/shards"), tmp_path / "out", stable_tokens=2 * 256, checkpoint_every=1)
    recipe["run_dir"] = str(run1)
    assert _train(mt.write_recipe(tmp_path / "r.yaml", recipe))[0].exit_code == 0
    stage = tmp_path / "out" / "stable"
    (stage / "done.json").unlink()  # as if killed after its last checkpoint
    job = (stage / "job.json").read_text()
    settings = json.loads(job)["settings"]
    assert settings["mixture.sources.a.paths"] == ["{run_dir}/shards/a"]
    assert settings["shards.a.documents"] == 300 and len(settings["shards.a.sha256"]) == 16

    result, message = _train(mt.write_recipe(tmp_path / "r2.yaml", dict(recipe, run_dir=str(run2))))
    assert result.exit_code == 2, result.output
    assert "settings.shards.a.sha256:" in message and "settings.shards.b.sha256:" in message
    assert (stage / "job.json").read_text() == job and not (stage / "done.json").exists()

    shutil.copytree(run1, tmp_path / "moved")  # the same shards elsewhere: the same job, it resumes
    result, _ = _train(mt.write_recipe(tmp_path / "r3.yaml", dict(recipe, run_dir=str(tmp_path / "moved"))))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("source", ["a", "shards"])  # a source named `shards` is not a shard identity
def test_a_record_from_before_shard_identities_still_resumes(tiny_shards, tmp_path, mt, source):
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=2 * 256, checkpoint_every=1)
    recipe["stages"][0]["mixture"]["sources"][0]["name"] = source
    assert _train(mt.write_recipe(tmp_path / "r.yaml", recipe))[0].exit_code == 0
    stage = tmp_path / "out" / "stable"
    (stage / "done.json").unlink()
    job = json.loads((stage / "job.json").read_text())
    job["settings"] = {k: v for k, v in job["settings"].items() if not k.startswith("shards.")}
    assert any(k.startswith("mixture.sources.") for k in job["settings"])
    (stage / "job.json").write_text(json.dumps(job))
    result, _ = _train(tmp_path / "r.yaml")
    assert result.exit_code == 0, result.output


def test_shard_identity_is_what_the_shards_hold(tiny_shards, tmp_path):
    import shutil

    from midtrain.stage_job import shard_identity
    from shards.manifest import file_entry, write_manifest

    a = shard_identity([str(tiny_shards / "a")])
    assert a is not None and a["documents"] == 300 and a["tokens"] > 300
    shutil.copytree(tiny_shards / "a", tmp_path / "moved")
    assert shard_identity([str(tmp_path / "moved")]) == a == shard_identity([str(tiny_shards / "a" / "part")])
    assert shard_identity([str(tiny_shards / "b")]) != a
    assert shard_identity([str(tmp_path / "gone")]) is None
    entry = file_entry(tmp_path / "moved", "part", documents=300, tokens=a["tokens"])
    write_manifest(
        tmp_path / "moved", [entry], tokenizer="t", tokenizer_sha256="abc", vocab_size=64, eos_id=0
    )
    assert shard_identity([str(tmp_path / "moved")])["tokenizer_sha256"] == "abc"


def test_a_decay_branch_run_alone_is_refused_when_its_start_stage_was_trained_otherwise(
    tiny_shards, tmp_path, mt
):
    """`--stage decay` after the recipe's stable stage changed: the branch trained from the old stable checkpoint
    and recorded the new stable settings as where it started."""
    recipe = mt.recipe(
        tiny_shards, tmp_path / "out", stable_tokens=2 * 256, decay_tokens=256, checkpoint_every=1
    )
    path = mt.write_recipe(tmp_path / "r.yaml", recipe)
    result = CliRunner().invoke(app, ["train", str(path), "--no-progress", "--stage", "stable"])
    assert result.exit_code == 0, result.output
    changed = json.loads(json.dumps(recipe))
    changed["stages"][0]["warmup_tokens"] = 256
    changed["stages"][0]["mixture"]["sources"][0]["weight"] = 0.5
    path = mt.write_recipe(tmp_path / "r2.yaml", changed)
    result = CliRunner().invoke(app, ["train", str(path), "--no-progress", "--stage", "decay"])
    message = " ".join(result.output.split())
    assert result.exit_code == 2 and "starts from stage stable" in message, result.output
    assert "warmup_tokens: 512 -> 256" in message and not (tmp_path / "out" / "decay").exists()
    result = CliRunner().invoke(app, ["train", str(tmp_path / "r.yaml"), "--no-progress", "--stage", "decay"])
    assert result.exit_code == 0, result.output  # the recipe the stable stage was trained with


def test_a_decay_floor_changed_after_the_stable_stage_is_no_change_to_it(tiny_shards, tmp_path, mt):
    """trainer.min_lr_ratio is never reached in a stable stage: a decay branch added with another floor was refused
    because the finished stable stage 'changed'; a stable record that still holds the key keeps matching."""
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=2 * 256, checkpoint_every=1)
    assert _train(mt.write_recipe(tmp_path / "r.yaml", recipe))[0].exit_code == 0
    with_decay = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=2 * 256, decay_tokens=256,
                           checkpoint_every=1, min_lr_ratio=0.2)  # fmt: skip
    result, _ = _train(mt.write_recipe(tmp_path / "r2.yaml", with_decay))
    assert result.exit_code == 0 and (tmp_path / "out" / "decay" / "done.json").is_file(), result.output
    decay = json.loads((tmp_path / "out" / "decay" / "job.json").read_text())["settings"]
    assert decay["trainer.min_lr_ratio"] == 0.2  # a decay stage's floor is still part of its job
    job = tmp_path / "out" / "stable" / "job.json"
    record = json.loads(job.read_text())
    assert "trainer.min_lr_ratio" not in record["settings"]
    record["settings"]["trainer.min_lr_ratio"] = 0.2  # as written before the key stopped counting
    job.write_text(json.dumps(record))
    assert _train(tmp_path / "r2.yaml")[0].exit_code == 0
    changed = json.loads(json.dumps(with_decay))
    changed["trainer"]["min_lr_ratio"] = 0.3
    result, message = _train(mt.write_recipe(tmp_path / "r3.yaml", changed))
    assert result.exit_code == 2 and "settings.trainer.min_lr_ratio: 0.2 -> 0.3" in message  # the decay's
