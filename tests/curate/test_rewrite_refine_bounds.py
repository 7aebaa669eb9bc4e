"""The refine length bounds on a real page: a faithful, condensed rewrite of a forum thread is kept, a one-line
summary of it is not."""

from __future__ import annotations

import json

import pytest

from curate.extract import extract
from curate.rewrite import validate as v
from curate.rewrite.tasks import ValidationSettings, model_input, validate_rollout

# A faithful refine of the thread (its question, the hyperbolic substitution, the answer without sinh):
# MegaMath-Web-Pro style, the forum chrome and chatter left out.
REFINED = r"""# Integrating $\dfrac{1}{\sqrt{z^2 + 1/4}}$

A student asked how to evaluate $\int \frac{dz}{\sqrt{z^2+\frac{1}{4}}}$. The substitution $z=\frac{1}{2}\tan x$,
$dz=\frac{1}{2}\frac{dx}{\cos^2 x}$, turns it into $\int \frac{dx}{\cos x}$; the question is how to continue
without $\sec x$.

## A hyperbolic substitution

Put $z = \frac{1}{2}\sinh \theta$, so $dz = \frac{1}{2}\cosh\theta\, d\theta$. Since $1+\sinh^2\theta=\cosh^2\theta$,

$$I = \int\frac{\frac{1}{2}\cosh\theta \, d\theta}{\frac{1}{2}\cosh\theta} = \int d\theta = \theta + C,$$

and $\theta = \sinh^{-1}(2z)$ gives $I = \sinh^{-1}(2z) + C$, the answer a computer algebra system gives too.

## Without hyperbolic functions

$\int \frac{dx}{\cos x} = \int \frac{\cos x\,dx}{1-\sin^2 x}$; with $t=\sin x$ this is
$\int \frac{dt}{1-t^2} = \frac{1}{2}\ln\left|\frac{1+t}{1-t}\right| + C$, which back-substituted equals
$\ln\left(2z+\sqrt{4z^2+1}\right)+C$."""


@pytest.fixture(scope="module")
def thread(shared_data):
    for line in (shared_data / "extraction_gold" / "pages.jsonl").open(encoding="utf-8"):
        page = json.loads(line)
        if page["name"] == "math_mathhelpforum_1":
            return model_input(extract(page["html"], page["url"]))
    pytest.skip("math_mathhelpforum_1 not in extraction_gold/pages.jsonl")


def run(text: str, source: str):
    rollout = {"text": text, "finish_reason": "stop", "usage": {}}
    return validate_rollout(
        "refine", rollout, source, {}, ValidationSettings(), v.LanguageCheck(("en",), 0.5)
    )


def test_a_condensed_refine_of_a_forum_thread_is_kept(thread):
    # the thread's extracted text is mostly forum chrome: the refine is about a fifth of it
    assert 0.1 < len(REFINED) / len(thread) < 0.3
    verdict = run(REFINED, thread)
    assert verdict.ok, verdict.reason


def test_a_one_line_summary_is_still_too_short(thread):
    summary = (
        "The thread evaluates $\\int dz/\\sqrt{z^2+1/4}$ and gets $\\sinh^{-1}(2z)+C$ by a substitution."
    )
    assert run(summary, thread).reason == "length_out_of_bounds"
