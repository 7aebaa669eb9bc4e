"""The symbol tables of the MathML -> LaTeX converter (`curate.mathml`): characters, Greek letters, function
names, big operators, accents, font variants, fences and alignments, apart from the converter's logic.
"""

from __future__ import annotations

_CHARS = {
    "≠": "\\ne ",
    "≤": "\\le ",
    "≥": "\\ge ",
    "−": "-",
    "∑": "\\sum ",
    "∏": "\\prod ",
    "∫": "\\int ",
    "∬": "\\iint ",
    "∮": "\\oint ",
    "∂": "\\partial ",
    "∞": "\\infty ",
    "∇": "\\nabla ",
    "⋅": "\\cdot ",
    "→": "\\to ",
    "←": "\\leftarrow ",
    "⇒": "\\Rightarrow ",
    "⇔": "\\Leftrightarrow ",
    "↔": "\\leftrightarrow ",
    "⋯": "\\cdots ",
    "…": "\\dots ",
    "⋮": "\\vdots ",
    "⋱": "\\ddots ",
    "∈": "\\in ",
    "∉": "\\notin ",
    "⊂": "\\subset ",
    "⊆": "\\subseteq ",
    "⊃": "\\supset ",
    "⊇": "\\supseteq ",
    "∪": "\\cup ",
    "∩": "\\cap ",
    "∀": "\\forall ",
    "∃": "\\exists ",
    "¬": "\\neg ",
    "∧": "\\wedge ",
    "∨": "\\vee ",
    "≈": "\\approx ",
    "≡": "\\equiv ",
    "∼": "\\sim ",
    "≅": "\\cong ",
    "∝": "\\propto ",
    "∅": "\\emptyset ",
    "√": "\\surd ",
    "∘": "\\circ ",
    "⊕": "\\oplus ",
    "⊗": "\\otimes ",
    "⟨": "\\langle ",
    "⟩": "\\rangle ",
    "∣": "|",
    "‖": "\\|",
    "⌊": "\\lfloor ",
    "⌋": "\\rfloor ",
    "⌈": "\\lceil ",
    "⌉": "\\rceil ",
    "\u2061": "",
    "\u2062": "",
    "\u2063": "",
    "\u2064": "",
    "ℝ": "\\mathbb{R}",
    "ℕ": "\\mathbb{N}",
    "ℤ": "\\mathbb{Z}",
    "ℚ": "\\mathbb{Q}",
    "ℂ": "\\mathbb{C}",
    "ℓ": "\\ell ",
    "ℏ": "\\hbar ",
    "°": "^{\\circ}",
    "′": "'",
    "{": "\\{",
    "}": "\\}",
    "%": "\\%",
    "#": "\\#",
    "&": "\\&",
}
_GREEK = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho varsigma sigma tau "
    "upsilon phi chi psi omega"
).split()
for _i, _name in enumerate(_GREEK):
    _CHARS[chr(0x3B1 + _i)] = "\\" + ("o" if _name == "omicron" else _name) + " "
    upper = _name[0].upper() + _name[1:]
    if upper in ("Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega"):
        _CHARS[chr(0x391 + _i)] = "\\" + upper + " "
# As mmltex (and MathJax's \\phi -> U+03D5): U+03D5 is \\varphi, U+03C6 is \\phi; U+03F5 is \\epsilon.
_CHARS.update({"ϕ": "\\varphi ", "φ": "\\phi ", "ϵ": "\\epsilon ", "ε": "\\varepsilon ", "ϑ": "\\vartheta "})
_CHARS["Φ"] = "\\Phi "

_FUNCS = {
    "sin",
    "cos",
    "tan",
    "cot",
    "sec",
    "csc",
    "log",
    "ln",
    "exp",
    "lim",
    "max",
    "min",
    "sup",
    "inf",
    "det",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "gcd",
    "deg",
    "dim",
    "ker",
    "arg",
}
_BIG_OPS = {"∑", "∏", "∫", "∬", "∮", "⋃", "⋂", "lim", "max", "min", "sup", "inf", "∐", "⨁", "⨂"}
_ACCENTS = {
    "^": "\\hat",
    "ˆ": "\\hat",
    "˙": "\\dot",
    "¨": "\\ddot",
    "~": "\\tilde",
    "˜": "\\tilde",
    "¯": "\\bar",
    "‾": "\\overline",
    "→": "\\vec",
    "⃗": "\\vec",
    "ˇ": "\\check",
    "˘": "\\breve",
}
_VARIANTS = {
    "bold": "\\mathbf",
    "normal": "\\mathrm",
    "double-struck": "\\mathbb",
    "script": "\\mathcal",
    "fraktur": "\\mathfrak",
    "sans-serif": "\\mathsf",
    "monospace": "\\mathtt",
    "italic": "\\mathit",
    "bold-italic": "\\boldsymbol",
}
_OPEN, _CLOSE = {"(": ")", "[": "]", "{": "}"}, {")", "]", "}"}
_ALIGN = {"left": "l", "right": "r", "center": "c"}
