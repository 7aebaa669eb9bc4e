"""A rewrite job's record names its decont benchmarks by the files read: an unfinished job resumed with the same
benchmarks in another order, or a folder for its one file, was refused as another job (the recipe stage's record
already took them so)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curate.rewrite.identity import check_out_dir, rewrite_identity
from curate.rewrite.job import RewriteSettings


def _bench(root: Path) -> tuple[str, str]:
    for name in ("gsm8k", "math500"):
        (root / name).mkdir(parents=True)
        (root / name / "test.jsonl").write_text(
            json.dumps({"problem": f"A {name} problem about apples?"}) + "\n"
        )
    return str(root / "gsm8k"), str(root / "math500")


def _unfinished(out: Path) -> None:
    (out / "raw").mkdir(parents=True, exist_ok=True)  # work to resume
    (out / "raw" / "00000_chunk_0.jsonl.gz").write_bytes(b"")


@pytest.fixture()
def check(tmp_path):
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "text": "Worked example: $x + 1 = 2$."}) + "\n")
    inputs, out = [str(tmp_path / "in.jsonl")], tmp_path / "qa"

    def run(benchmarks: list[str]) -> None:
        settings = RewriteSettings(max_tokens=16, decont_benchmarks=benchmarks)
        check_out_dir(out, *rewrite_identity(inputs, settings, "qa", tmp_path, out), tmp_path)

    run.out = out  # type: ignore[attr-defined]
    return run


def test_the_same_benchmarks_in_another_order_or_as_their_files_resume(check, tmp_path):
    gsm, math = _bench(tmp_path / "bench")
    check([gsm, math])
    _unfinished(check.out)
    for same in ([math, gsm], [f"{math}/test.jsonl", f"{gsm}/test.jsonl"], [str(tmp_path / "bench")]):
        check(same)  # refused before: "decont_benchmarks: [...] -> [...]"
    with pytest.raises(ValueError, match="another job"):
        check([gsm])


def test_a_record_of_them_as_typed_is_adopted(check, tmp_path):
    gsm, math = _bench(tmp_path / "bench")
    check([math, gsm])
    record = json.loads((check.out / "job.json").read_text())
    record["decont_benchmarks"] = [
        "{run_dir}/bench/math500",
        "{run_dir}/bench/gsm8k",
    ]  # typed, as recorded before
    (check.out / "job.json").write_text(json.dumps(record))
    _unfinished(check.out)
    check([math, gsm])
    assert json.loads((check.out / "job.json").read_text())["decont_benchmarks"] == [
        "{run_dir}/bench/gsm8k/test.jsonl",
        "{run_dir}/bench/math500/test.jsonl",
    ]  # rewritten in today's form
