"""The answer-extraction regexes read degenerate model output (runs of blanks, newlines, stars) in linear time, and
find exactly what the old, quadratic patterns found: the old pattern texts are kept here and compared with the new
ones on generated strings and on every string literal of the grading tests (spans and groups, or the function's
return value).
"""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest

from evals import answer_extract as ax
from evals import answer_match as am
from tests.regex_timing import RUN
from tests.regex_timing import seconds as _seconds

# The patterns as they were before the linear rewrite.
OLD_NEXT_PROBLEM = re.compile(
    r"\n(?P<blank>(?:[ \t]*\n)+)?[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?[ \t]*"
    r"(?:sub-?problem[ \t]*(?:\d+|(?=:))"
    r"|(?:problem|question)(?:[ \t]*#?\d+(?:\.\d+)*)?[ \t]*(?:\*\*|__)?[ \t]*(?:[:.)]|$)"
    r"|(?:example|exercise)[ \t]*#?\d+"
    r"|(?-i:Q)[ \t]*\d*[ \t]*(?:\*\*|__)?[ \t]*:"
    r"|(?-i:Q)[ \t]*\d+[ \t]*[.)])",
    re.IGNORECASE | re.MULTILINE,
)
OLD_TRAILING_REASON = re.compile(
    r"(?:\s*,\s*|\s+)(?:since|because|as|which|where|given|for)\b.*$", re.IGNORECASE
)
OLD_FINAL_ANSWER = re.compile(r"final answer\s*\**\s*:[\s*]*(.+?)(?:\.\s|\.$|\n|$)", re.IGNORECASE)
OLD_NUMBER_THEN_WORDS = re.compile(
    r"^\$?\s*([-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+)?)\s*\$?\s+([A-Za-z][A-Za-z'.\s/-]*)$"
)
OLD_NUMBER_THEN_AREA = re.compile(
    r"^([-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+))\s*(?:[kcdm]?m|ft|in|yd|mi)\s*\^\s*\{?\s*[23]\s*\}?$"
)
OLD_PERCENT = re.compile(r"\s*\\?%$")

TESTS = Path(__file__).parent
PIECES = [
    "\n", "\n", "\n", " ", " ", " ", "\t", "#", "##", "**", "__", "*", "_", "1", "2", "12", "3.4", ".", ":", ")",
    ",", "$", "%", "\\%", "{", "}", "^", "/", "x", "Problem", "problem", "Question", "Q", "q", "Sub-problem",
    "subproblem", "Example", "Exercise", "since", "because", "as", "for", "Final Answer", "final answer",
    "the answer is", "\\boxed{5}", "####", "m", "cm", "ft", "dollars", "apples", "'s", "-", "I hope it is correct.",
]  # fmt: skip


def _generated(seed: int, count: int = 3000, longest: int = 24) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, longest))) for _ in range(count)]


BLANKS = ["\n", "\n", " ", " ", "\t", " \n", "\n\n"]
SHAPES = {  # (what comes before the word, the words, what comes after): the texts each pattern is tested on
    "next_problem": (
        [*BLANKS, "#", "###", "#######", "**", "__", "*", "1.", "x", "the answer is 5", "\\boxed{2}"],
        ["Problem", "question", "Q", "q", "Sub-problem", "subproblem", "Example", "exercise", "Problems"],
        [*BLANKS, "1", "23", ".", ".5", "#", "**", "__", ":", ")", "x", "."],
    ),
    "trailing_reason": (
        [*BLANKS, ",", "5", "x"],
        ["since", "because", "as", "for", "Given", "asx"],
        [*BLANKS, ",", "y"],
    ),
    "final_answer": (
        [*BLANKS, "**", "x"],
        ["final answer", "Final Answer"],
        [*BLANKS, "*", "**", ":", "5", ".", "x"],
    ),
    "number_then_words": (
        ["$", " ", "-", "+"],
        ["5", "12,000", "3.5", ".5", "1"],
        [" ", " ", " ", "\t", "\n", "$", "/", "2", ",", ".", "dollars", "apples", "m", "'", "-", "!"],
    ),
    "number_then_area": (
        ["-", "+"],
        ["5 m^", "12,000 cm ^", "3.5ft^", "5 in"],
        [" ", " ", "\t", "^", "{", "}", "{2}", "2", "3", "4", "\n"],
    ),
    "percent": ([*BLANKS, "5", "x"], ["%", "\\%", "\\"], [*BLANKS, "%", "x"]),
}


def _shaped(name: str, seed: int = 3, count: int = 3000) -> list[str]:
    """COUNT texts of one to four parts, each some of the pattern's leading pieces, one of its words, some of its
    trailing pieces."""
    heads, words, tails = SHAPES[name]
    rng = random.Random(seed)

    def part() -> str:
        head = "".join(rng.choice(heads) for _ in range(rng.randint(0, 5)))
        return head + rng.choice(words) + "".join(rng.choice(tails) for _ in range(rng.randint(0, 7)))

    most = 1 if name.startswith("number") else 4  # those two read a whole answer
    return ["".join(part() for _ in range(rng.randint(1, most))) for _ in range(count)]


def _test_strings() -> list[str]:
    """Every string literal of the answer and grading tests: the model outputs and answers they were written for."""
    found: set[str] = set()
    for path in sorted(TESTS.glob("test_answer*.py")) + sorted(TESTS.glob("test_grading*.py")):
        if path.name == Path(__file__).name:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return sorted(found)


TEXTS = _generated(1) + _test_strings()


def _found(matches) -> list[tuple]:
    return [(m.span(), m.groups(), [m.span(g) for g in range(1, (m.re.groups or 0) + 1)]) for m in matches]


def _cut_old(text: str) -> str:
    """`cut_at_next_problem` as it was, on the old pattern."""
    end = ax._MINERVA_END.search(text)
    end_at = end.end() if end else len(text)
    for match in OLD_NEXT_PROBLEM.finditer(text, 0, end_at):
        if not ax._ANSWER_GIVEN.search(text, 0, match.start()):
            continue
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        if match.group("blank") is not None or ax._ANSWER_GIVEN.search(line):
            return text[: match.start()]
    return text[:end_at]


def test_there_are_real_outputs_among_the_texts():
    assert len(_test_strings()) > 100


def test_next_problem_matches_are_the_old_ones():
    for text in TEXTS + _shaped("next_problem", count=6000):
        for end_at in (len(text), len(text) // 2):
            assert _found(ax._next_problems(text, end_at)) == _found(
                OLD_NEXT_PROBLEM.finditer(text, 0, end_at)
            ), text
        assert ax.cut_at_next_problem(text) == _cut_old(text)


@pytest.mark.parametrize(
    ("name", "new", "old"),
    [
        ("trailing_reason", ax._TRAILING_REASON, OLD_TRAILING_REASON),
        ("final_answer", ax._FINAL_ANSWER, OLD_FINAL_ANSWER),
        ("percent", am._PERCENT, OLD_PERCENT),
        ("number_then_words", ax._NUMBER_THEN_WORDS, OLD_NUMBER_THEN_WORDS),
        ("number_then_area", ax._NUMBER_THEN_AREA, OLD_NUMBER_THEN_AREA),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_patterns_find_what_the_old_ones_found(name, new, old):
    texts = (
        TEXTS + _generated(2, longest=8) + _shaped(name, count=10000 if name.startswith("number") else 3000)
    )
    assert sum(bool(old.search(text)) for text in texts) > 100  # the texts exercise the pattern
    for text in texts:
        assert _found(new.finditer(text)) == _found(old.finditer(text)), text
        assert _found(filter(None, [new.match(text)])) == _found(filter(None, [old.match(text)])), text
        assert new.sub("", text) == old.sub("", text), text


@pytest.mark.parametrize(
    "text",
    [
        "Solve it.\n" + "\n" * RUN + "So the answer is 5.",
        "Solve it.\n" + " \n" * (RUN // 2) + "So the answer is 5.",
        "The answer is 5.\nQ" + " " * RUN + "7" + " " * RUN + "x",
        "The answer is 5.\n" + " " * RUN + "Problem" + " " * RUN + "x",
        "x\n" + "\n\nProblem 1.\n" * (RUN // 5),  # the answer was searched for from 0 at every header: 54 s
        "x\n" + "\n\nProblem 1.\n" * (RUN // 5) + "The answer is 5.",
    ],
    ids=["newlines", "blank_lines", "q_blanks", "problem_blanks", "headers_no_answer", "headers_then_answer"],
)
def test_cut_at_next_problem_is_linear_on_runs(text):
    assert _seconds(ax.cut_at_next_problem, text) < 1


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 5" + " " * RUN + "x",
        "The answer is 5" + "\n" * RUN + "x",
        "Final answer" + " " * RUN + "x",
        "Final answer" + " \n" * (RUN // 2),
    ],
    ids=["reason_blanks", "reason_newlines", "final_answer_blanks", "final_answer_lines"],
)
def test_extract_answer_is_linear_on_runs(text):
    assert _seconds(ax.extract_answer, text) < 1


@pytest.mark.parametrize(
    "answer",
    ["5" + " " * RUN + "!", "$5" + " " * RUN + "!", "5 m^" + " " * RUN + "x"],
    ids=["words", "dollar", "area"],
)
def test_drop_unit_is_linear_on_runs(answer):
    assert _seconds(ax._drop_unit, answer) < 1


def test_percent_is_linear_on_runs():
    assert _seconds(am._PERCENT.search, "5" + " " * RUN + "x") < 1
