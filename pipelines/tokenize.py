"""Recipe stage `shards`: tokenize the curated corpus and each rewriter branch into Megatron shards.

Sources: the corpus (default RUN/decont/data, or the stage's `inputs`) becomes RUN/shards/corpus/, and every
RUN/branches/<task>/data with Parquet files becomes RUN/shards/<task>/, each a `shards build` output (shards,
manifest.json, summary.json, logs/). With `tokenizer: train` a byte-level BPE tokenizer is first trained on the
sources' texts into RUN/shards/tokenizer/ (the quickstart has no tokenizer to download). RUN/shards/manifest.json
lists the sources; RUN/shards/summary.json sums them (written last: it marks the stage complete).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipelines.stages import StageContext
from shards.tokenizer import MAX_VOCAB_SIZE

FOLDER = "shards"
PRODUCES_DOCUMENTS = False  # shards are not Parquet documents for a later document stage
READS = (  # what --dry-run shows
    "{run_dir}/decont/data (the corpus; without a decont stage the previous document stage's data/, dedup's or "
    "web's after a rewrite stage) and {run_dir}/branches/<task>/data"
)


class Config(BaseModel):
    """Settings of the `shards` stage."""

    model_config = ConfigDict(extra="forbid")

    inputs: list[str] = Field(default_factory=list, description="corpus folders (default: RUN/decont/data)")
    tokenizer: str = Field(
        "train",
        description="'train' (BPE on the inputs), or a tokenizer.json, HF tokenizer folder or hub name",
    )
    vocab_size: int = Field(
        2048,
        ge=300,
        le=MAX_VOCAB_SIZE,
        description="vocabulary size when tokenizer is 'train' (at most 2**20: the trainer allocates by it)",
    )
    tokenizer_max_docs: int = Field(20_000, ge=1, description="documents to train the tokenizer on")
    branches: bool = Field(True, description="also shard RUN/branches/<task>/data (rewriter outputs)")
    skip_branches: list[str] = Field(
        default_factory=lambda: ["score"], description="branches that are not training text (score: labels)"
    )
    corpus_name: str = Field("corpus", description="source name of the corpus: its folder under RUN/shards/")
    eos_token: str | None = None
    batch_size: int = Field(1000, ge=1)
    max_shard_mb: float = Field(
        1024, gt=0, allow_inf_nan=False, description="start a new shard past this .bin size"
    )

    @field_validator("corpus_name")
    @classmethod
    def _plain_folder_name(cls, name: str) -> str:
        # the name is a folder under RUN/shards/: '' or '.' is RUN/shards itself, 'a/b' or '..' leaves it
        if not name.strip() or name in (".", "..") or "/" in name or "\\" in name:
            raise ValueError(f"{name!r}: must be a plain folder name (no '/', not '', '.' or '..')")
        return name


# The files of a Hugging Face tokenizer folder that loading it may read (shards.tokenizer.load_tokenizer: tokenizer.json
# and the EOS from tokenizer_config.json or special_tokens_map.json; the rest through transformers).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.json", "merges.txt", "vocab.txt", "tokenizer.model", "spiece.model")  # fmt: skip


def files_read(
    config: Config, run_dir: Path | str, previous: Mapping[str, Path] | None = None
) -> dict[str, str]:
    """Files the stage reads besides its sources, whose contents the recipe stage's record holds (see
    pipelines.web.files_read): the tokenizer files of a tokenizer folder the recipe names (`tokenizer NAME`). Left
    out, a tokenizer replaced in that folder left the stage "already complete" with shards of the old token ids.
    `train` (the default) builds the tokenizer in the stage's own folder; a hub name is recorded by its name."""
    folder = Path(config.tokenizer)  # as load_tokenizer reads it
    if config.tokenizer != "train" and folder.is_file():  # a tokenizer.json file, and the EOS beside it
        read = {f"tokenizer {folder.name}": str(folder.resolve())}
        if folder.name == "tokenizer.json":
            for name in ("tokenizer_config.json", "special_tokens_map.json"):
                if (folder.parent / name).is_file():
                    read[f"tokenizer {name}"] = str((folder.parent / name).resolve())
        return read
    if config.tokenizer == "train" or not folder.is_dir():
        return {}
    names = [name for name in TOKENIZER_FILES if (folder / name).is_file()]
    return {f"tokenizer {name}": str((folder / name).resolve()) for name in names}


def preflight(config: Config, run_dir: Path | str, plan: list[dict] | None = None) -> None:
    """What the stage reads that no earlier stage writes, checked by `mathmix run` before its first stage and in
    --dry-run: a tokenizer given by path exists (`prerun_checks.check_tokenizer`). A bad one was
    found after web, dedup and decont had run in full."""
    from pipelines.prerun_checks import check_tokenizer, written_by_earlier_stage

    if config.tokenizer != "train" and not written_by_earlier_stage(config.tokenizer, plan, "shards"):
        check_tokenizer(config.tokenizer)


def sources(config: Config, ctx: StageContext) -> dict[str, list[str]]:
    """Source name -> input folders: the corpus, then each rewriter branch with data."""
    return find_sources(config, ctx.inputs, ctx.run_dir, ctx.previous)


def inputs_read(
    config: Config, run_dir: Path | str, inputs: list[str], previous: Mapping[str, Path]
) -> list[str]:
    """The folders the stage shards (`sources`: the corpus, then each rewriter branch with data), which the recipe
    stage's record holds with their sizes in place of INPUTS, the recipe's: by default the previous document
    stage's data/ (dedup's or web's after a rewrite stage, whose RUN/branches/data no stage writes)."""
    return [p for paths in find_sources(config, inputs, Path(run_dir), previous).values() for p in paths]


def find_sources(
    config: Config, inputs: list[str], run_dir: Path, previous: Mapping[str, Path]
) -> dict[str, list[str]]:
    """`sources` of the stage's INPUTS (the recipe's), run folder and earlier stages' folders (PREVIOUS)."""
    from shards.tokenizer import corpus_files

    if config.inputs:
        corpus = list(inputs)
    else:
        decont = Path(previous.get("decont", run_dir / "decont")) / "data"
        corpus = [str(decont)] if decont.is_dir() else list(inputs)
        # after a rewrite stage the previous document stage's data/ is RUN/branches/data, which no stage writes
        if not any(Path(p).exists() for p in corpus):
            corpus = next(([str(previous[s] / "data")] for s in ("dedup", "web") if s in previous), corpus)
    found = {config.corpus_name: corpus} if corpus else {}
    branches = Path(previous.get("rewrite", run_dir / "branches"))
    if config.branches and branches.is_dir():
        tasks = [
            p for p in branches.iterdir() if (p / "data").is_dir() and p.name not in config.skip_branches
        ]
        for task_dir in sorted(tasks):
            if task_dir.name == config.corpus_name and config.corpus_name in found:
                raise ValueError(
                    f"shards: branch {task_dir} has the corpus's source name {config.corpus_name!r}; set "
                    "corpus_name to another name or list the branch in skip_branches"
                )  # one source name would have held the branch's shards and lost the corpus's
            if corpus_files([task_dir / "data"]):
                found[task_dir.name] = [str(task_dir / "data")]
    return found


def run_stage(config: Config, ctx: StageContext) -> dict[str, Any]:
    """Train or load the tokenizer, shard every source, write RUN/shards/manifest.json and summary.json."""
    from curate.summary import write_summary
    from mathmix.cli_util import write_json
    from shards.build import build_shards
    from shards.tokenizer import iter_texts, train_tokenizer

    start = time.time()
    found = sources(config, ctx)
    if not found:
        raise FileNotFoundError(
            f"shards: no input (looked for {ctx.run_dir / 'decont' / 'data'} and branches)"
        )
    tokenizer = config.tokenizer
    if tokenizer == "train":
        tok_dir = ctx.out_dir / "tokenizer"
        if not (
            tok_dir / "tokenizer.json"
        ).is_file():  # a rerun keeps the tokenizer the shards were made with
            # lines the shards drop (bad_record) and damaged files (unreadable_files) are skipped here too, and
            # counted by the builds below
            texts = iter_texts(
                [p for paths in found.values() for p in paths], limit=config.tokenizer_max_docs, skipped={}
            )
            train_tokenizer(texts, tok_dir, vocab_size=config.vocab_size)
        tokenizer = str(tok_dir)
    per_source: dict[str, dict[str, Any]] = {}
    for name, paths in found.items():
        summary = build_shards(
            paths,
            ctx.out_dir / name,
            tokenizer,
            ctx.executor,
            eos_token=config.eos_token,
            batch_size=config.batch_size,
            max_shard_bytes=int(config.max_shard_mb * 2**20),
            name=name,
            run_dir=ctx.run_dir,
        )
        per_source[name] = summary
    return _finish(config, ctx, tokenizer, per_source, time.time() - start, write_json, write_summary)


# What a source's build reports beside its counts, that nothing is lost unseen (`print_summary` warns of each):
# summed over the sources, or for a list of files, joined.
NOTES = ("rows_without_text_field", "unreadable_files", "files_all_bad_records")


def _notes(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The NOTES of SUMMARIES together: counts summed, file lists joined; a note none of them has is left out."""
    notes: dict[str, Any] = {}
    for key in NOTES:
        values = [s[key] for s in summaries if s.get(key)]
        if values:
            notes[key] = [f for v in values for f in v] if isinstance(values[0], list) else sum(values)
    return notes


def _finish(config, ctx, tokenizer, per_source, seconds, write_json, write_summary) -> dict[str, Any]:
    dropped: Counter = Counter()
    for summary in per_source.values():
        dropped.update(summary["dropped"])
    first = next(iter(per_source.values()))
    info = {k: first.get(k) for k in ("tokenizer_sha256", "vocab_size", "eos_id", "dtype")}
    manifest = {
        "tokenizer": tokenizer,
        **info,
        "sources": {
            name: {"path": str(ctx.out_dir / name), "documents": s["documents"], "tokens": s["tokens"]}
            for name, s in per_source.items()
        },
    }
    write_json(ctx.out_dir / "manifest.json", manifest)
    summary = {
        "docs_in": sum(s["docs_in"] for s in per_source.values()),
        "docs_out": sum(s["docs_out"] for s in per_source.values()),
        "dropped": dict(sorted(dropped.items())),
        **_notes(list(per_source.values())),  # the build's notes, which the runner's print_summary warns of
        "seconds": round(seconds, 2),
        "tokens_out": sum(s["tokens"] for s in per_source.values()),
        "tokenizer": tokenizer,
        **info,
        "sources": {
            name: {k: s[k] for k in ("docs_in", "docs_out", "tokens", "files", "input_files")} | _notes([s])
            for name, s in per_source.items()
        },
    }
    write_summary(ctx.out_dir, summary)
    return summary
