"""`mathmix eval bench`: few-shot math evals graded by math-verify; one results JSON per benchmark and a table.

Output folder: `{benchmark}.json` ({"benchmark", "model", "shots", "n", "correct", "accuracy", "extraction",
"grader", "hit_max_new_tokens" (outputs cut by the generation budget, where the generator can tell), "items":
[{"id", "question", "gold", "output", "extracted", "method", "correct", "hit_max_new_tokens"}], "backend", and
"truncated_prompts" where prompts were cut to fit the model: whole exemplars dropped, oldest first, and with them
"shots_used" ({shots: items}) and each item's "shots"}), `results.json` ({"model", "backend", "grader",
"benchmarks": {name: {"shots", "n", "correct", "accuracy", + "truncated_prompts" and "dropped_items" where not 0,
"hit_max_new_tokens" where known}}, "skipped": {name: reason}, "seconds"}) and `job.json` (what was evaluated: a
rerun of the same job keeps the finished benchmarks, regrading those graded by another grader version, and
another job is refused).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evals.bench_grade import benchmark_result, budget_hits, grade_outputs, regrade
from evals.bench_grade import hit_count as hit_count  # re-exported: moved there
from evals.benchmarks import BENCHMARKS, STOPS, find_test_file, load_benchmark, load_exemplars
from evals.grading import GRADER
from mathmix.cli_util import write_json


def bench_identity(
    model: str | Path,
    benchmarks: list[tuple[str, int]],
    data_dir: Path,
    run_dir: Path | None,
    settings: dict[str, Any],
    prompt_file: Path | None,
) -> dict[str, Any]:
    """What a results folder was evaluated from: the model (a local folder by path, size and a sample of its
    weights, else its hub name), the benchmark folder, the prompt file, the contents of the benchmark files read
    (`file_digests`: `bench_files_read`) and the settings that change the outputs (not the batch size). Paths
    inside RUN_DIR (a recipe's run folder) are recorded relative to it."""
    from pipelines.job_record import file_digest, job_identity, model_job_identity

    inputs = [data_dir, *([prompt_file] if prompt_file else [])]
    zero_shot = bool(settings.get("zero_shot"))
    read = bench_files_read(benchmarks, data_dir, zero_shot, prompt_file)
    settings = {"benchmarks": [list(b) for b in benchmarks], **settings}
    identity = model_job_identity("eval bench", model, inputs, settings, run_dir)
    if not read:
        return identity
    # paths in RUN_DIR written {run_dir}/..., as job_identity writes the inputs
    digests = {key: [str(path.resolve()), file_digest(path)] for key, path in read.items()}
    return {**identity, "file_digests": job_identity([], {}, run_dir, file_digests=digests)["file_digests"]}


def bench_files_read(
    benchmarks: list[tuple[str, int]], data_dir: Path, zero_shot: bool, prompt_file: Path | None
) -> dict[str, Path]:
    """The files a bench job reads, by name: each benchmark's test file and the training split its exemplars come
    from (`benchmark gsm8k/test`, `benchmark gsm8k/train`: as decont and the recipe's eval stage name them), and
    the prompt file where exemplars come from it (`prompt_file`).

    Their sizes alone (the benchmark folder's, in `input_sizes`) missed a file edited at the same size: a gold
    answer corrected from 4 to 5, and the rerun kept the results graded against 4.
    """
    found: dict[str, Path] = {}
    for name, shots in benchmarks:
        read = [find_test_file(name, data_dir)]
        if shots > 0 and not zero_shot and prompt_file is None:  # exemplars from the training split
            read.append(
                next((data_dir / c for c in BENCHMARKS[name].train if (data_dir / c).is_file()), None)
            )
        for path in (p for p in read if p is not None and p.is_file()):
            found[f"benchmark {path.relative_to(data_dir).with_suffix('').as_posix()}"] = path
    if prompt_file is not None and not zero_shot and any(shots > 0 for _, shots in benchmarks):
        if Path(prompt_file).is_file():
            found["prompt_file"] = Path(prompt_file)
    return found


def has_eval_output(out_dir: Path) -> bool:
    """Whether a folder holds finished work of eval bench (a benchmark's results), rl-probe (validation rows, a
    checkpoint) or any stage (`has_progress`): another job may not write there."""
    from pipelines.job_record import has_progress

    files = [f"{name}.json" for name in BENCHMARKS] + ["results.json", "validation.csv"]
    return (
        has_progress(out_dir)
        or any((out_dir / f).is_file() for f in files)
        or any((out_dir / "trainer").glob("checkpoint-*"))
    )


def _read_json(path: Path) -> dict[str, Any] | None:
    """An earlier run's JSON file, if there and whole (a mapping); else None."""
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def plan_bench(
    benchmarks: list[tuple[str, int]],
    data_dir: Path,
    limit: int | None,
    zero_shot: bool,
    prompt_file: Path | None,
    seed: int,
) -> tuple[list[tuple[str, int, list, list]], dict[str, str], dict[str, dict[str, int]]]:
    """Load every benchmark's items and exemplars before any model is loaded: [(name, shots asked, items,
    exemplars)], {skipped name: reason} and {name: {reason: records of its test file that hold no item}}.
    A bad prompt file is a ValueError here, not after a benchmark ran.

    Raises:
        ValueError: DATA_DIR holds none of the benchmarks, or every benchmark is skipped (an empty result would
            look like a finished eval).
    """
    if not any(find_test_file(name, data_dir) for name, _ in benchmarks):
        looked = ", ".join(BENCHMARKS[name].test[0] for name, _ in benchmarks)
        raise ValueError(f"no test set under {data_dir} for the benchmarks asked for (looked for {looked})")
    plan, skipped, dropped = [], {}, {}
    for name, shots in benchmarks:
        shots = 0 if zero_shot else shots
        bad: Counter = Counter()
        items = load_benchmark(name, data_dir, limit=limit, dropped=bad)
        if bad:
            dropped[name] = dict(sorted(bad.items()))
        if items is None:
            skipped[name] = f"no test set under {data_dir}"
            continue
        if not items:
            why = f" ({format_reasons(dropped[name])})" if bad else ""
            skipped[name] = f"no usable item in {find_test_file(name, data_dir)}{why}"
            continue
        try:
            exemplars = load_exemplars(name, data_dir, shots, seed=seed, prompt_file=prompt_file)
        except FileNotFoundError as err:
            skipped[name] = str(err).removeprefix(f"{name}: ")
            continue
        plan.append((name, shots, items, exemplars))
    if not plan:
        absent = [name for name, reason in skipped.items() if reason.startswith("no test set")]
        reasons = [f"no test set for {', '.join(absent)}"] if absent else []
        reasons += [f"{name}: {reason}" for name, reason in skipped.items() if name not in absent]
        raise ValueError(f"nothing to evaluate under {data_dir}: {'; '.join(reasons)}")
    return plan, skipped, dropped


def format_reasons(counts: Mapping[str, int]) -> str:
    """Counts by reason, by reason's name: {"no_question": 1, "no_answer": 2} -> "no_answer: 2, no_question: 1"."""
    return ", ".join(f"{reason}: {n}" for reason, n in sorted(counts.items()))


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
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """Evaluate MODEL on each (benchmark, shots); benchmarks absent from DATA_DIR are skipped and reported.
    RUN_DIR: the recipe run folder OUT_DIR belongs to (paths in it are recorded relative to it).

    OUT/job.json records the model, data and settings: a rerun of the same job keeps each benchmark whose results
    file is whole and evaluates the rest; another job into a folder holding results is refused (ValueError).
    The grader is not part of the job: a kept results file graded by another grader version (`GRADER`) has its
    outputs regraded in place, not generated again.

    Raises:
        ValueError: nothing to evaluate (see `plan_bench`), or OUT holds another job's results.
    """
    from rich.progress import Progress

    from evals.generate import make_generator
    from pipelines.job_record import JOB_FILE, check_job

    start = time.time()
    plan, skipped, dropped = plan_bench(benchmarks, data_dir, limit, zero_shot, prompt_file, seed)
    _warn_dropped(dropped, skipped, data_dir)
    if backend == "auto":  # the backend that will answer: auto and its choice are one job
        from evals.generate import vllm_available

        backend = "vllm" if vllm_available() else "transformers"
    if generator is None:
        from evals.generate import check_backend_installed

        check_backend_installed(backend)  # before OUT/job.json is written
    settings = {"limit": limit, "zero_shot": zero_shot, "seed": seed, "max_new_tokens": max_new_tokens}
    identity = bench_identity(
        model, benchmarks, data_dir, run_dir, {**settings, "backend": backend}, prompt_file
    )
    before = _read_json(out_dir / JOB_FILE)
    rerun = check_job(out_dir, identity, "eval bench", progress=has_eval_output)
    # a record from before the benchmark files' digests were kept is this job (job_record.LATER_FIELDS): rewritten
    # with them, and its finished benchmarks kept
    older = {k: v for k, v in identity.items() if k != "file_digests"}
    rerun = rerun or ("file_digests" in identity and before == older)
    kept = _kept_results(plan, out_dir, rerun, str(model))
    summary: dict[str, Any] = {
        "model": str(model),
        "backend": None,
        "grader": GRADER,
        "benchmarks": {},
        "skipped": skipped,
    }
    todo = [entry for entry in plan if entry[0] not in kept]
    if todo:
        try:
            generator = generator or make_generator(model, backend=backend, batch_size=batch_size)
        except Exception:
            # the record written above stands for no output: a failed command leaves none behind
            if not rerun:
                (out_dir / JOB_FILE).unlink(missing_ok=True)
            raise
        summary["backend"] = generator.backend
    else:
        summary["backend"] = next(iter(kept.values())).get("backend")
    with Progress(transient=True) as progress:
        for name, shots, items, exemplars in plan:
            if name in kept:
                result = kept[name]
            else:
                result = _evaluate(
                    (name, shots, items, exemplars), generator, progress, str(model), max_new_tokens, dropped
                )
                write_json(out_dir / f"{name}.json", result)
            summary["benchmarks"][name] = _summary_row(result)
    summary["seconds"] = round(time.time() - start, 2)
    earlier = _read_json(out_dir / "results.json") if not todo else None
    if earlier is not None and isinstance(earlier.get("seconds"), int | float):  # nothing evaluated now
        summary["seconds"] = earlier["seconds"]  # keep the real timing
    write_json(out_dir / "results.json", summary)
    return summary


def _warn_dropped(dropped: dict[str, dict[str, int]], skipped: dict[str, str], data_dir: Path) -> None:
    """Tell, per benchmark to be evaluated, how many of its records were dropped and why."""
    from mathmix.cli_util import console

    for name, counts in dropped.items():
        if name not in skipped:
            console.print(
                f"[yellow]warning:[/] {name}: {sum(counts.values())} record(s) of {find_test_file(name, data_dir)} "
                f"dropped, not evaluated ({format_reasons(counts)}); counted under dropped_items in {name}.json",
                soft_wrap=True,
            )


def _kept_results(
    plan: list[tuple[str, int, list, list]], out_dir: Path, rerun: bool, model: str
) -> dict[str, dict[str, Any]]:
    """The results files of this job (RERUN) that are whole and of the plan's size, by benchmark; those graded by
    another grader version are regraded in place (not generated again). Says which were kept and regraded."""
    from mathmix.cli_util import console

    kept, regraded = {}, {}
    for name, _, items, exemplars in plan:  # a results file of this job, whole and of the same size
        result = _read_json(out_dir / f"{name}.json") if rerun else None
        if result is None or (result.get("shots"), result.get("n")) != (len(exemplars), len(items)):
            continue
        if result.get("grader") != GRADER:  # the outputs are this job's; their grades are another grader's
            earlier_grader = str(result.get("grader") or "a grader before versions were recorded")
            result = regrade(name, model, result, items)
            if result is None:
                continue
            write_json(out_dir / f"{name}.json", result)
            regraded[name] = earlier_grader
        kept[name] = result
    if kept:
        console.print(f"kept from an earlier run of this job: {', '.join(kept)} ({out_dir})", soft_wrap=True)
    for name, earlier_grader in regraded.items():
        console.print(
            f"{name}: its kept outputs were graded by {earlier_grader}; regraded by {GRADER} (not generated again)",
            soft_wrap=True,
        )
    return kept


def _evaluate(
    entry: tuple[str, int, list, list],
    generator: Any,
    progress: Any,
    model: str,
    max_new_tokens: int,
    dropped: dict[str, dict[str, int]],
) -> dict[str, Any]:
    """One benchmark generated and graded: its results (not yet written), with what was dropped, cut or ran to
    the token budget counted and warned of."""
    from mathmix.cli_util import console

    name, shots, items, exemplars = entry
    if len(exemplars) < shots:
        console.print(
            f"[yellow]warning:[/] {name}: {len(exemplars)} exemplar(s) found for {shots}-shot",
            soft_wrap=True,
        )
    from evals.generate import fit_prompts

    prompts, used = fit_prompts(generator, items, exemplars, BENCHMARKS[name].style, max_new_tokens)
    task = progress.add_task(f"{name} ({len(exemplars)}-shot)", total=len(prompts))
    outputs = generator.generate(
        prompts, max_new_tokens, STOPS, progress=lambda n, t=task: progress.advance(t, n)
    )
    hits = budget_hits(generator, outputs)
    records = grade_outputs(items, outputs, hits)
    fewer = sum(k < len(exemplars) for k in used)
    if fewer:  # each item's shots where any prompt lost exemplars to fit the model
        for record, k in zip(records, used, strict=True):
            record["shots"] = k
    result = benchmark_result(name, model, len(exemplars), records)
    result["backend"] = generator.backend
    if result.get("hit_max_new_tokens"):
        console.print(
            f"[yellow]warning:[/] {name}: {result['hit_max_new_tokens']} of {len(outputs)} outputs ran "
            f"to --max-new-tokens {max_new_tokens} unfinished (graded as they are: most are wrong); "
            "counted under hit_max_new_tokens",
            soft_wrap=True,
        )
    if name in dropped:
        result["dropped_items"] = dropped[name]
    # a prompt the generator cut (no exemplar left) lost its exemplars first, where it had any: counted once
    cut = max(fewer, getattr(generator, "truncated", 0))
    if cut:
        result["truncated_prompts"] = cut
        if fewer:
            result["shots_used"] = {str(k): n for k, n in sorted(Counter(used).items(), reverse=True)}
        console.print(
            f"[yellow]warning:[/] {name}: {cut} of {len(prompts)} prompts longer than the model's "
            f"positions minus --max-new-tokens {max_new_tokens}: whole exemplars dropped to fit (oldest "
            f"first; shots used: {format_reasons(result.get('shots_used', {'0': cut}))}), cut from the left "
            "only with none left",
            soft_wrap=True,
        )
    return result


def _summary_row(result: dict[str, Any]) -> dict[str, Any]:
    """A benchmark's row of results.json: its counts and accuracy, and what was cut or dropped."""
    row = {k: result[k] for k in ("shots", "n", "correct", "accuracy")}
    for key in ("truncated_prompts", "dropped_items"):
        if result.get(key):
            row[key] = result[key]
    if "hit_max_new_tokens" in result:  # 0 too: checked, none (absent: the generator could not tell)
        row["hit_max_new_tokens"] = result["hit_max_new_tokens"]
    return row


def print_results_table(summary: dict[str, Any]) -> None:
    """Accuracy per benchmark as a rich table on stdout (results; messages stay on stderr): with a column of the
    outputs cut by the generation budget where any were, and a note under it per benchmark whose prompts were cut
    to fit the model (an "8-shot" row whose exemplars were cut is not 8-shot) or whose test records were dropped."""
    import sys

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)

    rows = summary["benchmarks"]
    hit_column = any(row.get("hit_max_new_tokens") for row in rows.values())
    table = Table(title=f"{summary['model']} ({summary['backend']})")
    columns = ["benchmark", "shots", "n", "accuracy (%)"] + (["cut at max-new-tokens"] if hit_column else [])
    for column in columns:
        table.add_column(column, justify="left" if column == "benchmark" else "right")
    notes = []
    for name, row in rows.items():
        cut = row.get("truncated_prompts")
        shots = f"{row['shots']}*" if cut else str(row["shots"])
        cells = [name, shots, str(row["n"]), f"{100 * row['accuracy']:.1f}"]
        table.add_row(*cells, *([str(row.get("hit_max_new_tokens", "-"))] if hit_column else []))
        if cut:
            notes.append(
                f"* {name}: {cut} of {row['n']} prompts lost their oldest exemplars to fit the model"
            )
        if dropped := row.get("dropped_items"):
            count = sum(dropped.values())
            notes.append(f"{name}: {count} test record(s) dropped, not evaluated ({format_reasons(dropped)})")
    for name, reason in summary["skipped"].items():
        table.add_row(name, "-", "-", f"skipped: {reason}", *(["-"] if hit_column else []))
    console.print(table)
    for note in notes:
        console.print(escape(note), soft_wrap=True)
