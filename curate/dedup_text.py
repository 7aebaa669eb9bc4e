"""Text normalisation and hashing shared by exact dedup, MinHash and decontamination.

Tokens are runs of letters or runs of digits (so `2x` and `2 x` give the same tokens), lower-cased, with CJK
characters one token each; punctuation and whitespace are dropped, numbers are kept, never normalised away.
Token hashes are stable across processes (blake2b, cached per process) because signatures written by different
datatrove tasks must agree; n-gram hashes are a rolling polynomial of token hashes computed in numpy.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

# Scripts written without spaces: one character, one token (a whole sentence would otherwise be one token).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W\d_{_CJK}]+|\d+")
# LaTeX spacing and sizing commands that change how a formula is typed, not what it says.
# (applied to lower-cased text)
_LATEX_SPACING_RE = re.compile(
    r"\\(?:quad|qquad|displaystyle|textstyle|left|right|bigg?[lr]?|[,;:! ])(?![a-z])|~"
)
_LATEX_SYNONYMS = (
    (re.compile(r"\\[dt]frac(?![a-z])"), r"\\frac"),
    (re.compile(r"\\(le|ge|ne)(?:qslant)?(?![a-z])"), r"\\\1q"),
)

_P = np.uint64(0x100000001B3)  # odd multiplier of the rolling n-gram hash (FNV prime)
_TOKEN_CACHE: dict[str, int] = {}
_CACHE_MAX = 2_000_000


def tokenize(text: str) -> list[str]:
    """Lower-cased word/number tokens of `text` (punctuation and whitespace dropped)."""
    return TOKEN_RE.findall(text.lower())


# An Asymptote drawing: `[asy]` to its `[/asy]` (no other `[asy]` between); without a closing tag, to the end of
# its paragraph (a blank line). It went to the end of the text: a page that names `[asy]` in passing lost the rest.
ASY_RE = re.compile(r"\[asy\](?:(?:(?!\[asy\]).)*?\[/asy\]|.*?(?=\n[ \t]*\n|\Z))", re.S | re.I)


def normalize_math_text(text: str) -> str:
    """Lower-cased NFKC, Asymptote code and LaTeX spacing commands removed, LaTeX synonyms unified (decont).

    Asymptote blocks go because MATH problems share long drawing preambles (`size(150); real ticklen=3; ...`):
    hundreds of equal 13-grams between unrelated problems."""
    text = unicodedata.normalize("NFKC", ASY_RE.sub(" ", text) if "[asy]" in text.lower() else text)
    text = text.lower()
    for pattern, repl in _LATEX_SYNONYMS:
        text = pattern.sub(repl, text)
    return _LATEX_SPACING_RE.sub(" ", text)


def _hash_token(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")


def token_hashes(tokens: list[str]) -> np.ndarray:
    """Stable 64-bit hashes of tokens (uint64 array), cached per process."""
    cache = _TOKEN_CACHE
    try:
        return np.fromiter(map(cache.__getitem__, tokens), dtype=np.uint64, count=len(tokens))
    except KeyError:
        if len(cache) > _CACHE_MAX:
            cache.clear()
        for tok in set(tokens).difference(cache):
            cache[tok] = _hash_token(tok)
        return np.fromiter(map(cache.__getitem__, tokens), dtype=np.uint64, count=len(tokens))


def ngram_hashes(hashes: np.ndarray, n: int) -> np.ndarray:
    """Hashes of every n-gram of consecutive token hashes (empty when fewer than n tokens)."""
    count = len(hashes) - n + 1
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    with np.errstate(over="ignore"):
        acc = hashes[:count].copy()
        for j in range(1, n):
            acc *= _P
            acc += hashes[j : j + count]
        # final avalanche (splitmix64 finaliser) so that n-gram hashes are well mixed in every bit
        acc ^= acc >> np.uint64(31)
        acc *= np.uint64(0xBF58476D1CE4E5B9)
        acc ^= acc >> np.uint64(27)
    return acc


_TRACKING_PARAMS = {"fbclid", "gclid", "mc_cid", "mc_eid", "ref", "sessionid", "sid", "phpsessid"}


def canonical_url(url: str | None) -> str | None:
    """Canonical form of a URL for exact URL dedup: scheme/host lower-cased, `www.`, default ports, fragments,
    tracking parameters and trailing slashes removed, query parameters sorted. None for an empty URL."""
    if not url or not url.strip():
        return None
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip()
    host = (parts.hostname or "").lower().removeprefix("www.")
    port = parts.port if parts.port not in (None, 80, 443) else None
    netloc = f"{host}:{port}" if port else host
    query = sorted(
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not (k.lower().startswith("utm_") or k.lower() in _TRACKING_PARAMS)
    )
    path = parts.path.rstrip("/") or "/"
    return urlunsplit(("http", netloc, path, urlencode(query), ""))


def url_hash(url: str | None) -> int:
    """64-bit hash of the canonical URL (0 when there is none)."""
    canon = canonical_url(url)
    if canon is None:
        return 0
    return int.from_bytes(hashlib.blake2b(canon.encode("utf-8"), digest_size=8).digest(), "little") | 1


# Decontamination writes one token for a math symbol however a page spells it: LaTeX (`\pi`), Unicode (`π`) or ASCII
# (`pi`), and none for layout (`\frac`, `\text`, `\left`) or for operators and relations, which are no tokens in
# plain text anyway (`=`, `<`, `*`: so `\leq`, `≤` and `<=` alike are none). "The volume of the cylinder is 45π"
# and "... is $45\pi$" had other tokens, and a page that rendered a test problem's math was not found.
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
_UNICODE_MATH_TABLE = str.maketrans({ch: f" \\{name} " for ch, name in _UNICODE_MATH.items()})
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
CANONICAL_MATH_TOKENS: dict[str, str] = {
    **{f"\\{c}": "" for c in _DROPPED_COMMANDS},
    **{f"\\{c}": f"\\{to}" for c, to in _COMMAND_SYNONYMS.items()},
    **{w: f"\\{to}" for w, to in _ASCII_COMMANDS.items()},
}
_FRAC_OF_DIGITS = re.compile(r"\\[dtc]?frac\s*(\d)\s*(\d)")  # \frac12 is 1/2, not twelve


def canonical_math_text(text: str) -> str:
    """Unicode math symbols written as the LaTeX command they stand for (`π` -> ` \\pi `), `\\frac12` as `1 2`:
    the text's tokens then go through `CANONICAL_MATH_TOKENS` (decont)."""
    if "frac" in text:
        text = _FRAC_OF_DIGITS.sub(r" \1 \2 ", text)
    return text.translate(_UNICODE_MATH_TABLE)
