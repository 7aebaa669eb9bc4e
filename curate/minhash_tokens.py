"""Word/number/operator tokens and their 64-bit hashes for a whole batch of texts at once, in numpy, on UTF-8 bytes.

Why bytes: a regex tokenizer plus a per-token hash lookup costs more than all the MinHash permutations together
(~0.9 us per token in Python); classifying bytes and hashing tokens with prefix sums does the batch in a few array
passes. The exact-dedup key (`batch_text_hashes`) and the MinHash shingles are both built from these tokens.

Tokens, by the Unicode class of each character (`char_class`, one table over the code points):
- letter runs (letters and combining marks of any alphabetic script) and digit runs, case folded (`x2` and `x 2`
  give the same tokens); CJK / kana / Hangul characters are one token each;
- math operators and relations, one character one token: ASCII `+ - < > = ^ _ / * | !`, every Unicode math symbol
  (category Sm: `− ≤ ≥ ∪ ∩ ± × ÷ ¬ ⁄` ...), arrows, floor/ceiling and angle brackets (U+2190-U+22FF, U+2308-U+230B,
  U+27C0-U+27FF, U+2900-U+2AFF). They carry meaning: `x ≤ 3` / `x ≥ 3`, `2n-1` / `2n+1`, `x^2` / `x_2`,
  `1/2` / `1.2` are other problems, and built from letters and digits alone they got one exact key;
- prose punctuation (`. , ; : ' " ( ) [ ] { } $ \\ ~` ...), spaces, other symbols and controls separate tokens
  and are dropped.
Case folding goes through the bytes for every character whose lower case has as many UTF-8 bytes (ASCII, Latin,
Greek, Cyrillic, ...: `É` is `é`); in a text holding a compatibility character whose NFKC form tokenizes
otherwise (full-width `２` `Ｆ`, `½`, `²`, `ℝ`, `𝑥`, `™`, ligatures) those characters are replaced by their NFKC
form and the text is tokenized again (15 of 333 real pages; a NBSP or an ideographic space changes no token and
costs nothing). A document without a letter, digit or CJK token (operators alone, or nothing) has no exact key
(`batch_text_hashes` gives 0) and is `empty` (`is_empty`, the same tokens): empty documents never join a group.
The tables come from Python's `unicodedata`, so every process of one installation tokenizes alike.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import numpy as np

_SEP, _LETTER, _DIGIT, _SINGLE, _OP = 0, 1, 2, 3, 4  # _SINGLE (CJK) and _OP: one character, one token
_LETTER1 = 5  # the kind of a letter token of one character (a variable: `x`, `C`, `θ`)
OPERATORS = "+-<>=^_/*|!"
# math blocks whose every character is an operator token (arrows, operators, floor/ceiling, angle brackets ...)
_OP_RANGES = ((0x2190, 0x22FF), (0x2308, 0x230B), (0x27C0, 0x27FF), (0x2900, 0x2AFF))
# scripts written without spaces: each letter one token (a whole sentence would otherwise be one token)
_SINGLE_RANGES = ((0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3040, 0x9FFF), (0xAC00, 0xD7FF), (0xF900, 0xFAFF))
_ASTRAL_SINGLE = (0x20000, 0x3FFFF)  # CJK extensions B-H
ASCII_WORD_RE = re.compile(r"[A-Za-z0-9]")  # a text with one of these is not empty (fast path of `is_empty`)


def char_class(cp: int) -> int:
    """Token class of one code point (the reference the byte tables are built from)."""
    if cp < 0x80:
        c = chr(cp)
        if c.isalpha():
            return _LETTER
        if c.isdigit():
            return _DIGIT
        return _OP if c in OPERATORS else _SEP
    if any(lo <= cp <= hi for lo, hi in _OP_RANGES):
        return _OP
    if 0xD800 <= cp <= 0xDFFF:
        return _SEP
    cat = unicodedata.category(chr(cp))
    if cat == "Sm":
        return _OP
    if cat[0] in "LMN" or cat == "Co":  # letters, marks, numbers; private use (font glyphs of PDF math)
        single = (
            any(lo <= cp <= hi for lo, hi in _SINGLE_RANGES) or _ASTRAL_SINGLE[0] <= cp <= _ASTRAL_SINGLE[1]
        )
        if single:
            return _SINGLE
        return _DIGIT if cat == "Nd" else _LETTER
    return _SEP


def _utf8_len(cp: int) -> int:
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


def _tokens_differ_after_nfkc(cp: int, cls: int) -> bool:
    """Whether NFKC changes what character `cp` (of class `cls`) contributes to the tokens."""
    if 0xD800 <= cp <= 0xDFFF:
        return False
    c = chr(cp)
    norm = unicodedata.normalize("NFKC", c)
    if norm == c:
        return False
    return cls != _SEP or any(_counts(x) for x in norm)


def _counts(char: str) -> bool:
    """Whether a character of an NFKC form makes a token (a combining mark alone does not: `˙` is ` ̇`)."""
    return char_class(ord(char)) != _SEP and not unicodedata.category(char).startswith("M")


_CATEGORY_CLASS = {"Sm": _OP, "Nd": _DIGIT, "Co": _LETTER}


@functools.cache
def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(class, lower-case code point (same UTF-8 length, else itself), needs NFKC) of every BMP code point:
    `char_class` in bulk (a test holds them equal), built once per process on the first non-ASCII text."""
    chars = [chr(cp) for cp in range(0x10000)]
    cls = np.array(
        [_CATEGORY_CLASS.get(cat, _LETTER if cat[0] in "LMN" else _SEP)
         for cat in map(unicodedata.category, chars)],
        dtype=np.uint8,
    )  # fmt: skip
    single = cls != _SEP
    for lo, hi in _SINGLE_RANGES:
        cls[lo : hi + 1][single[lo : hi + 1]] = _SINGLE
    for lo, hi in _OP_RANGES:
        cls[lo : hi + 1] = _OP
    cls[0xD800:0xE000] = _SEP
    cls[:0x80] = [char_class(cp) for cp in range(0x80)]
    lower = np.arange(0x10000, dtype=np.uint32)
    nfkc = np.zeros(0x10000, dtype=bool)
    chars[0xD800:0xE000] = [" "] * 0x800  # surrogates: no case, no normal form
    lows = list(map(str.lower, chars))
    for cp in [cp for cp, (a, b) in enumerate(zip(lows, chars, strict=True)) if a != b]:
        if len(lows[cp]) == 1 and _utf8_len(ord(lows[cp])) == _utf8_len(cp):
            lower[cp] = ord(lows[cp])
    norms = list(map(functools.partial(unicodedata.normalize, "NFKC"), chars))
    for cp in [cp for cp, (a, b) in enumerate(zip(norms, chars, strict=True)) if a != b and cp >= 0x80]:
        nfkc[cp] = cls[cp] != _SEP or any(_counts(x) for x in norms[cp])
    return cls, lower, nfkc


@functools.cache
def _astral(cp: int) -> tuple[int, bool]:
    """(class, needs NFKC) of a code point above U+FFFF (math alphanumerics `𝑥` become `x`)."""
    cls = char_class(cp)
    return cls, _tokens_differ_after_nfkc(cp, cls)


_ASCII_CLASS = np.array([char_class(b) if b < 0x80 else _SEP for b in range(256)], dtype=np.uint8)
_P = 0x01000193  # FNV-32 prime: odd, so invertible mod 2**32
_LOWER = np.arange(256, dtype=np.uint32)  # byte -> byte + 1 with ASCII letters lower-cased (0 stays free)
_LOWER[ord("A") : ord("Z") + 1] += 32
_LOWER += 1


_POW_CACHE: dict[tuple[int, type], tuple[np.ndarray, np.ndarray]] = {}


def _powers(n: int, base: int = _P, dtype: type = np.uint32) -> tuple[np.ndarray, np.ndarray]:
    """(base**i, base**-i) for i < n, modulo 2**bits of `dtype` (cached, grown on demand)."""
    pw, inv = _POW_CACHE.get((base, dtype), (np.ones(0, dtype), np.ones(0, dtype)))
    if len(pw) < n:
        size = max(n, 2 * len(pw))
        bits = np.dtype(dtype).itemsize * 8
        with np.errstate(over="ignore"):
            pw, inv = (
                np.concatenate(
                    [[dtype(1)], np.cumprod(np.full(size - 1, dtype(b), dtype=dtype), dtype=dtype)]
                )
                for b in (base, pow(base, -1, 2**bits))
            )
        _POW_CACHE[(base, dtype)] = (pw, inv)
    return pw[:n], inv[:n]


def _classes_and_values(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(class of every byte, hash value of every byte (lower-cased, + 1), positions of characters that need
    NFKC). A multi-byte character's bytes all take its class; its lower case replaces its bytes' values."""
    cls = _ASCII_CLASS[data]
    values = _LOWER[data]
    lead = np.flatnonzero(data >= 0xC0)
    if not len(lead):
        return cls, values, lead
    bmp_cls, bmp_lower, bmp_nfkc = _tables()
    b0 = data[lead]
    need = []
    for width in (2, 3, 4):
        at = lead[(b0 >= (0xC0, 0xE0, 0xF0)[width - 2]) & (b0 < (0xE0, 0xF0, 0xF8)[width - 2])]
        if not len(at):
            continue
        cp = data[at].astype(np.uint32) & np.uint32((0x1F, 0x0F, 0x07)[width - 2])
        for k in range(1, width):
            cp = (cp << np.uint32(6)) | (data[at + k] & np.uint8(0x3F))
        if width < 4:
            c = bmp_cls[cp]
            need.append(at[bmp_nfkc[cp]])
            low = bmp_lower[cp]
            changed = low != cp
            if changed.any():  # re-encode the lower case (same UTF-8 length by construction)
                lat, lcp = at[changed], low[changed]
                values[lat] = ((0xC0 if width == 2 else 0xE0) | (lcp >> np.uint32(6 * (width - 1)))) + 1
                for k in range(1, width):
                    values[lat + k] = (0x80 | ((lcp >> np.uint32(6 * (width - 1 - k))) & 0x3F)) + 1
        else:
            info = [_astral(int(x)) for x in cp]
            c = np.array([i[0] for i in info], dtype=np.uint8)
            need.append(at[np.array([i[1] for i in info], dtype=bool)])
        for k in range(width):
            cls[at + k] = c
    return cls, values, np.concatenate(need)


def batch_token_hashes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(token hashes uint64 of all texts concatenated, tokens per text int64)."""
    hashes, counts, _ = batch_tokens(texts)
    return hashes, counts


def math_token_mask(kinds: np.ndarray) -> np.ndarray:
    """The tokens a problem's math is made of: numbers, operators and one-letter variables."""
    return (kinds == _DIGIT) | (kinds == _OP) | (kinds == _LETTER1)


def multiset_hashes(hashes: np.ndarray, counts: np.ndarray, selected: np.ndarray) -> np.ndarray:
    """Per text, an order-free hash of the multiset of its `selected` tokens; 0 for a text without any."""
    with np.errstate(over="ignore"):
        values = np.where(selected, hashes * np.uint64(0xD6E8FEB86659FD93), np.uint64(0))
        csum = np.concatenate([[np.uint64(0)], np.cumsum(values, dtype=np.uint64)])
        ends = np.cumsum(counts)
        return csum[ends] - csum[ends - counts]


def batch_tokens(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(token hashes, tokens per text, is-number per token) for a batch of texts."""
    hashes, counts, kinds = batch_token_kinds(texts)
    return hashes, counts, kinds == _DIGIT


def batch_token_kinds(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(token hashes, tokens per text, kind per token: letters 1, digits 2, CJK 3, operator 4, one letter 5)."""
    if not texts:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint8)
    # NUL separates documents (removed from the texts themselves first)
    joined = "\x00".join(t.replace("\x00", " ") if t else "" for t in texts)
    data = np.frombuffer(joined.encode("utf-8", "replace"), dtype=np.uint8)
    hashes, counts, kinds, need_at, nul = _tokenize(data)
    if not len(need_at):
        return hashes, counts, kinds
    # a text with a compatibility character that tokenizes otherwise once NFKC-normalised (`２`, `½`, `ﬁ`): those
    # characters replaced by their NFKC form, and the text tokenized again
    doc_of = np.searchsorted(nul, need_at)
    redo = np.unique(doc_of)
    starts = np.concatenate([[0], nul + 1])
    ends = np.concatenate([nul, [len(data)]])
    raw = data.tobytes()
    texts_again = []
    for d in redo.tolist():
        pieces, pos = [], int(starts[d])
        for at in need_at[doc_of == d].tolist():
            width = 2 if raw[at] < 0xE0 else 3 if raw[at] < 0xF0 else 4
            pieces += [raw[pos:at], unicodedata.normalize("NFKC", raw[at : at + width].decode()).encode()]
            pos = at + width
        pieces.append(raw[pos : int(ends[d])])
        texts_again.append(b"".join(pieces))
    h2, c2, k2, _, _ = _tokenize(np.frombuffer(b"\x00".join(texts_again), dtype=np.uint8))
    cuts = np.cumsum(counts)[:-1]
    parts_h, parts_k = np.split(hashes, cuts), np.split(kinds, cuts)
    cuts2 = np.cumsum(c2)[:-1]
    for d, h, k in zip(redo.tolist(), np.split(h2, cuts2), np.split(k2, cuts2), strict=True):
        parts_h[d], parts_k[d] = h, k
    counts = counts.copy()
    counts[redo] = c2
    return np.concatenate(parts_h), counts, np.concatenate(parts_k)


def _tokenize(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(token hashes, tokens per text, kind per token, byte positions of characters that need NFKC, positions of
    the NULs between texts) of UTF-8 texts joined by NUL."""
    n = len(data)
    cls, values, need_at = _classes_and_values(data)
    boundary = np.empty(n + 1, dtype=bool)  # boundary[i]: a token or a separator run starts at i (or i == n)
    boundary[0] = boundary[n] = True
    boundary[1:n] = cls[1:] != cls[:-1]
    single = np.flatnonzero(cls >= _SINGLE)
    if len(single):
        boundary[single[(data[single] & 0xC0) != 0x80]] = True
    cuts = np.flatnonzero(boundary)
    is_start = cls[cuts[:-1]] != _SEP
    starts, ends = cuts[:-1][is_start], cuts[1:][is_start]  # a token runs to the next boundary
    # 32-bit polynomial hash of each token's (lower-cased) bytes: prefix sums of b_i * P**i, shifted back by
    # P**-start. 32 bits halve the memory traffic of the costliest pass; the widening below spreads them over 64
    # (a collision between two distinct tokens: ~1e-9 per pair, it only merges their shingles)
    pw, inv = _powers(n + 1)
    with np.errstate(over="ignore"):
        values *= pw[:n]
        prefix = np.zeros(n + 1, dtype=np.uint32)
        np.cumsum(values, out=prefix[1:])
        h32 = (prefix[ends] - prefix[starts]) * inv[starts]
        hashes = h32.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        hashes ^= hashes >> np.uint64(29)
    nul = np.flatnonzero(data == 0)
    bounds = np.searchsorted(starts, np.concatenate([[0], nul, [n]]))
    kinds = cls[starts]
    lead = data[starts]  # a one-letter token: as many bytes as its first character
    width = 1 + (lead >= 0xC0).astype(np.int64) + (lead >= 0xE0) + (lead >= 0xF0)
    kinds[(kinds == _LETTER) & (ends - starts == width)] = _LETTER1
    return hashes, np.diff(bounds).astype(np.int64), kinds, need_at, nul


def is_empty(text: str | None) -> bool:
    """Whether a text has no letter, digit or CJK token (the documents `batch_text_hashes` gives no key)."""
    if not text:
        return True
    if ASCII_WORD_RE.search(text):
        return False
    _, counts, kinds = batch_token_kinds([text])
    return not (kinds != _OP).any()


def batch_text_hashes(texts: list[str]) -> np.ndarray:
    """Per text, a 64-bit hash of its token sequence (case, whitespace and prose punctuation do not count;
    operators do); 0 for a text without a letter, digit or CJK token (operators alone are no key). The exact-dedup
    key, computed for a whole batch in numpy."""
    hashes, counts, kinds = batch_token_kinds(texts)
    if not len(hashes):
        return np.zeros(len(texts), dtype=np.uint64)
    pw, inv = _powers(len(hashes) + 1, 0x100000001B3, np.uint64)
    ends = np.cumsum(counts)
    starts = ends - counts
    words = np.concatenate([[0], np.cumsum(kinds != _OP)])
    with np.errstate(over="ignore"):
        prefix = np.concatenate([[np.uint64(0)], np.cumsum(hashes * pw[: len(hashes)], dtype=np.uint64)])
        out = (prefix[ends] - prefix[starts]) * inv[np.minimum(starts, len(hashes))]
        out ^= counts.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        out ^= out >> np.uint64(29)
        out *= np.uint64(0xBF58476D1CE4E5B9)
        out ^= out >> np.uint64(32)
    has_word = words[ends] > words[starts]
    out[~has_word] = 0
    return out | has_word.astype(np.uint64)  # texts with a word never hash to 0
