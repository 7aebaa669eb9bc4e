"""Whether an extracted answer equals the gold under math-verify, after the tidying of both that the module docstring
of `evals.grading` lists (`4.5e33`, `\\frac\\pi 2`, "27 thousand", a percent sign on one side, `NAME = VALUE` ...).

Split from `evals.grading` (which re-exports `answers_match`): any change here is a grader change (`GRADER`).
"""

from __future__ import annotations

import re
import threading
from decimal import Decimal

from evals.answer_extract import _DOLLAR, _SCALES, _strip_markup, split_list

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
# `(?<!\s)`: a match starting inside a run of blanks implies one at the run's first blank, found first, and a match
# ends at the end: the same match, without retrying each blank of a run (answers here are `_tidy`, single-spaced).
_PERCENT = re.compile(r"(?<!\s)\s*\\?%$")


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
    """An answer as math-verify reads it best (see the module docstring of `evals.grading`)."""
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
