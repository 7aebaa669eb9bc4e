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
