"""`{recipe_dir}` in a run recipe is the recipe file's folder (as in train recipes); another placeholder than it and
`{run_dir}` is an error naming it; other relative paths stay relative to the current folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.recipe import RecipeError, load_recipe


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "r.yaml"
    path.write_text(text)
    return path


def test_recipe_dir_is_the_recipes_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(
        tmp_path / "recipes",
        'name: t\noutput_dir: "{recipe_dir}/out"\nstages:\n'
        '  web: {inputs: ["{recipe_dir}/crawl/*.warc.gz", "{run_dir}/x.warc", rel.warc]}\n'
        '  decont: {benchmarks: ["{recipe_dir}/bench"]}\n',
    )
    loaded = load_recipe(Path("recipes/r.yaml"))
    folder = str(tmp_path.resolve() / "recipes")
    assert loaded.output_dir == Path(folder) / "out"  # a folder named `{recipe_dir}` was made
    assert loaded.stages["web"].inputs == [f"{folder}/crawl/*.warc.gz", "{run_dir}/x.warc", "rel.warc"]
    assert loaded.stages["decont"].benchmarks == [f"{folder}/bench"]


def test_an_unknown_placeholder_is_named(tmp_path):
    recipe = _write(tmp_path, 'name: t\nstages:\n  web: {inputs: ["{recpie_dir}/a.warc"]}\n')
    with pytest.raises(
        RecipeError, match=r"r\.yaml: stages\.web\.inputs\[0\]: unknown placeholder \{recpie_dir\}"
    ):
        load_recipe(recipe)
    recipe = _write(tmp_path, 'name: t\noutput_dir: "{home}/out"\nstages: {web: {inputs: [a]}}\n')
    with pytest.raises(RecipeError, match=r"output_dir: unknown placeholder \{home\}"):
        load_recipe(recipe)
