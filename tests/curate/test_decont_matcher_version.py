"""A decont folder holding the work of an earlier matcher (other tokens, one n-gram a match) is not finished or
resumed by this one: its documents would be checked two ways. The saved index carries the version too."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest

from curate.decont import MATCHER
from pipelines.decont import Config, run_decont
from pipelines.decont_index import load_saved_index
from pipelines.executors import ExecutorConfig

PROBLEM = "Tom has 7 apples and buys 4 more apples at the market today. How many apples does he have now?"


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_folder_of_an_earlier_matcher_is_refused_naming_it(tmp_path):
    docs = _jsonl(
        tmp_path / "docs.jsonl", [{"id": "a", "text": "Post: " + PROBLEM}, {"id": "b", "text": "Hi."}]
    )
    bench = _jsonl(tmp_path / "bench" / "gsm8k" / "test.jsonl", [{"question": PROBLEM, "answer": "11"}])
    out = tmp_path / "out"
    summary = run_decont(Config(), [str(docs)], out, ExecutorConfig(tasks=1, workers=1), [str(bench)])
    assert summary["dropped"]["contaminated"] == 1 and summary["matcher"] == MATCHER
    record = json.loads((out / "job.json").read_text())
    assert record["matcher"] == MATCHER
    del record["matcher"]  # as mathmix-decont/1 wrote it
    (out / "job.json").write_text(json.dumps(record))
    # finished by it: one matching, kept as it is (as a finished job's rerun always was)
    assert run_decont(Config(), [str(docs)], out, ExecutorConfig(tasks=1, workers=1), [str(bench)]) == summary
    assert "matcher" not in json.loads((out / "job.json").read_text())
    (out / "summary.json").unlink()  # killed before it finished: resumed by this matcher, it would mix two
    with pytest.raises(
        ValueError, match=rf"earlier matcher \(mathmix-decont/1; this is {re.escape(MATCHER)}"
    ):
        run_decont(Config(), [str(docs)], out, ExecutorConfig(tasks=1, workers=1), [str(bench)])
    record["matcher"] = "mathmix-decont/2"  # before commands typed without a backslash were read as commands
    (out / "job.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"earlier matcher \(mathmix-decont/2; this is mathmix-decont/3"):
        run_decont(Config(), [str(docs)], out, ExecutorConfig(tasks=1, workers=1), [str(bench)])


def test_a_saved_index_of_another_matcher_is_not_read(tmp_path):
    path = tmp_path / "benchmark_index.pkl"
    path.write_bytes(pickle.dumps({"matcher": None}))
    with pytest.raises(ValueError, match="another matcher"):
        load_saved_index(path)


def test_the_runner_refuses_only_an_unfinished_stage_of_another_matcher(tmp_path):
    """`mathmix run` (and its dry run) refuses a decont stage folder holding unfinished work of an earlier
    matcher, as `mathmix decont` does; one with nothing finished is taken over, a finished one kept."""
    import json

    from pipelines.decont import earlier_matcher_refusal
    from pipelines.runner import _earlier_version

    out = tmp_path / "decont"
    (out / "logs" / "completions").mkdir(parents=True)
    (out / "job.json").write_text(json.dumps({"command": "decont", "matcher": "mathmix-decont/2"}))
    assert earlier_matcher_refusal(out) is None  # nothing finished: taken over
    (out / "logs" / "completions" / "00000").write_text("")
    refusal = _earlier_version("decont", out)
    assert refusal is not None and "mathmix-decont/2" in str(refusal)
    (out / "summary.json").write_text("{}")
    assert _earlier_version("decont", out) is None  # finished: kept
