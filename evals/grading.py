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
  words (3 letters or more, no function name): "2 xy" and "2 sin x" are math.
"""

from __future__ import annotations

import re
import threading
from decimal import Decimal

_ANSWER_IS = re.compile(r"(?:final answer|the answer) is[:\s]*(.+?)(?:\.\s|\.$|\n|$)", re.IGNORECASE)
# "Final Answer: 18" (chat models' heading), read only where no "... answer is" is found: Minerva's format says
# "Final Answer: The final answer is $X$", whose answer is after the "is".
_FINAL_ANSWER = re.compile(r"final answer\s*\**\s*:[\s*]*(.+?)(?:\.\s|\.$|\n|$)", re.IGNORECASE)
_HASHES = re.compile(r"####\s*([^\n]+)")
# "18 dollars", "$40 miles per hour", "1/2 cup": a number, then plain words (a unit). math-verify knows some units
# ("5 cm" parses as 5) but not others ("18 dollars" parsed as 18*d*o*l*l*a*r*s and was graded wrong).
_NUMBER_THEN_WORDS = re.compile(
    r"^\$?\s*([-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+)?)\s*\$?\s+([A-Za-z][A-Za-z'.\s/-]*)$"
)
# The grader's version, recorded in each benchmark's results JSON: `eval bench` regrades kept results of another.
# 2: a number's unit is cut ("18 dollars" -> 18) but not a word that changes its value ("2 million").
# 3: the tidying in the module docstring; "**18**", "$69$, $84$" after "the answer is", units in \boxed{18 dollars}.
GRADER = "mathmix-grading/3"
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


def _drop_unit(answer: str, boxed: bool = False) -> str:
    """The number of NUMBER UNIT WORDS ("18 dollars" -> "18", "90 degrees" -> "90"); any other answer, and a number
    followed by a word that changes its value ("2 million", "4 dozen", "2 thirds", "5 per cent"), as it is.

    `boxed`: the answer is a box's content, which is math: a short word there is a variable ("2 xy") and a function
    name is math ("2 sin x"); only words of 3 letters or more that name no function are cut ("18 dollars")."""
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
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip()
    return None


def _boxed_answer(text: str) -> str | None:
    """The last box's content, a plain-word unit cut (`_drop_unit` in a box); None where there is no box."""
    boxed = last_boxed(text)
    return _drop_unit(boxed, boxed=True) if boxed else None


def extract_answer(text: str) -> tuple[str | None, str]:
    """The model's final answer and how it was found: ("...", "boxed" | "hashes" | "answer_is") or (None, "none")."""
    boxed = _boxed_answer(text)
    if boxed:
        return boxed, "boxed"
    hashes = _HASHES.findall(text)
    if hashes:
        return _drop_unit(_strip_markup(hashes[-1]).rstrip(".")), "hashes"
    said = _ANSWER_IS.findall(text) or _FINAL_ANSWER.findall(text)
    if said:
        return _drop_unit(_strip_markup(said[-1]).rstrip(".")), "answer_is"
    return None, "none"


def gold_answer_from_solution(solution: str) -> str | None:
    """The reference answer inside a worked solution (MATH: last \\boxed{}; GSM8K: after ####)."""
    answer, _ = extract_answer(solution)
    return answer


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


def _tidy(answer: str) -> str:
    """An answer as math-verify reads it best (see the module docstring)."""
    answer = " ".join(answer.split()).removesuffix(".").strip()
    answer = _SCIENTIFIC.sub(r"\1 \\times 10^{\2}", answer)
    return _scaled(_FRAC_COMMAND.sub(_frac_braces, answer))


def answers_match(predicted: str | None, gold: str) -> bool:
    """math-verify equivalence of an extracted answer and the gold answer (False when nothing was extracted)."""
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
        if _PERCENT.search(gold) and not _PERCENT.search(predicted):  # "62.5" for a gold 62.5\%
            return equivalent(predicted, _PERCENT.sub("", gold))
        if _PERCENT.search(predicted) and not _PERCENT.search(gold) and _at_least_one(gold):
            # "12.5\%" for OCW's 12.5 (asked in percent); not "0.25\%" for a probability 0.25 (100 times off)
            return equivalent(_PERCENT.sub("", predicted), gold)
        return False
    except Exception:  # noqa: BLE001 - a grader crash on one odd answer must not end an eval
        return predicted == gold


def grade(output: str, gold: str) -> dict:
    """Extract the answer from a model output and grade it: {"extracted", "method", "correct"}."""
    extracted, method = extract_answer(output)
    return {"extracted": extracted, "method": method, "correct": answers_match(extracted, gold)}


def boxed_reward(output: str, gold: str) -> float:
    """OctoThinker's RL reward: +1 when the last \\boxed{} matches the gold answer under math-verify, else -1.

    A unit in plain words is cut from the box as in `extract_answer` (\\boxed{18 dollars} earned -1 for a gold 18)."""
    return 1.0 if answers_match(_boxed_answer(output), gold) else -1.0
