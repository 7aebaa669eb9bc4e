"""How stages hand documents on: a stage folder means its data/, a stage that keeps nothing still leaves an empty
data/, rejects cover every filter, and a rerun into a folder written by a different job is refused."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.dedup import Config as DedupConfig
from pipelines.dedup import run_dedup
from pipelines.executors import ExecutorConfig
from pipelines.recipe import load_recipe
from pipelines.runner import StageFailed, run_recipe
from pipelines.web import Config as WebConfig
from pipelines.web import run_web

MATH = "Let $x^2 + {i}x + 1 = 0$. By the quadratic formula the roots are real when ${i}^2 - 4 \\ge 0$, so x = {i}."


def _stage_folder(root: Path) -> Path:
    """A stage folder as the stages write it: 3 kept documents, 2 rejects, a summary and a log."""
    (root / "data").mkdir(parents=True)
    (root / "rejects").mkdir()
    (root / "logs").mkdir()
    texts = [MATH.replace("{i}", str(i)) + " " + "word " * (10 + i) for i in range(3)]
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": texts}), root / "data" / "00000.parquet")
    pq.write_table(
        pa.table({"id": ["r1", "r2"], "text": ["dropped one", "dropped two"], "reason": ["x", "y"]}),
        root / "rejects" / "Filter-00000.parquet",
    )
    (root / "summary.json").write_text(json.dumps({"docs_in": 5, "docs_out": 3}))
    (root / "logs" / "executor.json").write_text(json.dumps({"tasks": 1}))
    return root


def test_a_stage_folder_is_read_through_its_data(tmp_path):
    stage = _stage_folder(tmp_path / "web")
    summary = run_dedup(DedupConfig(minhash=False), [str(stage)], tmp_path / "dedup", ExecutorConfig(tasks=1))
    assert summary["docs_in"] == 3 and summary["docs_out"] == 3
    ids = pq.read_table(tmp_path / "dedup" / "data").column("id").to_pylist()
    assert sorted(ids) == ["a", "b", "c"]


def test_a_stage_that_keeps_nothing_leaves_an_empty_data_folder(tmp_path):
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "news.html").write_text("<html><body><p>The council met on Tuesday.</p></body></html>")
    web = tmp_path / "web"
    summary = run_web(WebConfig(), [str(pages)], web, ExecutorConfig(tasks=1))
    assert summary["docs_in"] == 1 and summary["docs_out"] == 0
    table = pq.read_table(web / "data")
    assert table.num_rows == 0 and "math_score" in table.column_names
    after = run_dedup(DedupConfig(), [str(web)], tmp_path / "dedup", ExecutorConfig(tasks=1))
    assert after["docs_in"] == 0 and after["docs_out"] == 0
    assert pq.read_table(tmp_path / "dedup" / "data").num_rows == 0


def test_a_rerun_with_other_inputs_or_settings_is_refused(tmp_path):
    stage = _stage_folder(tmp_path / "web")
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "z", "text": MATH.replace("{i}", "9")}) + "\n")
    out = tmp_path / "dedup"
    first = run_dedup(DedupConfig(minhash=False), [str(stage)], out, ExecutorConfig(tasks=1))
    again = run_dedup(DedupConfig(minhash=False), [str(stage)], out, ExecutorConfig(tasks=1))  # resumes
    assert again["docs_out"] == first["docs_out"]
    with pytest.raises(ValueError, match="another job than this dedup run.*other input paths"):
        run_dedup(DedupConfig(minhash=False), [str(other)], out, ExecutorConfig(tasks=1))
    with pytest.raises(ValueError, match=r"settings.minhash: False -> \(default\)"):
        run_dedup(DedupConfig(minhash=True), [str(stage)], out, ExecutorConfig(tasks=1))


@pytest.fixture(scope="module")
def pages(tmp_path_factory, shared_data):
    """20 real math pages and 20 real non-math pages, and a folder with both for the web stage."""
    root = tmp_path_factory.mktemp("pages")
    for kind in ("math", "nonmath"):
        for i, page in enumerate(sorted((shared_data / "html" / kind).glob("*.html"))[:20]):
            for folder in (root / kind, root / "crawl"):
                folder.mkdir(exist_ok=True)
                shutil.copy(page, folder / f"{kind}-{i}.html")
    return root


def test_recipe_rejects_cover_the_math_filter_and_paths_expand(tmp_path, pages):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{tasks: 1, workers: 1}}\nstages:\n"
        f"  classifier: {{positives: ['{pages}/math'], negatives: ['{pages}/nonmath']}}\n"
        f"  web: {{inputs: ['{pages}/cr*'], write_rejects: true, keep_top_percent: 50,"
        " math_model: '{run_dir}/classifier/model.bin'}\n"
    )
    summaries = run_recipe(load_recipe(recipe))
    web = summaries["web"]
    assert web["dropped"]["below_top_percent"] > 0
    rejects = pq.read_table(tmp_path / "run" / "web" / "rejects").to_pylist()
    by_step = {r["step"] for r in rejects if r["reason"] == "below_top_percent"}
    assert by_step == {"MathScoreFilter"}
    assert len(rejects) == sum(web["dropped"].values())
    assert all(r["math_score"] is not None for r in rejects if r["step"] == "MathScoreFilter")

    # The same recipe again: finished stages are skipped. A changed stage setting is refused, not skipped.
    assert run_recipe(load_recipe(recipe))["web"] == web
    recipe.write_text(recipe.read_text().replace("keep_top_percent: 50", "keep_top_percent: 60"))
    with pytest.raises(StageFailed, match=r"stage web: .*keep_top_percent: 50.0 -> 60.0"):
        run_recipe(load_recipe(recipe))


def test_run_cli_names_a_failed_stage_and_an_unknown_stage(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nstages:\n  web: {{inputs: ['{tmp_path}/nope*']}}\n"
    )

    def mathmix(*args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "COLUMNS": "1000"}  # no wrapping of the one-line error
        return subprocess.run(
            [sys.executable, "-m", "mathmix", *args], capture_output=True, text=True, env=env
        )

    failed = mathmix("run", str(recipe))
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert "stage web" in failed.stderr and "nope*: no file matches" in failed.stderr
    unknown = mathmix("run", str(recipe), "--only", "bogus")
    assert unknown.returncode == 2 and "--only bogus: not a stage of this recipe" in unknown.stderr


def test_a_stage_refused_before_it_starts_leaves_no_record(tmp_path):
    """A web input that is a missing path: the stage's records (recipe-stage.json, upstream.json), written before
    the stage ran, were left in an otherwise empty web/ folder, which then looked like a started stage (`mathmix
    web -o` into it was refused). A folder holding anything else keeps them: its work is what they protect."""
    pages = tmp_path / "pages"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{tasks: 1, workers: 1}}\nstages:\n"
        f"  web: {{inputs: ['{pages}']}}\n"
    )
    web = tmp_path / "run" / "web"
    with pytest.raises(StageFailed, match="pages: no such file or folder"):
        run_recipe(load_recipe(recipe))
    assert not web.parent.exists(), sorted(
        p.name for p in web.parent.rglob("*")
    )  # nor the run folder it made

    web.mkdir(parents=True)  # a folder the user made: refused again, it stays, empty
    with pytest.raises(StageFailed, match="pages: no such file or folder"):
        run_recipe(load_recipe(recipe))
    assert web.is_dir() and not any(web.iterdir())

    (web / "logs").mkdir()  # a stage started (a task log, no task finished): its records stay
    (web / "logs" / "executor.json").write_text("{}")
    with pytest.raises(StageFailed, match="pages: no such file or folder"):
        run_recipe(load_recipe(recipe))
    assert (web / "recipe-stage.json").is_file() and (web / "upstream.json").is_file()

    shutil.rmtree(web)
    pages.mkdir()
    (pages / "news.html").write_text("<html><body><p>The council met on Tuesday.</p></body></html>")
    assert run_recipe(load_recipe(recipe))["web"]["docs_in"] == 1  # the rerun runs


def test_a_failed_run_removes_the_run_folder_it_made_where_it_is_left_empty(tmp_path, monkeypatch):
    # the stage folder it made was removed, the run folder (and the folders above it) it made were left, empty
    empty = tmp_path / "empty"
    empty.mkdir()  # the stage finds no page in it: it fails after its folder was made
    recipe = load_recipe(_write_recipe(tmp_path, f"  web: {{inputs: ['{empty}']}}\n"))
    recipe.output_dir = tmp_path / "new" / "run"
    with pytest.raises(StageFailed, match="no WARC"):
        run_recipe(recipe)
    assert not (tmp_path / "new").exists()

    for kept in (tmp_path / "existed", tmp_path / "holds"):  # a folder that was there, or holds a file: kept
        kept.mkdir()
        recipe.output_dir = kept
        if kept.name == "holds":
            (kept / "notes.txt").write_text("x")
        with pytest.raises(StageFailed, match="no WARC"):
            run_recipe(recipe)
        assert kept.is_dir() and not (kept / "web").exists()
    assert [p.name for p in (tmp_path / "holds").iterdir()] == ["notes.txt"]

    made = tmp_path / "other" / "run"  # a run that wrote a file in its folder keeps it
    recipe.output_dir = made
    import pipelines.web

    real = pipelines.web.run_stage

    def writes_then_fails(config, ctx):
        (ctx.run_dir / "left.txt").write_text("x")
        return real(config, ctx)

    monkeypatch.setattr(pipelines.web, "run_stage", writes_then_fails)
    with pytest.raises(StageFailed, match="no WARC"):
        run_recipe(recipe)
    assert [p.name for p in made.iterdir()] == ["left.txt"]


def _write_recipe(tmp_path: Path, stages: str) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{tasks: 1, workers: 1}}\nstages:\n{stages}"
    )
    return path


def test_decont_rerun_against_other_benchmarks_is_refused(tmp_path):
    from pipelines.decont import Config as DecontConfig
    from pipelines.decont import run_decont

    stage = _stage_folder(tmp_path / "dedup")
    bench = tmp_path / "bench"
    bench.mkdir()
    question = (
        "Tom has 3 apples and buys 4 more apples at the market today. How many apples does he have now?"
    )
    (bench / "a.jsonl").write_text(json.dumps({"question": question, "answer": "7"}) + "\n")
    (bench / "b.jsonl").write_text(
        json.dumps({"question": question.replace("Tom", "Ann"), "answer": "7"}) + "\n"
    )
    out = tmp_path / "decont"
    first = run_decont(DecontConfig(), [str(stage)], out, ExecutorConfig(tasks=1), [str(bench / "a.jsonl")])
    assert first["docs_in"] == 3
    with pytest.raises(ValueError, match="another job than this decont run.*benchmarks"):
        run_decont(DecontConfig(), [str(stage)], out, ExecutorConfig(tasks=1), [str(bench / "b.jsonl")])


def test_job_identity_writes_paths_inside_the_run_dir_relative_to_it(tmp_path):
    from pipelines.job_record import job_identity

    run = tmp_path / "run"
    identity = job_identity(
        [run / "web" / "data"],
        {"model": str(run / "classifier" / "model.bin"), "other": str(tmp_path / "run2")},
        run,
    )
    assert identity["inputs"] == ["{run_dir}/web/data"]
    assert identity["settings"] == {
        "model": "{run_dir}/classifier/model.bin",
        "other": str(tmp_path / "run2"),
    }


def _corpus_run(root: Path) -> Path:
    """RUN/decont/data with 60 short math documents (enough text to train a tiny tokenizer on)."""
    data = root / "decont" / "data"
    data.mkdir(parents=True)
    texts = [MATH.replace("{i}", str(i)) for i in range(60)]
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(60)], "text": texts}), data / "00000.parquet")
    return root


def _shards_recipe(path: Path, run: Path, vocab: int) -> Path:
    path.write_text(
        f"name: t\noutput_dir: {run}\nexecutor: {{tasks: 1, workers: 1}}\nstages:\n"
        f"  shards: {{inputs: ['{{run_dir}}/decont/data'], vocab_size: {vocab}, branches: false}}\n"
    )
    return path


def test_a_copied_run_folder_resumes_and_a_changed_killed_stage_is_refused(tmp_path):
    run = _corpus_run(tmp_path / "run")
    recipe = _shards_recipe(tmp_path / "r.yaml", run, 300)
    first = run_recipe(load_recipe(recipe))["shards"]
    # Copy the run elsewhere and make its shards stage unfinished: it resumes there (paths inside the run folder
    # are recorded as {run_dir}/..., so the copy is the same job).
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    for summary in [copy / "shards" / "summary.json", *copy.glob("shards/*/summary.json")]:
        summary.unlink()
    again = run_recipe(load_recipe(_shards_recipe(tmp_path / "c.yaml", copy, 300)))["shards"]
    assert again["docs_out"] == first["docs_out"]
    # A killed stage (work done, no summary) resumed with another recipe block is refused, not resumed with the
    # tokenizer the first run trained.
    for summary in [copy / "shards" / "summary.json", *copy.glob("shards/*/summary.json")]:
        summary.unlink()
    with pytest.raises(StageFailed, match="vocab_size: 300 -> 400"):
        run_recipe(load_recipe(_shards_recipe(tmp_path / "c.yaml", copy, 400)))


def test_settings_at_their_defaults_are_not_part_of_a_job():
    from pipelines.job_record import job_identity

    assert (
        job_identity([], DedupConfig())["settings"] == {}
    )  # a field added later with a default changes nothing
    assert job_identity([], DedupConfig(bands=DedupConfig().bands))["settings"] == {}
    assert job_identity([], DedupConfig(bands=3))["settings"] == {"bands": 3}


def test_decont_benchmarks_are_recorded_as_files_not_as_typed(tmp_path, monkeypatch):
    from pipelines.decont import Config as DecontConfig
    from pipelines.decont import run_decont

    stage = _stage_folder(tmp_path / "dedup")
    question = (
        "Tom has 3 apples and buys 4 more apples at the market today. How many apples does he have now?"
    )
    for where, who in (("here", "Tom"), ("there", "Ann")):
        (tmp_path / where / "bench").mkdir(parents=True)
        row = {"question": question.replace("Tom", who), "answer": "7"}
        (tmp_path / where / "bench" / "a.jsonl").write_text(json.dumps(row) + "\n")
    out = tmp_path / "decont"
    monkeypatch.chdir(tmp_path / "here")
    run_decont(DecontConfig(), [str(stage)], out, ExecutorConfig(tasks=1), ["bench"])
    monkeypatch.chdir(tmp_path)  # the same files, named another way: the same job
    run_decont(DecontConfig(), [str(stage)], out, ExecutorConfig(tasks=1), [str(tmp_path / "here" / "bench")])
    monkeypatch.chdir(tmp_path / "there")  # the same name, other files: refused
    with pytest.raises(ValueError, match="benchmarks"):
        run_decont(DecontConfig(), [str(stage)], out, ExecutorConfig(tasks=1), ["bench"])


def test_an_output_that_is_a_file_is_named_by_every_stage_command(tmp_path):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "text": "some text"}) + "\n")
    env = {**os.environ, "COLUMNS": "1000"}
    for args in (["dedup", "in.jsonl"], ["shards", "build", "in.jsonl", "--tokenizer", "tok"]):
        done = subprocess.run([sys.executable, "-m", "mathmix", *args, "-o", "afile"], cwd=tmp_path,
                              capture_output=True, text=True, env=env)  # fmt: skip
        assert done.returncode == 2 and "afile: exists and is not a folder" in done.stderr, done.stderr


def test_a_folder_of_stage_folders_is_refused_by_every_reader_naming_them(tmp_path):
    from classifiers.data import InputError, read_input
    from curate.dedup_io import document_files
    from mathmix.paths import StageFoldersInside
    from shards.tokenizer import corpus_files

    run = tmp_path / "run"
    _stage_folder(run / "web")
    _stage_folder(run / "dedup")
    for read in (corpus_files, document_files):
        with pytest.raises(StageFoldersInside, match=r"holds stage folders \(dedup, web\)"):
            read([run])
    with pytest.raises(InputError, match="holds stage folders"):
        read_input(run)
    # each stage folder, and a dataset laid out as NAME/data/ (no stage files), read as before
    assert len(corpus_files([run / "web", run / "dedup"])) == 2
    dataset = tmp_path / "corpora" / "openwebmath" / "data"
    dataset.mkdir(parents=True)
    pq.write_table(pa.table({"id": ["a"], "text": ["x"]}), dataset / "train-00000.parquet")
    assert corpus_files([tmp_path / "corpora"]) == [dataset / "train-00000.parquet"]


def test_a_finished_stage_built_from_an_earlier_version_of_its_input_is_refused(tmp_path, pages):
    recipe = tmp_path / "r.yaml"
    web = f"  web: {{inputs: ['{pages}/crawl']}}\n"
    rest = "  dedup: {minhash: false}\n  decont: {benchmarks: ['" + str(tmp_path / "bench") + "']}\n"
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "gsm8k.jsonl").write_text(
        json.dumps({"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as "
                    "many clips in May. How many clips did Natalia sell?", "answer": "72"}) + "\n"
    )  # fmt: skip
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{tasks: 1, workers: 1}}\nstages:\n{web}{rest}"
    )
    run = tmp_path / "run"
    first = run_recipe(load_recipe(recipe))
    assert run_recipe(load_recipe(recipe)) == first  # the same run again: every stage skipped

    # dedup redone (deleted, as the refusal of a changed setting advises): decont was built from the old dedup
    shutil.rmtree(run / "dedup")
    with pytest.raises(
        StageFailed, match=r"stage decont: .*dedup was redone since decont ran\. Delete .*decont"
    ):
        run_recipe(load_recipe(recipe))

    # --only a stage whose earlier stage has not finished is refused (it used to run on the partial output)
    shutil.rmtree(run)
    run_recipe(load_recipe(recipe), only=["web"])
    (run / "web" / "summary.json").unlink()
    with pytest.raises(StageFailed, match=r"stage dedup: web, which comes before dedup .* has not finished"):
        run_recipe(load_recipe(recipe), only=["dedup"])

    # a stage added before finished ones: they were built without it (web would have been scored)
    shutil.rmtree(run)
    run_recipe(load_recipe(recipe))
    classifier = f"  classifier: {{positives: ['{pages}/math'], negatives: ['{pages}/nonmath']}}\n"
    recipe.write_text(recipe.read_text().replace("stages:\n", "stages:\n" + classifier))
    with pytest.raises(
        StageFailed, match=r"stage web: .*classifier was added since web ran\. .*\(dedup, decont\)"
    ):
        run_recipe(load_recipe(recipe))


def test_a_rerun_that_finds_every_task_done_keeps_the_summary(tmp_path):
    stage = _stage_folder(tmp_path / "web")
    out = tmp_path / "dedup"
    run_dedup(DedupConfig(minhash=False), [str(stage)], out, ExecutorConfig(tasks=1))
    before = (out / "summary.json").read_bytes()
    run_dedup(DedupConfig(minhash=False), [str(stage)], out, ExecutorConfig(tasks=1))
    assert (out / "summary.json").read_bytes() == before  # its timing too: this rerun did no work


def test_other_contents_at_the_same_input_paths_are_another_job(tmp_path):
    stage = _stage_folder(tmp_path / "web")
    out = tmp_path / "dedup"
    run_dedup(DedupConfig(minhash=False), [str(stage)], out, ExecutorConfig(tasks=1))
    # the web stage redone with other pages: the same path, other documents
    pq.write_table(
        pa.table({"id": ["q"], "text": [MATH.replace("{i}", "7")]}), stage / "data" / "00000.parquet"
    )
    with pytest.raises(ValueError, match=r"another job than this dedup run \(the input files changed"):
        run_dedup(DedupConfig(minhash=False), [str(stage)], out, ExecutorConfig(tasks=1))
    # a record written before sizes were recorded is the same job (and gets them)
    record = json.loads((out / "job.json").read_text())
    sizes = record.pop("input_sizes")
    (out / "job.json").write_text(json.dumps(record))
    shutil.rmtree(stage)
    _stage_folder(stage)  # the original contents again
    run_dedup(DedupConfig(minhash=False), [str(stage)], out, ExecutorConfig(tasks=1))
    assert json.loads((out / "job.json").read_text())["input_sizes"] == sizes


def test_a_file_reached_twice_is_read_once(tmp_path):
    from curate.dedup_io import document_files
    from curate.readers import input_files
    from shards.tokenizer import corpus_files

    stage = _stage_folder(tmp_path / "web")
    data = stage / "data" / "00000.parquet"
    assert corpus_files([stage, data, tmp_path / "web" / "data"]) == [data]
    assert document_files([stage, str(data)]) == ([data], [])
    (tmp_path / "page.html").write_text("<p>x</p>")
    assert input_files([str(tmp_path / "page.html"), str(tmp_path / "." / "page.html")]) == [
        str((tmp_path / "page.html").resolve())
    ]


def test_decont_without_benchmarks_in_a_user_recipe_says_to_set_them(tmp_path):
    stage = _stage_folder(tmp_path / "run" / "dedup")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nstages:\n  decont: {{inputs: ['{stage}']}}\n"
    )
    with pytest.raises(
        StageFailed, match=r"no benchmarks to decontaminate against: set stages.decont.benchmarks"
    ):
        run_recipe(load_recipe(recipe))


def test_a_finished_stage_over_a_glob_notices_replaced_files(tmp_path):
    (tmp_path / "in").mkdir()
    rows = [{"id": str(i), "text": MATH.replace("{i}", str(i))} for i in range(3)]
    (tmp_path / "in" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{tasks: 1}}\nstages:\n"
        f"  dedup: {{inputs: ['{tmp_path}/in/*.jsonl'], minhash: false}}\n"
    )
    run_recipe(load_recipe(recipe))
    assert run_recipe(load_recipe(recipe))["dedup"]["docs_in"] == 3  # skipped: the same files
    (tmp_path / "in" / "a.jsonl").write_text(json.dumps(rows[0]) + "\n")  # the same name, other contents
    with pytest.raises(StageFailed, match="the input files changed"):
        run_recipe(load_recipe(recipe))


def test_a_stage_is_refused_over_an_earlier_stage_built_from_older_output(tmp_path):
    """--only audit after dedup was redone: decont (finished) was built from the old dedup, so audit would read
    stale documents; the refusal names decont and what follows it."""
    from pipelines.runner import _upstream

    steps = [{"stage": s, "output": str(tmp_path / s)} for s in ("web", "dedup", "decont", "audit")]
    for s in ("web", "dedup", "decont"):
        (tmp_path / s).mkdir()
        (tmp_path / s / "summary.json").write_text(json.dumps({"stage": s, "finished_at": "t0"}))
    (tmp_path / "decont" / "upstream.json").write_text(json.dumps(_upstream(steps, 2)))
    assert set(_upstream(steps, 3)) == {"web", "dedup", "decont"}  # all consistent
    (tmp_path / "dedup" / "summary.json").write_text(
        json.dumps({"stage": "dedup", "finished_at": "t1"})
    )  # redone
    with pytest.raises(ValueError, match=r"decont, which comes before audit, .*dedup was redone since decont ran\. "
                                         r"Delete .*decont and the stages after it \(audit\)"):  # fmt: skip
        _upstream(steps, 3)
    assert set(_upstream(steps, 2)) == {"web", "dedup"}  # decont itself is judged by its own check


def test_a_copied_runs_shards_manifest_points_into_the_copy(tmp_path):
    from pipelines.train import rebase_manifest

    old, new = tmp_path / "a" / "shards", tmp_path / "b" / "shards"
    manifest = {"tokenizer": str(old / "tokenizer"), "vocab_size": 9, "sources": {
        "corpus": {"path": str(old / "corpus"), "tokens": 5}, "qa": {"path": str(old / "qa"), "tokens": 0}}}  # fmt: skip
    moved = rebase_manifest(manifest, new)
    assert moved["tokenizer"] == str(new / "tokenizer") and moved["vocab_size"] == 9
    assert [s["path"] for s in moved["sources"].values()] == [str(new / "corpus"), str(new / "qa")]
    assert rebase_manifest(manifest, old) == manifest  # where it was written: unchanged
    external = dict(manifest, tokenizer="/models/llama/tokenizer")  # a tokenizer from outside the run stays
    assert rebase_manifest(external, new)["tokenizer"] == "/models/llama/tokenizer"


def test_a_finished_recipe_stage_whose_blocklist_was_edited_in_place_is_not_complete(tmp_path):
    # the stage was skipped as "already complete", keeping the output of the old list
    pages = tmp_path / "pages"
    pages.mkdir()
    for i in range(3):
        (pages / f"p{i}.html").write_text(f"<html><body><p>{MATH.replace('{i}', str(i))}</p></body></html>")
    blocklist = tmp_path / "bl.txt"
    blocklist.write_text("nothing.example\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: r\noutput_dir: {tmp_path / 'run'}\nexecutor: {{kind: local, tasks: 1}}\n"
        f'stages:\n  web: {{inputs: ["{pages}"], blocklist: "{blocklist}"}}\n'
    )
    assert "web" in run_recipe(load_recipe(recipe))
    assert "web" in run_recipe(load_recipe(recipe))  # unchanged: skipped as complete
    blocklist.write_text("nothing.example\nexample.org\n")
    with pytest.raises(StageFailed, match="blocklist: other contents at the same path"):
        run_recipe(load_recipe(recipe))


def test_a_finished_web_stage_whose_default_model_was_retrained_in_place_is_not_complete(tmp_path, pages):
    # web scores with RUN/classifier/model.bin by default; only a model the recipe named was digested, so a
    # model.bin retrained outside the recipe left web "already complete" with the old model's scores
    def recipe(run: Path, epoch: int) -> Path:
        path = tmp_path / f"r{epoch}.yaml"
        path.write_text(
            f"name: t\noutput_dir: {run}\nexecutor: {{tasks: 1, workers: 1}}\nstages:\n"
            f"  classifier: {{positives: ['{pages}/math'], negatives: ['{pages}/nonmath'], epoch: {epoch}}}\n"
            f"  web: {{inputs: ['{pages}/crawl']}}\n"
        )
        return path

    run = tmp_path / "run"
    first = recipe(run, 2)
    run_recipe(load_recipe(first))
    record = run / "web" / "recipe-stage.json"
    digests = json.loads(record.read_text())["file_digests"]
    assert digests["math_model"][0] == "{run_dir}/classifier/model.bin"

    # a record written before the default model was digested: the same job, rewritten with the digest
    old = json.loads(record.read_text())
    del old["file_digests"]
    record.write_text(json.dumps(old))
    assert "web" in run_recipe(load_recipe(first), only=["web"])
    assert json.loads(record.read_text())["file_digests"] == digests

    run_recipe(load_recipe(recipe(tmp_path / "other", 9)))  # retrained in place, outside the recipe
    shutil.copy(tmp_path / "other" / "classifier" / "model.bin", run / "classifier" / "model.bin")
    with pytest.raises(StageFailed, match="stage web: .*math_model: other contents at the same path"):
        run_recipe(load_recipe(first), only=["classifier", "web"])


def test_a_failed_task_prints_a_plain_traceback_not_every_frame_with_its_values(tmp_path):
    # loguru's defaults printed 190 lines for one missing folder, with the values of every variable
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "p.html").write_text(f"<html><body><p>{MATH.replace('{i}', '1')}</p></body></html>")
    (tmp_path / "run" / "web").mkdir(parents=True)
    (tmp_path / "run" / "web" / "data").write_text("a file where the stage writes a folder")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: r\noutput_dir: {tmp_path / 'run'}\nexecutor: {{kind: local, tasks: 1}}\n"
        f'stages:\n  web: {{inputs: ["{pages}"]}}\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGURU_")}
    proc = subprocess.run(
        [sys.executable, "-m", "mathmix", "run", str(recipe)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 2 and "error: stage web:" in proc.stderr
    assert len(proc.stderr.splitlines()) < 80, proc.stderr
    logs = list((tmp_path / "run" / "web" / "logs" / "logs").glob("task_*.log"))
    assert logs and "FileExistsError" in logs[0].read_text()  # the task log keeps the whole error


def test_a_copied_run_folder_whose_stages_read_files_inside_it_still_resumes(tmp_path):
    # the digests of files a stage reads were recorded with absolute paths: a copy was refused at that stage
    run = tmp_path / "run"
    (run / "pages").mkdir(parents=True)
    for i in range(2):
        (run / "pages" / f"p{i}.html").write_text(
            f"<html><body><p>{MATH.replace('{i}', str(i))}</p></body></html>"
        )
    (run / "bl.txt").write_text("nothing.example\n")
    body = 'executor: {kind: local, tasks: 1}\nstages:\n  web: {inputs: ["{run_dir}/pages"], blocklist: "{run_dir}/bl.txt"}\n'
    (tmp_path / "a.yaml").write_text(f"name: r\noutput_dir: {run}\n{body}")
    assert "web" in run_recipe(load_recipe(tmp_path / "a.yaml"))
    shutil.copytree(run, tmp_path / "copy")
    (tmp_path / "b.yaml").write_text(f"name: r\noutput_dir: {tmp_path / 'copy'}\n{body}")
    assert "web" in run_recipe(load_recipe(tmp_path / "b.yaml"))  # skipped as complete, not refused


def _finished(stage: Path) -> None:
    """STAGE as a finished stage leaves it (its summary.json): a recipe run records the stage and skips it, so its
    record is checked without the stage's work (a model trained, shards written) being done here."""
    stage.mkdir(parents=True, exist_ok=True)
    (stage / "summary.json").write_text("{}")


def test_a_finished_classifier_whose_pages_were_replaced_in_place_is_not_complete(tmp_path):
    # the classifier recorded `inputs: []`: its positives and negatives were not in its record, so pages replaced,
    # added or removed left it "already complete" with the model of the old pages (upstream.json cannot catch the
    # first stage)
    math, nonmath = tmp_path / "math", tmp_path / "nonmath"
    for folder in (math, nonmath):
        folder.mkdir()
        for i in range(2):
            (folder / f"p{i}.html").write_text(f"<html><body><p>{folder.name} page {i}</p></body></html>")
    (math / "notes.txt").write_text("not a page: the classifier does not read it")
    recipe = _write_recipe(tmp_path, f"  classifier: {{positives: ['{math}'], negatives: ['{nonmath}']}}\n")
    record = tmp_path / "run" / "classifier" / "recipe-stage.json"
    _finished(record.parent)
    assert "classifier" in run_recipe(load_recipe(recipe))  # recorded, and skipped as complete
    recorded = json.loads(record.read_text())
    pages = [
        str(f.resolve())
        for f in (math / "p0.html", math / "p1.html", nonmath / "p0.html", nonmath / "p1.html")
    ]
    assert recorded["inputs"] == pages
    assert recorded["input_sizes"] == [os.path.getsize(p) for p in pages]

    # a record written before the pages were recorded: the same stage, rewritten once with them
    old = {k: v for k, v in recorded.items() if k != "input_sizes"}
    record.write_text(json.dumps({**old, "inputs": []}))
    assert "classifier" in run_recipe(load_recipe(recipe))
    assert json.loads(record.read_text()) == recorded

    (math / "p1.html").write_text("<html><body><p>another page, replaced in place</p></body></html>")
    with pytest.raises(
        StageFailed, match=r"stage classifier: .*other sizes at the same paths: \S*/math/p1.html\)"
    ):
        run_recipe(load_recipe(recipe))
    (math / "p1.html").write_text("<html><body><p>math page 1</p></body></html>")  # as it was
    assert "classifier" in run_recipe(load_recipe(recipe))
    (nonmath / "p2.html").write_text("<html><body><p>a page added</p></body></html>")
    with pytest.raises(
        StageFailed, match=r"stage classifier: .*other input paths \(added: \S*/nonmath/p2.html\)"
    ):
        run_recipe(load_recipe(recipe))


def test_a_finished_train_stage_whose_recipe_was_edited_in_place_is_not_complete(tmp_path):
    # the train recipe (default recipes/tiny-cpu.yaml) and the mixture files it names were not digested: another
    # learning rate or mixture edited into them left train "already complete" with the model of the old recipe
    import yaml

    repo = Path(__file__).resolve().parents[2]
    raw = yaml.safe_load((repo / "recipes" / "tiny-cpu.yaml").read_text())
    mixture = tmp_path / "decay.yaml"
    mixture.write_text(yaml.safe_dump(raw["stages"][1]["mixture"]))
    raw["stages"][1]["mixture"] = str(mixture)
    train = tmp_path / "train.yaml"
    train.write_text(yaml.safe_dump(raw))
    recipe = _write_recipe(tmp_path, f"  train: {{recipe: '{train}'}}\n")
    record = tmp_path / "run" / "train" / "recipe-stage.json"
    _finished(record.parent)
    assert "train" in run_recipe(load_recipe(recipe))
    digests = json.loads(record.read_text())["file_digests"]
    assert [digests[k][0] for k in ("recipe", "mixture decay-short")] == [str(train), str(mixture)]

    # a record written before the recipe was digested: the same stage, rewritten once with the digests
    old = {k: v for k, v in json.loads(record.read_text()).items() if k != "file_digests"}
    record.write_text(json.dumps(old))
    assert "train" in run_recipe(load_recipe(recipe))
    assert json.loads(record.read_text())["file_digests"] == digests
    # what the recipe says counts, not its comments (the shipped recipes' comments are edited)
    train.write_text("# a comment added\n" + train.read_text())
    assert "train" in run_recipe(load_recipe(recipe))

    text = train.read_text()
    train.write_text(text.replace("lr: 0.002", "lr: 0.004"))
    with pytest.raises(StageFailed, match="stage train: .*recipe: other contents at the same path"):
        run_recipe(load_recipe(recipe))
    train.write_text(text)
    mixture.write_text(mixture.read_text().replace("weight: 0.3", "weight: 0.5"))
    with pytest.raises(
        StageFailed, match="stage train: .*mixture decay-short: other contents at the same path"
    ):
        run_recipe(load_recipe(recipe))


def test_a_finished_eval_stage_whose_model_or_benchmarks_were_replaced_is_not_complete(tmp_path):
    # eval read RUN/train/export and RUN/sample/bench by default and digested neither: a model re-exported outside
    # the recipe, or a benchmark file replaced, left eval "already complete" with the old accuracies
    from pipelines.evaluate import Config as EvalConfig

    run = tmp_path / "run"
    export, bench = run / "train" / "export", run / "sample" / "bench"
    export.mkdir(parents=True)
    (export / "config.json").write_text("{}")
    (export / "model.safetensors").write_bytes(b"\0" * 4096)
    for name in ("gsm8k/test", "gsm8k/train", "math500/test", "math/train", "math/test"):
        (bench / name).parent.mkdir(parents=True, exist_ok=True)
        (bench / f"{name}.jsonl").write_text(
            json.dumps({"question": f"{name}: 1 + 1?", "answer": "2"}) + "\n"
        )
    recipe = _write_recipe(tmp_path, "  eval: {}\n")
    record = run / "eval" / "recipe-stage.json"
    _finished(record.parent)
    assert "eval" in run_recipe(load_recipe(recipe))
    digests = json.loads(record.read_text())["file_digests"]
    # the 2-shot defaults read each test set and its exemplars' training split; math/test is not read
    read = ["gsm8k/test", "gsm8k/train", "math500/test", "math/train"]
    assert sorted(digests) == sorted(["model", *(f"benchmark {n}" for n in read)])
    assert digests["model"][0] == "{run_dir}/train/export"
    assert digests["benchmark math/train"][0] == "{run_dir}/sample/bench/math/train.jsonl"
    from pipelines.evaluate import files_read

    assert "benchmark gsm8k/train" not in files_read(EvalConfig(zero_shot=True), run)  # no exemplars read

    # a record written before the model and benchmarks were digested: the same stage, rewritten once with them
    old = {k: v for k, v in json.loads(record.read_text()).items() if k != "file_digests"}
    record.write_text(json.dumps(old))
    assert "eval" in run_recipe(load_recipe(recipe))
    assert json.loads(record.read_text())["file_digests"] == digests

    (export / "model.safetensors").write_bytes(b"\1" * 4096)  # re-exported: other weights, the same size
    with pytest.raises(StageFailed, match="stage eval: .*model: other contents at the same path"):
        run_recipe(load_recipe(recipe))
    (export / "model.safetensors").write_bytes(b"\0" * 4096)
    assert "eval" in run_recipe(load_recipe(recipe))
    (bench / "gsm8k" / "test.jsonl").write_text(json.dumps({"question": "2 + 2?", "answer": "4"}) + "\n")
    with pytest.raises(
        StageFailed, match="stage eval: .*benchmark gsm8k/test: other contents at the same path"
    ):
        run_recipe(load_recipe(recipe))


def test_a_finished_shards_stage_whose_tokenizer_folder_was_replaced_is_not_complete(tmp_path):
    # a tokenizer folder named in the recipe was not digested: another tokenizer in its place left shards
    # "already complete" with the old token ids
    tokenizer = tmp_path / "tok"
    tokenizer.mkdir()
    (tokenizer / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}')
    (tokenizer / "tokenizer_config.json").write_text('{"eos_token": "a"}')
    (tokenizer / "README.md").write_text("not read")
    stage = f"  shards: {{inputs: ['{{run_dir}}/decont/data'], tokenizer: '{tokenizer}', branches: false}}\n"
    recipe = _write_recipe(tmp_path, stage)
    record = tmp_path / "run" / "shards" / "recipe-stage.json"
    _finished(record.parent)
    assert "shards" in run_recipe(load_recipe(recipe))
    digests = json.loads(record.read_text())["file_digests"]
    assert sorted(digests) == ["tokenizer tokenizer.json", "tokenizer tokenizer_config.json"]

    # a record written before the tokenizer was digested: the same stage, rewritten once with the digests
    old = {k: v for k, v in json.loads(record.read_text()).items() if k != "file_digests"}
    record.write_text(json.dumps(old))
    assert "shards" in run_recipe(load_recipe(recipe))
    assert json.loads(record.read_text())["file_digests"] == digests

    (tokenizer / "tokenizer_config.json").write_text('{"eos_token": "b"}')
    with pytest.raises(
        StageFailed, match="stage shards: .*tokenizer tokenizer_config.json: other contents at the same path"
    ):
        run_recipe(load_recipe(recipe))


def test_stages_that_do_not_read_the_previous_data_record_what_they_read(tmp_path):
    # after a rewrite stage, shards, train, eval and audit recorded `inputs: ['{run_dir}/branches/data']` with size
    # [None]: the previous document stage's data/, a folder that does not exist and that none of them reads
    run = _corpus_run(tmp_path / "run")
    branch = run / "branches" / "qa" / "data"
    branch.mkdir(parents=True)
    pq.write_table(pa.table({"id": ["q"], "text": [MATH.replace("{i}", "1")]}), branch / "00000.parquet")
    for source in ("corpus", "qa"):
        (run / "shards" / source).mkdir(parents=True)
        (run / "shards" / source / "00000_00000.bin").write_bytes(b"\0" * 8)
    sources = {s: {"path": str(run / "shards" / s), "documents": 1, "tokens": 4} for s in ("corpus", "qa")}
    (run / "shards" / "manifest.json").write_text(json.dumps({"tokenizer": "t", "sources": sources}))
    (run / "train" / "export").mkdir(parents=True)
    (run / "train" / "export" / "model.safetensors").write_bytes(b"\0" * 64)
    (run / "sample" / "bench" / "gsm8k").mkdir(parents=True)
    (run / "sample" / "bench" / "gsm8k" / "test.jsonl").write_text('{"question": "1 + 1?", "answer": "2"}\n')
    stages = ("shards", "train", "eval", "audit")
    recipe = _write_recipe(
        tmp_path, "  rewrite: {tasks: [qa], model: auto}\n" + "".join(f"  {s}: {{}}\n" for s in stages)
    )
    for folder in ("branches", *stages):
        _finished(run / folder)
    run_recipe(load_recipe(recipe))  # recorded, and skipped as complete
    records = {s: json.loads((run / s / "recipe-stage.json").read_text()) for s in stages}
    assert {s: r["inputs"] for s, r in records.items()} == {
        "shards": ["{run_dir}/decont/data", "{run_dir}/branches/qa/data"],
        "train": ["{run_dir}/shards/corpus", "{run_dir}/shards/qa"],
        "eval": ["{run_dir}/train/export", "{run_dir}/sample/bench"],
        "audit": [],  # it reads every stage folder: upstream.json holds their summaries
    }
    assert all(None not in r.get("input_sizes", []) for r in records.values())

    # records written before they said what they read: the same stages, each rewritten once
    for s, r in records.items():
        old = {k: v for k, v in r.items() if k != "file_digests"}
        old.update(inputs=["{run_dir}/branches/data"], input_sizes=[None])
        (run / s / "recipe-stage.json").write_text(json.dumps(old))
    run_recipe(load_recipe(recipe))
    assert {s: json.loads((run / s / "recipe-stage.json").read_text()) for s in stages} == records

    # a branch's data replaced in place (its rewrite summary unchanged): shards is not complete
    pq.write_table(pa.table({"id": ["q", "r"], "text": ["another", "branch"]}), branch / "00000.parquet")
    with pytest.raises(
        StageFailed,
        match=rf"stage shards: .*other sizes at the same paths: {re.escape(str(run.resolve()))}/branches/qa/data\)",
    ):
        run_recipe(load_recipe(recipe))
