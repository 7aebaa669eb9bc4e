"""LaTeX pasted without its backslashes (`overline{AB}`, `frac{x^{2}}{4}`, `int_{0}^{1}`, `y^{prime}`) has the
tokens of the LaTeX: a page quoting a test problem so was not found (379 of 461 forum-ASCII problems before).
A command name that can be an English word is a command only right before `{`, `_` or `^`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from curate.decont import BenchmarkIndex, decont_tokens

SAME = [
    ("Find the length of median $\\overline{QM}$.", "Find the length of median overline{QM}."),
    ("Evaluate $\\int_{0}^{1} \\frac{x^{2}}{4} d x$", "Evaluate int_{0}^{1} frac{x^{2}}{4} d x"),
    ("Solve $x^{2} y^{\\prime \\prime}+x y^{\\prime}=0$", "Solve x^{2} y^{prime prime}+x y^{prime}=0"),
    ("Let $\\mathbf{v} \\cdot \\mathbf{w}=2$.", "Let mathbf{v} cdot mathbf{w}=2."),
    ("$\\sum_{n=1}^{\\infty} \\frac{1}{n^{2}}$", "sum_{n=1}^{infty} frac{1}{n^{2}}"),
    ("$\\lim _{x \\rightarrow 0} \\frac{\\sin x}{x}$", "lim _{x rightarrow 0} (sin x)/(x)"),
    ("$\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}$", "begin{pmatrix} 1 \\\\ 2 end{pmatrix}"),
    ("$x \\leqslant -3$ or $\\sec x = \\csc x$", "x leqslant -3 or sec x = csc x"),
    ("$\\hat{y} = \\max_{x} \\text{cost}$", "hat{y} = max_{x} text{cost}"),
]


@pytest.mark.parametrize(("latex", "bare"), SAME)
def test_bare_latex_has_the_tokens_of_the_latex(latex, bare):
    assert decont_tokens(bare) == decont_tokens(latex)


@pytest.mark.parametrize(
    "prose",
    [
        "In the end the sum of the angle and the text in the box is 5 times 3 to 4, with 5 in^2 of prime land.",
        "The triangle is right; a hat, a bar and a dot. Max and min are in the line.",
    ],
)
def test_english_words_that_are_command_names_stay_words(prose):
    assert decont_tokens(prose) == re.findall(r"[a-z]+|[0-9]+", prose.lower())


@pytest.mark.parametrize(
    ("item", "page"),
    [
        (235, "Quick q: Compute: 0.overline{7}-0.overline{4}+0.overline{2}. Express your answer as a common fraction."),
        (99, "If mathbf{a} = begin{pmatrix} 1 \\\\ 1 \\\\ 1 end{pmatrix}, then find the vector mathbf{v} such that "
             "mathbf{a} * mathbf{v} = 2 and mathbf{a} * mathbf{v} = begin{pmatrix} 1 \\\\ -2 \\\\ 1 end{pmatrix}."),
    ],
)  # fmt: skip
def test_a_problem_pasted_without_backslashes_is_found(shared_data: Path, item: int, page: str) -> None:
    index = BenchmarkIndex([shared_data / "bench" / "math500" / "test.jsonl"])
    assert item in [o.item for o in index.find(page)]
