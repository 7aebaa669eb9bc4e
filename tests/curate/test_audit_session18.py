"""Audit findings of session 18's review: a finished stage whose data/ reads nothing is said, not replaced by the
stage before it as `corpus`; symlinked stage folders are queried; the report only replaces files it wrote; a
device `-o` gets the HTML only; RUN/audit/'s record files are refused; out of memory is one line; -o's folder is
checked before the queries; sample and schema end quietly on a broken pipe."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from curate.audit import AuditSession
from curate.audit_sections import write_report
from tests.curate.audit_runs import audit_cli

runner = CliRunner()


def _cli(*args: str):
    return runner.invoke(audit_cli(), ["audit", *map(str, args)])


# --- 1: a finished stage with no readable data -------------------------------------------------------------


def test_a_finished_stage_without_data_gives_no_corpus_and_is_named(run, tmp_path):
    docs_out = json.loads((run / "decont/summary.json").read_text())["docs_out"]
    for f in (run / "decont/data").glob("*.parquet"):
        f.unlink()
    with AuditSession(run) as s:
        assert "corpus" not in s.relations  # not silently dedup
        assert "dedup" in s.relations
        lines = "\n".join(s.no_data)
    assert (
        f"decont: its data/ holds no readable Parquet file (0 documents read) but its summary.json says docs_out {docs_out}"
        in lines
    )
    assert "no view corpus" in lines and "dedup" in lines
    result = _cli("sql", run, "SELECT count(*) FROM dedup")
    assert result.exit_code == 0 and "decont: its data/ holds no readable" in result.output
    out = write_report(run, tmp_path / "r.html", None)
    warnings = "\n".join(out["warnings"])
    assert f"says docs_out {docs_out}" in warnings and "no view corpus" in warnings
    assert out["sections"]["domains"]["notes"] == ["not available: no corpus view"]


def test_a_finished_stage_with_only_damaged_data_is_named_too(run):
    for f in (run / "decont/data").glob("*.parquet"):
        f.write_bytes(f.read_bytes()[:100])
    with AuditSession(run) as s:
        assert "corpus" not in s.relations
        assert any(line.startswith("decont: its data/ holds no readable") for line in s.no_data)


def test_a_middle_stage_without_data_is_a_row_of_the_tokens_table_not_skipped(run, tmp_path):
    for f in (run / "dedup/data").glob("*.parquet"):
        f.unlink()
    out = write_report(run, tmp_path / "r.html", None)
    rows = {r["stage"]: r for r in out["sections"]["funnel"]["tokens"]}
    assert rows["dedup"]["docs_out"] is None and rows["dedup"]["tokens_out"] is None
    assert rows["decont"]["tokens_in"] is None  # not web's tokens_out
    assert out["relations"]["corpus"].startswith("= decont")
    assert any("dedup: its data/ holds no readable" in w for w in out["warnings"])


def test_an_unfinished_stage_without_data_keeps_the_old_fallback(run):
    for f in (run / "decont/data").glob("*.parquet"):
        f.unlink()
    (run / "decont/summary.json").unlink()
    with AuditSession(run) as s:
        assert s.relations["corpus"].startswith("= dedup")
        assert s.no_data == []


# --- 3: the report replaces only what it wrote ---------------------------------------------------------------


def _report(run, out):
    return _cli("report", run, "-o", out)


def test_a_real_plots_folder_the_report_did_not_write_is_refused_and_kept(run, tmp_path):
    mine = tmp_path / "x_plots"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    result = _report(run, tmp_path / "x.html")
    assert result.exit_code == 2, result.output
    assert "x_plots" in result.output and "refused" in result.output
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert not (tmp_path / "x.html").exists()  # refused before anything was written


def test_an_md_the_report_did_not_write_is_refused_and_kept(run, tmp_path):
    (tmp_path / "x.md").write_text("# my notes\nkeep me\n")
    result = _report(run, tmp_path / "x.html")
    assert result.exit_code == 2 and "x.md" in result.output, result.output
    assert (tmp_path / "x.md").read_text() == "# my notes\nkeep me\n"
    folder = tmp_path / "f"
    (folder / "report_plots").mkdir(parents=True)
    (folder / "report_plots" / "a.txt").write_text("mine")
    result = _report(run, f"{folder}/")
    assert result.exit_code == 2 and "report_plots" in result.output, result.output
    assert (folder / "report_plots" / "a.txt").read_text() == "mine"


def test_the_reports_own_outputs_and_an_earlier_versions_plots_folder_are_replaced(run, tmp_path):
    out = tmp_path / "x.html"
    assert _report(run, out).exit_code == 0
    assert (tmp_path / "x_plots").is_symlink()
    assert _report(run, out).exit_code == 0  # a rerun replaces its own .md and link
    # an earlier version's real folder of the report's PNGs (and its Markdown) is replaced too
    pngs = {p.name: p.read_bytes() for p in (tmp_path / "x_plots").iterdir()}
    (tmp_path / "x_plots").unlink()
    (tmp_path / "x_plots").mkdir()
    for name, png in pngs.items():
        (tmp_path / "x_plots" / name).write_bytes(png)
    result = _report(run, out)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "x_plots").is_symlink()


# --- 5: RUN/audit/'s own record files ------------------------------------------------------------------------


def test_the_audit_stages_record_files_are_refused_as_outputs(run):
    (run / "audit").mkdir()
    for name in ("summary.json", "recipe-stage.json", "upstream.json", "job.json"):
        record = run / "audit" / name
        record.write_text("{}")
        result = _report(run, record)
        assert result.exit_code == 2 and "refused" in result.output, result.output
        assert record.read_text() == "{}"
    result = _cli("sql", run, "SELECT 1", "-o", run / "audit" / "summary.json")
    assert result.exit_code == 2 and (run / "audit" / "summary.json").read_text() == "{}"


# --- 4: a device -o gets the HTML only ------------------------------------------------------------------------


def test_a_path_under_dev_or_proc_gets_the_html_only(tmp_path, monkeypatch):
    from curate import audit_cli

    regular = tmp_path / "file.html"
    regular.write_text("")
    link = tmp_path / "dev_stdout"
    link.symlink_to(regular)
    real = Path
    # /dev/stdout redirected to a regular file: it resolves to one, and still names a device
    for given in ("/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"):
        html, md = audit_cli.report_paths(given, True)
        assert str(html) == given and md is None
    assert real  # (Path kept for the reader)
    html, md = audit_cli.report_paths(str(regular), True)
    assert md == regular.with_suffix(".md")


# --- 8: -o's folder is checked before the queries ------------------------------------------------------------


def test_an_output_folder_that_cannot_be_made_is_refused_before_the_queries(run, tmp_path, monkeypatch):
    from curate import audit_sections

    def no_queries(*args, **kwargs):
        raise AssertionError("the queries ran")

    monkeypatch.setattr(audit_sections, "AuditSession", no_queries)
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = _report(run, afile / "x.html")
    assert result.exit_code == 2 and str(afile) in result.output and "not a folder" in result.output
    result = _report(run, "/proc/x.html")
    assert result.exit_code == 2 and "/proc/x.html" in result.output and ".tmp" not in result.output


# --- 6/7: out of memory -----------------------------------------------------------------------------------------


def test_out_of_memory_is_one_line_naming_memory_limit(run):
    for limit in ("500KB", "16MB"):
        result = _cli("sql", run, "SELECT 1", "--memory-limit", limit)
        assert result.exit_code in (0, 2), result.output
        assert "Traceback" not in result.output and "damaged" not in result.output
        assert "unreadable" not in result.output, result.output
        if result.exit_code:
            assert f"--memory-limit {limit}" in result.output and result.output.count("\n") <= 2, (
                result.output
            )
        else:  # the relations that did not fit are named apart from damaged files, with the option to raise
            assert f"ran out of memory making them (raise --memory-limit {limit})" in result.output


def test_a_report_whose_views_do_not_fit_is_one_line_naming_memory_limit(run, tmp_path):
    result = _cli("report", run, "-o", tmp_path / "r.html", "--memory-limit", "1KB")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith("error: --memory-limit 1KB: ") and result.output.count("\n") == 1


# --- 9: broken pipe ------------------------------------------------------------------------------------------------


def test_sample_and_schema_end_quietly_on_a_broken_pipe(run, monkeypatch):
    import typer

    def broken(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(typer, "echo", broken)
    for args in (("sample", run, "-n", "3"), ("schema", run)):
        result = _cli(*args)
        assert result.exit_code == 0, (args, result.output, result.exception)


# --- 2: symlinked stage folders ----------------------------------------------------------------------------------


def test_a_symlinked_stage_folder_and_data_folder_are_queried_and_the_rest_still_refused(run, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.move(run / "web", elsewhere / "web")
    (run / "web").symlink_to(elsewhere / "web")
    shutil.move(run / "dedup" / "data", elsewhere / "dedup_data")
    (run / "dedup" / "data").symlink_to(elsewhere / "dedup_data")
    (tmp_path / "secret.csv").write_text("a\n1\n")
    with AuditSession(run) as s:
        assert s.scalar("SELECT count(*) FROM web") > 0
        assert s.scalar("SELECT count(*) FROM dedup") > 0
        assert s.scalar("SELECT count(*) FROM rejects WHERE stage = 'web'") > 0
    result = _cli("sql", run, f"SELECT * FROM read_csv('{tmp_path / 'secret.csv'}')")
    assert result.exit_code == 2 and "refused" in result.output
    result = _cli("sample", run, "--view", "web", "-n", "2")
    assert result.exit_code == 0, result.output
    # ... and, being the run's, not written into
    result = _cli("sql", run, "SELECT 1 AS a", "-o", elsewhere / "web" / "data" / "x.parquet")
    assert result.exit_code == 2 and "refused" in result.output, result.output
    assert not (elsewhere / "web" / "data" / "x.parquet").exists()


def test_an_md_named_by_o_is_written_as_asked(run, tmp_path):
    (tmp_path / "x.md").write_text("# my draft\n")
    result = _report(run, tmp_path / "x.md")  # the user named it: replaced, as -o X.html replaces X.html
    assert result.exit_code == 0, result.output
    assert (tmp_path / "x.md").read_text().startswith("# mathmix audit: ")


def test_a_regular_file_under_dev_shm_is_no_device():
    from curate import audit_cli

    shm = Path("/dev/shm")
    if not shm.is_dir():
        return
    path = shm / "mathmix-audit-session18-test.html"
    path.write_text("")
    try:
        html, md = audit_cli.report_paths(str(path), True)
        assert md == path.with_suffix(".md")
    finally:
        path.unlink()
