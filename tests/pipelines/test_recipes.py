"""Every shipped recipe parses; a wrong key or value is an error that names it; the CLI's plan matches the recipe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipelines.recipe import RecipeError, load_recipe
from pipelines.runner import StageFailed, plan

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def _kind(path: Path) -> str:
    raw = yaml.safe_load(path.read_text())
    if "mixtures" in path.parts:
        return "mixture"
    return "train" if "trainer" in raw or "model" in raw else "run"


@pytest.mark.parametrize("path", sorted(RECIPES.rglob("*.yaml")), ids=lambda p: str(p.relative_to(RECIPES)))
def test_every_shipped_recipe_parses(path):
    kind = _kind(path)
    if kind == "run":
        recipe = load_recipe(path)
        assert recipe.stages, f"{path} has no stages"
    elif kind == "train":
        from midtrain.config import load_train_recipe

        assert load_train_recipe(path).name
    else:
        from shards.mixture import MixtureConfig

        raw = yaml.safe_load(path.read_text())
        assert MixtureConfig.model_validate(raw.get("mixture", raw)).sources


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return path


def test_unknown_keys_and_bad_values_are_named(tmp_path):
    with pytest.raises(RecipeError, match="colour"):
        load_recipe(_write(tmp_path, "name: x\ncolour: red\n"))
    with pytest.raises(RecipeError, match=r"stages\.web\.lang_treshold: Extra inputs"):
        load_recipe(_write(tmp_path, "name: x\nstages:\n  web: {lang_treshold: 0.5}\n"))
    with pytest.raises(RecipeError, match=r"stages\.web\.lang_threshold: .* \(got 7\)"):
        load_recipe(_write(tmp_path, "name: x\nstages:\n  web: {lang_threshold: 7}\n"))
    with pytest.raises(RecipeError, match="unknown stage"):
        load_recipe(_write(tmp_path, "name: x\nstages:\n  webb: {}\n"))
    with pytest.raises(RecipeError, match="executor.kind"):
        load_recipe(_write(tmp_path, "name: x\nexecutor: {kind: kubernetes}\n"))
    with pytest.raises(RecipeError, match="not found"):
        load_recipe(tmp_path / "missing.yaml")


def test_every_bad_stage_is_named_once_without_the_whole_mapping(tmp_path):
    text = "name: x\nexecutor: {tasks: two}\nstages:\n  web: {inputs: x.warc.gz}\n  dedup: {bands: eleven}\n"
    with pytest.raises(RecipeError) as err:
        load_recipe(_write(tmp_path, text))
    message = str(err.value)
    assert (
        "executor.tasks:" in message and "stages.web.inputs:" in message and "stages.dedup.bands:" in message
    )
    assert "Value error" not in message and "{'web'" not in message and "stages: stages" not in message


def test_a_key_given_twice_is_refused_and_home_is_expanded(tmp_path):
    twice = "name: x\nstages:\n  dedup: {bands: 11}\n  web: {}\n  dedup: {bands: 5}\n"
    with pytest.raises(RecipeError, match=r"'dedup' is given twice in one mapping"):
        load_recipe(_write(tmp_path, twice))
    with pytest.raises(RecipeError, match=r"'bands' is given twice"):
        load_recipe(_write(tmp_path, "name: x\nstages:\n  dedup: {bands: 11, bands: 5}\n"))
    recipe = load_recipe(_write(tmp_path, "name: x\noutput_dir: ~/runs/x\nstages: {dedup: {}}\n"))
    assert recipe.output_dir == Path.home() / "runs" / "x"
    # YAML merge keys are not duplicates (a local key may override a merged one)
    merged = (
        "name: x\nstages:\n  dedup: &common {tasks: 1, bands: 11}\n  decont:\n    <<: *common\n    tasks: 2\n"
    )
    with pytest.raises(RecipeError, match="decont.bands"):  # merged in, and decont has no bands
        load_recipe(_write(tmp_path, merged))
    ok = "name: x\nstages:\n  dedup: &common {tasks: 1}\n  decont:\n    <<: *common\n    ngram: 8\n"
    assert load_recipe(_write(tmp_path, ok)).stages["decont"].tasks == 1
    # chained: an anchored mapping that merges another and overrides one of its keys, merged in turn
    chained = (
        "name: x\nstages:\n  dedup: &base {tasks: 1, bands: 11}\n"
        "  web: &web {inputs: [a.warc.gz]}\n"
        "  decont:\n    <<: *web\n    ngram: 8\n"
    )
    assert load_recipe(_write(tmp_path, chained)).stages["decont"].ngram == 8
    import yaml

    from mathmix.yaml_files import UniqueKeyLoader

    text = "base: &b {a: 1, b: 2}\nx: &x\n  <<: *b\n  b: 3\nw:\n  <<: *x\n  c: 4\n"
    assert yaml.load(text, Loader=UniqueKeyLoader) == yaml.safe_load(text)


def test_plan_chains_stage_outputs(tmp_path):
    recipe = load_recipe(
        _write(
            tmp_path, "name: x\noutput_dir: out\nstages:\n  dedup: {}\n  web: {inputs: ['{run_dir}/in']}\n"
        )
    )
    steps = plan(recipe)
    assert [s["stage"] for s in steps] == ["web", "dedup"]  # registry order, whatever the file's order
    assert steps[0]["inputs"] == ["out/in"]
    assert steps[1]["inputs"] == [str(Path("out") / "web" / "data")]


def test_cli_dry_run_and_bad_recipe(tmp_path):
    dry_run = [sys.executable, "-m", "mathmix", "run", str(RECIPES / "quickstart.yaml"), "--dry-run"]
    # its benchmarks are the sample only the quickstart writes: the run would fail at decont, so does its plan
    refused = subprocess.run(dry_run, capture_output=True, text=True)
    assert (
        refused.returncode == 2 and "stage decont: no benchmarks to decontaminate against" in refused.stderr
    )
    bench = tmp_path / "run" / "sample" / "bench" / "gsm8k" / "test.jsonl"
    bench.parent.mkdir(parents=True)
    bench.write_text('{"question": "How many apples does Tom have if he buys four more apples today?"}\n')
    ok = subprocess.run([*dry_run, "-o", str(tmp_path / "run")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "web" in ok.stderr and str(tmp_path / "run") in " ".join(ok.stderr.split("\n"))
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "mathmix",
            "run",
            str(_write(tmp_path, "name: x\nstages: {web: {bogus: 1}}\n")),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "bogus" in bad.stderr and "Traceback" not in bad.stderr


def test_every_command_has_help():
    out = subprocess.run([sys.executable, "-m", "mathmix", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for group in ("run", "quickstart", "web"):
        assert group in out.stdout
    web = subprocess.run([sys.executable, "-m", "mathmix", "web", "--help"], capture_output=True, text=True)
    assert "extract" in web.stdout and "run" in web.stdout


def test_executor_workers_zero_is_named(tmp_path):
    with pytest.raises(RecipeError, match="workers must be -1"):
        load_recipe(_write(tmp_path, "name: x\nexecutor: {workers: 0}\nstages: {web: {}}\n"))


def test_dry_run_shows_only_the_stages_only_selects(tmp_path, capsys):
    from pipelines.recipe import load_recipe
    from pipelines.runner import run_recipe

    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: r\noutput_dir: {tmp_path / 'run'}\nstages:\n  web: {{inputs: [a.warc.gz]}}\n  dedup: {{}}\n"
    )
    with pytest.raises(StageFailed, match="web, which comes before dedup in this recipe, has not finished"):
        run_recipe(load_recipe(recipe), dry_run=True, only=["dedup"])  # refused as the run is: web never ran
    err = " ".join(capsys.readouterr().err.split())
    assert (
        "web: not run (--only)" in err
        and "dedup:" in err
        and "-> " + str(tmp_path / "run" / "web") not in err
    )


def test_a_train_recipe_or_a_mixture_given_to_run_says_what_it_is():
    root = Path(__file__).resolve().parents[2] / "recipes"
    with pytest.raises(RecipeError, match="is a train recipe .*mathmix train"):
        load_recipe(
            root / "tiny-cpu.yaml"
        )  # it listed 'run_dir: Extra inputs are not permitted' and the like
    with pytest.raises(RecipeError, match="is a data mixture .*shards mix"):
        load_recipe(root / "mixtures" / "octothinker-stable.yaml")


def test_dry_run_refuses_a_run_folder_inside_a_stage_folder(tmp_path, capsys):
    # --dry-run printed the plan of a whole run nested in RUN/web, which the run itself refuses
    from pipelines.runner import run_recipe

    web = tmp_path / "run" / "web"
    web.mkdir(parents=True)
    (web / "recipe-stage.json").write_text("{}")
    recipe = load_recipe(
        _write(tmp_path, "name: r\noutput_dir: out\nstages:\n  web: {inputs: [a.warc.gz]}\n")
    )
    for out in (web, web / "nested"):
        recipe.output_dir = out
        with pytest.raises(ValueError, match="a stage folder"):
            run_recipe(recipe, dry_run=True)
    assert "->" not in capsys.readouterr().err and not (web / "nested").exists()
