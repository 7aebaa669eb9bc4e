"""How a model's final answer is found in its output: `\\boxed{}`, `#### N`, "The answer is ...", "Answer: N", and
where a made-up next problem starts (`cut_at_next_problem`).

Split from `evals.grading` (which re-exports these names and whose docstring explains each rule): extraction is
half the grader, and the two halves change for different reasons. Any change here is a grader change (`GRADER`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# "the answer is", "the final answer is", "the correct/required answer is", "the answers are"; a display \\[...\\] or
# $$...$$ after it is read whole, across lines.
_ANSWER_IS = re.compile(
    r"(?:final\s+|\b(?:the|my|our)\s+(?:[a-z]+\s+)?)(?:answer\s+is|answers\s+are)\b[:\s]*"
    r"(\\\[[\s\S]*?\\\]|\$\$[\s\S]*?\$\$|.+?)(?:\.\s|\.$|\n|$)",
    re.IGNORECASE,
)
# "Final Answer: 18" (chat models' heading), read only where no "... answer is" is found: Minerva's format says
# "Final Answer: The final answer is $X$", whose answer is after the "is".
# `\s*+` and `\**+` are possessive: a blank given back by one can only be taken by the next (`:` is no blank, no
# star), so the same matches, without trying every split of a run of blanks (quadratic: "final answer" + 20,000 blanks).
_FINAL_ANSWER = re.compile(r"final answer\s*+\**+\s*+:[\s*]*(.+?)(?:\.\s|\.$|\n|$)", re.IGNORECASE)
# "**Final Answer**" or "## Final Answer" on a line of its own, the answer on the next ("**Final Answer**\n5")
_FINAL_HEADING = re.compile(r"final answer[ \t*#_]*\n\s*(.+?)(?:\.\s|\.$|\n|$)", re.IGNORECASE)
# "Answer: 18" at a line's start (read last, and only where it looks like an answer)
_ANSWER_LINE = re.compile(
    r"^[ \t*_]*answer[*_]*[ \t]*:[ \t*_]*(.+?)(?:\.\s|\.$|\n|$)", re.IGNORECASE | re.MULTILINE
)
# GSM8K's "#### 18"; not a markdown heading of 5 or more #, nor (see `_looks_like_answer`) "#### Step 1: ..."
_HASHES = re.compile(r"(?<!#)####(?!#)[ \t]*([^\n]+)")
# Words around the answer after "the answer is": "therefore 18", "18, since 16-3-4=9 ...", "18 because ..."
_LEADING_FILLER = re.compile(
    r"^(?:therefore|thus|hence|then|so|clearly|simply|just|indeed|actually|now|exactly)\b[,:]?\s*",
    re.IGNORECASE,
)
# `(?<!\s)`: a match starting inside a run of blanks implies one starting at the run's first blank (prepend the blank
# to the first `\s*`/`\s+`), which the leftmost search finds first, and `.*$` ends every match at the text's end: the
# same match, without retrying every blank of a run (20,000 blanks: 18 s).
_TRAILING_REASON = re.compile(
    r"(?<!\s)(?:\s*,\s*|\s+)(?:since|because|as|which|where|given|for)\b.*$", re.IGNORECASE
)
# "8 (5 + 3)": a number, then its working in parentheses
_NUMBER_THEN_PARENS = re.compile(r"^(\$?[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+)?\$?)\s+\([^()]*\)$")
# "5 m^2", "3 cm^3": a number, then a unit of length to a power (math-verify read "5 m^2" as 5*m^2). `\s*+\{?+\s*+`:
# a blank or brace given back could not be the exponent, so the same matches without trying each split of a run.
_NUMBER_THEN_AREA = re.compile(
    r"^([-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+))\s*(?:[kcdm]?m|ft|in|yd|mi)\s*\^\s*+\{?+\s*+[23]\s*\}?$"
)
# Where a made-up next problem starts: a header at a line's start after a blank line (or after the line giving the
# final answer): "Question 2:", "Problem 2.", "PROBLEM:", "## Question", "### Problem", "**Problem 3:**",
# "Example 2.", "Exercise 4", "Q:", "Q3.", "Subproblem 1" (OCW). Not "### Problem Analysis", "Problem solving ...",
# "Example: ...", "q: 7" (words a solution may start a paragraph with). Only after an answer was given: a header
# before the final answer is the solution's own ("Example 1: n = 1 gives 1." ... "so \boxed{5}").
# Possessive blanks, `#`s, digits and markup (`*+`, `?+`): what one gives back no later part can take before the header
# word (a letter) or the header's own `:`, `.`, `)`, digits or line end, so each line is read once, the same matches;
# the old pattern tried every split of a run of blanks (cubic after "Q"). `(?:\.\d++)*` still backtracks: "Problem 1.2x"
# is the header "Problem 1.".
_LINE_HEAD = r"[ \t]*+(?:#{1,6}+[ \t]*+)?+(?:\*\*|__)?+[ \t]*+"
_HEADER = (
    r"(?:sub-?problem[ \t]*+(?:\d+|(?=:))"
    r"|(?:problem|question)(?:[ \t]*+#?+\d++(?:\.\d++)*)?[ \t]*+(?:\*\*|__)?+[ \t]*+(?:[:.)]|$)"
    r"|(?:example|exercise)[ \t]*+#?+\d+"
    r"|(?-i:Q)[ \t]*+\d*+[ \t]*+(?:\*\*|__)?+[ \t]*+:"
    r"|(?-i:Q)[ \t]*+\d++[ \t]*+[.)])"
)
_NEXT_PROBLEM = re.compile(
    r"\n(?P<blank>(?:[ \t]*+\n)++)?+" + _LINE_HEAD + _HEADER, re.IGNORECASE | re.MULTILINE
)
# A header at a line's start: `_next_problems` looks for these, then for where `_NEXT_PROBLEM` starts before each
_HEADER_LINE = re.compile(r"(?<=\n)" + _LINE_HEAD + _HEADER, re.IGNORECASE | re.MULTILINE)
# A line that gives a final answer: a header right after it starts a new problem, even without a blank line
_ANSWER_GIVEN = re.compile(r"answers?\s+(?:is|are)\b|\\boxed|\\fbox|####|final answer", re.IGNORECASE)
# Minerva's closing words ("Final Answer: The final answer is $X$. I hope it is correct."): nothing after is answer
_MINERVA_END = re.compile(r"I hope it is correct\.?", re.IGNORECASE)
# "18 dollars", "$40 miles per hour", "1/2 cup": a number, then plain words (a unit). math-verify knows some units
# ("5 cm" parses as 5) but not others ("18 dollars" parsed as 18*d*o*l*l*a*r*s and was graded wrong).
# `(?:\s*+\$)?+\s++` for the `\s*\$?\s+` between number and words (which tried every split of a run of blanks): a
# run, a `$`, a run (or a run alone) before the first letter either way, and neither group holds those blanks.
_NUMBER_THEN_WORDS = re.compile(
    r"^\$?\s*([-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+)?)(?:\s*+\$)?+\s++([A-Za-z][A-Za-z'.\s/-]*)$"
)
_DOLLAR = re.compile(r"(?<!\\)\$")  # a math-mode $, not an escaped \$
_DISPLAY = re.compile(r"(?<!\\)\$\$")  # display math's $$
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")

# Words after a number that keep the answer whole: math, not a unit ("2 pi", "3 and 4", "5 or 6").
_MATH_WORDS = {"pi", "sqrt", "and", "or", "to", "times", "plus", "minus", "over", "divided"}
# Words that change the number's value: cutting them graded "2 million", "#### 3 thousand", "2 thirds" or
# "5 factorial" right against a gold 2, 3, 2 or 5. Kept whole, such an answer is graded as written (math-verify
# reads "50 percent" as 50%; `_scaled` turns "2 million" into 2000000). "second" is left out: "2 seconds" is a unit
# far more often than 2/2.
_SCALES = {"dozen": 12, "hundred": 100, "thousand": 10**3, "lakh": 10**5, "million": 10**6, "crore": 10**7}
_SCALES |= {"billion": 10**9, "trillion": 10**12, "quadrillion": 10**15}
_ORDINALS = (
    "third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth hundredth thousandth millionth"
)
_VALUE_WORDS = {
    *_SCALES,
    *(f"{word}s" for word in _SCALES),
    *_ORDINALS.split(),
    *(f"{word}s" for word in _ORDINALS.split()),
    "half",
    "halves",
    "quarter",
    "quarters",
    "percent",
    "percentage",
    "percents",
    "factorial",
    "squared",
    "cubed",
}
_KEEP_WHOLE = _MATH_WORDS | _VALUE_WORDS
# Function names written without a backslash in a box ("2 sin x", "3 log n"): math, not a unit.
_FUNCTION_NAMES = set(
    "sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln lg exp lim max min mod gcd lcm det".split()
)
# Names that may start an answer after `####` or "Answer:" (others start a heading or a sentence: "Step 1: ...")
_MATH_NAMES = {"pi", "sqrt", "infinity", "inf", "infty"}


def _drop_unit(answer: str, boxed: bool = False) -> str:
    """The number of NUMBER UNIT WORDS ("18 dollars" -> "18", "90 degrees" -> "90"); any other answer, and a number
    followed by a word that changes its value ("2 million", "4 dozen", "2 thirds", "5 per cent"), as it is.

    `boxed`: the answer is a box's content, which is math: a short word there is a variable ("2 xy") and a function
    name is math ("2 sin x"); only words of 3 letters or more that name no function are cut ("18 dollars")."""
    if not boxed and (area := _NUMBER_THEN_AREA.match(answer)):
        return area.group(1)
    match = _NUMBER_THEN_WORDS.match(answer)
    if match is None:
        return answer
    words = [word.strip(".").lower() for word in match.group(2).split()]
    first = words[0]
    if len(first) < 2 or first in _KEEP_WHOLE or words[:2] == ["per", "cent"]:
        return answer
    if boxed and any(len(word) < 3 or word in _FUNCTION_NAMES for word in words):
        return answer
    return match.group(1)


def _strip_markup(answer: str) -> str:
    """Markdown bold and the `$` of one math span or of a currency amount around an answer ("**18**", "$18$", "$18");
    an answer of several spans ("$69$, $84$") keeps them, since math-verify reads each (cutting the outer two left
    "69$, $84", graded wrong)."""
    answer = _DISPLAY.sub("$", answer.strip().strip("*").strip())  # "$$18.$$" is one span, as "$18.$"
    for left, right in (("\\[", "\\]"), ("\\(", "\\)")):  # \[\frac12\] and \(18\) are one span too
        if answer.startswith(left) and answer.endswith(right):
            return answer[2:-2].strip()
    dollars = len(_DOLLAR.findall(answer))
    if dollars == 2 and answer.startswith("$") and answer.endswith("$"):
        return answer[1:-1].strip()
    if dollars == 1 and answer.startswith("$"):
        return answer[1:].strip()
    return answer


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (or `\\fbox{...}`) with balanced braces, None if there is none."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        # `\boxed 5` (no braces) is legal LaTeX for a single token.
        match = re.match(r"\\boxed\s+([^\s$]+)", text[start:])
        return match.group(1) if match else None
    end = _closing_brace(text, i)
    return None if end is None else text[i + 1 : end].strip()


def _closing_brace(text: str, i: int) -> int | None:
    """Index of the `}` that closes the `{` at TEXT[i] (balanced braces), None where it is never closed."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return None


def _boxes(text: str) -> list[tuple[int, int, str]]:
    """Every `\\boxed{...}` / `\\fbox{...}` (balanced braces) or `\\boxed 5`: (start, end, content), in order."""
    found: list[tuple[int, int, str]] = []
    for match in re.finditer(r"\\(?:boxed|fbox)", text):
        i, start = match.end(), match.start()
        if found and start < found[-1][1]:  # a box inside a box: the outer one holds it
            continue
        rest = text[i:]
        if not rest.lstrip().startswith("{"):
            bare = re.match(r"\s+([^\s$]+)", rest)
            if bare and match.group(0) == "\\boxed":
                found.append((start, i + bare.end(), bare.group(1)))
            continue
        i = text.index("{", i)
        end = _closing_brace(text, i)
        if end is not None:
            found.append((start, end + 1, text[i + 1 : end].strip()))
    return found


def _boxed_answer(text: str) -> str | None:
    """The last box's content, a plain-word unit cut (`_drop_unit` in a box); None where there is no box."""
    boxed = last_boxed(text)
    return _drop_unit(boxed, boxed=True) if boxed else None


def _final_boxes(text: str) -> str | None:
    """For a gold of several answers: the boxes of the output's last paragraph (the last box and those before it
    with no blank line between), joined by commas (`\\boxed{2} and \\boxed{5}` -> `2, 5`); the last box alone where
    it holds a list itself. None where there is no box."""
    boxes = [box for box in _boxes(text) if box[2]]
    if not boxes:
        return None
    last = boxes[-1]
    if len(split_list(last[2])) > 1:
        return _drop_unit(last[2], boxed=True)
    chosen = [last]
    for box in reversed(boxes[:-1]):
        if re.search(r"\n[ \t]*\n", text[box[1] : chosen[0][0]]):
            break
        chosen.insert(0, box)
    contents = list(dict.fromkeys(_drop_unit(box[2], boxed=True) for box in chosen))
    return ", ".join(contents)


def split_list(answer: str) -> list[str]:
    """ANSWER split at its commas outside brackets and braces (`1,-2` -> 2 parts, `(1,2)` and `[0, 4)` one); a
    number with thousands separators (`15,000`, `\\$15,\\!000`) is one part."""
    bare = answer.replace("\\!", "").replace("\\$", "").replace("$", "").replace(" ", "")
    if _THOUSANDS.match(bare):
        return [answer]
    parts, depth, start = [], 0, 0
    for i, char in enumerate(answer):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(answer[start:i])
            start = i + 1
    return [*parts, answer[start:]]


def _looks_like_answer(answer: str) -> bool:
    """Whether text after `####` or `Answer:` is an answer, not a markdown heading or a sentence: it does not start
    with a word of 2 letters or more ("Step 1: ...", "Tom has ..."), unless a math name ("sqrt 2", "pi")."""
    word = re.match(r"[A-Za-z]{2,}\b", answer)
    return bool(answer) and (word is None or word.group(0).lower() in _FUNCTION_NAMES | _MATH_NAMES)


def _said_answer(said: str) -> str:
    """The answer in the words after "the answer is": markup, leading filler ("therefore"), a trailing reason
    (", since ..."), a number's working in parentheses ("8 (5 + 3)") and a unit cut."""
    said = _TRAILING_REASON.sub("", _LEADING_FILLER.sub("", said.strip().strip("*").strip()))
    said = _strip_markup(said)
    if match := _NUMBER_THEN_PARENS.match(said):
        said = match.group(1)
    return _drop_unit(_strip_markup(said).rstrip("."))


def extract_answer(text: str, several: bool = False) -> tuple[str | None, str]:
    """The model's final answer and how it was found: ("...", "boxed" | "hashes" | "answer_is") or (None, "none").

    SEVERAL: the gold holds several answers (`split_list`): the boxes of the last paragraph are read together."""
    boxed = _final_boxes(text) if several else _boxed_answer(text)
    if boxed:
        return boxed, "boxed"
    hashes = [h for h in _HASHES.findall(text) if _looks_like_answer(_strip_markup(h))]
    if hashes:
        return _drop_unit(_strip_markup(hashes[-1]).rstrip(".")), "hashes"
    said = _ANSWER_IS.findall(text) or _FINAL_ANSWER.findall(text)
    if said:
        return _said_answer(said[-1]), "answer_is"
    said = [
        a
        for a in _FINAL_HEADING.findall(text) + _ANSWER_LINE.findall(text)
        if _looks_like_answer(_strip_markup(a))
    ]
    if said:
        return _said_answer(said[-1]), "answer_is"
    return None, "none"


def gold_answer_from_solution(solution: str) -> str | None:
    """The reference answer inside a worked solution (MATH: last \\boxed{}; GSM8K: after ####)."""
    answer, _ = extract_answer(solution)
    return answer


def cut_at_next_problem(text: str) -> str:
    """TEXT up to where a made-up next problem starts (`_NEXT_PROBLEM`: a header such as "Question 2:", "Q:",
    "## Problem" or OCW's "Subproblem 1:" at a line's start after a blank line, or right after the line that gave
    the final answer) or up to Minerva's closing "I hope it is correct."; TEXT itself where neither is found."""
    end = _MINERVA_END.search(text)
    end_at = end.end() if end else len(text)
    # "Answered before the header" is "the text's first answer ends by the header's start": a header starts at a
    # newline, which, like the end of a cut text, is no word character, so `search(text, 0, start)` finds a match
    # exactly where the whole text has one ending by `start`; and no match ends before the first one does (its
    # alternatives open with different characters and a match inside another ends after it). Searching from 0 for
    # each header was quadratic in the headers (20,000 "Problem 1." lines: 54 s).
    first = _ANSWER_GIVEN.search(text)
    if first is None:
        return text[:end_at]
    for match in _next_problems(text, end_at):
        if first.end() > match.start():
            continue  # nothing answered yet: the header is the solution's own
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        if match.group("blank") is not None or _ANSWER_GIVEN.search(line):
            return text[: match.start()]
    return text[:end_at]


def _next_problems(text: str, end_at: int) -> Iterator[re.Match[str]]:
    """The matches of `_NEXT_PROBLEM.finditer(text, 0, end_at)`, in linear time.

    A match starts at a newline and takes every blank line after it (`blank`), then a header line; finditer would
    start one at each newline of a run of blank lines and read the rest of the run each time (20,000 newlines:
    42 s). So: each header line in order (`_HEADER_LINE`), then the first newline at or after the last match's end
    with only blank lines between it and the header line: the leftmost start, where `_NEXT_PROBLEM` is matched once.
    Each header line ends the blank lines walked back over for the next, so each is read once."""
    pos = 0
    for header in _HEADER_LINE.finditer(text, 0, end_at):
        start = header.start() - 1  # the newline before the header line
        if start < pos:
            continue
        while start > pos:
            prev = text.rfind("\n", pos, start)
            if prev < 0 or text[prev + 1 : start].strip(" \t"):
                break
            start = prev
        match = _NEXT_PROBLEM.match(text, start, end_at)
        if match is not None:  # always: the header line is there, the lines before it blank
            yield match
            pos = match.end()


def truncate_at_stops(text: str, stops: list[str]) -> str:
    """Cut a continuation at the first stop sequence (the few-shot separator before a made-up next problem)."""
    cut = len(text)
    for stop in stops:
        at = text.find(stop)
        if at >= 0:
            cut = min(cut, at)
    return text[:cut]
