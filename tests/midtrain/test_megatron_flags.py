"""`--emit megatron` asks Megatron for what the mathmix trainer does to packed documents and regularization."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("intra_document", [True, False])
def test_packed_document_flags_follow_the_trainer(tiny_shards, tmp_path, mt, intra_document):
    from midtrain.config import TrainRecipe
    from midtrain.megatron import emit

    recipe = TrainRecipe.model_validate(mt.recipe(tiny_shards, tmp_path, intra_document=intra_document))
    command = emit(recipe).split("# stage stable")[1]
    # the trainer ignores the target after each EOS (data.IGNORE_INDEX) only with intra-document attention
    assert ("--eod-mask-loss" in command) is intra_document
    assert ("--reset-position-ids --reset-attention-mask" in command) is intra_document
    # Megatron's dropout defaults are 0.1; the HF Llama the trainer runs has none
    assert "--attention-dropout 0.0 " in command and "--hidden-dropout 0.0 " in command
