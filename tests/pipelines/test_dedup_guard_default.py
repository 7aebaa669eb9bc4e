"""The number guard's default limit went from 512 to 256 tokens: a dedup folder whose record says
`number_guard_tokens: 256` (written out when 512 was the default) is the same job as one left at today's default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.dedup import Config, former_default_forms, run_dedup
from pipelines.executors import ExecutorConfig

ROWS = [
    {"id": "a", "text": "Tom has 3 apples and buys 5 more at the shop. How many apples does Tom have now?"},
    {"id": "b", "text": "Tom has 4 apples and buys 5 more at the shop. How many apples does Tom have now?"},
]


def _record_with(out: Path, **settings) -> None:
    record = json.loads((out / "job.json").read_text())
    record["settings"] = settings
    (out / "job.json").write_text(json.dumps(record))


def test_a_record_with_the_new_default_written_out_is_the_same_job(tmp_path: Path) -> None:
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "out"
    assert Config().number_guard_tokens == 256
    run_dedup(Config(), [str(inp)], out, ExecutorConfig(tasks=1))
    assert json.loads((out / "job.json").read_text())["settings"] == {}
    _record_with(out, number_guard_tokens=256)  # as the block `number_guard_tokens: 256` was recorded before
    summary = run_dedup(Config(), [str(inp)], out, ExecutorConfig(tasks=1))
    assert summary["docs_out"] == 2  # one number apart: the guard keeps them
    _record_with(out, number_guard_tokens=300)
    with pytest.raises(ValueError, match="number_guard_tokens"):
        run_dedup(Config(), [str(inp)], out, ExecutorConfig(tasks=1))


def test_former_default_forms_for_the_runner() -> None:
    identity = {"inputs": ["x"], "settings": {"bands": 12}}
    assert former_default_forms(identity["settings"], [identity]) == [
        {"inputs": ["x"], "settings": {"bands": 12, "number_guard_tokens": 256}}
    ]
    assert former_default_forms({"number_guard_tokens": 128}, [identity]) == []
