"""`mathmix run --dry-run` says per stage what the run would do (`complete, skipped`, `will run`, `refused: ...`)
and is refused where the run is; damaged records and summaries are refused naming the file, not taken as none."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.recipe import load_recipe
from pipelines.runner import StageFailed, run_recipe

PAGE = (
    "<html><head><title>Quadratics {i}</title></head><body><article><h1>Solving quadratics {i}</h1>"
    "<p>Let $x^2 + {i}x + 1 = 0$. By the quadratic formula the roots are real when the discriminant "
    "${i}^2 - 4 \\ge 0$ is not negative, so for {i} the equation has real roots and we can solve it by "
    "completing the square as well. Each step of the derivation is shown below with its reasoning.</p>"
    "<p>Page {i} continues the lesson with exercises on factoring and on the sum of the roots.</p>"
    "</article></body></html>"
)


def _recipe(root: Path, dedup: str = "{minhash: false}", web: str = "") -> Path:
    """A web + dedup recipe in ROOT writing ROOT/run (relative: the tests run in ROOT); web reads PAGES."""
    web = web or f"{{inputs: [{PAGES}]}}"
    path = root / "r.yaml"
    path.write_text(
        f"name: t\noutput_dir: run\nexecutor: {{tasks: 1, workers: 1}}\n"
        f"stages:\n  web: {web}\n  dedup: {dedup}\n"
    )
    return path


PAGES = Path()  # the pages every copy of the run reads (recorded by their absolute path)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished web + dedup run over three pages."""
    global PAGES
    root = tmp_path_factory.mktemp("finished")
    PAGES = tmp_path_factory.mktemp("pages")
    for i in range(3):
        (PAGES / f"p{i}.html").write_text(PAGE.replace("{i}", str(i + 2)))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        run_recipe(load_recipe(_recipe(root)))
    assert (root / "run" / "dedup" / "summary.json").is_file()
    return root


@pytest.fixture
def run_copy(finished, tmp_path, monkeypatch):
    """A copy of the finished run to damage or change; the current folder is its root."""
    root = tmp_path / "copy"
    shutil.copytree(finished, root)
    monkeypatch.chdir(root)
    return root


def _said(capsys) -> str:
    return " ".join(capsys.readouterr().err.split())


def test_a_finished_run_is_shown_skipped(run_copy, capsys):
    assert run_recipe(load_recipe(_recipe(run_copy)), dry_run=True) == {}
    said = _said(capsys)
    assert said.count("complete, skipped") == 2, said


def test_a_changed_setting_is_refused_in_the_dry_run_as_in_the_run(run_copy, capsys):
    recipe = _recipe(run_copy, dedup="{minhash: false, n_grams: 4}")
    before = sorted(p.relative_to(run_copy) for p in run_copy.rglob("*"))
    with pytest.raises(StageFailed, match="settings.n_grams: .*4") as dry:
        run_recipe(load_recipe(recipe), dry_run=True)
    said = _said(capsys)
    assert dry.value.stage == "dedup"
    assert "complete, skipped" in said and "refused:" in said, said
    assert sorted(p.relative_to(run_copy) for p in run_copy.rglob("*")) == before  # nothing written
    with pytest.raises(StageFailed) as real:
        run_recipe(load_recipe(recipe))
    assert str(real.value) == str(dry.value)


def test_a_stage_redone_before_a_finished_one_is_refused(run_copy, capsys):
    shutil.rmtree(run_copy / "run" / "web")
    with pytest.raises(StageFailed, match="web will be redone before dedup runs") as err:
        run_recipe(load_recipe(_recipe(run_copy)), dry_run=True)
    assert err.value.stage == "dedup"
    said = _said(capsys)
    assert "will run" in said and f"Delete {Path('run/dedup')}" in said, said
    assert not (run_copy / "run" / "web").exists()


def test_only_a_stage_whose_earlier_stage_has_not_run_is_refused(finished, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StageFailed, match="web, which comes before dedup in this recipe, has not finished"):
        run_recipe(load_recipe(_recipe(tmp_path)), dry_run=True, only=["dedup"])
    assert "web: not run (--only)" in _said(capsys)
    assert not (tmp_path / "run").exists()


def test_an_emptied_stage_record_is_refused_naming_it(run_copy):
    (run_copy / "run" / "dedup" / "recipe-stage.json").write_text("")
    recipe = _recipe(run_copy, dedup="{minhash: false, n_grams: 4}")
    for dry_run in (True, False):  # it was taken as no record: the changed dedup was `already complete`
        with pytest.raises(StageFailed, match=r"recipe-stage\.json .*cannot be read"):
            run_recipe(load_recipe(recipe), dry_run=dry_run)


def test_an_emptied_upstream_record_is_refused_naming_it(run_copy):
    (run_copy / "run" / "dedup" / "upstream.json").write_text("")
    for dry_run in (True, False):
        with pytest.raises(StageFailed, match=r"upstream\.json .*cannot be read"):
            run_recipe(load_recipe(_recipe(run_copy)), dry_run=dry_run)


def test_a_truncated_summary_is_refused_naming_it(run_copy):
    summary = run_copy / "run" / "web" / "summary.json"
    summary.write_text(summary.read_text()[:10])
    with pytest.raises(StageFailed, match=r"web/summary\.json .*cannot be read"):
        run_recipe(load_recipe(_recipe(run_copy)))


def test_upstream_record_is_written_whole_or_not_at_all(run_copy, monkeypatch):
    record = run_copy / "run" / "web" / "upstream.json"
    kept = record.read_text()
    real = Path.write_text

    def disk_full(self, data, *args, **kwargs):
        if "upstream" in self.name:
            real(self, data[: len(data) // 2], *args, **kwargs)
            raise OSError(28, "No space left on device")
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(StageFailed, match="No space left on device"):
        run_recipe(load_recipe(_recipe(run_copy)))
    assert record.read_text() == kept
    assert [p.name for p in record.parent.iterdir() if "tmp" in p.name] == []


def test_a_first_stage_without_inputs_is_refused_naming_the_recipe(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipe = tmp_path / "r.yaml"
    for stages in ("{dedup: {}}", "{web: {}, dedup: {}}", "{web: null}"):
        recipe.write_text(f"name: t\noutput_dir: run\nstages: {stages}\n")
        first = "dedup" if stages == "{dedup: {}}" else "web"
        for dry_run in (True, False):
            with pytest.raises(ValueError, match=rf"r\.yaml: stages\.{first}\.inputs is required"):
                run_recipe(load_recipe(recipe), dry_run=dry_run)
        assert not (tmp_path / "run").exists()


def test_an_unfinished_web_stage_of_the_earlier_reader_is_refused_in_the_dry_run_as_in_the_run(
    run_copy, capsys
):
    """The web command refuses a folder holding unfinished work of an earlier reader (mathmix-web/1, no
    `extraction` in job.json); the dry run said `will run` there. A finished one is kept by both."""
    import json

    web = run_copy / "run" / "web"
    record = json.loads((web / "job.json").read_text())
    del record["extraction"]
    (web / "job.json").write_text(json.dumps(record))
    assert run_recipe(load_recipe(_recipe(run_copy)), dry_run=True) == {}  # finished: kept
    assert _said(capsys).count("complete, skipped") == 2
    (web / "summary.json").unlink()  # killed after its tasks finished, before its summary
    shutil.rmtree(run_copy / "run" / "dedup")
    with pytest.raises(StageFailed, match="earlier reader") as dry:
        run_recipe(load_recipe(_recipe(run_copy)), dry_run=True)
    assert dry.value.stage == "web" and "refused:" in _said(capsys)
    with pytest.raises(StageFailed, match="earlier reader"):
        run_recipe(load_recipe(_recipe(run_copy)))
