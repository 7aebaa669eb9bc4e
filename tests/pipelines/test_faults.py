"""Faults: SIGKILL at random points of each curation stage then rerun gives the uninterrupted output; the whole
curation chain over the bad-input corpus never crashes, bounds memory and counts every drop under a reason."""

from __future__ import annotations

import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.bad_corpus import write_bad_corpus
from pipelines.recipe import load_recipe
from pipelines.runner import run_recipe
from pipelines.sample import write_sample

STAGES = ("web", "dedup", "decont")
RECIPE = """name: faults
output_dir: {run_dir}
executor: {{kind: local, tasks: 3, workers: 1}}
stages:
  web: {{inputs: ["{inputs}"], min_words: {min_words}, prefilter_threshold: {prefilter}}}
  dedup: {{}}
  decont: {{benchmarks: ["{bench}"]}}
"""


def _recipe(
    path: Path, run_dir: Path, inputs: Path, bench: Path, min_words: int = 20, prefilter: float = 1.0
):
    path.write_text(
        RECIPE.format(run_dir=run_dir, inputs=inputs, bench=bench, min_words=min_words, prefilter=prefilter)
    )
    return path


def _outputs(run_dir: Path) -> dict[str, list[tuple[str, str]]]:
    out = {}
    for stage in STAGES:
        files = sorted((run_dir / stage / "data").glob("*.parquet"))
        rows = [r for f in files for r in pq.read_table(f, columns=["id", "text"]).to_pylist()]
        out[stage] = sorted((r["id"], r["text"]) for r in rows)
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    write_sample(tmp / "sample")
    # Three input files so that each stage has several tasks to kill between.
    pages = tmp / "pages"
    pages.mkdir()
    for i, html in enumerate(sorted((tmp / "sample" / "html").rglob("*.html"))):
        part = pages / f"part-{i % 3}"
        part.mkdir(exist_ok=True)
        shutil.copy(html, part / html.name)
    run_dir = tmp / "reference"
    recipe = _recipe(tmp / "ref.yaml", run_dir, pages, tmp / "sample" / "bench")
    summaries = run_recipe(load_recipe(recipe))
    return tmp, pages, run_dir, summaries


@pytest.mark.parametrize("stage_index", range(len(STAGES)), ids=STAGES)
def test_sigkill_at_a_random_point_then_rerun_gives_the_same_output(reference, stage_index):
    tmp, pages, ref_dir, summaries = reference
    stage = STAGES[stage_index]
    run_dir = tmp / f"killed-{stage}"
    shutil.rmtree(run_dir, ignore_errors=True)
    for earlier in STAGES[:stage_index]:  # earlier stages finished: the kill lands inside `stage`
        shutil.copytree(ref_dir / earlier, run_dir / earlier)
    recipe = _recipe(tmp / f"{stage}.yaml", run_dir, pages, tmp / "sample" / "bench")
    cmd = [sys.executable, "-m", "mathmix", "run", str(recipe)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline and not (run_dir / stage).exists():
        time.sleep(0.05)
    # A random point inside the stage (its uninterrupted duration, minus the interpreter start-up).
    time.sleep(random.Random(stage_index).uniform(0.0, 0.8 * summaries[stage]["seconds"]))
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    got, expected = _outputs(run_dir), _outputs(ref_dir)
    for name in STAGES:
        ids = [i for i, _ in got[name]]
        assert len(ids) == len(set(ids)), f"{name}: a document twice"
        assert got[name] == expected[name], f"{name}: differs from the uninterrupted run"


def test_bad_input_corpus_runs_through_the_chain(tmp_path):
    bad = tmp_path / "bad"
    write_bad_corpus(bad, big_page_mb=50)
    write_sample(tmp_path / "sample")
    recipe = _recipe(tmp_path / "bad.yaml", tmp_path / "run", bad, tmp_path / "sample" / "bench", 5, 0.0)
    summaries = run_recipe(load_recipe(recipe))
    for stage in STAGES:
        summary = summaries[stage]
        assert "unaccounted" not in summary, f"{stage}: {summary}"
        assert summary["docs_in"] == summary["docs_out"] + sum(summary["dropped"].values()), stage
    web = summaries["web"]["dropped"]
    for reason in ("too_large", "binary_body", "empty_page", "truncated_record", "warc_read_error"):
        assert web.get(reason, 0) >= 1, f"no {reason} drop in {web}"
    assert summaries["web"]["docs_out"] >= 2  # the good pages get through
    peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2
    assert peak_gb < 4, f"a worker peaked at {peak_gb:.1f} GB"
