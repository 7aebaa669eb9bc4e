"""MathML -> LaTeX for <math> elements that carry neither a TeX annotation nor alttext."""

from __future__ import annotations


def mathml_to_latex(node) -> str:
    """Convert a resiliparse <math> element to LaTeX (first version: its text)."""
    return " ".join((node.text or "").split())
