"""Found by session 18's review of evals: a benchmark file edited at the same size (a gold answer corrected) left
an `eval bench` rerun keeping the results graded against the old gold: job.json held only the folder's size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.bench import run_bench
from tests.evals.test_session18_dropped_items import HandWritten, _write_jsonl, bench  # noqa: F401 (a fixture)


def _same_size_edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert len(old) == len(new) and old in text
    path.write_text(text.replace(old, new))


def test_a_benchmark_file_edited_at_the_same_size_is_another_job(bench, tmp_path):  # noqa: F811 (bench: a fixture)
    out, plan = tmp_path / "out", [("gsm8k", 0)]
    run_bench("hand", plan, bench, out, generator=HandWritten(["#### 0"] * 2))
    record = json.loads((out / "job.json").read_text())
    test = bench / "gsm8k/test.jsonl"
    assert record["file_digests"]["benchmark gsm8k/test"][0] == str(test.resolve())
    size = test.stat().st_size
    _same_size_edit(test, "#### 2", "#### 3")
    assert test.stat().st_size == size
    with pytest.raises(
        ValueError, match="another job than this eval bench .*benchmark gsm8k/test: other contents"
    ):
        run_bench("hand", plan, bench, out, generator=HandWritten([]))
    _same_size_edit(test, "#### 3", "#### 2")  # as it was: the same job again, its results kept
    again = HandWritten([])
    run_bench("hand", plan, bench, out, generator=again)
    assert again.prompts == []


def test_the_exemplar_file_read_counts_too(bench, tmp_path):  # noqa: F811 (bench: a fixture)
    out, plan = tmp_path / "out", [("gsm8k", 2)]
    run_bench("hand", plan, bench, out, generator=HandWritten(["#### 0"] * 2))
    digests = json.loads((out / "job.json").read_text())["file_digests"]
    assert set(digests) == {"benchmark gsm8k/test", "benchmark gsm8k/train"}
    _same_size_edit(bench / "gsm8k/train.jsonl", "#### 6", "#### 7")
    with pytest.raises(ValueError, match="benchmark gsm8k/train: other contents"):
        run_bench("hand", plan, bench, out, generator=HandWritten([]))
    zero = tmp_path / "zero"  # zero-shot reads no training split: not recorded
    run_bench("hand", plan, bench, zero, zero_shot=True, generator=HandWritten(["#### 0"] * 2))
    assert set(json.loads((zero / "job.json").read_text())["file_digests"]) == {"benchmark gsm8k/test"}


def test_a_record_written_before_digests_keeps_its_finished_results(bench, tmp_path):  # noqa: F811 (bench: a fixture)
    out, plan = tmp_path / "out", [("gsm8k", 0)]
    run_bench("hand", plan, bench, out, generator=HandWritten(["#### 0"] * 2))
    record = json.loads((out / "job.json").read_text())
    old = {k: v for k, v in record.items() if k != "file_digests"}
    (out / "job.json").write_text(json.dumps(old))
    again = HandWritten([])
    run_bench("hand", plan, bench, out, generator=again)  # not refused
    assert again.prompts == []  # kept
    assert json.loads((out / "job.json").read_text()) == record  # rewritten with the digests
