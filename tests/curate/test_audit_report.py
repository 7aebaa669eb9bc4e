"""The canned audit report: its numbers equal independent counts over the same run; HTML is self-contained."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curate.audit import AuditSession
from curate.audit_sections import write_report
from curate.audit_synth import build_synthetic_run
from pipelines.executors import ExecutorConfig
from pipelines.stages import StageContext, parse_stage_config


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_synthetic_run(tmp_path_factory.mktemp("audit_report") / "run", 1200)


@pytest.fixture(scope="module")
def report(run_dir, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("report_out")
    return write_report(run_dir, out / "report.html", out / "report.md")


def _rows(folder: Path) -> list[dict]:
    return [row for f in sorted(folder.rglob("*.parquet")) for row in pq.read_table(f).to_pylist()]


def test_funnel_equals_the_summaries(report, run_dir):
    stages = {r["stage"]: r for r in report["sections"]["funnel"]["stages"]}
    # the rewriter per task, without branches/summary.json (their sum): each document counted once
    assert "branches" not in stages
    for folder in ("web", "dedup", "decont", "branches/qa", "branches/refine", "shards"):
        summary = json.loads((run_dir / folder / "summary.json").read_text())
        got = stages[folder]
        assert (got["docs_in"], got["docs_out"]) == (summary["docs_in"], summary["docs_out"])
        assert got["dropped_total"] == sum(summary["dropped"].values())
    assert list(stages)[:3] == ["web", "dedup", "decont"]  # pipeline order
    tokens = {r["stage"]: r for r in report["sections"]["funnel"]["tokens"]}
    for stage in ("web", "dedup", "decont"):
        rows = _rows(run_dir / stage / "data")
        assert tokens[stage]["docs_out"] == len(rows)
        # no token counts before the shards stage: estimated from the web stage's n_chars
        assert tokens[stage]["tokens_out"] == round(sum(r["n_chars"] / 4 for r in rows))
        assert tokens[stage]["token_source"] == "est. tokens (chars/4)"
    assert tokens["dedup"]["tokens_in"] == tokens["web"]["tokens_out"]
    manifest = json.loads((run_dir / "shards" / "manifest.json").read_text())["sources"]
    assert tokens["shards"]["tokens_out"] == sum(s["tokens"] for s in manifest.values())
    assert tokens["shards"]["tokens_in"] is None  # real tokens vs. estimates: not chained


def test_domains_scores_lengths_languages(report, run_dir):
    corpus = _rows(run_dir / "decont" / "data")
    got = {r["domain"]: r["docs"] for r in report["sections"]["domains"]["by_docs"]}
    assert got == dict(Counter(r["domain"] for r in corpus).most_common(20))
    web = _rows(run_dir / "web" / "data")
    rejected = _rows(run_dir / "web" / "rejects")
    hist = report["sections"]["math_score"]["hist"]
    assert sum(r["docs"] for r in hist if r["pages"] == "kept") == len(web)
    # the language filter runs before the scorer: only the scorer's rejects have a math_score
    scored = [r for r in rejected if r["math_score"] is not None]
    assert 0 < len(scored) < len(rejected) and {r["step"] for r in scored} == {"MathScoreFilter"}
    assert sum(r["docs"] for r in hist if r["pages"] == "rejected") == len(scored)
    high = sum(1 for r in web if r["math_score"] >= 0.95)
    assert next(r["docs"] for r in hist if r["pages"] == "kept" and r["bin"] == 0.95) == high
    # the threshold is not in the web summary: it comes from datatrove's logs/executor.json
    assert "threshold: 0.5" in report["sections"]["math_score"]["notes"]
    lengths = {r["stage"]: r for r in report["sections"]["lengths"]["quantiles"]}
    assert lengths["web"]["max"] == max(r["n_chars"] for r in web)
    assert lengths["branches/qa"]["docs"] == len(_rows(run_dir / "branches" / "qa" / "data"))
    assert list(lengths)[:3] == ["web", "dedup", "decont"]
    langs = {r["lang"]: (r["kept"], r["rejected"]) for r in report["sections"]["language"]["langs"]}
    kept, dropped = Counter(r["lang"] for r in web), Counter(r["lang"] for r in rejected)
    assert langs == {lang: (kept[lang], dropped[lang]) for lang in kept | dropped}


def test_dedup_contamination_rewriter_mixture(report, run_dir):
    sections = report["sections"]
    kept = Counter(r["minhash_cluster_size"] for r in _rows(run_dir / "dedup" / "data"))
    assert {r["cluster_size"]: r["docs"] for r in sections["dedup"]["kept"]} == dict(kept)
    clusters = [json.loads(line) for line in (run_dir / "dedup" / "clusters.jsonl").read_text().splitlines()]
    by_size = {r["size"]: r["clusters"] for r in sections["dedup"]["clusters"]}
    assert by_size == dict(Counter(c["size"] for c in clusters))
    lines = (run_dir / "decont" / "contamination.jsonl").read_text().splitlines()
    expected: dict[str, tuple[int, int]] = {}
    for overlap in (o for line in lines for o in json.loads(line)["overlaps"]):
        docs, hits = expected.get(overlap["benchmark"], (0, 0))
        expected[overlap["benchmark"]] = (docs + 1, hits + overlap["n_matched"])
    got = {r["benchmark"]: (r["docs"], r["ngram_hits"]) for r in sections["contamination"]["benchmarks"]}
    assert got == expected
    rewritten = {(r["task"], r["benchmark"]): r["docs"] for r in sections["contamination"]["rewriter"]}
    for task in ("qa", "refine"):
        lines = (run_dir / "branches" / task / "decont" / "00000.jsonl").read_text().splitlines()
        found = Counter(json.loads(line)["overlaps"][0]["benchmark"] for line in lines)
        assert {b: n for (t, b), n in rewritten.items() if t == task} == dict(found)
    accept = {r["task"]: r["acceptance"] for r in sections["rewriter"]["acceptance"]}
    reasons = {(r["task"], r["reason"]): r["dropped"] for r in sections["rewriter"]["reasons"]}
    for task in ("qa", "refine"):
        summary = json.loads((run_dir / "branches" / task / "summary.json").read_text())
        assert accept[task] == round(summary["docs_out"] / summary["docs_in"], 4)
        assert reasons[(task, "no_answer")] == summary["dropped"]["no_answer"]
    manifest = json.loads((run_dir / "shards" / "manifest.json").read_text())["sources"]
    got = {r["source"]: (r["tokens"], r["docs"]) for r in sections["mixture"]["sources"]}
    assert got == {name: (s["tokens"], s["documents"]) for name, s in manifest.items()}


def test_report_numbers_equal_sql_through_the_views(report, run_dir):
    """Every table of the report is what its recorded SQL returns on a fresh session over the same run."""
    with AuditSession(run_dir) as session:
        checked = 0
        for section in report["sections"].values():
            for key, sql in section["sql"].items():
                assert session.rows(sql) == section[key], (section["title"], key)
                checked += 1
        assert checked >= 15
        assert report["corpus_docs"] == session.scalar("SELECT count(*) FROM corpus")
        top = report["sections"]["domains"]["by_tokens"][0]
        assert top["tokens"] == session.scalar(
            f"SELECT round(sum(n_chars / 4)) FROM corpus WHERE domain = '{top['domain']}'"
        )


def test_html_is_self_contained_and_markdown_twin(report):
    html_path, md_path = (Path(f) for f in report["files"][:2])
    html = html_path.read_text()
    assert html.count("src='data:image/png;base64,") >= 8
    assert not re.search(r"src=['\"](?!data:)", html) and "<link" not in html
    funnel_web = next(r for r in report["sections"]["funnel"]["stages"] if r["stage"] == "web")
    assert f"{funnel_web['docs_in']:,}" in html
    md = md_path.read_text()
    assert "## Funnel" in md and "| stage | docs_in |" in md
    for link in re.findall(r"!\[[^]]*\]\(([^)]+)\)", md):
        assert (md_path.parent / link).is_file()


def test_report_on_a_web_only_run_says_what_is_missing(tmp_path):
    full = build_synthetic_run(tmp_path / "full", 150)
    run = tmp_path / "web_only"
    (run / "web").mkdir(parents=True)
    for name in ("data", "summary.json"):
        (full / "web" / name).rename(run / "web" / name)
    result = write_report(run, tmp_path / "r.html", None)
    notes = {k: " ".join(s["notes"]) for k, s in result["sections"].items()}
    for key in ("rewriter", "mixture"):
        assert "not available" in notes[key], key
    # no decont stage at all: said plainly, and no empty fallback table
    assert notes["contamination"] == "not available: the run has no decont stage"
    assert result["sections"]["contamination"]["sql"] == {}
    assert notes["dedup"] == "not available: the run has no dedup stage"
    assert result["sections"]["domains"]["by_docs"]  # the corpus is the web output here
    assert (tmp_path / "r.html").is_file() and not (tmp_path / "r.md").exists()


def test_audit_stage_writes_report_and_summary(run_dir, tmp_path):
    config = parse_stage_config("audit", {"top_n": 5, "memory_limit": "1GB"})
    out = run_dir / "audit"
    ctx = StageContext(run_dir=run_dir, out_dir=out, inputs=[], executor=ExecutorConfig())
    from pipelines.audit import run_stage

    summary = run_stage(config, ctx)
    assert json.loads((out / "summary.json").read_text())["docs_out"] == summary["docs_out"]
    assert summary["docs_in"] == summary["docs_out"] == len(_rows(run_dir / "decont" / "data"))
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    assert len(summary["sections"]["domains"]["by_docs"]) == 5
    with pytest.raises(ValueError):
        parse_stage_config("audit", {"top": 5})
    with pytest.raises(ValueError, match="Memory must have a number"):  # when the recipe is read
        parse_stage_config("audit", {"memory_limit": "lots"})
    # a second audit does not audit its own folder
    with AuditSession(run_dir) as session:
        assert not any(r.startswith("audit") for r in session.relations)
        assert session.scalar("SELECT count(*) FROM summaries WHERE stage = 'audit'") == 0


def test_a_section_that_fails_says_so_and_the_rest_is_written(tmp_path):
    import duckdb

    run = tmp_path / "odd"
    (run / "web" / "data").mkdir(parents=True)
    duckdb.sql(
        "COPY (SELECT 'd' || i AS id, 'text ' || i AS text, 'https://a.org/' || i AS url, 'high' AS math_score, "
        f"10 AS n_chars FROM range(5) t(i)) TO '{run}/web/data/0.parquet'"
    )
    (run / "web" / "summary.json").write_text(json.dumps({"docs_in": 7, "docs_out": 5, "dropped": {"x": 2}}))
    result = write_report(run, tmp_path / "odd.html", None)
    assert result["sections"]["math_score"]["notes"][0].startswith("could not be computed")
    assert result["sections"]["funnel"]["stages"][0]["docs_out"] == 5
    assert result["sections"]["domains"]["by_docs"] == [
        {"domain": "a.org", "docs": 5, "tokens": 12, "doc_share": 1.0}
    ]


def test_math_threshold_from_the_scorer_step_or_its_model_card(tmp_path):
    from curate.audit_report import _scorer_threshold

    (tmp_path / "model.card.json").write_text(json.dumps({"threshold": 0.37}))
    executor = tmp_path / "executor.json"
    step = {"model_path": str(tmp_path / "model.bin"), "threshold": None, "keep_top_percent": None}
    executor.write_text(json.dumps({"pipeline": [{"languages": ["en"], "threshold": 0.65}, step]}))
    assert _scorer_threshold(executor) == 0.37  # the language filter's threshold is not the math threshold
    executor.write_text(json.dumps({"pipeline": [step | {"threshold": 0.8}]}))
    assert _scorer_threshold(executor) == 0.8
    executor.write_text(json.dumps({"pipeline": [step | {"keep_top_percent": 10}]}))
    assert _scorer_threshold(executor) is None


def test_cli_report_named_md_writes_html_and_markdown_apart(run_dir, tmp_path):
    import typer
    from typer.testing import CliRunner

    from curate.audit_cli import register

    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["audit", "report", str(run_dir), "-o", str(tmp_path / "x.md")])
    assert result.exit_code == 0, result.output
    html, md = (tmp_path / "x.html").read_text(), (tmp_path / "x.md").read_text()
    assert html.startswith("<!doctype html>") and md.startswith("# mathmix audit")
    folder = tmp_path / "out"
    folder.mkdir()
    result = CliRunner().invoke(app, ["audit", "report", str(run_dir), "-o", str(folder)])
    assert result.exit_code == 0 and (folder / "report.html").is_file() and (folder / "report.md").is_file()
    with pytest.raises(ValueError, match="same file"):
        write_report(run_dir, tmp_path / "y.md", tmp_path / "y.md")


def test_drops_by_reason_count_each_rewriter_drop_once(report, run_dir):
    drops = report["sections"]["funnel"]["drops"]
    assert not any(r["stage"] == "branches" for r in drops)  # the sum of the tasks' summaries
    total = json.loads((run_dir / "branches" / "summary.json").read_text())["dropped"]
    got: Counter[str] = Counter()
    for r in drops:
        if r["stage"].startswith("branches/"):
            got[r["reason"]] += r["dropped"]
    assert dict(got) == total


def test_estimated_tokens_are_characters_over_4_everywhere(tmp_path):
    import duckdb

    run = tmp_path / "run"
    (run / "branches" / "qa" / "data").mkdir(parents=True)
    texts = ["∑ᵢ xᵢ² ≤ ∫ f(x) dx", "plain ascii text here", "√2 ∉ ℚ ⇒ ∀ε>0"]  # multi-byte symbols
    duckdb.sql(
        "COPY (SELECT 'd' || i AS id, t AS text, 'qa' AS task FROM unnest(?) WITH ORDINALITY u(t, i)) "
        f"TO '{run}/branches/qa/data/0.parquet'",
        params=[texts],
    )
    result = write_report(run, tmp_path / "r.html", None)
    outputs = result["sections"]["rewriter"]["outputs"]
    assert outputs == [{"task": "qa", "docs": 3, "tokens": round(sum(len(t) / 4 for t in texts))}]
    assert "length(text) / 4" in result["sections"]["rewriter"]["sql"]["outputs"]


HOSTILE = ["<img src=x onerror=alert(1)>", "a|b", "line1\nline2", "back\\|slash & <script>alert(1)</script>"]


def test_markdown_escapes_what_the_data_holds(tmp_path):
    """report.md wrote domains, benchmarks, stage names, drop reasons and notes raw: `<img onerror=...>` was live
    HTML in it (the HTML report escapes it), and a `|` or a newline in a cell broke its table."""
    import pyarrow as pa

    run = build_synthetic_run(tmp_path / "run", 150)
    data = run / "decont" / "data" / "00000.parquet"
    table = pq.read_table(data)
    domains = [HOSTILE[i % len(HOSTILE)] for i in range(table.num_rows)]
    pq.write_table(
        table.set_column(table.schema.get_field_index("domain"), "domain", pa.array(domains)), data
    )
    line = json.loads((run / "decont" / "contamination.jsonl").read_text().splitlines()[0])
    with (run / "decont" / "contamination.jsonl").open("w") as f:
        for bench in HOSTILE:
            f.write(json.dumps(line | {"overlaps": [line["overlaps"][0] | {"benchmark": bench}]}) + "\n")
    # a folder with a summary.json is a stage; this one does not add up, so a note names it
    stage = run / "<svg onload=alert(1)>|x"
    stage.mkdir()
    (stage / "summary.json").write_text(
        json.dumps({"docs_in": 9, "docs_out": 1, "dropped": {"<b>r|\nx</b>": 2}})
    )
    result = write_report(run, tmp_path / "r.html", tmp_path / "r.md")
    assert any("<svg" in w for w in result["warnings"])  # the note that names the stage is in the report
    md = (tmp_path / "r.md").read_text()
    prose = re.sub(r"```sql\n.*?\n```", "", md, flags=re.S)
    tags = {t.lower() for t in re.findall(r"<(/?[a-zA-Z][^\s>/]*)", prose)}
    assert tags <= {"details", "/details", "summary", "/summary", "br"}, tags
    assert "&lt;img src=x onerror=alert(1)&gt;" in md and "&lt;svg onload=alert(1)&gt;\\|x" in md
    assert "| a\\|b |" in md and "line1<br>line2" in md and "back\\\\\\|slash &amp; &lt;script&gt;" in md
    tables = 0
    for block in re.findall(r"(?:^\|.*\n)+", prose, flags=re.M):
        widths = {len(re.split(r"(?<!\\)\|", row)) for row in block.splitlines()}
        assert len(widths) == 1, block  # every row has the header's cells
        tables += 1
    assert tables >= 10
    # ... and as a Markdown renderer reads it (raw HTML allowed, as GitHub's and most viewers' do)
    from markdown_it import MarkdownIt  # rich's dependency

    page = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    assert not re.search(r"<(script|img src=x|svg|b>)", page), page
    for table in re.findall(r"<table>.*?</table>", page, flags=re.S):
        cells = {
            len(re.findall(r"<t[hd][ >]", row)) for row in re.findall(r"<tr>.*?</tr>", table, flags=re.S)
        }
        assert len(cells) == 1, table
    assert "<td>a|b</td>" in page and "<td>line1<br>line2</td>" in page and "back\\|slash &amp;" in page
