"""A decay branch whose `start_from` is a checkpoint folder reads on where that checkpoint left each source.

It read every source from its start: the documents the stable stage had already trained on, in the same order.
Each checkpoint now records per source its shards and stream position (`data_sources`); a checkpoint without a
usable record (older, or of other shards) still reads from the start, saying so on stderr and in its records.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from midtrain.checkpoint import STATE_FILE, list_checkpoints
from midtrain.config import TrainRecipe

STEPS = 256  # tokens per step of the tiny recipe


def _final_state(stage_dir: Path) -> dict:
    return json.loads((list_checkpoints(stage_dir / "checkpoints")[-1] / STATE_FILE).read_text())


def _losses(stage_dir: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (stage_dir / "metrics.jsonl").read_text().splitlines()]


def _branch_from(raw: dict, folder: Path, out: Path, mixture: dict | None = None) -> dict:
    """A recipe of one decay stage, the named branch of RAW, started from checkpoint FOLDER into OUT."""
    branch = copy.deepcopy(raw["stages"][1]) | {"start_from": str(folder)}
    if mixture is not None:
        branch["mixture"] = mixture
    return raw | {"output_dir": str(out), "stages": [branch]}


@pytest.fixture
def run(tiny_shards, tmp_path, mt):
    """A stable stage (6 steps) and its named decay branch (4 steps), trained; and the stable final checkpoint."""
    raw = mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=6 * STEPS, decay_tokens=4 * STEPS)
    mt.train(raw)
    stable = Path(raw["output_dir"]) / "stable"
    return raw, list_checkpoints(stable / "checkpoints")[-1]


def test_a_branch_from_a_checkpoint_folder_reads_on_as_one_from_the_stage(run, tmp_path, mt):
    raw, final = run
    named = Path(raw["output_dir"]) / "decay"
    assert all(entry["stream"][2] > 0 for entry in _final_state(final.parents[1])["data_sources"].values())

    mt.train(_branch_from(raw, final, tmp_path / "from-folder"))
    folder = tmp_path / "from-folder" / "decay"
    state = _final_state(folder)
    assert state["data_streams"] == _final_state(named)["data_streams"]
    assert {n: s[2] > 0 for n, s in state["data_streams"].items()} == {"a": True, "b": True}
    assert "data_note" not in state and "data_note" not in json.loads((folder / "done.json").read_text())
    assert _losses(folder) == _losses(named)  # the same weights, optimizer, schedule and documents


def test_a_source_of_the_checkpoint_is_matched_by_its_shards(run, tmp_path, tiny_shards):
    from midtrain.data_order import continued_streams

    raw, final = run
    mixture = {"seed": 9, "sources": [{"name": "web", "paths": [str(tiny_shards / "a")], "weight": 1.0}]}
    recipe = TrainRecipe.model_validate(_branch_from(raw, final, tmp_path / "x", mixture))
    streams = continued_streams(recipe, recipe.stage("decay"))
    assert {n: s.as_list() for n, s in streams.items()} == {
        "web": _final_state(final.parents[1])["data_sources"]["a"]["stream"]
    }


def _without_data_sources(final: Path, into: Path) -> Path:
    """A copy of checkpoint FINAL as a mathmix from before `data_sources` wrote it."""
    shutil.copytree(final, into)
    state = json.loads((into / STATE_FILE).read_text())
    del state["data_sources"]
    (into / STATE_FILE).write_text(json.dumps(state))
    return into


def test_an_old_checkpoint_reads_from_the_start_and_says_why_in_one_line(run, tmp_path, mt):
    raw, final = run
    old = _without_data_sources(final, tmp_path / "old" / "step_00000006")
    recipe = mt.write_recipe(tmp_path / "r.yaml", _branch_from(raw, old, tmp_path / "out"))
    done = mt.run_cli("train", str(recipe), "--no-progress")
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if str(old) in line]
    assert len(said) == 1 and "read from their start" in said[0] and "data_sources" in said[0], done.stderr
    folder = tmp_path / "out" / "decay"
    state, summary = _final_state(folder), json.loads((folder / "done.json").read_text())
    assert state["data_streams"] == {} and state["data_note"] == summary["data_note"]
    assert str(old) in summary["data_note"]


def test_a_checkpoint_of_other_shards_reads_from_the_start_and_says_why(run, tmp_path, tiny_shards, caplog):
    from midtrain.trainer import train_recipe

    raw, final = run
    (tiny_shards / "c").mkdir()
    shutil.copy(tiny_shards / "a" / "part.idx", tiny_shards / "c" / "part.idx")  # the same documents,
    shutil.copy(tiny_shards / "a" / "part.bin", tiny_shards / "c" / "part.bin")  # other shard files
    mixture = {"seed": 7, "sources": [{"name": "a", "paths": [str(tiny_shards / "c")], "weight": 1.0}]}
    recipe = TrainRecipe.model_validate(_branch_from(raw, final, tmp_path / "out", mixture))
    with caplog.at_level("WARNING", logger="mathmix"):
        train_recipe(recipe, progress=False)
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("mathmix")]
    assert len(warned) == 1 and str(final) in warned[0] and "none of the shards" in warned[0], warned
    state = _final_state(recipe.stage_dir("decay"))
    assert state["data_streams"] == {} and state["data_note"] == warned[0]


@pytest.mark.parametrize("keep_record", [True, False])
def test_a_branch_from_a_checkpoint_killed_and_rerun_trains_the_same(run, tmp_path, mt, keep_record):
    raw, final = run
    start = final if keep_record else _without_data_sources(final, tmp_path / "old" / final.name)
    branch = _branch_from(raw, start, tmp_path / "whole")
    branch["stages"][0]["tokens"] = 8 * STEPS
    mt.train(branch)
    whole = tmp_path / "whole" / "decay"
    for killed_after in (4, 0):  # after its first checkpoint; before any
        killed = tmp_path / f"killed{killed_after}"
        shutil.copytree(tmp_path / "whole", killed)
        (killed / "decay" / "done.json").unlink()
        for path in list_checkpoints(killed / "decay" / "checkpoints"):
            if int(path.name.split("_")[1]) > killed_after:
                shutil.rmtree(path)
        rows = [r for r in _rows(killed / "decay") if r["step"] <= killed_after]
        (killed / "decay" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        mt.train(branch | {"output_dir": str(killed)})
        assert _losses(killed / "decay") == _losses(whole)
        again, state = _final_state(killed / "decay"), _final_state(whole)
        assert {k: again.get(k) for k in ("data_streams", "data_note", "data_sources")} == {
            k: state.get(k) for k in ("data_streams", "data_note", "data_sources")
        }
    assert bool(_final_state(whole)["data_streams"]) == keep_record


def _rows(stage_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (stage_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_malformed_record_is_no_usable_data_state(tmp_path, tiny_shards, mt):
    from midtrain.data_order import start_streams

    raw = mt.recipe(tiny_shards, tmp_path / "run", stable_tokens=6 * STEPS, decay_tokens=4 * STEPS)
    folder = tmp_path / "ckpt"
    folder.mkdir()
    recipe = TrainRecipe.model_validate(_branch_from(raw, folder, tmp_path / "out"))
    for record in ([1, 2], {"a": {"shards": "x", "stream": [7, "a", -1]}}, {"a": {"stream": [7, "a", 3]}}):
        (folder / STATE_FILE).write_text(json.dumps({"data_sources": record}))
        streams, note = start_streams(recipe, recipe.stage("decay"))
        assert streams == {} and note and str(folder) in note and "data_sources" in note, record
    (folder / STATE_FILE).write_text("{not json")
    streams, note = start_streams(recipe, recipe.stage("decay"))
    assert streams == {} and note and str(folder) in note and "\n" not in note
