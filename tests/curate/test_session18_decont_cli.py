"""`decont --check P --against B1 B2` (several values after one flag, as the usage line `--against EVALS [...]` read)
took B2 for a corpus INPUT and advised repeating --check: the error now says the path is read as a corpus INPUT
and that --check and --against take one path each, each flag repeated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mathmix.cli import app


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("after", ["--against", "--check"])
def test_a_second_value_after_one_flag_is_named_as_read_for_an_input(tmp_path: Path, after: str) -> None:
    problem = (
        "Janet has seventeen ducks that lay sixteen eggs every single day and she sells the rest at market"
    )
    b1 = _jsonl(tmp_path / "gsm8k" / "test.jsonl", [{"question": problem, "answer": "18"}]).parent
    b2 = _jsonl(tmp_path / "math500" / "test.jsonl", [{"problem": problem + " twice", "answer": "1"}]).parent
    p1 = _jsonl(tmp_path / "p1.jsonl", [{"prompt": "a new question about trains and their speeds"}])
    p2 = _jsonl(tmp_path / "p2.jsonl", [{"prompt": "another question about ducks and ponds"}])
    if after == "--against":
        args, stray = ["decont", "--check", str(p1), "--against", str(b1), str(b2)], b2
    else:
        args, stray = ["decont", "--check", str(p1), str(p2), "--against", str(b1)], p2
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert flat.startswith("error: --check does not go with INPUT"), flat
    # rich may wrap inside the path: compare without spaces for it
    assert f"{stray}isreadasacorpusINPUT" in "".join(flat.split()), flat
    assert "--check and --against take one path each" in flat and "repeat the flag for each" in flat, flat
    assert "--against EVALS1 --against EVALS2" in flat, flat


def test_the_docs_usage_lines_repeat_the_flags() -> None:
    root = Path(__file__).resolve().parents[2]
    usage = (root / "docs" / "dedup.md").read_text()
    assert "--check PROMPTS.jsonl [--check PROMPTS.jsonl ...] --against EVALS [--against EVALS ...]" in usage
    assert "--against EVALS [...]" not in usage and "--check PROMPTS.jsonl [...]" not in usage
