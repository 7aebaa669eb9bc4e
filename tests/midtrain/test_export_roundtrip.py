"""Export round trip, plots, Megatron command and shipped recipes, through the `mathmix train` CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from mathmix.cli import app

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def trained(tiny_shards, tmp_path, mt):
    recipe = mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=4 * 256, decay_tokens=2 * 256)
    recipe["model"]["tokenizer"] = str(mt.tokenizer(tmp_path / "tokenizer.json"))
    mt.train(recipe)
    return tmp_path / "run", mt.write_recipe(tmp_path / "tiny.yaml", recipe)


def test_export_loads_in_transformers_with_the_same_logits(trained, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from midtrain.checkpoint import load_model_weights
    from midtrain.config import load_train_recipe
    from midtrain.export import resolve_checkpoint

    run, recipe_path = trained
    out = tmp_path / "hf"
    result = CliRunner().invoke(
        app, ["train", "export", str(run / "decay"), "-o", str(out), "--dtype", "float32"]
    )
    assert result.exit_code == 0, result.output
    assert {"config.json", "model.safetensors", "tokenizer.json", "export.json"} <= {
        p.name for p in out.iterdir()
    }
    assert json.loads((out / "export.json").read_text())["stage"] == "decay"
    # generate() reads generation_config.json: use_cache false recomputed the whole prefix for every token
    assert json.loads((out / "generation_config.json").read_text()).get("use_cache", True) is True

    exported = AutoModelForCausalLM.from_pretrained(str(out)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    assert tokenizer.eos_token_id == 0
    ids = torch.tensor([tokenizer("the sum of two odd numbers")["input_ids"]])
    # the same weights straight from the DCP checkpoint into a model built from the recipe
    reference = load_train_recipe(recipe_path).model.build("sdpa").eval()
    load_model_weights(resolve_checkpoint(run / "decay"), reference)
    with torch.no_grad():
        assert torch.allclose(exported(ids).logits, reference(ids).logits, atol=1e-5)
    generated = exported.generate(ids, max_new_tokens=3, do_sample=False)
    assert generated.shape == (1, ids.shape[1] + 3)


def test_export_with_a_tokenizer_that_does_not_load_writes_nothing(trained, tmp_path):
    run, _ = trained
    (tmp_path / "tokenizer.json").unlink()  # the path the checkpoint recorded
    out = tmp_path / "hf"
    result = CliRunner().invoke(app, ["train", "export", str(run / "decay"), "-o", str(out)])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "tokenizer.json: cannot be loaded" in " ".join(result.output.split())
    assert not out.exists()  # it had config.json and model.safetensors, no tokenizer and no export.json


def test_plot_and_megatron_command(trained):
    run, recipe_path = trained
    result = CliRunner().invoke(app, ["train", "plot", str(run)])
    assert result.exit_code == 0, result.output
    assert (run / "curves.png").read_bytes()[:4] == b"\x89PNG"

    result = CliRunner().invoke(app, ["train", str(recipe_path), "--emit", "megatron", "--nproc", "2"])
    assert result.exit_code == 0, result.output
    decay = result.output.split("# stage decay")[1]
    assert "pretrain_gpt.py" in decay and "--lr-decay-style WSD" in decay
    assert "--lr-wsd-decay-style cosine" in decay and "--lr-wsd-decay-samples 16" in decay  # 512 tokens / 32
    assert (
        "--train-samples 48" in decay and "--global-batch-size 8" in decay and "--nproc_per_node 2 " in decay
    )
    data = decay.split("--data-path ")[1].split(" \\")[0].split()
    weights = dict(zip(data[1::2], map(float, data[0::2]), strict=True))
    assert sum(weights.values()) == pytest.approx(1.0) and len(weights) == 2  # sources a (0.7) and b (0.3)


@pytest.mark.parametrize("path", sorted(p.name for p in (REPO / "recipes").glob("*.yaml")
                                        if "trainer:" in p.read_text()))  # fmt: skip
def test_every_shipped_train_recipe_loads(path):
    from midtrain.config import load_train_recipe

    recipe = load_train_recipe(REPO / "recipes" / path)
    assert recipe.stages[0].kind == "stable"
    assert all(s.start_from for s in recipe.stages if s.kind == "decay")
    recipe.trainer.accumulation_steps(world_size=1)  # the batch splits


def test_octothinker_recipe_numbers():
    from midtrain.config import load_train_recipe

    recipe = load_train_recipe(REPO / "recipes" / "octothinker-3b.yaml")
    assert [s.tokens for s in recipe.stages] == [200_000_000_000] + [20_000_000_000] * 3
    assert recipe.trainer.seq_len == 8192 and recipe.trainer.lr == 3e-5 and recipe.trainer.min_lr_ratio == 0.1
    assert abs(recipe.trainer.global_batch_tokens - 4_000_000) < 250_000


def test_bad_recipe_key_is_named(tmp_path):
    from midtrain.config import TrainRecipeError, load_train_recipe

    text = (REPO / "recipes" / "tiny-cpu.yaml").read_text().replace("seq_len:", "seq_length:")
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(TrainRecipeError, match="seq_length"):
        load_train_recipe(tmp_path / "bad.yaml")


def test_octothinker_megatron_command(tmp_path):
    """The 3B recipe's Megatron commands, with a local Llama-3.2-3B config standing in for the weights."""
    from transformers import LlamaConfig

    from midtrain.config import load_train_recipe
    from midtrain.megatron import emit

    LlamaConfig(vocab_size=128256, hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
                num_attention_heads=24, num_key_value_heads=8, max_position_embeddings=131072,
                rope_theta=500000.0, tie_word_embeddings=True).save_pretrained(tmp_path / "llama")  # fmt: skip
    recipe = load_train_recipe(
        REPO / "recipes" / "octothinker-3b.yaml", {"model": {"path": str(tmp_path / "llama")}}
    )
    text = emit(recipe)
    blocks = {b.split(" ")[0]: b for b in text.split("# stage ")[1:]}
    assert set(blocks) == {"stable", "decay-short", "decay-long", "decay-hybrid"}
    stable = blocks["stable"]
    assert "--lr-decay-style constant" in stable and "--train-samples 24413696 " in stable  # 47683 steps
    assert "--global-batch-size 512 " in stable and "--seq-length 8192 " in stable and "--lr 3e-05 " in stable
    assert "--num-layers 28 " in stable and "--group-query-attention --num-query-groups 8" in stable
    short = blocks["decay-short"]
    assert "--lr-wsd-decay-samples 2441406 " in short and "--train-samples 26854912 " in short
    assert "--min-lr 3e-06 " in short and "--lr-wsd-decay-style cosine" in short and "--load " in short
    assert "--override-opt_param-scheduler" in short


def test_export_refuses_a_tokenizer_other_than_the_trained_one(trained, tmp_path, mt):
    """A tokenizer of the same size that maps text to other ids: the export would decode the model's ids wrongly."""
    import shutil

    run, _ = trained
    other = mt.other_tokenizer(tmp_path / "tokenizer.json", tmp_path / "other.json")
    out = tmp_path / "hf"
    result = CliRunner().invoke(
        app, ["train", "export", str(run / "decay"), "-o", str(out), "--tokenizer", str(other)]
    )
    message = " ".join(result.output.split())
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert f"tokenizer {other} (fingerprint " in message and "is not the one" in message
    assert str(tmp_path / "tokenizer.json") in message and not out.exists()

    shutil.copy(tmp_path / "tokenizer.json", tmp_path / "copy.json")  # the same tokenizer elsewhere
    result = CliRunner().invoke(app, ["train", "export", str(run / "decay"), "-o", str(out), "--tokenizer",
                                      str(tmp_path / "copy.json")])  # fmt: skip
    assert result.exit_code == 0 and "warning" not in result.output, result.output

    # a checkpoint from before fingerprints were recorded: exported, with a one-line warning that it is unchecked
    from midtrain.export import resolve_checkpoint

    state_file = resolve_checkpoint(run / "decay") / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state_file.write_text(json.dumps({k: v for k, v in state.items() if k != "tokenizer_sha256"}))
    result = CliRunner().invoke(app, ["train", "export", str(run / "decay"), "-o", str(tmp_path / "hf2"),
                                      "--tokenizer", str(other)])  # fmt: skip
    message = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "records no tokenizer fingerprint" in message and f"not checked that {other}" in message
