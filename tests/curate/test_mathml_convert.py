"""MathML -> LaTeX converter: each element, and the caps that keep it bounded."""

from __future__ import annotations

import re

import pytest
from resiliparse.parse.html import HTMLTree

from curate import mathml
from curate.mathml import mathml_to_latex


def conv(inner: str) -> str | None:
    tree = HTMLTree.parse(f"<html><body><math>{inner}</math></body></html>")
    return mathml_to_latex(tree.body.query_selector("math"))


def nows(s: str | None) -> str:
    return re.sub(r"\s+", "", s or "")


@pytest.mark.parametrize(
    "inner,expected",
    [
        ("<mi>x</mi><mo>=</mo><mn>3.5</mn>", "x=3.5"),
        ("<mi>&#x03B1;</mi><mo>&#x2264;</mo><mi>&#x03C0;</mi>", "\\alpha\\le\\pi"),
        ("<mi>sin</mi><mi>x</mi>", "\\sinx"),
        ('<mi mathvariant="bold">v</mi>', "\\mathbf{v}"),
        ("<mrow><mi>a</mi><mo>+</mo><mi>b</mi></mrow>", "a+b"),
        ("<mfrac><mi>a</mi><mi>b</mi></mfrac>", "\\frac{a}{b}"),
        ('<mfrac linethickness="0"><mi>n</mi><mi>k</mi></mfrac>', "\\genfrac{}{}{0}{}{n}{k}"),
        ("<msup><mi>x</mi><mn>2</mn></msup>", "{x}^{2}"),
        ("<msub><mi>a</mi><mi>i</mi></msub>", "{a}_{i}"),
        ("<msubsup><mi>a</mi><mi>i</mi><mn>2</mn></msubsup>", "{a}_{i}^{2}"),
        ("<msqrt><mi>x</mi><mo>+</mo><mn>1</mn></msqrt>", "\\sqrt{x+1}"),
        ("<mroot><mi>x</mi><mn>3</mn></mroot>", "\\sqrt[3]{x}"),
        ('<mover accent="true"><mi>x</mi><mo>^</mo></mover>', "\\hat{x}"),
        # accents by the operator dictionary, no attribute needed (MathJax's \dot, \ddot, \vec)
        ("<mover><mi>x</mi><mo>&#x02D9;</mo></mover>", "\\dot{x}"),
        ("<mover><mi>y</mi><mo>&#x00A8;</mo></mover>", "\\ddot{y}"),
        ('<mover><mi>v</mi><mo stretchy="false">&#x2192;</mo></mover>', "\\vec{v}"),
        ('<mover accent="false"><mi>x</mi><mo>&#x02D9;</mo></mover>', "\\stackrel{˙}{x}"),
        ("<mover><mi>x</mi><mo>=</mo></mover>", "\\stackrel{=}{x}"),
        (
            "<munder><mo>lim</mo><mrow><mi>n</mi><mo>&#x2192;</mo><mi>&#x221E;</mi></mrow></munder>",
            "\\lim_{n\\to\\infty}",
        ),
        (
            "<munderover><mo>&#x2211;</mo><mrow><mi>k</mi><mo>=</mo><mn>1</mn></mrow><mi>n</mi></munderover>",
            "\\sum_{k=1}^{n}",
        ),
        ("<munder><mi>x</mi><mo>_</mo></munder>", "\\underline{x}"),
        (
            '<mtable columnalign="right left"><mtr><mtd><mi>a</mi></mtd><mtd><mi>b</mi></mtd></mtr>'
            "<mtr><mtd><mi>c</mi></mtd><mtd><mi>d</mi></mtd></mtr></mtable>",
            "\\begin{array}{rl}a&b\\\\c&d\\end{array}",
        ),
        ("<mfenced><mi>a</mi><mi>b</mi></mfenced>", "\\left(a,b\\right)"),
        ('<mfenced open="[" close="]" separators=";"><mi>a</mi><mi>b</mi></mfenced>', "\\left[a;b\\right]"),
        ("<mtext>for all</mtext>", "\\text{forall}"),
        ('<mi>a</mi><mspace width="1em"/><mi>b</mi>', "ab"),
        ('<menclose notation="box"><mi>x</mi></menclose>', "\\boxed{x}"),
        ('<menclose notation="updiagonalstrike"><mi>x</mi></menclose>', "\\cancel{x}"),
        ("<mo>(</mo><mi>a</mi><mo>)</mo>", "\\left(a\\right)"),
        (
            "<mo>(</mo><mn>1</mn><mo>-</mo><mi>p</mi><msup><mo>)</mo><mi>n</mi></msup>",
            "{\\left(1-p\\right)}^{n}",
        ),
        ("<mo>(</mo><mi>a</mi>", "(a"),
    ],
)
def test_elements(inner, expected):
    assert nows(conv(inner)) == nows(expected)


def test_annotation_xml_is_ignored_by_converter():
    inner = '<semantics><mi>x</mi><annotation-xml encoding="MathML-Content"><ci>x</ci></annotation-xml></semantics>'
    assert nows(conv(inner)) == "x"


def test_deep_nesting_gives_up_instead_of_recursing():
    inner = "<msqrt>" * (mathml.MAX_DEPTH + 50) + "<mi>x</mi>" + "</msqrt>" * (mathml.MAX_DEPTH + 50)
    assert conv(inner) is None
    shallow = "<msqrt>" * 5 + "<mi>x</mi>" + "</msqrt>" * 5
    assert nows(conv(shallow)) == "\\sqrt{" * 5 + "x" + "}" * 5


def test_node_budget_gives_up(monkeypatch):
    monkeypatch.setattr(mathml, "MAX_NODES", 50)
    assert conv("<mi>x</mi>" * 100) is None
    assert conv("<mi>x</mi>" * 10) is not None


def test_time_budget_gives_up():
    tree = HTMLTree.parse("<html><body><math>" + "<mi>x</mi>" * 5000 + "</math></body></html>")
    assert mathml_to_latex(tree.body.query_selector("math"), budget_s=0.0) is None
