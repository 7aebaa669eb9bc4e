"""The tokens decontamination compares, on both sides: a benchmark record's and a web document's.

A math symbol is one token however a page spells it: LaTeX (`\\pi`), Unicode (`π`) or ASCII (`pi`); layout
commands and operators are none. LaTeX commands keep their backslash so that they never count as prose words
(`prose_ngrams`). Shared by the index (`curate.decont`) and the record keys (`curate.decont_keys`).
"""

from __future__ import annotations

import re

import numpy as np

from curate.dedup_text import TOKEN_RE, ngram_hashes, normalize_math_text, token_hashes

# One token for a math symbol however a page spells it: LaTeX (`\pi`), Unicode (`π`) or ASCII (`pi`), and none for
# layout (`\frac`, `\text`, `\left`) or for operators and relations, which are no tokens in plain text anyway
# (`=`, `<`, `*`: so `\leq`, `≤` and `<=` alike are none). "The volume of the cylinder is 45π" and "... is $45\pi$"
# had other tokens, and a page that rendered a test problem's math was not found.
_UNICODE_MATH = {
    **dict(zip("αβγδεζηθικλμνξπρστυφχψωϕϑϵς", (
        "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau upsilon phi chi "
        "psi omega phi theta epsilon sigma").split(), strict=True)),
    "√": "sqrt", "∛": "sqrt 3", "∜": "sqrt 4", "∞": "infty", "∠": "angle", "△": "triangle", "°": "circ",
    "∘": "circ", "∈": "in", "∉": "notin", "∪": "cup", "∩": "cap", "∑": "sum", "∏": "prod", "⊥": "perp",
    "∥": "parallel", "→": "to", "⇒": "to", "⟹": "to", "⌊": "lfloor", "⌋": "rfloor", "⌈": "lceil", "⌉": "rceil",
    "∫": "int", "≈": "approx", "≡": "equiv", "≅": "cong", "∼": "sim", "⊂": "subset", "⊆": "subseteq",
    "∀": "forall", "∃": "exists", "∅": "emptyset", "∂": "partial",
}  # fmt: skip
_UNICODE_MATH_SPELLED = {ch: f" \\{name} " for ch, name in _UNICODE_MATH.items()}
_UNICODE_MATH_RE = re.compile("[" + re.escape("".join(_UNICODE_MATH)) + "]")
_DROPPED_COMMANDS = (
    "times cdot div pm mp ast leq geq neq le ge ne lt gt frac dfrac tfrac cfrac text textbf textit textrm textsf "
    "texttt textnormal mathrm mathbf mathit mathsf mathtt mathnormal mathbb mathcal boldsymbol mbox hbox operatorname "
    "left right displaystyle textstyle scriptstyle big bigl bigr bigg biggl biggr dots ldots cdots vdots ddots mid"
).split()
_COMMAND_SYNONYMS = {
    "rightarrow": "to", "longrightarrow": "to", "implies": "to", "varphi": "phi", "vartheta": "theta",
    "varepsilon": "epsilon", "degree": "circ",
}  # fmt: skip
# ASCII spellings of commands (a forum's `sqrt(3x-5)`, `2 pi r`, `90 degrees`)
_ASCII_COMMANDS = {
    **{w: w for w in "pi sqrt theta alpha beta gamma delta epsilon lambda sigma omega phi infty sin cos tan log ln".split()},
    "degrees": "circ",
}  # fmt: skip
_LATEX_COMMANDS: dict[str, str] = {
    **{f"\\{c}": "" for c in _DROPPED_COMMANDS},
    **{f"\\{c}": f"\\{to}" for c, to in _COMMAND_SYNONYMS.items()},
}
# LaTeX that lost its backslashes (pasted from a rendered page: `overline{AB}`, `frac{x^{2}}{4}`, `int_{0}^{1}`,
# `y^{prime}`, `mathbf{v} * mathbf{w}`). A command name that is no English word is that command wherever it
# stands (`BARE_COMMANDS`); one that can be a word (`text`, `sum`, `end`, `hat`) only right before `{`, `_` or `^`,
# where prose puts no word (`BRACED_COMMANDS`). `in` is not one (`5 in^2`), nor `angle` or `triangle` anywhere (see
# docs/dedup.md: a page's `angle ABC` is `\angle ABC` as often as the prose of "angle $ABC$").
BARE_COMMANDS = (
    "frac dfrac tfrac cfrac cdot cdots ldots vdots ddots leq geq neq leqslant geqslant mathbf mathrm mathbb mathcal "
    "mathit mathsf mathfrak mathscr textbf textit textrm displaystyle textstyle operatorname overline underline "
    "overrightarrow overleftarrow widehat widetilde overbrace underbrace binom dbinom tbinom lfloor rfloor lceil "
    "rceil langle rangle varphi vartheta varepsilon emptyset varnothing subseteq supseteq setminus notin nabla "
    "arcsin arccos arctan sinh cosh tanh sec csc cot lim int iint oint gcd qquad hline rightarrow leftarrow "
    "leftrightarrow longrightarrow mapsto zeta kappa rho tau psi xi mu nu"
).split()
BRACED_COMMANDS = (
    "text textsf texttt textnormal mbox hbox boldsymbol sum prod max min sup inf exp det dim ker deg arg mod bmod "
    "pmod vec hat bar dot ddot tilde check begin end left right big bigl bigr bigg biggl biggr boxed times div pm "
    "mp ast le ge ne lt gt mid to sim cong approx equiv perp parallel angle triangle circ partial exists forall "
    "subset supset cup cap implies degree dots prime"
).split()


def _as_command(name: str) -> str:
    """The token `\\NAME` is in LaTeX ("" for a layout command, `\\frac` and `\\leqslant` included)."""
    tokens = _DECONT_TOKEN_RE.findall(normalize_math_text("\\" + name))
    return _LATEX_COMMANDS.get(tokens[0], tokens[0]) if tokens else ""


# LaTeX commands stay tokens of their own (with the backslash) so they never count as prose words.
_DECONT_TOKEN_RE = re.compile(r"\\[a-zA-Z]+|" + TOKEN_RE.pattern)
CANONICAL_MATH_TOKENS: dict[str, str] = {
    **_LATEX_COMMANDS,
    **{w: f"\\{to}" for w, to in _ASCII_COMMANDS.items()},
    **{w: _as_command(w) for w in BARE_COMMANDS},
}
# read backwards: a regex that starts at the rare `{`, `_`, `^` is ~7x faster than one trying each word of the text
_BRACED_REVERSED_RE = re.compile(r"([{_^][ \t]*)([a-z]+)(?![a-z\\])")
_BRACED_REVERSED = {w[::-1]: f" {_as_command(w)} "[::-1] for w in BRACED_COMMANDS}
_PRIMES_RE = re.compile(r"\^\{((?:[ \t]*prime)+)[ \t]*\}")  # `y^{prime prime}`: y''
_FRAC_OF_DIGITS = re.compile(r"\\[dtc]?frac\s*(\d)\s*(\d)")  # \frac12 is 1/2, not twelve


def bare_commands(text: str) -> str:
    """Lower-cased TEXT with the commands typed without a backslash before `{`, `_` or `^` (`BRACED_COMMANDS`)
    and the primes of `^{prime}` written as their LaTeX token (`BARE_COMMANDS` are mapped as tokens)."""
    if "prime" in text:
        text = _PRIMES_RE.sub(lambda m: " \\prime" * m.group(1).count("prime"), text)
    if "{" in text or "_" in text or "^" in text:
        text = _BRACED_REVERSED_RE.sub(_braced_command, text[::-1])[::-1]
    return text


def _braced_command(match: re.Match) -> str:
    return match.group(1) + _BRACED_REVERSED.get(match.group(2), match.group(2))


def canonical_math_text(text: str) -> str:
    """Unicode math symbols written as the LaTeX command they stand for (`π` -> ` \\pi `), `\\frac12` as `1 2`,
    commands that lost their backslash as the command (`bare_commands`): the text's tokens then go through
    `CANONICAL_MATH_TOKENS` (decont)."""
    if "frac" in text:
        text = _FRAC_OF_DIGITS.sub(r" \1 \2 ", text)
    text = bare_commands(text)
    # a regex finds the few symbols ~15x faster than str.translate walks every character through a dict
    return text if text.isascii() else _UNICODE_MATH_RE.sub(_spell_symbol, text)


def _spell_symbol(match: re.Match) -> str:
    return _UNICODE_MATH_SPELLED[match.group()]


def decont_tokens(text: str) -> list[str]:
    """Tokens used on both sides of the overlap check: a math symbol is one token however it is written (`\\pi`,
    `π`, `pi`), layout commands and operators none (`CANONICAL_MATH_TOKENS`)."""
    raw = _DECONT_TOKEN_RE.findall(canonical_math_text(normalize_math_text(text)))
    return list(filter(None, map(CANONICAL_MATH_TOKENS.get, raw, raw)))  # "" for a dropped command


_CODES: dict[str, int] = {}  # token -> 64-bit hash whose lowest bit says "prose word"


def token_codes(tokens: list[str]) -> np.ndarray:
    """Stable token hashes (cached per process) with the lowest bit set for prose words."""
    try:
        return np.fromiter(map(_CODES.__getitem__, tokens), dtype=np.uint64, count=len(tokens))
    except KeyError:
        if len(_CODES) > 2_000_000:
            _CODES.clear()
        missing = list(set(tokens).difference(_CODES))
        for tok, h in zip(missing, token_hashes(missing).tolist(), strict=True):
            _CODES[tok] = (h & ~1) | int(len(tok) > 1 and tok.isalpha())
        return np.fromiter(map(_CODES.__getitem__, tokens), dtype=np.uint64, count=len(tokens))


def prose_ngrams(tokens: list[str], ngram: int, min_words: int) -> tuple[np.ndarray, np.ndarray]:
    """(hashes, start positions) of the n-grams holding at least `min_words` prose words.

    A prose word has two or more letters and is not a LaTeX command: n-grams made only of formula pieces
    (`sqrt 3 r 1 r 2 ...`) are common to unrelated pages and would be false hits.
    """
    return coded_prose_ngrams(token_codes(tokens), ngram, min_words)


def coded_prose_ngrams(codes: np.ndarray, ngram: int, min_words: int) -> tuple[np.ndarray, np.ndarray]:
    """`prose_ngrams` of tokens already coded (`token_codes`)."""
    hashes = ngram_hashes(codes, ngram)
    if not len(hashes) or min_words <= 0:
        return hashes, np.arange(len(hashes))
    csum = np.concatenate([[0], np.cumsum(codes & np.uint64(1), dtype=np.int64)])
    keep = np.nonzero(csum[ngram:] - csum[: len(hashes)] >= min_words)[0]
    return hashes[keep], keep
