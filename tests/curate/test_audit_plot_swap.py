"""The Markdown report and its plot folder are replaced so that a reader never finds the report's plots missing."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from curate import audit_render
from curate.audit_report import ReportFigure, ReportTable, Section


def _sections(*keys: str) -> list[Section]:
    """One section per key, each with one bar plot of a two-row table."""
    return [
        Section(
            key,
            key.title(),
            tables=[ReportTable("t", "T", "SELECT 1", ["x", "n"], [["a", 1], ["b", 2]])],
            figures=[ReportFigure("bars", f"{key} bars", "t", "x", "n")],
        )
        for key in keys
    ]


def _missing_plots(out: Path) -> list[str]:
    """The images report.md links that are not there (what a reader opening it now would see broken)."""
    md = out / "report.md"
    if not md.exists():
        return []
    return [
        link for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md.read_text()) if not (out / link).is_file()
    ]


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _render(out: Path, *keys: str) -> list[Path]:
    return audit_render.render(_sections(*keys), "t", out / "report.html", out / "report.md")


def test_every_step_of_a_rewrite_leaves_the_reports_plots_in_place(tmp_path, monkeypatch):
    """A reader opening report.md at any moment of a rewrite (between any two renames or removals) finds every
    plot it links: the old code moved report_plots/ aside and then put the new one in its place."""
    out = tmp_path / "out"
    _render(out, "one", "two")
    assert _missing_plots(out) == [] and (out / "report_plots" / "one_bars.png").is_file()
    broken: list[tuple[str, list[str]]] = []

    def checked(name, real):
        def step(*args, **kwargs):
            result = real(*args, **kwargs)
            if missing := _missing_plots(out):
                broken.append((f"{name}{args}", missing))
            return result

        return step

    for module, name in ((os, "rename"), (os, "replace"), (shutil, "rmtree"), (os, "unlink"), (os, "rmdir")):
        monkeypatch.setattr(module, name, checked(name, getattr(module, name)))
    _render(out, "two", "three")  # a section gone, one new
    _render(out, "two", "three")  # the same again
    _render(out)  # no plots at all
    _render(out, "one")
    monkeypatch.undo()
    assert broken == []
    assert _missing_plots(out) == []


def test_rewrites_leave_one_plot_folder_and_the_same_files(tmp_path):
    """Reruns are idempotent (the same files, the same links) and leave no older plot folder behind; the plots
    are still reached as report_plots/NAME.png."""
    out = tmp_path / "out"
    files = _render(out, "one", "two")
    first = _listing(out)
    md = (out / "report.md").read_text()
    assert _render(out, "one", "two") == files
    assert _listing(out) == first
    assert (out / "report.md").read_text().split("\n", 3)[3] == md.split("\n", 3)[3]  # past the time stamp
    _render(out, "three")
    folders = [p.name for p in out.iterdir() if p.is_dir() and not p.is_symlink()]
    assert len(folders) == 1, folders
    assert (out / "report_plots" / "three_bars.png").is_file()
    assert not (out / "report_plots" / "one_bars.png").exists()
    assert not [p for p in _listing(out) if p.startswith(".")]
    _render(out)  # no plots: no plot folder
    assert _listing(out) == {"report.html", "report.md"}


def test_a_plot_folder_from_an_older_version_is_replaced(tmp_path):
    """A real report_plots/ folder (what earlier versions wrote) gives way to the new layout."""
    out = tmp_path / "out"
    (out / "report_plots").mkdir(parents=True)
    (out / "report_plots" / "stale.png").write_bytes(b"x")
    _render(out, "one")
    assert (out / "report_plots" / "one_bars.png").is_file()
    assert not (out / "report_plots" / "stale.png").exists()
    assert _missing_plots(out) == []
    assert not [p for p in _listing(out) if p.startswith(".")]


def test_a_file_where_the_plot_folder_goes_is_refused_and_nothing_is_written(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report_plots").write_text("not a folder")
    with pytest.raises(NotADirectoryError):
        _render(out, "one")
    assert _listing(out) == {"report_plots"}


def test_a_link_left_by_a_killed_run_is_removed(tmp_path):
    out = tmp_path / "out"
    _render(out, "one")
    (out / ".report_plots.99999999.link").symlink_to("report_plots.000000000000")  # killed before its rename
    _render(out, "one")
    assert not [p for p in _listing(out) if p.startswith(".")]
