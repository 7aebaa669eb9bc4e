"""Where decontamination reads its records: benchmark and prompt files, their names, and the text of a record.

A benchmark is named `folder/file` (`gsm8k/test`); two files that would share a name are told apart by more of
their parent folders (`bench/gsm8k/test`, `qwen_eval/gsm8k/test`), so a hit's line number points at one file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
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


def benchmark_files(paths: Sequence[str | Path], what: str = "benchmark") -> list[tuple[str, Path]]:
    """(unique name, file) for every file given and every JSONL file under a folder given.

    A path that does not exist, or a folder with no JSONL file, is a FileNotFoundError naming it (and `what`
    it is: "benchmark", "prompt"). A file reached twice is read once.
    """
    found: dict[Path, tuple[Path, int]] = {}  # resolved file -> (the path given, parts of it in its name)
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.setdefault(path.resolve(), (path, 2))
        elif path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(BENCH_SUFFIXES))
            if not inside:
                raise FileNotFoundError(f"{what} folder {path} holds no .jsonl file")
            for p in inside:
                # files directly in the folder get the folder's name: gsm8k/test, not test
                found.setdefault(p.resolve(), (p, max(2, len(p.relative_to(path).parts))))
        else:
            raise FileNotFoundError(f"{what} file or folder not found: {path}")
    names = _unique_names({f: n for f, (_, n) in found.items()})
    return [(name, given) for name, (given, _) in zip(names, found.values(), strict=True)]


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
