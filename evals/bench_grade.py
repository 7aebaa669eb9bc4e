"""A benchmark's outputs graded into its results file (`eval bench`'s `{benchmark}.json`): per-item records, the
outputs cut by the generation budget, and the regrading of a kept file by a newer grader version.

Split from `evals.bench` (which re-exports these names): grading results is apart from running the job.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from evals.grading import GRADER, cut_at_next_problem, grade


def grade_outputs(
    items: list[dict[str, Any]], outputs: list[str], hits: list[bool] | None = None
) -> list[dict[str, Any]]:
    """Per-item records: the question, gold answer, raw output, extracted answer and whether it is correct, and
    where HITS is given (`budget_hits`) whether the output was cut by the generation budget."""
    records = []
    for i, (item, output) in enumerate(zip(items, outputs, strict=True)):
        result = grade(output, item["answer"], item.get("tolerance"))
        record = {
            "id": item["id"],
            "question": item["question"],
            "gold": item["answer"],
            "output": output,
            **result,
        }
        if hits is not None:
            record["hit_max_new_tokens"] = hits[i]
        records.append(record)
    return records


def budget_hits(generator: Any, outputs: list[str]) -> list[bool] | None:
    """Per output, whether it ran to the generation budget without reaching a stop, so its answer was cut: as the
    generator saw it (`cut`: vLLM's finish reason, the transformers row's last token). An output that runs on into
    a made-up next problem (`cut_at_next_problem`) finished its answer: not counted. None where the generator does
    not say (the outputs are graded all the same)."""
    cut = getattr(generator, "cut", None)
    if not isinstance(cut, list) or len(cut) != len(outputs):
        return None
    return [bool(c) and cut_at_next_problem(o) == o for c, o in zip(cut, outputs, strict=True)]


def benchmark_result(name: str, model: str, shots: int, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-benchmark results JSON body."""
    correct = sum(r["correct"] for r in records)
    return {
        "benchmark": name,
        "model": model,
        "shots": shots,
        "n": len(records),
        "correct": correct,
        "accuracy": correct / len(records) if records else 0.0,
        "extraction": dict(Counter(r["method"] for r in records)),
        "grader": GRADER,
        **hit_count(records),
        "items": records,
    }


def hit_count(records: list[dict[str, Any]]) -> dict[str, int]:
    """{"hit_max_new_tokens": outputs cut by the generation budget} where every record says (else {}: outputs of
    a generator that cannot tell, or kept from a run before it was recorded)."""
    flags = [r.get("hit_max_new_tokens") for r in records]
    if not records or not all(isinstance(flag, bool) for flag in flags):
        return {}
    return {"hit_max_new_tokens": sum(bool(flag) for flag in flags)}


def regrade(
    name: str, model: str, result: dict[str, Any], items: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """RESULT (a kept results file) with its outputs graded again by this grader against ITEMS' gold answers (read
    again with this grader too), its other fields kept; None when its items are not ITEMS' (by id, in order) or
    hold no output, so the benchmark is evaluated again."""
    records = result.get("items")
    if not isinstance(records, list) or len(records) != len(items):
        return None
    if not all(isinstance(r, dict) and isinstance(r.get("output"), str) for r in records):
        return None
    if [r.get("id") for r in records] != [item["id"] for item in items]:
        return None
    outputs = [r["output"] for r in records]
    flags = [r.get("hit_max_new_tokens") for r in records]
    # an output that ran into a made-up next problem (cut now, perhaps not by the grader that flagged it) finished
    hits = (
        [bool(flag) and cut_at_next_problem(o) == o for flag, o in zip(flags, outputs, strict=True)]
        if all(isinstance(flag, bool) for flag in flags)
        else None
    )
    result = {k: v for k, v in result.items() if k != "hit_max_new_tokens"}
    return {**result, **benchmark_result(name, model, result["shots"], grade_outputs(items, outputs, hits))}
