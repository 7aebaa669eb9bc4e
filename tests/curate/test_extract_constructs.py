"""Math-aware extraction: one small page per construct, written here."""

from __future__ import annotations

import re

import pytest

from curate.extract import extract

FILLER = (
    "<p>This paragraph is ordinary prose, long enough that the main-content heuristics keep the article.</p>"
)
MATHJAX = '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>'


def page(body: str, head: str = "") -> str:
    return f"<html><head><title>t</title>{head}</head><body><article>{FILLER}{body}{FILLER}</article></body></html>"


def flat(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("engine", ["fast", "clean"])
def test_mathjax_script_tags_inline_and_display(engine):
    html = page(
        '<p>Let <script type="math/tex">x^2 + y^2</script> be the norm.</p>'
        '<script type="math/tex; mode=display">\\int_0^1 f(x)\\,dx</script>'
    )
    out = extract(html, engine=engine)
    assert "$x^2 + y^2$" in out
    assert "$$\n\\int_0^1 f(x)\\,dx\n$$" in out


def test_mathjax_v2_rendered_output_and_preview_are_not_duplicated():
    html = page(
        '<p>Let <span class="MathJax_Preview">x2pre</span><span class="MathJax" id="MathJax-Element-1-Frame">'
        '<span class="math"><span>x</span><span>2rendered</span></span></span>'
        '<script type="math/tex" id="MathJax-Element-1">x^2</script> be.</p>'
    )
    out = extract(html)
    assert "$x^2$" in out
    assert "x2pre" not in out and "2rendered" not in out


def test_mathjax_v3_container_uses_assistive_mathml():
    html = page(
        '<p>Inline <mjx-container class="MathJax" jax="CHTML"><mjx-math class="MJX-TEX"><mjx-mi>GLYPH</mjx-mi>'
        "</mjx-math><mjx-assistive-mml><math><msup><mi>x</mi><mn>2</mn></msup></math></mjx-assistive-mml>"
        "</mjx-container> here.</p>",
        MATHJAX,
    )
    out = extract(html)
    assert "${x}^{2}$" in out
    assert "GLYPH" not in out


@pytest.mark.parametrize(
    "source,expected",
    [
        ("\\(a+b\\)", "$a+b$"),
        ("\\[a+b\\]", "$$\na+b\n$$"),
        ("$$a+b$$", "$$\na+b\n$$"),
        ("$a+b$", "$a+b$"),
    ],
)
def test_tex_left_in_page_text(source, expected):
    out = extract(page(f"<p>We have {source} in the text.</p>", MATHJAX))
    assert expected in out


def test_katex_annotation_inline_and_display():
    html = page(
        '<p>Let <span class="katex"><span class="katex-mathml"><math><semantics><mrow><mi>x</mi></mrow>'
        '<annotation encoding="application/x-tex">x^2</annotation></semantics></math></span>'
        '<span class="katex-html" aria-hidden="true">HTMLGLYPHS</span></span> be.</p>'
        '<span class="katex-display"><span class="katex"><span class="katex-mathml"><math><semantics><mrow/>'
        '<annotation encoding="application/x-tex">\\sum_i a_i</annotation></semantics></math></span>'
        '<span class="katex-html">MOREGLYPHS</span></span></span>'
    )
    out = extract(html)
    assert "$x^2$" in out
    assert "$$\n\\sum_i a_i\n$$" in out
    assert "GLYPHS" not in out


def test_mathml_annotation_then_alttext_then_converter():
    html = page(
        '<p>A <math><semantics><mi>q</mi><annotation encoding="application/x-tex">\\alpha_1</annotation>'
        '</semantics></math>, B <math alttext="\\beta^2"><msup><mi>b</mi><mn>2</mn></msup></math>, '
        'C <math display="block"><mfrac><mn>1</mn><msqrt><mi>n</mi></msqrt></mfrac></math> end.</p>'
    )
    out = extract(html)
    assert "$\\alpha_1$" in out
    assert "$\\beta^2$" in out
    assert "$$\n\\frac{1}{\\sqrt{n}}\n$$" in out


def test_wikipedia_mwe_math_element_once():
    html = page(
        '<p>The value <span class="mwe-math-element"><span class="mwe-math-mathml-inline mwe-math-mathml-a11y" '
        'style="display: none;"><math alttext="{\\displaystyle N}"><semantics><mrow><mi>N</mi></mrow>'
        '<annotation encoding="application/x-tex">{\\displaystyle N}</annotation></semantics></math></span>'
        '<img src="https://wikimedia.org/api/rest_v1/media/math/render/svg/f5e3" '
        'class="mwe-math-fallback-image-inline" alt="{\\displaystyle N}"></span> is large.</p>'
    )
    out = extract(html)
    assert out.count("{\\displaystyle N}") == 1
    assert "${\\displaystyle N}$" in out


@pytest.mark.parametrize(
    "img,tex",
    [
        (
            '<img src="https://s0.wp.com/latex.php?latex=%5Clambda+%2B+1&bg=ffffff" alt="\\lambda + 1" class="latex">',
            "\\lambda + 1",
        ),
        (
            '<img src="https://s0.wp.com/latex.php?latex=%5Cfrac%7Ba%7D%7Bb%7D&bg=ffffff" alt="" class="latex">',
            "\\frac{a}{b}",
        ),
        ('<img src="/cgi-bin/mimetex.cgi?x%5E2%2By" alt="">', "x^2+y"),
        ('<img src="http://www.forkosh.com/mathtex.cgi?\\sqrt{2}">', "\\sqrt{2}"),
        (
            '<img src="https://latex.codecogs.com/gif.latex?\\dpi{120}&space;a_{n}&plus;1" alt="image">',
            "a_{n} +1",
        ),
    ],
)
def test_formula_images_alt_or_url(img, tex):
    out = extract(page(f"<p>Formula {img} in a sentence.</p>"))
    assert flat(tex) in flat(out)
    assert f"${tex}$".replace(" ", "") in out.replace(" ", "")


def test_ordinary_images_are_not_math():
    out = extract(page('<p>A cat <img src="/img/cat.png" alt="a sleeping cat"> here.</p>'))
    assert "$" not in out


def test_asciimath_kept_as_written_and_marked():
    out = extract(page('<p>See <script type="math/asciimath">sum_(i=1)^n i^3</script> now.</p>'))
    assert "asciimath" in out and "`sum_(i=1)^n i^3`" in out


def test_sup_sub_outside_math():
    out = extract(
        page("<p>Water is H<sub>2</sub>O and E = mc<sup>2</sup>; see note<sup><a href='#n'>1</a></sup>.</p>")
    )
    assert "H_{2}O" in out and "mc^{2}" in out
    assert "^{1}" not in out


def test_code_and_pre_verbatim_no_math():
    html = page(
        "<p>Run <code>echo $HOME</code> first.</p><pre>$ ls -la\n$ cd $DIR &amp;&amp; make</pre>", MATHJAX
    )
    out = extract(html)
    assert "`echo $HOME`" in out
    assert "```\n$ ls -la\n$ cd $DIR && make\n```" in out


def test_table_as_markdown():
    html = page(
        "<table><tr><th>n</th><th>square</th></tr><tr><td>2</td><td>4</td></tr>"
        "<tr><td>3</td><td><script type='math/tex'>3^2</script></td></tr></table>"
    )
    out = extract(html)
    assert "| n | square |\n|---|---|\n| 2 | 4 |\n| 3 | $3^2$ |" in out


@pytest.mark.parametrize("engine", ["fast", "clean"])
def test_dollar_amounts_prices_and_prompts_stay_text(engine):
    html = page(
        "<p>The deal is worth $60 million, up from $45 million, and shares cost $3.50 to $4.25 each.</p>"
        "<p>Type $ sudo make install and then $ reboot.</p>",
        MATHJAX,
    )
    out = extract(html, engine=engine)
    assert re.search(r"(?<!\\)\$\d", out) is None, out
    assert "\\$60 million" in out and "\\$3.50" in out
    assert re.search(r"(?<!\\)\$ sudo", out) is None


def test_bad_engine_is_rejected():
    with pytest.raises(ValueError):
        extract("<p>x</p>", engine="slow")


def test_mathml_source_in_script_and_namespaced_tags():
    html = page(
        '<p>Stacked <script type="math/mml"><mml:math><mml:mrow><mml:mi>A</mml:mi><mml:mi>B</mml:mi></mml:mrow>'
        "</mml:math></script> layers and <mml:math><mml:msup><mml:mi>k</mml:mi><mml:mn>2</mml:mn></mml:msup>"
        "</mml:math> terms.</p>"
    )
    out = extract(html)
    assert "$AB$" in out and "${k}^{2}$" in out
    assert "mml" not in out


def test_math_element_without_mathml_keeps_its_text():
    out = extract(page("<p>Then <math> H psi = E psi </math> holds.</p>"))
    assert "$H psi = E psi$" in out


def test_dollar_tex_without_renderer_needs_unmistakable_tex():
    out = extract(page("<p>A sequence $(a_n)$ with $n \\in \\mathbb{N}$ costs $5 or $x$ here.</p>"))
    assert "$(a_n)$" in out and "$n \\in \\mathbb{N}$" in out
    assert "\\$5" in out and "\\$x\\$" in out


def test_environment_inside_display_dollars_and_bracket_spacing():
    html = page(
        "<p>$$t =\\begin{cases} a & b \\\\ c & d \\end{cases}$$</p>"
        "<p>\\begin{aligned} x &= 1 \\\\[1em] y &= 2 \\end{aligned}</p>",
        MATHJAX,
    )
    out = extract(html)
    assert "$$\nt =\\begin{cases} a & b \\\\ c & d \\end{cases}\n$$" in out
    assert "$$\n\\begin{aligned} x &= 1 \\\\[1em] y &= 2 \\end{aligned}\n$$" in out


def test_katex_without_annotation_keeps_visible_text():
    html = page(
        '<p>Area <span class="katex"><span class="katex-html" aria-hidden="true">πr2</span></span> here.</p>'
    )
    assert "πr2" in extract(html)


def test_forum_bbcode_math():
    out = extract(page("<p>So [itex]x^2[/itex] gives [TEX]\\int_0^1 x\\,dx[/TEX] and [math]a+b[/math].</p>"))
    assert "$x^2$" in out
    assert "$$\n\\int_0^1 x\\,dx\n$$" in out and "$$\na+b\n$$" in out


def test_image_with_tex_alt_on_unknown_host():
    out = extract(
        page(
            '<p>We get <img src="/uploads/eq17.png" alt="\\frac{a}{b}"> and <img src="/c.png" alt="cat">.</p>'
        )
    )
    assert "$\\frac{a}{b}$" in out
    assert "cat" not in out.replace("main-content", "")


def test_mjx_container_with_raw_tex_and_no_mathml_is_math():
    # physicshelpforum: containers filled with TeX source, typeset by a page script (no assistive MathML).
    html = page(
        '<p>Law <mjx-container display="true" jax="CHTML"><formula class="mathJaxEqu">\\vec{F} = m\\vec{a}'
        '</formula></mjx-container> and <mjx-container jax="CHTML">a_n</mjx-container> inline.</p>',
        MATHJAX,
    )
    out = extract(html)
    assert "$$\n\\vec{F} = m\\vec{a}\n$$" in out
    assert "$a_n$" in out


def test_mjx_container_with_rendered_glyphs_and_no_mathml_is_not_math():
    html = page(
        '<p>Inline <mjx-container class="MathJax" jax="CHTML"><mjx-math><mjx-mi>GLYPH</mjx-mi></mjx-math>'
        "</mjx-container> here.</p>",
        MATHJAX,
    )
    out = extract(html)
    assert "GLYPH" not in out and "$" not in out


KATEX_SCRIPT = '<script src="/includes/cssjs/katex/katex.min.js"></script>'


def test_math_class_raw_tex_on_renderer_page():
    # IntMath: <div class="math"> / <span class="math"> hold TeX without delimiters; a page script typesets them.
    html = page(
        '<div class="math">\\mathbf{V}_1 \\times \\mathbf{V}_2 = \\begin{vmatrix} a & b \\\\ c & d '
        "\\end{vmatrix}</div>"
        '<div class="math"> \\frac{n!}{k!(n-k)!} = {^n}C_k</div>'
        '<p>Inline <span class="math">k_{n+1} = n^2 + k_n^2</span>, then text.</p>'
        '<p class="math">1 yr = 525600 min</p>'
        '<div class="math">The \\emph{answer} is given in the next section of the book</div>'
        '<p>Pandoc writes <span class="math inline">\\(x+y\\)</span>.</p>',
        KATEX_SCRIPT,
    )
    out = extract(html)
    assert (
        "$$\n\\mathbf{V}_1 \\times \\mathbf{V}_2 = \\begin{vmatrix} a & b \\\\ c & d \\end{vmatrix}\n$$"
        in out
    )
    assert "$$\n\\frac{n!}{k!(n-k)!} = {^n}C_k\n$$" in out
    assert "$k_{n+1} = n^2 + k_n^2$," in out
    assert "1 yr = 525600 min" in out and "$1 yr" not in out  # not TeX
    assert "$The" not in out and "$$\nThe" not in out  # prose
    assert "$x+y$" in out  # delimited: read by the text pass as before


def test_math_class_without_renderer_stays_text():
    out = extract(page('<div class="math">\\frac{a}{b}</div>'))
    assert "$$" not in out


def test_stackexchange_empty_groups_dropped():
    html = page(
        "<div class='post'><p>$\\begingroup$</p><p>If $f(x,y)$ is a joint pdf, then so on.</p>"
        "<p>$\\endgroup$</p></div><p>$\\begingroup$ Not clear, see $x$. $\\endgroup$ Commented</p>"
        "<p>Write <code>$\\begingroup$</code> in code, or $\\begingroup x$.</p>",
        MATHJAX,
    )
    out = extract(html)
    assert "If $f(x,y)$ is a joint pdf" in out
    assert "Not clear, see $x$. Commented" in out
    assert "`$\\begingroup$`" in out  # code is verbatim
    assert "$\\begingroup x$" in out  # only a group marker alone is dropped
    assert out.count("group") == 2


@pytest.mark.parametrize("engine", ["fast", "clean"])
def test_main_content_miss_falls_back(engine):
    # resiliparse's main-content pass drops a whole article under a class like `site_header`
    # (medicalnewstoday); the fast engine then falls back to the clean engine instead of returning "".
    para = (
        "<p>" + "Many of us have noticed that we get our best ideas in the shower, or walking. " * 4 + "</p>"
    )
    html = (
        "<html><head><title>t</title></head><body><nav><a href='/'>Home</a></nav>"
        f"<div class='row site_header'><article><h1>Title</h1>{para * 8}</article></div>"
        "<footer>(c) 2020</footer></body></html>"
    )
    out = extract(html, engine=engine)
    assert out.count("Many of us have noticed") == 32
    assert "Title" in out
