"""What the decontamination index holds of a benchmark record, and which n-grams it leaves out as templates.

A record's keys are its prose n-grams (`curate.decont_tokens`), its short-problem and whole-statement keys, and
its problem's identity; template n-grams are those of several distinct problems or of a training split, less a
record's own long shared passages; `validate_benchmarks` checks, before any work, that some record gives keys.
Split from `curate.decont`, which builds the index from these keys.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curate.decont_sources import benchmark_files, problem_texts, record_texts, say_left_out_training_splits
from curate.decont_tokens import decont_tokens, prose_ngrams, token_codes
from curate.dedup_text import ngram_hashes
from mathmix.records import read_records

SHORT_MIN_TOKENS = 8
# A record is matched by this many distinct n-grams at most (fewer where it has fewer: half of them, rounded up).
MATCH_NGRAMS = 3


def is_specific(tokens: list[str], codes: np.ndarray, min_words: int) -> bool:
    """A short problem worth matching whole: enough prose words to be a sentence, and a number or a LaTeX
    command (a lone letter such as the `s` of `Fred's` does not make "How many ... in a block?" specific)."""
    prose = int((codes & np.uint64(1)).sum())
    return prose >= min_words and any(t[0].isdigit() or t[0] == "\\" for t in tokens)


def short_problem(
    tokens: list[str], ngram: int, min_words: int, short_min: int
) -> tuple[int, int, int] | None:
    """(key hash, whole hash, length) of a problem statement's TOKENS (its problem fields read in a row) when it
    is shorter than one n-gram and qualifies for a whole match; else None."""
    return whole_key(tokens, min_words, short_min) if len(tokens) < ngram else None


def whole_key(tokens: list[str], min_words: int, short_min: int) -> tuple[int, int, int] | None:
    """(key hash of the first SHORT_MIN tokens, whole hash, length) of a statement's TOKENS, matched whole when
    at least SHORT_MIN long and specific (`is_specific`); else None (and always with SHORT_MIN 0)."""
    codes = token_codes(tokens if short_min else [])
    if not (short_min <= len(codes) and is_specific(tokens, codes, min_words)):
        return None
    key = int(ngram_hashes(codes[:short_min], short_min)[0])
    return key, int(ngram_hashes(codes, len(codes))[0]), len(codes)


@dataclass
class RecordKeys:
    """What the index holds of one benchmark record."""

    problem: np.ndarray  # unique n-gram hashes of its problem statement (its problem fields read in a row)
    grams: np.ndarray  # unique n-gram hashes of all its fields read in a row (the problem's included)
    sequence: np.ndarray  # the same n-grams in the order of the text, repeats kept (for `passage_ngrams`)
    whole: tuple[int, int, int] | None  # short-problem key (`short_problem`)
    # whole-statement key of a statement of one n-gram or more (`whole_key`): used only when the index keeps
    # none of its problem n-grams (all templates: a sibling problem shares every prose n-gram of it). None for
    # a problem with a drawing: its `[asy]` is not read, and it may be all that tells it from its sibling
    statement: tuple[int, int, int] | None
    problem_key: bytes  # its statement's tokens hashed: one distinct problem however many records hold it


def _unique_ngrams(tokens: list[str], ngram: int, min_words: int) -> np.ndarray:
    return np.unique(prose_ngrams(tokens, ngram, min_words)[0])


def record_keys(record: dict, ngram: int, min_words: int, short_min: int) -> RecordKeys:
    """The n-grams, short-problem key and problem identity of one benchmark record.

    The fields are read in a row, as a page would show them (SVAMP / ASDiv: the story, then the question): every
    n-gram of one field alone is one of them too. AMC / AIME repeat the problem as the question: read once."""
    texts = list(dict.fromkeys(record_texts(record)))
    problems = list(dict.fromkeys(problem_texts(record)))
    tokens = {t: decont_tokens(t) for t in dict.fromkeys([*texts, *problems])}
    statement = [tok for t in problems for tok in tokens[t]]
    everything = [tok for t in texts for tok in tokens[t]]
    key = " ".join(statement or everything).encode()
    sequence = prose_ngrams(everything, ngram, min_words)[0]
    return RecordKeys(
        problem=_unique_ngrams(statement, ngram, min_words),
        grams=np.unique(sequence),
        sequence=sequence,
        whole=short_problem(statement, ngram, min_words, short_min),
        statement=(
            whole_key(statement, min_words, short_min)
            if len(statement) >= ngram and not any("[asy]" in t.lower() for t in problems)
            else None
        ),
        problem_key=hashlib.blake2b(key, digest_size=8).digest(),
    )


def template_ngrams(
    records: Sequence[RecordKeys], training_files: Sequence[Path], ngram: int, min_words: int
) -> np.ndarray:
    """The n-grams that are no evidence of one problem (sorted): those of 2 or more distinct problems (MATH500's
    problems are MATH test's too: counted once), and those of the training splits left out of the benchmark
    folders (`gsm8k/train`, `math_hendrycks/train`, MATH8K ...), save their records that are an eval problem
    itself (PRM800K's split holds 4,500 MATH test problems). "Express your answer in terms of $\\pi$", "m and n are
    relatively prime positive integers. Find m+n", a solution's "we use the quadratic formula": one such 13-gram
    dropped a page (17% of MATH train, read as pages, was dropped against the eval sets). Of the shared ones, a
    record keeps those of its own passages (`passage_ngrams`): the index leaves out the rest."""
    return np.union1d(shared_ngrams(records), training_ngrams(records, training_files, ngram, min_words))


def shared_ngrams(records: Sequence[RecordKeys]) -> np.ndarray:
    """The n-grams (sorted) of 2 or more distinct problems (records with one problem statement count once)."""
    by_problem: dict[bytes, list[np.ndarray]] = {}
    for rec in records:
        by_problem.setdefault(rec.problem_key, []).append(rec.grams)
    per_problem = [g[0] if len(g) == 1 else np.unique(np.concatenate(g)) for g in by_problem.values()]
    hashes, counts = np.unique(np.concatenate([np.empty(0, np.uint64), *per_problem]), return_counts=True)
    return hashes[counts >= 2]


def training_ngrams(
    records: Sequence[RecordKeys], training_files: Sequence[Path], ngram: int, min_words: int
) -> np.ndarray:
    """The n-grams (sorted) of the training splits' records that are no eval problem (`template_ngrams`)."""
    problems = {rec.problem_key for rec in records}
    parts = [np.empty(0, np.uint64)]
    for path in training_files:
        for _, record in read_records(path):
            if isinstance(record, dict) and record_texts(record):
                keys = record_keys(record, ngram, min_words, 0)
                if keys.problem_key not in problems:
                    parts.append(keys.grams)
    return np.unique(np.concatenate(parts))


def is_member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """np.isin for a sorted, unique SORTED_SET, without sorting it again (it is large; VALUES are few)."""
    if not len(sorted_set):
        return np.zeros(len(values), bool)
    pos = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[pos] == values


# A run of this many consecutive n-grams of a record, each shared with another distinct problem, is a passage
# (`passage_ngrams`), not a template phrase.
PASSAGE_RUN = 15


def passage_ngrams(record: RecordKeys, shared: np.ndarray, run: int = PASSAGE_RUN) -> np.ndarray:
    """The shared n-grams (sorted) that are the record's own passages: those in a run of RUN or more consecutive
    n-grams of its text (`RecordKeys.sequence`) all in SHARED (n-grams of 2 or more distinct problems).

    An OCW preamble shared by its sub-questions, a problem restated in two sets (Minerva's and OCW's copies),
    near-copies with one number changed share a long run; a template phrase gives a few shared n-grams in a row.
    RUN = 15: of the shared runs in MATH test, SVAMP, ASDiv, college math, 68-97% are under 10 n-grams (templates;
    those of 15+ are near-copies or copied solution lines); 97% of the OCW records that share any have one of 15+."""
    seq = record.sequence
    if len(seq) < run or not len(shared):
        return np.empty(0, np.uint64)
    is_shared = is_member(seq, shared)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], is_shared.astype(np.int8), [0]])))
    starts, ends = edges[0::2], edges[1::2]
    long = (ends - starts) >= run
    if not long.any():
        return np.empty(0, np.uint64)
    return np.unique(np.concatenate([seq[a:b] for a, b in zip(starts[long], ends[long], strict=True)]))


def needed_ngrams(count: int) -> int:
    """Distinct n-grams that match a record with COUNT of them (in the index): min(3, half of them rounded up).
    A short problem (1-2 n-grams) is still found whole; a page sharing one n-gram with a long one is not."""
    return min(MATCH_NGRAMS, math.ceil(count / 2))


def no_records_error(files: Sequence[Path]) -> ValueError:
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
            isinstance(record, dict) and is_checkable(record, ngram, min_words, short_min_tokens)
            for _, record in read_records(path)
        )
    ]
    if len(unused) == len(files):
        raise no_records_error(unused)
    return unused


def is_checkable(record: dict, ngram: int, min_words: int, short_min: int) -> bool:
    keys = record_keys(record, ngram, min_words, short_min)
    return bool(len(keys.grams)) or keys.whole is not None
