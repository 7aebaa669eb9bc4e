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


def _byte_classes(data: np.ndarray) -> np.ndarray:
    """Class of every byte; a UTF-8 continuation byte takes the class of the byte before it (its lead)."""
    cls = _CLASS[data]
    cont = np.flatnonzero((data & 0xC0) == 0x80)
    for _ in range(3):  # a character has at most 3 continuation bytes
        if not len(cont):
            break
        cls[cont] = cls[cont - 1]
    return cls


def batch_token_hashes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(token hashes uint64 of all texts concatenated, tokens per text int64).

    ASCII letters are lower-cased here (on the bytes); other scripts keep their case.
    """
    hashes, counts, _ = batch_tokens(texts)
    return hashes, counts


def number_hashes(hashes: np.ndarray, counts: np.ndarray, is_number: np.ndarray) -> np.ndarray:
    """Per text, an order-free hash of its numbers (the multiset of number tokens); 0 for a text without any."""
    with np.errstate(over="ignore"):
        values = np.where(is_number, hashes * np.uint64(0xD6E8FEB86659FD93), np.uint64(0))
        csum = np.concatenate([[np.uint64(0)], np.cumsum(values, dtype=np.uint64)])
        ends = np.cumsum(counts)
        return csum[ends] - csum[ends - counts]


def batch_tokens(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(token hashes, tokens per text, is-number per token) for a batch of texts."""
    if not texts:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64), np.empty(0, dtype=bool)
    # NUL separates documents (removed from the texts themselves first)
    joined = "\x00".join(t.replace("\x00", " ") if t else "" for t in texts)
    data = np.frombuffer(joined.encode("utf-8", "replace"), dtype=np.uint8)
    n = len(data)
    cls = _byte_classes(data)
    boundary = np.empty(n + 1, dtype=bool)  # boundary[i]: a token or a separator run starts at i (or i == n)
    boundary[0] = boundary[n] = True
    boundary[1:n] = cls[1:] != cls[:-1]
    single = np.flatnonzero(cls == _SINGLE)
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
        values = _LOWER[data]
        values *= pw[:n]
        prefix = np.zeros(n + 1, dtype=np.uint32)
        np.cumsum(values, out=prefix[1:])
        h32 = (prefix[ends] - prefix[starts]) * inv[starts]
        hashes = h32.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        hashes ^= hashes >> np.uint64(29)
    nul = np.flatnonzero(data == 0)
    bounds = np.searchsorted(starts, np.concatenate([[0], nul, [n]]))
    return hashes, np.diff(bounds).astype(np.int64), cls[starts] == _DIGIT


def batch_text_hashes(texts: list[str]) -> np.ndarray:
    """Per text, a 64-bit hash of its token sequence (case of ASCII letters, whitespace and punctuation do not
    count); 0 for a text without any token. The exact-dedup key, computed for a whole batch in numpy."""
    hashes, counts, _ = batch_tokens(texts)
    if not len(hashes):
        return np.zeros(len(texts), dtype=np.uint64)
    pw, inv = _powers(len(hashes) + 1, 0x100000001B3, np.uint64)
    ends = np.cumsum(counts)
    starts = ends - counts
    with np.errstate(over="ignore"):
        prefix = np.concatenate([[np.uint64(0)], np.cumsum(hashes * pw[: len(hashes)], dtype=np.uint64)])
        out = (prefix[ends] - prefix[starts]) * inv[np.minimum(starts, len(hashes))]
        out ^= counts.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        out ^= out >> np.uint64(29)
        out *= np.uint64(0xBF58476D1CE4E5B9)
        out ^= out >> np.uint64(32)
    out[counts == 0] = 0
    return out | (counts > 0).astype(np.uint64)  # non-empty texts never hash to 0
