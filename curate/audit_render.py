"""The report as one self-contained HTML file (plots inline as base64 PNG) and a Markdown twin.

The Markdown links its plots as PNG files in a folder next to it (`<stem>_plots/`), because most Markdown
viewers drop `data:` images; the HTML needs nothing beside it. Each table carries the SQL that made it, so any
number can be re-run with `mathmix audit sql`.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import html
import io
import os
import re
import shutil
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from curate.audit_report import ReportFigure, ReportTable, Section
from mathmix.cli_util import first_line

MAX_ROWS_SHOWN = 50
CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}th,td{border:1px solid #ccc;padding:3px 8px}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
details{margin:.2em 0 1em;font-size:.8em;color:#555}pre{white-space:pre-wrap}.note{color:#8a5a00}
img{max-width:100%;border:1px solid #eee}h2{border-bottom:2px solid #ddd;padding-bottom:.2em}"""


def render_png(figure: ReportFigure, table: ReportTable) -> bytes:
    """Draw one figure from its table (matplotlib, Agg backend) and return PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = table.records()
    series: dict[str, list[tuple[Any, float]]] = defaultdict(list)
    for row in records:
        if row.get(figure.y) is None:
            continue
        series[str(row[figure.series]) if figure.series else figure.y].append(
            (row[figure.x], float(row[figure.y]))
        )
    fig, ax = plt.subplots(figsize=(8, 3.6 if figure.kind != "barh" else max(3.0, 0.28 * len(records) + 1)))
    try:
        _draw(ax, figure, series)
        ax.set_title(figure.title)
        ax.set_xlabel(figure.xlabel or (figure.y if figure.kind == "barh" else figure.x))
        if figure.logy:
            ax.set_yscale("log")
        if figure.vline is not None:
            ax.axvline(figure.vline, color="red", linestyle="--", label=f"threshold {figure.vline:g}")
        if (len(series) > 1 and figure.kind != "barh") or figure.vline is not None:
            ax.legend(fontsize=8)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=90)
        return buffer.getvalue()
    finally:
        plt.close(fig)


def _draw(ax: Any, figure: ReportFigure, series: dict[str, list[tuple[Any, float]]]) -> None:
    xs = sorted({x for points in series.values() for x, _ in points}, key=str)
    numeric_x = all(isinstance(x, int | float) for x in xs)
    if figure.kind == "line":
        step = figure.step if numeric_x else None
        grid = _bins(xs, step) if step else None
        for name, points in series.items():
            if grid is not None and step:  # each series 0 over the bins it has no row in, not a line across
                by_bin = {round(x / step): y for x, y in points}
                points = [(x, by_bin.get(k, 0.0)) for k, x in grid]
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=name)
    elif figure.kind == "barh":
        labels = [
            f"{name}: {x}" if len(series) > 1 else str(x) for name, pts in series.items() for x, _ in pts
        ]
        values = [v for pts in series.values() for _, v in pts]
        ax.barh(range(len(values)), values)
        ax.set_yticks(range(len(values)), labels, fontsize=8)
        ax.invert_yaxis()
    elif numeric_x:  # a histogram: bins on a numeric axis, series stacked
        xs = sorted(xs)
        width = min((b - a for a, b in zip(xs, xs[1:], strict=False)), default=1.0)
        bottom = dict.fromkeys(xs, 0.0)
        align = "center" if all(isinstance(x, int) for x in xs) else "edge"  # counts vs. bin lower edges
        for name, points in series.items():
            ax.bar([p[0] for p in points], [p[1] for p in points], width=width * 0.95, align=align,
                   bottom=[bottom[p[0]] for p in points], label=name)  # fmt: skip
            for x, value in points:
                bottom[x] += value
    else:
        for name, points in series.items():
            ax.bar([str(p[0]) for p in points], [p[1] for p in points], label=name)
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)


def _bins(xs: list[Any], step: float) -> list[tuple[int, float]] | None:
    """(index, lower edge) of every bin of width `step` from the first x to the last (None past 10,000 bins)."""
    if not xs:
        return None
    first, last = round(min(xs) / step), round(max(xs) / step)
    if last - first > 10_000:
        return None
    return [(k, k * step) for k in range(first, last + 1)]


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def md_text(value: Any) -> str:
    """Text from the data, made safe for one Markdown line or table cell: `<`, `>`, `&` HTML-escaped (a domain
    `<img src=x onerror=...>` is text, as in the HTML report), `\\` and `|` backslash-escaped (a `|` ends a
    cell), and a newline a `<br>` (it ends the table row, or the note)."""
    text = html.escape(_fmt(value), quote=False).replace("\\", "\\\\").replace("|", "\\|")
    return re.sub(r"\r\n|\r|\n", "<br>", text)


def _figures(section: Section) -> list[tuple[ReportFigure, bytes]]:
    out = []
    for figure in section.figures:
        table = section.table(figure.table)
        if table is not None and table.rows:
            try:
                out.append((figure, render_png(figure, table)))
            except (ValueError, TypeError) as err:  # e.g. non-numeric values where a plot needs numbers
                section.notes.append(f"plot {figure.title!r} not drawn: {err}")
                section.plots_not_drawn.append(f"{figure.title!r} ({first_line(err)})")
    return out


def render(sections: list[Section], title: str, html_path: Path, md_path: Path | None) -> list[Path]:
    """Write the HTML report (and the Markdown twin with its PNGs); return the files written.

    Everything is written beside its target first and then renamed onto it: a report written where an older one is
    leaves none of the older plots (a section this run lacks, another run's section), and a failure half-way
    leaves the older report as it was. The Markdown links its plots in `<stem>_plots.<hash>/` (see
    `_replace`), which `<stem>_plots` links to."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [f"<h1>{html.escape(title)}</h1><p>generated {stamp} by <code>mathmix audit report</code></p>"]
    body.append(
        "<ul>"
        + "".join(f"<li><a href='#{s.key}'>{html.escape(s.title)}</a></li>" for s in sections)
        + "</ul>"
    )
    markdown = [f"# {md_text(title)}", "", f"generated {stamp} by `mathmix audit report`", ""]
    plot_dir = plot_dir_of(md_path) if md_path else None
    drawn = [_figures(section) for section in sections]  # first: a plot not drawn is a note of its section
    # file name in plot_dir: PNG
    pngs = {
        f"{s.key}_{f.key}.png": png for s, figures in zip(sections, drawn, strict=True) for f, png in figures
    }
    shown = _versioned(plot_dir, pngs) if plot_dir is not None and md_path is not None else None
    for section, figures in zip(sections, drawn, strict=True):
        body.append(f"<h2 id='{section.key}'>{html.escape(section.title)}</h2>")
        markdown += [f"## {md_text(section.title)}", ""]
        for note in section.notes:
            body.append(f"<p class='note'>{html.escape(note)}</p>")
            markdown += [f"> {md_text(note)}", ""]
        for figure, png in figures:
            data = base64.b64encode(png).decode()
            body.append(f"<img alt='{html.escape(figure.title)}' src='data:image/png;base64,{data}'>")
            if shown is not None:
                alt = md_text(figure.title).replace("[", "\\[").replace("]", "\\]")
                markdown += [f"![{alt}]({shown.name}/{section.key}_{figure.key}.png)", ""]
        for table in section.tables:
            body.append(_html_table(table))
            markdown += _md_table(table)
    page = f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
    files = {html_path: page + f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n"}
    if md_path is not None:
        files[md_path] = "\n".join(markdown) + "\n"
    else:
        pngs = {}
    _replace(files, plot_dir, pngs)
    return [*files, *(plot_dir / name for name in pngs if plot_dir is not None)]


MD_FIRST_LINE = "# mathmix audit: "  # the title line every version of the report's Markdown opened with
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HTML_FIRST_BYTES = (
    b"<!doctype html><html><head><meta charset='utf-8'><title>mathmix audit: "  # every version's
)
# The file names of the report's plots (`<section>_<figure>.png`), those of every version so far (the section and
# figure keys of curate/audit_report.py and curate/audit_sections.py, unchanged since the first): a real
# `<stem>_plots/` holding only these is an earlier report's, replaced; any other name (loss_curve.png) is a user's
REPORT_PNGS = frozenset(
    f"{name}.png"
    for name in (
        "funnel_funnel",
        "funnel_drops",
        "domains_by_docs",
        "math_score_hist",
        "lengths_hist",
        "language_langs",
        "dedup_clusters",
        "dedup_kept",
        "contamination_benchmarks",
        "rewriter_acceptance",
        "mixture_sources",
    )
)


def plot_dir_of(md_path: Path) -> Path:
    """`<stem>_plots`, beside the Markdown twin: the link to the plots it shows."""
    return md_path.with_name(md_path.stem + "_plots")


def check_replaceable(md_path: Path | None, md_named: bool = False, html_twin: Path | None = None) -> None:
    """Raise ValueError (one line, naming it) where the Markdown twin or its `<stem>_plots` exists and is not the
    report's own: only a Markdown file opening with the report's title line (or an empty one), a link (the
    report's is one; only the link is replaced, never its target) or a real folder of the report's PNGs only
    (`REPORT_PNGS`, the names every version wrote) is replaced; MD_NAMED (`-o X.md`) replaces the Markdown file
    the user named. HTML_TWIN: the HTML of `-o X.md` (X.html, which the user did not name), replaced only where
    it opens with the report's header (or is empty). Checked before any query runs."""
    if html_twin is not None and not _opens_with(html_twin, HTML_FIRST_BYTES):
        raise ValueError(
            f"refused: {html_twin}: exists and is not an HTML report of `mathmix audit report` (the HTML twin of "
            "-o X.md is X.html); move it, or give -o X.html"
        )
    if md_path is None:
        return
    if not md_named and not _opens_with(md_path, MD_FIRST_LINE.encode()):  # `-o X.md`: the user's choice
        raise ValueError(
            f"refused: {md_path}: exists and is not a Markdown report of `mathmix audit report` (its first "
            f"line is not '{MD_FIRST_LINE}...'); move it, or give another -o (or --no-markdown)"
        )
    plots = plot_dir_of(md_path)
    if plots.is_symlink() or not plots.is_dir():
        return  # a link (replaced, its target untouched), a file (refused as not a folder when written), or none
    entries = list(plots.iterdir())
    if all(_report_png(entry) for entry in entries):
        return
    raise ValueError(
        f"refused: {plots}: a folder that holds other files than the report's plots, which would be replaced; "
        "move it, or give another -o (or --no-markdown)"
    )


def _opens_with(path: Path, head: bytes) -> bool:
    """Whether `path` (a link followed) is no non-empty regular file, or one opening with `head`."""
    target = path.resolve() if path.is_symlink() else path
    if not target.is_file() or not target.stat().st_size:
        return True
    with target.open("rb") as stream:
        return stream.read(len(head)) == head


def _report_png(path: Path) -> bool:
    """A PNG file an earlier version of the report wrote into `<stem>_plots/`: a name of `REPORT_PNGS`."""
    if path.is_symlink() or not path.is_file() or path.name not in REPORT_PNGS:
        return False
    with path.open("rb") as stream:
        return stream.read(len(PNG_MAGIC)) == PNG_MAGIC


def _versioned(plot_dir: Path, pngs: dict[str, bytes]) -> Path:
    """`<stem>_plots.<hash of the plots>`: the folder the Markdown links (the same plots, the same folder)."""
    digest = hashlib.sha256()
    for name in sorted(pngs):
        digest.update(f"{name}\0{len(pngs[name])}\0".encode() + pngs[name])
    return plot_dir.with_name(f"{plot_dir.name}.{digest.hexdigest()[:12]}")


def _replace(files: dict[Path, str], plot_dir: Path | None, pngs: dict[str, bytes]) -> None:
    """Write `files` and the PNGs of `plot_dir` beside their targets, then rename them onto them. A device or FIFO
    (`-o /dev/null`) is written through, and so is a link (to its target).

    The plots go to a folder named by their hash (`_versioned`), which the Markdown links, in this order: that
    folder is complete, then the report is renamed onto the older one, then `plot_dir` is pointed at the folder
    (a link swapped by one rename) and the older folders are removed. A reader never opens a report whose
    plots are not all there (swapping one fixed folder by two renames left it missing in between); a rerun
    with the same plots writes the same folder, and only the current one is left."""
    if plot_dir is not None and not plot_dir.is_symlink() and plot_dir.exists() and not plot_dir.is_dir():
        raise NotADirectoryError(
            errno.ENOTDIR, "not a folder (the Markdown report's plots go there)", str(plot_dir)
        )
    staged: list[tuple[Path, Path]] = []  # (written aside, target)
    written: Path | None = None  # a plot folder this call made (removed again if the report is not renamed)
    try:
        for path, text in files.items():
            if _device_path(path):  # /dev/stdout redirected to a file: written through, nothing beside it
                path.write_text(text)
                continue
            path = path.resolve() if path.is_symlink() else path
            if path.exists() and not path.is_file() and not path.is_dir():
                path.write_text(text)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((Path(name), path))
            with os.fdopen(fd, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.chmod(name, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        current = _versioned(plot_dir, pngs) if plot_dir is not None and pngs else None
        if current is not None:
            written = _write_plot_folder(current, pngs)
        for tmp, path in staged:
            os.replace(tmp, path)
        written = None
        if plot_dir is not None:
            _point_to(plot_dir, current)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        if written is not None:
            shutil.rmtree(written, ignore_errors=True)


def _device_path(path: Path) -> bool:
    """An existing path under /dev or /proc as given (links not followed; `curate.audit_cli.is_device_path`)."""
    parts = Path(os.path.abspath(path)).parts
    if len(parts) < 3 or parts[1] not in ("dev", "proc") or not os.path.lexists(path):
        return False
    # a link on the way (/dev/stdout, /dev/fd/1, /proc/self/fd/1) or no regular file: a regular file of
    # /dev/shm (a tmpfs) is a file like any other
    links = any(Path(*parts[:i]).is_symlink() for i in range(2, len(parts) + 1))
    return links or not Path(path).is_file()


def _write_plot_folder(folder: Path, pngs: dict[str, bytes]) -> Path | None:
    """`folder` holding `pngs` and nothing else, written aside and renamed into place; None where it already
    did (a rerun), else the folder made."""
    if folder.is_dir() and not folder.is_symlink():
        held = {p.name: p for p in folder.iterdir()}
        if held.keys() == pngs.keys() and all(held[n].read_bytes() == png for n, png in pngs.items()):
            return None
        shutil.rmtree(
            folder
        )  # named by its plots' hash but not holding them: damaged, not linked by a report
    folder.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        for name, png in pngs.items():
            (new / name).write_bytes(png)
        new.chmod(0o777 & ~_umask())  # mkdtemp's is 0700: the plot folder as mkdir() makes it
        os.rename(new, folder)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    return folder


def _point_to(plot_dir: Path, current: Path | None) -> None:
    """`plot_dir` made a link to `current` (removed where there are no plots), by renaming a new link onto it;
    then every other `<plot_dir>.<hash>` folder, and a real `plot_dir` folder earlier versions wrote, removed."""
    aside: Path | None = None
    if (
        plot_dir.is_dir() and not plot_dir.is_symlink()
    ):  # an earlier version's folder: the report no longer links it
        aside = Path(tempfile.mkdtemp(prefix=f".{plot_dir.name}.old.", dir=plot_dir.parent))
        os.rename(plot_dir, aside / plot_dir.name)
    try:
        if current is None:
            if plot_dir.is_symlink():
                plot_dir.unlink()
        else:
            link = plot_dir.with_name(f".{plot_dir.name}.{os.getpid()}.link")
            link.unlink(missing_ok=True)
            os.symlink(current.name, link)
            os.replace(link, plot_dir)
        pattern = re.compile(rf"{re.escape(plot_dir.name)}\.[0-9a-f]{{12}}")
        left = re.compile(rf"\.{re.escape(plot_dir.name)}\.\d+\.link")  # a link a killed run left
        for old in plot_dir.parent.iterdir():
            if pattern.fullmatch(old.name) and old != current and old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            elif left.fullmatch(old.name) and old.is_symlink():
                old.unlink(missing_ok=True)
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _html_table(table: ReportTable) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    rows = []
    for row in table.rows[:MAX_ROWS_SHOWN]:
        cells = "".join(
            f"<td class='n'>{_fmt(v)}</td>"
            if isinstance(v, int | float)
            else f"<td>{html.escape(_fmt(v))}</td>"
            for v in row
        )
        rows.append(f"<tr>{cells}</tr>")
    more = (
        f"<p>({len(table.rows) - MAX_ROWS_SHOWN} more rows)</p>" if len(table.rows) > MAX_ROWS_SHOWN else ""
    )
    sql = f"<details><summary>SQL</summary><pre>{html.escape(table.sql)}</pre></details>"
    return f"<h3>{html.escape(table.title)}</h3><table><tr>{head}</tr>{''.join(rows)}</table>{more}{sql}"


def _md_table(table: ReportTable) -> list[str]:
    lines = [f"### {md_text(table.title)}", ""]
    if not table.rows:
        return lines + ["(no rows)", ""]
    lines.append("| " + " | ".join(md_text(c) for c in table.columns) + " |")
    lines.append("|" + "|".join("---:" if isinstance(v, int | float) else "---" for v in table.rows[0]) + "|")
    for row in table.rows[:MAX_ROWS_SHOWN]:
        lines.append("| " + " | ".join(md_text(v) for v in row) + " |")
    if len(table.rows) > MAX_ROWS_SHOWN:
        lines.append(f"\n({len(table.rows) - MAX_ROWS_SHOWN} more rows)")
    return lines + ["", "<details><summary>SQL</summary>", "", f"```sql\n{table.sql}\n```", "</details>", ""]
