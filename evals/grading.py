"""Answer extraction (`\\boxed{}`, `#### N`, "The answer is ...") and grading with math-verify.

The extracted string, not the whole output, is handed to math-verify: a base model's few-shot continuation often
runs on into a made-up next problem, and math-verify would happily grade a number from there.
"""

from __future__ import annotations

import re
import threading

_ANSWER_IS = re.compile(r"(?:final answer|the answer) is[:\s]*(.+?)(?:\.\s|\.$|\n|$)", re.IGNORECASE)
_HASHES = re.compile(r"####\s*([^\n]+)")
# "18 dollars", "$40 miles per hour", "1/2 cup": a number, then plain words (a unit). math-verify knows some units
# ("5 cm" parses as 5) but not others ("18 dollars" parsed as 18*d*o*l*l*a*r*s and was graded wrong).
_NUMBER_THEN_WORDS = re.compile(
    r"^\$?\s*([-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+)?)\s*\$?\s+([A-Za-z][A-Za-z'.\s/-]*)$"
)
# The grader's version, recorded in each benchmark's results JSON: `eval bench` regrades kept results of another.
# 2: a number's unit is cut ("18 dollars" -> 18) but not a word that changes its value ("2 million").
GRADER = "mathmix-grading/2"

# Words after a number that keep the answer whole: math, not a unit ("2 pi", "3 and 4", "5 or 6").
_MATH_WORDS = {"pi", "sqrt", "and", "or", "to", "times", "plus", "minus", "over", "divided"}
# Words that change the number's value: cutting them graded "2 million", "#### 3 thousand", "2 thirds" or
# "5 factorial" right against a gold 2, 3, 2 or 5. Kept whole, such an answer is graded as written (math-verify
# reads "50 percent" as 50%; "2 million" as a product of letters, wrong against both 2 and 2000000). "second" is
# left out: "2 seconds" is a unit far more often than 2/2.
_SCALES = ("hundred", "thousand", "million", "billion", "trillion", "quadrillion", "dozen", "lakh", "crore")
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


def _drop_unit(answer: str) -> str:
    """The number of NUMBER UNIT WORDS ("18 dollars" -> "18", "90 degrees" -> "90"); any other answer, and a number
    followed by a word that changes its value ("2 million", "4 dozen", "2 thirds", "5 per cent"), as it is."""
    match = _NUMBER_THEN_WORDS.match(answer)
    if match is None:
        return answer
    words = [word.strip(".").lower() for word in match.group(2).split()]
    first = words[0]
    if len(first) < 2 or first in _KEEP_WHOLE or words[:2] == ["per", "cent"]:
        return answer
    return match.group(1)


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


def extract_answer(text: str) -> tuple[str | None, str]:
    """The model's final answer and how it was found: ("...", "boxed" | "hashes" | "answer_is") or (None, "none")."""
    boxed = last_boxed(text)
    if boxed:
        return boxed, "boxed"
    hashes = _HASHES.findall(text)
    if hashes:
        return _drop_unit(hashes[-1].strip().rstrip(".")), "hashes"
    said = _ANSWER_IS.findall(text)
    if said:
        answer = said[-1].strip().strip("$").strip()
        return _drop_unit(answer.rstrip(".")), "answer_is"
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
    return answer if "$" in answer or "\\boxed" in answer else f"${answer}$"


def answers_match(predicted: str | None, gold: str) -> bool:
    """math-verify equivalence of an extracted answer and the gold answer (False when nothing was extracted)."""
    if predicted is None or not predicted.strip():
        return False
    from math_verify import parse, verify

    # math-verify's timeouts use SIGALRM, which only the main thread may set.
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    try:
        gold_parsed = parse(_wrap(gold), parsing_timeout=timeout)
        pred_parsed = parse(_wrap(predicted), parsing_timeout=timeout)
        if not gold_parsed or not pred_parsed:
            return predicted.strip() == gold.strip()
        return bool(verify(gold_parsed, pred_parsed, timeout_seconds=timeout))
    except Exception:  # noqa: BLE001 - a grader crash on one odd answer must not end an eval
        return predicted.strip() == gold.strip()


def grade(output: str, gold: str) -> dict:
    """Extract the answer from a model output and grade it: {"extracted", "method", "correct"}."""
    extracted, method = extract_answer(output)
    return {"extracted": extracted, "method": method, "correct": answers_match(extracted, gold)}


def boxed_reward(output: str, gold: str) -> float:
    """OctoThinker's RL reward: +1 when the last \\boxed{} matches the gold answer under math-verify, else -1."""
    return 1.0 if answers_match(last_boxed(output), gold) else -1.0
