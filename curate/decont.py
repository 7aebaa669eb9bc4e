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
A longer problem whose n-grams are all templates (sibling problems share its stem; the numbers that tell them
apart lie in no prose n-gram) is matched whole the same way.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

import numpy as np
from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter

from curate.decont_keys import (
    MATCH_NGRAMS,
    PASSAGE_RUN,
    SHORT_MIN_TOKENS,
    RecordKeys,
    is_member,
    needed_ngrams,
    no_records_error,
    passage_ngrams,
    record_keys,
    shared_ngrams,
    template_ngrams,
    training_ngrams,
    validate_benchmarks,
)
from curate.decont_sources import (
    BENCH_SUFFIXES,
    PROBLEM_FIELDS,
    TEXT_FIELDS,
    benchmark_files,
    left_out_training_splits,
    problem_texts,
    record_texts,
)
from curate.decont_tokens import coded_prose_ngrams, decont_tokens, prose_ngrams, token_codes
from curate.dedup_text import ngram_hashes
from mathmix.records import read_records

__all__ = [
    "BENCH_SUFFIXES",
    "PROBLEM_FIELDS",
    "TEXT_FIELDS",
    "MATCH_NGRAMS",
    "PASSAGE_RUN",
    "SHORT_MIN_TOKENS",
    "BenchmarkIndex",
    "DecontFilter",
    "Overlap",
    "RecordKeys",
    "benchmark_files",
    "decont_tokens",
    "find_overlaps",
    "needed_ngrams",
    "passage_ngrams",
    "prose_ngrams",
    "template_ngrams",
    "problem_texts",
    "read_records",
    "record_texts",
    "validate_benchmarks",
]

# The matcher's version, recorded in a decont job's record and in its saved index: a job or index of another version
# is not mixed with this one (its tokens and its rule differ).
# 2: one token per math symbol however written (LaTeX, Unicode, ASCII); template n-grams left out of the index; a
#    record is matched by min(3, half its n-grams) distinct n-grams, not by one.
# 3: LaTeX that lost its backslashes has the LaTeX's tokens (`overline{AB}`, `int_{0}^{1}`, `y^{prime}`:
#    `curate.decont_tokens.bare_commands`); the same text's tokens differ where it holds such words.
MATCHER = "mathmix-decont/3"
# 2**PREFILTER_BITS booleans (8 MB) mark the top bits of the indexed n-gram hashes (`BenchmarkIndex._lookup`).
PREFILTER_BITS = 23


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


class BenchmarkIndex:
    """Sorted n-gram hashes of benchmark records, with the record each n-gram came from; plus the problems
    shorter than one n-gram, keyed by their first `short_min_tokens` tokens (0 turns whole matching off).

    Template n-grams (`template_ngrams`) are left out; TRAINING_FILES: where else templates are read (default:
    the training splits the benchmark folders leave out). A record is matched when a document holds
    `needed_ngrams` distinct n-grams of its problem statement (of the statement's own count), or as many of all
    its n-grams (of their count), or its short problem whole. Solution n-grams stay in the index: a page copying a
    test solution is contaminated too; but one or two of a solution's sentences (`the quadratic formula ...`) never
    drop a page on their own, and those shared with other problems or training solutions are not there at all.

    No checkable record in any file given is a ValueError naming the files; `unused_files` lists the files
    without one when others have some.
    """

    def __init__(
        self,
        paths: Sequence[str | Path],
        ngram: int = 13,
        min_words: int = 3,
        short_min_tokens: int = SHORT_MIN_TOKENS,
        training_files: Sequence[Path] | None = None,
    ):
        if ngram < 1 or short_min_tokens < 0:
            raise ValueError(f"need ngram >= 1 and short_min_tokens >= 0, got {ngram} and {short_min_tokens}")
        self.matcher = MATCHER
        self.ngram, self.min_words, self.short_min = ngram, min_words, short_min_tokens
        self.records: list[tuple[str, int]] = []  # record id -> (benchmark name, line)
        self.benchmarks: Counter = Counter()  # benchmark -> records read that hold text in a known field
        # benchmark -> records with no n-gram (in any field) and no short problem: no rule can find them
        self.too_short: Counter = Counter()
        # benchmark -> records whose problem statement gives no n-gram and no whole key: a page copying the
        # problem alone is not found (its solution may be)
        self.problems_unmatchable: Counter = Counter()
        # benchmark -> records matched whole (short problems, and those below)
        self.matched_whole: Counter = Counter()
        # benchmark -> of those, records whose problem is one n-gram or longer, all its n-grams templates
        self.templated_whole: Counter = Counter()
        self.unused_files: list[Path] = []  # files without a checkable record
        keys: list[RecordKeys] = []
        for name, path in benchmark_files(paths):
            checkable = False
            for line_no, record in read_records(path):
                if not isinstance(record, dict) or not record_texts(record):
                    continue
                self.benchmarks[name] += 1
                keys.append(record_keys(record, ngram, min_words, short_min_tokens))
                self.records.append((name, line_no))
                checkable |= bool(len(keys[-1].grams)) or keys[-1].whole is not None
            if not checkable:
                self.unused_files.append(path)
        if len(self.unused_files) == len(benchmark_files(paths)):
            raise no_records_error(self.unused_files)
        if training_files is None:
            training_files = [p for files in left_out_training_splits(paths).values() for p in files]
        shared = shared_ngrams(keys)
        training = training_ngrams(keys, training_files, ngram, min_words)
        # per record: its shared n-grams kept as its passages (never one of a training split)
        passages = [p[~is_member(p, training)] for p in (passage_ngrams(k, shared) for k in keys)]
        template = np.union1d(shared, training)
        self.template_ngrams = len(
            np.setdiff1d(template, np.concatenate([np.empty(0, np.uint64), *passages]))
        )
        self._build(keys, template, passages)

    def _build(self, keys: list[RecordKeys], template: np.ndarray, passages: list[np.ndarray]) -> None:
        grams = np.concatenate([np.empty(0, np.uint64), *(k.grams for k in keys)])
        owners = np.repeat(np.arange(len(keys), dtype=np.int32), [len(k.grams) for k in keys])
        in_problem = np.concatenate([np.empty(0, bool), *(np.isin(k.grams, k.problem) for k in keys)])
        in_passage = np.concatenate(
            [np.empty(0, bool), *(np.isin(k.grams, p) for k, p in zip(keys, passages, strict=True))]
        )
        kept = ~np.isin(grams, template) | in_passage
        grams, owners, in_problem = grams[kept], owners[kept], in_problem[kept]
        n_all = np.bincount(owners, minlength=len(keys))
        n_problem = np.bincount(owners, weights=in_problem, minlength=len(keys)).astype(np.int64)
        # per record: distinct n-grams of its problem, and of all its fields, that match it (10**4: none can)
        self.need = np.array(
            [
                [needed_ngrams(p) or 10**4, needed_ngrams(a) or 10**4]
                for p, a in zip(n_problem, n_all, strict=True)
            ],
            dtype=np.int16,
        ).reshape(-1, 2)
        short: list[tuple[int, int, int, int]] = []  # (key hash, whole hash, length, record)
        for rec, (k, (name, _)) in enumerate(zip(keys, self.records, strict=True)):
            whole = k.whole
            if whole is None and not n_problem[rec] and len(k.problem):
                # every n-gram of its problem is a template (a sibling problem with other numbers shares them
                # all): the page must hold the whole statement, its numbers included
                whole = k.statement
                if whole is not None:
                    self.templated_whole[name] += 1
            if whole is not None:
                self.matched_whole[name] += 1
                short.append((*whole, rec))
            elif not n_problem[rec]:
                self.problems_unmatchable[name] += 1
                if not n_all[rec]:
                    self.too_short[name] += 1
        order = np.argsort(grams, kind="stable")
        self.hashes, self.owners, self.in_problem = grams[order], owners[order], in_problem[order]
        short.sort()
        self.short_keys = np.array([s[0] for s in short], dtype=np.uint64)
        self.short_wholes = [(whole, length, rec) for _, whole, length, rec in short]

    def __len__(self) -> int:
        return len(self.hashes)

    def find(self, text: str, max_ngrams: int = 5) -> list[Overlap]:
        """Overlaps of `text` with benchmark records (empty list when clean), most matched first."""
        tokens = decont_tokens(text)
        codes = token_codes(tokens)
        by_record: dict[int, list[tuple[int, int, bool]]] = {}  # record -> (start, length, whole) per match
        distinct: dict[int, dict[int, bool]] = {}  # record -> {matched n-gram: of its problem}
        grams, starts = coded_prose_ngrams(codes, self.ngram, self.min_words)
        if len(grams) and len(self.hashes):
            found, lo = self._lookup(grams)
            if len(found):
                hi = np.searchsorted(self.hashes, grams[found], side="right")
                for i, start, end in zip(found.tolist(), lo.tolist(), hi.tolist(), strict=True):
                    gram = int(grams[i])
                    owners, problem = self.owners[start:end].tolist(), self.in_problem[start:end].tolist()
                    for rec, of_problem in zip(owners, problem, strict=True):
                        by_record.setdefault(rec, []).append((int(starts[i]), self.ngram, False))
                        distinct.setdefault(rec, {})[gram] = of_problem
        if len(self.short_keys) and len(codes) >= self.short_min:
            self._find_whole(codes, by_record)
        out = []
        for rec, matches in by_record.items():
            whole = sum(w for _, _, w in matches)
            seen = distinct.get(rec, {})
            need_problem, need_all = self.need[rec].tolist()
            if not whole and sum(seen.values()) < need_problem and len(seen) < need_all:
                continue  # template-like: too few of the record's n-grams
            name, line = self.records[rec]
            shown = [" ".join(tokens[p : p + n]) for p, n, _ in matches[:max_ngrams]]
            out.append(Overlap(name, line, n_matched=len(matches), ngrams=shown, whole=whole))
        out.sort(key=lambda o: (-o.n_matched, o.benchmark, o.item))
        return out

    def _lookup(self, grams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in GRAMS of the n-grams in the index, in order; where each first is in `hashes`).

        A bitmap of the indexed hashes' top bits (`PREFILTER_BITS`) turns away ~90% of a page's n-grams before the
        binary search, which was the filter's largest cost (random reads in a ~1M-entry array)."""
        bits = self.__dict__.get("_prefilter")
        if bits is None:
            bits = self._prefilter = np.zeros(1 << PREFILTER_BITS, bool)
            bits[(self.hashes >> np.uint64(64 - PREFILTER_BITS)).astype(np.int64)] = True
        maybe = np.flatnonzero(bits[(grams >> np.uint64(64 - PREFILTER_BITS)).astype(np.int64)])
        lo = np.searchsorted(self.hashes, grams[maybe], side="left")
        hit = self.hashes[np.minimum(lo, len(self.hashes) - 1)] == grams[maybe]
        return maybe[hit], lo[hit]

    def __getstate__(self) -> dict:
        """Pickled without the prefilter bitmap (8 MB, rebuilt in ~10 ms on first use)."""
        state = self.__dict__.copy()
        state.pop("_prefilter", None)
        return state

    def _find_whole(self, codes: np.ndarray, by_record: dict[int, list[tuple[int, int, bool]]]) -> None:
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
                    by_record.setdefault(rec, []).append((pos, length, True))
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
