"""`mathmix shards build|train-tokenizer|inspect|validate|mix`."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from mathmix.cli_util import check_output, console, fail, print_summary, write_json

shards_app = typer.Typer(
    help="Tokenized shards: Parquet/JSONL -> Megatron .bin/.idx, tokenizer training, mixtures, checks.",
    no_args_is_help=True,
)


@shards_app.command("build")
def build_cmd(
    corpus: list[Path] = typer.Argument(..., help="Parquet/JSONL files or folders of them (a `text` field)"),
    output: Path = typer.Option(..., "-o", "--output", help="output shard folder"),
    tokenizer: str = typer.Option(
        ..., "--tokenizer", help="tokenizer.json file, Hugging Face tokenizer folder or hub name"
    ),
    eos_token: str | None = typer.Option(
        None, "--eos-token", help="token after each document (default: EOS)"
    ),
    tasks: int = typer.Option(2, "--tasks", help="datatrove tasks (input files are split between them)"),
    workers: int = typer.Option(-1, "--workers", help="tasks run at once (-1: all)"),
    batch_size: int = typer.Option(1000, "--batch-size", help="documents per encode_batch call"),
    max_shard_mb: float = typer.Option(1024, "--max-shard-mb", help="start a new shard past this .bin size"),
    name: str | None = typer.Option(None, "--name", help="source name in the manifest (default: folder)"),
) -> None:
    """Tokenize CORPUS into Megatron indexed-dataset shards (EOS after each document; uint16 when the vocab fits).

    Reads Parquet/JSONL `text`; writes OUT/RANK_SHARD.bin + .idx (megatron-core layout), OUT/manifest.json
    (tokenizer, dtype, document and token counts, bytes and sha256 per file), OUT/summary.json and OUT/logs/
    (datatrove stats and completion markers: a rerun skips finished tasks).
    """
    from pipelines.executors import ExecutorConfig
    from shards.build import build_shards

    if tasks < 1:
        fail(f"--tasks {tasks}: must be at least 1")
    if workers != -1 and workers < 1:
        fail(f"--workers {workers}: must be -1 (all tasks at once) or at least 1")
    if batch_size < 1:
        fail(f"--batch-size {batch_size}: must be at least 1")
    if not (math.isfinite(max_shard_mb) and max_shard_mb > 0):
        fail(f"--max-shard-mb {max_shard_mb:g}: must be a number of megabytes above 0")
    # '' fell back to the folder's name without a word; '  ' was written to the manifest as the source's name
    if name is not None and not name.strip():
        fail(f"--name {name!r}: must name the source (leave --name out for the folder's name, {output.name})")
    check_output(output)
    try:
        summary = build_shards(
            [str(c) for c in corpus],
            output,
            tokenizer,
            ExecutorConfig(tasks=tasks, workers=workers),
            eos_token=eos_token,
            batch_size=batch_size,
            max_shard_bytes=int(max_shard_mb * 2**20),
            name=name,
        )
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
    print_summary(summary, title=f"shards build: {output}")


@shards_app.command("train-tokenizer")
def train_tokenizer_cmd(
    corpus: list[Path] = typer.Argument(..., help="Parquet/JSONL files or folders of them (a `text` field)"),
    output: Path = typer.Option(..., "-o", "--output", help="output tokenizer folder"),
    vocab_size: int = typer.Option(2048, "--vocab-size", help="vocabulary size, special tokens included"),
    max_docs: int = typer.Option(100_000, "--max-docs", min=1, help="train on at most this many documents"),
    min_frequency: int = typer.Option(2, "--min-frequency", min=0, help="minimum pair frequency for a merge"),
) -> None:
    """Train a byte-level BPE tokenizer on CORPUS texts (digits split one by one).

    Writes a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json) that
    transformers.AutoTokenizer loads, with eos <|endoftext|>, bos <|begin_of_text|> and pad <|pad|>.
    """
    from shards.tokenizer import iter_texts, load_tokenizer, train_tokenizer

    _check_tokenizer_output(output)  # before any input is read
    skipped: dict[str, Any] = {}
    try:
        texts = iter_texts([str(c) for c in corpus], limit=max_docs, skipped=skipped)
        out = train_tokenizer(texts, output, vocab_size=vocab_size, min_frequency=min_frequency)
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
    if skipped.get("bad_record"):  # what `shards build` drops as bad_record
        console.print(
            f"[yellow]warning:[/] skipped {skipped['bad_record']:,} JSONL row(s) that are not a JSON object with a "
            f"string `text` (not UTF-8, not JSON, or `text` a number or a list; the first: "
            f"{escape(skipped['first_bad_record'])})",
            soft_wrap=True,
        )
    if skipped.get("unreadable_files"):
        console.print(
            f"[yellow]warning:[/] {skipped['unreadable_files']:,} input file(s) damaged or truncated: read up to "
            f"the damage, the rest skipped (the first: {escape(skipped['first_unreadable'])})",
            soft_wrap=True,
        )
    size = load_tokenizer(out).vocab_size
    console.print(
        f"tokenizer saved to {out} (vocabulary {size}"
        + (f", asked for {vocab_size})" if size < vocab_size else ")")
    )


@shards_app.command("inspect")
def inspect_cmd(
    path: Path = typer.Argument(..., help="shard folder (with manifest.json) or a PREFIX"),
    output: Path | None = typer.Option(None, "-o", "--output", help="report folder (default: PATH/inspect)"),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help="decode samples (default: the manifest's)"
    ),
    samples: int = typer.Option(3, "--samples", help="documents to decode"),
) -> None:
    """Counts, document-length statistics, a length histogram and decoded samples of shards.

    Reads PATH's .bin/.idx (and manifest.json); writes OUT/inspect.json and OUT/length_hist.png. PATH may be a
    run's shards folder (RUN/shards): all its sources, with per-source counts. A damaged index is warned about.
    """
    from shards.inspection import inspect_shards

    if output is not None and output.exists() and not output.is_dir():
        fail(
            f"{output}: exists and is not a folder; -o names the report folder (inspect.json, length_hist.png)"
        )
    try:
        report = inspect_shards(path, output, tokenizer, samples)
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
    except OSError as err:  # an unwritable report folder, a file where a folder goes
        fail(f"{err.filename}: {err.strerror}" if err.filename else str(err))
    for row in report.pop("samples"):
        console.rule(f"{row['file']} #{row['document']} ({row['tokens']} tokens)")
        console.print(row.get("text", row["ids"]), markup=False, highlight=False)
    print(json.dumps(report, indent=2))
    for key in ("tokenizer_warning", "special_tokens_warning"):
        if report.get(key):
            console.print(f"[yellow]warning:[/] {escape(report[key])}", soft_wrap=True)
    for warning in report["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    if report["warnings"]:
        console.print(
            f"[yellow]warning:[/] damaged shards: the counts and samples above may be wrong; "
            f"`mathmix shards validate {escape(str(path))}` checks them all",
            soft_wrap=True,
        )


@shards_app.command("validate")
def validate_cmd(
    paths: list[Path] = typer.Argument(..., help="shard folders or PREFIXes"),
) -> None:
    """Check shards: .idx header and size, dtype, monotone pointers, .bin size vs index, manifest checksums and totals.

    Reads PATH's .bin/.idx and manifest.json; writes nothing. Exits 1 naming every bad file. A run's shards folder
    (RUN/shards) means each of its source folders, and its manifest checked against them.
    """
    from shards.validate import validate_path

    for path in paths:  # a typo is no shard with two files missing: checked before any path is validated
        prefix = str(path)[:-4] if str(path).endswith((".bin", ".idx")) else str(path)
        if not any(Path(p).exists() for p in (path, f"{prefix}.idx", f"{prefix}.bin")):
            fail(f"no such shard, prefix or folder: {path}")
    bad = 0
    for path in paths:
        report = validate_path(path)
        for error in report["errors"]:
            typer.echo(f"invalid: {error}", err=True)  # one unwrapped line per problem, easy to grep
        bad += len(report["errors"])
        for warning in report.get("warnings", []):  # the files are sound: reported, not failed
            typer.echo(f"warning: {warning}", err=True)
        status = "ok" if report["ok"] else "FAILED"
        sources = report.get("sources")  # a run's shards folder
        where = f" in {len(sources)} source folder(s) ({', '.join(sources)})" if sources is not None else ""
        typer.echo(f"{status} {path}: {report['files']} shard file(s) checked{where}", err=True)
    if bad:
        raise typer.Exit(1)


@shards_app.command("mix")
def mix_cmd(
    mixture: Path = typer.Argument(..., help="mixture YAML (sources with weight or tokens)"),
    run_dir: Path | None = typer.Option(None, "--run-dir", help="replaces {run_dir} in source paths"),
    total_tokens: int | None = typer.Option(
        None, "--total-tokens", min=1, help="override the mixture's total"
    ),
    output_arg: str | None = typer.Option(None, "-o", "--output", help="write the blend report JSON here"),
) -> None:
    """Build a mixture's blended document index and report per-source tokens, shares and epochs.

    Reads the mixture YAML and its shard folders; writes the report JSON (with -o: a new file or an earlier
    report, outside any stage folder) and warns for any source that must be repeated to meet its share.
    """
    from pydantic import ValidationError

    from mathmix.cli_util import format_validation_errors
    from shards.mixture import BlendedDocuments, MixtureConfig

    if output_arg is not None and output_arg.endswith(("/", os.sep)):
        fail(f"{output_arg}: names a folder; -o names the report file, e.g. {Path(output_arg) / 'mix.json'}")
    output = Path(output_arg) if output_arg is not None else None
    if output is not None:
        _check_report_path(output)
    if Path(mixture).is_dir():
        fail(f"{mixture}: is a folder; name the mixture YAML file (name, total_tokens, sources)")
    if not Path(mixture).exists():  # printed as `[Errno 2] No such file or directory: ...` (a pipe is read)
        fail(f"{mixture}: mixture file not found")
    try:
        config = MixtureConfig.from_yaml(mixture, run_dir)
        if run_dir is None:
            for source in config.sources:
                if uses := next((p for p in source.paths if "{run_dir}" in p), None):
                    fail(f"{mixture}: source {source.name}: {uses} uses {{run_dir}}, and --run-dir not given")
        blend = BlendedDocuments(config, total_tokens)
    except ValidationError as err:  # before ValueError, its base: one line naming each bad key
        fail(f"{mixture}: {format_validation_errors(err)}")
    except (FileNotFoundError, ValueError) as err:
        fail(f"{mixture}: {err}")
    for name in blend.empty:  # the note training prints: its target is 0
        console.print(
            f"[yellow]note:[/] source {escape(name)} has no tokens; its share goes to the others",
            soft_wrap=True,
        )
    if blend.unchecked:
        shown = ", ".join(blend.unchecked[:4]) + (", ..." if len(blend.unchecked) > 4 else "")
        console.print(
            f"[yellow]note:[/] {escape(shown)}: no manifest.json records the tokenizer of these shards, so it "
            "could not be checked",
            soft_wrap=True,
        )
    weights = [s.weight for s in config.sources if s.weight is not None]
    if weights and abs(sum(weights) - 1) > 1e-6:
        console.print(f"[yellow]note:[/] the weights sum to {sum(weights):g}; they are used as proportions")
    report = blend.report()
    for row in report["sources"]:
        flag = f"  [yellow]repeated x{row['epochs']:.2f}[/]" if row["repeated"] else ""
        console.print(
            f"{row['name']:>12}: {row['tokens']:>14,} tokens ({row['share']:.4f}) "
            f"target {row['target_tokens']:,}, {row['documents']:,} docs{flag}"
        )
    if output:
        try:
            write_json(output, report)  # written through /dev/stdout or a FIFO
        except OSError as err:
            fail(f"{output}: cannot write the report ({err.strerror or err})")


def _check_tokenizer_output(output: Path) -> None:
    """Fail (one line) where `train-tokenizer -o OUTPUT` would write into an existing file or a folder holding
    files: a tokenizer there may be the one shards were built with (their manifests name its path), and any other
    folder is another command's (a shard folder got a tokenizer.json added)."""
    if output.exists() and not output.is_dir():
        fail(f"{output}: exists and is not a folder; -o names a new tokenizer folder")
    if output.is_dir() and any(output.iterdir()):
        what = "holds a tokenizer" if (output / "tokenizer.json").exists() else "is not empty"
        fail(
            f"{output}: {what}; train-tokenizer writes a new folder (shards built with a tokenizer there would no "
            "longer match it): pick a new folder, or remove this one first"
        )


def _is_mix_report(path: Path) -> bool:
    """Whether PATH holds a report that `shards mix -o` wrote (so writing over it loses nothing else)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(data, dict)
        and {"name", "seed", "documents", "tokens", "sources"} <= data.keys()
        and isinstance(data["sources"], list)
        and all(isinstance(row, dict) and "target_tokens" in row for row in data["sources"])
    )


def _stage_folder(folder: Path) -> bool:
    """Whether FOLDER is a stage folder of a run or a command's output folder (its files are read as such)."""
    from shards.manifest import MANIFEST

    # a stage writes job.json (or the runner recipe-stage.json) before anything else; data/ and logs/ alone are no
    # mark: a user's project folder has them too
    if (folder / "recipe-stage.json").is_file() or (folder / "job.json").is_file():
        return True
    if (folder / "summary.json").is_file() and any(
        (folder / mark).exists() for mark in ("data", "logs", MANIFEST, "upstream.json", "rejects")
    ):
        return True
    return (folder / MANIFEST).is_file() and any(folder.glob("*.idx"))  # a shard folder


def _check_report_path(output: Path) -> None:
    """Fail (one line) where `mix -o OUTPUT` would replace another file, or write into a stage's folder."""
    if output.is_dir():
        fail(f"{output}: is a folder; -o names the report file, e.g. {output / 'mix.json'}")
    replaceable = not output.is_file() or output.stat().st_size == 0 or _is_mix_report(output)
    if output.exists() and not replaceable:  # /dev/stdout, a FIFO, an empty file: nothing lost
        fail(
            f"{output}: exists and is not a `shards mix` report; refusing to write over it (name a new file)"
        )
    try:
        stage = next((f for f in output.resolve().parents if _stage_folder(f)), None)
    except OSError:  # an unreadable folder above: not one this command can tell, nor write into
        stage = None
    if stage is not None:
        fail(
            f"{output}: inside {stage}, a stage folder of a run (or a command's output folder), which this report "
            "would change; write it outside the run's stage folders"
        )


def register(app: typer.Typer) -> None:
    app.add_typer(shards_app, name="shards")
