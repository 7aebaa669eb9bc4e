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
# what `"[asy]" in text.lower()` finds, without lower-casing the text (re.I would also take `ſ` for `s`)
_ASY_TAG = re.compile(r"\[[aA][sS][yY]\]")


def normalize_math_text(text: str) -> str:
    """Lower-cased NFKC, Asymptote code and LaTeX spacing commands removed, LaTeX synonyms unified (decont).

    Asymptote blocks go because MATH problems share long drawing preambles (`size(150); real ticklen=3; ...`):
    hundreds of equal 13-grams between unrelated problems."""
    text = unicodedata.normalize("NFKC", ASY_RE.sub(" ", text) if _ASY_TAG.search(text) else text).lower()
    if "\\" not in text:  # no LaTeX command: of the patterns below only `~` can match
        return text.replace("~", " ")
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


def __getattr__(name: str):
    """`canonical_math_text` and `CANONICAL_MATH_TOKENS` moved to `curate.decont_tokens` (decontamination's tokens,
    which import this module); still importable from here, looked up on first use."""
    if name in ("canonical_math_text", "CANONICAL_MATH_TOKENS"):
        from curate import decont_tokens

        return getattr(decont_tokens, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
