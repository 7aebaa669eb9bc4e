"""Recipe stage `train`: the run's shards -> stable + one decay branch -> RUN/train/export/ (a HF folder)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from pipelines.executors import ExecutorConfig
from pipelines.stages import StageContext

TEXTS = [f"Problem {i}: compute {i} + {i + 1}. Solution: the sum is {2 * i + 1}, so the answer is \\boxed{{{2 * i + 1}}}."
         for i in range(120)]  # fmt: skip


def _run_shards(run: Path) -> None:
    """RUN/shards/ as the shards stage writes it: tokenizer folder, corpus shards, manifest.json."""
    from shards.indexed import write_indexed
    from shards.tokenizer import load_tokenizer, train_tokenizer

    tok_dir = train_tokenizer(TEXTS, run / "shards" / "tokenizer", vocab_size=300)
    tok = load_tokenizer(tok_dir)
    (run / "shards" / "corpus").mkdir(parents=True)
    docs = [ids + [tok.eos_id] for ids in tok.encode_batch(TEXTS)]
    info = write_indexed(run / "shards" / "corpus" / "part", docs, vocab_size=tok.vocab_size)
    manifest = {"tokenizer": str(tok_dir), "vocab_size": tok.vocab_size, "eos_id": tok.eos_id, "dtype": "uint16",
                "sources": {"corpus": {"path": str(run / "shards" / "corpus"), "documents": len(docs),
                                       "tokens": info["tokens"]}}}  # fmt: skip
    (run / "shards" / "manifest.json").write_text(json.dumps(manifest))


def test_train_stage_exports_a_model_that_transformers_loads(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipelines.train import Config, run_stage

    run = tmp_path / "run"
    _run_shards(run)
    # the shipped tiny recipe, shortened: the stage's own logic (shards binding, export) is what is tested here
    recipe = yaml.safe_load((Path(__file__).resolve().parents[2] / "recipes" / "tiny-cpu.yaml").read_text())
    recipe["trainer"].update(seq_len=64, global_batch_tokens=512, micro_batch_size=4)
    recipe["stages"][0].update(tokens=2048, warmup_tokens=512)
    recipe["stages"][1].update(tokens=1024)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(recipe))

    ctx = StageContext(run_dir=run, out_dir=run / "train", inputs=[], executor=ExecutorConfig())
    summary = run_stage(Config(recipe=str(tmp_path / "tiny.yaml"), missing_sources="drop"), ctx)
    assert summary["docs_in"] == summary["docs_out"] + sum(summary["dropped"].values())
    assert list(summary["stages"]) == ["stable", "decay-short"]
    assert summary["stages"]["stable"]["steps"] == 4 and summary["stages"]["decay-short"]["steps"] == 2
    assert summary["missing_sources"] == {"stable": ["refine"], "decay-short": ["refine", "qa"]}
    assert json.loads((run / "train" / "summary.json").read_text())["export_stage"] == "decay-short"

    model = AutoModelForCausalLM.from_pretrained(str(run / "train" / "export"))
    tokenizer = AutoTokenizer.from_pretrained(str(run / "train" / "export"))
    assert model.config.vocab_size == json.loads((run / "shards" / "manifest.json").read_text())["vocab_size"]
    ids = tokenizer("Problem 3: compute", return_tensors="pt")["input_ids"]
    assert model.generate(ids, max_new_tokens=4, do_sample=False).shape[1] == ids.shape[1] + 4


def test_sources_of_a_mixture_file_without_shards_are_dropped_as_inline_ones_are(tmp_path):
    # a mixture given as a file was skipped: `source refine: .../shards/refine: no shard folder` stopped the stage
    from pipelines.train import Config, prepare_recipe

    run = tmp_path / "run"
    _run_shards(run)
    recipe = yaml.safe_load((Path(__file__).resolve().parents[2] / "recipes" / "tiny-cpu.yaml").read_text())
    (tmp_path / "stable-mix.yaml").write_text(yaml.safe_dump(recipe["stages"][0]["mixture"]))
    recipe["stages"][0]["mixture"] = str(tmp_path / "stable-mix.yaml")
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(recipe))
    ctx = StageContext(run_dir=run, out_dir=run / "train", inputs=[], executor=ExecutorConfig())
    bound, missing = prepare_recipe(Config(recipe=str(tmp_path / "tiny.yaml"), missing_sources="drop"), ctx)
    assert missing["stable"] == ["refine"]
    assert [s.name for s in bound.stages[0].build_mixture(run).sources] == ["corpus"]
