"""Small pieces shared by every subcommand: a group with a default command, summary printing, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

console = Console(stderr=True)
# Output folders this command created (outermost first): `fail` removes those still empty, so a refused or failed
# run leaves no empty folder behind (one holding a job record or partial work stays, for the rerun).
_created_outputs: list[Path] = []


class DefaultCommandGroup(TyperGroup):
    """A group that runs its `default` command when the first argument is not a subcommand name.

    This lets `mathmix web INPUT... -o OUT` and `mathmix web extract FILE...` live side by side.
    """

    default_command = "run"

    def format_help(self, ctx, formatter):  # type: ignore[override]
        # say it in --help too: the group's help alone lists subcommands and hides the default one's usage
        note = (
            f"`{ctx.command_path} ARGS...` without a command name runs `{self.default_command}`: "
            f"see `{ctx.command_path} {self.default_command} --help` for its arguments and options."
        )
        original = self.help
        self.help = f"{original or ''}\n\n{note}"
        try:
            return super().format_help(ctx, formatter)
        finally:
            self.help = original

    def parse_args(self, ctx, args):  # type: ignore[override]
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [self.default_command, *args]
        elif not args and self.default_command in self.commands:
            args = [self.default_command]
        return super().parse_args(ctx, args)


INTERRUPTED = "interrupted: finished work is kept; rerun the same command to resume"
_interrupt_note = [INTERRUPTED]


def forget_created_outputs() -> None:
    """Start a command's record of the output folders it made (in-process callers run several commands)."""
    _created_outputs.clear()
    _interrupt_note[:] = [INTERRUPTED]


def on_interrupt(note: str) -> None:
    """What Ctrl-C prints for this command, where a rerun does not simply resume (`mathmix.cli.main`)."""
    _interrupt_note[:] = [note]


def interrupt_note() -> str:
    return _interrupt_note[0]


def fail(message: str, code: int = 2) -> None:
    """Print a one-line error and exit non-zero (no traceback for user errors)."""
    # soft_wrap: one line whatever the terminal width; escape: paths and "mathmix[gpu]" are text, not markup
    console.print(f"[bold red]error:[/] {escape(str(message))}", soft_wrap=True)
    while _created_outputs:
        try:
            _created_outputs.pop().rmdir()  # only ever removes an empty folder
        except OSError:
            pass
    raise typer.Exit(code)


def check_output(output: Path) -> None:
    """Fail (one line) when OUT cannot be the stage folder: a file; a run folder; a recipe's stage folder; a folder
    inside another stage's folder (`mathmix dedup X -o RUN/web/data`: its files were read as web's output); one in
    a run folder that another `mathmix run` is using (`-o RUN/dedup` while that run writes RUN)."""
    from mathmix.paths import run_folder_in_use, stage_folder_above

    if output.exists() and not output.is_dir():
        fail(f"{output}: exists and is not a folder; -o names the output folder")
    if busy := run_folder_in_use(output):
        fail(f"{output}: {busy}; wait for that run to end (or end it), or write to a folder outside it")
    if (stage := stage_folder_above(output)) is not None:
        fail(
            f"{output}: inside the stage folder {stage} (it holds that stage's records): what is written there "
            f"is read as that stage's output; write to a folder outside it, e.g. {stage.parent / output.name}"
        )
    if output.is_dir() and not (output / "data").is_dir():
        from mathmix.paths import stage_folders_in

        if stages := stage_folders_in(output):  # a run folder: this stage's files would land among its stages
            fail(
                f"{output}: holds stage folders ({', '.join(stages[:8])}); -o names this stage's own folder, "
                f"e.g. {output / 'NAME'}"
            )
    if (output / "recipe-stage.json").is_file() and not (output / "job.json").is_file():
        # a recipe's shards/eval/audit/classifier folder: no job record for this command to compare against
        fail(
            f"{output}: a stage folder of a `mathmix run` recipe (recipe-stage.json), not written by this "
            "command; rerun the stage through its recipe, or write to a new folder"
        )
    try:
        make_folder(output)
    except OSError as err:
        fail(f"{output}: cannot create the output folder ({err.strerror or err})")


def make_folder(folder: Path) -> None:
    """mkdir -p FOLDER, noting the levels it makes: `fail` removes them again while they are empty."""
    # noted first: a mkdir that fails half-way leaves no parents behind either
    _created_outputs.extend(p for p in [folder, *folder.parents][::-1] if not p.exists())
    folder.mkdir(parents=True, exist_ok=True)


def print_summary(summary: dict[str, Any], title: str = "summary") -> None:
    """Print a stage summary (docs_in, docs_out, dropped by reason, seconds) as a table."""
    table = Table(title=title, show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in ("docs_in", "docs_out"):
        if key in summary:
            table.add_row(key, f"{summary[key]:,}")
    for reason, count in sorted(summary.get("dropped", {}).items(), key=lambda kv: -kv[1]):
        table.add_row(f"  dropped: {reason}", f"{count:,}")
    for key, value in summary.items():
        if key in ("docs_in", "docs_out", "dropped"):
            continue
        if isinstance(value, float):
            table.add_row(key, f"{value:,.2f}")
        elif isinstance(value, int | str):
            table.add_row(key, f"{value:,}" if isinstance(value, int) else value)
    console.print(table)
    if summary.get("rows_without_text_field"):
        console.print(
            f"[yellow]warning:[/] {summary['rows_without_text_field']:,} of {summary.get('docs_in', 0):,} input rows "
            "have no `text` field (dropped as empty): is the text in a column with another name?"
        )
    if summary.get("unreadable_files"):
        console.print(
            f"[yellow]warning:[/] {summary['unreadable_files']:,} input file(s) damaged or truncated: read up to the "
            "damage, the rest skipped (the log names them)"
        )
    if summary.get("files_all_bad_records"):  # rewrite's (curate.rewrite.readers)
        files = escape(", ".join(summary["files_all_bad_records"]))
        console.print(
            f"[yellow]warning:[/] no line of {files} is a document: every one was dropped as bad_record (not a "
            "JSON object, or its text not a string); is it JSON Lines, one JSON object per line?",
            soft_wrap=True,
        )


def first_line(err: BaseException) -> str:
    """An error as one line: its message's first line that is not blank (DuckDB's go on with hints and the query
    line, transformers' loading errors run to a paragraph), else its type's name."""
    return next((line for line in str(err).splitlines() if line.strip()), type(err).__name__)


def format_validation_errors(err: Any, prefix: str = "") -> str:
    """A pydantic ValidationError as `key.path: message (got value)`, joined by `; ` (names every bad key).

    `prefix` goes before every key path (`stages.web`). A message that already names its key (our validators'
    `stages.web: ...`) is not named twice, and a long value is cut (a whole `stages` mapping is no help).
    """
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in (prefix, *e["loc"]) if str(p))
        msg = e["msg"].removeprefix("Value error, ")
        shown = repr(e["input"])
        # no value for a missing key, nor for a whole mapping (a model-level check: the whole recipe, cut)
        plain = e["type"] != "missing" and not isinstance(e["input"], dict)
        got = f" (got {shown if len(shown) <= 80 else shown[:77] + '...'})" if plain else ""
        if msg.startswith(f"{loc}.") or msg.startswith(f"{loc}:"):
            parts.append(msg)  # a nested error, already named and with its own value
        else:
            parts.append(f"{loc}: {msg}{got}" if loc else f"{msg}{got}")
    return "; ".join(parts)


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (temp file + rename), so a killed run never leaves half a file.

    A symlink is written through to its target, and /dev/stdout or a FIFO is written to as it is (a rename would
    replace them with a file); a failed write leaves no temp file.
    """
    text = json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
    path = path.resolve() if path.is_symlink() else path
    if path.exists() and not path.is_file():
        path.write_text(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
