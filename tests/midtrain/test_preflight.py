"""`mathmix train` checks every stage it will run before any of them trains: stage names, start checkpoints,
shard paths, manifests against the model, the tokenizer. Each failure is one line and nothing is written."""

from __future__ import annotations

import copy
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
    assert result.exit_code == 2, result.output
    return " ".join(result.output.split())  # rich wraps long lines at the terminal width


def _manifest(folder: Path, **info) -> None:
    """A manifest.json for the bare `part` shard the fixture wrote, as `shards build` writes one."""
    from shards.manifest import file_entry, write_manifest

    entry = file_entry(folder, "part", documents=300, tokens=0)
    write_manifest(folder, [entry], **{"name": folder.name, "dtype": "uint16", **info})


def test_missing_shards_of_a_later_stage_fail_before_the_first_trains(tiny_shards, tmp_path, mt):
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=2 * 256, decay_tokens=256)
    recipe["stages"][1]["mixture"] = {
        "sources": [{"name": "b", "paths": [str(tiny_shards / "qaa")], "weight": 1}]
    }
    message = _error(_train(mt.write_recipe(tmp_path / "bad.yaml", recipe)))
    assert "stage decay: source b:" in message and "qaa" in message
    assert not (tmp_path / "out" / "stable").exists()  # nothing trained, nothing written


def test_unknown_stage_is_named_with_the_recipe_stages(tiny_shards, tmp_path, mt):
    path = mt.write_recipe(tmp_path / "r.yaml", mt.recipe(tiny_shards, tmp_path / "out", decay_tokens=256))
    message = _error(_train(path, "--stage", "nonexist"))
    assert "nonexist" in message and "stable, decay" in message
    assert not (tmp_path / "out").exists()


def test_decay_alone_before_its_start_stage_fails_before_writing(tiny_shards, tmp_path, mt):
    path = mt.write_recipe(tmp_path / "r.yaml", mt.recipe(tiny_shards, tmp_path / "out", decay_tokens=256))
    message = _error(_train(path, "--stage", "decay"))
    assert "stage decay starts from stage 'stable', which has not finished" in message
    assert not (tmp_path / "out").exists()  # no blend_index/ left behind


def test_shards_of_a_larger_vocabulary_than_the_model_are_refused(tiny_shards, tmp_path, mt):
    _manifest(tiny_shards / "a", tokenizer="tok", vocab_size=2048, eos_id=0)  # the model has 64
    path = mt.write_recipe(tmp_path / "r.yaml", mt.recipe(tiny_shards, tmp_path / "out"))
    message = _error(_train(path))
    assert f"{tiny_shards / 'a' / 'manifest.json'}: shards of a 2048-token vocabulary" in message
    assert "vocab_size 64" in message and not (tmp_path / "out").exists()


def test_sources_built_with_different_tokenizers_are_refused(tiny_shards, tmp_path, mt):
    _manifest(tiny_shards / "a", tokenizer="tok", vocab_size=64, eos_id=0)
    _manifest(tiny_shards / "b", tokenizer="tok", vocab_size=64, eos_id=1)
    path = mt.write_recipe(tmp_path / "r.yaml", mt.recipe(tiny_shards, tmp_path / "out"))
    message = _error(_train(path))
    assert f"{tiny_shards / 'b' / 'manifest.json'}: eos_id 1" in message and not (tmp_path / "out").exists()


def test_a_tokenizer_that_does_not_load_fails_before_training(tiny_shards, tmp_path, mt, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    recipe = mt.recipe(tiny_shards, tmp_path / "out")
    recipe["model"]["tokenizer"] = str(tmp_path / "tokenizr")  # a typo
    message = _error(_train(mt.write_recipe(tmp_path / "r.yaml", recipe)))
    assert f"model.tokenizer {tmp_path / 'tokenizr'}: cannot be loaded" in message
    assert not (tmp_path / "out").exists()


def test_relative_tokenizer_and_run_dir_are_made_absolute(tmp_path, monkeypatch):
    """A checkpoint records the tokenizer path; relative to the training folder, export elsewhere failed."""
    from midtrain.config import load_train_recipe

    (tmp_path / "tok").mkdir()
    raw = {"name": "r", "run_dir": "run", "model": {"config": {}, "tokenizer": "{run_dir}/../tok"},
           "stages": [{"name": "s", "kind": "stable", "tokens": 1,
                       "mixture": {"sources": [{"name": "a", "paths": ["{run_dir}/a"], "weight": 1}]}}]}  # fmt: skip
    (tmp_path / "r.yaml").write_text(json.dumps(raw))
    monkeypatch.chdir(tmp_path)
    recipe = load_train_recipe("r.yaml")
    monkeypatch.chdir("/")
    assert recipe.model.tokenizer == str(tmp_path / "tok")
    assert recipe.stages[0].build_mixture(recipe.run_dir).sources[0].paths == [str(tmp_path / "run" / "a")]


def test_a_finished_run_reruns_without_its_shards(tiny_shards, tmp_path, mt):
    """Finished stages need nothing: a rerun prints them even once the shards are gone."""
    import shutil

    path = mt.write_recipe(
        tmp_path / "r.yaml", mt.recipe(tiny_shards, tmp_path / "out", 256, decay_tokens=256)
    )
    assert _train(path).exit_code == 0
    shutil.rmtree(tiny_shards)
    result = _train(path, "--stage", "decay")
    assert result.exit_code == 0, result.output


def test_shards_of_another_tokenizer_of_the_same_size_are_refused(tiny_shards, tmp_path, mt):
    """Same vocabulary size, other ids: the size check passed and the wrong tokenizer was exported."""
    import shutil

    from midtrain.config import TrainRecipe
    from midtrain.preflight import check_run
    from shards.tokenizer import load_tokenizer

    built = tmp_path / "built"
    built.mkdir()
    mt.tokenizer(built / "tokenizer.json")
    loaded = load_tokenizer(built, "<eos>")  # what `shards build` records
    for name in ("a", "b"):
        _manifest(tiny_shards / name, tokenizer=str(built), tokenizer_sha256=loaded.fingerprint,
                  vocab_size=loaded.vocab_size, eos_id=0)  # fmt: skip
    other = mt.other_tokenizer(built / "tokenizer.json", tmp_path / "other.json")
    recipe = mt.recipe(tiny_shards, tmp_path / "out")
    recipe["model"]["tokenizer"] = str(other)
    message = _error(_train(mt.write_recipe(tmp_path / "r.yaml", recipe)))
    assert f"model.tokenizer {other}: fingerprint " in message
    assert f"{tiny_shards / 'a' / 'manifest.json'} was built with another tokenizer ({built}" in message
    assert f"tokenizer_sha256 {loaded.fingerprint}" in message and not (tmp_path / "out").exists()

    # the same tokenizer anywhere else (its tokenizer.json alone, or a copy of its folder) is the same tokenizer
    shutil.copytree(built, tmp_path / "copy")
    for source in (tmp_path / "copy" / "tokenizer.json", tmp_path / "copy"):
        recipe["model"]["tokenizer"] = str(source)
        check_run(TrainRecipe.model_validate(recipe))


def test_a_batch_that_does_not_split_is_one_line_and_writes_nothing(tiny_shards, tmp_path, mt, monkeypatch):
    out = tmp_path / "out"
    for trainer, named in (
        (
            {"global_batch_tokens": 250},
            "trainer.global_batch_tokens 250 is not a multiple of trainer.seq_len 32",
        ),
        ({"micro_batch_size": 3}, "8 sequences per step do not split into trainer.micro_batch_size 3"),
    ):
        path = mt.write_recipe(tmp_path / "r.yaml", mt.recipe(tiny_shards, out, **trainer))
        for args in ((), ("--emit", "megatron")):
            message = _error(_train(path, *args))
            assert named in message and "Traceback" not in message
    # 8 sequences of 32 per step in micro-batches of 4: 2 processes split them, 3 cannot
    path = mt.write_recipe(tmp_path / "r.yaml", mt.recipe(tiny_shards, out))
    assert "micro_batch_size 4 x 3 ranks" in _error(_train(path, "--nproc", "3"))
    monkeypatch.setenv("WORLD_SIZE", "3")  # as torchrun sets it
    assert "micro_batch_size 4 x 3 ranks" in _error(_train(path))
    assert not out.exists()  # no job.json, no blend index


def test_a_start_checkpoint_trained_with_another_tokenizer_is_refused(tiny_shards, tmp_path, mt):
    built = tmp_path / "built"
    built.mkdir()
    mt.tokenizer(built / "tokenizer.json")
    other = mt.other_tokenizer(built / "tokenizer.json", tmp_path / "other.json")
    from midtrain.export import tokenizer_fingerprint

    start = tmp_path / "elsewhere" / "step_10"
    start.mkdir(parents=True)
    (start / "trainer_state.json").write_text(
        json.dumps({"tokenizer_sha256": tokenizer_fingerprint(str(built))})
    )
    recipe = mt.recipe(tiny_shards, tmp_path / "out", decay_tokens=256)
    recipe["stages"][1]["start_from"] = str(start)
    recipe["model"]["tokenizer"] = str(other)
    message = _error(_train(mt.write_recipe(tmp_path / "r.yaml", recipe), "--stage", "decay"))
    assert (
        f"start_from {start} was trained with another tokenizer" in message
        and not (tmp_path / "out").exists()
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"config": {"hidden_sizee": 64}},
            "not a setting of a llama model: hidden_sizee (did you mean hidden_size?)",
        ),
        (
            {"config": {"model_type": "lamma"}},
            "model_type 'lamma': not a transformers model type (did you mean llama",
        ),
        ({"attn_implementation": "bogus"}, "model.attn_implementation 'bogus': not one of auto, eager"),
        ({"attn_implementation": "flex_attention"}, "flex_attention: it has no backward on CPU"),
        (
            {"config": {"model_type": "gpt2", "n_positions": 16, "n_head": 4, "n_layer": 2}},
            "trainer.seq_len 32 is longer than the model's 16 learned positions",
        ),
        ({"config": {"intermediate_sise": 64}}, "intermediate_sise (did you mean intermediate_size?)"),
        # another architecture's name: it trained a 32-layer, 4096-wide Llama without a word
        ({"config": {"n_layer": 2}}, "n_layer (did you mean num_hidden_layers?)"),
        ({"config": {"d_model": 32}}, "d_model (did you mean hidden_size?)"),
        (
            {"config": {"eos_token_id": 5}},
            "model.config.eos_token_id 5, but the shards end documents with token 0",
        ),
    ],
)
def test_model_settings_that_cannot_train_are_one_line_before_anything_is_written(
    tiny_shards, tmp_path, mt, change, expected
):
    _manifest(tiny_shards / "a", tokenizer="tok", vocab_size=64, eos_id=0)
    recipe = mt.recipe(tiny_shards, tmp_path / "out")
    change = dict(change)  # the parameters are shared between runs: not popped in place
    config = change.pop("config", {})
    if config.get("model_type") == "gpt2":  # its own keys, not the tiny Llama's
        recipe["model"]["config"] = {"vocab_size": 64, "n_embd": 32, "eos_token_id": 0, "bos_token_id": 0}
    for typo in [
        k for k in config if k.endswith(("sizee", "sise"))
    ]:  # the misspelt key instead of the real one
        recipe["model"]["config"].pop(typo.replace("sizee", "size").replace("sise", "size"))
    recipe["model"]["config"].update(config)
    recipe["model"].update(change)
    message = _error(_train(mt.write_recipe(tmp_path / "r.yaml", recipe)))
    assert expected in message and len(message) < 600, message
    assert not (tmp_path / "out").exists()


def test_a_budget_that_is_not_whole_batches_is_noted(tiny_shards, tmp_path, mt):
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=100)  # batches of 256 tokens
    result = _train(mt.write_recipe(tmp_path / "r.yaml", recipe))
    assert result.exit_code == 0, result.output
    assert (
        "stage stable: 100 tokens is not a whole number of 256-token batches; it trains 1 step (256 tokens)"
        in (" ".join(result.output.split()))
    )


def test_keys_of_official_configs_pass_and_rope_past_its_positions_gets_a_note(tiny_shards, tmp_path, mt):
    from midtrain.config import ModelConfig

    for model_type, key, value in [("phi3", "partial_rotary_factor", 0.75), ("qwen2", "use_mrope", False),
                                   ("gemma", "hidden_activation", "gelu_pytorch_tanh"), ("llama", "rope_theta", 5e5)]:  # fmt: skip
        ModelConfig(config={"model_type": model_type, key: value}).build_hf_config()  # no error
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=256)
    recipe["model"]["config"]["max_position_embeddings"] = 16  # seq_len 32: RoPE extrapolates
    result = _train(mt.write_recipe(tmp_path / "r.yaml", recipe))
    assert result.exit_code == 0, result.output
    assert "note: trainer.seq_len 32 is past the model's max_position_embeddings 16" in " ".join(
        result.output.split()
    )


def test_a_stage_lr_must_be_positive_and_tensorboard_installed(tiny_shards, tmp_path, mt, monkeypatch):
    """A negative stage lr trained (loss rising), lr: 0 became trainer.lr; tensorboard without the package was a
    51-line traceback after the model was built."""
    import importlib.util

    recipe = mt.recipe(tiny_shards, tmp_path / "out")
    recipe["stages"][0]["lr"] = -1e-3
    message = _error(_train(mt.write_recipe(tmp_path / "r.yaml", recipe)))
    assert "lr" in message and "greater than 0" in message, message
    recipe["stages"][0].pop("lr")
    recipe["trainer"]["tensorboard"] = True
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "tensorboard" else real(n, *a)
    )
    message = _error(_train(mt.write_recipe(tmp_path / "r.yaml", recipe)))
    assert "tensorboard package is not installed" in message, message
    assert not (tmp_path / "out").exists()


def test_a_damaged_manifest_is_one_line_naming_it(tiny_shards, tmp_path, mt):
    # not JSON, or JSON that is no object: a JSONDecodeError / AttributeError traceback naming no file
    recipe = mt.write_recipe(tmp_path / "r.yaml", mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=256))
    manifest = tiny_shards / "b" / "manifest.json"
    for text in ("{not json", "[]"):
        manifest.write_text(text)
        message = _error(_train(recipe))
        assert "stage stable: source b:" in message and str(manifest) in message
    assert not (tmp_path / "out").exists()


def test_a_mixture_the_stage_cannot_blend_fails_before_the_first_stage_trains(tiny_shards, tmp_path, mt):
    # a decay source's budget over the stage's tokens failed with a ValueError traceback, after the stable stage
    recipe = mt.recipe(tiny_shards, tmp_path / "out", stable_tokens=256, decay_tokens=256)
    recipe["stages"][1]["mixture"] = copy.deepcopy(recipe["stages"][1]["mixture"])  # shared with stable
    recipe["stages"][1]["mixture"]["sources"][1] = {
        "name": "b",
        "paths": [str(tiny_shards / "b")],
        "tokens": 999,
    }
    message = _error(_train(mt.write_recipe(tmp_path / "r.yaml", recipe)))
    assert "stage decay: token budgets (999) exceed stage decay's tokens (256)" in message
    assert not (tmp_path / "out").exists()
    # a .bin cut short after the checks: one line naming it, not IndexFormatError's traceback
    from midtrain.config import TrainRecipe, TrainRecipeError
    from midtrain.trainer import train_stage

    config = TrainRecipe.model_validate(mt.recipe(tiny_shards, tmp_path / "out2", stable_tokens=256))
    part = tiny_shards / "b" / "part.bin"
    part.write_bytes(part.read_bytes()[:-2])
    with pytest.raises(TrainRecipeError, match=r"stage stable: .*part\.bin: truncated data"):
        train_stage(config, "stable", progress=False)


def test_a_warmup_that_outlasts_its_stage_is_noted(tiny_shards, tmp_path, mt):
    # warmup_tokens past the stage's last step: a "stable" stage that never reaches its peak LR, without a word
    recipe = mt.recipe(
        tiny_shards, tmp_path / "out", stable_tokens=2 * 256
    )  # warmup 512: steps at lr 0, lr/2
    result = _train(mt.write_recipe(tmp_path / "r.yaml", recipe))
    assert result.exit_code == 0, result.output
    assert "stage stable: warmup_tokens 512 do not end before its last step (2 steps of 256 tokens): its LR never " \
        "reaches the peak 0.02" in " ".join(result.output.split())  # fmt: skip


def test_a_model_config_error_without_a_message_is_one_line(tiny_shards, tmp_path, mt, monkeypatch):
    """A config check that raised with an empty message took `str(err).splitlines()[0]` of it: an IndexError
    escaped preflight as a traceback. It is now named by the error's type."""
    from midtrain.config import ModelConfig

    def fails(self):
        raise ValueError("")

    monkeypatch.setattr(ModelConfig, "build_hf_config", fails)
    _manifest(tiny_shards / "a", tokenizer="tok", vocab_size=64, eos_id=0)
    recipe = mt.recipe(tiny_shards, tmp_path / "out")
    message = _error(_train(mt.write_recipe(tmp_path / "r.yaml", recipe)))
    assert "model: ValueError" in message, message
