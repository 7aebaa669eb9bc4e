"""`mathmix dedup INPUT... -o OUT` and `mathmix decont INPUT... -o OUT --benchmarks DIR...` (or `--check`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import typer
from pydantic import BaseModel
from rich.markup import escape

from mathmix.cli_util import check_output, console, fail, print_summary, write_json

C = TypeVar("C", bound=BaseModel)


def dedup(
    inputs: list[Path] = typer.Argument(
        ..., help="Parquet/JSONL files or folders of them, with `id` and `text`"
    ),
    output: Path = typer.Option(..., "-o", "--output", help="output folder"),
    workers: int = typer.Option(2, "--workers", help="datatrove tasks (input shards) run in parallel"),
    bands: int = typer.Option(11, "--bands", help="LSH bands"),
    rows: int = typer.Option(10, "--rows", help="hashes per band"),
    n_grams: int = typer.Option(5, "--ngrams", help="word shingle size"),
    keep: str = typer.Option(
        "math_score,length", "--keep", help="keep rule: math_score, length, first (in order)"
    ),
    no_minhash: bool = typer.Option(False, "--no-minhash", help="exact URL/text dedup only"),
    no_url: bool = typer.Option(False, "--no-url", help="do not dedup by canonical URL"),
    number_guard_tokens: int = typer.Option(
        256,
        "--number-guard-tokens",
        help="never merge two documents of at most this many tokens (problem-sized) whose numbers, operators or "
        "one-letter variables differ (0: off)",
    ),
) -> None:
    """Exact (canonical URL, normalised text) then MinHash LSH near-duplicate removal.

    Reads Parquet/JSONL documents (`id`, `text`, optional `url`, `math_score`). Writes OUT/data/*.parquet
    (survivors, ids unchanged, plus exact_group_size, minhash_cluster_id, minhash_cluster_size), OUT/summary.json,
    OUT/clusters.jsonl (every group: kept id, removed ids), OUT/rejects/*.parquet (dropped docs with `reason`),
    OUT/work/ (every MinHash boundary: signatures, buckets, clusters), OUT/logs/ and OUT/job.json (what wrote the
    folder: a rerun of a different job into it is refused).
    """
    from pipelines.dedup import Config, run_dedup

    config = _options(
        Config,
        {
            "bands": "--bands",
            "rows": "--rows",
            "n_grams": "--ngrams",
            "keep_rule": "--keep",
            "number_guard_tokens": "--number-guard-tokens",
        },  # fmt: skip
        bands=bands,
        rows=rows,
        n_grams=n_grams,
        number_guard_tokens=number_guard_tokens,
        keep_rule=[k.strip() for k in keep.split(",") if k.strip()],
        minhash=not no_minhash,
        exact_url=not no_url,
    )
    executor = _executor(workers)
    check_output(output)
    try:
        summary = run_dedup(config, [str(p) for p in inputs], output, executor)
    except (FileNotFoundError, ValueError) as err:  # a missing input; OUT holds another job's output
        fail(str(err))
        return
    print_summary(summary, title="dedup summary")
    _warn_text_not_string(summary)
    if shared := summary.get("duplicate_ids"):
        names = ", ".join(shared["examples"]) + (", ..." if shared["ids"] > len(shared["examples"]) else "")
        console.print(
            f"[yellow]warning:[/] {shared['ids']:,} {'id is' if shared['ids'] == 1 else 'ids are'} shared by "
            f"{shared['documents']:,} documents "
            f"({escape(names)}): they are kept as they are, but clusters.jsonl and rejects/ name documents by id, "
            "so their entries there may be about another document with the same id",
            soft_wrap=True,
        )
    console.print(f"wrote {output}/data/*.parquet, {output}/summary.json and {output}/clusters.jsonl")


def decont(
    inputs: list[Path] = typer.Argument(
        None, help="Parquet/JSONL files or folders of them, with `id` and `text`"
    ),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="output folder (a report file with --check)"
    ),
    benchmarks: list[Path] = typer.Option(
        None, "--benchmarks", help="benchmark JSONL files or folders (repeat)"
    ),
    ngram: int = typer.Option(13, "--ngram", help="n-gram size in word/number tokens"),
    short_min_tokens: int = typer.Option(
        8,
        "--short-min-tokens",
        help="problems shorter than one n-gram are matched whole from this many tokens (0: off)",
    ),
    flag: bool = typer.Option(False, "--flag", help="keep contaminated documents, only flag them"),
    workers: int | None = typer.Option(None, "--workers", help="datatrove tasks run in parallel (default 2)"),
    check: list[Path] = typer.Option(
        None, "--check", help="prompt-set JSONL to check (repeat; no documents written)"
    ),
    against: list[Path] = typer.Option(
        None, "--against", help="eval sets the --check prompts are checked against (repeat)"
    ),
) -> None:
    """Remove (or flag) documents sharing an n-gram, or a whole short problem, with benchmark sets.

    Both sides are normalised (case, whitespace, LaTeX spacing) first. Problems shorter than one n-gram are
    matched whole (see --short-min-tokens).

    Reads Parquet/JSONL documents and benchmark JSONL (GSM8K, MATH, MATH500, AIME, AMC, OlympiadBench, ...).
    Writes OUT/data/*.parquet (survivors, plus `contaminated` and `decont_benchmarks`), OUT/summary.json
    (with hits_per_benchmark), OUT/contamination.jsonl (id, benchmark, record line, matched n-grams),
    OUT/rejects/, OUT/logs/ and OUT/job.json. With `--check PROMPTS --against EVALS`: prints the contaminated prompts per eval
    set and writes the full report to -o (a JSON file) when given; exits 1 when any prompt is contaminated.
    """
    from pipelines.decont import Config, run_decont

    _one_mode(inputs, benchmarks, flag, workers, check, against)
    if check and output is not None:  # checked before the index is built and the prompts read
        from classifiers.cli import check_output_file

        check_output_file(output, example="report.json")
    config = _options(
        Config,
        {"ngram": "--ngram", "short_min_tokens": "--short-min-tokens"},
        ngram=ngram,
        short_min_tokens=short_min_tokens,
        mode="flag" if flag else "remove",
        benchmarks=[str(b) for b in benchmarks or []],
    )
    if check:
        _check(check, against or [], config.ngram, config.short_min_tokens, output)
        return
    if not inputs or output is None or not benchmarks:
        fail("give INPUT..., -o OUT and --benchmarks DIR (or --check PROMPTS --against EVALS)")
        return
    executor = _executor(2 if workers is None else workers)
    check_output(output)
    try:
        summary = run_decont(config, [str(p) for p in inputs], output, executor, config.benchmarks)
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
        return
    print_summary(summary, title="decont summary")
    _warn_text_not_string(summary)
    for path in summary["benchmark_files_unused"]:
        console.print(f"[yellow]warning:[/] benchmark file {path} holds no record to check")
    _print_hits(summary["hits_per_benchmark"], "documents")
    console.print(f"wrote {output}/data/*.parquet, {output}/summary.json and {output}/contamination.jsonl")


def _check(prompts: list[Path], evals: list[Path], ngram: int, short_min: int, output: Path | None) -> None:
    from pipelines.decont import check_prompts

    if not evals:
        fail("--check needs --against EVALS (eval JSONL files or folders)")
        return
    try:
        report = check_prompts(
            [str(p) for p in prompts], [str(e) for e in evals], ngram, short_min_tokens=short_min
        )
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
        return
    console.print(f"{report['contaminated']:,} of {report['prompts']:,} prompts overlap an eval set")
    if report["unreadable"]:
        where = ", ".join(f"{r['file']}:{r['line'] + 1}" for r in report["unreadable_rows"][:3])
        console.print(
            f"[yellow]warning:[/] {report['unreadable']:,} rows hold no readable prompt and were not checked "
            f"({where}{', ...' if report['unreadable'] > 3 else ''})"
        )
    _print_hits(report["hits_per_benchmark"], "prompts")
    for row in report["rows"][:10]:
        first = row["overlaps"][0]
        console.print(
            f"  {row['file']}:{row['line'] + 1} ~ {first['benchmark']}:{first['item'] + 1}: "
            f"{json.dumps(first['ngrams'][:1])}"
        )
    if output is not None:
        write_json(output, report)
        console.print(f"wrote {output}")
    if report["contaminated"]:
        raise typer.Exit(1)


def _options(config_cls: type[C], flags: dict[str, str], **values: Any) -> C:
    """Build a stage config from CLI options; a bad value is a one-line error naming the option."""
    from pydantic import ValidationError

    try:
        return config_cls(**values)
    except ValidationError as err:
        bad = [
            f"{flags.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']} (got {e['input']!r})"
            for e in err.errors()
        ]
        fail("bad option " + "; ".join(bad))
        raise typer.Exit(2) from None  # not reached: fail() exits


def _executor(workers: int) -> Any:
    from pipelines.executors import ExecutorConfig

    if workers < 1:
        fail(f"bad option --workers: must be at least 1 (got {workers})")
    return ExecutorConfig(tasks=workers, workers=workers)


def _one_mode(
    inputs: list[Path] | None,
    benchmarks: list[Path] | None,
    flag: bool,
    workers: int | None,
    check: list[Path] | None,
    against: list[Path] | None,
) -> None:
    """Fail (one line) when options of the two decont modes are mixed: the other mode's were silently ignored
    (`decont corp -o x --benchmarks B --check p.jsonl --against B` checked the prompts and wrote x as a report)."""
    if check:
        stage_only = [
            name
            for name, given in (
                (f"INPUT ({_names(inputs or [])})", bool(inputs)),
                ("--benchmarks", bool(benchmarks)),
                ("--flag", flag),
                ("--workers", workers is not None),
            )
            if given
        ]
        if stage_only and inputs:  # often a second value after one --check or --against (`--against B1 B2`)
            read = f"{_names(inputs)} {'is' if len(inputs) == 1 else 'are'} read as a corpus INPUT"
            fail(
                f"--check does not go with {', '.join(stage_only)}: {read}; --check and --against take one path "
                "each: repeat the flag for each (`decont --check P1 --check P2 --against EVALS1 --against EVALS2 "
                "[-o report.json]` checks prompt sets); `decont INPUT... -o OUT --benchmarks DIR` decontaminates "
                "documents"
            )
        elif stage_only:
            fail(
                f"--check does not go with {', '.join(stage_only)}: `decont --check PROMPTS --against EVALS "
                "[-o report.json]` checks prompt sets (repeat --check for each file); `decont INPUT... -o OUT "
                "--benchmarks DIR` decontaminates documents"
            )
    elif against:
        fail(
            "--against goes with --check: `decont --check PROMPTS --against EVALS` checks prompt sets; "
            "`decont INPUT... -o OUT --benchmarks DIR` decontaminates documents"
        )


def _names(paths: list[Path], most: int = 3) -> str:
    return ", ".join(str(p) for p in paths[:most]) + (", ..." if len(paths) > most else "")


def _warn_text_not_string(summary: dict[str, Any]) -> None:
    if count := summary.get("dropped", {}).get("text_not_string"):
        console.print(
            f"[yellow]warning:[/] {count:,} input rows have a `text` that is not a string (a number, a list, an "
            "object): dropped as text_not_string (their ids are in rejects/)",
            soft_wrap=True,
        )


def _print_hits(hits: dict[str, int], what: str) -> None:
    """Hits per benchmark: `what` (documents, prompts) that overlap each one."""
    from rich.table import Table

    if not hits:
        console.print("no contamination found")
        return
    table = Table(title="hits per benchmark")
    table.add_column("benchmark")
    table.add_column(what, justify="right")
    for name, count in sorted(hits.items(), key=lambda kv: -kv[1]):
        table.add_row(name, f"{count:,}")
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("dedup")(dedup)
    app.command("decont")(decont)
