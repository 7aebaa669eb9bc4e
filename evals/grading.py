"""Answer extraction (`\\boxed{}`, `#### N`, "The answer is ...") and grading with math-verify.

The extracted string, not the whole output, is handed to math-verify: a base model's few-shot continuation often
runs on into a made-up next problem, and math-verify would happily grade a number from there.

Both answers are tidied before math-verify sees them, each step for a form found in real gold answers or in what
models write for a correct one (checked against every gold answer of the benchmark sets):
- an escaped `\\$` (MATH's `\\$15,\\!000`, a model's `\\boxed{\\$18}`) is a dollar sign, not math mode: such an answer
  was handed to math-verify unwrapped, parsed to nothing and graded wrong against everything but itself;
- `4.5e33` (OCW's golds) is 4.5 times 10^33: math-verify reads it as 4.5*e*33, so `4.5 \\times 10^{33}` was wrong;
  two numbers written so are compared here, to a relative 1e-6 (`_power_of_ten_match`);
- `\\frac\\pi 2` (MATH) is `\\frac{\\pi}{2}`: math-verify read the whole gold `2007 + \\frac\\pi 2` as 2;
- "27 thousand", "2 million", "4 dozen" are the number they name (27000, 2000000, 48), not a product of letters;
- a gold's trailing period or line break (MATH's `-\\frac{5}{3}.`, OCW) is dropped: it made the gold unparsable;
- a percent sign on one side only is dropped on a retry, as math-verify itself does for whole numbers (9\\% = 9) but
  not for decimals: "62.5" was wrong for a gold `62.5\\%`, "12.5\\%" for OCW's gold 12.5 (asked for in percent);
  the model's sign is dropped only against a gold of 1 or more (a percentage): "0.25\\%" for a probability 0.25 is
  100 times off;
- `$$...$$` (display math) is one math span, as `$...$` is; a unit is cut from a box only where its words are plainly
  words (3 letters or more, no function name): "2 xy" and "2 sin x" are math;
- OCW's three golds written in Python (`-1./3`, `-3./2`, `np.arcsin(10/13)`) are read as LaTeX (`-1/3`,
  `\\arcsin(10/13)`): math-verify read `-1./3` as -1;
- a gold whose `$` are unbalanced in one list element (OlympiadBench's `$221,$8$`, read as 221) has that element
  wrapped again (`$221$,$8$`);
- a gold `NAME = VALUE` (OlympiadBench's `m_{\\max }=n^{2}-n-1`, which math-verify cannot parse) also takes VALUE,
  as math-verify itself does for `x=5`;
- OlympiadBench's `error` field (an absolute tolerance for a numerical answer) is honoured (`grade(tolerance=)`).

Before extraction (`grade`), an output is cut where a made-up next problem starts (`cut_at_next_problem`): a base
model's continuation runs on past the few-shot separator under headers that are not exactly `Problem:` or
`Question:` (the generation stop strings): "Question 2:", "Q:", "## Problem", "Subproblem 1:" (OCW), and the last
answer of the made-up problem was graded. Against a gold with several answers (`2, 5`), the boxes of the output's
last paragraph are read together (`\\boxed{2} and \\boxed{5}`); against any other gold, the last box alone.
"""

from __future__ import annotations

import re
import threading
from decimal import Decimal

# "the answer is", "the final answer is", "the correct/required answer is", "the answers are"; a display \\[...\\] or
# $$...$$ after it is read whole, across lines.
_ANSWER_IS = re.compile(
    r"(?:final\s+|\b(?:the|my|our)\s+(?:[a-z]+\s+)?)(?:answer\s+is|answers\s+are)\b[:\s]*"
    r"(\\\[[\s\S]*?\\\]|\$\$[\s\S]*?\$\$|.+?)(?:\.\s|\.$|\n|$)",
    re.IGNORECASE,
)
# "Final Answer: 18" (chat models' heading), read only where no "... answer is" is found: Minerva's format says
# "Final Answer: The final answer is $X$", whose answer is after the "is".
_FINAL_ANSWER = re.compile(r"final answer\s*\**\s*:[\s*]*(.+?)(?:\.\s|\.$|\n|$)", re.IGNORECASE)
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
_TRAILING_REASON = re.compile(
    r"(?:\s*,\s*|\s+)(?:since|because|as|which|where|given|for)\b.*$", re.IGNORECASE
)
# "8 (5 + 3)": a number, then its working in parentheses
_NUMBER_THEN_PARENS = re.compile(r"^(\$?[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+)?\$?)\s+\([^()]*\)$")
# "5 m^2", "3 cm^3": a number, then a unit of length to a power (math-verify read "5 m^2" as 5*m^2)
_NUMBER_THEN_AREA = re.compile(
    r"^([-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+))\s*(?:[kcdm]?m|ft|in|yd|mi)\s*\^\s*\{?\s*[23]\s*\}?$"
)
# Where a made-up next problem starts: a header at a line's start after a blank line (or after the line giving the
# final answer): "Question 2:", "Problem 2.", "PROBLEM:", "## Question", "### Problem", "**Problem 3:**",
# "Example 2.", "Exercise 4", "Q:", "Q3.", "Subproblem 1" (OCW). Not "### Problem Analysis", "Problem solving ...",
# "Example: ...", "q: 7" (words a solution may start a paragraph with). Only after an answer was given: a header
# before the final answer is the solution's own ("Example 1: n = 1 gives 1." ... "so \boxed{5}").
_NEXT_PROBLEM = re.compile(
    r"\n(?P<blank>(?:[ \t]*\n)+)?[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?[ \t]*"
    r"(?:sub-?problem[ \t]*(?:\d+|(?=:))"
    r"|(?:problem|question)(?:[ \t]*#?\d+(?:\.\d+)*)?[ \t]*(?:\*\*|__)?[ \t]*(?:[:.)]|$)"
    r"|(?:example|exercise)[ \t]*#?\d+"
    r"|(?-i:Q)[ \t]*\d*[ \t]*(?:\*\*|__)?[ \t]*:"
    r"|(?-i:Q)[ \t]*\d+[ \t]*[.)])",
    re.IGNORECASE | re.MULTILINE,
)
# A line that gives a final answer: a header right after it starts a new problem, even without a blank line
_ANSWER_GIVEN = re.compile(r"answers?\s+(?:is|are)\b|\\boxed|\\fbox|####|final answer", re.IGNORECASE)
# Minerva's closing words ("Final Answer: The final answer is $X$. I hope it is correct."): nothing after is answer
_MINERVA_END = re.compile(r"I hope it is correct\.?", re.IGNORECASE)
# "18 dollars", "$40 miles per hour", "1/2 cup": a number, then plain words (a unit). math-verify knows some units
# ("5 cm" parses as 5) but not others ("18 dollars" parsed as 18*d*o*l*l*a*r*s and was graded wrong).
_NUMBER_THEN_WORDS = re.compile(
    r"^\$?\s*([-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+)?)\s*\$?\s+([A-Za-z][A-Za-z'.\s/-]*)$"
)
# The grader's version, recorded in each benchmark's results JSON: `eval bench` regrades kept results of another.
# 2: a number's unit is cut ("18 dollars" -> 18) but not a word that changes its value ("2 million").
# 3: the tidying in the module docstring; "**18**", "$69$, $84$" after "the answer is", units in \boxed{18 dollars}.
# 4: a made-up next problem under any header is cut before extraction; several boxes against a list gold; OCW's
#    Python golds, OlympiadBench's unbalanced `$`, `NAME = VALUE` golds and `error` tolerance; "the correct answer
#    is", "Answer: 18", "**Final Answer**\n5", "18, since ...", "therefore 18", "8 (5 + 3)", "5 m^2", \\[...\\];
#    "#### Step 1: ..." (a markdown heading) is no answer.
# 5: a header is taken for a made-up next problem only after an answer was given (4 cut solutions with their own
#    "Example 1:" or "Question:" paragraph before the box); Subproblem needs its number or a colon, Q: its capital.
GRADER = "mathmix-grading/5"
_DOLLAR = re.compile(r"(?<!\\)\$")  # a math-mode $, not an escaped \$
_DISPLAY = re.compile(r"(?<!\\)\$\$")  # display math's $$
_SCIENTIFIC = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*[eE]\s*([-+]?\d+)$")
_TIMES_TEN_TO = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*(?:\\times|\\cdot)\s*10\s*\^\s*\{?\s*([-+]?\d+)\s*\}?$")
_DECIMAL = re.compile(r"^[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?$")  # 6630, 6,630, 0.25
# \frac with a command for numerator and no braces: \frac\pi 2, \frac \pi4, \frac\pi{2} (not \frac\pi\sqrt{2})
_FRAC_COMMAND = re.compile(
    r"\\([dtc]?frac)\s*(\\[A-Za-z]+)\s*([A-Za-z0-9]|\{[^{}]*\}|\\[A-Za-z]+(?![A-Za-z{]))"
)
_SCALED = re.compile(r"^([-+]?\d[\d,]*(?:\.\d+)?)\s+([A-Za-z]+?)s?$")
# OCW's golds written in Python: `-1./3` (a float literal before a division), `np.arcsin(10/13)`
_PY_FLOAT_DIVIDED = re.compile(r"(\d)\./")
_PY_NUMPY = re.compile(r"\bnp\.(?=[A-Za-z])")
# `NAME = VALUE` with NAME a letter or Greek letter, a subscript and a prime allowed: m_{\max }, a_1, x', \theta
_NAMED_VALUE = re.compile(
    r"^(?:[A-Za-z]|\\[A-Za-z]+)\s*(?:_\s*(?:\{(?:[^{}]|\{[^{}]*\})*\}|[A-Za-z0-9]))?\s*(?:'|\^\s*\{?\s*\\prime\s*\}?)?"
    r"\s*=(?!=)\s*([^=]+)$"
)
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_PERCENT = re.compile(r"\s*\\?%$")

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
    for match in _NEXT_PROBLEM.finditer(text, 0, end_at):
        if not _ANSWER_GIVEN.search(text, 0, match.start()):
            continue  # nothing answered yet: the header is the solution's own
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        if match.group("blank") is not None or _ANSWER_GIVEN.search(line):
            return text[: match.start()]
    return text[:end_at]


def truncate_at_stops(text: str, stops: list[str]) -> str:
    """Cut a continuation at the first stop sequence (the few-shot separator before a made-up next problem)."""
    cut = len(text)
    for stop in stops:
        at = text.find(stop)
        if at >= 0:
            cut = min(cut, at)
    return text[:cut]


def _wrap(answer: str) -> str:
    return answer if _DOLLAR.search(answer) or "\\boxed" in answer else f"${answer}$"


def _frac_braces(match: re.Match) -> str:
    denominator = match.group(3)
    return f"\\{match.group(1)}{{{match.group(2)}}}" + (
        denominator if denominator[0] == "{" else f"{{{denominator}}}"
    )


def _scaled(answer: str) -> str:
    """ "27 thousand" -> "27000", "4 dozen" -> "48"; any other answer as it is."""
    match = _SCALED.match(answer)
    if match is None or match.group(2).lower() not in _SCALES:
        return answer
    value = Decimal(match.group(1).replace(",", "")) * _SCALES[match.group(2).lower()]
    return format(value.normalize(), "f")


def _power_of_ten_match(predicted: str, gold: str) -> bool | None:
    """Whether two numbers, one of them written `M \\times 10^{E}`, agree to a relative 1e-6; None where either is not
    such a number. math-verify rounds a decimal to 6 places, so any two below 5e-7 (2.88e-19 and 2.88e-18) agreed."""
    if not (_TIMES_TEN_TO.match(predicted) or _TIMES_TEN_TO.match(gold)):
        return None
    values = []
    for answer in (predicted, gold):
        if match := _TIMES_TEN_TO.match(answer):
            values.append(Decimal(match.group(1)).scaleb(int(match.group(2))))
        elif _DECIMAL.match(answer):
            values.append(Decimal(answer.replace(",", "")))
        else:
            return None
    return abs(values[0] - values[1]) <= Decimal("1e-6") * max(abs(values[0]), abs(values[1]))


def _at_least_one(answer: str) -> bool:
    """Whether ANSWER is a plain number of size 1 or more (a percentage, not a probability or fraction)."""
    return bool(_DECIMAL.match(answer)) and abs(Decimal(answer.replace(",", ""))) >= 1


def _balance_dollars(answer: str) -> str:
    """ANSWER with each list element whose math `$` are unbalanced wrapped again (`$221,$8$` -> `$221$,$8$`):
    math-verify read `$221,$8$` as 221. An answer with balanced `$` is left as it is."""
    if len(_DOLLAR.findall(answer)) % 2 == 0:
        return answer
    parts = split_list(answer)
    return ",".join(
        f"${_DOLLAR.sub('', part).strip()}$" if len(_DOLLAR.findall(part)) % 2 else part for part in parts
    )


def _tidy(answer: str) -> str:
    """An answer as math-verify reads it best (see the module docstring)."""
    answer = " ".join(answer.split()).removesuffix(".").strip()
    answer = _PY_NUMPY.sub("\\\\", _PY_FLOAT_DIVIDED.sub(r"\1/", answer))
    answer = _balance_dollars(answer)
    answer = _SCIENTIFIC.sub(r"\1 \\times 10^{\2}", answer)
    return _scaled(_FRAC_COMMAND.sub(_frac_braces, answer))


def _named_value(answer: str) -> str | None:
    """VALUE of an answer `NAME = VALUE` (`m_{\\max }=n^{2}-n-1`, `$x = 5$`), None for any other answer."""
    match = _NAMED_VALUE.match(_strip_markup(answer))
    return match.group(1).strip() if match else None


def _within(predicted: str, gold: str, tolerance: float, timeout: int | None) -> bool:
    """Whether PREDICTED and GOLD are numbers at most TOLERANCE apart (OlympiadBench's `error`)."""
    from math_verify import parse

    values = []
    for answer in (predicted, gold):
        parsed = parse(_wrap(answer), parsing_timeout=timeout)
        expr = parsed[0] if parsed else None
        if expr is None or not getattr(expr, "is_number", False) or not getattr(expr, "is_real", False):
            return False
        values.append(float(expr))
    return abs(values[0] - values[1]) <= tolerance * (1 + 1e-9)


def answers_match(predicted: str | None, gold: str, tolerance: float | None = None) -> bool:
    """math-verify equivalence of an extracted answer and the gold answer (False when nothing was extracted).

    TOLERANCE: a numerical answer at most this far from a numerical gold is right too (OlympiadBench's `error`)."""
    if predicted is None or not predicted.strip():
        return False
    from math_verify import parse, verify

    # math-verify's timeouts use SIGALRM, which only the main thread may set.
    timeout = 5 if threading.current_thread() is threading.main_thread() else None

    def equivalent(predicted: str, gold: str) -> bool:
        gold_parsed = parse(_wrap(gold), parsing_timeout=timeout)
        pred_parsed = parse(_wrap(predicted), parsing_timeout=timeout)
        if not gold_parsed or not pred_parsed:
            return predicted == gold
        return bool(verify(gold_parsed, pred_parsed, timeout_seconds=timeout))

    predicted, gold = _tidy(predicted), _tidy(gold)
    try:
        if (agree := _power_of_ten_match(predicted, gold)) is not None:
            return agree
        if equivalent(predicted, gold):
            return True
        if (value := _named_value(gold)) is not None and equivalent(
            _named_value(predicted) or predicted, value
        ):
            return True  # `m_{\\max }=n^{2}-n-1`, which math-verify cannot parse, for `n^2-n-1`
        if tolerance is not None and _within(predicted, gold, tolerance, timeout):
            return True
        if _PERCENT.search(gold) and not _PERCENT.search(predicted):  # "62.5" for a gold 62.5\%
            return equivalent(predicted, _PERCENT.sub("", gold))
        if _PERCENT.search(predicted) and not _PERCENT.search(gold) and _at_least_one(gold):
            # "12.5\%" for OCW's 12.5 (asked in percent); not "0.25\%" for a probability 0.25 (100 times off)
            return equivalent(_PERCENT.sub("", predicted), gold)
        return False
    except Exception:  # noqa: BLE001 - a grader crash on one odd answer must not end an eval
        return predicted == gold


def grade(output: str, gold: str, tolerance: float | None = None) -> dict:
    """Extract the answer from a model output and grade it: {"extracted", "method", "correct"}.

    The output is read up to a made-up next problem (`cut_at_next_problem`); against a gold of several answers
    (`split_list`), several boxes are read together. TOLERANCE: see `answers_match`."""
    extracted, method = extract_answer(cut_at_next_problem(output), several=len(split_list(gold)) > 1)
    return {"extracted": extracted, "method": method, "correct": answers_match(extracted, gold, tolerance)}


def boxed_reward(output: str, gold: str) -> float:
    """OctoThinker's RL reward: +1 when the last \\boxed{} matches the gold answer under math-verify, else -1.

    A unit in plain words is cut from the box as in `extract_answer` (\\boxed{18 dollars} earned -1 for a gold 18)."""
    return 1.0 if answers_match(_boxed_answer(output), gold) else -1.0
