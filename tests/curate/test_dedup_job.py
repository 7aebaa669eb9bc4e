"""The dedup job end to end (`mathmix dedup`): exact URL/text, MinHash clusters with the keep rule, bad input."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.summary import is_balanced
from mathmix.cli import app


def _doc(rng: random.Random, n: int = 150) -> str:
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 8))) for _ in range(n)]
    return " ".join(words)


def _edit(text: str, rng: random.Random, fraction: float) -> str:
    words = text.split()
    for i in rng.sample(range(len(words)), int(len(words) * fraction)):
        words[i] = "zz" + words[i]
    return " ".join(words)


PROBLEM = (
    "Natalia sold clips to {a} of her friends in April, and then she sold {b} clips in May to {c} other people "
    "at the market. How many clips did Natalia sell altogether in April and May if each clip cost {d} dollars?"
)


def _corpus() -> list[dict]:
    rng = random.Random(7)
    rows = [
        {"id": f"u{i}", "text": _doc(rng), "url": f"https://site.org/p{i}", "math_score": 0.5}
        for i in range(24)
    ]
    cjk = "".join(chr(0x4E00 + rng.randrange(3000)) for _ in range(300))
    rows += [
        # near duplicates: the copy with the higher math_score wins; on equal scores the longer one wins
        {"id": "near_hi", "text": _edit(rows[1]["text"], rng, 0.01), "url": None, "math_score": 0.9},
        {
            "id": "near_long",
            "text": rows[2]["text"] + " extra words at the end",
            "url": None,
            "math_score": 0.5,
        },
        # exact text duplicate (case and spacing differ) and URL duplicate (canonical form equal)
        {
            "id": "exact",
            "text": "  " + rows[3]["text"].upper().replace(" ", "  "),
            "url": None,
            "math_score": 0.1,
        },
        {
            "id": "url",
            "text": _doc(rng),
            "url": "http://www.site.org/p4/?utm_source=x#top",
            "math_score": 0.1,
        },
        # problems that differ only in their numbers stay
        {"id": "num_a", "text": PROBLEM.format(a=48, b=24, c=12, d=3), "url": None, "math_score": 0.5},
        {"id": "num_b", "text": PROBLEM.format(a=50, b=25, c=13, d=4), "url": None, "math_score": 0.5},
        # ... even when only one number of a 150-word text differs (J ~ 0.95: the number guard keeps them apart)
        {"id": "one_num_a", "text": rows[5]["text"] + " so the answer is 42", "url": None, "math_score": 0.5},
        {"id": "one_num_b", "text": rows[5]["text"] + " so the answer is 43", "url": None, "math_score": 0.5},
        # bad input: empty, one word, non-Latin (and a longer near copy)
        {"id": "empty", "text": "", "url": None, "math_score": None},
        {"id": "one_word", "text": "hello", "url": None, "math_score": None},
        {"id": "cjk", "text": cjk, "url": None, "math_score": None},
        {"id": "cjk_copy", "text": cjk + "真的", "url": None, "math_score": None},
    ]
    return rows


@pytest.fixture(scope="module")
def dedup_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dedup")
    rows = _corpus()
    schema = pa.schema(
        [("id", pa.string()), ("text", pa.string()), ("url", pa.string()), ("math_score", pa.float64())]
    )
    (root / "in").mkdir()
    for part in range(2):
        pq.write_table(
            pa.Table.from_pylist(rows[part::2], schema=schema), root / "in" / f"part{part}.parquet"
        )
    result = CliRunner().invoke(app, ["dedup", str(root / "in"), "-o", str(root / "out"), "--workers", "2"])
    assert result.exit_code == 0, result.output
    return root / "out"


def _survivors(out: Path) -> dict[str, dict]:
    table = pa.concat_tables([pq.read_table(p) for p in sorted((out / "data").glob("*.parquet"))])
    return {row["id"]: row for row in table.to_pylist()}


def test_survivors_and_drop_reasons(dedup_run: Path) -> None:
    summary = json.loads((dedup_run / "summary.json").read_text())
    kept = _survivors(dedup_run)
    assert summary["docs_in"] == 36 and is_balanced(summary) and "unaccounted" not in summary
    # u5 and its two copies with a number appended all stay apart: their numbers differ
    assert summary["dropped"] == {"duplicate_text": 1, "duplicate_url": 1, "empty": 1, "near_duplicate": 3}
    assert {
        "near_hi",
        "near_long",
        "num_a",
        "num_b",
        "one_num_a",
        "one_num_b",
        "one_word",
        "cjk_copy",
    } <= set(kept)
    assert {"u1", "u2", "empty", "cjk"}.isdisjoint(kept) and "u5" in kept
    assert len(kept) == summary["docs_out"] == 30
    rejects = pa.concat_tables([pq.read_table(p) for p in (dedup_run / "rejects").glob("*.parquet")])
    assert sorted(rejects.column("reason").to_pylist()).count("near_duplicate") == 3


def test_cluster_metadata_and_report(dedup_run: Path) -> None:
    kept = _survivors(dedup_run)
    assert kept["near_hi"]["minhash_cluster_size"] == 2 and kept["near_hi"]["minhash_cluster_id"] >= 0
    assert kept["u5"]["minhash_cluster_size"] == 1 and kept["u5"]["minhash_cluster_id"] == -1
    assert (
        kept["u5"]["url"] == "https://site.org/p5" and kept["u5"]["math_score"] == 0.5
    )  # columns pass through
    clusters = [json.loads(line) for line in (dedup_run / "clusters.jsonl").read_text().splitlines()]
    by_kept = {c["kept"]: c for c in clusters}
    assert by_kept["near_hi"]["removed"] == ["u1"] and by_kept["near_long"]["removed"] == ["u2"]
    assert by_kept["cjk_copy"]["removed"] == ["cjk"]  # no scores: the longer one
    exact = {c["kept"]: c["removed"] for c in clusters if c["kind"] == "exact"}
    assert exact == {"u3": ["exact"], "u4": ["url"]}  # the keep rule: higher math_score


def test_every_minhash_boundary_is_on_disk(dedup_run: Path) -> None:
    work = dedup_run / "work"
    assert len(list((work / "signatures").glob("bucket_*/*.minhash.sig"))) == 11 * 2
    assert len(list((work / "buckets").glob("*.dups"))) == 11
    assert sorted(p.suffix for p in (work / "clusters").glob("000000.*")) == [
        ".clusters",
        ".remove",
        ".sizes",
    ]


def test_rerun_gives_identical_output(dedup_run: Path) -> None:
    before = {p.name: p.read_bytes() for p in (dedup_run / "data").glob("*.parquet")}
    for p in (dedup_run / "data").glob("*.parquet"):
        p.unlink()
    for p in (dedup_run / "logs" / "6_filter" / "completions").glob("*"):
        p.unlink()
    result = CliRunner().invoke(
        app, ["dedup", str(dedup_run.parent / "in"), "-o", str(dedup_run), "--workers", "2"]
    )
    assert result.exit_code == 0, result.output
    assert {p.name: p.read_bytes() for p in (dedup_run / "data").glob("*.parquet")} == before


def test_missing_input_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["dedup", str(tmp_path / "nope.parquet"), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "nope.parquet" in result.output


def test_datatrove_filter_reads_our_cluster_files(dedup_run: Path, tmp_path: Path) -> None:
    from datatrove.pipeline.dedup.minhash import MinhashDedupFilter

    from curate.dedup_exact import ExactDedupFilter
    from curate.dedup_io import build_readers, document_files

    work = dedup_run / "work"
    kept = set()
    for rank in range(2):
        [reader] = build_readers(document_files([dedup_run.parent / "in"]), tmp_path)
        docs = ExactDedupFilter(work / "exact_groups").run(reader.run(None, rank, 2), rank, 2)
        step = MinhashDedupFilter(str(work / "clusters"), load_cluster_ids=True, load_cluster_sizes=True)
        kept |= {d.id for d in step.run(docs, rank, 2)}
    assert kept == set(_survivors(dedup_run))
    summary = json.loads((dedup_run / "summary.json").read_text())
    assert (
        summary["too_short_for_minhash"] == 1 and summary["pairs_blocked_by_numbers"] > 0
    )  # one_word; u5 copies
