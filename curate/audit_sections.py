"""Report sections on the later stages (dedup clusters, contamination, rewriter, mixture) and `build_report`.

The reports these stages write are owned by their engineers, so each section looks for the relation that has the
columns it needs (e.g. any `decont_*` relation with a `benchmark` column) and otherwise falls back to the stage's
drop reasons in `stats`, saying so in a note.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import duckdb

from curate.audit import AuditRefused, AuditSession
from curate.audit_render import check_replaceable, render
from curate.audit_report import (
    ReportBuilder,
    ReportFigure,
    Section,
    domains_section,
    funnel_section,
    language_section,
    lengths_section,
    math_score_section,
)
from mathmix.cli_util import first_line

CLUSTER_COLUMNS = ("minhash_cluster_size", "cluster_size", "dup_count", "duplicates")
BENCHMARK_COLUMNS = ("benchmark", "bench", "dataset", "benchmark_name")
NAME_COLUMNS = ("name", "source", "branch", "task")
SHARD_TOKEN_COLUMNS = ("tokens", "num_tokens", "n_tokens", "token_count", "total_tokens")
SHARD_DOC_COLUMNS = ("documents", "docs", "num_docs", "n_docs", "num_documents", "sequences")


def _stage_relations(b: ReportBuilder, prefix: str) -> list[str]:
    return [r for r in b.session.relations if r == prefix or r.startswith(prefix + "_")]


def _drops_fallback(b: ReportBuilder, s: Section, stage: str, what: str) -> None:
    if not _has_stage(b, stage):
        s.notes.append(f"not available: the run has no {stage} stage")
        return
    if b.session.has("stats") and b.session.scalar(
        f"SELECT count(*) FROM stats WHERE stage = '{stage}' AND reason IS NOT NULL"
    ):
        b.add(s, "drops", f"{stage} drops by reason (summary.json)",
              f"SELECT reason, dropped FROM stats WHERE stage = '{stage}' AND reason IS NOT NULL ORDER BY dropped DESC, reason")  # fmt: skip
    s.notes.append(
        f"not available: no {stage} relation has {what}; showing the stage's drops by reason instead"
    )


def _has_stage(b: ReportBuilder, stage: str) -> bool:
    """Whether the run holds the stage at all: its data, a report of it, or its summary.json."""
    if _stage_relations(b, stage):
        return True
    return b.session.has("summaries") and bool(
        b.session.scalar(f"SELECT count(*) FROM summaries WHERE stage = '{stage}'")
    )


def dedup_section(b: ReportBuilder) -> Section:
    """Duplicate clusters: clusters per size (a dedup cluster report), kept documents per cluster size (data)."""
    s = Section("dedup", "Dedup cluster sizes")
    for relation in _stage_relations(b, "dedup"):
        columns = b.session.columns(relation)
        if relation != "dedup" and "size" in columns and "cluster_id" in columns:
            kind = '"kind"' if "kind" in columns else "'cluster'"
            b.add(s, "clusters", f"Clusters per size ({relation}; size = documents in the cluster)",
                  f'SELECT {kind} AS kind, "size", count(*) AS clusters, sum("size")::BIGINT AS docs '
                  f'FROM "{relation}" GROUP BY ALL ORDER BY kind, "size"')  # fmt: skip
            s.figures.append(ReportFigure("clusters", "Clusters per size", "clusters", "size", "clusters",
                                          series="kind", logy=True, xlabel="cluster size"))  # fmt: skip
            break
    column = (
        b.find_column("dedup", CLUSTER_COLUMNS, contains="cluster_size") if b.session.has("dedup") else None
    )
    if column:
        b.add(s, "kept", f"Kept documents per cluster size (dedup.{column}; 1 = no near duplicate)",
              f'SELECT "{column}" AS cluster_size, count(*) AS docs FROM dedup GROUP BY 1 ORDER BY 1')  # fmt: skip
        if not s.figures:
            s.figures.append(ReportFigure("kept", "Kept documents per cluster size", "kept", "cluster_size",
                                          "docs", logy=True, xlabel="cluster size"))  # fmt: skip
    if not s.tables:
        _drops_fallback(b, s, "dedup", "a cluster report or a cluster-size column")
    return s


def contamination_section(b: ReportBuilder) -> Section:
    """Benchmark contamination: hits and documents per benchmark."""
    s = Section("contamination", "Contamination hits per benchmark")
    _flagged(b, s)
    _rewriter_contamination(b, s)
    for relation in _stage_relations(b, "decont"):
        if "overlaps" not in b.session.columns(relation):
            continue
        # curate.decont report lines: {"id", "mode", "overlaps": [{"benchmark", "item", "n_matched", ...}]}
        b.add(s, "benchmarks", f"Contaminated documents per benchmark ({relation})",
              "SELECT o.benchmark AS benchmark, count(DISTINCT id) AS docs, count(*) AS records, "
              f'sum(o.n_matched)::BIGINT AS ngram_hits FROM (SELECT id, unnest("overlaps") AS o FROM "{relation}") '
              "GROUP BY 1 ORDER BY docs DESC, benchmark")  # fmt: skip
        s.figures.append(ReportFigure("benchmarks", "Contaminated documents per benchmark", "benchmarks",
                                      "benchmark", "docs"))  # fmt: skip
        return s
    for relation in _stage_relations(b, "decont"):
        column = b.find_column(relation, BENCHMARK_COLUMNS)
        if not column:
            continue
        cols = b.session.columns(relation)
        hits = next((c for c in cols if "hit" in c.lower() or "match" in c.lower()), None)
        doc = "count(DISTINCT id)" if "id" in cols else "count(*)"
        hit_sum = f', sum("{hits}")::BIGINT AS ngram_hits' if hits else ""
        b.add(s, "benchmarks", f"Contaminated documents per benchmark ({relation})",
              f'SELECT "{column}" AS benchmark, {doc} AS docs, count(*) AS rows{hit_sum} FROM "{relation}" '
              "GROUP BY 1 ORDER BY docs DESC, benchmark")  # fmt: skip
        s.figures.append(ReportFigure("benchmarks", "Contaminated documents per benchmark", "benchmarks",
                                      "benchmark", "docs"))  # fmt: skip
        return s
    if b.session.has("summaries") and b.session.scalar(
        "SELECT count(*) FROM summaries WHERE stage = 'decont' AND (extra -> 'hits_per_benchmark') IS NOT NULL"
    ):
        b.add(s, "benchmarks", "Contaminated documents per benchmark (decont summary.json)",
              "SELECT k AS benchmark, (extra -> 'hits_per_benchmark' ->> k)::BIGINT AS docs FROM (SELECT extra, "
              "unnest(json_keys(extra -> 'hits_per_benchmark')) AS k FROM summaries WHERE stage = 'decont') "
              "ORDER BY docs DESC, benchmark")  # fmt: skip
    if not _has_stage(b, "decont"):  # the rewriter's own decontamination may still be shown above
        s.notes.append("not available: the run has no decont stage")
    elif not s.tables:
        _drops_fallback(b, s, "decont", "a benchmark column")
    return s


def _rewriter_contamination(b: ReportBuilder, s: Section) -> None:
    """The rewriter decontaminates its outputs too (branches/<task>/decont/*.jsonl, same line format)."""
    parts = [
        f"SELECT '{r.removeprefix('branches_').removesuffix('_decont')}' AS task, id, unnest(\"overlaps\") AS o "
        f'FROM "{r}"'
        for r in b.session.relations
        if r.startswith("branches_") and r.endswith("_decont") and "overlaps" in b.session.columns(r)
    ]
    if parts:
        b.add(s, "rewriter", "Contaminated rewriter outputs per task and benchmark (removed)",
              "SELECT task, o.benchmark AS benchmark, count(DISTINCT id) AS docs, sum(o.n_matched)::BIGINT AS "
              f"ngram_hits FROM ({' UNION ALL '.join(parts)}) GROUP BY ALL ORDER BY task, docs DESC, benchmark")  # fmt: skip


def _flagged(b: ReportBuilder, s: Section) -> None:
    """Flag mode keeps contaminated documents, marked by curate.decont's `contaminated`/`decont_benchmarks`."""
    columns = set(b.session.columns("corpus"))
    if {"contaminated", "decont_benchmarks"} <= columns and b.session.scalar(
        "SELECT count(*) FROM corpus WHERE contaminated"
    ):
        b.add(s, "flagged", "Flagged documents left in the corpus, per benchmark",
              "SELECT benchmark, count(*) AS docs FROM (SELECT unnest(string_split(decont_benchmarks, ',')) "
              "AS benchmark FROM corpus WHERE contaminated) GROUP BY 1 ORDER BY docs DESC, benchmark")  # fmt: skip


def rewriter_section(b: ReportBuilder) -> Section:
    """Rewriter acceptance by task (docs out / docs in) and rejections by reason."""
    s = Section("rewriter", "Rewriter acceptance by task")
    if b.session.has("task_summaries"):
        b.add(s, "acceptance", "Acceptance per task (summary.json)",
              "SELECT task, docs_in, docs_out, round(docs_out / nullif(docs_in, 0), 4) "
              "AS acceptance FROM task_summaries ORDER BY task")  # fmt: skip
        b.add(s, "reasons", "Rejections per task and reason",
              "SELECT task, reason, dropped FROM task_stats "
              "WHERE reason IS NOT NULL ORDER BY task, dropped DESC, reason")  # fmt: skip
        s.figures.append(
            ReportFigure("acceptance", "Acceptance per task", "acceptance", "task", "acceptance")
        )
    elif b.session.has("branches"):
        s.notes.append("no per-task summary.json: showing documents per task only")
    else:
        s.notes.append("not available: no rewriter output (branches/)")
    if b.session.has("branches"):
        expr, label = b.tokens("branches")
        b.add(s, "outputs", f"Documents and {label} per task (branches view)",
              f"SELECT task, count(*) AS docs, sum({expr})::BIGINT AS tokens FROM branches GROUP BY task ORDER BY task")  # fmt: skip
    return s


def mixture_section(b: ReportBuilder) -> Section:
    """Mixture token accounting per source/branch from the shards manifest(s)."""
    s = Section("mixture", "Mixture token accounting per branch")
    if not b.session.has("shards"):
        s.notes.append("not available: no shards manifest")
        return s
    name = b.find_column("shards", NAME_COLUMNS) or "manifest"
    tokens = b.find_column("shards", SHARD_TOKEN_COLUMNS, contains="token")
    docs = b.find_column("shards", SHARD_DOC_COLUMNS, contains="doc")
    if not tokens:
        s.notes.append("not available: the shards manifest has no token count column")
        b.add(s, "manifest", "Shards manifest", "SELECT * FROM shards")
        return s
    # The run's top manifest lists one row per source; per-source manifests list files (same tokens again).
    top = b.session.scalar("SELECT count(*) FROM shards WHERE manifest = 'shards/manifest.json'")
    where = "WHERE manifest = 'shards/manifest.json'" if top else ""
    doc_sql = f', sum("{docs}")::BIGINT AS docs' if docs else ""
    weight = b.find_column("shards", ("weight",))
    weight_sql = f', any_value("{weight}") AS weight' if weight else ""
    b.add(s, "sources", "Tokens per source (shards manifest)",
          f'SELECT "{name}" AS source, sum("{tokens}")::BIGINT AS tokens{doc_sql}{weight_sql}, '
          f'round(sum("{tokens}") / sum(sum("{tokens}")) OVER (), 4) AS token_share FROM shards {where} '
          "GROUP BY 1 ORDER BY tokens DESC, source")  # fmt: skip
    s.figures.append(ReportFigure("sources", "Tokens per source", "sources", "source", "tokens"))
    return s


# Notes that say a number may be wrong (the CLI prints them): a check that failed, a section not computed.
WARNING_NOTES = ("warning: ", "could not be computed: ")

SECTIONS = [
    funnel_section,
    domains_section,
    math_score_section,
    lengths_section,
    language_section,
    dedup_section,
    contamination_section,
    rewriter_section,
    mixture_section,
]


def build_report(
    session: AuditSession, math_threshold: float | None = None, top_n: int = 20
) -> list[Section]:
    """Every section of the canned report, computed through `session`'s views."""
    builder = ReportBuilder(session, math_threshold=math_threshold, top_n=top_n)
    sections = []
    for make in SECTIONS:
        try:
            sections.append(make(builder))
        except (duckdb.Error, AuditRefused, ValueError, KeyError, TypeError) as err:
            # Outputs of a stage this report has not seen yet must not cost the rest of the report.
            key = make.__name__.removesuffix("_section")
            title = (make.__doc__ or key).splitlines()[0].rstrip(".")
            sections.append(Section(key, title, notes=[f"could not be computed: {first_line(err)}"]))
    if session.unreadable and sections:  # the first section (the funnel) says what the views left out
        sections[0].notes.insert(0, f"{len(session.unreadable)} damaged file(s) left out of the views: "
                                    + "; ".join(session.unreadable[:5]))  # fmt: skip
    if sections:  # ... and which stage folders have output but no summary (the funnel does not list them)
        sections[0].notes[:0] = [f"warning: {line}" for line in [*session.no_data, *session.unfinished]]
    return sections


def plots_not_drawn_line(undrawn: list[str]) -> str:
    """The one console line, for `audit report` and the recipe stage alike, on the plots a report could not
    draw (`undrawn`: "SECTION: 'TITLE' (why)" each, as write_report returns them)."""
    if len(undrawn) == 1:
        return f"1 plot not drawn (its table is in the report): {undrawn[0]}"
    return f"{len(undrawn)} plots not drawn (their tables are in the report): {'; '.join(undrawn)}"


def report_data(sections: list[Section]) -> dict[str, Any]:
    """The report's numbers as plain data: {section: {"title", "notes", "sql": {table: SQL}, table: [rows]}}."""
    return {
        s.key: {"title": s.title, "notes": s.notes, "sql": {t.key: t.sql for t in s.tables}}
        | {t.key: t.records() for t in s.tables}
        for s in sections
    }


def write_report(
    run_dir: str | Path,
    html_path: str | Path,
    md_path: str | Path | None = None,
    math_threshold: float | None = None,
    top_n: int = 20,
    threads: int | None = None,
    memory_limit: str | None = None,
    md_named: bool = False,
    html_twin: bool = False,
) -> dict[str, Any]:
    """Build the canned report over `run_dir` and write HTML (+ Markdown); return its numbers and files.
    MD_NAMED: the user named the Markdown file (`-o X.md`), which is then replaced whatever it holds; HTML_TWIN:
    the HTML is that Markdown's twin, not named by the user, and replaced only where it is the report's."""
    if md_path is not None and Path(md_path).resolve() == Path(html_path).resolve():
        raise ValueError(f"{html_path}: the HTML report and its Markdown twin would be the same file")
    # before any query: a refusal costs nothing
    check_replaceable(
        Path(md_path) if md_path is not None else None,
        md_named=md_named,
        html_twin=Path(html_path) if html_twin else None,
    )
    start = time.time()
    with AuditSession(run_dir, threads=threads, memory_limit=memory_limit) as session:
        sections = build_report(session, math_threshold=math_threshold, top_n=top_n)
        corpus_docs = session.scalar("SELECT count(*) FROM corpus") if session.has("corpus") else 0
        relations = dict(session.relations)
        unreadable = list(session.unreadable)
        unfinished = list(session.unfinished)
    query_seconds = time.time() - start
    title = f"mathmix audit: {Path(run_dir).resolve().name}"
    files = render(sections, title, Path(html_path), Path(md_path) if md_path else None)
    return {
        "corpus_docs": corpus_docs,
        "relations": relations,
        "unreadable": unreadable,
        "unfinished": unfinished,
        "warnings": [
            n.removeprefix("warning: ") if n.startswith("warning: ") else f"{s.title}: {n}"
            for s in sections
            for n in s.notes
            if n.startswith(WARNING_NOTES)
        ],  # fmt: skip
        "plots_not_drawn": [f"{s.title}: {plot}" for s in sections for plot in s.plots_not_drawn],
        "files": [str(f) for f in files],
        "query_seconds": round(query_seconds, 3),
        "seconds": round(time.time() - start, 3),
        "sections": report_data(sections),
    }
