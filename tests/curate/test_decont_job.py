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
    assert summary["dropped"] == {"contaminated": 2, "empty": 1}  # an empty doc is no document (as in dedup)
    assert summary["hits_per_benchmark"] == {"gsm8k/test": 1, "math500/test": 1}
    kept = pq.read_table(next((out / "data").glob("*.parquet"))).to_pylist()
    assert sorted(r["id"] for r in kept) == ["clean"] and not any(r["contaminated"] for r in kept)
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
    # every document is kept, flagged or not (the empty one is no document, and is dropped as `empty`)
    assert len(kept) == 3 and kept["dirty_gsm"]["contaminated"] and not kept["clean"]["contaminated"]
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


def _flat(output: str) -> str:
    """The CLI output with rich's line wrapping undone (paths and messages can be wrapped anywhere)."""
    return "".join(output.split())


def test_decont_that_can_check_nothing_is_an_error(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    """An empty benchmark file (or one with no problem field) printed "no contamination found", exit 0."""
    docs, bench = corpus
    empty = _jsonl(tmp_path / "b" / "empty.jsonl", [])
    other = _jsonl(tmp_path / "b" / "other.jsonl", [{"text": GSM["question"]}])
    for benchmarks in ([empty], [other], [tmp_path / "b"]):
        args = ["decont", str(docs), "-o", str(tmp_path / "o"), *[f"--benchmarks={b}" for b in benchmarks]]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "no contamination" not in result.output and "nobenchmarkrecordtocheck" in _flat(result.output)
        assert "empty.jsonl" in _flat(result.output) or "other.jsonl" in _flat(result.output)
    _jsonl(tmp_path / "b" / "gsm.jsonl", [GSM])  # some usable files: the others are warned about
    out = tmp_path / "ok"
    result = CliRunner().invoke(
        app, ["decont", str(docs), "-o", str(out), "--benchmarks", str(tmp_path / "b")]
    )
    assert result.exit_code == 0, result.output
    assert "warning:benchmarkfile" in _flat(result.output)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["benchmark_files_unused"] == [str(empty), str(other)]
    assert summary["hits_per_benchmark"] == {"b/gsm": 1}


def test_check_reads_text_and_chat_prompts_and_counts_unreadable_rows(corpus, tmp_path: Path) -> None:
    """Rows with their prompt under `text` were counted and passed as clean: a CI gate passed silently."""
    _, bench = corpus
    rows = [
        {"id": "a", "text": "Forum. " + GSM["question"]},
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": MATH["problem"]},
            ]
        },
        {"prompt": "Compute the sum of the first ten odd numbers and explain each step of your work."},
        {"answer": "3"},  # an answer alone is no prompt
        [1, 2],
    ]
    prompts = _jsonl(tmp_path / "p.jsonl", rows)
    report_path = tmp_path / "check.json"
    args = ["decont", "--check", str(prompts), "--against", str(bench), "-o", str(report_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    report = json.loads(report_path.read_text())
    assert (report["prompts"], report["contaminated"], report["unreadable"]) == (3, 2, 2)
    assert [r["line"] for r in report["rows"]] == [0, 1]
    assert [(r["line"], r["reason"]) for r in report["unreadable_rows"]] == [
        (3, "no_prompt"),
        (4, "not_an_object"),
    ]
    assert "2rowsholdnoreadableprompt" in _flat(result.output)
    unreadable = _jsonl(tmp_path / "u.jsonl", rows[3:])
    result = CliRunner().invoke(app, ["decont", "--check", str(unreadable), "--against", str(bench)])
    assert result.exit_code == 2 and "noreadablepromptin" in _flat(result.output)
    assert "u.jsonl" in _flat(result.output)


def test_check_real_gsm8k_question_under_text(shared_data: Path, tmp_path: Path) -> None:
    gsm = shared_data / "bench" / "gsm8k" / "test.jsonl"
    question = json.loads(gsm.read_text().splitlines()[5])["question"]
    prompts = _jsonl(
        tmp_path / "p.jsonl", [{"id": "x", "text": "Homework:\n" + question}, {"id": "y", "text": "Hi"}]
    )
    report_path = tmp_path / "r.json"
    args = ["decont", "--check", str(prompts), "--against", str(gsm), "-o", str(report_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    [row] = json.loads(report_path.read_text())["rows"]
    assert row["overlaps"][0]["item"] == 5 and row["overlaps"][0]["benchmark"] == "gsm8k/test"


def test_check_errors_name_the_prompt_file(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    _, bench = corpus
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": MATH["problem"]}) + "\nnot json\n")
    missing = tmp_path / "nope.jsonl"
    for prompts, message in [(bad, "bad.jsonl:2:notvalidJSON"), (missing, "promptfileorfoldernotfound")]:
        result = CliRunner().invoke(app, ["decont", "--check", str(prompts), "--against", str(bench)])
        assert result.exit_code == 2 and message in _flat(result.output), result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
    array = tmp_path / "prompts.json"
    array.write_text(json.dumps([{"prompt": "What is two plus two, written out in words?"}, MATH], indent=2))
    report_path = tmp_path / "r.json"
    args = ["decont", "--check", str(array), "--against", str(bench), "-o", str(report_path)]
    assert CliRunner().invoke(app, args).exit_code == 1
    report = json.loads(report_path.read_text())
    assert report["prompts"] == 2 and [r["line"] for r in report["rows"]] == [1]  # index in the array


def test_check_real_json_array_prompt_set(shared_data: Path, tmp_path: Path) -> None:
    prompts = shared_data / "bench" / "math8k_limr" / "math.8k.json"
    records = json.loads(prompts.read_text())
    pick = next(i for i, r in enumerate(records) if i > 100 and len(r["prompt"].split()) > 30)
    evals = _jsonl(tmp_path / "evals" / "test.jsonl", [{"problem": records[pick]["prompt"] + " Simplify."}])
    report_path = tmp_path / "r.json"
    args = ["decont", "--check", str(prompts), "--against", str(evals), "-o", str(report_path)]
    result = CliRunner().invoke(app, args)
    report = json.loads(report_path.read_text())
    assert result.exit_code == 1 and report["unreadable"] == 0 and report["prompts"] > 8000
    assert pick in {r["line"] for r in report["rows"]}


@pytest.mark.parametrize(
    "args, option",
    [
        (["decont", "--ngram", "0"], "--ngram"),
        (["decont", "--short-min-tokens", "-1"], "--short-min-tokens"),
        (["decont", "--workers", "0"], "--workers"),
        (["dedup", "--bands", "0"], "--bands"),
        (["dedup", "--rows", "0"], "--rows"),
        (["dedup", "--ngrams", "0"], "--ngrams"),
        (["dedup", "--keep", "math_score,size"], "--keep"),
        (["dedup", "--workers", "-1"], "--workers"),
    ],
)
def test_bad_numeric_options_are_one_line_errors(
    corpus, tmp_path: Path, args: list[str], option: str
) -> None:
    docs, bench = corpus
    command = [args[0], str(docs), "-o", str(tmp_path / "o"), *args[1:]]
    if args[0] == "decont":
        command += ["--benchmarks", str(bench)]
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    assert f"error:badoption{option}:" in _flat(result.output)
    if option in ("--ngram", "--short-min-tokens"):  # the prompt check reads them too
        check = ["decont", "--check", str(docs), "--against", str(bench), *args[1:]]
        assert f"badoption{option}:" in _flat(CliRunner().invoke(app, check).output)


def test_rows_without_text_are_dropped_as_empty_not_kept(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    docs, bench = corpus
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "d.jsonl").write_bytes(
        docs.read_bytes() + b'{"id": "notext", "body": "xx"}\n{"id": "blank", "text": "  "}\n'
    )
    out = tmp_path / "out"
    args = ["decont", str(tmp_path / "in"), "-o", str(out), "--benchmarks", str(bench)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dropped"]["empty"] == 3 and is_balanced(summary)  # the fixture's own empty doc too
    kept = pq.read_table(out / "data").column("id").to_pylist()
    assert "notext" not in kept and "blank" not in kept and "clean" in kept
    rejects = pq.read_table(out / "rejects").to_pylist()
    assert sorted(r["id"] for r in rejects if r["reason"] == "empty") == ["blank", "empty", "notext"]
