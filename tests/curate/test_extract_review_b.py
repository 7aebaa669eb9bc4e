"""Defects a reviewer found running the fast extraction over the real pages of ../shared/data/html."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from curate.extract import extract
from tests.curate.test_extract_constructs import MATHJAX, page

HTML = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "html"


def real(name: str) -> str:
    path = HTML / name
    if not path.exists():
        pytest.skip(f"{path} not found: ../shared/data not found")
    return path.read_bytes().decode("utf-8", errors="replace")


@pytest.mark.parametrize("engine", ["fast", "clean"])
def test_ol_start_and_li_value_numbers_are_kept(engine):
    html = page(
        '<ol start="4"><li>four items here</li><li>five items here</li></ol>'
        '<ol><li>one item here</li><li value="9">nine item here</li><li>ten item here</li></ol>'
        "<ol reversed><li>second last</li><li>first last</li></ol>"
    )
    out = extract(html, engine=engine)
    for n, word in (
        (4, "four"),
        (5, "five"),
        (1, "one"),
        (9, "nine"),
        (10, "ten"),
        (2, "second"),
        (1, "first"),
    ):
        assert re.search(rf"{n}\. {word}", out), (n, word, out)


def test_plain_ol_still_numbered_by_the_extractor():
    out = extract(page("<ol><li>alpha item</li><li>beta item</li></ol>"))
    assert "1. alpha item" in out and "2. beta item" in out


def test_ol_start_on_real_pages():
    out = extract(real("math/colah__2014-03-NN-Manifolds-Topology.html"))
    assert "2. We can continually transition from the identity function to the $b$ translation" in out
    assert "3. We can continually transition from the identity function to the pointwise use" in out
    vae = extract(real("math/lilianweng__2018-08-12-vae.html"))
    assert "2. $p_T(.)$ is the" in vae and "4. $p_S(.)$ is the" in vae


def test_mathml_accents_without_accent_attribute_on_real_page():
    out = extract(real("math/mathjaxdemos__mml-chtml.html"))
    assert "\\dot{x}& =\\sigma" in out and "\\dot{z}" in out
    assert "\\vec{\\mathbf{B}}" in out
    assert "\\stackrel{˙}" not in out and "\\stackrel{\\to }" not in out


def test_dollar_math_with_spaces_inside_on_a_tex_page():
    html = page(
        "<p>The sum $ \\sum_i x_i $ is defined for vectors, the size $\\vert\\mathcal{D}\\vert =n $ too.</p>"
        "<p>It costs $5 and $ 10 here, and $ x y $ is no TeX.</p>",
        MATHJAX,
    )
    out = extract(html)
    assert "$\\sum_i x_i$" in out and "$\\vert\\mathcal{D}\\vert =n$" in out
    assert "\\$5 and \\$ 10" in out and "\\$ x y \\$" in out


def test_dollar_math_with_spaces_needs_a_tex_page():
    out = extract(page("<p>The norm $ \\|x\\|^2 $ is defined for vectors in this text.</p>"))
    assert "\\$ \\|x\\|^2 \\$" in out


def test_spaced_dollar_math_on_real_pages():
    gan = extract(real("math/lilianweng__2017-08-20-gan.html"))
    assert "$| \\Theta - \\frac{1}{t} \\sum_{i=1}^t \\Theta_i |^2$" in gan
    vae = extract(real("math/lilianweng__2018-08-12-vae.html"))
    assert "$\\vert\\mathcal{D}\\vert =n$" in vae


def test_math_class_holding_dollar_tex_is_math_without_a_renderer():
    html = page(
        '<p>A sequence <span class="math-inline">$a_n &lt; b$</span> grows, for all'
        ' <span class="math-inline">$n \\in \\mathbb{N}$</span> and <span class="math">$x y$</span>.</p>'
        '<div class="math-display">$\\sum_k k$</div><p>It costs <span class="price">$5</span> only.</p>'
    )
    out = extract(html)
    assert "$a_n < b$" in out and "$n \\in \\mathbb{N}$" in out and "$x y$" in out
    assert "$$\n\\sum_k k\n$$" in out and "\\$5" in out


def test_math_inline_class_on_real_page():
    out = extract(real("math/llmwebkit__math_mathjax_mock.html"))
    assert "\\$n < n+1\\$" not in out and "$n < n+1$" in out
    assert "sequence $(n + 2)$" in out


def test_leading_require_and_macro_definitions_are_stripped_not_the_formula():
    html = page(
        "<p>Testing AMScd: \\(\\require{AMScd} \\begin{CD} A @>f>> B\\end{CD}\\) here.</p>"
        '<p>Norm <script type="math/tex">\\newcommand{\\norm}[1]{\\|#1\\|} \\norm{v}</script> too.</p>'
        '<p>Hidden <script type="math/tex">\\newcommand{\\R}{\\mathbb{R}} \\def\\x#1{x_{#1}} % R</script> preamble.</p>',
        MATHJAX,
    )
    out = extract(html)
    assert "$\\begin{CD} A @>f>> B\\end{CD}$" in out
    assert "$\\norm{v}$" in out
    assert "newcommand" not in out and "\\def" not in out and "% R" not in out


def test_require_on_real_page():
    out = extract(real("math/mathjaxdemos__v2-compatibility.html"))
    assert "Testing AMScd: $\\begin{CD} A @>f>> B\\end{CD}$" in out
    assert "Testing HTML: $\\href{https://www.mathjax.org/}{\\text{a link}}$" in out


@pytest.mark.parametrize(
    "pre",
    [
        "<pre>a = 1<br>b = 2<br/>c = 3</pre>",
        '<pre><div class="line">a = 1</div><div class="line">b = 2</div><div class="line">c = 3</div></pre>',
        "<pre><code><span>a = 1</span><br><span>b = 2</span><br><span>c = 3</span></code></pre>",
    ],
)
def test_pre_lines_from_br_and_block_children(pre):
    out = extract(page(pre))
    assert "```\na = 1\nb = 2\nc = 3\n```" in out


def test_sup_and_sub_inside_code_stay_verbatim():
    out = extract(page("<pre>x<sup>2</sup> + y<sub>i</sub></pre><p>Run <code>a<sup>n</sup></code> now.</p>"))
    assert "x2 + yi" in out and "`an`" in out
    assert "^{" not in out and "_{" not in out


def test_pre_lines_on_real_page():
    out = extract(real("nonmath/readability__v8-blog.html"))
    assert "// add.c\n#include <emscripten.h>\n" in out
    assert "int add(int x, int y) {\n  return x + y;\n}" in out


@pytest.mark.parametrize("engine", ["fast", "clean"])
def test_table_caption_is_a_line_above_the_table(engine):
    html = page(
        "<table><caption>Table 1: measured values</caption><tr><th>a</th><th>b</th></tr>"
        "<tr><td>1</td><td>2</td></tr></table>"
        '<table><caption>Table 2: merged</caption><tr><td colspan="2">A</td></tr><tr><td>1</td><td>2</td></tr></table>'
    )
    out = extract(html, engine=engine)
    assert "Table 1: measured values\n| a | b |" in out
    assert 'Table 2: merged\n<table><tr><td colspan="2">A</td>' in out


def test_table_caption_on_real_page():
    out = extract(real("math/llmwebkit__math_mathjax_latex_7.html"))
    assert "Table $\\PageIndex{1}$\n    | Same signs | Product | Example |" in out
    assert "Table $\\PageIndex{3}$\n    <table><tr><th>Same signs</th>" in out


def test_equation_class_image_with_prose_alt_is_not_math():
    html = page(
        '<p>See the figure. <img class="equation" src="/f.png" alt="Figure 3: loss curve over time"> The loss.</p>'
        '<p>Mass <img class="equation" src="/e.png" alt="E = mc^2"> and '
        '<img class="latex" src="https://s0.wp.com/latex.php?latex=%5Cfrac%7Ba%7D%7Bb%7D" alt="Figure of the fraction a over b">.</p>'
    )
    out = extract(html)
    assert "$Figure" not in out and "Figure 3: loss" not in out
    assert "$E = mc^2$" in out and "$\\frac{a}{b}$" in out
