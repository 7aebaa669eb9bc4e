"""The `qa` task on the other question/answer forms instruct models write (a `### Question` heading, `Q:` / `A:`,
`Problem:` / `Solution:`): kept, in the row's one form, while outputs without a clear single pair stay dropped."""

from __future__ import annotations

import pytest

from curate.rewrite import validate as v
from curate.rewrite.tasks import ValidationSettings, Verdict, validate_rollout

SOURCE = (
    "Math Help Forum > Algebra\n\nhow do i solve 2x + 3 = 11?? posted by mathfan\n"
    "Reply: subtract 3 from both sides to get 2x = 8, then divide by 2, so x = 4. Check: 2*4 + 3 = 11.\n"
    "Follow Math Help Forum on Facebook and Google+"
)
QUESTION = "Solve the equation $2x + 3 = 11$ for $x$."
SOLUTION = (
    "Subtract 3 from both sides to get $2x = 8$. Dividing both sides by 2 gives $x = 4$. "
    "Checking: $2 \\cdot 4 + 3 = 11$. The answer is $\\boxed{4}$."
)
NO_BOX = SOLUTION.replace("$\\boxed{4}$", "4")
S = ValidationSettings()
LANG = v.LanguageCheck(("en",), 0.5)


def run(text: str) -> Verdict:
    rollout = {"text": text, "finish_reason": "stop", "usage": {}}
    return validate_rollout("qa", rollout, SOURCE, {}, S, LANG)


FORMS = {
    "heading": f"### Question\n{QUESTION}\n\n### Answer\n{SOLUTION}",
    "heading-solution": f"## Question\n\n{QUESTION}\n\n## Solution\n\n{SOLUTION}",
    "bold-heading": f"**Problem**\n{QUESTION}\n\n**Solution**\n{SOLUTION}",
    "numbered-heading": f"### Question 1\n{QUESTION}\n\n### Answer 1\n{SOLUTION}",
    "q-a": f"Q: {QUESTION}\nA: {SOLUTION}",
    "q-a-bold": f"**Q:** {QUESTION}\n\n**A:** {SOLUTION}",
    "problem-solution": f"Problem: {QUESTION}\nSolution: {SOLUTION}",
    "problem-answer-bold": f"**Problem:** {QUESTION}\n**Answer:** {SOLUTION}",
    "preamble-heading": f"Here is a question based on the page.\n\n### Question\n{QUESTION}\n\n### Answer\n{SOLUTION}",
    "heading-then-label": f"## Question\nQuestion: {QUESTION}\n## Solution\n{SOLUTION}",
}


@pytest.mark.parametrize("text", list(FORMS.values()), ids=list(FORMS))
def test_other_qa_forms_are_kept_in_the_rows_form(text):
    verdict = run(text)
    assert verdict.ok, verdict.reason
    assert verdict.fields["question"] == QUESTION
    assert verdict.fields["text"] == f"Question: {QUESTION}\nSolution: {SOLUTION}"
    assert verdict.fields["answer"] == "4"


def test_a_second_q_a_pair_is_cut_off():
    verdict = run(f"Q: {QUESTION}\nA: {SOLUTION}\n\nQ: What is $x + 1$?\nA: It is $\\boxed{{5}}$.")
    assert verdict.ok, verdict.reason
    assert verdict.fields["answer"] == "4" and "extra_pairs" in verdict.fields["cleaned"]


def test_a_solutions_own_problem_line_stays_under_question():
    sol = "Let $y = 2x$.\nProblem: find $y$ first: $y = 8$, so $x = \\boxed{4}$."
    verdict = run(f"Question: {QUESTION}\nSolution: {sol}")
    assert verdict.ok, verdict.reason
    assert verdict.fields["text"].endswith(sol)


def test_a_page_problem_line_under_question_stays_in_the_question():
    """A model that keeps the page's own `Problem:` line under its `Question:` label wrote one question: only a
    second label of the first one's name is a second question (this row was dropped as wrong_format)."""
    text = f"Question: Solve the page's exercise.\nProblem: {QUESTION}\nSolution: {SOLUTION}"
    verdict = run(text)
    assert verdict.ok, verdict.reason
    assert f"Problem: {QUESTION}" in verdict.fields["text"]


MALFORMED = {
    "only-a-question": (f"### Question\n{QUESTION}", "wrong_format"),
    "only-a-q": (f"Q: {QUESTION}", "wrong_format"),
    "no-answer-part": (f"Problem: {QUESTION}\nSolution:", "wrong_format"),
    "empty-answer-heading": (f"### Question\n{QUESTION}\n\n### Answer\n", "wrong_format"),
    "two-questions": (
        f"Question: {QUESTION}\nQuestion: What is $x+1$?\nSolution: {SOLUTION}",
        "wrong_format",
    ),
    "two-q": (f"Q: {QUESTION}\nQ: What is $x+1$?\nA: {SOLUTION}", "wrong_format"),
    "two-headings": (
        f"### Question\n{QUESTION}\n### Question\nWhat is $x+1$?\n### Answer\n{SOLUTION}",
        "wrong_format",
    ),
    "no-labels": (f"{QUESTION}\n\n{SOLUTION}", "wrong_format"),
    # `A:` answers `Q:` only: after `Problem:` it is an option, and there is no solution label
    "problem-with-options": (
        f"Problem: {QUESTION}\nA: 3\nB: 4\nThe answer is $\\boxed{{B}}$.",
        "wrong_format",
    ),
    # a plain word alone on a line is no heading
    "plain-words": (f"Question\n{QUESTION}\nAnswer\n{SOLUTION}", "wrong_format"),
    "q-dot": (f"Q. {QUESTION}\nA: {SOLUTION}", "wrong_format"),
    "no-box": (f"Q: {QUESTION}\nA: {NO_BOX}", "no_boxed_answer"),
}


@pytest.mark.parametrize(("text", "reason"), list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_outputs_are_still_dropped(text, reason):
    verdict = run(text)
    assert not verdict.ok and verdict.reason == reason, verdict
