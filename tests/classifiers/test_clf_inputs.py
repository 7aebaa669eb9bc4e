"""What classifier inputs are read: every supported kind, in every subfolder, and what is skipped is reported."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from classifiers.data import read_input

MATH_WORDS = "let x be integer prove theorem equation solve derivative integral lemma".split()


def _docs(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(MATH_WORDS) for _ in range(40)) + f"\npage {i}" for i in range(n)]


def _jsonl_gz(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    return path


def test_gzipped_jsonl_is_read_as_web_and_dedup_read_it(tmp_path):
    rows = [{"text": t, "url": f"https://m.org/{i}"} for i, t in enumerate(_docs(3, 0))]
    path = _jsonl_gz(tmp_path / "pages.jsonl.gz", rows)
    assert [d.text for d in read_input(path)] == [r["text"] for r in rows]
    (tmp_path / "sub").mkdir()
    _jsonl_gz(tmp_path / "sub" / "more.JSONL.GZ", rows[:1])
    assert len(read_input(tmp_path)) == 4
