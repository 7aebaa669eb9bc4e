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

from evals.answer_extract import (
    _boxed_answer,
    cut_at_next_problem,
    extract_answer,
    gold_answer_from_solution,
    last_boxed,
    split_list,
    truncate_at_stops,
)
from evals.answer_match import answers_match

__all__ = [
    "GRADER",
    "answers_match",
    "boxed_reward",
    "cut_at_next_problem",
    "extract_answer",
    "gold_answer_from_solution",
    "grade",
    "last_boxed",
    "split_list",
    "truncate_at_stops",
]

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
