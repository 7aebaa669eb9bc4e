"""The quickstart end to end: every stage runs on the shipped sample, conserves documents, and a rerun is a no-op."""

from __future__ import annotations

import json
import time

import pyarrow.parquet as pq

from pipelines.quickstart import run_quickstart, stage_notes

DOCUMENT_STAGES = ("web", "dedup", "decont", "branches")


def test_quickstart_runs_the_whole_chain(tmp_path, capsys):
    run = tmp_path / "qs"
    summaries = run_quickstart(run)
    assert list(summaries) == [
        "classifier",
        "web",
        "dedup",
        "decont",
        "rewrite",
        "shards",
        "train",
        "eval",
        "audit",
    ]
    for folder in DOCUMENT_STAGES:
        summary = json.loads((run / folder / "summary.json").read_text())
        assert summary["docs_in"] == summary["docs_out"] + sum(summary["dropped"].values()), folder
        assert "unaccounted" not in summary
    web = summaries["web"]
    # The sample plants bad records, non-math pages, a German page, duplicates and a contaminated page.
    for reason in ("binary_body", "empty_page", "not_html", "no_math_signal"):
        assert web["dropped"].get(reason, 0) >= 1, reason
    assert (
        summaries["dedup"]["dropped"].get("duplicate_text", 0)
        + summaries["dedup"]["dropped"].get("near_duplicate", 0)
        >= 1
    )
    assert summaries["decont"]["dropped"].get("contaminated", 0) == 1
    # the planted page quotes a math500 test problem; the sample's training splits are no benchmark (their
    # problems share 13-grams with it: math/train was counted as a hit before they were left out)
    assert summaries["decont"]["hits_per_benchmark"] == {"math500/test": 1}
    left_out = summaries["decont"]["benchmark_files_left_out"]
    assert [str(run / "sample" / "bench" / f) for f in ("gsm8k/train.jsonl", "math/train.jsonl")] == left_out
    assert (
        json.loads((run / "branches" / "qa" / "summary.json").read_text())["benchmark_files_left_out"]
        == left_out
    )
    corpus = pq.read_table(run / "decont" / "data").to_pylist()
    assert corpus and all(row["math_score"] is not None for row in corpus)
    assert (run / "classifier" / "model.bin").is_file()
    assert json.loads((run / "shards" / "manifest.json").read_text())
    assert (run / "train" / "export" / "config.json").is_file()
    assert (run / "eval" / "summary.json").is_file()
    assert (run / "audit" / "report.html").stat().st_size > 10_000

    start = time.time()
    record = (run / "quickstart.json").read_bytes()
    capsys.readouterr()
    again = run_quickstart(run)  # every stage is complete: the rerun skips them all
    assert time.time() - start < 30
    assert again["web"] == summaries["web"]
    assert (run / "quickstart.json").read_bytes() == record  # the real run's time is kept
    said = " ".join(capsys.readouterr().err.split())
    assert "nothing ran now" in said  # it said "the run took 37.2 s" of a rerun that took 0.4 s


def test_stage_notes_name_the_main_drops_and_what_was_made():
    web = {"dropped": {"language": 1, "no_math_signal": 10, "not_html": 2}}
    assert stage_notes(web) == "no_math_signal 10, not_html 2 ..."
    train = {"dropped": {}, "stages": {"stable": {"steps": 48, "final_loss": 1.127}}, "docs_in": 0}
    assert stage_notes(train) == "stable: 48 steps, loss 1.13"
    assert stage_notes({"tokens_out": 3072, "accuracy_gsm8k": 0.25}) == "3,072 tokens; gsm8k 0.25"
