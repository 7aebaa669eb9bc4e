"""`--emit megatron` with an empty mixture source: the `--data-path` weights and the branch's per-source notes follow
the plan the trainer blends by (shards.mixture_plan), where an empty source's share goes to the others."""

from __future__ import annotations

import shlex

import pytest


def _recipe(tiny_shards, tmp_path, mt, sources: list[dict]):
    """The tiny recipe with a 2048-token decay branch (8 steps) that blends SOURCES; `e` is an empty shard file."""
    from midtrain.config import TrainRecipe
    from shards.indexed import write_indexed

    (tiny_shards / "e").mkdir()
    write_indexed(tiny_shards / "e" / "part", [], vocab_size=64)  # a branch that produced nothing
    recipe = mt.recipe(tiny_shards, tmp_path / "run", decay_tokens=2048)
    recipe["stages"][1]["mixture"] = {"seed": 7, "sources": sources}
    return TrainRecipe.model_validate(recipe)


def _data_path(block: str) -> dict[str, float]:
    """{shard folder name: weight} of a block's --data-path."""
    line = next(line for line in block.splitlines() if line.strip().startswith("--data-path "))
    data = shlex.split(line.strip().removesuffix("\\"))[1:]
    return {
        prefix.split("/")[-2]: float(weight) for weight, prefix in zip(data[::2], data[1::2], strict=True)
    }


@pytest.mark.parametrize(
    ("empty", "planned"),
    [
        # budgets a 512 and e 512 of 2048, b the rest by weight: e empty, so b takes 1536 (the trainer's blend)
        ({"tokens": 512}, {"a": 0.25, "b": 0.75}),
        # weights: e's 0.5 goes to a and b, as their weights share it
        ({"weight": 0.5}, {"a": 0.25, "b": 0.75}),
    ],
)
def test_an_empty_sources_share_goes_to_the_others(tiny_shards, tmp_path, mt, empty, planned):
    # the budgeted empty source's 0.25 was left out of --data-path (no tokens to split it over) and Megatron
    # renormalised the rest to a 33% / b 67%, where the trainer blends 25% / 75%; the note gave e 16384x reads
    from midtrain.megatron import emit
    from shards.mixture_plan import check_mixture_plan

    a = {"tokens": 512} if "tokens" in empty else {"weight": 0.25}
    sources = [{"name": "a", "paths": [str(tiny_shards / "a")], **a},
               {"name": "e", "paths": [str(tiny_shards / "e")], **empty},
               {"name": "b", "paths": [str(tiny_shards / "b")], "weight": 0.75}]  # fmt: skip
    recipe = _recipe(tiny_shards, tmp_path, mt, sources)
    stage = recipe.stages[1]
    targets = check_mixture_plan(stage.build_mixture(recipe.run_dir), stage.tokens)  # what the trainer blends
    assert {name: n / stage.tokens for name, n in targets.items() if n} == planned
    block = emit(recipe, nproc=2).split("# stage decay")[1].split("\n\n")[0]
    assert _data_path(block) == pytest.approx(planned)
    notes = [line for line in block.splitlines() if line.startswith("#   ")]
    assert "#   e: no tokens; its share goes to the others" in notes
    assert any(line.startswith("#   b: ") and "share 0.75:" in line for line in notes), notes
    assert any(line.startswith("#   a: ") and "share 0.25:" in line for line in notes), notes


def test_a_mixture_of_empty_sources_only_is_refused(tiny_shards, tmp_path, mt):
    # the trainer refuses it (every source is empty); emit printed a --data-path with no prefix in it
    from midtrain.config import TrainRecipeError
    from midtrain.megatron import emit

    recipe = _recipe(
        tiny_shards, tmp_path, mt, [{"name": "e", "paths": [str(tiny_shards / "e")], "weight": 1}]
    )
    with pytest.raises(TrainRecipeError, match=r"stage decay: .*every source is empty"):
        emit(recipe, nproc=2)
