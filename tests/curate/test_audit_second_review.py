"""Audit review findings (second round): a sample spans the whole view, `--seed` is checked, JSON numbers stay
numbers, a report replaces an older one whole, domains are labelled and counted once, the synthetic web rejects
are in the web stage's own layout, and a line plot drops to 0 over empty bins."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate import audit_render
from curate.audit import AuditSession, sample_documents
from curate.audit_report import ReportBuilder, Section, domains_section, lengths_section
from curate.audit_sections import write_report
from tests.curate.audit_runs import audit_cli

FILES, ROWS_PER_FILE = 8, 25_000  # past ~82k rows DuckDB's reservoir sample stopped drawing new rows


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory) -> Path:
    """A run whose corpus (decont/data) is 8 Parquet files of 25,000 rows each; `pos` = the row's place."""
    run = tmp_path_factory.mktemp("sample") / "run"
    data = run / "decont" / "data"
    data.mkdir(parents=True)
    con = duckdb.connect()
    for k in range(FILES):
        con.execute(
            f"COPY (SELECT 'doc-' || i AS id, i AS pos, {k} AS file, 'text ' || i AS text "
            f"FROM range({k * ROWS_PER_FILE}, {(k + 1) * ROWS_PER_FILE}) t(i)) "
            f"TO '{data / f'{k:05d}.parquet'}' (FORMAT parquet)"
        )
    con.close()
    total = FILES * ROWS_PER_FILE
    (run / "decont" / "summary.json").write_text(
        json.dumps({"docs_in": total, "docs_out": total, "dropped": {}})
    )
    return run


def test_a_sample_spans_the_whole_view_not_its_first_rows(big_corpus):
    docs = []
    with AuditSession(big_corpus) as s:
        for seed in range(5):  # -n 20, the default: DuckDB's reservoir drew all 20 from the first 82k rows
            sample = sample_documents(s, "corpus", n=20, seed=seed)
            assert len(sample) == 20 and max(d["pos"] for d in sample) > FILES * ROWS_PER_FILE / 2
            docs += sample
    assert {d["file"] for d in docs} == set(range(FILES))  # every file, the last one too
    mean = sum(d["pos"] for d in docs) / len(docs) / (FILES * ROWS_PER_FILE)
    assert 0.35 < mean < 0.65


def test_a_sample_is_the_same_whatever_the_thread_count_and_changes_with_the_seed(big_corpus):
    samples = []
    for threads in (1, 4):
        with AuditSession(big_corpus, threads=threads) as s:
            samples.append(sample_documents(s, "corpus", where="file >= 6", n=20, seed=7))
    assert samples[0] == samples[1] and all(d["file"] >= 6 for d in samples[0])
    with AuditSession(big_corpus) as s:
        assert sample_documents(s, "corpus", where="file >= 6", n=20, seed=8) != samples[0]


def test_a_sample_hashes_the_whole_row_not_its_first_column(tmp_path):
    """`hash(COLUMNS(*), seed)` expanded to one sort key per column: a view whose first column has few values
    (dedup_clusters opens with `kind`) was sampled from one value of it only."""
    run = tmp_path / "run"
    data = run / "decont" / "data"
    data.mkdir(parents=True)
    con = duckdb.connect()
    con.execute(
        "COPY (SELECT i % 3 AS kind, 'doc-' || i AS id, 'text ' || i AS text FROM range(3000) t(i)) "
        f"TO '{data / '00000.parquet'}' (FORMAT parquet)"
    )
    con.close()
    (run / "decont" / "summary.json").write_text(
        json.dumps({"docs_in": 3000, "docs_out": 3000, "dropped": {}})
    )
    with AuditSession(run) as s:
        for seed in range(3):
            assert len({d["kind"] for d in sample_documents(s, "corpus", n=20, seed=seed)}) == 3


def test_seed_is_any_64_bit_integer_and_a_bad_one_names_the_option(big_corpus):
    runner = CliRunner()
    out = runner.invoke(audit_cli(), ["audit", "sample", str(big_corpus), "-n", "2", "--seed", "-1"])
    assert out.exit_code == 0, out.output
    assert out.stdout.count("--- [") == 2
    for seed in (str(2**63), str(-(2**63) - 1)):
        out = runner.invoke(audit_cli(), ["audit", "sample", str(big_corpus), "-n", "2", "--seed", seed])
        assert out.exit_code == 2 and "--seed" in out.output and "Parser Error" not in out.output
    with AuditSession(big_corpus) as s, pytest.raises(ValueError, match="seed"):
        sample_documents(s, "corpus", seed=2**64)


DECIMALS = "SELECT sum(file) AS files, 1.5 AS lit, [1.25, 2.0] AS list, {'a': 3.5} AS struct FROM corpus"


def test_json_writes_sums_and_decimal_literals_as_numbers(big_corpus):
    out = CliRunner().invoke(audit_cli(), ["audit", "sql", str(big_corpus), DECIMALS, "-f", "json"])
    assert out.exit_code == 0, out.output
    files = sum(range(FILES)) * ROWS_PER_FILE  # sum() of integers: a HUGEINT, a DECIMAL(38,0) in Arrow
    assert json.loads(out.stdout) == [{"files": files, "lit": 1.5, "list": [1.25, 2], "struct": {"a": 3.5}}]
    out = CliRunner().invoke(audit_cli(), ["audit", "sql", str(big_corpus), DECIMALS])
    assert "[1.25, 2]" in out.stdout and "Decimal" not in out.stdout


def test_a_report_table_holds_sums_as_numbers(big_corpus):
    from curate.audit_sections import report_data

    with AuditSession(big_corpus) as s:
        section = Section("x", "X")
        ReportBuilder(s).add(section, "t", "T", DECIMALS)
    rows = json.loads(json.dumps(report_data([section]), default=str))["x"]["t"]  # as summary.json writes it
    assert rows == [
        {"files": sum(range(FILES)) * ROWS_PER_FILE, "lit": 1.5, "list": [1.25, 2], "struct": {"a": 3.5}}
    ]


def _corpus(run: Path, table: pa.Table) -> Path:
    (run / "decont" / "data").mkdir(parents=True)
    pq.write_table(table, run / "decont" / "data" / "00000.parquet")
    n = table.num_rows
    (run / "decont" / "summary.json").write_text(json.dumps({"docs_in": n, "docs_out": n, "dropped": {}}))
    return run


def test_top_domains_label_documents_without_url_and_count_www_once(tmp_path):
    urls = ["https://www.example.org/a", "https://example.org/b", None, None, "HTTPS://WWW.Other.com:8080/x"]
    domains = ["www.example.org", None, None, None, None]  # the web stage's `domain` keeps www.
    run = _corpus(tmp_path / "run", pa.table({"id": list("abcde"), "text": ["x" * 8] * 5, "url": urls,
                                              "domain": domains}))  # fmt: skip
    with AuditSession(run) as s:
        section = domains_section(ReportBuilder(s))
    by_docs = {r[0]: r[1] for r in section.table("by_docs").rows}
    assert by_docs == {"example.org": 2, "(no url)": 2, "other.com": 1}
    assert {r[0] for r in section.table("by_tokens").rows} == set(by_docs)


def _small_run(run: Path) -> Path:
    """A run with a corpus alone (decont/data): no web stage, so no math_score or language plot."""
    n_chars = [10, 100, 100, 10_000]
    return _corpus(run, pa.table({"id": list("abcd"), "text": ["x" * n for n in n_chars], "n_chars": n_chars,
                                  "url": [f"https://site{i}.org/p" for i in range(4)]}))  # fmt: skip


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_a_report_written_over_an_older_one_leaves_none_of_its_plots(base_run, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    first = write_report(base_run, out / "report.html", out / "report.md")
    assert (out / "report_plots" / "math_score_hist.png").is_file()
    second = write_report(_small_run(tmp_path / "small"), out / "report.html", out / "report.md")
    plots = {Path(f).name for f in second["files"][2:]}
    assert {"domains_by_docs.png", "lengths_hist.png"} <= plots and "math_score_hist.png" not in plots
    assert len(first["files"]) > len(second["files"])
    (folder,) = [
        p.name for p in out.iterdir() if p.name.startswith("report_plots.")
    ]  # what report_plots links
    assert (out / "report_plots").resolve() == out / folder
    assert _listing(out) == {"report.html", "report.md", "report_plots", folder} | {
        f"{folder}/{p}" for p in plots
    }
    assert "math_score_hist.png" not in (out / "report.md").read_text()


def test_a_report_that_fails_half_way_leaves_the_older_one_whole(base_run, tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_report(base_run, out / "report.html", out / "report.md")
    before = {p: (out / p).read_bytes() for p in _listing(out) if (out / p).is_file()}

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(audit_render, "_write_plot_folder", fail)
    with pytest.raises(OSError, match="No space"):
        write_report(_small_run(tmp_path / "small"), out / "report.html", out / "report.md")
    assert {p: (out / p).read_bytes() for p in _listing(out) if (out / p).is_file()} == before
    assert not [p for p in _listing(out) if p.startswith(".")]


def test_the_length_line_drops_to_zero_over_empty_bins(tmp_path):
    run = _small_run(tmp_path / "run")
    with AuditSession(run) as s:
        section = lengths_section(ReportBuilder(s))
    figure = section.figures[0]
    drawn: dict[str, tuple[list, list]] = {}

    class Axes:  # records what _draw plots
        def plot(self, xs, ys, label, **kwargs):
            drawn[label] = (xs, ys)

    audit_render._draw(Axes(), figure, {"decont": [(r[1], float(r[2])) for r in section.table("hist").rows]})
    xs, ys = drawn["decont"]
    assert [round(x, 1) for x in xs] == [round(1 + 0.2 * k, 1) for k in range(16)]  # log10 1.0 to 4.0
    assert ys == [1, 0, 0, 0, 0, 2] + [0] * 9 + [1]


def test_the_synthetic_web_rejects_are_in_the_web_stages_own_layout(base_run):
    from pipelines.web import REJECT_SCHEMA

    files = sorted((base_run / "web" / "rejects").iterdir())
    assert [f.name for f in files] == [
        "000_MathLanguageFilter-00000.parquet",
        "000_MathScoreFilter-00000.parquet",
    ]
    for f in files:
        schema = pq.read_schema(f)
        assert [(c.name, c.type) for c in schema] == [(c.name, c.type) for c in REJECT_SCHEMA]
        rows = pq.read_table(f, columns=["step", "reason"]).to_pylist()
        assert {r["step"] for r in rows} == {f.name[4:].split("-")[0]}
    with AuditSession(base_run) as s:
        reasons = s.rows(
            "SELECT step, reason, count(*) AS n FROM rejects WHERE stage = 'web' GROUP BY ALL ORDER BY 1"
        )
    assert [(r["step"], r["reason"]) for r in reasons] == [
        ("MathLanguageFilter", "language"),
        ("MathScoreFilter", "low_math_score"),
    ]


def test_rejects_of_datatrove_s_default_adapter_still_read(tmp_path):
    """A pipeline of one's own whose exclusion writer keeps datatrove's default adapter: a `metadata` struct
    holding `filter_reason`, in rejects/<Step>/ (no stage of mathmix writes this; the views still read it)."""
    run = _small_run(tmp_path / "run")
    folder = run / "decont" / "rejects" / "MyFilter"
    folder.mkdir(parents=True)
    meta = [{"url": "https://a.org/x", "filter_reason": "too_short", "math_score": 0.25}, {"url": None}]
    pq.write_table(
        pa.table({"id": ["r1", "r2"], "text": ["t", "u"], "metadata": meta}), folder / "00000.parquet"
    )
    with AuditSession(run) as s:
        rows = s.rows("SELECT id, url, reason, math_score FROM rejects ORDER BY id")
    assert rows == [
        {"id": "r1", "url": "https://a.org/x", "reason": "too_short", "math_score": 0.25},
        {"id": "r2", "url": None, "reason": "MyFilter", "math_score": None},
    ]
