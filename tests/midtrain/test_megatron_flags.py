"""`--emit megatron` asks Megatron for what the mathmix trainer does to packed documents and regularization."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("intra_document", [True, False])
def test_packed_document_flags_follow_the_trainer(tiny_shards, tmp_path, mt, intra_document):
    from midtrain.config import TrainRecipe
    from midtrain.megatron import emit

    recipe = TrainRecipe.model_validate(mt.recipe(tiny_shards, tmp_path, intra_document=intra_document))
    command = emit(recipe, nproc=2).split("# stage stable")[1]
    # the trainer ignores the target after each EOS (data.IGNORE_INDEX) only with intra-document attention
    assert ("--eod-mask-loss" in command) is intra_document
    assert ("--reset-position-ids --reset-attention-mask" in command) is intra_document
    # Megatron's dropout defaults are 0.1; the HF Llama the trainer runs has none
    assert "--attention-dropout 0.0 " in command and "--hidden-dropout 0.0 " in command


def test_a_global_batch_that_does_not_split_over_the_gpus_is_refused(tiny_shards, tmp_path, mt):
    from midtrain.config import TrainRecipe, TrainRecipeError
    from midtrain.megatron import emit

    recipe = TrainRecipe.model_validate(mt.recipe(tiny_shards, tmp_path))
    per_step, micro = recipe.trainer.sequences_per_step(), recipe.trainer.micro_batch_size
    with pytest.raises(TrainRecipeError, match=rf"{per_step} sequences per step do not split .* x 3 GPUs"):
        emit(recipe, nproc=3)
    gpus = per_step // micro  # one micro-batch per GPU and step
    assert f"torchrun --nproc_per_node {gpus} pretrain_gpt.py" in emit(recipe, nproc=gpus)
