"""`mathmix web INPUT... -o OUT` (the web stage) and `mathmix web extract FILE.html...`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from mathmix.cli_util import DefaultCommandGroup, fail

web_app = typer.Typer(
    cls=DefaultCommandGroup,
    help="Web stage: WARC / HTML / JSONL -> math-aware text -> language ID -> math prefilter -> Parquet.",
    no_args_is_help=False,
)


@web_app.command("extract")
def extract_cmd(
    files: list[Path] = typer.Argument(..., help="HTML files to extract"),
    engine: str = typer.Option("fast", "--engine", help="fast (resiliparse) or clean (trafilatura)"),
) -> None:
    """Extract math-aware text from HTML files; prints one JSON object per file: {"path", "text"}."""
    from curate.extract import extract

    if engine not in ("fast", "clean"):
        fail(f"--engine must be fast or clean, got {engine!r}")
    for path in files:
        if not path.is_file():
            fail(f"{path}: no such file")
        html = path.read_bytes().decode("utf-8", errors="replace")
        print(json.dumps({"path": str(path), "text": extract(html, engine=engine)}, ensure_ascii=False))


@web_app.command("run")
def run_web(
    inputs: list[Path] = typer.Argument(
        ..., help="WARC/WARC.gz files, folders of .html files, or JSONL with html"
    ),
    output: Path = typer.Option(
        ..., "-o", "--output", help="output folder: data/*.parquet, summary.json, logs/"
    ),
    workers: int = typer.Option(1, "--workers", help="datatrove tasks run in parallel"),
    recipe: Path | None = typer.Option(None, "--recipe", help="take the web settings from this recipe"),
) -> None:
    """Web stage: read pages, extract math-aware text, language ID, blocklist, math prefilter, quality filters.

    Reads WARC(.gz), folders of .html, or JSONL with an `html` field; writes OUT/data/*.parquet (one row per kept
    page, with provenance), OUT/summary.json (docs_in, docs_out, dropped by reason, seconds) and OUT/logs/.
    """
    from pipelines.web import run_web_cli

    run_web_cli([str(p) for p in inputs], output, workers=workers, recipe=recipe)


def register(app: typer.Typer) -> None:
    app.add_typer(web_app, name="web")
