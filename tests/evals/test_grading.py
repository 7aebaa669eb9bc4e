"""Grading of the forms models write for real gold answers: each case here was graded the wrong way before
mathmix-grading/3 (found by grading plausible outputs built from every gold answer of the benchmark sets)."""

from __future__ import annotations

import re

import pytest

from evals.benchmarks import load_benchmark
from evals.grading import answers_match, boxed_reward, extract_answer, grade


@pytest.mark.parametrize(
    ("output", "gold"),
    [
        # markdown bold, as chat models write it: "**18**" went to math-verify as it was
        ("The final answer is **18**.", "18"),
        ("The answer is **$\\frac{1}{4}$**.", "\\frac{1}{4}"),
        # an escaped dollar sign: the answer (or MATH's gold) was not wrapped in $...$ and parsed to nothing
        ("So the total is $\\boxed{\\$15}$.", "15"),
        ("The answer is \\$18.", "18"),
        ("#### \\$18", "18"),
        ("So he saved $\\boxed{15,000}$ dollars.", "\\$15,\\!000"),  # MATH's gold
        ("The answer is 18.90.", "\\$18.90"),  # MATH500's gold
        # several math spans after "the answer is" (OlympiadBench's golds): cutting the outer $ left "69$, $84"
        ("The answer is $69$, $84$.", "$69$,$84$"),
        ("The answer is $69$ and $84$.", "$69$,$84$"),
        # a unit in plain words inside the box: "18 dollars" was a product of letters
        ("So she pays $\\boxed{18 dollars}$.", "18"),
        # OCW's e-notation golds: math-verify read 4.5e33 as 4.5*e*33
        ("The luminosity is $\\boxed{4.5 \\times 10^{33}}$ erg/s.", "4.5e33"),
        ("so $\\boxed{1.77 \\times 10^{-6}}$.", "1.77e-6"),
        # \frac with a command numerator and no braces (MATH's golds): math-verify read the gold as 2
        ("$\\boxed{2007 + \\frac{\\pi}{2}}$", "2007 + \\frac\\pi 2"),
        ("$\\boxed{\\frac{\\pi}{4} + 2 - \\sqrt{2}}$", "\\frac \\pi4 + 2 - \\sqrt2"),
        # a gold's trailing period (MATH) or line break (OCW) made it unparsable
        ("$\\boxed{\\frac{7}{5}+\\frac{1}{5}i}$", "\\frac{7}{5} + \\frac{1}{5} i."),
        ("$\\boxed{I(0) e^{-\\frac{t}{RC}}}$", "I(0) e^{-\\frac{t}{R C}}\n"),
        # a percent sign on one side: math-verify drops it for whole numbers only
        ("$\\boxed{62.5}$", "62.5%"),
        ("The answer is 12.5%.", "12.5"),
        # a number word with a multiplier is the number it names
        ("The answer is 27 thousand.", "27000"),
        ("#### 1.5 million", "1,500,000"),
        ("The answer is 4 dozen.", "48"),
        # display math after "the answer is" is one span, as $...$ is
        ("The answer is $$18.$$", "18"),
        ("The answer is $$\\frac{1}{2}.$$\n", "\\frac{1}{2}"),
        ("The answer is $$18,$$ as shown", "18"),
        # in a box, short words are variables and function names are math: no unit to cut
        ("$\\boxed{2 xy}$", "2xy"),
    ],
)
def test_a_correct_answer_as_models_write_it_is_correct(output, gold):
    assert grade(output, gold)["correct"], grade(output, gold)


@pytest.mark.parametrize(
    ("output", "gold"),
    [
        ("$\\boxed{2}$", "2007 + \\frac\\pi 2"),  # was right: the gold parsed as 2
        ("$\\boxed{2}$", "\\frac \\pi4 + 2 - \\sqrt2"),
        ("$\\boxed{4.6 \\times 10^{33}}$", "4.5e33"),
        # math-verify rounds decimals to 6 places: any two numbers below 5e-7 were equal
        ("$\\boxed{2.88 \\times 10^{-18}}$", "2.88 \\times 10^{-19}"),
        ("The answer is 0.00000005.", "1.24 \\times 10^{-8}"),
        ("$\\boxed{2.88 \\times 10^{-18}}$", "2.88e-19"),
        ("$\\boxed{0}$", "1.24e-8"),
        ("The answer is 2 million.", "2"),  # the multiplier counts: still wrong against its bare number
        ("The answer is 3 thousand.", "3000000"),
        ("$\\boxed{61.5}$", "62.5%"),
        ("The answer is $84$.", "$69$,$84$"),
        ("So she pays $\\boxed{19 dollars}$.", "18"),
        ("The answer is \\$19.", "18"),
        ("$\\boxed{2008 + \\frac{\\pi}{2}}$", "2007 + \\frac\\pi 2"),
        ("$\\boxed{2 xy}$", "2"),  # the variables are not a unit
        ("$\\boxed{2 sin x}$", "2"),
        # a percent for a probability is 100 times off (the retry without % is for percentages, gold >= 1)
        ("The answer is 0.25%.", "0.25"),
        ("$\\boxed{0.5\\%}$", "0.5"),
    ],
)
def test_a_wrong_answer_is_wrong(output, gold):
    assert not grade(output, gold)["correct"], grade(output, gold)


def test_what_is_extracted():
    assert extract_answer("The final answer is **18**.") == ("18", "answer_is")
    assert extract_answer("The answer is $69$, $84$.") == ("$69$, $84$", "answer_is")
    assert extract_answer("The answer is $18$ dollars.") == ("18", "answer_is")
    assert extract_answer("So she pays $\\boxed{18 dollars}$.") == ("18", "boxed")
    assert extract_answer("$\\boxed{2 \\pi}$") == ("2 \\pi", "boxed")  # LaTeX in a box is left alone
    assert extract_answer("$\\boxed{5 factorial}$") == ("5 factorial", "boxed")  # a value word stays
    assert extract_answer("$\\boxed{2 sin x}$") == ("2 sin x", "boxed")  # a function name is math
    assert extract_answer("$\\boxed{2 xy}$") == ("2 xy", "boxed")  # short words in a box are variables
    assert extract_answer("The answer is $$18.$$") == ("18", "answer_is")
    # a "Final Answer:" heading, read where no "answer is" says more
    assert extract_answer("Adding up.\nFinal Answer: 18") == ("18", "answer_is")
    assert extract_answer("**Final Answer:** $\\frac{1}{2}$\n") == ("\\frac{1}{2}", "answer_is")
    minerva = "Final Answer: The final answer is $7$. I hope it is correct."
    assert extract_answer(minerva) == ("7", "answer_is")


def test_the_rl_reward_grades_the_box_the_same_way():
    assert boxed_reward("so \\boxed{18 dollars}", "18") == 1.0
    assert boxed_reward("so \\boxed{\\$18}", "18") == 1.0
    assert boxed_reward("so \\boxed{4.5 \\times 10^{33}}", "4.5e33") == 1.0
    assert boxed_reward("so \\boxed{19 dollars}", "18") == -1.0
    assert boxed_reward("so \\boxed{2 xy}", "2") == -1.0
    assert boxed_reward("so \\boxed{0.5\\%}", "0.5") == -1.0
    assert answers_match("2 million", "2000000") and not answers_match("2 million", "2")


def _bench(shared_data, name: str) -> list[dict]:
    items = load_benchmark(name, shared_data / "bench")
    if not items:
        pytest.skip(f"no {name} test set under {shared_data / 'bench'}")
    return items


def test_every_e_notation_gold_of_ocw_takes_times_ten_to_the(shared_data):
    golds = [i["answer"].strip() for i in _bench(shared_data, "ocw")]
    scientific = [g for g in golds if re.fullmatch(r"-?\d+(\.\d+)?e-?\d+", g)]
    assert len(scientific) >= 50  # about a fifth of OCW
    for gold in scientific:
        mantissa, exponent = gold.split("e")
        assert grade(f"$\\boxed{{{mantissa} \\times 10^{{{int(exponent)}}}}}$", gold)["correct"], gold
        assert not grade(f"$\\boxed{{{mantissa} \\times 10^{{{int(exponent) + 1}}}}}$", gold)["correct"], gold


def test_every_dollar_gold_of_math500_takes_the_bare_number(shared_data):
    golds = [i["answer"] for i in _bench(shared_data, "math500") if i["answer"].startswith("\\$")]
    assert len(golds) >= 3
    for gold in golds:
        number = gold.removeprefix("\\$").replace(",\\!", "")
        assert grade(f"So it costs $\\boxed{{{number}}}$.", gold)["correct"], gold
        assert grade(f"So it costs $\\boxed{{\\${number}}}$.", gold)["correct"], gold
        assert not grade(f"So it costs $\\boxed{{{float(number) + 1}}}$.", gold)["correct"], gold


# mathmix-grading/4: the cases of a review of `eval bench --suite octothinker` on the real data, each graded the
# wrong way before.

_MADE_UP = "Tom has 3 apples and buys 2 more. How many apples does he have?"


@pytest.mark.parametrize(
    "output",
    [
        f"16-3-4=9 and 9*2=18. The answer is 18.\n\nQuestion 2: {_MADE_UP}\nAnswer: 3+2=5. The answer is 5.",
        f"16-3-4=9 and 9*2=18. The answer is 18.\n\nQ: {_MADE_UP}\nA: 3+2=5. The answer is 5.",
        f"16-3-4=9 and 9*2=18. The answer is 18.\n\nProblem 2. {_MADE_UP} The answer is 5.",
        f"16-3-4=9 and 9*2=18. The answer is 18.\n\n## Question\n{_MADE_UP} The answer is 5.",
        f"So $\\boxed{{18}}$.\n\nPROBLEM:\n{_MADE_UP}\n\nSOLUTION:\n$\\boxed{{5}}$.",
        f"So $\\boxed{{18}}$.\n\nExample 2. {_MADE_UP} So $\\boxed{{5}}$.",
        f"So $\\boxed{{18}}$.\n\n### Problem\n{_MADE_UP}\n\n### Solution\n$\\boxed{{5}}$.",
        f"So $\\boxed{{18}}$.\n\n**Problem 3:** {_MADE_UP} So $\\boxed{{5}}$.",
        f"The answer is 18.\nQuestion 2: {_MADE_UP} The answer is 5.",  # no blank line, after the answer's line
    ],
)
def test_a_made_up_next_problem_under_any_header_is_not_graded(output):
    assert grade(output, "18")["correct"], grade(output, "18")
    assert not grade(output, "5")["correct"]


@pytest.mark.parametrize(
    "output, gold",
    [
        ("Try small cases.\n\nExample 1: n=1 gives 1.\n\nSo the answer is \\boxed{5}.", "5"),
        ("From Subproblem 0, x=3.\n\nSubproblem 0 gave x = 3, so y = 6.\n\n\\boxed{6}", "6"),
        ("Let q be the quotient.\n\nq: 7\n\nThus \\boxed{7}", "7"),
        ("We have\n\nQuestion: is x even? Yes.\n\nso \\boxed{2}", "2"),
    ],
)
def test_a_header_before_the_final_answer_is_the_solutions_own(output, gold):
    # a made-up next problem comes after an answer; before one, the header is part of the solution (review)
    from evals.grading import cut_at_next_problem

    assert cut_at_next_problem(output) == output
    assert grade(output, gold)["correct"]


def test_a_made_up_ocw_subproblem_after_minervas_final_answer_is_not_graded():
    # OCW's prompts hold solved subproblems ending so; a base model copies it, then makes up the next subproblem
    output = (
        "s = \\alpha f = 1.6 cm.\n\nFinal answer: The final answer is 1.6. I hope it is correct.\n\n"
        "Subproblem 1: What is the focal ratio? Solution: $f/D = \\boxed{11}$."
    )
    assert grade(output, "1.6")["correct"] and not grade(output, "11")["correct"]
    same_line = "Final answer: The final answer is 1.6. I hope it is correct. Then $\\boxed{11}$."
    assert grade(same_line, "1.6")["correct"]


@pytest.mark.parametrize(
    "output",
    [
        "### Problem Analysis\nWe need the sum.\n\n### Solution\nSo $\\boxed{5}$.",
        "Let us start.\n\nProblem solving needs care: 2+3.\n\nSo $\\boxed{5}$.",
        "Let us start.\n\nExample: with n = 2 we get 4.\n\nSo $\\boxed{5}$.",
        "Question 2 asks for the sum.\nIt is 2 + 3 = 5. The answer is 5.",  # no blank line before, no answer given
        "Problem 2\n\nWe add: $\\boxed{5}$.",  # the output's own first line
    ],
)
def test_words_a_solution_starts_a_paragraph_with_are_not_a_new_problem(output):
    assert grade(output, "5")["correct"], grade(output, "5")


def test_every_stop_string_is_cut_before_grading_too():
    """The literal stops end generation (vLLM, transformers); grading cuts at each of them as well, so an output
    kept from an earlier run (before a stop was added) is graded as a new one would be."""
    from evals.benchmarks import STOPS

    for stop in STOPS:
        output = f"So $\\boxed{{18}}$.{stop} 2: {_MADE_UP} $\\boxed{{5}}$."
        if stop != "<|endoftext|>":  # a special token: vLLM and transformers leave it out of the text
            assert grade(output, "18")["correct"], stop


def test_no_reference_solution_is_cut_as_a_made_up_problem(shared_data):
    from evals.grading import cut_at_next_problem
    from mathmix.records import read_objects

    bench = shared_data / "bench"
    exemplars = bench / "math_hendrycks/train.jsonl"
    if not exemplars.exists():
        pytest.skip(f"no MATH train split under {bench}")
    solutions = [r["solution"] for r in read_objects(exemplars)]
    for name in ("gsm8k", "math500", "ocw", "olympiadbench"):
        solutions += [i["solution"] for i in _bench(shared_data, name)]
    assert len(solutions) > 10000
    assert [s[:80] for s in solutions if cut_at_next_problem(s) != s] == []


@pytest.mark.parametrize(
    ("output", "gold"),
    [
        ("The roots are \\boxed{2} and \\boxed{5}.", "2, 5"),
        ("So $x = \\boxed{1}$ or $x = \\boxed{-2}$.", "1,-2"),
        ("First $\\boxed{4}$.\n\nThe primes are $\\boxed{3}$, $\\boxed{5}$, $\\boxed{7}$.", "3, 5, 7"),
        ("The answers are $\\boxed{69}$ and $\\boxed{84}$.", "$69$,$84$"),
    ],
)
def test_several_boxes_are_read_together_against_a_gold_of_several_answers(output, gold):
    assert grade(output, gold)["correct"], grade(output, gold)
    last = output.rsplit("\\boxed", 1)[0] + "\\boxed{0}."
    assert not grade(last, gold)["correct"]


def test_a_single_answer_gold_still_takes_the_last_box():
    assert extract_answer("first \\boxed{3} then \\boxed{5}") == ("5", "boxed")
    assert grade("We get \\boxed{2} and then \\boxed{5}.", "5")["correct"]
    assert not grade("The roots are \\boxed{2} and \\boxed{5}.", "2")["correct"]
    assert not grade("So $\\boxed{2}$.", "2, 5")["correct"]  # one of two answers
    assert grade("So $\\boxed{2, 5}$.", "2, 5")["correct"]
    assert grade("So $\\boxed{15,000}$.", "15,000")["correct"]  # thousands, not a list


def test_every_multiple_answer_gold_of_olympiadbench_takes_one_box_per_answer(shared_data):
    from evals.grading import split_list

    golds = [i["answer"] for i in _bench(shared_data, "olympiadbench")]
    lists = [g for g in golds if len(split_list(g)) > 1 and "where" not in g]
    assert len(lists) >= 80
    for gold in lists:
        parts = [p.strip().strip("$").strip() for p in split_list(gold)]
        output = "So the answers are " + " and ".join(f"$\\boxed{{{p}}}$" for p in parts) + "."
        assert grade(output, gold)["correct"], (gold, grade(output, gold))
        if len(set(parts)) > 1:
            assert not grade(f"So $\\boxed{{{parts[-1]}}}$.", gold)["correct"], gold


@pytest.mark.parametrize(
    ("right", "wrong", "gold"),
    [
        # OCW's golds written in Python: -1./3 was read as -1
        ("-\\frac{1}{3}", "-1", "-1./3"),
        ("-1.5", "-3", "-3./2"),
        ("\\arcsin(10/13)", "\\arcsin(5/13)", "np.arcsin(10/13)"),
        # OlympiadBench: a stray `$` (read as 221), a named value math-verify cannot parse
        ("221, 8", "221", "$221,$8$"),
        ("n^2-n-1", "n^2-n", "$m_{\\max }=n^{2}-n-1$"),
        ("m = n^2-n-1", "m = n^2-n", "$m_{\\max }=n^{2}-n-1$"),
    ],
)
def test_golds_written_as_code_or_with_stray_markup_are_read_as_meant(right, wrong, gold):
    assert grade(f"So $\\boxed{{{right}}}$.", gold)["correct"], grade(f"So $\\boxed{{{right}}}$.", gold)
    assert not grade(f"So $\\boxed{{{wrong}}}$.", gold)["correct"]


def test_olympiadbenchs_error_field_is_a_tolerance(shared_data):
    assert grade("So $\\boxed{4.25}$.", "4.2", tolerance=0.1)["correct"]
    assert grade("So $\\boxed{\\frac{43}{10}}$.", "4.2", tolerance=0.1)["correct"]
    assert not grade("So $\\boxed{4.35}$.", "4.2", tolerance=0.1)["correct"]
    assert not grade("So $\\boxed{4.25}$.", "4.2")["correct"]  # no tolerance given: exact
    assert not grade("So $\\boxed{x}$.", "4.2", tolerance=0.1)["correct"]
    items = [i for i in _bench(shared_data, "olympiadbench") if "tolerance" in i]
    assert items and all(i["tolerance"] > 0 for i in items)
    for item in items:
        near = float(item["answer"]) + item["tolerance"] / 2
        assert grade(f"So $\\boxed{{{near}}}$.", item["answer"], item.get("tolerance"))["correct"]


@pytest.mark.parametrize(
    ("output", "extracted"),
    [
        ("16-3-4=9. The correct answer is 18.", "18"),
        ("So the required answer is 18", "18"),
        ("Adding up the eggs.\nAnswer: 18", "18"),
        ("**Final Answer**\n5", "5"),
        ("The answer is 18, since 16-3-4=9 and 9*2=18.", "18"),
        ("The answer is therefore 18.", "18"),
        ("The answer is 8 (5 + 3).", "8"),
        ("Adding, the final answer is \\[\\frac12\\]", "\\frac12"),
        ("Thus the final answer is\n\\[\n\\frac{1}{2}.\n\\]", "\\frac{1}{2}"),
        ("The answer is 5 m^2.", "5"),
        ("The answers are $2$ and $5$.", "$2$ and $5$"),
        # a markdown heading of four # is no GSM8K answer: it outranked "the answer is"
        ("#### Step 1: Count the apples\nThere are 5. The answer is 5.", "5"),
        ("##### 7 more\nThe answer is 5.", "5"),
    ],
)
def test_answers_said_in_more_ways_are_extracted_alone(output, extracted):
    assert extract_answer(output)[0] == extracted


def test_answer_words_that_are_no_answer_are_not_extracted():
    assert extract_answer("Tom has 3 apples.\nAnswer: Tom has 3 apples and 2 more.") == (None, "none")
    assert extract_answer("#### Step 1: Count the apples") == (None, "none")
    assert extract_answer("both functions mentioned in the answer are as desired.") == (None, "none")
    assert extract_answer("The answer is 5 x^2.") == ("5 x^2", "answer_is")  # a variable, not a unit
    assert extract_answer("$\\boxed{5 m^2}$") == ("5 m^2", "boxed")  # in a box, math
