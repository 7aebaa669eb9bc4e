"""What a decay branch reads: the documents its stable stage left unread, not the stable stage's first ones.

Every shipped mixture uses seed 1234 and the same source names, so a branch that reads each source from the
start of its seeded order re-read exactly the stable stage's first documents, in the same order, while most of
the source was never read. A branch now goes on where its start stage left the same shards. A stage that began
under the old order (its checkpoints do not record `data_order`) resumes on that order.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from midtrain.checkpoint import STATE_FILE, list_checkpoints
from midtrain.config import TrainRecipe
from midtrain.trainer import build_documents

STEPS = 256  # tokens per step of the tiny recipe


def _read(documents, state: dict) -> dict[str, list[int]]:
    """Per source, the document ids a stage began, in the order it read them, up to its final data position."""
    end = min(state["data"]["doc"] + (state["data"]["offset"] > 0), len(documents))
    read = defaultdict(list)
    for i in range(end):
        read[documents.source_of(i)].append(int(documents._doc_ids[i]))
    return read


def _final_state(recipe: TrainRecipe, stage: str) -> dict:
    return json.loads(
        (list_checkpoints(recipe.stage_dir(stage) / "checkpoints")[-1] / STATE_FILE).read_text()
    )


@pytest.fixture
def branch(tiny_shards, tmp_path, mt):
    """A trained stable stage (6 steps) and decay branch (4 steps) on sources a (0.7) and b (0.3)."""
    raw = mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=6 * STEPS, decay_tokens=4 * STEPS)
    mt.train(raw)
    return TrainRecipe.model_validate(raw)


def test_decay_branch_reads_what_the_stable_stage_left_unread(branch):
    recipe = branch
    stable, decay = (recipe.stage(name) for name in ("stable", "decay"))
    s_state, d_state = _final_state(recipe, "stable"), _final_state(recipe, "decay")
    # the blends as a stage that starts now builds them: what these stages trained on
    s_docs, d_docs = build_documents(recipe, stable), build_documents(recipe, decay)
    s_read, d_read = _read(s_docs, s_state), _read(d_docs, d_state)
    for name in ("a", "b"):
        assert d_read[name], name
        assert not set(d_read[name]) & set(s_read[name]), name  # the old order: all of them
    # exactly the continuation: the stream the stable stage would have read next, in the same seeded order
    longer = build_documents(recipe, stable.model_copy(update={"tokens": 40 * STEPS}))
    for k, name in enumerate(("a", "b")):
        stream = [int(d) for d, s in zip(longer._doc_ids, longer._source_ids, strict=True) if s == k]
        skip = len(s_read[name])
        assert d_state["data_streams"][name] == [7, name, skip]
        assert d_read[name] == stream[skip : skip + len(d_read[name])], name


def test_continuation_uses_the_checkpoint_position_which_is_the_planned_one(branch):
    from midtrain.trainer import continued_streams

    recipe = branch
    planned = continued_streams(recipe, recipe.stage("decay"))  # from the final checkpoint's data position
    shutil.rmtree(recipe.stage_dir("stable") / "checkpoints")  # now from the steps the stage plans
    assert {n: s.as_list() for n, s in continued_streams(recipe, recipe.stage("decay")).items()} == {
        n: s.as_list() for n, s in planned.items()
    }


def test_a_source_new_to_the_branch_or_renamed_is_matched_by_its_shards(tiny_shards, tmp_path, mt):
    from midtrain.trainer import continued_streams

    raw = mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=6 * STEPS, decay_tokens=4 * STEPS)
    raw["stages"][0]["mixture"] = {"seed": 7, "sources": [{"name": "a", "paths": [str(tiny_shards / "a")],
                                                           "weight": 1.0}]}  # fmt: skip
    raw["stages"][1]["mixture"] = {"seed": 9, "sources": [
        {"name": "web", "paths": [str(tiny_shards / "a")], "weight": 0.5},  # same shards, another name
        {"name": "b", "paths": [str(tiny_shards / "b")], "weight": 0.5},  # new to the branch
    ]}  # fmt: skip
    recipe = TrainRecipe.model_validate(raw)
    streams = continued_streams(recipe, recipe.stage("decay"))
    assert set(streams) == {"web"} and streams["web"].seed == 7 and streams["web"].key == "a"
    assert streams["web"].skip > 0


def _strip_records(stage_dir: Path) -> None:
    """Make the checkpoints look written by a mathmix from before the order was recorded."""
    for path in list_checkpoints(stage_dir / "checkpoints"):
        state = json.loads((path / STATE_FILE).read_text())
        for key in ("data_order", "data_streams"):
            state.pop(key, None)
        (path / STATE_FILE).write_text(json.dumps(state))


def test_a_stage_begun_under_the_old_order_resumes_on_it(tiny_shards, tmp_path, mt, monkeypatch):
    import midtrain.data_order as data_order

    raw = mt.recipe(tiny_shards, tmp_path / "old", stable_tokens=6 * STEPS, decay_tokens=8 * STEPS,
                    keep_checkpoints=2)  # fmt: skip
    with monkeypatch.context() as old:  # the run of a mathmix before the fix
        old.setattr(data_order, "DATA_ORDER", 1)
        before = mt.train(raw)
    for stage in ("stable", "decay"):
        _strip_records(Path(raw["output_dir"]) / stage)
    killed = tmp_path / "killed"
    shutil.copytree(raw["output_dir"], killed)
    (killed / "decay" / "done.json").unlink()  # killed after step 4 of the decay branch
    shutil.rmtree(killed / "decay" / "checkpoints" / "step_00000008")

    # a finished run is skipped as it was (its job.json identity has not changed): nothing trains again
    assert mt.train(raw) == before
    after = mt.train(raw | {"output_dir": str(killed)})
    assert [r["loss"] for r in after["decay"]] == [r["loss"] for r in before["decay"]]
    assert (
        _final_state(TrainRecipe.model_validate(raw | {"output_dir": str(killed)}), "decay")["data_order"]
        == 1
    )


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_a_branch_needs_only_the_shards_it_reads(tiny_shards, tmp_path, mt, caplog):
    """A source of the start stage the branch does not read may be gone; a shared one whose start blend can no
    longer be rebuilt (another source's shards are missing) is read from its start, with a warning saying why."""
    from midtrain.trainer import continued_streams, train_recipe

    raw = mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=6 * STEPS, decay_tokens=4 * STEPS)
    raw["stages"][1]["mixture"] = {"seed": 7, "sources": [{"name": "b", "paths": [str(tiny_shards / "b")],
                                                           "weight": 1.0}]}  # fmt: skip
    recipe = TrainRecipe.model_validate(raw)
    train_recipe(recipe, ["stable"], progress=False)
    stable_dir = recipe.stage_dir("stable")
    before = _files(stable_dir)
    continued = continued_streams(recipe, recipe.stage("decay"))
    assert set(continued) == {"b"} and continued["b"].skip > 0  # b goes on where the stable stage left it

    shutil.rmtree(tiny_shards / "a")
    with caplog.at_level("WARNING", logger="mathmix"):
        train_recipe(recipe, ["decay"], progress=False)
    state = _final_state(recipe, "decay")
    assert state["data_order"] == 2 and state["data_streams"] == {}  # b from its start
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("mathmix")]
    assert len(warned) == 1 and "\n" not in warned[0] and str(tiny_shards / "a") in warned[0], warned
    assert _files(stable_dir) == before  # nothing written into the finished stage's folder


def test_a_branch_writes_nothing_into_its_start_stage(branch):
    """The start stage's blend is rebuilt in memory where its cached index is gone, not saved in its folder."""
    from midtrain.trainer import continued_streams

    recipe = branch
    shutil.rmtree(recipe.stage_dir("stable") / "blend_index")
    before = _files(recipe.stage_dir("stable"))
    streams = continued_streams(recipe, recipe.stage("decay"))
    assert {n: s.as_list() for n, s in streams.items()} == _final_state(recipe, "decay")["data_streams"]
    assert _files(recipe.stage_dir("stable")) == before


def test_a_stage_given_its_documents_records_their_order(tiny_shards, tmp_path, mt):
    from midtrain.trainer import data_plan, train_recipe, train_stage

    raw = mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=6 * STEPS, decay_tokens=4 * STEPS)
    recipe = TrainRecipe.model_validate(raw)
    train_recipe(recipe, ["stable"], progress=False)
    decay = recipe.stage("decay")
    train_stage(recipe, "decay", progress=False, documents=build_documents(recipe, decay))
    state = _final_state(recipe, "decay")
    assert state["data_order"] == 2
    assert state["data_streams"] == data_plan(recipe, decay)["data_streams"]
    assert all(streams[2] > 0 for streams in state["data_streams"].values())


def test_shards_gone_since_the_checks_fail_in_one_line_naming_the_stage(tiny_shards, tmp_path, mt):
    from midtrain.config import TrainRecipeError
    from midtrain.trainer import train_stage

    recipe = TrainRecipe.model_validate(mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=2 * STEPS))
    shutil.rmtree(tiny_shards / "b")
    with pytest.raises(TrainRecipeError, match=r"^stage stable: .*shards/b: no shard folder") as err:
        train_stage(recipe, "stable", progress=False)
    assert "\n" not in str(err.value)
