"""Benchmark decontamination: exact n-gram overlap (13 by default, as MegaMath) with benchmark problems + solutions.

Both sides are normalised the same way (NFKC, case, whitespace, punctuation, LaTeX spacing commands), then cut
into word/number tokens (`curate.dedup_text`). Benchmark n-grams are kept as sorted 64-bit hashes (one array per
index, a few bytes per n-gram), so the full set of benchmarks fits in memory and a lookup is one `searchsorted`.
Each field of a record is indexed alone and all fields read in a row (story then question for SVAMP/ASDiv).

Problems shorter than one n-gram (`Solve the equation $2^{5x-1}=30$.`) are matched whole: the first
`short_min_tokens` of them are a key, and a key hit counts only when the whole problem follows in the document.
The statement is the record's problem fields read in a row (a SVAMP story and its question together), and it
qualifies only with 3 prose words and a number or LaTeX command: "What is the area of the shaded region?" names
no problem in particular, and a question without its story ("How many groups of 3 can you make?") neither.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

import numpy as np
from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter

from curate.decont_sources import (
    BENCH_SUFFIXES,
    PROBLEM_FIELDS,
    TEXT_FIELDS,
    benchmark_files,
    problem_texts,
    record_texts,
    say_left_out_training_splits,
)
from curate.dedup_text import TOKEN_RE, ngram_hashes, normalize_math_text, token_hashes
from mathmix.records import read_records

__all__ = [
    "BENCH_SUFFIXES",
    "PROBLEM_FIELDS",
    "TEXT_FIELDS",
    "BenchmarkIndex",
    "DecontFilter",
    "Overlap",
    "benchmark_files",
    "find_overlaps",
    "problem_texts",
    "read_records",
    "record_texts",
    "validate_benchmarks",
]

SHORT_MIN_TOKENS = 8
# LaTeX commands stay tokens of their own (with the backslash) so they never count as prose words.
_DECONT_TOKEN_RE = re.compile(r"\\[a-zA-Z]+|" + TOKEN_RE.pattern)


@dataclass
class Overlap:
    """A document's overlap with one benchmark record."""

    benchmark: str
    item: int  # 0-based line of the record in its benchmark file
    n_matched: int  # matched n-gram positions in the document (a short problem matched whole counts 1)
    ngrams: list[str] = field(default_factory=list)  # a few matched n-grams (or whole short problems)
    whole: int = 0  # of n_matched, the places where the record's short problem occurs whole

    def to_dict(self) -> dict:
        return {
            "benchmark": self.benchmark,
            "item": self.item,
            "n_matched": self.n_matched,
            "ngrams": self.ngrams,
            "whole": self.whole,
        }


def decont_tokens(text: str) -> list[str]:
    """Tokens used on both sides of the overlap check."""
    return _DECONT_TOKEN_RE.findall(normalize_math_text(text).lower())


_CODES: dict[str, int] = {}  # token -> 64-bit hash whose lowest bit says "prose word"


def _token_codes(tokens: list[str]) -> np.ndarray:
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
    return _prose_ngrams(_token_codes(tokens), ngram, min_words)


def _prose_ngrams(codes: np.ndarray, ngram: int, min_words: int) -> tuple[np.ndarray, np.ndarray]:
    hashes = ngram_hashes(codes, ngram)
    if not len(hashes) or min_words <= 0:
        return hashes, np.arange(len(hashes))
    csum = np.concatenate([[0], np.cumsum(codes & np.uint64(1), dtype=np.int64)])
    keep = np.nonzero(csum[ngram:] - csum[: len(hashes)] >= min_words)[0]
    return hashes[keep], keep


def _is_specific(tokens: list[str], codes: np.ndarray, min_words: int) -> bool:
    """A short problem worth matching whole: enough prose words to be a sentence, and a number or a LaTeX
    command (a lone letter such as the `s` of `Fred's` does not make "How many ... in a block?" specific)."""
    prose = int((codes & np.uint64(1)).sum())
    return prose >= min_words and any(t[0].isdigit() or t[0] == "\\" for t in tokens)


def _short_problem(record: dict, ngram: int, min_words: int, short_min: int) -> tuple[int, int, int] | None:
    """(key hash, whole hash, length) of the record's problem statement (its problem fields read in a row)
    when it is shorter than one n-gram and qualifies for a whole match; else None."""
    parts = list(dict.fromkeys(problem_texts(record)))  # AMC / AIME repeat the problem as the question
    tokens = decont_tokens("\n".join(parts)) if short_min else []
    codes = _token_codes(tokens)
    if not (short_min <= len(codes) < ngram and _is_specific(tokens, codes, min_words)):
        return None
    key = int(ngram_hashes(codes[:short_min], short_min)[0])
    return key, int(ngram_hashes(codes, len(codes))[0]), len(codes)


def _record_keys(
    record: dict, ngram: int, min_words: int, short_min: int
) -> tuple[np.ndarray, tuple[int, int, int] | None]:
    """(unique n-gram hashes, short-problem key or None) of one benchmark record: what the index holds for it."""
    texts = record_texts(record)
    if len(texts) > 1:  # also the fields read in a row, as a page would show them
        texts.append("\n".join(texts))
    grams = [g for t in texts if len(g := prose_ngrams(decont_tokens(t), ngram, min_words)[0])]
    uniq = np.unique(np.concatenate(grams)) if grams else np.empty(0, dtype=np.uint64)
    return uniq, _short_problem(record, ngram, min_words, short_min)


def _no_records_error(files: Sequence[Path]) -> ValueError:
    shown = ", ".join(str(f) for f in files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return ValueError(
        f"no benchmark record to check in {shown} (a record needs a problem, question, prompt, solution "
        "or answer field long enough to match)"
    )


def validate_benchmarks(
    paths: Sequence[str | Path],
    ngram: int = 13,
    min_words: int = 3,
    short_min_tokens: int = SHORT_MIN_TOKENS,
) -> list[Path]:
    """Check benchmark paths before any work: every path exists and, together, they hold a record to check.

    Reads each file only up to its first checkable record. Returns the files with none (to warn about);
    raises FileNotFoundError naming a missing path, ValueError naming a bad line, a folder of training splits
    only or, when no file holds a checkable record, the files. A run that checks nothing must not report "no
    contamination found". Says (once) which training splits the folders leave out.
    """
    if ngram < 1 or short_min_tokens < 0:
        raise ValueError(f"need ngram >= 1 and short_min_tokens >= 0, got {ngram} and {short_min_tokens}")
    files = [path for _name, path in benchmark_files(paths)]
    say_left_out_training_splits(paths)
    unused = [
        path
        for path in files
        if not any(
            isinstance(record, dict) and _checkable(record, ngram, min_words, short_min_tokens)
            for _, record in read_records(path)
        )
    ]
    if len(unused) == len(files):
        raise _no_records_error(unused)
    return unused


def _checkable(record: dict, ngram: int, min_words: int, short_min: int) -> bool:
    grams, whole = _record_keys(record, ngram, min_words, short_min)
    return bool(len(grams)) or whole is not None


class BenchmarkIndex:
    """Sorted n-gram hashes of benchmark records, with the record each n-gram came from; plus the problems
    shorter than one n-gram, keyed by their first `short_min_tokens` tokens (0 turns whole matching off).

    No checkable record in any file given is a ValueError naming the files; `unused_files` lists the files
    without one when others have some.
    """

    def __init__(
        self,
        paths: Sequence[str | Path],
        ngram: int = 13,
        min_words: int = 3,
        short_min_tokens: int = SHORT_MIN_TOKENS,
    ):
        if ngram < 1 or short_min_tokens < 0:
            raise ValueError(f"need ngram >= 1 and short_min_tokens >= 0, got {ngram} and {short_min_tokens}")
        self.ngram, self.min_words, self.short_min = ngram, min_words, short_min_tokens
        self.records: list[tuple[str, int]] = []  # record id -> (benchmark name, line)
        self.benchmarks: Counter = Counter()  # benchmark -> records read that hold text in a known field
        # benchmark -> records with no n-gram and no short problem to match whole (no rule can find them)
        self.too_short: Counter = Counter()
        self.matched_whole: Counter = Counter()  # benchmark -> records with a short problem matched whole
        self.unused_files: list[Path] = []  # files without a checkable record
        hashes, owners = [], []
        short: list[tuple[int, int, int, int]] = []  # (key hash, whole hash, length, record)
        for name, path in benchmark_files(paths):
            checkable = len(self.records)
            for line_no, record in read_records(path):
                if not isinstance(record, dict) or not record_texts(record):
                    continue
                self.benchmarks[name] += 1
                grams, whole = _record_keys(record, ngram, min_words, short_min_tokens)
                if not len(grams) and whole is None:
                    self.too_short[name] += 1
                    continue
                rec = len(self.records)
                self.records.append((name, line_no))
                if len(grams):
                    hashes.append(grams)
                    owners.append(np.full(len(grams), rec, dtype=np.int32))
                if whole is not None:
                    self.matched_whole[name] += 1
                    short.append((*whole, rec))
            if len(self.records) == checkable:
                self.unused_files.append(path)
        if not self.records:
            raise _no_records_error(self.unused_files)
        all_hashes = np.concatenate(hashes) if hashes else np.empty(0, dtype=np.uint64)
        all_owners = np.concatenate(owners) if owners else np.empty(0, dtype=np.int32)
        order = np.argsort(all_hashes, kind="stable")
        self.hashes, self.owners = all_hashes[order], all_owners[order]
        short.sort()
        self.short_keys = np.array([s[0] for s in short], dtype=np.uint64)
        self.short_wholes = [(whole, length, rec) for _, whole, length, rec in short]

    def __len__(self) -> int:
        return len(self.hashes)

    def find(self, text: str, max_ngrams: int = 5) -> list[Overlap]:
        """Overlaps of `text` with benchmark records (empty list when clean), most matched first."""
        tokens = decont_tokens(text)
        codes = _token_codes(tokens)
        by_record: dict[int, list[tuple[int, int]]] = {}  # record -> (start, length) of each match
        grams, starts = _prose_ngrams(codes, self.ngram, self.min_words)
        if len(grams) and len(self.hashes):
            lo = np.searchsorted(self.hashes, grams, side="left")
            found = np.flatnonzero(self.hashes[np.minimum(lo, len(self.hashes) - 1)] == grams)
            if len(found):
                hi = np.searchsorted(self.hashes, grams[found], side="right")
                for i, end in zip(found.tolist(), hi.tolist(), strict=True):
                    for rec in self.owners[lo[i] : end].tolist():
                        by_record.setdefault(rec, []).append((int(starts[i]), self.ngram))
        if len(self.short_keys) and len(codes) >= self.short_min:
            self._find_whole(codes, by_record)
        out = []
        for rec, matches in by_record.items():
            name, line = self.records[rec]
            shown = [" ".join(tokens[p : p + n]) for p, n in matches[:max_ngrams]]
            whole = sum(n != self.ngram for _, n in matches)
            out.append(Overlap(name, line, n_matched=len(matches), ngrams=shown, whole=whole))
        out.sort(key=lambda o: (-o.n_matched, o.benchmark, o.item))
        return out

    def _find_whole(self, codes: np.ndarray, by_record: dict[int, list[tuple[int, int]]]) -> None:
        """Short problems that occur whole in the document: a key hit, then the whole hash checked."""
        keys = ngram_hashes(codes, self.short_min)
        lo = np.searchsorted(self.short_keys, keys, side="left")
        hit = np.flatnonzero(self.short_keys[np.minimum(lo, len(self.short_keys) - 1)] == keys)
        for pos in hit.tolist():
            j = int(lo[pos])
            while j < len(self.short_keys) and self.short_keys[j] == keys[pos]:
                whole, length, rec = self.short_wholes[j]
                if (
                    pos + length <= len(codes)
                    and int(ngram_hashes(codes[pos : pos + length], length)[0]) == whole
                ):
                    by_record.setdefault(rec, []).append((pos, length))
                j += 1


_INDEX_CACHE: dict[tuple, BenchmarkIndex] = {}


def load_index(
    benchmarks: Sequence[str | Path] | BenchmarkIndex,
    ngram: int = 13,
    min_words: int = 3,
    short_min_tokens: int = SHORT_MIN_TOKENS,
) -> BenchmarkIndex:
    """A BenchmarkIndex for these paths (built once per process and reused)."""
    if isinstance(benchmarks, BenchmarkIndex):
        return benchmarks
    key = (tuple(str(Path(p).resolve()) for p in benchmarks), ngram, min_words, short_min_tokens)
    if key not in _INDEX_CACHE:
        _INDEX_CACHE[key] = BenchmarkIndex(list(benchmarks), ngram, min_words, short_min_tokens)
    return _INDEX_CACHE[key]


def find_overlaps(
    texts: list[str],
    benchmarks: Sequence[str | Path] | BenchmarkIndex,
    ngram: int = 13,
    max_ngrams: int = 5,
    min_words: int = 3,
    short_min_tokens: int = SHORT_MIN_TOKENS,
) -> list[list[Overlap]]:
    """For each text, its overlaps with benchmark records (an empty list for a clean text)."""
    index = load_index(benchmarks, ngram, min_words, short_min_tokens)
    return [index.find(t or "", max_ngrams=max_ngrams) for t in texts]


class DecontFilter(BaseFilter):
    """Drops (mode="remove") or flags (mode="flag") documents sharing an n-gram with a benchmark record.

    Every document gets `metadata["contaminated"]` (bool) and `metadata["decont_benchmarks"]` (comma-separated
    names, "" when clean); per-benchmark hits are counted as stats `hits_<benchmark>`. With `report_folder`,
    each task writes `<rank:05d>.jsonl` there: one line per contaminated document with its id and overlaps.
    """

    name = "🧪 Decontamination"

    def __init__(
        self,
        benchmarks: Sequence[str | Path],
        ngram: int = 13,
        mode: Literal["remove", "flag"] = "remove",
        report_folder: str | Path | None = None,
        exclusion_writer=None,
        min_words: int = 3,
        short_min_tokens: int = SHORT_MIN_TOKENS,
    ):
        super().__init__(exclusion_writer=exclusion_writer)
        if mode not in ("remove", "flag"):
            raise ValueError(f"mode must be 'remove' or 'flag', got {mode!r}")
        self.benchmarks = [str(p) for p in benchmarks]
        validate_benchmarks(self.benchmarks, ngram, min_words, short_min_tokens)  # fail now, not in a worker
        self.ngram = ngram
        self.mode = mode
        self.min_words = min_words
        self.short_min_tokens = short_min_tokens
        self.report_folder = Path(report_folder) if report_folder else None
        self._report: TextIO | None = None

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        index = load_index(self.benchmarks, self.ngram, self.min_words, self.short_min_tokens)
        overlaps = index.find(doc.text or "")
        names = sorted({o.benchmark for o in overlaps})
        doc.metadata["contaminated"] = bool(overlaps)
        doc.metadata["decont_benchmarks"] = ",".join(names)
        if not overlaps:
            return True
        for name in names:
            self.stat_update(f"hits_{name}")
        if self._report is not None:
            line = {"id": doc.id, "mode": self.mode, "overlaps": [o.to_dict() for o in overlaps]}
            self._report.write(json.dumps(line, ensure_ascii=False) + "\n")
        if self.mode == "flag":
            self.stat_update("flagged_contaminated")
            return True
        doc.metadata["reason"] = "contaminated"
        return False, "contaminated"

    def run(self, data, rank: int = 0, world_size: int = 1):
        if self.report_folder is None:
            yield from super().run(data, rank, world_size)
            return
        self.report_folder.mkdir(parents=True, exist_ok=True)
        with open(self.report_folder / f"{rank:05d}.jsonl", "w", encoding="utf-8") as report:
            self._report = report
            try:
                yield from super().run(data, rank, world_size)
            finally:
                self._report = None
