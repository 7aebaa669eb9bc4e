"""The rewriter's output checks (`curate.rewrite.validate`) read degenerate LLM output (runs of blanks) in linear
time, and find exactly what the old patterns found: the old pattern texts are kept here and compared with the new
ones (spans and groups, and the return values of `find_score`, `find_qa`, `is_degenerate`) on generated texts and on
every string literal of the rewriter's tests.
"""

from __future__ import annotations

import ast
import random
import re
from contextlib import contextmanager
from pathlib import Path

import pytest

from curate.rewrite import validate as v
from tests.regex_timing import RUN
from tests.regex_timing import seconds as _seconds

# The patterns as they were before the linear rewrite.
OLD_ENV_LINE = re.compile(
    r"^\s*(?:\$\$|\\\[|\\\])?\s*\\(?:begin|end)\{[a-zA-Z*]+\}\s*(?:\$\$|\\\[|\\\])?\s*$"
)


def _old_value(tag: str = "") -> str:
    return (
        r"(?:\*\*|__)?[ \t]*\$?[ \t]*(?:\\boxed\{|<)?[ \t]*"
        rf"(?P<n{tag}>-?\d+(?:\.\d+)?|zero|one|two|three|four|five)\b[ \t]*"
        rf"(?:\}}|>)?[ \t]*\$?(?:[ \t]*(?:/|out[ \t]+of)[ \t]*(?P<d{tag}>\d+))?"
    )


OLD_MARKUP = r"[ \t]*(?:\*\*|__)?[ \t]*"
OLD_FINAL_SCORE = re.compile(
    r"final[ \t]+score(?:[ \t]*\((?:out[ \t]+of|/)[ \t]*5\))?" + OLD_MARKUP
    + r"(?P<sep>:|=|-|–|—|\bis\b|\bof\b)?" + OLD_MARKUP + r"\s*" + _old_value(),
    re.I,
)  # fmt: skip
OLD_OTHER_SCORE = re.compile(
    r"(?:\b(?:total[ \t]+|overall[ \t]+)?score|\btotal(?:[ \t]+points)?)" + OLD_MARKUP + r"(?::|=|\bis\b)"
    + OLD_MARKUP + r"\s*" + _old_value()
    + r"|\brat(?:e|es|ed|ing)[ \t]+(?:it|this|the[ \t]+\w+)?[ \t]*(?:as[ \t]+|at[ \t]+|an?[ \t]+)?" + _old_value("2"),
    re.I,
)  # fmt: skip


def _old_label(names: str, seps: str) -> re.Pattern[str]:
    return re.compile(
        r"^[ \t]*(?P<h>#{1,6}[ \t]*)?(?:\d{1,2}[.)][ \t]*)?(?P<o>\*\*)?[ \t]*"
        rf"(?P<name>{names})(?:[ \t]+\d{{1,2}})?(?:[ \t]*\*\*)?[ \t]*"
        rf"(?:[{seps}](?(o)(?:\*\*)?)|(?(h)(?=[ \t]*$)|(?(o)(?=[ \t]*$)|(?!))))",
        re.I | re.M,
    )


OLD = {
    "_ENV_LINE": OLD_ENV_LINE,
    "_FINAL_SCORE": OLD_FINAL_SCORE,
    "_OTHER_SCORE": OLD_OTHER_SCORE,
    "_QUESTION_LABEL": _old_label("question|problem|q", ":."),
    "_ANSWER_LABEL": _old_label("solution|answer", ":."),
    "_SHORT_ANSWER_LABEL": _old_label("solution|answer|a", ":"),
}

BLANK = ["", "", " ", "  ", "\t", " \t ", "\n", " \n"]
MARK = ["", "", "**", "__", "*", "_"]
# Slots of texts close to each pattern's matches: each a random choice (short blank runs: the old patterns take
# seconds on a run of 30 blanks after "final score").
SHAPES = {
    "score": [
        ["", "x ", "\n", "- ", "**", "I'd "],
        ["final", "Final", "total", "overall", "", "rate", "rated", "rating", "Total"],
        [" ", "\t", "", "  "],
        ["score", "Score", "points", "it", "this", "the work", "", "as"],
        ["", "", " (out of 5)", "(/5)", " (out of 10)"],
        BLANK, MARK, BLANK,
        ["", "", ":", "=", "-", "–", "is", " is", "of", " of", "at", "a ", "an "],
        BLANK, MARK, BLANK, MARK, BLANK,
        ["", "$", "$ "],
        ["", "\\boxed{", "<", "\\boxed{ "],
        BLANK,
        ["3", "-2", "4.5", "5", "five", "one", "ten", "10", "x", "3x", ""],
        BLANK,
        ["", "}", ">", "$", "**"],
        BLANK,
        ["", "/5", "/ 10", " out of 5", "/", "out of"],
        ["", ".", "\n", " more", "\nScore: 2"],
    ],
    "final": [
        ["", "x ", "\n", "**", "The "],
        ["final", "Final", "FINAL"],
        [" ", "\t", "  ", ""],
        ["score", "Score"],
        ["", "", " (out of 5)", "(/5)", " (out of 10)"],
        BLANK[:6], ["", "", "**", "__", "*"], BLANK[:6],
        ["", "", ":", "=", "-", "–", "—", "is", " is", "of", " of", "isn't"],
        BLANK, ["", "", "**", "__"], BLANK, ["", "", "**", "_"], BLANK,
        ["", "$", "$ "],
        ["", "\\boxed{", "<", "\\boxed{ "],
        BLANK,
        ["3", "-2", "4.5", "5", "five", "one", "ten", "10", "x", "3x", "6", "-"],
        BLANK,
        ["", "}", ">", "$", "**"],
        BLANK,
        ["", "/5", "/ 10", " out of 5", "/", "out of", "out  of 4"],
        ["", ".", "\n", " more", "\nScore: 2", "\nfinal score of 4"],
    ],
    "label": [
        ["", "", "Here:\n", "x\n", "\n\n"],
        BLANK[:6],
        ["", "", "#", "##", "#######", "1.", "12)", "123."],
        BLANK[:6],
        ["", "", "1.", "2)"],
        BLANK[:6],
        ["", "", "**", "*"],
        BLANK[:6],
        ["Question", "question", "Problem", "Q", "q", "Solution", "Answer", "A", "a", "Qx"],
        ["", "", " 1", " 12", "\t3", " 123"],
        BLANK[:6],
        ["", "", "**", "*"],
        BLANK[:6],
        ["", ":", ".", ":**", ".**", "**"],
        BLANK[:6],
        ["", "", "\n", "x", "\nSolution: 5", "\nA: 3", "\nQuestion: y"],
    ],
    "env": [
        BLANK[:6], ["", "$$", "\\[", "\\]", "$"], BLANK[:6], ["\\begin", "\\end", "\\beg", "begin"],
        ["{aligned}", "{align*}", "{x", "{}", "{a1}"], BLANK[:6], ["", "$$", "\\[", "\\]", "$"], BLANK[:6],
        ["", "", "x", "\n"],
    ],
}  # fmt: skip

TESTS = Path(__file__).parent


def _shaped(name: str, seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    slots = SHAPES[name]
    return ["".join(rng.choice(slot) for slot in slots) for _ in range(count)]


def _mixed(seed: int, count: int) -> list[str]:
    """Random mixes of the pieces the patterns read, several statements to a text."""
    pieces = [p for slots in SHAPES.values() for slot in slots for p in slot if p]
    rng = random.Random(seed)
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 16))) for _ in range(count)]


def _test_strings() -> list[str]:
    """Every string literal of the rewriter's tests: the LLM outputs they were written for."""
    found: set[str] = set()
    for path in sorted(TESTS.glob("test_rewrite*.py")):
        if path.name == Path(__file__).name:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return sorted(found)


REAL = _test_strings()
SCORES = _shaped("score", 1, 3000) + _shaped("final", 6, 3000) + _mixed(2, 1000) + REAL
LABELS = _shaped("label", 3, 4000) + _mixed(4, 1000) + REAL
ENVS = _shaped("env", 5, 3000) + REAL


def _found(matches) -> list[tuple]:
    return [(m.span(), m.groupdict(), [m.span(g) for g in range(1, (m.re.groups or 0) + 1)]) for m in matches]


@contextmanager
def _old_patterns():
    """`curate.rewrite.validate` with its old patterns, to compare what its functions return."""
    new = {name: getattr(v, name) for name in OLD}
    try:
        for name, pattern in OLD.items():
            setattr(v, name, pattern)
        yield
    finally:
        for name, pattern in new.items():
            setattr(v, name, pattern)


def test_the_texts_exercise_the_patterns():
    assert len(REAL) > 100
    assert sum(bool(OLD_FINAL_SCORE.search(t)) for t in SCORES) > 500
    assert sum(bool(OLD_OTHER_SCORE.search(t)) for t in SCORES) > 500
    assert sum(bool(OLD["_QUESTION_LABEL"].search(t)) for t in LABELS) > 500
    assert sum(bool(OLD["_ANSWER_LABEL"].search(t)) for t in LABELS) > 300
    assert sum(bool(OLD_ENV_LINE.match(t)) for t in ENVS) > 100


@pytest.mark.parametrize("name", ["_FINAL_SCORE", "_OTHER_SCORE"])
def test_score_patterns_find_what_the_old_ones_found(name):
    for text in SCORES:
        assert _found(getattr(v, name).finditer(text)) == _found(OLD[name].finditer(text)), text


@pytest.mark.parametrize("name", ["_QUESTION_LABEL", "_ANSWER_LABEL", "_SHORT_ANSWER_LABEL"])
def test_label_patterns_find_what_the_old_ones_found(name):
    for text in LABELS:
        for start in (0, 1, len(text) // 2):
            assert _found(getattr(v, name).finditer(text, start)) == _found(
                OLD[name].finditer(text, start)
            ), text


def test_env_line_matches_what_the_old_one_matched():
    for text in ENVS + LABELS:
        assert bool(v._ENV_LINE.match(text)) == bool(OLD_ENV_LINE.match(text)), text


def test_functions_return_what_they_returned_on_the_old_patterns():
    texts = SCORES + LABELS + ENVS
    new = [(v.find_score(t), v.find_qa(t), v.is_degenerate(t)) for t in texts]
    with _old_patterns():
        old = [(v.find_score(t), v.find_qa(t), v.is_degenerate(t)) for t in texts]
    assert new == old


@pytest.mark.parametrize(
    "text",
    [
        "final score" + " " * RUN + "x",
        "Final score:" + " " * RUN + "**" + " " * RUN + "x",
        "Score:" + " " * RUN + "x",
        "I'd rate it" + " " * RUN + "x",
    ],
    ids=["final_score", "final_score_markup", "score", "rate"],
)
def test_find_score_is_linear_on_runs(text):
    assert _seconds(v.find_score, text) < 1


@pytest.mark.parametrize(
    "text",
    [
        "Question: x\n" + " " * RUN + "y",
        "## 1." + " " * RUN + "x",
        "Question: x\n**Solution" + " " * RUN + "x",
        "**Question" + " " * RUN + "x",
    ],
    ids=["blank_line", "heading_number", "bold_answer_label", "bold_label"],
)
def test_find_qa_is_linear_on_runs(text):
    assert _seconds(v.find_qa, text) < 1


@pytest.mark.parametrize("line", [" " * RUN + "x", "$$" + " " * RUN + "x", "\\begin{x}" + " " * RUN + "x"])
def test_is_degenerate_is_linear_on_runs(line):
    assert _seconds(v.is_degenerate, ("Some words here.\n" + line + "\n") * 2) < 1
