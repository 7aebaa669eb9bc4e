"""Word/number tokens and their 64-bit hashes for a whole batch of texts at once, in numpy, on UTF-8 bytes.

Why bytes: a regex tokenizer plus a per-token hash lookup costs more than all the MinHash permutations together
(~0.9 us per token in Python); classifying bytes and hashing tokens with `np.add.reduceat` does the batch in a
few array passes. Tokens follow `curate.dedup_text.TOKEN_RE` for ASCII (letter runs, digit runs, lower-cased,
punctuation dropped, numbers kept); other scripts' letters join letter runs, CJK / Hangul characters are one token
each, and general punctuation / math symbols (U+2000-U+2FFF, Latin-1 symbols, NBSP) separate tokens.
"""

from __future__ import annotations

import numpy as np

_SEP, _LETTER, _DIGIT, _SINGLE = 0, 1, 2, 3


def _class_table() -> np.ndarray:
    lut = np.zeros(256, dtype=np.uint8)  # ASCII punctuation, whitespace, controls: separators
    lut[ord("a") : ord("z") + 1] = _LETTER
    lut[ord("A") : ord("Z") + 1] = _LETTER  # only non-lowered input reaches these
    lut[ord("0") : ord("9") + 1] = _DIGIT
    lut[0xC3:0xE2] = _LETTER  # Latin-1 letters, Greek, Cyrillic, Hebrew, Arabic, ... (2-byte), Indic (E0, E1)
    lut[0xC2] = _SEP  # U+0080-U+00BF: NBSP, Latin-1 symbols
    lut[0xE2] = _SEP  # U+2000-U+2FFF: punctuation, arrows, math operators, box drawing
    lut[0xE3:0xEE] = _SINGLE  # U+3000-U+DFFF: CJK, kana, Hangul: one character, one token
    lut[0xEE:0xF5] = _LETTER  # private use, fullwidth forms, 4-byte characters
    lut[0xEF] = _SEP  # U+F000-U+FFFF: fullwidth punctuation, BOM, specials
    return lut


_CLASS = _class_table()
_P = 0x100000001B3
_POW = np.ones(1, dtype=np.uint64)  # P**i mod 2**64
_INV_POW = np.ones(1, dtype=np.uint64)  # P**-i mod 2**64 (P is odd, so invertible)


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(P**i, P**-i) for i < n, mod 2**64 (cached, grown on demand)."""
    global _POW, _INV_POW
    if len(_POW) < n:
        size = max(n, 2 * len(_POW))
        with np.errstate(over="ignore"):
            for base, name in ((_P, "_POW"), (pow(_P, -1, 2**64), "_INV_POW")):
                steps = np.full(size - 1, np.uint64(base), dtype=np.uint64)
                globals()[name] = np.concatenate([[np.uint64(1)], np.cumprod(steps, dtype=np.uint64)])
    return _POW[:n], _INV_POW[:n]


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: every output bit depends on every input bit."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def _byte_classes(joined: str, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(class of every byte, is-continuation-byte); a continuation byte takes its lead byte's class."""
    if joined.isascii():
        return _CLASS[data], np.zeros(len(data), dtype=bool)
    cont = (data & 0xC0) == 0x80
    idx = np.arange(len(data), dtype=np.int32)
    lead = np.maximum.accumulate(np.where(cont, 0, idx))
    return _CLASS[data[lead]], cont


def batch_token_hashes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(token hashes uint64 of all texts concatenated, tokens per text int64)."""
    if not texts:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    # NUL separates documents (removed from the texts themselves first)
    joined = "\x00".join(t.replace("\x00", " ") if t else "" for t in texts).lower()
    data = np.frombuffer(joined.encode("utf-8", "replace"), dtype=np.uint8)
    n = len(data)
    cls, cont = _byte_classes(joined, data)
    boundary = np.empty(n + 1, dtype=bool)  # boundary[i]: a token starts at i or ends just before i
    boundary[0] = boundary[n] = True
    boundary[1:n] = cls[1:] != cls[:-1]
    single = cls == _SINGLE
    if single.any():
        boundary[:n] |= single & ~cont
    in_token = cls != _SEP
    starts = np.flatnonzero(boundary[:n] & in_token)
    # a token ends at the next boundary after its start
    cuts = np.flatnonzero(boundary)
    ends = cuts[np.searchsorted(cuts, starts, side="right")]
    # polynomial hash of each token's bytes: prefix sums of b_i * P**i, shifted back by P**-start
    pw, inv = _powers(n + 1)
    with np.errstate(over="ignore"):
        prefix = np.zeros(n + 1, dtype=np.uint64)
        np.cumsum((data.astype(np.uint64) + np.uint64(1)) * pw[:n], out=prefix[1:])
        hashes = mix64((prefix[ends] - prefix[starts]) * inv[starts])
    nul = np.flatnonzero(data == 0)
    bounds = np.searchsorted(starts, np.concatenate([[0], nul, [n]]))
    return hashes, np.diff(bounds).astype(np.int64)
