"""Decontamination: n-gram overlap with benchmark records after whitespace / case / LaTeX-spacing normalisation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from datatrove.data import Document

from curate.decont import (
    BenchmarkIndex,
    DecontFilter,
    benchmark_files,
    find_overlaps,
    read_records,
    validate_benchmarks,
)

GSM = {
    "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
    "altogether in April and May.\n#### 72",
}
MATH = {
    "problem": "If $x^2+y^2=1$, what is the largest possible value of $|x|+|y|$ when we require that both "
    "numbers are strictly positive and the sum of their squares stays equal to one?",
    "solution": "By the QM-AM inequality we have $\\frac{|x|+|y|}{2} \\le \\sqrt{\\frac{x^2+y^2}{2}}$ so the "
    "largest value is $\\boxed{\\sqrt{2}}$.",
}
SVAMP = {
    "Body": "There are 87 oranges and 290 bananas in Philip's collection of fruit that he keeps at home.",
    "Question": "If the bananas are organized into 2 groups, how big is each group of bananas?",
    "Answer": "145.0",
}


def _write(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture()
def bench_dir(tmp_path: Path) -> Path:
    root = tmp_path / "bench"
    _write(root / "gsm8k" / "test.jsonl", [GSM])
    _write(root / "math500" / "test.jsonl", [{"problem": "Compute 1+1.", "solution": "2"}, MATH])
    _write(root / "svamp" / "test.jsonl", [SVAMP])
    return root


def test_pasted_problem_found_despite_case_whitespace_and_latex_spacing(bench_dir: Path) -> None:
    page = (
        "Homework help forum.\n\nIF  $x^{2} + y^{2} = 1$ ,WHAT is the LARGEST possible value of $ |x| + |y| $ "
        "when we\n require that both numbers are strictly positive and the sum of their squares stays equal to one?"
        " Thanks!\n By the QM-AM inequality we have $\\dfrac{|x|+|y|}{2}\\,\\leq\\sqrt{\\frac{x^2+y^2}{2}}$."
    )
    [hits] = find_overlaps([page], [bench_dir])
    assert [(h.benchmark, h.item) for h in hits] == [("math500/test", 1)]
    assert hits[0].n_matched >= 10 and all(len(g.split()) == 13 for g in hits[0].ngrams)


def test_numbers_matter_and_clean_text_has_no_hit(bench_dir: Path) -> None:
    changed = GSM["question"].replace("48", "50")  # the 13-grams covering the number no longer match
    clean = "Natalia likes clips. Her friends sold many things in April and in May, the shop was closed."
    hits = find_overlaps([GSM["question"], changed, clean, ""], [bench_dir])
    assert hits[2] == [] and hits[3] == []
    assert hits[0][0].n_matched - hits[1][0].n_matched == 5  # "48" is token 4: n-grams 0..4 held it


def test_fields_per_benchmark_and_formula_only_ngrams_ignored(bench_dir: Path) -> None:
    index = BenchmarkIndex([bench_dir], ngram=13)
    assert dict(index.benchmarks) == {"gsm8k/test": 1, "math500/test": 2, "svamp/test": 1}
    assert index.too_short["math500/test"] == 1  # "Compute 1+1." has no 13-gram
    assert index.find(SVAMP["Body"])[0].benchmark == "svamp/test"
    formula = "$$ r_1 = \\sqrt{3} r_2 + \\sqrt{3} r_1 r_2 \\sqrt{3} r_1 r_2 \\sqrt 3 r_1 r_2 $$"
    formulas = BenchmarkIndex([_write(bench_dir.parent / "f" / "x.jsonl", [{"problem": formula}, GSM])])
    assert formulas.find(formula) == [] and formulas.too_short["f/x"] == 1


def test_short_problems_are_matched_whole_and_only_whole(tmp_path: Path) -> None:
    short = {"problem": "What is $\\sqrt{53}$ in simplest radical form?", "answer": "\\sqrt{53}"}
    bare = {"problem": "What is the area of the shaded region in square units?"}  # no number: not specific
    story = {"Body": "Paul had 115 books and 20 pens.", "Question": "How many books did he sell in all?"}
    index = BenchmarkIndex([_write(tmp_path / "b" / "test.jsonl", [short, bare, story])])
    assert index.matched_whole["b/test"] == 1 and index.too_short["b/test"] == 1  # story: 13-grams
    page = "Forum.\nWHAT is $ \\sqrt{53} $ in  simplest RADICAL form?\nThanks."
    [hit] = index.find(page)
    assert (hit.item, hit.n_matched, hit.ngrams) == (0, 1, ["what is \\sqrt 53 in simplest radical form"])
    assert index.find("What is $\\sqrt{53}$ in simplest terms?") == []  # the key alone is not enough
    assert index.find("What is $\\sqrt{54}$ in simplest radical form?") == []
    assert index.find("What is the area of the shaded region in square units?") == []
    assert index.find("Paul had 115 books and 20 pens.") == []  # a story without its question
    assert BenchmarkIndex([tmp_path / "b"], short_min_tokens=0).find(page) == []


def test_missing_benchmark_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        benchmark_files([tmp_path / "nope.jsonl"])
    with pytest.raises(FileNotFoundError, match="no .jsonl"):
        DecontFilter([tmp_path])


@pytest.mark.parametrize("mode", ["remove", "flag"])
def test_filter_removes_or_flags_and_reports(bench_dir: Path, tmp_path: Path, mode: str) -> None:
    docs = [
        Document(text="Some page. " + GSM["question"], id="dirty"),
        Document(text="An unrelated page about gardening and tomatoes in the spring.", id="clean"),
        Document(text="", id="empty"),
        Document(text="数学 问题 很 有趣 " * 20, id="cjk"),
    ]
    step = DecontFilter([bench_dir], mode=mode, report_folder=tmp_path / "report")
    kept = list(step.run(iter(docs)))
    expected = ["dirty", "clean", "empty", "cjk"] if mode == "flag" else ["clean", "empty", "cjk"]
    assert [d.id for d in kept] == expected
    assert docs[0].metadata["contaminated"] and docs[0].metadata["decont_benchmarks"] == "gsm8k/test"
    assert docs[1].metadata == {"contaminated": False, "decont_benchmarks": ""}
    [line] = (tmp_path / "report" / "00000.jsonl").read_text().splitlines()
    assert json.loads(line)["overlaps"][0]["benchmark"] == "gsm8k/test"
    assert step.stats["hits_gsm8k/test"].total == 1


def test_real_benchmarks_pasted_into_real_pages(shared_data: Path) -> None:
    import random

    from resiliparse.extract.html2text import extract_plain_text

    evals = [shared_data / "bench" / "gsm8k" / "test.jsonl", shared_data / "bench" / "math500" / "test.jsonl"]
    pages = sorted((shared_data / "html" / "math").glob("*.html"))[:12]
    texts = [extract_plain_text(p.read_text(errors="replace"), main_content=True) for p in pages]
    rng = random.Random(0)
    problems = [json.loads(line)["question"] for line in evals[0].read_text().splitlines()[:10]]
    problems += [json.loads(line)["problem"] for line in evals[1].read_text().splitlines()[100:110]]
    planted = []
    for problem in problems:
        altered = " ".join(w.upper() if rng.random() < 0.2 else w for w in problem.split()).replace(" ", "  ")
        altered = altered.replace("\\frac", "\\dfrac").replace("=", " = ")
        planted.append(rng.choice(texts) + "\n\n" + altered + "\n")
    hits = find_overlaps(texts + planted, evals)
    assert [h for h in hits[: len(texts)] if h] == []  # clean pages: no hit
    found = sum(bool(h) for h in hits[len(texts) :])
    assert found >= len(problems) - 1, f"{found}/{len(problems)}"  # a 1-line problem may have no 13-gram


def test_benchmarks_with_no_checkable_record_are_an_error_naming_them(tmp_path: Path) -> None:
    empty = _write(tmp_path / "b" / "empty.jsonl", [])
    no_fields = _write(tmp_path / "b" / "fields.jsonl", [{"id": 1, "text": GSM["question"]}, {"foo": "x"}])
    for paths in ([empty], [no_fields], [empty, no_fields], [tmp_path / "b"]):
        with pytest.raises(ValueError, match="no benchmark record to check in .*empty.jsonl|fields.jsonl"):
            BenchmarkIndex(paths)
        with pytest.raises(ValueError, match="no benchmark record to check"):
            validate_benchmarks(paths)
    good = _write(tmp_path / "b" / "gsm.jsonl", [GSM])
    assert validate_benchmarks([tmp_path / "b"]) == [empty, no_fields]  # some usable: warn about the rest
    index = BenchmarkIndex([tmp_path / "b"])
    assert index.unused_files == [empty, no_fields] and dict(index.benchmarks) == {"b/gsm": 1}
    assert validate_benchmarks([good]) == []
    with pytest.raises(FileNotFoundError, match="nope"):
        validate_benchmarks([good, tmp_path / "nope"])


def test_same_named_benchmark_files_keep_distinct_names(tmp_path: Path) -> None:
    """Two `gsm8k/test` files were merged under one name, and a hit's line no longer said which file."""
    first = _write(tmp_path / "bench" / "gsm8k" / "test.jsonl", [GSM])
    second = _write(tmp_path / "bench" / "qwen_eval" / "gsm8k" / "test.jsonl", [MATH, GSM])
    names = benchmark_files([first, second, tmp_path / "bench", first])  # a file reached twice is read once
    assert names == [("bench/gsm8k/test", first), ("qwen_eval/gsm8k/test", second)]
    index = BenchmarkIndex([first, second])
    assert dict(index.benchmarks) == {"bench/gsm8k/test": 1, "qwen_eval/gsm8k/test": 2}
    hits = {(o.benchmark, o.item) for o in index.find(GSM["question"])}
    assert hits == {("bench/gsm8k/test", 0), ("qwen_eval/gsm8k/test", 1)}
    first.with_suffix(".json").write_text(json.dumps([GSM]))
    names = [n for n, _ in benchmark_files([first, first.with_suffix(".json")])]
    assert names == ["gsm8k/test.jsonl", "gsm8k/test.json"]


def test_same_named_real_benchmarks(shared_data: Path) -> None:
    bench = shared_data / "bench"
    files = benchmark_files([bench / "gsm8k" / "test.jsonl", bench / "qwen_eval" / "gsm8k" / "test.jsonl"])
    assert [name for name, _ in files] == ["bench/gsm8k/test", "qwen_eval/gsm8k/test"]
    whole = dict(benchmark_files([bench]))  # one folder: names as before, already distinct
    assert "gsm8k/test" in whole and "qwen_eval/gsm8k/test" in whole and len(whole) == len(set(whole))


def test_records_are_read_with_file_and_line_in_every_error(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps([GSM, [1], MATH], indent=2))
    assert [(i, type(r).__name__) for i, r in read_records(tmp_path / "a.json")] == [
        (0, "dict"),
        (1, "list"),
        (2, "dict"),
    ]
    (tmp_path / "bad.jsonl").write_text(json.dumps(GSM) + "\n\nnot json\n")
    (tmp_path / "bad.json").write_text('[\n{"a": 1},\n{"a": }\n]')
    (tmp_path / "obj.json").write_text('{"data": []}')
    (tmp_path / "latin.jsonl").write_bytes(b'{"a": 1}\n{"a": "\xe9"}\n')
    for name, message in [
        ("bad.jsonl", "bad.jsonl:3: not valid JSON"),
        ("bad.json", "bad.json:3: not valid JSON"),
        ("obj.json", "obj.json: a .json file must hold a list of records"),
        ("latin.jsonl", "latin.jsonl:2: not UTF-8"),
    ]:
        with pytest.raises(ValueError, match=message):
            list(read_records(tmp_path / name))
