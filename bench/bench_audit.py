"""Bench: the canned audit report over a synthetic run whose corpus has ~1M rows, DuckDB on 2 threads.

Peer, measured side by side: pandas computing four of the report's tables (top domains, language, math_score
histogram, length quantiles) from the same Parquet files. Prints both times and the ratio.

    .venv/bin/python bench/bench_audit.py [--corpus-rows 1000000] [--threads 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from curate.audit_sections import write_report
from curate.audit_synth import build_synthetic_run

KEPT_FRACTION = (
    0.2745  # share of synthetic web pages that reach the decont corpus (English, score >= 0.5, ...)
)


def pandas_peer(run: Path) -> float:
    """The same four tables with pandas over the same files; returns seconds."""
    import pandas as pd

    start = time.time()
    corpus = pd.read_parquet(run / "decont" / "data", columns=["domain", "n_chars"])
    corpus.assign(tokens=corpus["n_chars"] / 4).groupby("domain").agg(
        docs=("n_chars", "size"), tokens=("tokens", "sum")
    )
    web = pd.read_parquet(run / "web" / "data", columns=["lang", "math_score", "n_chars"])
    # web rejects as the web stage writes them: flat files, one per filter step (pipelines/web.py REJECT_SCHEMA)
    rejects = pd.read_parquet(run / "web" / "rejects", columns=["lang", "math_score"])
    pd.concat([web["lang"], rejects["lang"]]).value_counts()
    for frame in (web, rejects):
        (frame["math_score"].dropna() * 20).clip(upper=19).floordiv(1).value_counts()
    web["n_chars"].quantile([0.1, 0.5, 0.9])
    return time.time() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus-rows", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None, help="build (or reuse) the run here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.keep or Path(tmp) / "run"
        start = time.time()
        if not (run / "decont" / "summary.json").is_file():
            build_synthetic_run(run, int(args.corpus_rows / KEPT_FRACTION))
        built = time.time() - start
        start, cpu = time.time(), time.process_time()
        out = run / "audit"
        result = write_report(run, out / "report.html", out / "report.md", threads=args.threads)
        report_s, report_cpu = time.time() - start, time.process_time() - cpu
        cpu = time.process_time()
        peer_s = pandas_peer(run)
        peer_cpu = time.process_time() - cpu
        web = next(r for r in result["sections"]["funnel"]["stages"] if r["stage"] == "web")
        queries = result["query_seconds"]
        print(
            f"synthetic run: {web['docs_in']:,} web pages, corpus {result['corpus_docs']:,} rows ({built:.1f} s to build)"
        )
        print(
            f"audit report (9 sections, {args.threads} DuckDB threads): {report_s:.2f} s "
            f"(queries {queries:.2f} s, plots + HTML/MD {report_s - queries:.2f} s); CPU {report_cpu:.2f} s"
        )
        print(f"pandas peer (4 of the report's tables only): {peer_s:.2f} s; CPU {peer_cpu:.2f} s")
        print(
            f"ratio report / pandas-4-tables: {report_s / peer_s:.2f}x; queries only: {queries / peer_s:.2f}x"
        )


if __name__ == "__main__":
    main()
