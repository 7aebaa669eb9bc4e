"""Rewriter validation on realistic hand-written outputs: every task, every rejection reason."""

from __future__ import annotations

import pytest

from curate.rewrite import validate as v
from curate.rewrite.tasks import (
    REASONS,
    TASKS,
    ValidationSettings,
    Verdict,
    build_messages,
    decide,
    prompt_template,
    validate_rollout,
)

SOURCE = (
    "Home | Forum | Login\n\nHow do I solve 2x + 3 = 11? Posted by mathfan 3 years ago.\n"
    "Reply: subtract 3 from both sides to get 2x = 8, then divide by 2, so x = 4. "
    "You can check it: 2*4 + 3 = 11. Hope this helps! Share on Facebook. Cookie policy."
)
REFINED = (
    "## Solving a linear equation\n\nWe want to solve $2x + 3 = 11$.\n\n"
    "1. Subtract 3 from both sides: $2x = 8$.\n2. Divide both sides by 2: $x = 4$.\n\n"
    "Check: substituting gives $2 \\cdot 4 + 3 = 11$, so $x = 4$ is the solution."
)
QA = (
    "Question: Solve the equation $2x + 3 = 11$ for $x$.\n"
    "Solution: Subtract 3 from both sides to get $2x = 8$. Dividing both sides by 2 gives $x = 4$. "
    "Checking: $2 \\cdot 4 + 3 = 11$. The answer is \\boxed{4}."
)
LONGCOT = (
    "We need $x$ with $2x + 3 = 11$. Let me first try guessing: if $x = 3$ then $2 \\cdot 3 + 3 = 9$, too small. "
    "If $x = 5$ then $13$, too big. So $x$ is between 3 and 5; let me solve it properly instead. "
    "Subtracting 3 from both sides gives $2x = 8$, and dividing by 2 gives $x = 4$. "
    "Wait, let me double-check the subtraction: $11 - 3 = 8$, yes. And $8 / 2 = 4$. "
    "Verification: $2 \\cdot 4 + 3 = 8 + 3 = 11$. Correct.\n\nSo the final answer is \\boxed{4}."
)
SCORE = (
    "The extract is a forum post that solves a linear equation step by step and checks the result, which is "
    "appropriate for middle school, though it is surrounded by navigation and social media boilerplate.\n\n"
    "Final score: 4"
)
QUESTION = {"question": "Solve $2x + 3 = 11$ for $x$.", "answer": "4"}
S = ValidationSettings()
LANG = v.LanguageCheck(("en",), 0.5)


def check(task: str, text: str, metadata: dict | None = None, source: str = SOURCE, **rollout) -> Verdict:
    rollout = {"text": text, "finish_reason": "stop", "usage": {}, **rollout}
    return validate_rollout(task, rollout, source, metadata or {}, S, LANG)


@pytest.mark.parametrize(
    ("task", "text", "metadata", "source"),
    [
        ("refine", REFINED, {}, SOURCE),
        ("qa", QA, {}, SOURCE),
        ("longcot", LONGCOT, QUESTION, QUESTION["question"]),
        ("score", SCORE, {}, SOURCE),
    ],
)
def test_good_outputs_are_kept(task, text, metadata, source):
    verdict = check(task, text, metadata, source)
    assert verdict.ok, verdict.reason
    assert verdict.fields["text"].strip()


def test_kept_fields_per_task():
    qa = check("qa", QA)
    assert qa.fields["question"] == "Solve the equation $2x + 3 = 11$ for $x$."
    assert qa.fields["answer"] == "4" and qa.fields["answer_check"] == "no_reference"
    long = check("longcot", LONGCOT, QUESTION, QUESTION["question"])
    assert long.fields["answer_check"] == "match"
    assert long.fields["text"].startswith("Question: Solve $2x + 3 = 11$")
    score = check("score", SCORE)
    assert score.fields["math_score_llm"] == 4
    assert score.fields["text"] == SOURCE  # the classifier trains on the page, labelled with the score
    assert score.fields["score_justification"].startswith("The extract is a forum post")


@pytest.mark.parametrize(
    "first, second",
    [
        ("**Question:**", "**Solution:**"),  # the common Markdown form: its closing ** ended up in the text
        ("**Question**:", "**Answer**:"),
        ("## Question:", "## Solution:"),
        ("question.", "solution."),
    ],
)
def test_qa_labels_in_markdown_leave_no_stars_in_the_row(first, second):
    text = QA.replace("Question:", first).replace("Solution:", second)
    qa = check("qa", text)
    assert qa.ok, qa
    assert qa.fields["question"] == "Solve the equation $2x + 3 = 11$ for $x$."
    assert qa.fields["text"].startswith("Question: Solve the equation") and "**" not in qa.fields["text"]
    assert "\nSolution: Subtract 3 from both sides" in qa.fields["text"]


def test_qa_keeps_bold_text_that_is_not_a_label():
    text = "Question: **Bob** has $2x + 3 = 11$ apples.\nSolution: **Bob** subtracts 3. The answer is \\boxed{4}."
    qa = check("qa", text)
    assert qa.ok, qa
    assert qa.fields["question"] == "**Bob** has $2x + 3 = 11$ apples."
    assert qa.fields["text"].endswith("Solution: **Bob** subtracts 3. The answer is \\boxed{4}.")


def test_longcot_keeps_a_separate_reasoning_trace():
    verdict = check(
        "longcot", "So the answer is \\boxed{4}.", QUESTION, QUESTION["question"], reasoning=LONGCOT
    )
    assert verdict.ok
    assert "<think>" in verdict.fields["text"] and verdict.answer == "4"


REJECTIONS = [
    ("request_failed", "qa", {"error": "request_failed", "message": "timed out"}),
    ("bad_request", "qa", {"error": "bad_request", "message": "BadRequestError: prompt too long"}),
    ("malformed_response", "qa", {"error": "malformed_response", "message": "not text: content int"}),
    ("malformed_response", "qa", {"text": 12345}),  # raw/ of an older version
    ("empty", "qa", {"text": "   \n  "}),
    ("truncated", "refine", {"text": REFINED[:80], "finish_reason": "length"}),
    ("degenerate_repetition", "longcot", {"text": "Let me check again. " * 60 + "\\boxed{4}"}),
    ("prompt_echo", "qa", {"text": "Question: <the question>\nSolution: <the step-by-step solution ending in \\boxed{ANSWER}>"}),
    ("unparseable_score", "score", {"text": "This page is about fractions and is quite good.\nScore: high"}),
    ("unparseable_score", "score", {"text": "Nice explanations of limits.\nFinal score: 7"}),
    ("wrong_format", "qa", {"text": "The page asks to solve 2x + 3 = 11. The answer is \\boxed{4}."}),
    ("no_boxed_answer", "qa", {"text": QA.replace("\\boxed{4}", "4")}),
    ("no_boxed_answer", "longcot", {"text": LONGCOT.replace("\\boxed{4}", "4")}),
    ("copy_of_input", "refine", {"text": SOURCE}),
    ("length_out_of_bounds", "refine", {"text": "Solve $2x+3=11$: $x=4$."}),
    ("length_out_of_bounds", "qa", {"text": "Question: Solve $2x+3=11$.\nSolution: \\boxed{4}"}),
    ("wrong_language", "refine", {"text": (
        "## Résoudre une équation linéaire\n\nNous voulons résoudre $2x + 3 = 11$. On soustrait 3 des deux "
        "côtés, ce qui donne $2x = 8$, puis on divise par 2 : $x = 4$. On vérifie que le résultat est juste "
        "en remplaçant dans l'équation de départ, et on obtient bien onze.")}),
    ("answer_mismatch", "longcot", {"text": LONGCOT.replace("\\boxed{4}", "\\boxed{5}")}),
    ("duplicate_id", "qa", {"error": "duplicate_id", "message": "id web-1 was read before"}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("reason", "task", "rollout"), REJECTIONS, ids=[f"{r}-{t}" for r, t, _ in REJECTIONS]
)
def test_each_rejection_reason(reason, task, rollout):
    metadata = QUESTION if task == "longcot" else {}
    source = QUESTION["question"] if task == "longcot" else SOURCE
    rollout = {"finish_reason": "stop", **rollout}
    verdict = validate_rollout(task, rollout, source, metadata, S, LANG)
    assert not verdict.ok
    assert verdict.reason == reason


def test_every_reason_is_covered_by_a_test():
    covered = {r for r, _, _ in REJECTIONS} | {"self_consistency"}  # self-consistency: test below
    assert covered == set(REASONS)


def test_self_consistency_majority_and_disagreement():
    a = Verdict(True, fields={"text": "a"}, answer="4")
    b = Verdict(True, fields={"text": "b"}, answer="\\frac{8}{2}")  # math-verify: the same answer as 4
    c = Verdict(True, fields={"text": "c"}, answer="5")
    bad = Verdict(False, "truncated")
    kept, agreement = decide("qa", [c, a, b, bad], S)
    assert kept is a and agreement == 0.5
    dropped, agreement = decide("qa", [a, c, Verdict(True, answer="7"), bad], S)
    assert not dropped.ok and dropped.reason == "self_consistency" and agreement == 0.25
    none_ok, _ = decide("qa", [bad, Verdict(False, "empty"), Verdict(False, "truncated")], S)
    assert none_ok.reason == "truncated"


def test_last_boxed_handles_nesting_and_unclosed():
    assert v.last_boxed("first \\boxed{1} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert v.last_boxed("answer \\boxed{3} and a broken \\boxed{4") == "3"
    assert v.last_boxed("no box here") is None


def test_parse_score_formats():
    assert v.parse_score("Good.\n**Final score:** 3") == 3
    assert v.parse_score("Final Score: 5/5") == 5
    assert v.parse_score("Final score: 0") == 0
    assert v.parse_score("Final score: 2.5") is None


def test_reference_answer_sources():
    assert v.reference_answer({"answer": "She pays 3 * 4 = 12 dollars.\n#### 1,200"}) == "1200"
    assert v.reference_answer({"solution": "so it is $\\boxed{\\frac{1}{3}}$."}) == "\\frac{1}{3}"
    assert v.reference_answer({"text": "no answer"}) is None
    assert v.answers_match("0.5", "\\frac{1}{2}")
    assert not v.answers_match("2", "3")


def test_prompts_are_versioned_files_with_a_slot():
    for task in TASKS:
        assert "{text}" in prompt_template(task, "v1")
    messages = build_messages("qa", "x" * 50_000, max_input_chars=1000)
    assert messages[0]["role"] == "user" and "x" * 1000 in messages[0]["content"]
    assert "x" * 1001 not in messages[0]["content"]
    with pytest.raises(FileNotFoundError):
        prompt_template("qa", "v999")


def _math500(shared_data, n: int = 60) -> list[dict]:
    import json

    lines = (shared_data / "bench" / "math500" / "test.jsonl").read_text().splitlines()[:n]
    return [json.loads(line) for line in lines]


def test_real_math500_solutions_pass_as_qa_and_wrong_references_are_caught(shared_data):
    """Real MATH500 solutions written as QA outputs: kept with answer_check=match; a shifted reference is caught."""
    records = _math500(shared_data)
    kept = mismatched = 0
    for i, rec in enumerate(records):
        text = f"Question: {rec['problem']}\nSolution: {rec['solution']}"
        source = "A web page about: " + rec["problem"]
        verdict = check("qa", text, {"answer": rec["answer"]}, source)
        kept += verdict.ok and verdict.fields["answer_check"] == "match"
        other = records[(i + 1) % len(records)]["answer"]
        if other != rec["answer"]:
            wrong = check("qa", text, {"answer": other}, source)
            mismatched += wrong.reason == "answer_mismatch"
    assert kept >= 0.9 * len(records), f"only {kept}/{len(records)} real solutions kept"
    assert mismatched >= 0.9 * (len(records) - 1), f"only {mismatched} wrong references caught"


@pytest.mark.parametrize(
    ("content", "reasoning", "expected"),
    [
        ([{"type": "text", "text": "Question: a?\n"}, {"type": "text", "text": "Solution: \\boxed{1}"}], None,
         {"text": "Question: a?\nSolution: \\boxed{1}", "reasoning": ""}),
        ("Question: a \ud800 b?", "think \udfff", {"text": "Question: a \ufffd b?", "reasoning": "think \ufffd"}),
        (12345, None, {"error": "malformed_response"}),
        ("x", 5, {"error": "malformed_response"}),
        ([{"type": "image_url"}], None, {"error": "malformed_response"}),
    ],
)  # fmt: skip
def test_rollout_takes_text_of_parts_cleans_surrogates_and_counts_non_text(content, reasoning, expected):
    """A list of parts is text; an int is counted (not a crash in validation); a lone surrogate, which datatrove
    cannot write (the document vanished), becomes U+FFFD."""
    import asyncio
    import json
    from types import SimpleNamespace

    from datatrove.pipeline.inference.types import InferenceResult

    from curate.rewrite.rollout import rewrite_rollout

    async def generate(payload):
        return InferenceResult(text=content, finish_reason="stop", usage={}, reasoning=reasoning)

    doc = SimpleNamespace(id="d", text="Some page.", metadata={})
    out = asyncio.run(rewrite_rollout(doc, generate, task="qa", prompt_version="v1", sampling={}))
    assert {k: out[k] for k in expected} == expected
    json.dumps(out).encode()  # writable as UTF-8
    if "error" in expected:
        assert validate_rollout("qa", out, SOURCE, {}, S, LANG).reason == "malformed_response"


def test_validation_compares_with_the_part_of_a_long_input_the_model_was_given():
    """The prompt carries the first max_input_chars: a copy of that part is a copy, a refine of it has the right
    length, and a score row holds the text that was scored."""
    from datatrove.data import Document

    from curate.rewrite.steps import ROLLOUTS_KEY, RewriteValidator

    page = " ".join(f"Step {i}: add {i} and {i + 1} to get {2 * i + 1}." for i in range(200))  # ~6,000 chars
    given = page[:1000].strip()

    def run(task: str, output: str):
        validator = RewriteValidator(
            task, "v1", "m", "{}", ValidationSettings(languages=()), max_input_chars=1000
        )
        doc = Document(
            text=page, id="d", metadata={ROLLOUTS_KEY: [{"text": output, "finish_reason": "stop"}]}
        )
        kept = validator.process(doc)
        return kept, dict(validator.stats.stats)

    kept, stats = run("refine", given)  # verbatim copy of what the model saw
    assert kept is None and "dropped_copy_of_input" in stats
    refined = given.replace("Step", "In step").replace("to get", "which gives")  # a faithful rewrite of it
    kept, _ = run("refine", refined)
    assert kept is not None and kept.text == refined
    kept, _ = run("score", "Clear worked arithmetic.\nFinal score: 3")
    assert kept is not None and kept.text == given and kept.metadata["math_score_llm"] == 3
