"""Empty documents and documents whose text is not a string join no exact group: as the keeper of a URL group
they were dropped (`empty` / `text_not_string`) and took the real page with them (`duplicate_url`)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mathmix.cli import app

ROWS = [
    {"id": "E", "text": "", "url": "https://aops.com/t/1", "math_score": 0.9},
    {"id": "D", "text": "Let x be a real number with x^2 = 9. Find all values of x.", "url": "https://aops.com/t/1", "math_score": 0.5},
    {"id": "N", "text": 12345, "url": "https://aops.com/t/2", "math_score": 0.9},
    {"id": "M", "text": "Prove that the sum of the first n odd numbers is n squared.", "url": "https://aops.com/t/2", "math_score": 0.5},
    {"id": "P", "text": "... -- ...", "url": "https://aops.com/t/3", "math_score": 0.9},
    {"id": "Q", "text": "Compute 7 choose 3 and explain each step of the computation.", "url": "https://aops.com/t/3", "math_score": 0.5},
    {"id": "R", "text": "½", "url": "https://aops.com/t/4", "math_score": 0.9},
    {"id": "S", "text": "½", "url": "https://aops.com/t/4", "math_score": 0.5},
]  # fmt: skip


def test_an_empty_document_never_keeps_a_url_group(tmp_path: Path) -> None:
    inp = tmp_path / "a.jsonl"
    inp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS))
    result = CliRunner().invoke(app, ["dedup", str(inp), "-o", str(tmp_path / "out"), "--workers", "1"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    # `½` is a number (NFKC 1⁄2): a text, so R and S are one page at one URL; `... -- ...` has no word
    assert summary["dropped"] == {"empty": 2, "text_not_string": 1, "duplicate_text": 1}
    assert summary["docs_out"] == 4
    clusters = [json.loads(x) for x in (tmp_path / "out" / "clusters.jsonl").read_text().splitlines()]
    assert clusters == [{"kind": "exact", "cluster_id": 0, "size": 2, "kept": "R", "removed": ["S"]}]
