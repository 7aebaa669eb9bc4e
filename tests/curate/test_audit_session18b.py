"""Audit findings of session 18's second review: a user's own `<stem>_plots/` of PNGs and a `FOLDER.md/report.md`
are kept, the HTML twin of `-o X.md` is replaced only where it is the report's; only the files the views read
are readable outside the run (never /, nor a folder holding the run); file-level and deeper links are followed;
a stage that kept 0 documents and wrote no Parquet file is an empty view, not a contradiction."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from typer.testing import CliRunner

from curate.audit import AuditSession
from curate.audit_render import REPORT_PNGS
from curate.audit_sections import write_report
from tests.curate.audit_runs import audit_cli

runner = CliRunner()


def _cli(*args: str):
    return runner.invoke(audit_cli(), ["audit", *map(str, args)])


def _png(run: Path, tmp_path: Path) -> bytes:
    out = write_report(run, tmp_path / "first" / "r.html", tmp_path / "first" / "r.md")
    plots = tmp_path / "first" / "r_plots"
    assert out["files"]
    return next(plots.iterdir()).read_bytes()


# --- 1: a user's own PNGs in <stem>_plots/ -----------------------------------------------------------------------


def test_a_plots_folder_of_the_users_own_pngs_is_refused_and_kept(run, tmp_path):
    png = _png(run, tmp_path)
    mine = tmp_path / "results_plots"
    mine.mkdir()
    for name in ("loss_curve.png", "train_loss.png"):
        (mine / name).write_bytes(png)
    result = _cli("report", run, "-o", tmp_path / "results.html")
    assert result.exit_code == 2 and "results_plots" in result.output, result.output
    assert not mine.is_symlink() and (mine / "loss_curve.png").read_bytes() == png


def test_every_png_the_report_writes_is_one_it_replaces(run, tmp_path):
    _png(run, tmp_path)
    written = {p.name for p in (tmp_path / "first" / "r_plots").iterdir()}
    assert written and written <= REPORT_PNGS, written - REPORT_PNGS


# --- 2: -o FOLDER.md, an existing folder --------------------------------------------------------------------------


def test_a_folder_named_like_markdown_keeps_its_own_report_md(run, tmp_path):
    folder = tmp_path / "notes.md"
    folder.mkdir()
    (folder / "report.md").write_text("my own notes, keep\n")
    result = _cli("report", run, "-o", folder)
    assert result.exit_code == 2 and "report.md" in result.output, result.output
    assert (folder / "report.md").read_text() == "my own notes, keep\n"


# --- 6: the HTML twin of -o X.md ----------------------------------------------------------------------------------


def test_the_html_twin_of_an_md_is_replaced_only_where_it_is_the_reports(run, tmp_path):
    (tmp_path / "notes.html").write_text("my notes\n")
    result = _cli("report", run, "-o", tmp_path / "notes.md")
    assert result.exit_code == 2 and "notes.html" in result.output, result.output
    assert (tmp_path / "notes.html").read_text() == "my notes\n"
    assert not (tmp_path / "notes.md").exists()
    # the report's own HTML (a rerun), an empty one, and with --no-markdown the same rule
    (tmp_path / "notes.html").unlink()
    assert _cli("report", run, "-o", tmp_path / "notes.md").exit_code == 0
    assert _cli("report", run, "-o", tmp_path / "notes.md").exit_code == 0
    (tmp_path / "notes.html").write_text("")
    assert _cli("report", run, "-o", tmp_path / "notes.md").exit_code == 0
    (tmp_path / "notes.html").write_text("my notes\n")
    result = _cli("report", run, "-o", tmp_path / "notes.md", "--no-markdown")
    assert result.exit_code == 2 and (tmp_path / "notes.html").read_text() == "my notes\n"
    # -o X.html names the HTML: replaced whatever it holds, as before
    assert _cli("report", run, "-o", tmp_path / "notes.html").exit_code == 0
    assert (tmp_path / "notes.html").read_text().startswith("<!doctype html>")


# --- 3: outside the run, only the files the views read ------------------------------------------------------------


def _refused(run, sql: str) -> bool:
    result = _cli("sql", run, sql)
    return result.exit_code == 2 and "refused" in result.output


def test_a_link_to_root_or_to_the_runs_parent_is_left_out_and_opens_nothing(run, tmp_path):
    (tmp_path / "secret.txt").write_text("secret")
    shutil.rmtree(run / "web")
    (run / "web").symlink_to("/")
    (run / "classifier").symlink_to("..")
    with AuditSession(run) as s:
        assert "web" not in s.relations and s.scalar("SELECT count(*) FROM corpus") > 0
        lines = "\n".join(s.no_data)
    assert f"{run / 'web'}: a link to /, a folder holding the run folder" in lines
    assert f"{run / 'classifier'}: a link to {tmp_path}" in lines
    assert _refused(run, "SELECT content FROM read_text('/etc/hostname')")
    assert _refused(run, f"SELECT content FROM read_text('{tmp_path / 'secret.txt'}')")
    assert _refused(run, f"SELECT content FROM read_text('{run / 'classifier' / 'secret.txt'}')")


def test_a_link_in_a_folder_the_views_do_not_read_opens_nothing(run, tmp_path):
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("secret")
    (run / "branches" / "_model").symlink_to(elsewhere)
    assert _refused(run, f"SELECT count(*) FROM glob('{elsewhere}/**')")
    assert _refused(run, f"SELECT content FROM read_text('{elsewhere / 'secret.txt'}')")


def test_a_linked_stage_folder_opens_only_the_files_its_views_read(run, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.move(run / "web", elsewhere / "web")
    (run / "web").symlink_to(elsewhere / "web")
    (elsewhere / "web" / "secret.txt").write_text("secret")
    data = sorted((elsewhere / "web" / "data").glob("*.parquet"))
    with AuditSession(run) as s:
        assert s.scalar("SELECT count(*) FROM web") > 0
        assert s.scalar(f"SELECT count(*) FROM read_parquet('{data[0]}')") > 0  # a file the view reads
    assert _refused(run, f"SELECT content FROM read_text('{elsewhere / 'web' / 'secret.txt'}')")
    assert _refused(run, f"SELECT content FROM read_text('{run / 'web' / 'secret.txt'}')")


# --- 4: file-level links and folder links a level deeper ---------------------------------------------------------


def _link_tree(source: Path, target: Path) -> None:
    """`cp -rs SOURCE TARGET`: real folders, every file a link to its source."""
    for top, _, names in os.walk(source):
        (target / Path(top).relative_to(source)).mkdir(parents=True, exist_ok=True)
        for name in names:
            (target / Path(top).relative_to(source) / name).symlink_to(Path(top, name))


def test_file_level_links_are_read_like_the_files(run, tmp_path):
    with AuditSession(run) as s:
        want = {
            view: s.scalar(f"SELECT count(*) FROM {view}") for view in ("web", "dedup", "corpus", "rejects")
        }
    linked = tmp_path / "s2"
    linked.mkdir()
    for stage in ("web", "dedup", "decont"):
        _link_tree(run / stage, linked / stage)
    with AuditSession(linked) as s:
        assert {view: s.scalar(f"SELECT count(*) FROM {view}") for view in want} == want
        assert s.scalar("SELECT count(*) FROM decont_contamination") is not None
    assert _cli("sample", linked, "-n", "2").exit_code == 0


def test_a_folder_link_a_level_below_data_is_followed(run, tmp_path):
    with AuditSession(run) as s:
        want = s.scalar("SELECT count(*) FROM corpus")
    part = tmp_path / "part0"
    shutil.move(run / "decont" / "data", part)
    (run / "decont" / "data").mkdir()
    (run / "decont" / "data" / "part0").symlink_to(part)
    (run / "decont" / "data" / "loop").symlink_to(run / "decont" / "data")  # a loop is read once
    with AuditSession(run) as s:
        assert s.scalar("SELECT count(*) FROM corpus") == want
        assert s.no_data == []


# --- 5: a finished stage that kept 0 documents and wrote no Parquet file -----------------------------------------


def _keep_nothing(run: Path, stage: str) -> None:
    for f in (run / stage / "data").glob("*.parquet"):
        f.unlink()
    summary = json.loads((run / stage / "summary.json").read_text())
    dropped = {"everything": summary["docs_in"]}
    (run / stage / "summary.json").write_text(json.dumps(summary | {"docs_out": 0, "dropped": dropped}))


def test_a_stage_that_kept_nothing_is_an_empty_view_typed_as_the_stage_before(run, tmp_path):
    _keep_nothing(run, "decont")
    with AuditSession(run) as s:
        assert s.no_data == [] and s.no_view == {}
        assert s.scalar("SELECT count(*) FROM decont") == 0
        assert s.scalar("SELECT count(*) FROM corpus") == 0
        assert s.columns("corpus") == s.columns("dedup")
        assert "docs_out 0" in s.relations["decont"]
    result = _cli("sql", run, "SELECT count(*) FROM corpus")
    assert result.exit_code == 0 and "warning" not in result.output, result.output
    out = write_report(run, tmp_path / "r.html", None)
    assert not any("decont" in w for w in out["warnings"]), out["warnings"]


def test_a_first_stage_that_kept_nothing_is_said_plainly(run):
    _keep_nothing(run, "web")
    for stage in ("dedup", "decont"):
        shutil.rmtree(run / stage)
    with AuditSession(run) as s:
        assert "corpus" not in s.relations
        lines = "\n".join(s.no_data)
    assert "but its summary.json says" not in lines, lines
    assert "no view corpus: web, the last curation stage, kept 0 documents" in lines
    assert "web: kept 0 documents (its summary.json says docs_out 0) and wrote no Parquet file" in lines


def test_a_stage_with_only_damaged_files_and_docs_out_0_is_still_named(run):
    _keep_nothing(run, "decont")
    (run / "decont" / "data" / "00000.parquet").write_bytes(b"PAR1 broken")
    with AuditSession(run) as s:
        assert "corpus" not in s.relations
        assert any(line.startswith("decont: its data/ holds no readable") for line in s.no_data)


def test_an_output_over_a_file_the_views_read_through_a_link_is_refused(run, tmp_path):
    linked = tmp_path / "s2"
    linked.mkdir()
    for stage in ("web", "dedup", "decont"):
        _link_tree(run / stage, linked / stage)
    source = next((run / "web" / "data").glob("*.parquet"))
    before = source.read_bytes()
    for out in (source, source.with_name("new.parquet")):  # the file, or a new one beside it (read next time)
        result = _cli("sql", linked, "SELECT 1 AS a", "-o", out)
        assert result.exit_code == 2 and "refused" in result.output, result.output
    assert source.read_bytes() == before and not source.with_name("new.parquet").exists()
    part = tmp_path / "part0"
    shutil.move(run / "decont" / "data", part)
    (run / "decont" / "data").mkdir()
    (run / "decont" / "data" / "part0").symlink_to(part)
    result = _cli("sql", run, "SELECT 1 AS a", "-o", part / "x.parquet")
    assert result.exit_code == 2 and "refused" in result.output, result.output
