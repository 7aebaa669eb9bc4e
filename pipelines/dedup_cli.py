"""`mathmix dedup INPUT... -o OUT` and `mathmix decont INPUT... -o OUT --benchmarks DIR...` (or `--check`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from mathmix.cli_util import console, fail, print_summary, write_json


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
) -> None:
    """Exact (canonical URL, normalised text) then MinHash LSH near-duplicate removal.

    Reads Parquet/JSONL documents (`id`, `text`, optional `url`, `math_score`). Writes OUT/data/*.parquet
    (survivors, ids unchanged, plus exact_group_size, minhash_cluster_id, minhash_cluster_size), OUT/summary.json,
    OUT/clusters.jsonl (every group: kept id, removed ids), OUT/rejects/*.parquet (dropped docs with `reason`),
    OUT/work/ (every MinHash boundary: signatures, buckets, clusters) and OUT/logs/.
    """
    from pipelines.dedup import Config, run_dedup
    from pipelines.executors import ExecutorConfig

    try:
        config = Config(
            bands=bands,
            rows=rows,
            n_grams=n_grams,
            keep_rule=[k.strip() for k in keep.split(",") if k.strip()],
            minhash=not no_minhash,
            exact_url=not no_url,
        )
    except ValueError as err:
        fail(f"bad option: {err}")
        return
    executor = ExecutorConfig(tasks=max(1, workers), workers=max(1, workers))
    try:
        summary = run_dedup(config, [str(p) for p in inputs], output, executor)
    except FileNotFoundError as err:
        fail(str(err))
        return
    print_summary(summary, title="dedup summary")
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
    workers: int = typer.Option(2, "--workers", help="datatrove tasks run in parallel"),
    check: list[Path] = typer.Option(
        None, "--check", help="prompt-set JSONL to check (no documents written)"
    ),
    against: list[Path] = typer.Option(
        None, "--against", help="eval sets the --check prompts are checked against"
    ),
) -> None:
    """Remove (or flag) documents sharing an n-gram, or a whole short problem, with benchmark sets.

    Both sides are normalised (case, whitespace, LaTeX spacing) first. Problems shorter than one n-gram are
    matched whole (see --short-min-tokens).

    Reads Parquet/JSONL documents and benchmark JSONL (GSM8K, MATH, MATH500, AIME, AMC, OlympiadBench, ...).
    Writes OUT/data/*.parquet (survivors, plus `contaminated` and `decont_benchmarks`), OUT/summary.json
    (with hits_per_benchmark), OUT/contamination.jsonl (id, benchmark, record line, matched n-grams),
    OUT/rejects/ and OUT/logs/. With `--check PROMPTS --against EVALS`: prints the contaminated prompts per eval
    set and writes the full report to -o (a JSON file) when given; exits 1 when any prompt is contaminated.
    """
    if check:
        _check(check, against or [], ngram, short_min_tokens, output)
        return
    if not inputs or output is None or not benchmarks:
        fail("give INPUT..., -o OUT and --benchmarks DIR (or --check PROMPTS --against EVALS)")
        return
    from pipelines.decont import Config, run_decont
    from pipelines.executors import ExecutorConfig

    config = Config(
        ngram=ngram,
        short_min_tokens=short_min_tokens,
        mode="flag" if flag else "remove",
        benchmarks=[str(b) for b in benchmarks],
    )
    executor = ExecutorConfig(tasks=max(1, workers), workers=max(1, workers))
    try:
        summary = run_decont(config, [str(p) for p in inputs], output, executor, config.benchmarks)
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
        return
    print_summary(summary, title="decont summary")
    _print_hits(summary["hits_per_benchmark"])
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
    _print_hits(report["hits_per_benchmark"])
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


def _print_hits(hits: dict[str, int]) -> None:
    from rich.table import Table

    if not hits:
        console.print("no contamination found")
        return
    table = Table(title="contaminated documents per benchmark")
    table.add_column("benchmark")
    table.add_column("docs", justify="right")
    for name, count in sorted(hits.items(), key=lambda kv: -kv[1]):
        table.add_row(name, f"{count:,}")
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("dedup")(dedup)
    app.command("decont")(decont)
