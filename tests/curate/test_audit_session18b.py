"""Audit findings of session 18's second review: a user's own `<stem>_plots/` of PNGs and a `FOLDER.md/report.md`
are kept, the HTML twin of `-o X.md` is replaced only where it is the report's; only the files the views read
are readable outside the run (never /, nor a folder holding the run); file-level and deeper links are followed;
a stage that kept 0 documents and wrote no Parquet file is an empty view, not a contradiction."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

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
