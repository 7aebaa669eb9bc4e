"""`mathmix eval bench`: few-shot math evals graded by math-verify; one results JSON per benchmark and a table.

Output folder: `{benchmark}.json` ({"benchmark", "model", "shots", "n", "correct", "accuracy", "extraction",
"items": [{"id", "question", "gold", "output", "extracted", "method", "correct"}]}) and `results.json`
({"model", "backend", "benchmarks": {name: {"shots", "n", "accuracy"}}, "skipped": {name: reason}, "seconds"}).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from evals.benchmarks import BENCHMARKS, STOPS, build_prompt, find_test_file, load_benchmark, load_exemplars
from evals.grading import grade
from mathmix.cli_util import write_json


def grade_outputs(items: list[dict[str, Any]], outputs: list[str]) -> list[dict[str, Any]]:
    """Per-item records: the question, gold answer, raw output, extracted answer and whether it is correct."""
    records = []
    for item, output in zip(items, outputs, strict=True):
        result = grade(output, item["answer"])
        records.append(
            {
                "id": item["id"],
                "question": item["question"],
                "gold": item["answer"],
                "output": output,
                **result,
            }
        )
    return records


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
        "items": records,
    }


def run_bench(
    model: str | Path,
    benchmarks: list[tuple[str, int]],
    data_dir: Path,
    out_dir: Path,
    limit: int | None = None,
    zero_shot: bool = False,
    prompt_file: Path | None = None,
    seed: int = 0,
    max_new_tokens: int = 512,
    backend: str = "auto",
    batch_size: int = 8,
    generator=None,
) -> dict[str, Any]:
    """Evaluate MODEL on each (benchmark, shots); benchmarks absent from DATA_DIR are skipped and reported.

    Raises:
        ValueError: DATA_DIR holds none of the benchmarks (an empty result would look like a finished eval).
    """
    from rich.progress import Progress

    from evals.generate import make_generator

    start = time.time()
    if not any(find_test_file(name, data_dir) for name, _ in benchmarks):
        looked = ", ".join(BENCHMARKS[name].test[0] for name, _ in benchmarks)
        raise ValueError(f"no test set under {data_dir} for the benchmarks asked for (looked for {looked})")
    generator = generator or make_generator(model, backend=backend, batch_size=batch_size)
    summary: dict[str, Any] = {
        "model": str(model),
        "backend": generator.backend,
        "benchmarks": {},
        "skipped": {},
    }
    with Progress(transient=True) as progress:
        for name, shots in benchmarks:
            shots = 0 if zero_shot else shots
            items = load_benchmark(name, data_dir, limit=limit)
            if not items:
                summary["skipped"][name] = f"no test set under {data_dir}"
                continue
            try:
                exemplars = load_exemplars(name, data_dir, shots, seed=seed, prompt_file=prompt_file)
            except FileNotFoundError as err:
                summary["skipped"][name] = str(err)
                continue
            prompts = [build_prompt(item, exemplars, BENCHMARKS[name].style) for item in items]
            task = progress.add_task(f"{name} ({len(exemplars)}-shot)", total=len(prompts))
            outputs = generator.generate(
                prompts, max_new_tokens, STOPS, progress=lambda n, t=task: progress.advance(t, n)
            )
            result = benchmark_result(name, str(model), len(exemplars), grade_outputs(items, outputs))
            write_json(out_dir / f"{name}.json", result)
            summary["benchmarks"][name] = {k: result[k] for k in ("shots", "n", "correct", "accuracy")}
    summary["seconds"] = round(time.time() - start, 2)
    write_json(out_dir / "results.json", summary)
    return summary


def print_results_table(summary: dict[str, Any]) -> None:
    """Accuracy per benchmark as a rich table (stderr)."""
    from rich.table import Table

    from mathmix.cli_util import console

    table = Table(title=f"{summary['model']} ({summary['backend']})")
    for column in ("benchmark", "shots", "n", "accuracy"):
        table.add_column(column, justify="left" if column == "benchmark" else "right")
    for name, row in summary["benchmarks"].items():
        table.add_row(name, str(row["shots"]), str(row["n"]), f"{100 * row['accuracy']:.1f}")
    for name, reason in summary["skipped"].items():
        table.add_row(name, "-", "-", f"skipped: {reason}")
    console.print(table)
