"""Job records (pipelines.job_record): what a refusal says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.job_record import check_job, describe_difference, job_identity


def _record(out: Path, record: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "job.json").write_text(json.dumps(record))


def _web_record(inputs: list[Path], run_dir: Path, command: bool = True) -> dict:
    """A web job's record as it was written before (`command: False`) and after web recorded its command."""
    extra = {"command": "web"} if command else {}
    return job_identity(inputs, {}, run_dir, **extra, math_model=None, tasks=1)


def test_a_refusal_names_the_command_that_wrote_the_folder(tmp_path):
    both = tmp_path / "both.jsonl"
    both.write_text('{"id": "a", "text": "x"}\n')
    dedup = job_identity([both], {}, tmp_path, tasks=1)  # dedup records no command
    for command, said in ((True, "it holds the output of web"), (False, "another command")):
        out = tmp_path / f"clash{command}"
        _record(out, _web_record([both], tmp_path, command))
        (out / "summary.json").write_text("{}")
        with pytest.raises(ValueError) as err:
            check_job(out, dedup, "dedup run")
        assert said in str(err.value) and "()" not in str(err.value), err.value


def test_a_difference_is_never_described_as_nothing():
    # a key present on one side only, with a value that reads like a missing one
    assert describe_difference({"a": 1, "x": None}, {"a": 1}) != ""
    assert describe_difference({"a": 1}, {"a": 1, "x": None}) != ""
    assert describe_difference({"command": "c", "x": None}, {"command": "c"}) == "x: None -> (default)"


def test_a_record_from_before_the_command_was_recorded_is_the_same_job(tmp_path):
    inputs = [tmp_path / "a.warc.gz"]
    inputs[0].write_bytes(b"x")
    out = tmp_path / "web"
    _record(out, _web_record(inputs, tmp_path, command=False))
    (out / "summary.json").write_text("{}")
    earlier = [_web_record(inputs, tmp_path, command=False)]
    assert not check_job(out, _web_record(inputs, tmp_path), "web run", earlier=earlier)
    assert json.loads((out / "job.json").read_text())["command"] == "web"
    # one with other settings is described by its differences, not as another command's
    _record(out, {"inputs": ["/a"], "settings": {"ngram": 8}})
    new = {"command": "decont", "inputs": ["/a"], "settings": {}}
    with pytest.raises(ValueError, match=r"\(settings.ngram: 8 -> \(default\)\)"):
        check_job(out, new, "decont run", earlier=[{"inputs": ["/a"], "settings": {}}])
    with pytest.raises(ValueError, match=r"\(it holds the output of another command\)"):
        check_job(out, new, "decont run")  # no earlier form without a command: another command's record
