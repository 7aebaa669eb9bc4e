"""The decont job (`mathmix decont`), the prompt check, and the dedup + decont recipe stages."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.summary import is_balanced
from mathmix.cli import app

GSM = {
    "question": "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
    "How much did she earn?",
    "answer": "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nWorking 50 minutes, she earned 0.2 x 50 = "
    "$<<0.2*50=10>>10.\n#### 10",
}
MATH = {
    "problem": "What is the smallest positive integer $n$ such that $17n \\equiv 1234 \\pmod{7}?$ Give your "
    "answer as a single integer with no units.",
    "solution": "First, we simplify $1234 \\pmod{7}$ to $1234 \\equiv 2 \\pmod{7}$, so the answer is "
    "$\\boxed{3}$.",
    "answer": "3",
}


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    bench = tmp_path / "bench"
    _jsonl(bench / "gsm8k" / "test.jsonl", [GSM])
    _jsonl(bench / "math500" / "test.jsonl", [MATH])
    docs = [
        {"id": "dirty_gsm", "text": "Forum post.\n" + GSM["question"].upper() + "\nAnyone?"},
        {
            "id": "dirty_math",
            "text": "Notes: what is the smallest  positive integer $ n $ such that "
            "$17 n\\equiv 1234\\pmod{7}$? Give your answer as a single integer with no units. Cheers",
        },
        {
            "id": "clean",
            "text": "Weng likes babysitting and earns money every weekend in the summer holidays.",
        },
        {"id": "empty", "text": ""},
    ]
    return _jsonl(tmp_path / "docs.jsonl", docs), bench


def test_decont_removes_and_reports(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    docs, bench = corpus
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["decont", str(docs), "-o", str(out), "--benchmarks", str(bench)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert is_balanced(summary) and summary["docs_in"] == 4
    assert summary["dropped"] == {"contaminated": 2}  # the empty doc is kept: decont drops contamination only
    assert summary["hits_per_benchmark"] == {"gsm8k/test": 1, "math500/test": 1}
    kept = pq.read_table(next((out / "data").glob("*.parquet"))).to_pylist()
    assert sorted(r["id"] for r in kept) == ["clean", "empty"] and not any(r["contaminated"] for r in kept)
    report = [json.loads(line) for line in (out / "contamination.jsonl").read_text().splitlines()]
    assert {r["id"]: r["overlaps"][0]["benchmark"] for r in report} == {
        "dirty_gsm": "gsm8k/test",
        "dirty_math": "math500/test",
    }
    assert all(len(r["overlaps"][0]["ngrams"][0].split()) == 13 for r in report)


def test_decont_flag_mode_keeps_everything(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    docs, bench = corpus
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["decont", str(docs), "-o", str(out), "--benchmarks", str(bench), "--flag"]
    )
    assert result.exit_code == 0, result.output
    kept = {r["id"]: r for r in pq.read_table(next((out / "data").glob("*.parquet"))).to_pylist()}
    assert len(kept) == 4 and kept["dirty_gsm"]["contaminated"] and not kept["clean"]["contaminated"]
    assert kept["dirty_math"]["decont_benchmarks"] == "math500/test"


def test_missing_benchmark_file_is_named(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    docs, _ = corpus
    missing = tmp_path / "aime24" / "test.jsonl"
    result = CliRunner().invoke(
        app, ["decont", str(docs), "-o", str(tmp_path / "o"), "--benchmarks", str(missing)]
    )
    assert result.exit_code == 2 and "aime24" in result.output


def test_check_prompts_against_evals(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    _, bench = corpus
    prompts = _jsonl(
        tmp_path / "rl" / "prompts.jsonl",
        [
            {"prompt": MATH["problem"], "answer": "3"},
            {
                "prompt": "Compute the sum of the first ten odd numbers and explain each step of your work.",
                "answer": "100",
            },
        ],
    )
    report_path = tmp_path / "check.json"
    result = CliRunner().invoke(
        app, ["decont", "--check", str(prompts), "--against", str(bench / "math500"), "-o", str(report_path)]
    )
    assert result.exit_code == 1, result.output  # contamination found: non-zero for CI gates
    report = json.loads(report_path.read_text())
    assert report["prompts"] == 2 and report["contaminated"] == 1
    assert report["rows"][0]["line"] == 0 and report["hits_per_benchmark"] == {"math500/test": 1}


def test_recipe_stages_dedup_then_decont(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    from pipelines.recipe import Recipe
    from pipelines.runner import run_recipe

    docs, bench = corpus
    run_dir = tmp_path / "run"
    (run_dir / "sample").mkdir(parents=True)
    bench.rename(run_dir / "sample" / "bench")
    recipe = Recipe.model_validate(
        {
            "name": "t",
            "output_dir": str(run_dir),
            "executor": {"tasks": 1},
            "stages": {"dedup": {"inputs": [str(docs)]}, "decont": {}},
        }
    )
    summaries = run_recipe(recipe)
    assert summaries["dedup"]["docs_out"] == 3  # the empty doc goes in dedup
    assert summaries["decont"]["docs_in"] == 3 and summaries["decont"]["docs_out"] == 1
    assert (run_dir / "decont" / "summary.json").is_file() and (
        run_dir / "dedup" / "clusters.jsonl"
    ).is_file()


def test_parquet_and_jsonl_inputs_both_counted_and_bad_lines_dropped(corpus, tmp_path: Path) -> None:
    """One reader per format: docs_in sums them; a line that is not a JSON object is a counted drop."""
    import pyarrow as pa

    docs, bench = corpus
    folder = tmp_path / "mixed"
    folder.mkdir()
    pq.write_table(
        pa.Table.from_pylist([{"id": "p1", "text": "a parquet page about gardens"}]), folder / "a.parquet"
    )
    (folder / "b.jsonl").write_bytes(docs.read_bytes() + b"not json\n\n[1, 2]\n\xff\xfe{}\n")
    for command in ("decont", "dedup"):
        out = tmp_path / command
        args = [command, str(folder), "-o", str(out)] + (
            ["--benchmarks", str(bench)] if command == "decont" else []
        )
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        summary = json.loads((out / "summary.json").read_text())
        assert summary["docs_in"] == 1 + 4 + 3 and is_balanced(summary) and "unaccounted" not in summary
        assert summary["dropped"]["bad_record"] == 3
