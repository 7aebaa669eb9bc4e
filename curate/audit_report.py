"""The canned audit report: sections of tables and plots, every number a SQL query through the audit views.

A section builds its SQL from the columns the run actually has (token counts, scores, lengths, URLs are found by
name, see `find_column`); what a run lacks becomes a note in the section ("not available: ...") instead of an
error, so the same report works on a web-only run, a full run, and the synthetic run of the tests and bench.
Figures are drawn from the section's own tables, so a plot never shows a number the tables do not.
"""

from __future__ import annotations

import duckdb

from curate.audit import AuditRefused

# The report's tables, figures, sections and builder are in curate.audit_builder (split off); imported from here
# too, as before.
from curate.audit_builder import (  # noqa: F401
    DOCUMENT_VIEWS,
    LENGTH_COLUMNS,
    SCORE_COLUMNS,
    THRESHOLD_KEYS,
    TOKEN_COLUMNS,
    ReportBuilder,
    ReportFigure,
    ReportTable,
    Section,
    _scorer_threshold,
    with_tasks,
)
from mathmix.cli_util import first_line


def funnel_section(b: ReportBuilder) -> Section:
    """Docs and tokens in/out per stage, drops by reason."""
    s = Section("funnel", "Funnel: documents and tokens per stage")
    if not b.session.has("summaries"):
        s.notes.append("not available: no stage wrote a summary.json")
    else:
        # branches/summary.json sums its tasks' summaries: where the tasks are listed, the sum is left out so
        # that every rewriter document and drop is counted once (it is still checked below).
        b.add(s, "stages", "Documents in/out per stage (summary.json; the rewriter per task)",
              "SELECT stage, docs_in, docs_out, dropped_total, docs_in - docs_out - dropped_total AS unaccounted, "
              f"round(docs_out / nullif(docs_in, 0), 4) AS kept_frac, seconds FROM {with_tasks(b, 'summaries', total=False)} "
              "ORDER BY position, stage")  # fmt: skip
        s.figures.append(ReportFigure("funnel", "Documents out per stage", "stages", "stage", "docs_out"))
        b.add(s, "drops", "Drops by reason (the rewriter per task)",
              f"SELECT stage, reason, dropped FROM {with_tasks(b, 'stats', total=False)} WHERE reason IS NOT NULL "
              "ORDER BY position, stage, dropped DESC, reason")  # fmt: skip
        try:
            s.notes += [f"warning: {line}" for line in summary_checks(b)]
        except (duckdb.Error, AuditRefused) as err:
            s.notes.append(f"could not be computed: the checks of the summaries: {first_line(err)}")
        s.figures.append(ReportFigure("drops", "Drops by reason", "drops", "reason", "dropped", kind="barh",
                                      series="stage"))  # fmt: skip
    parts = []
    for pos, view in enumerate(DOCUMENT_VIEWS):
        if b.session.has(view):
            expr, label = b.tokens(view)
            parts.append(f"SELECT {pos} AS pos, '{view}' AS stage, count(*) AS docs_out, sum({expr})::BIGINT AS tokens_out, "
                         f"'{label}' AS token_source FROM \"{view}\"")  # fmt: skip
        elif (
            view in b.session.no_view
        ):  # finished, but its data/ reads nothing: a row, so the next tokens_in is not
            # the stage before it's (and the funnel's warnings say why)
            parts.append(f"SELECT {pos} AS pos, '{view}' AS stage, NULL::BIGINT AS docs_out, NULL::BIGINT AS tokens_out, "
                         "'no readable data/' AS token_source")  # fmt: skip
    if b.session.has("shards") and {"tokens", "documents"} <= set(b.session.columns("shards")):
        # Real token counts exist once the shards stage has tokenized the corpus and the branches.
        parts.append("SELECT 9 AS pos, 'shards' AS stage, sum(documents)::BIGINT AS docs_out, "
                     "sum(tokens)::BIGINT AS tokens_out, 'tokens (shards manifest)' AS token_source FROM shards "
                     "WHERE manifest = 'shards/manifest.json'")  # fmt: skip
    if parts:
        b.add(s, "tokens", "Documents and tokens in each stage's output (tokens_in = the previous stage's tokens_out, counted alike)",
              "SELECT stage, docs_out, CASE WHEN lag(token_source) OVER (ORDER BY pos) = token_source "
              "THEN lag(tokens_out) OVER (ORDER BY pos) END AS tokens_in, tokens_out, token_source "
              "FROM (" + " UNION ALL ".join(parts) + ") ORDER BY pos")  # fmt: skip
    if b.session.has("rejects"):
        expr, label = b.tokens("rejects")
        b.add(s, "reject_tokens", f"Rejected documents written to rejects/ ({label})",
              f"SELECT stage, reason, count(*) AS docs, sum({expr})::BIGINT AS tokens FROM rejects "
              "GROUP BY ALL ORDER BY stage, docs DESC, reason")  # fmt: skip
    return s


def summary_checks(b: ReportBuilder) -> list[str]:
    """What does not add up in the summaries: a stage whose docs_in != docs_out + sum(dropped) (or whose
    summary reports `unaccounted` documents), and a stage whose view holds another number of documents than
    its summary's docs_out (counts from Parquet footers: cheap)."""
    lines = []
    summaries = with_tasks(b, "summaries")  # every summary.json: the rewriter's total and its tasks'
    for row in b.session.rows(
        f"SELECT stage, docs_in, docs_out, dropped_total, extra ->> 'unaccounted' AS unaccounted FROM {summaries} "
        "WHERE docs_in IS DISTINCT FROM docs_out + dropped_total OR (extra -> 'unaccounted') IS NOT NULL "
        "ORDER BY position, stage"
    ):
        stage, docs_in, docs_out, dropped = (
            row[k] for k in ("stage", "docs_in", "docs_out", "dropped_total")
        )
        reported = (
            f" and reports unaccounted = {row['unaccounted']}" if row["unaccounted"] is not None else ""
        )
        if docs_in is None or docs_out is None or dropped is None:
            lines.append(
                f"{stage}: summary.json has no numeric docs_in/docs_out/dropped (unchecked){reported}"
            )
        elif docs_in != docs_out + dropped:
            gap = docs_in - docs_out - dropped
            what = f"{gap} documents unaccounted for" if gap > 0 else f"{-gap} more out than came in"
            lines.append(
                f"{stage}: summary.json does not add up: docs_in {docs_in} != docs_out {docs_out} + dropped "
                f"{dropped} ({what}){reported}"
            )
        else:
            lines.append(f"{stage}: summary.json reports unaccounted = {row['unaccounted']} (documents lost)")
    views = [v for v in DOCUMENT_VIEWS if b.session.has(v)]
    counts = [f"SELECT '{v}' AS stage, count(*) AS docs FROM \"{v}\"" for v in views]
    checked = [f"s.stage = '{v}'" for v in views]
    if b.session.has("branches"):  # a task that kept nothing has no row in the view: 0 documents
        counts.append("SELECT 'branches/' || task, count(*) FROM branches GROUP BY task")
        checked.append("s.stage LIKE 'branches/%'")
    if counts:
        for row in b.session.rows(
            f"SELECT s.stage, s.docs_out, coalesce(c.docs, 0) AS docs FROM {summaries} s LEFT JOIN "
            f"({' UNION ALL '.join(counts)}) c USING (stage) WHERE ({' OR '.join(checked)}) "
            "AND s.docs_out IS DISTINCT FROM coalesce(c.docs, 0) AND s.docs_out IS NOT NULL "
            "ORDER BY s.position, s.stage"
        ):
            view = "branches" if row["stage"].startswith("branches/") else row["stage"]
            lines.append(
                f"{row['stage']}: its data/ holds {row['docs']} documents (view {view}) but its summary.json "
                f"says docs_out {row['docs_out']}"
            )
    return lines + continuity_checks(b)


def continuity_checks(b: ReportBuilder) -> list[str]:
    """A document stage whose docs_in is not the docs_out of the document stage before it, the nearest earlier one
    present in the run (with dedup/ gone, decont is compared with web): documents lost or added between them."""
    present = {
        row["stage"]: row
        for row in b.session.rows(
            "SELECT stage, docs_in, docs_out FROM summaries WHERE stage IN "
            f"({', '.join(repr(v) for v in DOCUMENT_VIEWS)})"
        )
    }
    stages = [v for v in DOCUMENT_VIEWS if v in present]
    lines = []
    for before, stage in zip(stages, stages[1:], strict=False):
        docs_out, docs_in = present[before]["docs_out"], present[stage]["docs_in"]
        if docs_out is None or docs_in is None or docs_out == docs_in:
            continue
        between = DOCUMENT_VIEWS[DOCUMENT_VIEWS.index(before) + 1 : DOCUMENT_VIEWS.index(stage)]
        absent = f" ({', '.join(between)} not in this run)" if between else ""
        lines.append(
            f"{stage}: docs_in {docs_in} != docs_out {docs_out} of {before}, the stage before it{absent}: "
            f"{stage} did not read what {before} wrote"
        )
    return lines


def domains_section(b: ReportBuilder) -> Section:
    """Top domains of the corpus by documents and by tokens."""
    s = Section("domains", "Top domains (corpus)")
    columns = b.session.columns("corpus")
    if not b.session.has("corpus"):  # the funnel's warnings say why (e.g. decont/data reads nothing)
        s.notes.append("not available: no corpus view")
        return s
    if "url" not in columns and "domain" not in columns:
        s.notes.append("not available: the corpus has no `url` or `domain` column")
        return s
    expr, label = b.tokens("corpus")
    # The web stage's own `domain` column where there is one (urlsplit's host: lower case, no port); else the
    # URL's, by split_part, then one small regex on the short host string (~3x faster than one regex over the
    # whole URL on 1M rows). `www.` is taken off both, so that one site is one row whichever gave its host; a
    # document with neither is '(no url)', not a row without a name.
    host = "split_part(url, '/', 3)"
    host = f"coalesce(nullif(domain, ''), {host})" if "url" in columns and "domain" in columns else host
    host = "domain" if "url" not in columns else host
    missing = "(no url)" if "url" in columns else "(no domain)"
    strip = r"'^www\.|:[0-9]*$|[?#].*$'"  # www., a port, a query or fragment after a bare host
    domain = f"coalesce(nullif(regexp_replace(lower({host}), {strip}, '', 'g'), ''), '{missing}')"
    inner = (
        f"SELECT {domain} AS domain, count(*) AS docs, sum({expr})::BIGINT AS tokens FROM corpus GROUP BY 1"
    )
    b.add(s, "by_docs", "Top domains by documents",
          f"SELECT domain, docs, tokens, round(docs / sum(docs) OVER (), 4) AS doc_share FROM ({inner}) "
          f"ORDER BY docs DESC, domain LIMIT {b.top_n}")  # fmt: skip
    b.add(s, "by_tokens", f"Top domains by {label}",
          f"SELECT domain, tokens, docs, round(tokens / sum(tokens) OVER (), 4) AS token_share FROM ({inner}) "
          f"ORDER BY tokens DESC, domain LIMIT {b.top_n}")  # fmt: skip
    s.figures.append(
        ReportFigure("by_docs", "Top domains by documents", "by_docs", "domain", "docs", kind="barh")
    )
    return s


def math_score_section(b: ReportBuilder) -> Section:
    """math_score histogram (kept and rejected pages of the web stage) with the threshold."""
    s = Section("math_score", "math_score histogram")
    column = b.find_column("web", SCORE_COLUMNS) if b.session.has("web") else None
    if not column:
        s.notes.append("not available: the web stage output has no math_score column")
        return s
    if not b.session.scalar(f'SELECT count("{column}") FROM web'):
        s.notes.append(f"not available: web.{column} is empty (no math classifier scored the pages)")
        return s
    bins = 20
    hist = f'least(floor("{column}" * {bins}), {bins - 1}) / {bins}'
    sql = f"SELECT {hist} AS bin, 'kept' AS pages, count(*) AS docs FROM web WHERE \"{column}\" IS NOT NULL GROUP BY 1"
    if column in b.session.columns("rejects"):
        sql += (f" UNION ALL SELECT {hist}, 'rejected', count(*) FROM rejects WHERE stage = 'web' "
                f"AND \"{column}\" IS NOT NULL GROUP BY 1")  # fmt: skip
    b.add(
        s,
        "hist",
        f"{column}: documents per bin of width 1/{bins}",
        f"SELECT * FROM ({sql}) ORDER BY pages, bin",
    )
    threshold = b.threshold()
    s.notes.append(
        f"threshold: {threshold}" if threshold is not None else "threshold: unknown (not in web summary)"
    )
    s.figures.append(ReportFigure("hist", f"{column} (web stage)", "hist", "bin", "docs", series="pages",
                                  vline=threshold, xlabel=column))  # fmt: skip
    b.add(s, "quantiles", f"{column} quantiles of kept pages",
          f"SELECT count(*) AS docs, round(avg(\"{column}\"), 4) AS mean, "
          f"round(quantile_cont(\"{column}\", 0.1), 4) AS p10, round(quantile_cont(\"{column}\", 0.5), 4) AS p50, "
          f"round(quantile_cont(\"{column}\", 0.9), 4) AS p90 FROM web")  # fmt: skip
    return s


def lengths_section(b: ReportBuilder) -> Section:
    """Document length (characters) per stage: quantiles and a log-scale histogram."""
    s = Section("lengths", "Length distributions (characters)")
    views = [v for v in (*DOCUMENT_VIEWS, "branches") if b.session.has(v)]
    if not views:
        s.notes.append("not available: no document stage output")
        return s
    stats, hists = [], []
    for pos, view in enumerate(views):
        length = b.length(view)
        label = "'branches/' || task" if view == "branches" else f"'{view}'"
        group = "GROUP BY task" if view == "branches" else ""
        stats.append(f"SELECT {pos} AS pos, stage, docs, mean, round(q[1], 1) AS p10, round(q[2], 1) AS p50, "
                     f"round(q[3], 1) AS p90, max FROM (SELECT {label} AS stage, count(*) AS docs, round(avg({length}), 1) AS mean, "
                     f"quantile_cont({length}, [0.1, 0.5, 0.9]) AS q, max({length}) AS max FROM \"{view}\" {group})")  # fmt: skip
        hists.append(f"SELECT {pos} AS pos, {label} AS stage, floor(log10(greatest({length}, 1)) * 5) / 5 AS log10_chars, "
                     f"count(*) AS docs FROM \"{view}\" GROUP BY ALL")  # fmt: skip
    b.add(s, "quantiles", "Characters per document",
          "SELECT * EXCLUDE (pos) FROM (" + " UNION ALL ".join(stats) + ") ORDER BY pos, stage")  # fmt: skip
    b.add(s, "hist", "Documents per log10(characters) bin of width 0.2",
          "SELECT * EXCLUDE (pos) FROM (" + " UNION ALL ".join(hists) + ") ORDER BY pos, stage, log10_chars")  # fmt: skip
    s.figures.append(ReportFigure("hist", "Length distribution", "hist", "log10_chars", "docs", kind="line",
                                  series="stage", xlabel="log10(characters)", step=0.2))  # fmt: skip
    return s


def language_section(b: ReportBuilder) -> Section:
    """Languages of the pages the web stage read (kept and, where written, rejected)."""
    s = Section("language", "Language")
    if "lang" not in b.session.columns("web"):
        s.notes.append("not available: the web stage output has no `lang` column")
        return s
    sql = "SELECT lang, 'kept' AS pages FROM web"
    rejected = ""
    if "lang" in b.session.columns("rejects"):
        sql += " UNION ALL SELECT lang, 'rejected' FROM rejects WHERE stage = 'web'"
        rejected = "count(*) FILTER (WHERE pages = 'rejected') AS rejected, "
    else:
        s.notes.append("kept pages only: the web stage's rejects carry no `lang` column")
    b.add(s, "langs", "Documents per language (web stage)",
          f"SELECT coalesce(lang, '?') AS lang, count(*) FILTER (WHERE pages = 'kept') AS kept, {rejected}"
          f"count(*) AS total FROM ({sql}) GROUP BY 1 ORDER BY total DESC, lang LIMIT {b.top_n}")  # fmt: skip
    s.figures.append(ReportFigure("langs", "Documents per language (kept)", "langs", "lang", "kept"))
    return s
