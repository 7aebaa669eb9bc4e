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


def register(app: typer.Typer) -> None:
    from pipelines.web_run_cli import run_web

    web_app.command("run", help=run_web.__doc__)(run_web)
    app.add_typer(web_app, name="web")
