"""Fixtures for the trainer tests: tiny shards written in the test and tiny train recipes over them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
VOCAB = 64


def markov_documents(n_docs: int, seed: int) -> list[list[int]]:
    """Documents from a fixed sparse Markov chain (each token has 3 likely successors): learnable structure
    plus irreducible noise, so the loss falls but keeps a floor the LR noise sits above (what WSD decay removes)."""
    rng = np.random.default_rng(seed)
    successors = np.random.default_rng(0).integers(1, VOCAB, size=(VOCAB, 3))
    docs = []
    for _ in range(n_docs):
        tok, doc = int(rng.integers(1, VOCAB)), []
        for _ in range(int(rng.integers(8, 60))):
            doc.append(tok)
            tok = (
                int(successors[tok, rng.integers(0, 3)])
                if rng.random() < 0.9
                else int(rng.integers(1, VOCAB))
            )
        docs.append(doc + [0])  # EOS = 0
    return docs


@pytest.fixture
def tiny_shards(tmp_path: Path) -> Path:
    """Two shard sources (`a`, `b`) of Markov documents under tmp/shards/."""
    from shards.indexed import write_indexed

    for i, name in enumerate(("a", "b")):
        (tmp_path / "shards" / name).mkdir(parents=True)
        write_indexed(
            tmp_path / "shards" / name / "part", markov_documents(300, seed=i + 1), vocab_size=VOCAB
        )
    return tmp_path / "shards"


def bpe_tokenizer(path: Path) -> Path:
    """A 64-token BPE tokenizer (EOS `<eos>` = id 0) trained here, saved as tokenizer.json."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=64, special_tokens=["<eos>", "<unk>"])
    tok.train_from_iterator(["the sum of two odd numbers is even", "x plus y equals z"] * 20, trainer)
    tok.save(str(path))
    return path


def other_tokenizer(source: Path, path: Path) -> Path:
    """A tokenizer.json of the same size as SOURCE that maps text to other ids (two of its tokens swapped)."""
    import json

    data = json.loads(source.read_text())
    vocab = data["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[-2:]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    path.write_text(json.dumps(data))
    return path


def tiny_recipe_dict(
    shards: Path, out: Path, stable_tokens: int = 4096, decay_tokens: int = 0, **trainer
) -> dict:
    """A recipe for a ~60k-parameter Llama: seq 32, 256 tokens per step (8 sequences, 2 micro-batches of 4)."""
    mix = {"seed": 7, "sources": [
        {"name": "a", "paths": [str(shards / "a")], "weight": 0.7},
        {"name": "b", "paths": [str(shards / "b")], "weight": 0.3},
    ]}  # fmt: skip
    stages = [
        {"name": "stable", "kind": "stable", "tokens": stable_tokens, "warmup_tokens": 512, "mixture": mix}
    ]
    if decay_tokens:
        stages.append({"name": "decay", "kind": "decay", "tokens": decay_tokens, "start_from": "stable",
                       "mixture": mix})  # fmt: skip
    return {
        "name": "tiny-test",
        "output_dir": str(out),
        "model": {
            "config": {
                "vocab_size": VOCAB,
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "max_position_embeddings": 64,
                "eos_token_id": 0,
                "tie_word_embeddings": True,
            }
        },  # fmt: skip
        "trainer": {
            "seq_len": 32,
            "global_batch_tokens": 256,
            "micro_batch_size": 4,
            "lr": 2e-2,
            "device": "cpu",
            "checkpoint_every": 4,
            **trainer,
        },  # fmt: skip
        "stages": stages,
    }


def write_recipe(path: Path, recipe: dict) -> Path:
    path.write_text(yaml.safe_dump(recipe))
    return path


def mathmix_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "midtrain", *args]


def child_env() -> dict[str, str]:
    """Environment of a trainer subprocess: offline, and the same thread count as the test process, so that
    floating-point reductions (and so losses) match bit for bit."""
    import torch

    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS=str(torch.get_num_threads()))
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(mathmix_cmd(*args), cwd=REPO, env=child_env(), capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: on a shared 2-core machine, spinning OpenMP threads make tiny models ~8x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def train_in_process(recipe: dict) -> dict:
    """Run every stage of `recipe` in this process; return {stage: [metrics rows]}."""
    import json

    from midtrain.config import TrainRecipe
    from midtrain.trainer import train_recipe

    config = TrainRecipe.model_validate(recipe)
    train_recipe(config, progress=False)
    return {
        s.name: [
            json.loads(line) for line in (config.stage_dir(s.name) / "metrics.jsonl").read_text().splitlines()
        ]
        for s in config.stages
    }


@pytest.fixture
def mt():
    """The helpers above, as a fixture (test modules cannot import conftest under --import-mode=importlib)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        recipe=tiny_recipe_dict, write_recipe=write_recipe, train=train_in_process, run_cli=run_cli,
        cmd=mathmix_cmd, env=child_env, repo=REPO, markov_documents=markov_documents, tokenizer=bpe_tokenizer,
        other_tokenizer=other_tokenizer,
    )  # fmt: skip
