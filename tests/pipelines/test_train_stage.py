"""Recipe stage `train`: mixture sources the run has no shards for are refused, before the first stage where that
is known, unless the train block says `missing_sources: drop` (a warning then names them and the weights left).
Dropping them unasked turned the 3B recipe's decay-long into 100% web on a run with only corpus and qa shards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.executors import ExecutorConfig
from pipelines.stages import StageContext

REPO = Path(__file__).resolve().parents[2]
OCTOTHINKER = str(REPO / "recipes" / "octothinker-3b.yaml")


def _shards(run: Path, names: tuple[str, ...] = ("corpus", "qa")) -> None:
    """RUN/shards/manifest.json as the shards stage writes it, listing NAMES (their folders, empty: nothing here
    reads the shards themselves)."""
    sources = {}
    for name in names:
        (run / "shards" / name).mkdir(parents=True)
        sources[name] = {"path": str(run / "shards" / name), "documents": 1, "tokens": 10}
    manifest = {
        "tokenizer": str(run / "shards" / "tokenizer"),
        "vocab_size": 300,
        "eos_id": 0,
        "sources": sources,
    }
    (run / "shards" / "manifest.json").write_text(json.dumps(manifest))


def _run_recipe(tmp_path: Path, train: str, stages: str = "") -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{tasks: 1, workers: 1}}\nstages:\n{stages}"
        f"  train: {train}\n"
    )
    return path


def test_a_stage_to_train_without_shards_for_a_source_is_refused_naming_each(tmp_path, capsys):
    from pipelines.train import Config, prepare_recipe

    run = tmp_path / "run"
    _shards(run)
    ctx = StageContext(run_dir=run, out_dir=run / "train", inputs=[], executor=ExecutorConfig())
    config = Config(recipe=OCTOTHINKER, stages=["stable", "decay-long"])
    with pytest.raises(ValueError, match="no shards for mixture sources") as refused:
        prepare_recipe(config, ctx)
    message = str(refused.value)
    assert "stage stable: refine; stage decay-long: refine, longcot (the run's shards: corpus, qa)" in message
    assert "decay-short" not in message and "missing_sources: drop" in message  # only the stages to train

    # asked to drop: dropped, the others renormalised, said on stderr, and listed as before
    bound, missing = prepare_recipe(config.model_copy(update={"missing_sources": "drop"}), ctx)
    assert missing["decay-long"] == ["refine", "longcot"]
    assert [s.name for s in bound.stage("decay-long").build_mixture(run).sources] == ["corpus"]
    warning = " ".join(capsys.readouterr().err.split())
    assert "warning: no shards for mixture sources" in warning
    assert "stage decay-long: refine, longcot (left: corpus 0.35 -> 1)" in warning
    assert "stage stable: refine (left: corpus 0.65 -> 0.867, qa 0.1 -> 0.133)" in warning


def test_the_run_refuses_before_its_first_stage_where_the_shards_exist(tmp_path):
    # the shards stage has run (a rerun after train failed, or --only train): train is refused up front, in a
    # dry run too, and nothing is written
    from pipelines.recipe import load_recipe
    from pipelines.runner import StageFailed, run_recipe

    run = tmp_path / "run"
    _shards(run)
    train = f"{{recipe: {OCTOTHINKER}, stages: [stable, decay-long]}}"
    for dry_run in (True, False):
        with pytest.raises(StageFailed, match=r"stage train: .*stage decay-long: refine, longcot"):
            run_recipe(load_recipe(_run_recipe(tmp_path, train)), dry_run=dry_run)
    assert not (run / "train").exists()
    drop = f"{{recipe: {OCTOTHINKER}, stages: [stable, decay-long], missing_sources: drop}}"
    assert run_recipe(load_recipe(_run_recipe(tmp_path, drop)), dry_run=True) == {}


def test_a_fresh_run_is_refused_before_its_first_stage_from_its_plan(tmp_path):
    # nothing has run yet: the runner hands train's check its plan (a rewrite of qa only, no refine branch), so
    # the run stops before the web stage, in a dry run too, and writes nothing
    from pipelines.recipe import load_recipe
    from pipelines.runner import StageFailed, run_recipe

    stages = "  rewrite: {tasks: [qa], model: auto}\n  shards: {tokenizer: train}\n"
    train = f"{{recipe: {OCTOTHINKER}, stages: [stable, decay-long]}}"
    for dry_run in (True, False):
        with pytest.raises(StageFailed, match=r"stage train: .*stage decay-long: refine, longcot \(the shards this "
                                              r"run will have: corpus, qa\)"):  # fmt: skip
            run_recipe(load_recipe(_run_recipe(tmp_path, train, stages)), dry_run=dry_run)
        assert not (tmp_path / "run").exists()


def test_the_shards_a_run_will_have_are_known_from_its_plan(tmp_path):
    """Given the runner's plan, the train stage's preflight knows the shards of a run that has not started: the
    corpus and a branch per rewrite task (recipes/quickstart.yaml rewrites qa only; tiny-cpu names refine)."""
    from pipelines.recipe import load_recipe
    from pipelines.runner import plan
    from pipelines.train import preflight

    recipe = load_recipe(REPO / "recipes" / "quickstart.yaml")
    recipe.output_dir = tmp_path / "run"
    steps = plan(recipe)
    config = next(step["config"] for step in steps if step["stage"] == "train")
    assert config.missing_sources == "drop"  # the quickstart asks for it
    preflight(config, recipe.output_dir, plan=steps)
    refuse = config.model_copy(update={"missing_sources": "refuse"})
    with pytest.raises(ValueError, match=r"stage stable: refine; stage decay-short: refine \(the shards this run "
                                         r"will have: corpus, qa\)"):  # fmt: skip
        preflight(refuse, recipe.output_dir, plan=steps)
    # a branch already in the run folder is sharded too
    (recipe.output_dir / "branches" / "refine" / "data").mkdir(parents=True)
    preflight(refuse, recipe.output_dir, plan=steps)


def test_a_finished_stage_that_dropped_sources_unasked_is_named(tmp_path):
    # an earlier mathmix dropped them without a setting: kept only where the block now says drop
    from pipelines.train import Config, preflight

    run = tmp_path / "run"
    (run / "train").mkdir(parents=True)
    (run / "train" / "summary.json").write_text(json.dumps({"missing_sources": {"stable": ["refine"]}}))
    with pytest.raises(
        ValueError, match=r"finished stage .*\(stage stable: refine; an earlier mathmix dropped"
    ):
        preflight(Config(), run)
    preflight(Config(missing_sources="drop"), run)
    (run / "train" / "summary.json").write_text(json.dumps({"missing_sources": {}}))
    preflight(Config(), run)


def test_a_stage_record_from_before_the_setting_is_the_dropping_stage(tmp_path):
    # a finished quickstart run from before `missing_sources` (its record has no such setting) reran every stage
    # skipped: the record is the stage that now says drop, adopted once (rewritten with the setting)
    from pipelines.recipe import load_recipe
    from pipelines.runner import run_recipe

    recipe = _run_recipe(tmp_path, "{recipe: recipes/tiny-cpu.yaml, missing_sources: drop}")
    record = tmp_path / "run" / "train" / "recipe-stage.json"
    record.parent.mkdir(parents=True)
    (record.parent / "summary.json").write_text("{}")  # finished: the record is checked, nothing trains
    assert "train" in run_recipe(load_recipe(recipe))
    written = json.loads(record.read_text())
    assert written["settings"] == {"missing_sources": "drop"}
    written["settings"] = {}
    record.write_text(json.dumps(written))  # as the previous mathmix wrote it
    assert "train" in run_recipe(load_recipe(recipe))
    assert json.loads(record.read_text())["settings"] == {"missing_sources": "drop"}
