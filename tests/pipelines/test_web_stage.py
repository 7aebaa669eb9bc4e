"""The web stage end to end on a WARC built from the shared real pages: conservation, prefilter recall, schema,
and a run killed mid-way (SIGKILL) then rerun gives the same output as an uninterrupted run."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.executors import ExecutorConfig
from pipelines.web import WEB_SCHEMA, Config, run_web


def _build_warcs(pages: list[Path], out_dir: Path, n_files: int) -> list[Path]:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"part-{i}.warc.gz" for i in range(n_files)]
    handles = [p.open("wb") for p in paths]
    writers = [WARCWriter(h, gzip=True) for h in handles]
    for i, page in enumerate(pages):
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
        url = f"https://pages.example/{page.parent.name}/{page.name}"
        writer = writers[i % n_files]
        writer.write_record(
            writer.create_warc_record(
                url, "response", payload=io.BytesIO(page.read_bytes()), http_headers=http
            )
        )
    for handle in handles:
        handle.close()
    return paths


@pytest.fixture(scope="module")
def shared_warcs(tmp_path_factory, shared_data):
    pages = sorted((shared_data / "html").rglob("*.html"))
    return _build_warcs(pages, tmp_path_factory.mktemp("warc"), n_files=4)


@pytest.fixture(scope="module")
def web_run(tmp_path_factory, shared_warcs):
    out = tmp_path_factory.mktemp("web")
    summary = run_web(
        Config(write_rejects=True), [str(p) for p in shared_warcs], out, ExecutorConfig(tasks=4, workers=2)
    )
    return out, summary


def _rows(out: Path) -> list[dict]:
    return pq.read_table(out / "data", schema=WEB_SCHEMA).to_pylist()


def test_conservation_and_schema(web_run, shared_data):
    out, summary = web_run
    n_pages = len(list((shared_data / "html").rglob("*.html")))
    assert summary["docs_in"] == n_pages
    assert summary["docs_in"] == summary["docs_out"] + sum(summary["dropped"].values())
    assert "unaccounted" not in summary
    rows = _rows(out)
    assert len(rows) == summary["docs_out"] and len({r["id"] for r in rows}) == len(rows)
    row = rows[0]
    assert row["url"].startswith("https://pages.example/") and row["warc_length"] > 0
    assert row["lang"] == "en" and row["lang_score"] >= 0.65 and row["extractor"] == "mathmix-fast"
    assert row["n_chars"] == len(row["text"]) and row["math_score"] is None


def test_prefilter_keeps_math_pages_and_drops_most_nonmath(web_run, shared_data):
    out, _ = web_run
    kept = {r["url"].rsplit("/", 2)[-2] + "/" + r["url"].rsplit("/", 1)[-1] for r in _rows(out)}
    math_pages = [f"math/{p.name}" for p in (shared_data / "html" / "math").glob("*.html")]
    nonmath_pages = [f"nonmath/{p.name}" for p in (shared_data / "html" / "nonmath").glob("*.html")]
    rejects = pq.read_table(out / "rejects").to_pylist()
    prefilter_drops = {
        r["url"].split("pages.example/")[1] for r in rejects if r["reason"] == "no_math_signal"
    }
    math_recall = 1 - len(prefilter_drops & set(math_pages)) / len(math_pages)
    assert math_recall >= 0.98, sorted(prefilter_drops & set(math_pages))
    assert sum(p in kept for p in math_pages) >= 0.98 * len(math_pages)
    assert sum(p in kept for p in nonmath_pages) <= 0.2 * len(nonmath_pages)


def _run_cli(warcs: list[Path], out: Path, recipe: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "mathmix", "web", *map(str, warcs), "-o", str(out), "--recipe", str(recipe)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def test_killed_run_reruns_to_the_same_output(tmp_path, shared_warcs, web_run):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("name: kill\nexecutor: {kind: local, tasks: 4, workers: 1}\nstages:\n  web: {}\n")
    out = tmp_path / "killed"
    proc = _run_cli(shared_warcs, out, recipe)
    completions = out / "logs" / "completions"
    deadline = time.time() + 120
    while time.time() < deadline and not (completions.exists() and any(completions.iterdir())):
        time.sleep(0.2)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the worker and its extraction processes die mid-task
    proc.wait()
    done_before = len(list(completions.iterdir()))
    assert 1 <= done_before < 4
    assert _run_cli(shared_warcs, out, recipe).wait(timeout=300) == 0
    expected = sorted((r["id"], r["text"]) for r in _rows(web_run[0]))
    got = sorted((r["id"], r["text"]) for r in _rows(out))
    assert len({i for i, _ in got}) == len(got)  # no document twice
    assert got == expected
