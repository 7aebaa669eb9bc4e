"""Checks on LLM outputs: pure functions, each answering one question about a text.

The task specs (`curate.rewrite.tasks`) chain them and name the rejection reason; keeping them free of any
pipeline machinery lets the tests feed them hand-written outputs directly.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_WORD = re.compile(r"\w+", re.UNICODE)
_SPACES = re.compile(r"\s+")
# Blank quantifiers are possessive (`*+`, `++`) here and in `_value`, `_MARKUP`, `_label`: the greedy regexes tried
# every split of a run of blanks between two of them (a line of 20,000 blanks: 5-7 s; "final score" then 30 blanks:
# 9 s, one more blank doubling it). A blank given back could only be taken by a later blank quantifier, with the
# optional parts between matching empty; taking it in the earlier one is a path the greedy regex tried first, so its
# first match already took every blank: the same matches, groups included (the differential tests check this).
_ENV_LINE = re.compile(
    r"^\s*+(?:\$\$|\\\[|\\\])?\s*+\\(?:begin|end)\{[a-zA-Z*]+\}\s*+(?:\$\$|\\\[|\\\])?\s*+$"
)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _value(tag: str = "") -> str:
    """A score as models write it: `3`, `**3**`, `<3>`, `$\\boxed{3}$`, `three`, with an optional `/5` or `out of
    5` (another denominator, `4/10`, is not this scale's: no score). TAG names its groups apart."""
    return (
        r"(?:\*\*|__)?[ \t]*+\$?[ \t]*+(?:\\boxed\{|<)?[ \t]*+"
        rf"(?P<n{tag}>-?\d+(?:\.\d+)?|zero|one|two|three|four|five)\b[ \t]*"
        rf"(?:\}}|>)?[ \t]*\$?(?:[ \t]*(?:/|out[ \t]+of)[ \t]*(?P<d{tag}>\d+))?"
    )


_MARKUP = r"[ \t]*+(?:\*\*|__)?[ \t]*+"
# "Final score: 4", "**Final score:** 4/5", "Final Score = 3", "The final score is 3", "Final score (out of 5): 3",
# "Final score - 3". Explicit only with a separator or at the start of a line: "(it could reach a final score 5)"
# is not a statement.
_FINAL_SCORE = re.compile(
    r"final[ \t]+score(?:[ \t]*\((?:out[ \t]+of|/)[ \t]*5\))?" + _MARKUP
    + r"(?P<sep>:|=|-|–|—|\bis\b|\bof\b)?" + _MARKUP + r"\s*+" + _value(),
    re.I,
)  # fmt: skip
# Other score statements, taken when there is no final one (the last wins): "Score: 3/5", "**Score**: 3",
# "Total score: 3", "Total: 3 points", "I'd rate this 3 out of 5".
_OTHER_SCORE = re.compile(
    r"(?:\b(?:total[ \t]+|overall[ \t]+)?score|\btotal(?:[ \t]+points)?)" + _MARKUP + r"(?::|=|\bis\b)" + _MARKUP
    + r"\s*+" + _value()
    + r"|\brat(?:e|es|ed|ing)[ \t]++(?:it|this|the[ \t]++\w+)?[ \t]*+(?:as[ \t]++|at[ \t]++|an?[ \t]++)?"
    + _value("2"),
    re.I,
)  # fmt: skip
_NUMBER_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_LINE_OPENING = re.compile(r"[\s*#>\-•]*")


# A label as models write it, at the start of a line: `Question:`, `**Question**:`, `**Question:**`, `## Question:`,
# `1. Question:`, `Question 1:`; `Problem:` / `Q:` for a question, `Solution:` / `Answer:` / (after `Q:` only) `A:`
# for its answer; or a heading alone on its line, `### Question` / `**Problem**`, the text on the lines below. Stars
# after the colon are the label's only when it opened with stars: `Question: **Bob** has...` keeps Bob's. Searched
# for, not anchored at the start: a preamble ("Here is a question from the page:") or a fence before it made the
# row `wrong_format`. `A:` answers only `Q:`: after `Problem:` it is a multiple-choice option ("A: 3 / B: 4").
def _label(names: str, seps: str) -> re.Pattern[str]:
    return re.compile(
        r"^[ \t]*+(?P<h>#{1,6}[ \t]*+)?(?:\d{1,2}[.)][ \t]*+)?(?P<o>\*\*)?[ \t]*+"
        rf"(?P<name>{names})(?:[ \t]++\d{{1,2}})?(?:[ \t]*+\*\*)?[ \t]*+"
        rf"(?:[{seps}](?(o)(?:\*\*)?)|(?(h)(?=[ \t]*$)|(?(o)(?=[ \t]*$)|(?!))))",
        re.I | re.M,
    )


_QUESTION_LABEL = _label("question|problem|q", ":.")
_ANSWER_LABEL = _label("solution|answer", ":.")
_SHORT_ANSWER_LABEL = _label("solution|answer|a", ":")
_GSM8K_ANSWER = re.compile(r"####\s*(.+?)\s*$")


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (braces balanced), or None when there is none or it never closes."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    for start in reversed(starts):
        depth, i = 1, start
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            content = text[start : i - 1].strip()
            if content:
                return content
    return None


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def duplicate_ngram_fraction(text: str, n: int = 4) -> float:
    """Fraction of word n-grams that repeat an earlier one (0: all distinct, near 1: one phrase looped)."""
    toks = words(text)
    grams = [tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)]
    if not grams:
        return 0.0
    counts = Counter(grams)
    return sum(c - 1 for c in counts.values()) / len(grams)


def is_degenerate(text: str, max_dup_fraction: float = 0.5, min_words: int = 30) -> bool:
    """True for looping output: most word 4-grams repeat, or one line makes up over half of the lines (lines
    of delimiters only, as `$$`, not counted)."""
    if len(words(text)) >= min_words and duplicate_ngram_fraction(text) > max_dup_fraction:
        return True
    # Lines with no word character (`$$`, `\\]`, `---`) and environment delimiters (`\\begin{aligned}`) repeat in any
    # text with displayed equations: five `$$ ... $$` blocks made 10 of 19 lines one line, a loop.
    lines = [ln.strip() for ln in text.splitlines() if _WORD.search(ln) and not _ENV_LINE.match(ln)]
    if len(lines) >= 8:
        top = Counter(lines).most_common(1)[0][1]
        return top / len(lines) > 0.5
    return False


def normalized(text: str) -> str:
    return _SPACES.sub(" ", text).strip().lower()


def is_copy(output: str, source: str, threshold: float = 0.9) -> bool:
    """True when the output is (nearly) the input: same normalized text, or Jaccard of word 3-grams >= threshold."""
    if normalized(output) == normalized(source):
        return True
    a, b = words(output), words(source)
    ga = {tuple(a[i : i + 3]) for i in range(len(a) - 2)}
    gb = {tuple(b[i : i + 3]) for i in range(len(b) - 2)}
    if not ga or not gb:
        return False
    return len(ga & gb) / len(ga | gb) >= threshold


def find_score(text: str, scale: int = 5) -> tuple[int | None, int] | None:
    """(score, where its statement starts) in a model's answer (its reasoning left out), or None without any.

    The first explicit final-score statement wins ("Final score: 3 ... (with worked examples it could reach a
    final score of 5)" is 3); without one, the last other statement ("Score: 3/5", "Total: 3 points", "I'd
    rate this 3 out of 5"). The score is None where that statement's value is not an integer 0-`scale` or
    has another denominator ("Final score: 4/10")."""
    chosen = None
    for m in _FINAL_SCORE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        at_line_start = _LINE_OPENING.fullmatch(text[line_start : m.start()]) is not None
        if (m.group("sep") and m.group("sep").lower() != "of") or at_line_start:
            chosen = m
            break
    if chosen is None:
        others = list(_OTHER_SCORE.finditer(text))
        if not others:
            return None
        chosen = others[-1]
    groups = {k: val for k, val in chosen.groupdict().items() if val is not None}
    number = next(val for k, val in groups.items() if k.startswith("n"))
    denominator = next((val for k, val in groups.items() if k.startswith("d")), None)
    value = float(_NUMBER_WORDS.get(number.lower(), number))
    if denominator is not None and int(denominator) != scale:
        return None, chosen.start()
    if not value.is_integer() or not 0 <= value <= scale:
        return None, chosen.start()
    return int(value), chosen.start()


def parse_score(text: str) -> int | None:
    """The 0-5 score of a model's answer (`find_score`; None when absent, out of range or not on this scale)."""
    found = find_score(text)
    return found[0] if found else None


def score_justification(text: str, start: int) -> str:
    """What a score answer says before its score statement at `start`: up to the statement's line or, on that
    line, its sentence ("... in parts. Overall I'd rate this 3 out of 5." keeps "... in parts.")."""
    line_start = text.rfind("\n", 0, start) + 1
    cut = line_start
    for m in re.finditer(r"[.!?](?=\s)", text[line_start:start]):
        cut = line_start + m.end()
    return text[:cut].strip().rstrip("*#_-(").strip()


@dataclass
class QAParse:
    """A `qa` output read: its first question and solution, and what around them was left out of the row."""

    question: str
    solution: str
    preamble: bool  # text before the first question label
    extra_pairs: bool  # a second `Question:` after the first solution: the solution ends before it


def _question_labels(text: str, start: int = 0) -> list[re.Match[str]]:
    """Question labels from `start`; `Q.` is not one (`Q:` only), nor `Question` alone on a line without markup."""
    found = []
    for m in _QUESTION_LABEL.finditer(text, start):
        if m.group("name").lower() == "q" and not m.group(0).rstrip("* \t").endswith(":"):
            continue
        found.append(m)
    return found


def find_qa(text: str) -> QAParse | None:
    """The first question/solution pair of a text (labels as `_label` reads them), or None when the format is not
    there, or when a second question label of the first one's name comes before the first answer (which question
    the solution answers is not known: `Question: A / Question: B / Solution: ...` kept A and B as one question);
    a label of another name there (the page's own `Problem:` line under `Question:`) is part of the question.

    Two pairs in one output (`Question: A / Solution: ... / Question: B / Solution: ...`) kept B's question in A's
    solution, and B's boxed answer as the row's: the solution is cut at the next question label of the same name
    (`Question` / `Problem` / `Q`), so that a solution's own line "Problem: ..." under `Question:` stays.
    """
    text = text.strip()
    labels = _question_labels(text)
    # A heading with the label written again below it (`## Question` then `Question: ...`) is one label.
    while len(labels) > 1 and not text[labels[0].end() : labels[1].start()].strip():
        labels.pop(0)
    if not labels:
        return None
    first = labels[0]
    name = first.group("name").lower()
    answer_label = _SHORT_ANSWER_LABEL if name == "q" else _ANSWER_LABEL
    # the answer label is on a later line than the question's first words
    rest = text[first.end() :]
    line_end = text.find("\n", first.end() + len(rest) - len(rest.lstrip()))
    ans = answer_label.search(text, line_end + 1) if line_end >= 0 else None
    if ans is None:
        return None
    if any(m.start() < ans.start() and m.group("name").lower() == name for m in labels[1:]):
        return None  # two questions before one answer (a `Problem:` line under `Question:` is the question's)
    question, solution = text[first.end() : ans.start()].strip(), text[ans.end() :].strip()
    nxt = next((m for m in _question_labels(solution) if m.group("name").lower() == name), None)
    if nxt:
        solution = solution[: nxt.start()].strip()
    if not question or not solution:
        return None
    return QAParse(question, solution, preamble=bool(text[: first.start()].strip()), extra_pairs=bool(nxt))


def parse_qa(text: str) -> tuple[str, str] | None:
    """(question, solution) of the first question/solution pair, or None (see `find_qa`)."""
    parsed = find_qa(text)
    return (parsed.question, parsed.solution) if parsed else None


def reference_answer(metadata: dict) -> str | None:
    """A reference answer carried by the input document (MATH `answer`, GSM8K `#### N`, OlympiadBench), if any."""
    for key in ("answer", "final_answer", "reference_answer"):
        value = metadata.get(key)
        if isinstance(value, list):
            value = value[0] if value else None
        if value is None or str(value).strip() == "":
            continue
        value = str(value)
        gsm = _GSM8K_ANSWER.search(value)
        if gsm:
            return gsm.group(1).replace(",", "")
        return last_boxed(value) or value.strip()
    solution = metadata.get("solution")
    if isinstance(solution, str):
        return last_boxed(solution)
    return None


@lru_cache(maxsize=4096)
def _parsed(answer: str):
    from math_verify import parse

    wrapped = answer if "\\boxed" in answer or "$" in answer else f"${answer}$"
    return parse(wrapped)


def answers_match(predicted: str, reference: str) -> bool:
    """math-verify equivalence of two final answers (falls back to normalized string equality)."""
    if normalized(predicted) == normalized(reference):
        return True
    try:
        from math_verify import verify

        gold, pred = _parsed(reference), _parsed(predicted)
        return bool(gold and pred and verify(gold, pred))
    except Exception:  # math-verify raises on some malformed LaTeX: treat as no match, never crash
        return False


class LanguageCheck:
    """Is a text's prose in one of `languages`? (lid.176 on the text with formulas removed, loaded lazily)."""

    def __init__(self, languages: tuple[str, ...] = ("en",), threshold: float = 0.5):
        self.languages = tuple(languages)
        self.threshold = threshold
        self._lid: Any = None

    def ok(self, text: str) -> bool:
        if not self.languages:
            return True
        if self._lid is None:
            from curate.lid import LidModel

            self._lid = LidModel()
        lang, score = self._lid.predict(text)
        if lang == "und":  # nothing but formulas: no prose to judge
            return True
        return lang in self.languages and score >= self.threshold
