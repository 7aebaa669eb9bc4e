"""What counts as a match: template n-grams are no evidence, a record needs several of its n-grams (or its short
problem whole), and math is the same tokens however a page writes it (LaTeX, Unicode, ASCII)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curate.decont import BenchmarkIndex, decont_tokens

TAIL = " Find the value of $k$ that makes the curve and the line meet at one point."


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _load(path: Path, n: int | None = None) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:n]]


def test_a_sentence_of_two_distinct_problems_is_no_evidence(tmp_path):
    shared = "What is the area of the shaded region? Express your answer in terms of $\\pi$ and simplify it."
    rows = [
        {"problem": f"A circle of radius {r} sits in a square of side {2 * r} units. {shared}"}
        for r in (3, 5)
    ]
    one = {"problem": "A parabola $y = x^2 + 2$ touches the line $y = kx$ from above." + TAIL}
    bench = _jsonl(tmp_path / "bench" / "math500" / "test.jsonl", [*rows, one])
    _jsonl(tmp_path / "bench" / "math" / "test.jsonl", [one])  # the same problem twice counts once
    index = BenchmarkIndex([tmp_path / "bench"])
    assert index.find("Worksheet 3, question 2: " + shared) == []
    assert index.find("Homework: " + rows[0]["problem"])  # the problem itself is still found
    hits = index.find("Forum: " + one["problem"] + " Thanks")
    assert {(o.benchmark, o.item) for o in hits} == {("math500/test", 2), ("math/test", 0)}
    assert index.template_ngrams > 0 and bench.is_file()


def test_one_or_two_shared_ngrams_of_a_long_record_drop_nothing(tmp_path):
    sentence = "the key fact here is that the sum of the two roots of the equation equals minus b over a"
    solution = f"By Vieta, {sentence}, so the roots add up to $-4$ and the answer is $x = 3$ or $x = -7$."
    record = {
        "problem": "Solve the equation $x^2 + 4x - 21 = 0$ for every real number $x$ there is.",
        "solution": solution,
    }
    index = BenchmarkIndex([_jsonl(tmp_path / "b" / "test.jsonl", [record])])
    lesson = (
        "Lesson 4. Recall that " + " ".join(sentence.split()[4:18]) + " in every case."
    )  # 2 n-grams of it
    assert index.find(lesson) == []
    assert index.find("Copied: " + solution)  # the solution copied: contaminated
    assert index.find(record["problem"])  # the problem alone (2 n-grams: one suffices)


def test_training_split_ngrams_are_templates_but_an_eval_problem_in_it_is_not(tmp_path):
    common = (
        "Let the answer be written as m/n where m and n are relatively prime positive integers; find m+n."
    )
    test = [{"problem": "A bag holds 4 red and 6 blue marbles; two are drawn at random. " + common}]
    train = [
        {"problem": f"A die is rolled {k} times in a row and every result is written down. " + common}
        for k in (3, 4)
    ]
    train.append(test[0])  # PRM800K's training split holds MATH test problems
    _jsonl(tmp_path / "bench" / "m" / "test.jsonl", test)
    _jsonl(tmp_path / "bench" / "m" / "train.jsonl", train)
    index = BenchmarkIndex([tmp_path / "bench"])
    assert index.find("AIME tip: " + common + " Good luck") == []
    assert index.find(test[0]["problem"])


def test_math_train_read_as_pages_is_rarely_dropped(shared_data: Path, tmp_path: Path) -> None:
    """500 MATH train problems with their solutions, as a homework page shows them, against 2,000 MATH test
    problems, no training split read for templates: one shared 13-gram dropped 22% of them (9% unrelated
    problems); most of those left are the same problem or its setup (`The complete graph of $y=f(x)$ ...`)."""
    import difflib

    bench = shared_data / "bench" / "math_hendrycks"
    test = _load(bench / "test.jsonl", 2000)
    index = BenchmarkIndex([_jsonl(tmp_path / "math" / "test.jsonl", test)])
    seen = {r["problem"].strip() for r in test}
    train = [r for r in _load(bench / "train.jsonl", 500) if r["problem"].strip() not in seen]
    dropped = unrelated = 0
    for r in train:
        if hits := index.find(r["problem"] + "\n\n" + r["solution"]):
            dropped += 1
            ratio = max(
                difflib.SequenceMatcher(None, r["problem"], test[o.item]["problem"]).ratio() for o in hits
            )
            unrelated += ratio < 0.5
    assert dropped <= 0.16 * len(train) and unrelated <= 0.04 * len(train), (dropped, unrelated, len(train))


@pytest.mark.parametrize(
    ("item", "page"),
    [
        (13, "Homework help\nThe volume of the cylinder shown is 45π cubic cm. What is the height in centimeters of "
             "the cylinder?"),
        (117, "Forum post: If √(3x−5)=2, find all possible values of x. Thanks!"),
        (117, "Forum post: If sqrt(3x-5)=2, find all possible values of x. Thanks!"),
        (30, "Find the product of 6_8 · 7_8. Express your answer in base 8."),
    ],
)  # fmt: skip
def test_unicode_and_ascii_math_is_found(shared_data: Path, item: int, page: str) -> None:
    index = BenchmarkIndex([shared_data / "bench" / "math500" / "test.jsonl"])
    assert item in [o.item for o in index.find(page)]


def test_one_token_per_symbol_however_written():
    latex = decont_tokens("$\\dfrac{1}{2}\\pi r^2 \\leq 3 \\times \\sqrt{x}$ and $90^\\circ$ \\text{cm}")
    assert decont_tokens("(1)/(2) π r² ≤ 3 × √x and 90° cm") == latex
    assert decont_tokens("1/2 pi r^2 <= 3 * sqrt(x) and 90 degrees cm") == latex
    assert latex == ["1", "2", "\\pi", "r", "2", "3", "\\sqrt", "x", "and", "90", "\\circ", "cm"]


def test_problem_statements_no_rule_finds_are_counted(shared_data: Path) -> None:
    """`Simplify $\\sqrt{242}$.` has a long solution, so the record was matchable: its problem alone is not."""
    index = BenchmarkIndex([shared_data / "bench" / "math500" / "test.jsonl"])
    assert index.find("Simplify $\\sqrt{242}$.") == []
    assert index.problems_unmatchable["math500/test"] >= 30 > index.too_short["math500/test"]


OCW = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "data"
    / "bench"
    / "octothinker_eval"
    / "ocw"
    / "test.jsonl"
)


@pytest.mark.skipif(not OCW.is_file(), reason=f"real benchmark data absent: {OCW} (../shared/data)")
def test_a_preamble_shared_by_sub_questions_is_a_passage_not_a_template(tmp_path):
    rows = _load(OCW)
    # lines 13, 23, 52: one star's 49-word preamble (a blackbody of given luminosity and temperature) and 3 sub-questions
    group = [13, 23, 52]
    preamble = rows[13]["problem"].split("\n\n")[0]
    assert preamble.startswith("Preamble:") and all(rows[i]["problem"].startswith(preamble) for i in group)
    bench = _jsonl(tmp_path / "bench" / "ocw" / "test.jsonl", rows)
    index = BenchmarkIndex([bench])
    for item in group:
        page = "Homework help, please.\n\n" + rows[item]["problem"] + "\n\nI am stuck on this one."
        found = {o.item for o in index.find(page) if o.benchmark == "ocw/test"}
        assert item in found  # the sub-question quoted with its preamble; its siblings may be matched too


MATH = OCW.parents[2] / "math_hendrycks"


@pytest.mark.skipif(not MATH.is_dir(), reason=f"real benchmark data absent: {MATH} (../shared/data)")
@pytest.mark.parametrize(
    ("test_lines", "train_lines", "item"),
    [
        # The real numbers $a,$ $b,$ $c,$ and $d$ satisfy \[a^2 + b^2 + c^2 + 519 = d + 36 \sqrt{...}\]: train's
        # sibling has `+ 1 = d + \sqrt{a + b + c - d}`; every prose n-gram is the shared stem's
        ([2433], [3905], 0),
        # Our club has 25 members ... at most one office? Two test siblings (other last clauses), one in train
        ([1425, 3631, 4120], [5566], 1),
    ],
)
def test_a_problem_whose_ngrams_are_all_its_siblings_is_matched_whole(
    tmp_path: Path, test_lines: list[int], train_lines: list[int], item: int
) -> None:
    test, train = _load(MATH / "test.jsonl"), _load(MATH / "train.jsonl")
    rows = [test[i] for i in test_lines]
    _jsonl(tmp_path / "bench" / "math" / "test.jsonl", rows)
    _jsonl(tmp_path / "bench" / "math" / "train.jsonl", [train[i] for i in train_lines])
    index = BenchmarkIndex([tmp_path / "bench"])
    page = "Homework help forum, please help!\n\n" + rows[item]["problem"] + "\n\nThanks in advance."
    assert [(o.item, o.whole) for o in index.find(page)] == [(item, 1)]
    assert index.problems_unmatchable["math/test"] == 0 < index.templated_whole["math/test"]
    # the whole statement, numbers included: the training sibling (the same stem, other numbers) is no hit
    assert index.find("Homework help forum, please help!\n\n" + train[train_lines[0]]["problem"]) == []
