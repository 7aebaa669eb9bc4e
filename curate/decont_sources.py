"""Where decontamination reads its records: benchmark and prompt files, their names, and the text of a record.

A benchmark is named `folder/file` (`gsm8k/test`); two files that would share a name are told apart by more of
their parent folders (`bench/gsm8k/test`, `qwen_eval/gsm8k/test`), so a hit's line number points at one file.
A benchmark folder's training splits (`gsm8k/train.jsonl`, `math8k_train.jsonl`) are left out: see
`is_training_split`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Fields holding problem / solution text across GSM8K, MATH, MATH500, AIME, AMC, OlympiadBench, Minerva/OCW, SAT,
# SVAMP, ASDiv, MATH8K prompts (names differ per set; see ../shared/data/README.md).
TEXT_FIELDS = (
    "context",
    "Body",
    "body",
    "problem",
    "question",
    "Question",
    "prompt",
    "solution",
    "answer",
    "Answer",
    "final_answer",
    "options",
)  # in reading order: SVAMP / ASDiv put the story in `Body` and the question after it
# Fields that state a problem (a short one is matched whole; answers and solutions only by n-grams).
PROBLEM_FIELDS = ("context", "Body", "body", "problem", "question", "Question", "prompt")
# Where prompt sets (`decont --check`) also keep their prompt: plain text, instruction data, chat turns.
PROMPT_EXTRA_FIELDS = ("text", "instruction", "input", "query", "messages", "conversations")
# Folders are searched for JSONL only; a `.json` file (a JSON array of records) is read when named.
BENCH_SUFFIXES = (".jsonl",)
# Benchmark folders hold eval sets beside their training splits (gsm8k/train.jsonl, math8k_limr/math8k_train.jsonl,
# math_hendrycks/prm800k_style_train12k_derived.jsonl). Contamination is overlap with what is evaluated: pages that
# hold training problems (AoPS threads, homework help) are good math data, so a folder's training splits are left
# out. A word starting with `train` marks one (`train`, `math8k_train`, `training`; not `strain`, `retrain`).
_TRAINING_SPLIT = re.compile(r"(?<![a-z])train")


def field_text(value: Any) -> str:
    """The text of one field: a string, a list of strings, or chat turns (`content` / `value`) joined."""
    if isinstance(value, str):
        return value if value.strip() and value.strip() != "None" else ""
    if isinstance(value, dict):
        return field_text(value.get("content", value.get("value")))
    if isinstance(value, list):
        parts = (
            field_text(v) if isinstance(v, str | dict | list) else str(v) for v in value if v is not None
        )
        return "\n".join(p for p in parts if p)
    return ""


def record_texts(record: dict, fields: Sequence[str] = TEXT_FIELDS) -> list[str]:
    """The problem/solution texts of one record (fields that exist and hold text other than 'None')."""
    return [text for key in fields if (text := field_text(record.get(key)))]


def problem_texts(record: dict) -> list[str]:
    """The problem statement fields of one record (strings only), in reading order."""
    return [v for k in PROBLEM_FIELDS if isinstance(v := record.get(k), str) and v.strip()]


def prompt_texts(record: dict) -> list[str]:
    """Every text of one prompt-set row to check, or [] when it holds no prompt (an answer alone is none)."""
    if not record_texts(record, PROBLEM_FIELDS + PROMPT_EXTRA_FIELDS):
        return []
    return record_texts(record, TEXT_FIELDS + PROMPT_EXTRA_FIELDS)


def is_training_split(relative: str | Path) -> bool:
    """Whether a file's path inside the benchmark folder given (its folders and its name) names a training split."""
    return bool(_TRAINING_SPLIT.search(Path(relative).as_posix().lower()))


def benchmark_files(paths: Sequence[str | Path], what: str = "benchmark") -> list[tuple[str, Path]]:
    """(unique name, file) for every file given and every JSONL file under a folder given; a benchmark folder's
    training splits left out (`is_training_split`; a file named is always read, train or not).

    A path that does not exist, or a folder with no JSONL file, is a FileNotFoundError naming it (and `what`
    it is: "benchmark", "prompt"); a benchmark folder of training splits only is a ValueError naming it. Prompt
    folders (`what="prompt"`: RL prompt sets, training data) keep every file. A file reached twice is read once.
    """
    found, _ = _files_and_left_out(paths, what)
    names = _unique_names({f: n for f, (_, n) in found.items()})
    return [(name, given) for name, (given, _) in zip(names, found.values(), strict=True)]


def left_out_training_splits(paths: Sequence[str | Path]) -> dict[Path, list[Path]]:
    """{folder given: its training-split files} that `benchmark_files(PATHS)` leaves out (a file also named, or
    reached through an earlier folder, is listed once or not at all). Errors as `benchmark_files`."""
    return _files_and_left_out(paths, "benchmark")[1]


_SAID: set[tuple[str, ...]] = set()  # left-out lists already printed by this process


def say_left_out_training_splits(paths: Sequence[str | Path]) -> list[Path]:
    """Print, on stderr and once per process, which training splits the benchmark folders in PATHS leave out;
    returns the files left out (for a summary's `benchmark_files_left_out`)."""
    from rich.markup import escape

    from mathmix.cli_util import console

    left_out = left_out_training_splits(paths)
    for folder, files in left_out.items():
        names = [p.relative_to(folder).as_posix().removesuffix(".jsonl") for p in files]
        key = (str(folder.resolve()), *names)
        if key in _SAID:
            continue
        _SAID.add(key)
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        console.print(
            f"benchmarks: left out {len(files)} training-split file{'s' * (len(files) > 1)} under "
            f"{escape(str(folder))}/ ({escape(shown)}): contamination is overlap with what is evaluated; name a "
            "file to check against it",
            soft_wrap=True,
            highlight=False,
        )
    return [p for files in left_out.values() for p in files]


_READ_TRAINING_SPLITS = [False]  # set by `as_when_training_splits_were_read`


@contextmanager
def as_when_training_splits_were_read() -> Iterator[None]:
    """Within it, benchmark folders are read whole, as before training splits were left out: what an earlier
    mathmix recorded of a stage it finished (`pipelines.decont.SUPERSEDED`)."""
    _READ_TRAINING_SPLITS[0] = True
    try:
        yield
    finally:
        _READ_TRAINING_SPLITS[0] = False


def _files_and_left_out(
    paths: Sequence[str | Path], what: str
) -> tuple[dict[Path, tuple[Path, int]], dict[Path, list[Path]]]:
    """{resolved file: (the path given, parts of it in its name)} read, and {folder: training splits left out}."""
    found: dict[Path, tuple[Path, int]] = {}
    skipped: dict[Path, list[Path]] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.setdefault(path.resolve(), (path, 2))
        elif path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(BENCH_SUFFIXES))
            if not inside:
                raise FileNotFoundError(f"{what} folder {path} holds no .jsonl file")
            if what == "benchmark" and not _READ_TRAINING_SPLITS[0]:
                training = [p for p in inside if is_training_split(p.relative_to(path))]
                if len(training) == len(inside):
                    raise ValueError(
                        f"benchmark folder {path} holds only training splits "
                        f"({', '.join(p.relative_to(path).as_posix() for p in training[:3])}"
                        f"{', ...' if len(training) > 3 else ''}): contamination is overlap with what is "
                        "evaluated; name a file to check against it"
                    )
                skipped.setdefault(path, []).extend(training)
                inside = [p for p in inside if not is_training_split(p.relative_to(path))]
            for p in inside:
                # files directly in the folder get the folder's name: gsm8k/test, not test
                found.setdefault(p.resolve(), (p, max(2, len(p.relative_to(path).parts))))
        else:
            raise FileNotFoundError(f"{what} file or folder not found: {path}")
    left_out: dict[Path, list[Path]] = {}
    seen = set(found)
    for folder, files in skipped.items():
        new = [p for p in files if p.resolve() not in seen]
        seen.update(p.resolve() for p in new)
        if new:
            left_out[folder] = new
    return found, left_out


def benchmark_paths(paths: Sequence[str | Path]) -> dict[str, str]:
    """{"benchmark NAME": resolved file} of `benchmark_files(PATHS)`, as job records name what a job read besides
    its inputs (their digests go beside them); empty while a path is missing (the job's own check names it)."""
    try:
        named = benchmark_files(paths)
    except (OSError, ValueError):
        return {}
    return {f"benchmark {name}": str(path.resolve()) for name, path in named}


def _unique_names(files: dict[Path, int]) -> list[str]:
    """Each file's last `n` path parts, widened by one parent folder while two names are the same.

    The suffix is dropped unless another file differs only by it (`x/test.jsonl` and `x/test.json`).
    """
    stems = Counter(f.with_suffix("") for f in files)
    parts = {f: [*f.parent.parts[1:], f.name if stems[f.with_suffix("")] > 1 else f.stem] for f in files}
    width = {f: min(n, len(parts[f])) for f, n in files.items()}

    def name(f: Path) -> str:
        return "/".join(parts[f][-width[f] :])

    while True:  # ends: distinct files have distinct full names
        counts = Counter(name(f) for f in files)
        clashing = [f for f in files if counts[name(f)] > 1 and width[f] < len(parts[f])]
        if not clashing:
            return [name(f) for f in files]
        for f in clashing:
            width[f] += 1
