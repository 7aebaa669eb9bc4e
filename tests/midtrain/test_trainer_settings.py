"""Trainer settings out of range, a device that is not there, and outputs written among inputs: each is a one-line
error (exit 2) before anything is written, where they used to train wrongly or fail after job.json was written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mathmix.cli import app


def _train(recipe_path: Path, *args: str):
    result = CliRunner().invoke(app, ["train", str(recipe_path), "--no-progress", *args])
    assert "Traceback" not in result.output
    return result


def _error(result) -> str:
    assert result.exit_code == 2, (result.output, result.exception)
    return " ".join(result.output.split())  # rich wraps long lines at the terminal width


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        # gradient ascent with exit 0: torch's clip_grad_norm_ with a negative max_norm flips every gradient
        ("grad_clip", -1.0, "trainer.grad_clip: Input should be greater than or equal to 0"),
        ("weight_decay", -0.5, "trainer.weight_decay: Input should be greater than or equal to 0"),
        # these failed inside torch's AdamW, as tracebacks after job.json was written
        ("betas", [0.9, 1.5], "trainer.betas.1: Input should be less than 1"),
        ("betas", [-0.1, 0.95], "trainer.betas.0: Input should be greater than or equal to 0"),
        ("eps", -1.0, "trainer.eps: Input should be greater than 0"),
        ("eps", 0.0, "trainer.eps: Input should be greater than 0"),
        ("lr", float("inf"), "trainer.lr: Input should be a finite number"),
        ("grad_clip", float("nan"), "trainer.grad_clip: Input should be a finite number"),
        ("peak_tflops", 0, "trainer.peak_tflops: Input should be greater than 0"),
        # trained here, but the printed Megatron command failed on it (numpy seeds are >= 0)
        ("seed", -1, "trainer.seed: Input should be greater than or equal to 0"),
    ],
)
def test_optimizer_settings_out_of_range_are_one_line_and_write_nothing(
    tiny_shards, tmp_path, mt, key, value, expected
):
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=256, **{key: value})
    message = _error(_train(mt.write_recipe(tmp_path / "r.yaml", recipe)))
    assert expected in message and len(message) < 400, message
    assert not (tmp_path / "out").exists()


def test_grad_clip_0_means_no_clipping(tiny_shards, tmp_path, mt):
    """grad_clip: 0 zeroed every gradient (clip_grad_norm_ with max_norm 0): the weights never moved, exit 0. It
    means no clipping now (Megatron's --clip-grad 0): the same run as one whose clip is never reached."""
    runs = {}
    for clip in (0.0, 1e30):
        recipe = mt.recipe(tiny_shards, tmp_path / f"clip{clip:g}", stable_tokens=3 * 256, grad_clip=clip)
        runs[clip] = mt.train(recipe)["stable"]
    unclipped, huge = runs[0.0], runs[1e30]
    assert [r["loss"] for r in unclipped] == [r["loss"] for r in huge]
    assert [r["grad_norm"] for r in unclipped] == [r["grad_norm"] for r in huge]
    assert unclipped[-1]["loss"] < unclipped[0]["loss"]  # it learns (with every gradient zeroed, it did not)


def test_cuda_without_a_gpu_is_one_line_before_anything_is_written(tiny_shards, tmp_path, mt, monkeypatch):
    """`device: cuda` on a CPU-only machine was an AttributeError traceback from setup_ranks, with
    OUT/stable/job.json left behind."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=256, device="cuda")
    path = mt.write_recipe(tmp_path / "r.yaml", recipe)
    message = _error(_train(path))
    assert "trainer.device: cuda, but torch finds no CUDA GPU here" in message, message
    assert not (tmp_path / "out").exists()
    # more processes on a node than its GPUs
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    message = _error(_train(path, "--nproc", "2"))
    assert "trainer.device: cuda with 2 processes on this node, but torch finds 1 GPU(s)" in message, message
    assert not (tmp_path / "out").exists()


def test_a_stage_that_fails_to_set_up_leaves_no_job_record(tiny_shards, tmp_path, mt, monkeypatch):
    """job.json was written before the device and model were set up: any failure there left a folder holding it."""
    from midtrain import trainer
    from midtrain.config import TrainRecipe

    def broken(device_pref):
        raise RuntimeError("no device")

    monkeypatch.setattr(trainer, "setup_ranks", broken)
    config = TrainRecipe.model_validate(mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=256))
    with pytest.raises(RuntimeError, match="no device"):
        trainer.train_stage(config, "stable", progress=False)
    assert not (tmp_path / "out" / "stable" / "job.json").exists()
    monkeypatch.undo()
    trainer.train_stage(config, "stable", progress=False)  # set up: recorded, and trained
    assert (tmp_path / "out" / "stable" / "job.json").is_file()
    assert (tmp_path / "out" / "stable" / "done.json").is_file()


@pytest.mark.parametrize("key", ["attention_dropout", "hidden_dropout"])
def test_a_dropout_out_of_range_is_one_line(tiny_shards, tmp_path, mt, key):
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=256)
    recipe["model"]["config"][key] = 1.5 if key == "attention_dropout" else 1.0
    message = _error(_train(mt.write_recipe(tmp_path / "r.yaml", recipe)))
    assert f"model.config.{key} 1" in message and "a dropout probability is at least 0 and below 1" in message
    assert not (tmp_path / "out").exists()


def test_output_inside_a_shard_folder_it_reads_is_refused(tiny_shards, tmp_path, mt):
    """`-o` a shard folder put stable/ (blend_index, checkpoints) among its .bin/.idx files."""
    path = mt.write_recipe(tmp_path / "r.yaml", mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=256))
    before = sorted(p.name for p in (tiny_shards / "b").iterdir())
    for out in (tiny_shards / "b", tiny_shards / "b" / "run"):
        message = _error(_train(path, "-o", str(out)))
        assert f"output_dir {out} is inside the shard folder" in message, message
        assert "(stage stable, source" in message
    assert sorted(p.name for p in (tiny_shards / "b").iterdir()) == before
    assert not (tiny_shards / "b" / "run").exists()


def test_a_folder_given_as_recipe_is_named_a_folder(tmp_path):
    message = _error(_train(tmp_path))
    assert f"{tmp_path}: a folder, not a train recipe" in message, message


def test_a_mixture_total_is_noted_as_overridden_and_budgets_name_the_stage_tokens(tiny_shards, tmp_path, mt):
    """The stage's `tokens` is the blend's total: a mixture file's own total_tokens was dropped without a word, and
    budgets over the stage's tokens were reported as exceeding "total_tokens", the mixture file's key."""
    import yaml

    mixture = dict(mt.recipe(tiny_shards, tmp_path / "out")["stages"][0]["mixture"], total_tokens=100_000)
    (tmp_path / "mix.yaml").write_text(yaml.safe_dump(mixture))
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=256)
    recipe["stages"][0]["mixture"] = str(tmp_path / "mix.yaml")
    result = _train(mt.write_recipe(tmp_path / "r.yaml", recipe))
    assert result.exit_code == 0, result.output
    assert "note: stage stable: its mixture's total_tokens 100,000 is not used: a stage blends its own tokens " \
        "(256)" in " ".join(result.output.split())  # fmt: skip

    mixture["sources"][1] = {"name": "b", "paths": [str(tiny_shards / "b")], "tokens": 999}
    (tmp_path / "mix.yaml").write_text(yaml.safe_dump(mixture))
    recipe["output_dir"] = str(tmp_path / "out2")
    message = _error(_train(mt.write_recipe(tmp_path / "r.yaml", recipe)))
    assert "stage stable: token budgets (999) exceed stage stable's tokens (256)" in message, message
    assert "total_tokens" not in message


def test_export_refuses_a_folder_that_is_not_its_own(tiny_shards, tmp_path, mt):
    """`train export -o` wrote config.json and model.safetensors into any folder, a shard folder included."""
    recipe = mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=2 * 256, decay_tokens=256)
    recipe["model"]["tokenizer"] = str(mt.tokenizer(tmp_path / "tokenizer.json"))
    mt.train(recipe)
    run = tmp_path / "run"

    def export(stage: str, out: Path):
        return CliRunner().invoke(
            app, ["train", "export", str(run / stage), "-o", str(out), "--dtype", "float32"]
        )

    shard = tiny_shards / "a"
    before = sorted(p.name for p in shard.iterdir())
    message = _error(export("decay", shard))
    assert f"{shard}: holds files not written by train export (part.bin, part.idx)" in message, message
    assert sorted(p.name for p in shard.iterdir()) == before
    message = _error(export("decay", run / "decay"))  # the stage folder itself
    assert "holds files not written by train export" in message
    step = sorted((run / "decay" / "checkpoints").iterdir())[-1]
    message = _error(export("decay", step / "hf"))  # pruned with the checkpoint
    assert "is inside the checkpoint folder" in message and not (step / "hf").exists()

    out = tmp_path / "hf"
    (out).mkdir()  # an empty folder is fine
    assert export("decay", out).exit_code == 0
    first = json.loads((out / "export.json").read_text())
    result = export("decay", out)  # the same stage again: replaced
    assert result.exit_code == 0, result.output
    assert json.loads((out / "export.json").read_text())["files"] == first["files"]
    message = _error(export("stable", out))  # another stage's export
    assert f"{out}: holds an export of {first['checkpoint']}, another stage than" in message, message
    (out / "notes.txt").write_text("mine")
    message = _error(export("decay", out))
    assert "holds files not written by train export (notes.txt)" in message, message
    assert (out / "notes.txt").read_text() == "mine"
