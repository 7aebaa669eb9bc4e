"""`mathmix web` and `mathmix run` findings of the session's review: a recipe's unused web inputs recorded as a
setting, the dry run and the classifier's inputs, the rows-without-html warning's count."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mathmix.cli import app

MATH = (
    "<html><head><script src='mathjax.js'></script></head><body><article><h1>Quadratic equations</h1>"
    + "<p>The roots of <script type='math/tex'>ax^2+bx+c=0</script> are given by the quadratic formula, and "
    "we prove that the discriminant decides how many real solutions the equation has.</p>"
    * 8
    + "</article></body></html>"
)


def _out(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture()
def pages(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "math.html").write_text(MATH)
    return folder


def _recipe(tmp_path, name: str, inputs: str):
    recipe = tmp_path / name
    recipe.write_text(f"name: r\nstages:\n  web: {{inputs: [{inputs}], write_rejects: true}}\n")
    return recipe


def test_a_recipes_web_inputs_unused_on_the_command_line_are_no_setting(pages, tmp_path):
    out = tmp_path / "w"
    first = CliRunner().invoke(
        app,
        [
            "web",
            str(pages),
            "-o",
            str(out),
            "--recipe",
            str(_recipe(tmp_path, "a.yaml", "'crawl/*.warc.gz'")),
        ],
    )
    assert first.exit_code == 0, first.output
    assert "inputs" not in json.loads((out / "job.json").read_text())["settings"]
    # the same job: without the recipe, or with a recipe naming other web inputs
    for extra in ([], ["--recipe", str(_recipe(tmp_path, "b.yaml", "'other/*.html'"))]):
        again = CliRunner().invoke(app, ["web", str(pages), "-o", str(out), "--write-rejects", *extra])
        assert again.exit_code == 0, again.output
        assert "another job" not in _out(again)


def test_a_folder_that_recorded_the_recipes_inputs_is_still_this_job(pages, tmp_path):
    out = tmp_path / "w"
    first = CliRunner().invoke(app, ["web", str(pages), "-o", str(out), "--write-rejects"])
    assert first.exit_code == 0, first.output
    record = json.loads((out / "job.json").read_text())
    record["settings"]["inputs"] = ["crawl/*.warc.gz"]  # as `--recipe` recorded it before
    (out / "job.json").write_text(json.dumps(record))
    for extra in ([], ["--recipe", str(_recipe(tmp_path, "a.yaml", "'crawl/*.warc.gz'"))]):
        again = CliRunner().invoke(app, ["web", str(pages), "-o", str(out), "--write-rejects", *extra])
        assert again.exit_code == 0, again.output
        assert "another job" not in _out(again)
    # other input files are still another job
    other = tmp_path / "other"
    other.mkdir()
    (other / "m.html").write_text(MATH.replace("Quadratic", "Cubic"))
    refused = CliRunner().invoke(app, ["web", str(other), "-o", str(out), "--write-rejects"])
    assert refused.exit_code == 2 and "another job" in _out(refused)


def _classifier_recipe(tmp_path, positives: str, negatives: str):
    recipe = tmp_path / "c.yaml"
    recipe.write_text(
        f"name: c\noutput_dir: {tmp_path / 'run'}\nexecutor: {{tasks: 1}}\nstages:\n"
        f"  classifier: {{positives: [{positives}], negatives: [{negatives}], max_docs_per_input: 10}}\n"
    )
    return recipe


@pytest.mark.parametrize("case", ["missing", "empty", "unsupported", "both", "none"])
def test_the_dry_run_refuses_classifier_inputs_the_run_refuses(pages, tmp_path, case):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    given = {
        "missing": (str(tmp_path / "nosuch"), f"{tmp_path / 'nosuch'}: no such file or folder"),
        "empty": (str(empty), f"{empty}: folder holds no .html pages"),
        "unsupported": (str(empty / "notes.txt"), f"{empty / 'notes.txt'}: expected .html pages"),
        "both": (str(pages), "1 file(s) are inputs of both"),
        "none": ("", "give math inputs"),
    }
    positives, said = given[case]
    recipe = _classifier_recipe(tmp_path, positives, str(pages))
    for dry in (["--dry-run"], []):
        result = CliRunner().invoke(app, ["run", str(recipe), *dry])
        assert result.exit_code == 2, (dry, result.output)
        assert f"stage classifier: {said}" in _out(result), (dry, result.output)
    assert not (tmp_path / "run" / "classifier").exists()


def test_the_dry_run_lets_good_classifier_inputs_and_earlier_stages_outputs_pass(pages, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.html").write_text(MATH.replace("Quadratic", "Cubic"))
    result = CliRunner().invoke(
        app, ["run", str(_classifier_recipe(tmp_path, str(pages), str(other))), "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert "will run" in _out(result)


def test_the_rows_without_html_warning_counts_rows_not_pages(pages, tmp_path):
    # an HTML page beside a JSONL file of 2 rows, one without html: docs_in is 3 pages, 2 of them rows
    (pages / "rows.jsonl").write_text(json.dumps({"html": MATH}) + "\n" + json.dumps({"text": "x"}) + "\n")
    result = CliRunner().invoke(app, ["web", str(pages), "-o", str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "w" / "summary.json").read_text())["docs_in"] == 3
    said = _out(result)
    assert "1 JSONL/JSON input row has no `html` field" in said and "of 3" not in said, result.output
    # JSONL alone: every page a row, the total is the rows'
    rows = tmp_path / "rows"
    rows.mkdir()
    (pages / "rows.jsonl").rename(rows / "rows.jsonl")
    result = CliRunner().invoke(app, ["web", str(rows), "-o", str(tmp_path / "w2")])
    assert result.exit_code == 0, result.output
    assert "1 of 2 input rows have no `html` field" in _out(result), result.output


def test_a_run_whose_web_stage_scores_nothing_says_so(pages, tmp_path):
    """A recipe without a classifier stage kept every page unscored with no word (`mathmix web` says it in a note);
    a model.bin left in the run folder by an earlier classifier stage is not used."""
    result = CliRunner().invoke(
        app, ["run", str(_recipe(tmp_path, "r.yaml", str(pages))), "-o", str(tmp_path / "run")]
    )
    assert result.exit_code == 0, result.output
    assert "note: web: no math classifier (no classifier stage in this recipe, no web.math_model)" in _out(
        result
    )
