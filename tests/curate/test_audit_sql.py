"""Audit views and the read-only guard, on a synthetic run folder in the documented layout."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from curate.audit import AuditRefused, AuditSession, sample_documents
from curate.audit_cli import register
from curate.audit_synth import build_synthetic_run

N_DOCS = 1500


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_synthetic_run(tmp_path_factory.mktemp("audit") / "run", N_DOCS)


@pytest.fixture(scope="module")
def session(run_dir):
    with AuditSession(run_dir) as s:
        yield s


def _parquet_rows(folder: Path) -> list[dict]:
    return [row for f in sorted(folder.rglob("*.parquet")) for row in pq.read_table(f).to_pylist()]


def test_every_view_is_there_and_queryable(session):
    expected = {"web", "dedup", "decont", "corpus", "branches", "rejects", "stats", "summaries", "shards",
                "task_stats", "task_summaries",
                "decont_contamination", "dedup_clusters", "branches_qa_throughput", "branches_refine_throughput",
                "branches_qa_decont", "branches_refine_decont"}  # fmt: skip
    assert set(session.relations) == expected
    for name in expected:
        assert session.scalar(f'SELECT count(*) FROM "{name}"') > 0, name


def test_document_views_match_the_parquet_files(session, run_dir):
    for stage in ("web", "dedup", "decont"):
        rows = _parquet_rows(run_dir / stage / "data")
        assert session.scalar(f"SELECT count(*) FROM {stage}") == len(rows)
    assert session.rows("SELECT * FROM corpus ORDER BY id") == session.rows(
        "SELECT * FROM decont ORDER BY id"
    )
    # web rejects as the web stage writes them: flat files with `reason` and `step` (pipelines/web.py)
    rejected = {r["id"]: r for r in _parquet_rows(run_dir / "web" / "rejects")}
    got = session.rows("SELECT id, url, math_score, reason, step FROM rejects WHERE stage = 'web'")
    assert len(got) == len(rejected)
    assert all({k: rejected[r["id"]][k] for k in r} == r for r in got)


def test_branches_rejects_stats_shards(session, run_dir):
    tasks = {
        r["task"]: r["n"] for r in session.rows("SELECT task, count(*) AS n FROM branches GROUP BY task")
    }
    assert tasks == {t: len(_parquet_rows(run_dir / "branches" / t / "data")) for t in ("qa", "refine")}
    rejects = Counter((r["stage"], r["reason"]) for r in session.rows("SELECT stage, reason FROM rejects"))
    web_rejects = Counter(r["reason"] for r in _parquet_rows(run_dir / "web" / "rejects"))
    assert {k[1]: v for k, v in rejects.items() if k[0] == "web"} == dict(web_rejects)
    assert rejects[("dedup", "near_duplicate")] == len(_parquet_rows(run_dir / "dedup" / "rejects"))
    for folder in ("web", "dedup", "decont", "branches", "branches/qa", "shards"):
        summary = json.loads((run_dir / folder / "summary.json").read_text())
        table = "task_stats" if "/" in folder else "stats"  # the rewriter's tasks apart from its total
        rows = session.rows(f"SELECT * FROM {table} WHERE stage = '{folder}'")
        assert {r["reason"]: r["dropped"] for r in rows if r["reason"] is not None} == summary["dropped"]
        assert {(r["docs_in"], r["docs_out"]) for r in rows} == {(summary["docs_in"], summary["docs_out"])}
    manifest = json.loads((run_dir / "shards" / "manifest.json").read_text())
    top = session.rows(
        "SELECT name, tokens FROM shards WHERE manifest = 'shards/manifest.json' ORDER BY name"
    )
    assert top == [{"name": k, "tokens": v["tokens"]} for k, v in sorted(manifest["sources"].items())]
    for name in manifest["sources"]:  # per-source manifests: one row per shard file
        files = json.loads((run_dir / "shards" / name / "manifest.json").read_text())["files"]
        rows = session.rows(
            f"SELECT prefix, tokens FROM shards WHERE manifest = 'shards/{name}/manifest.json'"
        )
        assert rows == [{"prefix": f["prefix"], "tokens": f["tokens"]} for f in files]
    report = [json.loads(line) for line in (run_dir / "decont/contamination.jsonl").read_text().splitlines()]
    got = session.rows('SELECT id, "overlaps"[1].benchmark AS b FROM decont_contamination ORDER BY id')
    assert got == sorted(
        ({"id": r["id"], "b": r["overlaps"][0]["benchmark"]} for r in report), key=lambda r: r["id"]
    )


def test_missing_stages_leave_no_view(tmp_path):
    run = build_synthetic_run(tmp_path / "full", 200)
    web_only = tmp_path / "web_only"
    (web_only / "web").mkdir(parents=True)
    for name in ("data", "summary.json"):
        (run / "web" / name).rename(web_only / "web" / name)
    for record in ("job.json", "recipe-stage.json"):  # what wrote the folder: not a table of the audit
        (web_only / "web" / record).write_text('{"inputs": [], "settings": {}}')
    with AuditSession(web_only) as s:
        assert set(s.relations) == {"web", "corpus", "stats", "summaries"}
        assert s.scalar("SELECT count(*) FROM corpus") == s.scalar("SELECT count(*) FROM web")
        with pytest.raises(duckdb.CatalogException):
            s.query("SELECT * FROM decont")
    (tmp_path / "empty").mkdir()
    with AuditSession(tmp_path / "empty") as s:
        assert s.relations == {}


def test_connection_is_locked(session):
    assert session.scalar("SELECT current_setting('enable_external_access')") is False
    assert session.scalar("SELECT current_setting('lock_configuration')") is True


REFUSED = [
    "COPY (SELECT 1) TO '{run}/out.csv'",
    "COPY web TO '{outside}/out.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '{run}/export'",
    "ATTACH '{run}/db.duckdb' AS db",
    "INSTALL httpfs",
    "LOAD httpfs",
    "CREATE TABLE t AS SELECT 1 AS a",
    "CREATE VIEW v AS SELECT 1 AS a",
    "CREATE MACRO m(x) AS x + 1",
    "INSERT INTO stats (stage) VALUES ('x')",
    "UPDATE stats SET dropped = 0",
    "DELETE FROM stats",
    "DROP VIEW web",
    "ALTER VIEW web RENAME TO w",
    "SET threads = 1",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "SET VARIABLE x = 1",
    "PRAGMA threads = 1",
    "PRAGMA enable_profiling",
    "CALL pragma_version()",
    "CHECKPOINT",
    "VACUUM",
    "BEGIN TRANSACTION",
    "USE memory",
    "DETACH memory",
    "PREPARE p AS SELECT 1",
    "SELECT 1; COPY (SELECT 1) TO '{run}/two.csv'",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{run}/explained.csv'",
    "EXPLAIN /* hidden */ ANALYZE COPY (SELECT 1) TO '{run}/explained.csv'",
    "EXPLAIN (FORMAT json) ANALYZE COPY (SELECT 1) TO '{run}/explained.csv'",
    "EXPLAIN ANALYZE WITH x AS (DELETE FROM stats RETURNING *) SELECT * FROM x",
    "WITH x AS (DELETE FROM stats RETURNING *) SELECT * FROM x",
    "SELECT * FROM query('SELECT 1')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM read_parquet('{outside}/secret.parquet')",
    "SELECT * FROM read_parquet('{run}/../secret.parquet')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM 'https://example.com/x.parquet'",
    "PIVOT web ON lang",  # a dynamic PIVOT runs several statements (MULTI)
]


def _snapshot(*folders: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for f in folders for p in f.rglob("*")}


@pytest.mark.parametrize("template", REFUSED)
def test_refused_statements_write_nothing(session, run_dir, tmp_path, template):
    outside = tmp_path / "outside"
    outside.mkdir()
    duckdb.sql(f"COPY (SELECT 42 AS secret) TO '{outside}/secret.parquet'")
    (run_dir.parent / "secret.parquet").write_bytes((outside / "secret.parquet").read_bytes())
    before = _snapshot(run_dir, outside)
    with pytest.raises(AuditRefused):
        session.query(template.format(run=run_dir, outside=outside))
    assert _snapshot(run_dir, outside) == before
    assert session.scalar("SELECT count(*) FROM stats") > 0  # nothing was dropped or emptied
    assert session.scalar("SELECT current_setting('enable_external_access')") is False


ALLOWED = [
    "SELECT count(*) FROM corpus",
    "WITH s AS (SELECT stage FROM stats) SELECT count(*) FROM s",
    "FROM web SELECT id LIMIT 1",
    "DESCRIBE web",
    "SUMMARIZE SELECT math_score FROM web",
    "SHOW TABLES",
    "EXPLAIN SELECT * FROM web",
    "EXPLAIN ANALYZE SELECT count(*) FROM web",
    "PRAGMA table_info('web')",
    "PIVOT (SELECT lang FROM web) ON lang IN ('en') USING count(*)",
    "SELECT count(*) FROM read_parquet('{run}/web/data/*.parquet')",
]


@pytest.mark.parametrize("template", ALLOWED)
def test_read_only_statements_run(session, run_dir, template):
    assert session.query(template.format(run=run_dir)).num_rows >= 1


def test_sample_is_reproducible_and_filtered(session):
    first = sample_documents(session, "corpus", where="math_score > 0.9", n=5, seed=3)
    assert len(first) == 5 and all(d["math_score"] > 0.9 for d in first)
    assert first == sample_documents(session, "corpus", where="math_score > 0.9", n=5, seed=3)
    with pytest.raises(AuditRefused):
        sample_documents(session, "corpus", where="1=1) TO '/tmp/x.csv' --", n=5)
    with pytest.raises(AuditRefused, match="no view"):
        sample_documents(session, "nope")


def _cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_cli_sql_formats_and_refusal(run_dir, tmp_path):
    runner = CliRunner()
    query = "SELECT lang, count(*) AS n FROM web GROUP BY lang ORDER BY lang"
    expected = Counter(r["lang"] for r in _parquet_rows(run_dir / "web" / "data"))
    out = runner.invoke(_cli(), ["audit", "sql", str(run_dir), query, "--format", "json"])
    assert out.exit_code == 0, out.output
    assert {r["lang"]: r["n"] for r in json.loads(out.stdout)} == dict(expected)
    parquet = tmp_path / "langs.parquet"
    out = runner.invoke(_cli(), ["audit", "sql", str(run_dir), query, "-f", "parquet", "-o", str(parquet)])
    assert out.exit_code == 0 and pq.read_table(parquet).to_pylist() == json.loads(
        runner.invoke(_cli(), ["audit", "sql", str(run_dir), query, "-f", "json"]).stdout
    )
    csv = tmp_path / "langs.csv"
    out = runner.invoke(_cli(), ["audit", "sql", str(run_dir), query, "-f", "csv", "-o", str(csv)])
    assert out.exit_code == 0 and csv.read_text().splitlines()[0] == '"lang","n"'
    target = tmp_path / "copied.csv"
    out = runner.invoke(_cli(), ["audit", "sql", str(run_dir), f"COPY web TO '{target}'"])
    assert out.exit_code == 2 and "refused" in out.output and not target.exists()
    out = runner.invoke(_cli(), ["audit", "schema", str(run_dir), "--format", "json"])
    assert out.exit_code == 0 and "math_score" in json.loads(out.stdout)["web"]["columns"]
    out = runner.invoke(_cli(), ["audit", "sample", str(run_dir), "--where", "lang = 'en'", "-n", "3"])
    assert out.exit_code == 0 and out.stdout.count("--- [") == 3


def test_empty_reports_of_a_clean_run_are_views_with_zero_rows(tmp_path):
    run = build_synthetic_run(tmp_path / "clean", 200)
    (run / "decont" / "contamination.jsonl").write_text("")  # a clean decont run: no hit
    (run / "dedup" / "clusters.jsonl").write_text("")  # no duplicate
    with AuditSession(run) as s:
        assert s.scalar("SELECT count(*) FROM decont_contamination") == 0
        assert s.scalar("SELECT count(*) FROM dedup_clusters") == 0
        assert s.columns("decont_contamination") == ["id", "mode", "overlaps"]
        # the report's query over it runs and gives no row
        assert s.rows('SELECT unnest("overlaps").benchmark AS b FROM decont_contamination') == []


def test_output_inside_the_run_folder_is_refused(run_dir, tmp_path):
    runner = CliRunner()
    link = tmp_path / "link"
    link.symlink_to(run_dir)  # the run folder reached through a symlink is still the run folder
    summary = (run_dir / "web" / "summary.json").read_text()
    before = _snapshot(run_dir)
    for fmt, target in [
        ("parquet", run_dir / "web" / "data" / "evil.parquet"),  # the next stage would read the copy
        ("csv", run_dir / "web" / "summary.json"),
        ("csv", link / "web" / "summary.json"),
        ("json", run_dir / "audit" / "x.json"),  # only the report may write RUN/audit/
    ]:
        out = runner.invoke(
            _cli(), ["audit", "sql", str(run_dir), "SELECT * FROM web", "-f", fmt, "-o", str(target)]
        )
        assert out.exit_code == 2 and "inside the run folder" in out.output, out.output
        assert len(out.output.strip().splitlines()) == 1
    assert _snapshot(run_dir) == before and (run_dir / "web" / "summary.json").read_text() == summary
    for target in (run_dir / "web" / "r.html", link / "report.md", link / "audit"):
        out = runner.invoke(_cli(), ["audit", "report", str(run_dir), "-o", str(target)])
        assert out.exit_code == 2 and "only" in out.output and "audit/ may hold it" in out.output, out.output
    assert _snapshot(run_dir) == before
    out = runner.invoke(_cli(), ["audit", "report", str(run_dir), "-o", str(run_dir / "audit" / "mine.md")])
    assert out.exit_code == 0 and (run_dir / "audit" / "mine.html").is_file(), out.output


def test_only_the_sessions_own_spill_folder_is_added_to_the_readable_ones(run_dir, tmp_path, monkeypatch):
    # DuckDB's default temp directory is <cwd>/.tmp/, which it adds to allowed_directories
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "secret.txt").write_text("secret")
    monkeypatch.chdir(tmp_path)
    with AuditSession(run_dir) as s:
        allowed = s.scalar("SELECT current_setting('allowed_directories')")
        assert sorted(allowed) == sorted([str(run_dir.resolve()) + "/", str(s.spill_dir) + "/"])
        assert s.spill_dir.is_dir() and not list(s.spill_dir.iterdir())  # private and fresh
        with pytest.raises(AuditRefused):
            s.query(f"SELECT content FROM read_text('{tmp_path}/.tmp/secret.txt')")


def test_a_query_larger_than_the_memory_limit_spills_and_the_spill_folder_goes(run_dir, tmp_path):
    # 2M distinct groups: out of memory at 40MB without a temp directory (measured), fine when it spills
    big = "SELECT count(*) FROM (SELECT m, count(*) FROM (SELECT md5(range::VARCHAR) AS m FROM range(2000000)) GROUP BY m)"
    with AuditSession(run_dir, memory_limit="40MB") as s:
        assert s.scalar(big) == 2_000_000
        spill = s.spill_dir
    assert not spill.exists()
    with pytest.raises(ValueError, match="DuckDB refused the settings"):
        AuditSession(run_dir, memory_limit="lots")
    out = CliRunner().invoke(
        _cli(), ["audit", "sql", str(run_dir), big, "--memory-limit", "40MB", "-f", "json"]
    )
    assert out.exit_code == 0 and json.loads(out.stdout) == [{"count_star()": 2_000_000}], out.output
    for command in (
        ["sql", str(run_dir), "SELECT 1"],
        ["report", str(run_dir), "-o", str(tmp_path / "r.html")],
    ):
        out = CliRunner().invoke(_cli(), ["audit", *command, "--memory-limit", "lots"])
        assert out.exit_code == 2 and "--memory-limit lots: DuckDB refused" in out.output, out.output


def test_install_is_named_in_its_refusal(session):
    with pytest.raises(AuditRefused, match="^INSTALL statements are refused"):
        session.query("INSTALL httpfs")
    with pytest.raises(AuditRefused, match="^LOAD statements are refused"):
        session.query("/* x */ LOAD httpfs")


def test_csv_holds_nested_values_as_json_text(run_dir):
    import csv
    import io

    runner = CliRunner()
    query = "SELECT * FROM dedup_clusters ORDER BY cluster_id"
    out = runner.invoke(_cli(), ["audit", "sql", str(run_dir), query, "-f", "csv"])
    assert out.exit_code == 0, out.output
    clusters = [json.loads(line) for line in (run_dir / "dedup" / "clusters.jsonl").read_text().splitlines()]
    got = [{"cluster_id": int(r["cluster_id"]), "removed": json.loads(r["removed"])}
           for r in csv.DictReader(io.StringIO(out.stdout))]  # fmt: skip
    assert got == sorted(({"cluster_id": c["cluster_id"], "removed": c["removed"]} for c in clusters),
                         key=lambda r: r["cluster_id"])  # fmt: skip
    query = 'SELECT id, "overlaps" FROM decont_contamination ORDER BY id'
    out = runner.invoke(_cli(), ["audit", "sql", str(run_dir), query, "-f", "csv"])
    assert out.exit_code == 0, out.output
    report = {
        r["id"]: r["overlaps"]
        for r in map(json.loads, (run_dir / "decont" / "contamination.jsonl").read_text().splitlines())
    }
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert len(rows) == len(report)
    for row in rows:
        overlaps = json.loads(row["overlaps"])
        assert [{k: o[k] for k in report[row["id"]][0]} for o in overlaps] == report[row["id"]]


def test_json_csv_parquet_of_odd_types(run_dir, tmp_path):
    runner = CliRunner()
    query = "SELECT 'nan'::DOUBLE AS f, 'infinity'::DOUBLE AS g, 'ab'::BLOB AS b, [1.5, 'nan'::DOUBLE] AS l, INTERVAL 90 MINUTE AS i"

    def strict(text: str):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))

    out = runner.invoke(_cli(), ["audit", "sql", str(run_dir), query, "-f", "json"])
    assert out.exit_code == 0, out.output
    assert strict(out.stdout) == [{"f": None, "g": None, "b": "YWI=", "l": [1.5, None], "i": "P0M0DT5400S"}]
    out = runner.invoke(_cli(), ["audit", "sql", str(run_dir), query, "-f", "csv"])
    assert out.exit_code == 0, out.output
    import csv

    assert list(csv.reader(out.stdout.splitlines()))[1][2:] == ["YWI=", "[1.5, null]", "P0M0DT5400S"]
    target = tmp_path / "i.parquet"
    out = runner.invoke(_cli(), ["audit", "sql", str(run_dir), query, "-f", "parquet", "-o", str(target)])
    assert out.exit_code == 2 and "'i' is an INTERVAL" in out.output and not target.exists()
    assert len(out.output.strip().splitlines()) == 1


def test_a_damaged_parquet_file_is_left_out_and_named_not_a_traceback(run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    good = sorted((run / "web" / "data").glob("*.parquet"))[0]
    (run / "web" / "data" / "zz.parquet").write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    with AuditSession(run) as s:
        assert len(s.unreadable) == 1 and "zz.parquet" in s.unreadable[0]
        with AuditSession(run_dir) as whole:
            assert s.scalar("SELECT count(*) FROM web") == whole.scalar("SELECT count(*) FROM web")
    out = CliRunner().invoke(
        _cli(), ["audit", "sql", str(run), "SELECT count(*) AS n FROM web", "-f", "json"]
    )
    assert out.exit_code == 0 and "unreadable: " in out.stderr and "zz.parquet" in out.stderr, out.output
    out = CliRunner().invoke(_cli(), ["audit", "report", str(run), "-o", str(tmp_path / "r.html")])
    assert out.exit_code == 0 and "zz.parquet" in out.stderr, out.output
    assert "damaged file(s) left out" in (tmp_path / "r.md").read_text()


def test_json_the_views_cannot_hold_is_kept_as_text_or_named_not_a_traceback(run_dir, tmp_path):
    """A summary with Infinity or a count past int64, a report holding lists of mixed items or a number past int64,
    a half-written report: each crashed every audit command (or was blamed on --memory-limit)."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("branches", "shards"))
    summary = json.loads((run / "decont" / "summary.json").read_text())
    summary |= {"docs_out": 1e30, "dropped": {"contaminated": float("inf")}}
    (run / "decont" / "summary.json").write_text(json.dumps(summary))  # Python writes Infinity
    (run / "dedup" / "odd.json").write_text('[[1, "a"], [2]]')
    (run / "dedup" / "big.json").write_text('{"n": 99999999999999999999999, "m": 1}')
    (run / "dedup" / "half.json").write_text('{"a": 1, "b')
    with AuditSession(run) as s:
        assert [line.split(": ")[0] for line in s.unreadable] == [str(run / "dedup" / "half.json")]
        assert s.rows("SELECT * FROM dedup_big") == [{"n": "99999999999999999999999", "m": 1}]
        assert s.rows("SELECT value FROM dedup_odd") == [{"value": '[1, "a"]'}, {"value": "[2]"}]
        assert s.rows("SELECT docs_out, dropped_total FROM summaries WHERE stage = 'decont'") == [
            {"docs_out": None, "dropped_total": None}
        ]
    out = CliRunner().invoke(_cli(), ["audit", "sql", str(run), "SELECT m FROM dedup_big", "-f", "csv"])
    assert out.exit_code == 0 and out.stdout.split() == ['"m"', "1"], out.output
    assert f"unreadable: {run / 'dedup' / 'half.json'}: " in out.stderr and "memory-limit" not in out.output
    out = CliRunner().invoke(_cli(), ["audit", "report", str(run), "-o", str(tmp_path / "r.html")])
    assert out.exit_code == 0, out.output
    assert "decont: summary.json has no numeric docs_in/docs_out/dropped (unchecked)" in out.stderr


def test_jsonl_lines_that_do_not_parse_are_left_out_and_counted(run_dir, tmp_path):
    """A stage killed while writing its JSON-lines report leaves a half line: it was a silent row of NULLs
    (a cluster of kind NULL and size NULL in the report)."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("branches", "shards"))
    clusters = run / "dedup" / "clusters.jsonl"
    n_clusters = len(clusters.read_text().splitlines())
    good = {"kind": "exact", "cluster_id": 10**6, "size": 2, "kept": "a", "removed": ["b"]}
    with clusters.open("a") as f:
        f.write(json.dumps(good) + "\nnot json\n" + '{"kind": "minhash", "cluster_id": 7, "si')
    (run / "decont" / "contamination.jsonl").write_text('{"id": "doc-1", "mo')
    with AuditSession(run) as s:
        assert sorted(s.unreadable) == [
            f"{run / 'decont' / 'contamination.jsonl'}: 1 of 1 line(s) do not parse (view decont_contamination)",
            f"{clusters}: 2 of {n_clusters + 3} line(s) do not parse (view dedup_clusters)",
        ]
        assert s.scalar("SELECT count(*) FROM dedup_clusters") == n_clusters + 1
        assert s.scalar("SELECT count(*) FROM dedup_clusters WHERE kind IS NULL OR size IS NULL") == 0
        assert s.rows('SELECT count(*) AS n, count("overlaps") AS o FROM decont_contamination') == [
            {"n": 0, "o": 0}
        ]
    out = CliRunner().invoke(_cli(), ["audit", "report", str(run), "-o", str(tmp_path / "r.html")])
    assert out.exit_code == 0 and "2 of" in out.stderr and "clusters.jsonl" in out.stderr, out.output


def test_a_damaged_page_behind_a_good_footer_is_named_in_the_error(run_dir, tmp_path):
    """The footer reads (so the file is in its view) but a page does not: DuckDB said only `Variable-length int
    over 10 bytes.`, naming no file, in `audit sql` and in the report's sections."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("branches", "shards"))
    data = bytearray(sorted((run / "dedup" / "data").glob("*.parquet"))[0].read_bytes())
    data[4:2000] = b"\xab" * 1996  # the first pages; the footer at the end is intact
    damaged = run / "dedup" / "data" / "zz.parquet"
    damaged.write_bytes(bytes(data))
    with AuditSession(run) as s:
        assert s.unreadable == []  # the footer reads
        with pytest.raises(duckdb.Error, match=f"damaged Parquet file: {damaged}"):
            s.query("SELECT sum(length(text)) FROM dedup")
    query = "SELECT sum(length(text)) FROM dedup"
    out = CliRunner().invoke(_cli(), ["audit", "sql", str(run), query, "-f", "csv"])
    assert out.exit_code == 2 and str(damaged) in out.output and "Traceback" not in out.output, out.output
    out = CliRunner().invoke(_cli(), ["audit", "report", str(run), "-o", str(tmp_path / "r.html")])
    assert out.exit_code == 0 and "could not be computed: " in out.stderr and str(damaged) in out.stderr


def test_an_ordinary_sql_error_reads_no_parquet_file_whole(run_dir, monkeypatch):
    """Any InvalidInput/IO/plain DuckDB error naming no .parquet file (`SELECT error('typo')`, a missing
    read_json path, malformed JSON text) read every row group of every Parquet file of the run to look for a
    damaged page; only DuckDB's messages for a damaged page do now."""
    import curate.audit

    scanned: list[list[Path]] = []
    monkeypatch.setattr(curate.audit, "damaged_parquet", lambda files: scanned.append(files) or [])
    with AuditSession(run_dir) as s:
        for sql in (
            "SELECT error('typo')",
            "SELECT json_extract('{', '$.a') FROM web LIMIT 1",
            f"SELECT * FROM read_json('{run_dir / 'missing.json'}')",
            "SELECT 'a'::INT FROM dedup",
        ):
            with pytest.raises(duckdb.Error):
                s.query(sql)
            with pytest.raises(duckdb.Error):
                s.stream(sql).read_all()
    assert scanned == []


def test_a_damaged_page_error_reads_only_the_files_of_the_views_the_query_names(run_dir, monkeypatch):
    import curate.audit

    scanned: list[Path] = []
    monkeypatch.setattr(curate.audit, "damaged_parquet", lambda files: scanned.extend(files) or [])
    with AuditSession(run_dir) as s:
        error = duckdb.Error("Variable-length int over 10 bytes.")
        assert s._name_damaged(error, "SELECT count(*) FROM Dedup") is error  # no damaged file found
        assert scanned == s.view_files["dedup"] and scanned
        s._name_damaged(error, "SELECT count(*) FROM dedup")
        assert scanned == s.view_files["dedup"]  # each file read at most once per session
        typo = duckdb.InvalidInputException("Invalid Input Error: typo")
        assert s._name_damaged(typo, "FROM web") is typo
        assert scanned == s.view_files["dedup"]


def test_a_page_pyarrow_does_not_implement_is_named_not_a_traceback(run_dir, monkeypatch):
    """pyarrow's ArrowNotImplementedError is a NotImplementedError, neither an OSError nor a ValueError."""
    import pyarrow as pa

    from curate.audit_views import damaged_parquet

    def not_implemented(path):
        raise pa.lib.ArrowNotImplementedError("Unknown encoding type.")

    monkeypatch.setattr(pq, "ParquetFile", not_implemented)
    files = sorted((run_dir / "dedup" / "data").glob("*.parquet"))[:1]
    assert damaged_parquet(files) == [f"{files[0]}: Unknown encoding type."]


def _bytes_read() -> int:
    """Bytes this process has read (DuckDB's reads included), from Linux's /proc/self/io."""
    return next(int(line.split()[1]) for line in open("/proc/self/io") if line.startswith("rchar:"))


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/self/io")
def test_a_large_jsonl_report_is_not_read_whole_to_find_a_torn_line(tmp_path):
    """Every session read every JSON-lines report whole (read_ndjson_objects) to find lines that do not parse:
    seconds per multi-GB clusters.jsonl on each `audit sql`/`schema`. A killed stage leaves its torn line at the
    end, and only the end is read now, besides the first 32 MiB that DuckDB's schema sampling reads each time
    the view is bound (twice)."""
    run = tmp_path / "run"
    (run / "dedup").mkdir(parents=True)
    (run / "dedup" / "summary.json").write_text(json.dumps({"docs_in": 1, "docs_out": 1, "dropped": {}}))
    line = json.dumps(
        {"kind": "exact", "cluster_id": 1, "size": 2, "kept": "a" * 40, "removed": ["b" * 40] * 3}
    )
    clusters = run / "dedup" / "clusters.jsonl"
    with clusters.open("w") as f:
        f.write("not json\n")  # not at the end: not looked for
        f.write((line + "\n") * (96 * 2**20 // (len(line) + 1)))
        f.write('{"kind": "minhash", "cluster_id": 7, "si')
    size = clusters.stat().st_size
    AuditSession(run).close()  # imports and first-use reads, not counted below
    before = _bytes_read()
    with AuditSession(run) as s:
        read = _bytes_read() - before
        unreadable = s.unreadable
    assert read < size, (read, size)  # the old check alone read it all, on top of DuckDB's sampling
    [why] = unreadable  # the line at the start is not looked for
    assert why.startswith(f"{clusters}: 1 of the last ") and why.endswith(
        " line(s) do not parse (view dedup_clusters)"
    )


def test_the_end_of_a_jsonl_file_is_read_back_to_its_last_complete_lines(tmp_path):
    from curate.audit_views import TAIL_BYTES, tail_lines

    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"a": 1}\n\n{"a": 2}\r\n')
    assert tail_lines(path) == ([b'{"a": 1}', b'{"a": 2}\r'], True)
    long = b'{"a": "' + b"x" * 3 * TAIL_BYTES  # a torn last line longer than the first blocks read
    path.write_bytes(b'{"a": 0}\n' * 10 * TAIL_BYTES + b'{"a": 1}\n' * 8 + long)
    lines, whole = tail_lines(path, lines=8)
    assert not whole and lines[-9:] == [b'{"a": 1}'] * 8 + [long] and len(lines) < 100_000


def test_a_column_name_holding_a_double_quote_is_quoted_in_the_views(tmp_path):
    """A JSON-lines key or a Parquet column `say "hi"` went into the views' SQL unquoted: the statement broke
    outside any handler, and every audit command of the run ended in a traceback."""
    import pyarrow as pa

    run = tmp_path / "run"
    (run / "web" / "data").mkdir(parents=True)
    table = pa.table({"id": ["d1"], 'say "hi"': ["x"], "metadata": [{'q"f': 1}]})
    pq.write_table(table, run / "web" / "data" / "a.parquet")
    (run / "dedup").mkdir()
    torn = '{"kind": "minhash", "si'  # a torn last line: the view is rebuilt with a WHERE over every column
    (run / "dedup" / "clusters.jsonl").write_text(json.dumps({"kind": "exact", 'a"b': 1}) + "\n" + torn)
    with AuditSession(run) as s:
        assert s.rows("SELECT * FROM web") == [{"id": "d1", 'say "hi"': "x", 'q"f': 1}]
        assert s.rows('SELECT kind, "a""b" FROM dedup_clusters') == [{"kind": "exact", 'a"b': 1}]
        assert s.unreadable == [
            f"{run / 'dedup' / 'clusters.jsonl'}: 1 of 2 line(s) do not parse (view dedup_clusters)"
        ]
    out = CliRunner().invoke(_cli(), ["audit", "schema", str(run)])
    assert out.exit_code == 0 and 'a"b' in out.stdout and 'say "hi"' in out.stdout, out.output
