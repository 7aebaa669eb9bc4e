"""Realistic model outputs through `validate_rollout`, as a review ran them over a Math Help Forum page: the
wrappers instruct and reasoning models put around their answers (preambles, sign-offs, fences, the prompt's
markers, `<think>` blocks with or without their opening tag), two QA pairs in one answer, template echoes, longcot
answers left inside the thinking, displayed equations, and the ways models write a score."""

from __future__ import annotations

import pytest

from curate.rewrite import validate as v
from curate.rewrite.clean import clean_output
from curate.rewrite.tasks import ValidationSettings, Verdict, build_messages, validate_rollout

# The start of the forum page (what the model saw), and a faithful rewrite of it.
PAGE = r"""Results 1 to 11 of 11

# Math Help - integral question..

  1. February 28th 2009, 03:36 AM #1
    MHF Contributor
    Joined
    Nov 2008
    Posts
    1,401

    ## integral question..

    $\int \frac{dz}{\sqrt{z^2+\frac{1}{4}}}=2\int \frac{\frac{1}{2}\frac{dx}{\cos ^2 x}}{\sqrt{\tan^2 x+1}}=\int \frac{dx}{\cos x}\\$
    $z=\frac{1}{2}\tan x\\$
    $dz=\frac{1}{2}\frac{dx}{\cos ^2 x}$
    what to do next??
    Follow Math Help Forum on Facebook and Google+
  2. February 28th 2009, 03:58 AM #2
    Flow Master
    Joined
    Dec 2007
    Posts
    16,947
    Read this thread: http://www.mathhelpforum.com/math-he...functions.html
    Follow Math Help Forum on Facebook and Google+
  3. February 28th 2009, 04:34 AM #3
    MHF Contributor
    i am not using sec
    only sin cos tan cot
    its very complicated and with sec
    so if i will put sec=1/cos then i ll get a very complicated expression
    is there an easier way??
    Follow Math Help Forum on Facebook and Google+
  4. February 28th 2009, 05:41 AM #4
    Member
    Joined
    Nov 2008
    Posts
    114
    You could try a hyperbolic substitution. In this example we're looking to reduce the sum of two squares to a single square, $z = \frac{1}{2}\sinh \theta$ will work here.
    $z = \frac{1}{2}\sinh \theta \implies dz = \frac{1}{2}\cosh\theta\, d\theta$
    So
    $I = \int\frac{\frac{1}{2}\cosh\theta \, d\theta}{\sqrt{\left(\frac{1}{2}\right)^2+\left(\f rac{1}{2}\right)^2\sinh\theta}} = \int d\theta = \theta + C$
    We need to write this in terms of our original variable so
    $z = \frac{1}{2}\sinh\theta \implies \theta = \sinh^{-1}(2z)$
    So
    $I = \sinh^{-1}(2z) + C$
    This is also the answer maxima gives to the integral
    Follow Math Help Forum on Facebook and Google+
  5. February 28th 2009, 05:49 AM #5
    MHF Contributor
    i cant use hyperbolic function
    Follow Math Help Forum on Facebook and Google+"""
REF = r"""# Integrating $\dfrac{1}{\sqrt{z^2 + 1/4}}$

A student asked how to evaluate the integral

$$\int \frac{dz}{\sqrt{z^2+\frac{1}{4}}}.$$

A first attempt uses the substitution $z=\frac{1}{2}\tan x$, so that $dz=\frac{1}{2}\frac{dx}{\cos^2 x}$. Then

$$\int \frac{dz}{\sqrt{z^2+\frac{1}{4}}}=2\int \frac{\frac{1}{2}\frac{dx}{\cos ^2 x}}{\sqrt{\tan^2 x+1}}=\int \frac{dx}{\cos x}.$$

The question is how to continue without using $\sec x$.

## A hyperbolic substitution

One can instead reduce the sum of two squares to a single square with $z = \frac{1}{2}\sinh \theta$, so that $dz = \frac{1}{2}\cosh\theta\, d\theta$. Since $1+\sinh^2\theta=\cosh^2\theta$,

$$I = \int\frac{\frac{1}{2}\cosh\theta \, d\theta}{\sqrt{\left(\frac{1}{2}\right)^2+\left(\frac{1}{2}\right)^2\sinh^2\theta}} = \int d\theta = \theta + C.$$

Returning to the original variable, $z = \frac{1}{2}\sinh\theta$ gives $\theta = \sinh^{-1}(2z)$, so

$$I = \sinh^{-1}(2z) + C.$$

## Without hyperbolic functions

Write $\int \frac{dx}{\cos x} = \int \frac{\cos x\,dx}{\cos^2 x} = \int \frac{\cos x\,dx}{1-\sin^2 x}$ and substitute $t=\sin x$:

$$\int \frac{dt}{1-t^2} = \frac{1}{2}\ln\left|\frac{1+t}{1-t}\right| + C.$$

Back-substituting, the result equals $\ln\left(2z+\sqrt{4z^2+1}\right)+C$, which agrees with $\sinh^{-1}(2z)$ up to a constant."""
Q = "Question: Evaluate $\\displaystyle\\int \\frac{dz}{\\sqrt{z^2+\\frac{1}{4}}}$.\n"
SOL = (
    "Solution: Substitute $z = \\frac{1}{2}\\sinh\\theta$, so $dz = \\frac{1}{2}\\cosh\\theta\\,d\\theta$. "
    "Since $\\sqrt{\\frac14 + \\frac14\\sinh^2\\theta} = \\frac12\\cosh\\theta$, the integrand becomes $1$, "
    "so the integral is $\\theta + C$. Returning to $z$, $\\theta = \\sinh^{-1}(2z)$.\n\n"
    "The answer is $\\boxed{\\sinh^{-1}(2z) + C}$."
)
QA = Q + SOL
QN = "Evaluate $\\int_0^1 x e^{x}\\,dx$."
LONG = {"question": QN, "answer": "1"}
TRACE = (
    "We want $\\int_0^1 x e^x dx$. Integration by parts with $u = x$, $dv = e^x dx$ gives $du = dx$, $v = e^x$. "
    "So the integral is $[x e^x]_0^1 - \\int_0^1 e^x dx = e - (e - 1) = 1$. Wait, let me double-check: "
    "$[xe^x]_0^1 = e - 0 = e$ and $\\int_0^1 e^x dx = e - 1$. So $e - (e-1) = 1$. Yes.\n\n"
)
J = (
    "The extract is a forum thread about evaluating an integral with trigonometric and hyperbolic substitutions. "
    "It shows some problem solving, but it is cluttered with forum boilerplate and the level is beyond 12th grade "
    "in parts."
)
S = ValidationSettings()
LANG = v.LanguageCheck(("en",), 0.5)


def run(
    task: str, text: str, reasoning: str = "", source: str = PAGE, metadata: dict | None = None
) -> Verdict:
    rollout = {"text": text, "reasoning": reasoning, "finish_reason": "stop", "usage": {}}
    if task == "longcot":
        source, metadata = QN, LONG if metadata is None else metadata
    return validate_rollout(task, rollout, source, metadata or {}, S, LANG)


# --- one normalisation for every task: thinking moved out, chatter and wrappers off, and the row says so ---

THINK = "<think>\nOkay, the user wants me to clean this forum thread. Let me keep the integral.\n</think>\n\n"
WRAPPED = [
    ("Sure! Here is the refined text:\n\n{}", "preamble"),
    ("Here's a cleaned-up version of the web page, rewritten as a self-contained educational text:\n\n---\n\n{}",
     "preamble"),
    ("{}\n\nLet me know if you'd like me to add more worked examples!", "signoff"),
    ("```markdown\n{}\n```", "fence"),
    ("<<<\n{}\n>>>", "delimiters"),
    (THINK + "{}", "think"),
    ("<think>\n\n</think>\n\n{}", "think"),  # Qwen3 with thinking off
    ("Okay, the user wants me to rewrite this forum thread; drop the join dates.\n</think>\n\n{}", "think"),  # R1
    ("Sure! Here is the rewritten page:\n\n```markdown\n{}\n```\n\nI hope this helps!", "fence,preamble,signoff"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("wrapper", "cleaned"), WRAPPED, ids=[c + str(i) for i, (_, c) in enumerate(WRAPPED)]
)
def test_refine_answer_is_unwrapped_and_the_row_says_what_was_removed(wrapper, cleaned):
    verdict = run("refine", wrapper.format(REF))
    assert verdict.ok, verdict.reason
    assert verdict.fields["text"] == REF
    assert verdict.fields["cleaned"] == cleaned


def test_a_clean_answer_is_left_as_it_is():
    verdict = run("refine", REF)
    assert verdict.ok and verdict.fields["text"] == REF and verdict.fields["cleaned"] == ""


@pytest.mark.parametrize(
    "text",
    [
        "Here are the main results:\n\n$$a^2+b^2=c^2$$\n\nfor a right triangle.",  # a page's own opening line
        "Certainly the best-known case is $3^2+4^2=5^2$:\n\nit is the smallest.",
        "Here is the proof: take $n = 2k$.\n\nThen $n^2 = 4k^2$ is even.",  # not a line of its own
        "The sum is $6$.\n\nLet me know $x$ first: if $x = 2$, then $y = 3$.",  # the last paragraph is maths
        "```python\nprint(2 + 3)\n```",  # a code block, not a fence around prose
        "```\nfirst block\n```\n\nThen\n\n```\nsecond block\n```",  # two blocks, not one around the answer
        "A line with </think> in the middle of the text? No: a lone tag only ends reasoning before it.",
        # a page's own closing and opening words (review of the change: these were stripped, several in a row)
        "Theorem. Every odd square is 1 mod 8.\n\nFeel free to try the exercises below.",
        "Intro.\n\nIf you have any questions about the proof, ask in the forum.",
        "Body of page.\n\nFeel free to skip ahead.\n\nLet me know the answer you get in the comments.",
        "Here is the solution:\nWe add the numbers.\n\nSo the sum is even.",
        "Okay, let us find the answer:\nWe add.",
        "Here is the text of Problem 3:\nLet n be odd.",
        "Below is the answer table.\n---\nrow",
    ],
)
def test_cleaning_does_not_touch_content(text):
    out, reasoning, cleaned = clean_output(text)
    if "</think>" in text:
        assert cleaned == ["think"]  # documented: before a lone </think> is reasoning
        return
    assert (out, reasoning, cleaned) == (text, "", [])


@pytest.mark.parametrize(
    "text",
    [
        "Sure! Here's a question based on the web page:\n\n" + QA,
        "Here is a math question from the page, with a step-by-step solution.\n\n**Question:** "
        + Q[len("Question: ") :]
        + "\n**Solution:** "
        + SOL[len("Solution: ") :],
        QA + "\n\nI hope this helps! Let me know if you have any other questions.",
        "```\n" + QA + "\n```",
        "<think>\nThe page is about an integral. I'll use the hyperbolic substitution.\n</think>\n\n" + QA,
    ],
    ids=["preamble", "preamble-bold-labels", "signoff", "fence", "think"],
)
def test_qa_finds_its_labels_after_chatter_and_drops_the_chatter(text):
    verdict = run("qa", text)
    assert verdict.ok, verdict.reason
    assert verdict.fields["answer"] == "\\sinh^{-1}(2z) + C"
    assert verdict.fields["text"].startswith("Question: Evaluate")
    assert verdict.fields["text"].endswith("$\\boxed{\\sinh^{-1}(2z) + C}$.")
    assert verdict.fields["cleaned"]


def test_longcot_drops_chatter_and_keeps_one_think_block():
    verdict = run(
        "longcot",
        "Sure! Let's solve this step by step.\n\n" + TRACE + "The final answer is $\\boxed{1}$.\n\n"
        "Let me know if you have any questions!",
    )
    assert verdict.ok, verdict.reason
    solution = verdict.fields["text"].split("\nSolution: ", 1)[1]
    assert solution.startswith("Let's solve") and solution.endswith("$\\boxed{1}$.")
    # R1-distill: the chat template opened <think> in the prompt, the answer holds only its closing tag
    r1 = run(
        "longcot", "Okay, so I need to evaluate it.\n" + TRACE + "</think>\n\nBy parts, it is $\\boxed{1}$."
    )
    assert r1.ok, r1.reason
    solution = r1.fields["text"].split("\nSolution: ", 1)[1]
    assert solution.startswith("<think>\nOkay, so I need") and solution.count("</think>") == 1
    assert solution.endswith("</think>\n\nBy parts, it is $\\boxed{1}$.") and r1.fields["cleaned"] == "think"


def test_score_reads_the_answer_not_the_thinking():
    think = "<think>\nCriterion 1 yes, 2 yes, 3 yes. maybe final score: 4? no.\n</think>\n\n"
    verdict = run("score", think + J + "\n\nFinal score: 3")
    assert verdict.ok and verdict.fields["math_score_llm"] == 3
    assert verdict.fields["score_justification"] == J and verdict.fields["cleaned"] == "think"
    # a long thinking block (Qwen3 without a reasoning parser) is no longer a 2,000-character justification
    long_think = "<think>\n" + " ".join(f"Criterion {i % 5 + 1}: point {i} considered." for i in range(150))
    verdict = run("score", long_think + "\n</think>\n\n" + J + "\n\nFinal score: 3")
    assert verdict.ok, verdict.reason
    assert verdict.fields["score_justification"] == J


# --- two QA pairs in one answer: the first is kept, cut before the second ---


@pytest.mark.parametrize(
    "text",
    [
        QA
        + "\n\nQuestion: What is $\\sinh^{-1}(0)$?\nSolution: Since $\\sinh 0 = 0$, $\\sinh^{-1}(0) = \\boxed{0}$.",
        "1. " + Q + "   " + SOL + "\n\n2. Question: Compute $\\int \\sec x\\,dx$.\n   Solution: It is "
        "$\\ln|\\sec x+\\tan x|+C$, so $\\boxed{\\ln|\\sec x + \\tan x| + C}$.",
    ],
    ids=["two-pairs", "numbered-pairs"],
)
def test_qa_with_two_pairs_keeps_the_first(text):
    verdict = run("qa", text)
    assert verdict.ok, verdict.reason
    assert verdict.fields["answer"] == "\\sinh^{-1}(2z) + C"
    solution = verdict.fields["text"].split("\nSolution: ", 1)[1]
    assert "Question" not in solution and solution.endswith("$\\boxed{\\sinh^{-1}(2z) + C}$.")
    assert "extra_pairs" in verdict.fields["cleaned"]


# --- template echoes ---


@pytest.mark.parametrize(
    ("task", "text"),
    [
        ("qa", "Question: <the question>\nSolution: <the step-by-step solution ending in \\boxed{ANSWER}>"),
        ("qa", Q + "Solution: Substitute $z=\\frac12\\sinh\\theta$ and simplify to get $\\theta + C$, i.e. \\boxed{ANSWER}."),
        ("qa", build_messages("qa", PAGE)[0]["content"]),
        ("refine", build_messages("refine", PAGE)[0]["content"]),  # 0.85 of its 3-grams are the page's
        ("longcot", "Problem:\n" + QN + "\n\nThe final answer is \\boxed{ANSWER}."),
        ("score", J + "\n\nFinal score: <total points>"),
    ],
    ids=["qa-template", "qa-ANSWER", "qa-prompt", "refine-prompt", "longcot-ANSWER", "score-placeholder"],
)  # fmt: skip
def test_template_echoes_are_rejected(task, text):
    verdict = run(task, text)
    assert not verdict.ok and verdict.reason == "prompt_echo"


def test_a_score_justification_quoting_a_criterion_is_not_an_echo():
    quote = (
        "Award a third point if the extract demonstrates problem solving or logical reasoning in a mathematical "
        "context, even if it lacks step-by-step explanations."
    )
    verdict = run("score", J + " " + quote + "\n\nFinal score: 3")
    assert verdict.ok and verdict.fields["math_score_llm"] == 3


# --- longcot: the final answer, after the reasoning, must hold the box ---


@pytest.mark.parametrize(
    ("text", "reasoning", "reason"),
    [
        ("", TRACE + "So \\boxed{1}.", "empty"),  # reasoning_content only
        ("<think>\n" + TRACE + "So the answer should be \\boxed{1}. Hmm, let me verify: the antiderivative is", "",
         "empty"),  # unclosed, yet finish_reason stop
        ("By parts, the integral is 1.", TRACE + "So \\boxed{1}.", "no_boxed_answer"),
    ],
    ids=["reasoning-only", "unclosed-think", "box-in-reasoning-only"],
)  # fmt: skip
def test_longcot_without_a_final_boxed_answer_is_dropped(text, reasoning, reason):
    verdict = run("longcot", text, reasoning=reasoning)
    assert not verdict.ok and verdict.reason == reason


def test_longcot_with_reasoning_and_a_final_answer_is_kept():
    verdict = run("longcot", "By parts, the integral is $\\boxed{1}$.", reasoning=TRACE)
    assert verdict.ok and verdict.answer == "1" and verdict.fields["answer_check"] == "match"


# --- displayed equations are not a loop ---

DERIVATION = r"""## Deriving the reduction formula

Let $I_n=\int_0^1 x^n e^x\,dx$. Integrating by parts with $u=x^n$, $dv=e^x dx$:
$$
I_n = \left[x^n e^x\right]_0^1 - n\int_0^1 x^{n-1}e^x\,dx
$$
$$
I_n = e - n I_{n-1}
$$
With $I_0 = e-1$:
$$
I_1 = e - (e-1) = 1
$$
$$
I_2 = e - 2 I_1 = e - 2
$$
$$
I_3 = e - 3 I_2 = 6 - 2e
$$
So $I_3 = 6-2e \approx 0.5634$."""


def test_display_equations_on_their_own_lines_are_not_a_loop():
    assert not v.is_degenerate(DERIVATION)
    aligned = "\n".join(f"\\begin{{aligned}}\nx_{i} &= {i}\n\\end{{aligned}}" for i in range(6))
    assert not v.is_degenerate("Values:\n" + aligned)
    source = (
        DERIVATION.replace("$$\n", "$$").replace("\n$$", "$$")
        + "\nPosted by bob | Reply | Quote | Share\n" * 3
    )
    verdict = run("refine", DERIVATION, source=source)
    assert verdict.ok, verdict.reason
    # a line of words repeated is still a loop
    assert v.is_degenerate("\n".join(["Let me check again."] * 6 + ["x = 1", "y = 2", "z = 3"]))


# --- scores as models write them ---


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("Final score: 3", 3), ("Score: 3/5", 3), ("**Score**: 3", 3), ("Total score: 3", 3),
        ("Overall I'd rate this 3 out of 5.", 3), ("The final score is 3.", 3), ("Final score: <3>", 3),
        ("Final score: $\\boxed{3}$", 3), ("Final score (out of 5): 3", 3), ("Final score - 3", 3),
        ("**Final score:** 3", 3), ("Final Score: 3 / 5", 3), ("Final score:\n3", 3), ("Final score: 3.0", 3),
        ("Final score: 3 points", 3), ("Final score: three", 3), ("Final Score: 5/5", 5), ("Final score: 0", 0),
        # the first explicit final score, not a later mention
        ("Final score: 3\n\n(With clearer step-by-step explanations it could reach a final score 5.)", 3),
        ("Criterion 4: score: 1.\nCriterion 5: score: 0.\n\nTotal score: 3", 3),  # the last of other statements
        # not this scale, not an integer, out of range: no score
        ("Final score: 4/10", None), ("Final score: 6/10", None), ("Final score: 2.5", None),
        ("Final score: 7", None), ("It is good.\nScore: high", None),
    ],
)  # fmt: skip
def test_score_forms(answer, score):
    assert v.parse_score(J + "\n\n" + answer) == score
    verdict = run("score", J + "\n\n" + answer)
    assert (verdict.fields.get("math_score_llm") if verdict.ok else None) == score
    if verdict.ok:  # what comes before the score statement's line (or sentence)
        assert verdict.fields["score_justification"].startswith(J)
        assert verdict.fields["score_justification"] == J or "Criterion" in answer
    else:
        assert verdict.reason == "unparseable_score"


def test_a_final_score_in_the_thinking_is_not_the_answers():
    """The thinking's "final score: 4" and the answer's "Total: 3 points" gave 4."""
    verdict = run("score", "<think>\nSo the final score: 4.\n</think>\n\n" + J + "\n\nTotal: 3 points.")
    assert verdict.ok and verdict.fields["math_score_llm"] == 3


def test_an_overlong_justification_is_shortened_not_dropped():
    long = " ".join(f"Point {i}: the extract shows a worked step." for i in range(120))  # ~5,000 characters
    verdict = run("score", long + "\n\nFinal score: 4")
    assert verdict.ok, verdict.reason
    assert verdict.fields["math_score_llm"] == 4
    kept = verdict.fields["score_justification"]
    assert len(kept) <= S.score_justification_chars[1] and long.startswith(kept) and kept.endswith(".")
    assert verdict.fields["cleaned"] == "justification_truncated"


def test_one_sign_off_paragraph_at_most_is_taken_off():
    out, _, cleaned = clean_output("Body.\n\nSome closing words.\n\nI hope this helps!")
    assert out == "Body.\n\nSome closing words." and cleaned == ["signoff"]
    out, _, cleaned = clean_output("Body.\n\nI hope this helps!\n\nLet me know if you want more.")
    assert out == "Body.\n\nI hope this helps!" and cleaned == ["signoff"]
