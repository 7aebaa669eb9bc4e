"""A stage's blend holds every token the stage consumes: its stream never wraps within the stage.

Each source's last document used to be kept or dropped, whichever landed closer to its target, so a blend could
come out a few tokens short of steps x global_batch_tokens (+1, the last window's shifted target) and the stage
re-read its first documents at its end (2 steps of the tiny recipe: 510 tokens for 513).
"""

from __future__ import annotations

import pytest

from midtrain.config import TrainRecipe
from midtrain.data import PackedSequences
from midtrain.trainer import build_documents


@pytest.mark.parametrize("steps", [2, 3, 8, 16])  # each fell short before (510 < 513, ..., 4062 < 4097)
def test_the_blend_holds_what_the_stage_reads_within_its_shares(tiny_shards, tmp_path, mt, steps):
    recipe = TrainRecipe.model_validate(mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=steps * 256))
    stage = recipe.stage("stable")
    documents = build_documents(recipe, stage)
    assert documents.num_tokens >= steps * 256 + 1
    packer = PackedSequences(documents, recipe.trainer.seq_len, recipe.trainer.intra_document)
    for _ in range(steps * recipe.trainer.sequences_per_step()):
        packer.next()
    assert packer.position.doc < len(documents)  # no document began twice
    shares = {row["name"]: row["share"] for row in documents.report()["sources"]}
    # whole documents of up to 60 tokens: within one document of the share on 512..4096 tokens
    assert shares["a"] == pytest.approx(0.7, abs=60 / (steps * 256))
