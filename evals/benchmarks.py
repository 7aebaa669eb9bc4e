"""Benchmark sets, their field names, and few-shot prompts built from each benchmark's own training split.

Every set is normalized to {"id", "question", "answer", "solution"}. Exemplars come from the benchmark's training
split (GSM8K train for GSM8K; MATH train for MATH500, and for OlympiadBench and Minerva/OCW, which ship no training
split, as in Minerva's and OctoThinker's prompts), drawn with a fixed seed, or from a user's prompt file.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.grading import gold_answer_from_solution
from mathmix.records import read_objects

ZERO_SHOT_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
# Generation stops (vLLM and transformers take literal strings): the few-shot separators, and headers of a made-up
# next problem that no solution starts a paragraph with (OCW's prompts hold "Subproblem N:"). Any other header
# ("Question 2:", "## Problem", "Example 3.") is cut before grading (`evals.grading.cut_at_next_problem`).
STOPS = [
    "\n\nProblem:",
    "\n\nQuestion:",
    "\nProblem:",
    "\nQuestion:",
    "\n\nSubproblem",
    "\n\nQ:",
    "\n\nPROBLEM:",
    "\n\nQUESTION:",
    "<|endoftext|>",
]


@dataclass(frozen=True)
class BenchmarkSpec:
    """Where a benchmark lives under the data folder (first existing candidate wins) and its default shots."""

    name: str
    test: tuple[str, ...]
    train: tuple[str, ...]
    shots: int
    style: str  # "gsm8k" (Question/Answer, "The answer is N") or "math" (Problem/Solution, \boxed{})


_MATH_TRAIN = ("math/train.jsonl", "math_hendrycks/train.jsonl")
BENCHMARKS: dict[str, BenchmarkSpec] = {
    "gsm8k": BenchmarkSpec(
        "gsm8k", ("gsm8k/test.jsonl", "qwen_eval/gsm8k/test.jsonl"), ("gsm8k/train.jsonl",), 8, "gsm8k"
    ),
    "math500": BenchmarkSpec("math500", ("math500/test.jsonl",), _MATH_TRAIN, 4, "math"),
    "olympiadbench": BenchmarkSpec(
        "olympiadbench",
        ("qwen_eval/olympiadbench/test.jsonl", "olympiadbench/test.jsonl"),
        _MATH_TRAIN,
        4,
        "math",
    ),
    "amc23": BenchmarkSpec("amc23", ("qwen_eval/amc23/test.jsonl", "amc23/test.jsonl"), (), 0, "math"),
    "aime24": BenchmarkSpec("aime24", ("qwen_eval/aime24/test.jsonl", "aime24/test.jsonl"), (), 0, "math"),
    "ocw": BenchmarkSpec(
        "ocw", ("octothinker_eval/ocw/test.jsonl", "ocw/test.jsonl"), _MATH_TRAIN, 4, "math"
    ),
    "math": BenchmarkSpec("math", ("math_hendrycks/test.jsonl", "math/test.jsonl"), _MATH_TRAIN, 4, "math"),
}
SUITES: dict[str, list[tuple[str, int]]] = {
    "octothinker": [
        ("gsm8k", 8),
        ("math500", 4),
        ("olympiadbench", 4),
        ("amc23", 0),
        ("aime24", 0),
        ("ocw", 4),
    ],
    "quick": [("gsm8k", 8), ("math500", 4)],
}


def parse_benchmarks(suite: str | None, benchmarks: str | None) -> list[tuple[str, int]]:
    """`gsm8k:8,math500` (shots default to the benchmark's) or a named suite -> [(name, shots)]."""
    if benchmarks:
        out: list[tuple[str, int]] = []
        for part in benchmarks.split(","):
            name, _, shots = part.strip().partition(":")
            if name not in BENCHMARKS:
                raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
            if any(name == seen for seen, _ in out):
                raise ValueError(f"{name} given twice")
            if shots and not shots.strip().isdigit():
                raise ValueError(f"{part.strip()!r}: shots must be a whole number >= 0 (NAME[:SHOTS],...)")
            out.append((name, int(shots) if shots else BENCHMARKS[name].shots))
        return out
    if (suite or "octothinker") not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    return list(SUITES[suite or "octothinker"])


def _first_existing(data_dir: Path, candidates: tuple[str, ...]) -> Path | None:
    return next((data_dir / c for c in candidates if (data_dir / c).exists()), None)


def find_test_file(name: str, data_dir: Path) -> Path | None:
    """The test file of benchmark NAME under DATA_DIR (the first candidate path that exists), or None."""
    return _first_existing(data_dir, BENCHMARKS[name].test)


QUESTION_FIELDS = ("problem", "question", "prompt")


def question_text(record: dict[str, Any], fields: tuple[str, ...] = QUESTION_FIELDS) -> str | None:
    """The first of FIELDS in RECORD that holds text (a string not blank once stripped), as written; None when
    none does. A blank or non-text question (`"   "`, `["a"]`) was evaluated as one: the prompt held no problem."""
    return next((v for f in fields if isinstance(v := record.get(f), str) and v.strip()), None)


def answer_text(answer: Any) -> str | None:
    """ANSWER as the gold string: text not blank once stripped (as written), or a number (`7.0` -> "7"); None for
    anything else (blank, a mapping, a list, true/false), which used to be graded against as its `str`."""
    if isinstance(answer, str):
        return answer if answer.strip() else None
    if isinstance(answer, bool) or not isinstance(answer, int | float):
        return None
    return str(int(answer)) if isinstance(answer, float) and answer.is_integer() else str(answer)


def gold_text(answer: Any) -> str | None:
    """`answer_text`, and a list of final answers (OlympiadBench's `final_answer`, text or numbers) joined by ", "
    (None where one of them is not text or a number; "" for an empty list)."""
    if isinstance(answer, list):
        parts = [answer_text(a) for a in answer]
        return ", ".join(p for p in parts if p is not None) if None not in parts else None
    return answer_text(answer)


def normalize(record: dict[str, Any], index: int) -> dict[str, Any] | None:
    """Map any benchmark's fields onto {"id", "question", "answer", "solution"} (+ "tolerance" from OlympiadBench's
    `error` field, where given); None when it has no question or no answer that is text or a number
    (`drop_reason` says which)."""
    question = question_text(record)
    solution = record.get("solution") or ""
    if isinstance(solution, list):
        solution = solution[0] if solution else ""
    answer = record.get("final_answer", record.get("answer"))
    if isinstance(answer, list):  # OlympiadBench: a list of final answers, text or numbers
        answer = gold_text(answer)
    if isinstance(answer, str) and "####" in answer:  # GSM8K: reasoning then "#### N"
        solution, answer = answer, gold_answer_from_solution(answer)
    if answer is None or (isinstance(answer, str) and not answer.strip()):  # none given: the solution's
        answer = gold_answer_from_solution(solution) if solution else None
    answer = answer_text(answer)
    if question is None or answer is None:
        return None
    item_id = record.get("id", record.get("idx", record.get("unique_id", index)))
    item = {"id": str(item_id), "question": question, "answer": answer, "solution": solution}
    if (tolerance := _tolerance(record.get("error"))) is not None:
        item["tolerance"] = tolerance
    return item


def _tolerance(error: Any) -> float | None:
    """OlympiadBench's `error` field (`"1e-1"`: a numerical answer within 0.1 of the gold is right) as a number;
    None where it is absent or not one positive number."""
    try:
        value = float(str(error).strip()) if error not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and value > 0 and value != float("inf") else None


def drop_reason(record: dict[str, Any]) -> str:
    """Why `normalize` found no item in RECORD: "no_question" (no problem/question/prompt that is text, not blank)
    or "no_answer" (none that is text, not blank, or a number)."""
    return "no_answer" if question_text(record) is not None else "no_question"


def load_benchmark(
    name: str, data_dir: Path, limit: int | None = None, dropped: Counter | None = None
) -> list[dict[str, Any]] | None:
    """The normalized test items of a benchmark under DATA_DIR (None where the set is absent).

    `limit` keeps the first N items; None keeps all (0 used to mean all too, and a negative N cut from the end).
    `dropped` counts, by `drop_reason`, the records of the file that hold no item (they used to vanish silently:
    a test set with half its answers missing was scored on the other half, with no word said).
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 (got {limit}); leave it out to evaluate every item")
    path = find_test_file(name, data_dir)
    if path is None:
        return None
    items = []
    for i, record in enumerate(read_objects(path)):
        item = normalize(record, i)
        if item is not None:
            items.append(item)
        elif dropped is not None:
            dropped[drop_reason(record)] += 1
    return items[:limit] if limit is not None else items


def load_exemplars(
    name: str, data_dir: Path, shots: int, seed: int = 0, prompt_file: Path | None = None
) -> list[dict[str, Any]]:
    """`shots` exemplars: from a user prompt file (records with question/problem and solution) or the train split."""
    if shots <= 0:
        return []
    if prompt_file is not None:
        records = read_objects(prompt_file)
        pool = [r for r in records if r.get("benchmark") in (None, name)]
    else:
        path = _first_existing(data_dir, BENCHMARKS[name].train)
        if path is None:
            raise FileNotFoundError(f"{name}: no training split under {data_dir} for {shots}-shot exemplars")
        pool = read_objects(path)
    items = [n for i, r in enumerate(pool) if (n := normalize(r, i)) is not None and n["solution"]]
    if prompt_file is not None:
        if not items:  # would silently turn a few-shot benchmark into a bare prompt
            raise ValueError(
                f"no {name} exemplars in {prompt_file} (records need question/problem and solution, "
                f"and benchmark {name!r} or none)"
            )
        return items[:shots]
    return random.Random(seed).sample(items, min(shots, len(items)))


def _gsm8k_solution(solution: str, answer: str) -> str:
    steps = solution.split("####")[0].strip()
    # GSM8K's <<48/2=24>> calculator annotations are training scaffolding, not text a model should imitate.
    while "<<" in steps and ">>" in steps:
        a, b = steps.index("<<"), steps.index(">>")
        steps = steps[:a] + steps[b + 2 :] if a < b else steps.replace(">>", "", 1)
    return f"{steps}\nThe answer is {answer}."


def build_prompt(item: dict[str, Any], exemplars: list[dict[str, Any]], style: str) -> str:
    """Few-shot prompt (Minerva-style Problem/Solution or GSM8K Question/Answer) or the zero-shot instruction."""
    if not exemplars:
        return f"Problem:\n{item['question']}\n{ZERO_SHOT_INSTRUCTION}\n\nSolution:\n"
    if style == "gsm8k":
        shots = [
            f"Question: {e['question']}\nAnswer: {_gsm8k_solution(e['solution'], e['answer'])}"
            for e in exemplars
        ]
        return "\n\n".join(shots + [f"Question: {item['question']}\nAnswer:"])
    shots = [f"Problem:\n{e['question']}\n\nSolution:\n{e['solution']}" for e in exemplars]
    return "\n\n".join(shots + [f"Problem:\n{item['question']}\n\nSolution:\n"])
