"""The report and the console say when the summaries do not add up, when a stage is unfinished, and when a
section could not be computed (a reviewer's edited, half-removed and memory-starved runs)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from curate.audit import AuditSession
from curate.audit_sections import write_report
from tests.curate.audit_runs import audit_cli


def _edit(run: Path, stage: str, **changes) -> None:
    path = run / stage / "summary.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def test_a_clean_run_has_no_warning(run, tmp_path):
    result = write_report(run, tmp_path / "r.html", tmp_path / "r.md")
    assert result["warnings"] == [] and result["unfinished"] == []
    assert all(r["unaccounted"] == 0 for r in result["sections"]["funnel"]["stages"])


def test_unbalanced_summaries_and_view_counts_are_flagged_in_report_and_console(run, tmp_path):
    web = json.loads((run / "web" / "summary.json").read_text())
    dedup = json.loads((run / "dedup" / "summary.json").read_text())
    _edit(run, "web", docs_in=web["docs_in"] + 10)  # 10 documents vanish
    _edit(run, "dedup", docs_out=99_999)  # more out than in, and not what dedup/data holds
    _edit(run, "decont", unaccounted=3)
    out = CliRunner().invoke(audit_cli(), ["audit", "report", str(run), "-o", str(tmp_path / "r.html")])
    assert out.exit_code == 0, out.output
    md = (tmp_path / "r.md").read_text()
    expected = [
        f"web: summary.json does not add up: docs_in {web['docs_in'] + 10} != docs_out {web['docs_out']} + "
        f"dropped {sum(web['dropped'].values())} (10 documents unaccounted for)",
        "dedup: summary.json does not add up",
        f"dedup: its data/ holds {dedup['docs_out']} documents (view dedup) but its summary.json says docs_out 99999",
        "decont: summary.json reports unaccounted = 3",
    ]
    for line in expected:
        assert f"> warning: {line}" in md, line
        assert f"warning: {line}" in out.stderr, line
    funnel = md.split("## Funnel")[1].split("\n## ")[0]
    assert "warning: web" in funnel  # in the funnel, before its tables
    html = (tmp_path / "r.html").read_text()
    assert "warning: web: summary.json does not add up" in html


def test_a_branch_task_whose_data_differs_from_its_summary_is_flagged(run, tmp_path):
    qa = json.loads((run / "branches" / "qa" / "summary.json").read_text())
    _edit(run, "branches/qa", docs_out=qa["docs_out"] + 1, docs_in=qa["docs_in"] + 1)
    result = write_report(run, tmp_path / "r.html", None)
    assert result["warnings"] == [
        f"branches/qa: its data/ holds {qa['docs_out']} documents (view branches) but its summary.json says "
        f"docs_out {qa['docs_out'] + 1}"
    ]


def test_an_unfinished_stage_is_named_where_the_corpus_reads_it(run, tmp_path):
    (run / "decont" / "summary.json").unlink()
    with AuditSession(run) as session:
        assert session.relations["corpus"].startswith("= decont")
        assert session.unfinished == [
            "decont: an unfinished stage (no summary.json): not in summaries/stats or the report's funnel; "
            "the views decont, corpus read its partial output"
        ]
    runner = CliRunner()
    out = runner.invoke(audit_cli(), ["audit", "report", str(run), "-o", str(tmp_path / "r.html")])
    assert out.exit_code == 0, out.output
    assert "warning: decont: an unfinished stage (no summary.json)" in out.stderr
    assert "> warning: decont: an unfinished stage" in (tmp_path / "r.md").read_text()
    out = runner.invoke(
        audit_cli(), ["audit", "sql", str(run), "SELECT count(*) AS n FROM corpus", "-f", "json"]
    )
    assert out.exit_code == 0 and "decont: an unfinished stage" in out.stderr, out.output
    assert json.loads(out.stdout) == [{"n": len(list(_rows(run / "decont" / "data")))}]
    (run / "decont" / "summary.json").write_text('{"docs_in": 1')  # half-written
    with AuditSession(run) as session:
        assert session.unfinished[0].startswith(
            "decont: an unfinished stage (a summary.json that does not read)"
        )


def _rows(folder: Path):
    import pyarrow.parquet as pq

    return [r for f in sorted(folder.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_sections_not_computed_are_warned_on_the_console(run, tmp_path):
    out = CliRunner().invoke(
        audit_cli(), ["audit", "report", str(run), "-o", str(tmp_path / "r.html"), "--memory-limit", "1MB"]
    )
    assert out.exit_code == 0, out.output
    failed = (tmp_path / "r.md").read_text().count("> could not be computed: ")
    assert failed >= 1
    assert out.stderr.count(": could not be computed: ") == failed
    assert all(
        line.startswith("warning: ") for line in out.stderr.splitlines() if "could not be computed" in line
    )


def test_the_funnel_counts_each_rewriter_document_once(run, tmp_path):
    result = write_report(run, tmp_path / "r.html", None)
    stages = [r["stage"] for r in result["sections"]["funnel"]["stages"]]
    assert "branches" not in stages and {"branches/qa", "branches/refine"} <= set(stages)
    total = json.loads((run / "branches" / "summary.json").read_text())
    rows = [r for r in result["sections"]["funnel"]["stages"] if r["stage"].startswith("branches/")]
    assert sum(r["dropped_total"] for r in rows) == sum(total["dropped"].values())
    # without per-task summaries the rewriter's total is the row
    for task in ("qa", "refine"):
        (run / "branches" / task / "summary.json").unlink()
    result = write_report(run, tmp_path / "r2.html", None)
    assert "branches" in [r["stage"] for r in result["sections"]["funnel"]["stages"]]


def test_the_recipe_audit_stage_records_and_prints_the_warnings(run, capsys):
    """`mathmix run`'s audit stage: the warnings were in audit/summary.json only, never on the console."""
    from pipelines.audit import Config, run_stage
    from pipelines.executors import ExecutorConfig
    from pipelines.stages import StageContext

    _edit(run, "decont", unaccounted=3)
    ctx = StageContext(run_dir=run, out_dir=run / "audit2", inputs=[], executor=ExecutorConfig())
    summary = run_stage(Config(), ctx)
    assert any(w.startswith("decont: summary.json reports unaccounted = 3") for w in summary["warnings"])
    assert "warning: audit: decont: summary.json reports unaccounted = 3" in capsys.readouterr().err


def test_a_funnel_table_that_fails_costs_neither_the_other_tables_nor_the_checks(run, tmp_path):
    """A web file with `n_chars` as text made the token table fail, and with it the whole funnel: the stage
    table and the check that web/data holds more documents than its summary says were lost."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    web = json.loads((run / "web" / "summary.json").read_text())
    odd = pa.table({"id": ["x1", "x2"], "text": ["a", "b"], "n_chars": ["1", "one"]})
    pq.write_table(odd, run / "web" / "data" / "zz_odd.parquet")
    result = write_report(run, tmp_path / "r.html", None)
    funnel = result["sections"]["funnel"]
    assert [r["stage"] for r in funnel["stages"]][:4] == ["web", "dedup", "decont", "branches/qa"]
    assert "tokens" not in funnel and "stages" in funnel and "drops" in funnel
    assert any(n.startswith("could not be computed: Documents and tokens") for n in funnel["notes"])
    line = (
        f"web: its data/ holds {web['docs_out'] + 2} documents (view web) but its summary.json says docs_out"
    )
    assert any(w.startswith(line) for w in result["warnings"]), result["warnings"]


LIST_ERROR = TypeError("unhashable type: 'list'")


def _plots_fail(monkeypatch, **failures: Exception) -> None:
    """The plots of the given figure keys fail to draw with the given errors; the others are drawn."""
    import curate.audit_render

    draw = curate.audit_render.render_png

    def render_png(figure, table):
        if figure.key in failures:
            raise failures[figure.key]
        return draw(figure, table)

    monkeypatch.setattr(curate.audit_render, "render_png", render_png)


def test_plots_not_drawn_are_counted_on_the_console_and_said_in_the_report(run, tmp_path, monkeypatch):
    """A plot that could not be drawn (values a plot cannot take) was a note that reached neither
    the console nor the report's pages (it was added after they were written): only audit/summary.json had it."""
    _plots_fail(monkeypatch, by_docs=ValueError("could not convert string to float: 'n/a'"), langs=LIST_ERROR)
    out = CliRunner().invoke(audit_cli(), ["audit", "report", str(run), "-o", str(tmp_path / "r.html")])
    assert out.exit_code == 0, out.output
    lines = [line for line in out.stderr.splitlines() if "not drawn" in line]
    assert lines == [
        "2 plots not drawn (their tables are in the report): Top domains (corpus): 'Top domains by documents' "
        "(could not convert string to float: 'n/a'); Language: 'Documents per language (kept)' "
        "(unhashable type: 'list')"
    ], out.stderr
    md, page = (tmp_path / "r.md").read_text(), (tmp_path / "r.html").read_text()
    assert "> plot 'Top domains by documents' not drawn: could not convert string to float: 'n/a'" in md
    assert "plot &#x27;Documents per language (kept)&#x27; not drawn: unhashable type" in page
    assert md.count(" not drawn: ") == page.count(" not drawn: ") == 2


def test_the_recipe_audit_stage_records_and_prints_the_plots_not_drawn(run, capsys, monkeypatch):
    """`mathmix run`'s audit stage said nothing of plots it could not draw (`audit report` does)."""
    from pipelines.audit import Config, run_stage
    from pipelines.executors import ExecutorConfig
    from pipelines.stages import StageContext

    _plots_fail(monkeypatch, langs=LIST_ERROR)
    ctx = StageContext(run_dir=run, out_dir=run / "audit2", inputs=[], executor=ExecutorConfig())
    summary = run_stage(Config(), ctx)
    assert summary["plots_not_drawn"] == [
        "Language: 'Documents per language (kept)' (unhashable type: 'list')"
    ]
    err = " ".join(capsys.readouterr().err.split())
    assert "audit: 1 plot not drawn (its table is in the report): Language: 'Documents per language" in err


def test_audit_report_and_the_recipe_stage_say_one_plot_not_drawn_alike(run, tmp_path, monkeypatch):
    """The console line on plots not drawn was written twice, in two wordings: `audit report` said '1 plot not
    drawn (their tables are in the report)', the recipe stage '(its table is ...)'; one function says it now."""
    _plots_fail(monkeypatch, langs=LIST_ERROR)
    out = CliRunner().invoke(audit_cli(), ["audit", "report", str(run), "-o", str(tmp_path / "r.html")])
    assert out.exit_code == 0, out.output
    undrawn = "Language: 'Documents per language (kept)' (unhashable type: 'list')"
    assert [line for line in out.stderr.splitlines() if "not drawn" in line] == [
        f"1 plot not drawn (its table is in the report): {undrawn}"
    ]
    from curate.audit_sections import plots_not_drawn_line

    assert plots_not_drawn_line([undrawn]) == f"1 plot not drawn (its table is in the report): {undrawn}"
    assert plots_not_drawn_line(["a", "b"]) == "2 plots not drawn (their tables are in the report): a; b"


def test_an_error_is_said_by_its_first_line_that_is_not_blank():
    import duckdb

    from mathmix.cli_util import first_line

    assert (
        first_line(duckdb.CatalogException('Catalog Error: no web\nDid you mean "web"?'))
        == "Catalog Error: no web"
    )
    assert first_line(ValueError("\n  \nthe reason\nmore")) == "the reason"
    assert first_line(ValueError(" ")) == first_line(ValueError()) == "ValueError"
