"""`mathmix web INPUT... -o OUT` (the web stage) and `mathmix web extract FILE.html...`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import typer

from mathmix.cli_util import DefaultCommandGroup, check_output, console, fail, print_summary

web_app = typer.Typer(
    cls=DefaultCommandGroup,
    help="Web stage: WARC / HTML / JSONL -> math-aware text -> language ID -> math prefilter -> Parquet "
    "(OUT/data/, summary.json, logs/; rejects/ with --write-rejects): `mathmix web INPUT... -o OUT`. `web extract` "
    "prints the text of HTML files.",
    no_args_is_help=False,
)

# Leading bytes of files that are not HTML: archives and compressed files (`web extract` would print their
# bytes as "text"), and PDF.
NOT_HTML_MAGIC = {
    b"\x1f\x8b": "a gzip file",
    b"WARC/": "a WARC file",
    b"BZh": "a bzip2 file",
    b"\xfd7zXZ": "an xz file",
    b"\x28\xb5\x2f\xfd": "a zstd file",
    b"PK\x03\x04": "a zip file",
    b"%PDF": "a PDF file",
}


NO_MARKUP = "text without markup"
_TAG = re.compile(rb"<(?:[A-Za-z][A-Za-z0-9]*[\s/>]|!--|!doctype)", re.I)


def html_files(paths: list[Path]) -> list[Path]:
    """The HTML files to extract: each file as given, each folder's .html/.htm/.xhtml files (recursive).

    Fails (one line, before any output) on a missing path, a folder without HTML, or a file that is not HTML.
    """
    from curate.readers import HTML_SUFFIXES

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*") if p.is_file() and p.name.lower().endswith(HTML_SUFFIXES)
            )
            if not found:
                fail(f"{path}: is a folder with no {'/'.join(HTML_SUFFIXES)} files")
            files += found
        elif path.is_file():
            problem = not_html(path)
            if problem == NO_MARKUP:
                fail(f"{path}: {problem}, not HTML; `mathmix web extract` reads HTML pages")
            if problem:
                fail(f"{path}: {problem}, not HTML; `mathmix web {path} -o OUT` reads WARC, HTML and JSONL")
            files.append(path)
        else:
            fail(f"{path}: no such file or folder")
    return files


def not_html(path: Path) -> str | None:
    """What the file is when its first bytes or its name say it is not HTML (compressed, WARC, binary, JSON/JSONL,
    text without a tag in its first 8 KiB and no HTML name), else None."""
    from curate.readers import HTML_SUFFIXES, JSONL_SUFFIXES, WARC_SUFFIXES, utf16_bom

    try:
        with path.open("rb") as fh:
            head = fh.read(8192)
    except OSError as err:
        fail(f"{path}: cannot be read ({err.strerror})")
    for magic, kind in NOT_HTML_MAGIC.items():
        if head.startswith(magic):
            return kind
    if path.name.lower().endswith(WARC_SUFFIXES):
        return "a WARC/ARC file"
    if b"\x00" in head and not utf16_bom(
        head
    ):  # a UTF-16 page with its BOM is read as the web stage reads it
        return "a binary file"
    name = path.name.lower()
    if name.endswith(JSONL_SUFFIXES):  # its rows' `html` would be printed as one JSON string of "text"
        return "a JSON/JSONL file"
    if not name.endswith(HTML_SUFFIXES) and not _TAG.search(head):
        return NO_MARKUP
    return None


@web_app.command("extract")
def extract_cmd(
    files: list[Path] = typer.Argument(..., help="HTML files, or folders of them, to extract"),
    engine: str = typer.Option("fast", "--engine", help="fast (resiliparse) or clean (trafilatura)"),
) -> None:
    """Extract math-aware text from HTML files (a folder: its .html/.htm/.xhtml files, recursively); prints one JSON object per file:
    {"path", "text"}, bytes decoded as the web stage does (`decode_html`: the <meta> charset as browsers read it, UTF-8, windows-1252). A WARC,
    compressed, binary or JSON/JSONL file, or text with no markup, is an error (the web stage reads the first)."""
    from curate.extract import extract
    from curate.readers import decode_html

    if engine not in ("fast", "clean"):
        fail(f"--engine must be fast or clean, got {engine!r}")
    for path in html_files(files):
        html, _ = decode_html(path.read_bytes(), None)
        if html is None:  # the web stage drops it as `undecodable`
            fail(f"{path}: undecodable: neither its <meta> charset, UTF-8 nor windows-1252 decodes it")
        print(json.dumps({"path": str(path), "text": extract(html or "", engine=engine)}, ensure_ascii=False))


def check_inputs(inputs: list[Path]) -> None:
    """Fail, before the output folder or a recipe is read, on a missing input or an input file of a kind the reader
    skips (it would read 0 pages from it and exit 0). Inputs without any page file are the stage's own error."""
    from pipelines.web import check_input_kinds

    for path in inputs:
        if not path.exists():
            fail(f"{path}: no such file or folder")
    try:
        check_input_kinds([str(p) for p in inputs])
    except ValueError as err:
        fail(str(err))


@web_app.command("run")
def run_web(
    inputs: list[Path] = typer.Argument(
        ..., help="WARC/ARC(.gz) files, folders of .html files, or JSONL with html"
    ),
    output: Path = typer.Option(
        ..., "-o", "--output", help="output folder: data/*.parquet, summary.json, logs/, rejects/"
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        help="tasks run in parallel (default 1; without --recipe also the number of tasks; with it, overrides "
        "the recipe's workers)",
    ),
    write_rejects: bool | None = typer.Option(
        None,
        "--write-rejects/--no-write-rejects",
        help="write every dropped page to OUT/rejects/*.parquet with its reason (default: off, or the recipe's)",
    ),
    recipe: Path | None = typer.Option(
        None, "--recipe", help="take the web settings and the executor from this recipe"
    ),
    math_model: Path | None = typer.Option(
        None,
        "--math-model",
        help="fastText math classifier (`mathmix classifier train`) to score pages with and keep those at or above "
        "its card's threshold (default: none, or the recipe's: pages are kept on the math prefilter alone)",
    ),
    math_threshold: float | None = typer.Option(
        None,
        "--math-threshold",
        min=0,
        max=1,
        help="keep pages with math_score >= this (default: the card's)",
    ),
) -> None:
    """Web stage: read pages, extract math-aware text, language ID, blocklist, math prefilter, quality filters.

    Reads WARC/ARC(.gz), folders of .html, or JSONL with an `html` field; writes OUT/data/*.parquet (one row per
    kept page, with provenance), OUT/summary.json (docs_in, docs_out, dropped by reason, seconds), OUT/logs/ and,
    with --write-rejects, OUT/rejects/*.parquet (one row per dropped page with its reason). With --math-model
    each kept page has its math_score; without one (nor a recipe's), pages that pass the prefilter are kept
    unscored, a note says so. --workers, --write-rejects, --math-model and --math-threshold override what
    --recipe sets.
    """
    from pipelines.executors import ExecutorConfig, JobsSubmitted
    from pipelines.prerun_checks import check_math_model
    from pipelines.recipe import RecipeError, load_recipe
    from pipelines.web import Config, resolve_paths
    from pipelines.web import run_web as run_stage

    check_inputs(inputs)
    check_output(output)
    config, executor = Config(), ExecutorConfig(tasks=workers or 1, workers=workers or 1)
    if recipe is not None:
        try:
            parsed = load_recipe(recipe)
        except RecipeError as err:
            fail(str(err))
        # without a web: block, its executor alone was taken, with the default web settings, silently
        if "web" not in parsed.stages:
            fail(
                f"{recipe}: has no web stage (its stages: {', '.join(parsed.stages)}); --recipe takes the settings "
                "of a recipe's `web:` block"
            )
        config, executor = parsed.stages["web"], parsed.executor
        config = config.model_copy(update=resolve_paths(config, parsed.output_dir))
        if workers is not None:
            executor = executor.model_copy(update={"workers": workers})
    # the INPUTs given are read, never a recipe's web inputs: recorded as a setting, they made the same job rerun
    # without --recipe (or with a recipe naming other inputs) "another job"
    config = config.model_copy(update={"inputs": _recorded_inputs_setting(output)})
    if write_rejects is not None:
        config = config.model_copy(update={"write_rejects": write_rejects})
    if math_model is not None:
        config = config.model_copy(update={"math_model": str(math_model.absolute())})
    if config.math_model is not None:  # before any page is read: the scoring step loads it at its first page
        try:
            check_math_model(config.math_model)
        except ValueError as err:
            fail(f"--math-model {err}" if math_model is not None else f"{recipe}: web.math_model {err}")
    if math_threshold is not None:
        if config.math_model is None:
            fail("--math-threshold needs a model to score with: pass --math-model")
        config = config.model_copy(update={"math_threshold": math_threshold, "keep_top_percent": None})
    if config.math_model is None:
        console.print(
            "note: no math classifier (--math-model): pages that pass the math prefilter are kept unscored "
            "(math_score null); MathJax-loading pages without math among them",
            soft_wrap=True,
            markup=False,
        )
    try:
        summary = run_stage(config, [str(p) for p in inputs], output, executor, math_model=config.math_model)
    except FileNotFoundError as err:
        fail(str(err))
    except OSError as err:
        fail(f"{err.filename}: {err.strerror}" if err.filename else str(err))
    except (ValueError, RuntimeError) as err:  # OUT holds another job's output; tasks that did not complete
        fail(str(err))
    except JobsSubmitted as err:  # --recipe with a Slurm executor and wait: false
        console.print(str(err), soft_wrap=True, markup=False)
        return
    print_summary(summary, title="web summary")
    warn_rows_without_html(summary, output)
    wrote = ", rejects/*.parquet" if config.write_rejects else ""
    console.print(f"wrote {output}/data/*.parquet{wrote} and {output}/summary.json")


def _recorded_inputs_setting(output: Path) -> list[str]:
    """The `inputs` setting OUTPUT's web job record holds: a folder written with --recipe before its unused web
    inputs were left out of the settings recorded them; that job is this one (the INPUTs given are read either
    way), kept as it is. [] (the default, not recorded) for any other folder."""
    try:
        record = json.loads((output / "job.json").read_text())
    except (OSError, ValueError):
        return []
    settings = (
        record.get("settings") if isinstance(record, dict) and record.get("command", "web") == "web" else None
    )
    inputs = settings.get("inputs") if isinstance(settings, dict) else None
    return [str(item) for item in inputs] if isinstance(inputs, list) else []


def warn_rows_without_html(summary: dict, output: Path) -> None:
    """Warn when JSONL/JSON rows had no `html` field (each dropped as bad_record), as dedup warns for `text`. The
    total is docs_in only where every file read (OUTPUT/logs/inputs.txt) was JSONL/JSON: docs_in counts WARC
    records and HTML files too ("1 of 68 input rows" for 13 rows)."""
    from curate.readers import JSONL_SUFFIXES, NO_HTML_FIELD

    if not (count := summary.get(NO_HTML_FIELD)):
        return
    try:
        read = (output / "logs" / "inputs.txt").read_text().split("\n")
    except OSError:
        read = []
    names = [line.lower() for line in read if line]
    if names and all(name.endswith(JSONL_SUFFIXES) for name in names):
        said = f"{count:,} of {summary.get('docs_in', 0):,} input rows have"
    else:
        said = f"{count:,} JSONL/JSON input row{' has' if count == 1 else 's have'}"
    console.print(
        f"[yellow]warning:[/] {said} no `html` field (dropped as bad_record): is the page in a field with another "
        "name? The web stage reads JSONL rows' `html`; documents with `text` go to `mathmix dedup`",
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(web_app, name="web")
