"""A synthetic run folder in the layout the stages write, for the audit's tests, its benchmark, and trying the
audit without running the pipeline. DuckDB generates it from a hash of the row number (no randomness), so the
same `n_docs` always gives the same folder, and millions of rows take seconds.

What each stage writes here follows its module: web (pipelines/web.py columns; flat rejects files
rejects/000_<Step>-00000.parquet in its REJECT_SCHEMA, `reason` and `step` top-level, no math_score on the language
filter's; the scorer threshold only in logs/executor.json),
dedup (flat columns, rejects with `reason`, clusters.jsonl), decont (contamination.jsonl with `overlaps`, `hits_per_benchmark`),
branches/<task>/ (+ throughput.json, branches/summary.json), shards (manifest.json `sources` + per-source ones).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb

DOMAINS = ["math.stackexchange.com", "en.wikipedia.org", "artofproblemsolving.com", "mathworld.wolfram.com",
           "proofwiki.org", "blog.example.org", "news.example.com", "forum.example.net"]  # fmt: skip
LANGS = ["en", "en", "en", "en", "en", "de", "fr", "zh"]
BENCHMARKS = ["gsm8k/test", "math500/test", "aime24/test"]
MATH_THRESHOLD = 0.5
TASKS = ["qa", "refine"]


def _sql_list(values: list[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _pages(n_docs: int) -> str:
    # h1..h3: independent pseudo-random numbers in [0, 1) per row, from DuckDB's hash of the row number.
    return f"""
    SELECT 'doc-' || i AS id,
           'Let x = ' || i || '. Then $x^2 + ' || (i % 97) || ' = 0$ has ' || repeat('a root ', 1 + (i % 13)) AS text,
           {_sql_list(DOMAINS)}[1 + (hash(i, 1) % {len(DOMAINS)})::INT] AS domain,
           'https://' || domain || '/p/' || i AS url,
           {_sql_list(LANGS)}[1 + (hash(i, 2) % {len(LANGS)})::INT] AS lang,
           0.65 + 0.35 * h1 AS lang_score,
           round(h2, 4) AS math_score,
           (200 + floor(5000 * h3 * h3))::BIGINT AS n_chars
    FROM (SELECT i, (hash(i, 11) % 10000) / 10000.0 AS h1, (hash(i, 12) % 10000) / 10000.0 AS h2,
                 (hash(i, 13) % 10000) / 10000.0 AS h3
          FROM range({n_docs}) t(i))"""


def _copy(con: duckdb.DuckDBPyConnection, select: str, path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    con.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    row = con.execute(f"SELECT count(*) FROM '{path}'").fetchone()
    return int(row[0]) if row else 0


def _json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def _open(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w")


def _summary(folder: Path, docs_in: int, docs_out: int, dropped: dict[str, int], **extra: object) -> None:
    _json(folder / "summary.json", {"docs_in": docs_in, "docs_out": docs_out, "dropped": dropped, "seconds": 1.0,
                                    **extra})  # fmt: skip


def build_synthetic_run(run_dir: str | Path, n_docs: int = 2000) -> Path:
    """Write a complete synthetic run under `run_dir` (n_docs pages read by the web stage); return its path."""
    run = Path(run_dir)
    con = duckdb.connect()
    con.execute(f"CREATE TEMP TABLE pages AS {_pages(n_docs)}")
    _web(con, run, n_docs)
    kept = _dedup(con, run)
    kept_c = _decont(con, run, kept)
    _branches(con, run, kept_c)
    _shards(con, run)
    con.close()
    return run


# The web stage's rejects (pipelines/web.py REJECT_SCHEMA), one flat file per filter step and task.
REJECT_COLUMNS = """id, url, domain, reason, step, 'synthetic.warc.gz' AS source_file,
    (1000 * split_part(id, '-', 2)::BIGINT) AS warc_offset, lang, lang_score::DOUBLE AS lang_score,
    CASE WHEN step = 'MathLanguageFilter' THEN NULL ELSE 5.0 END::DOUBLE AS prefilter_score,
    CASE WHEN step = 'MathLanguageFilter' THEN NULL ELSE math_score END::DOUBLE AS math_score,
    n_chars, text"""


def _web(con: duckdb.DuckDBPyConnection, run: Path, n_docs: int) -> None:
    step = f"CASE WHEN lang <> 'en' THEN 'MathLanguageFilter' WHEN math_score < {MATH_THRESHOLD} THEN 'MathScoreFilter' END"
    reason = "CASE WHEN lang <> 'en' THEN 'language' ELSE 'low_math_score' END"
    con.execute(f"CREATE TEMP TABLE judged AS SELECT *, {step} AS step, {reason} AS reason FROM pages")
    kept = _copy(
        con, "SELECT * EXCLUDE (step, reason) FROM judged WHERE step IS NULL", run / "web/data/00000.parquet"
    )
    # The language filter runs before the scorer: its rejects have no math_score (nor a prefilter score).
    for name in ("MathLanguageFilter", "MathScoreFilter"):
        _copy(con, f"SELECT {REJECT_COLUMNS} FROM judged WHERE step = '{name}'",
              run / f"web/rejects/000_{name}-00000.parquet")  # fmt: skip
    dropped = dict(
        con.execute("SELECT reason, count(*) FROM judged WHERE step IS NOT NULL GROUP BY 1").fetchall()
    )
    _summary(run / "web", n_docs, kept, dropped, input_files=1)
    steps = [
        {"languages": ["en"], "threshold": 0.65},
        {"model_path": "classifier/model.bin", "threshold": MATH_THRESHOLD},
    ]
    _json(run / "web/logs/executor.json", {"pipeline": steps, "tasks": 1})


def _dedup(con: duckdb.DuckDBPyConnection, run: Path) -> int:
    # Every 10th page is in a MinHash cluster of 2..4 pages (cluster id = its own row hash); every 20th is removed.
    size = "CASE WHEN hash(id, 5) % 10 = 0 THEN 2 + (hash(id, 6) % 3)::BIGINT ELSE 1 END"
    con.execute(f"CREATE TEMP TABLE clustered AS SELECT * EXCLUDE (step, reason), 1::BIGINT AS exact_group_size, "
                f"CASE WHEN {size} > 1 THEN (hash(id, 4) % 1000000)::BIGINT ELSE -1 END AS minhash_cluster_id, "
                f"{size} AS minhash_cluster_size, hash(id, 7) % 20 = 0 AS removed FROM judged WHERE step IS NULL")  # fmt: skip
    kept = _copy(
        con, "SELECT * EXCLUDE (removed) FROM clustered WHERE NOT removed", run / "dedup/data/00000.parquet"
    )
    removed = _copy(con, "SELECT id, text, 'near_duplicate' AS reason FROM clustered WHERE removed",
                    run / "dedup/rejects/near_00000.parquet")  # fmt: skip
    clusters = con.execute("SELECT minhash_cluster_id, any_value(minhash_cluster_size), list(id ORDER BY id) "
                           "FROM clustered WHERE minhash_cluster_id >= 0 GROUP BY 1 ORDER BY 1").fetchall()  # fmt: skip
    with (run / "dedup/clusters.jsonl").open("w") as f:
        for cid, size_, ids in clusters:
            f.write(
                json.dumps(
                    {"kind": "minhash", "cluster_id": cid, "size": size_, "kept": ids[0], "removed": ids[1:]}
                )
                + "\n"
            )
    _summary(run / "dedup", kept + removed, kept, {"near_duplicate": removed}, minhash_clusters=len(clusters))
    return kept


def _decont(con: duckdb.DuckDBPyConnection, run: Path, n_in: int) -> int:
    bench = f"{_sql_list(BENCHMARKS)}[1 + (hash(id, 9) % {len(BENCHMARKS)})::INT]"
    con.execute(f"CREATE TEMP TABLE checked AS SELECT * EXCLUDE (removed), "
                f"CASE WHEN hash(id, 8) % 50 = 0 THEN {bench} END AS bench FROM clustered WHERE NOT removed")  # fmt: skip
    kept = _copy(con, "SELECT * EXCLUDE (bench), false AS contaminated, '' AS decont_benchmarks FROM checked "
                 "WHERE bench IS NULL", run / "decont/data/00000.parquet")  # fmt: skip
    hits = con.execute(
        "SELECT id, bench, 1 + hash(id, 10) % 5 FROM checked WHERE bench IS NOT NULL"
    ).fetchall()
    with _open(run / "decont/contamination.jsonl") as f:  # pipelines/decont.py merges work/report/ into it
        for doc_id, name, n in hits:
            overlap = {"benchmark": name, "item": n, "n_matched": n, "ngrams": ["a b c"]}
            f.write(json.dumps({"id": doc_id, "mode": "remove", "overlaps": [overlap]}) + "\n")
    per_bench = {b: sum(1 for h in hits if h[1] == b) for b in sorted({h[1] for h in hits})}
    _summary(
        run / "decont", n_in, kept, {"contaminated": len(hits)}, mode="remove", hits_per_benchmark=per_bench
    )
    return kept


def _branches(con: duckdb.DuckDBPyConnection, run: Path, n_corpus: int) -> None:
    total_out, total_dropped = 0, Counter[str]()
    for k, task in enumerate(TASKS):
        select = (f"SELECT id || '-{task}' AS id, 'Q: ' || text AS text, id AS source_id, '{task}' AS task "
                  f"FROM checked WHERE bench IS NULL AND hash(id, {20 + k}) % 4 <> 0")  # fmt: skip
        out = _copy(con, select, run / f"branches/{task}/data/00000.parquet")
        failed = n_corpus - out
        # the rewriter's own decontamination: two outputs of each task match a benchmark and are removed
        contaminated = min(2, failed)
        with _open(run / f"branches/{task}/decont/00000.jsonl") as f:
            for i in range(contaminated):
                overlap = {"benchmark": BENCHMARKS[i], "item": i, "n_matched": 3 + i, "ngrams": ["x y z"]}
                f.write(json.dumps({"id": f"out-{task}-{i}", "mode": "remove", "overlaps": [overlap]}) + "\n")
        rest = failed - contaminated
        dropped = {"contaminated": contaminated, "no_answer": rest // 3, "too_short": rest - rest // 3}
        _summary(run / f"branches/{task}", n_corpus, out, dropped)
        _json(run / f"branches/{task}/throughput.json", {"requests": n_corpus, "seconds": 1.0})
        total_out += out
        total_dropped.update(dropped)
    _summary(run / "branches", n_corpus * len(TASKS), total_out, dict(total_dropped))


def _shards(con: duckdb.DuckDBPyConnection, run: Path) -> None:
    folders = {"corpus": run / "decont/data", **{task: run / f"branches/{task}/data" for task in TASKS}}
    sources: dict[str, dict[str, Any]] = {}
    for name, folder in folders.items():
        # tokens: a byte-level stand-in, one token per 4 characters plus the EOS
        row = con.execute(f"SELECT count(*), sum(length(text) // 4 + 1) FROM '{folder}/*.parquet'").fetchone()
        docs, tokens = (int(row[0]), int(row[1] or 0)) if row else (0, 0)
        files = [{"prefix": f"{name}_00000", "documents": docs, "tokens": tokens}]
        _json(
            run / f"shards/{name}/manifest.json",
            {"name": name, "documents": docs, "tokens": tokens, "files": files},
        )
        sources[name] = {"path": str(run / "shards" / name), "documents": docs, "tokens": tokens}
    manifest = {
        "tokenizer": "bpe-test",
        "vocab_size": 512,
        "eos_id": 0,
        "dtype": "uint16",
        "sources": sources,
    }
    _json(run / "shards/manifest.json", manifest)
    total = sum(s["documents"] for s in sources.values())
    _summary(run / "shards", total, total, {}, tokens_out=sum(s["tokens"] for s in sources.values()))
