"""Text preprocessing for the fastText math classifier, identical at training and at scoring time (MegaMath).

NFKC, lowercase, digit runs -> `<NUM>`, tokens over 100 characters dropped, non-alphanumerics stripped, lines of
more than `max_line_tokens` tokens split. One addition to MegaMath's recipe, in the spirit of `<NUM>`: formula
delimiters become `<math>` and TeX commands `frac<cmd>` before symbols are stripped, since the extractor writes
math as `$...$` and money as `\\$60`; without it a formula and a price table look the same.
"""

from __future__ import annotations

import re
import unicodedata

NUM_TOKEN = "<NUM>"
MAX_TOKEN_CHARS = 100
MAX_LINE_TOKENS = 256
# Scoring a document reads at most this many tokens: bounds the cost of enormous pages, and training chunks are
# far shorter, so the model never saw longer inputs anyway.
MAX_DOC_TOKENS = 4096

_NON_ALNUM = re.compile(r"[\W_]+")
# Chinese, Japanese and Korean characters: each becomes `<cjk>`. Unsplit, a sentence is one (dropped or never
# seen) token and a page is scored on its numbers alone; one shared token lets the model learn the script.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
CJK_TOKEN = "<cjk>"
_DIGITS = re.compile(r"\d+")


# A formula delimiter (`$`, `$$`, not the escaped `\$` the extractor writes for money) or a TeX command.
_TEX = re.compile(r"(?<!\\)\$\$?|\\[a-zA-Z]+")
MATH_MARK = "<math>"
CMD_SUFFIX = "<cmd>"


def _tex_token(m: re.Match) -> str:
    tex = m.group(0)
    return f" {MATH_MARK} " if tex[0] == "$" else f" {tex[1:]}{CMD_SUFFIX} "


def normalize_line(line: str) -> list[str]:
    """One line of text -> its tokens (NFKC, lowercase, long tokens dropped, non-alphanumerics stripped).

    Letters of every script count as alphanumeric (Greek letters are a math signal); symbols and punctuation,
    `_` included, separate tokens.
    """
    tokens: list[str] = []
    line = _CJK.sub(f" {CJK_TOKEN} ", _TEX.sub(_tex_token, line))
    for raw in unicodedata.normalize("NFKC", line).lower().split():
        if raw in (MATH_MARK, CJK_TOKEN) or raw.endswith(CMD_SUFFIX):
            tokens.append(raw)
            continue
        if len(raw) > MAX_TOKEN_CHARS:
            continue
        for piece in _NON_ALNUM.sub(" ", raw).split():
            # A digit run becomes its own token: `x2` -> `x <NUM>`, `3.14` -> `<NUM> <NUM>`.
            tokens.extend(_DIGITS.sub(f" {NUM_TOKEN} ", piece).split())
    return tokens


def preprocess_lines(text: str, max_line_tokens: int = MAX_LINE_TOKENS) -> list[str]:
    """A document -> its non-empty normalized lines, over-long lines split into pieces of `max_line_tokens`."""
    out: list[str] = []
    for line in text.splitlines():
        tokens = normalize_line(line)
        for start in range(0, len(tokens), max_line_tokens):
            out.append(" ".join(tokens[start : start + max_line_tokens]))
    return out


def preprocess(text: str, max_tokens: int = MAX_DOC_TOKENS) -> str:
    """A document -> the single fastText input line it is scored on (at most `max_tokens` tokens)."""
    tokens: list[str] = []
    for line in preprocess_lines(text):
        tokens.extend(line.split())
        if len(tokens) >= max_tokens:
            break
    return " ".join(tokens[:max_tokens])


def chunk_document(
    text: str, chunk_tokens: int = MAX_LINE_TOKENS, max_chunks: int | None = None
) -> list[str]:
    """A document -> training examples of about `chunk_tokens` tokens each, packed from whole lines.

    A long page gives several examples instead of one, so a few dozen pages still teach the model; the score of a
    whole page (the mean of its word vectors) is then close to the mean over its chunks.
    """
    chunks: list[str] = []
    current: list[str] = []
    for line in preprocess_lines(text, max_line_tokens=chunk_tokens):
        words = line.split()
        if current and len(current) + len(words) > chunk_tokens:
            chunks.append(" ".join(current))
            current = []
            if max_chunks is not None and len(chunks) >= max_chunks:
                return chunks
        current.extend(words)
    if current:
        chunks.append(" ".join(current))
    return chunks[:max_chunks] if max_chunks is not None else chunks
