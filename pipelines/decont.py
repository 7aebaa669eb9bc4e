"""The decont stage: drop (or flag) documents sharing a 13-gram with a benchmark's problems or solutions.

One datatrove job: reader -> DecontFilter -> ParquetWriter (OUT/data/*.parquet). Writes OUT/contamination.jsonl
(one line per contaminated document: id, benchmark, record line, matched n-grams), OUT/summary.json with
`hits_per_benchmark` (documents per benchmark) and OUT/logs/. Also `check_prompts` for
`mathmix decont --check PROMPTS --against EVALS` (RL prompt sets against eval sets).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from curate.decont_sources import as_when_training_splits_were_read
from pipelines.decont_folders import (  # noqa: F401 (earlier_matcher_refusal: re-exported)
    _finished_by_other_matcher,
    _other_matcher,
    _training_splits_read_before,
    earlier_matcher_refusal,
)

FOLDER = "decont"
EXTRA_COLUMNS = [("contaminated", pa.bool_()), ("decont_benchmarks", pa.string())]


DEFAULT_BENCHMARKS = "{run_dir}/sample/bench"  # what the quickstart writes
# A recipe stage's record holds the benchmarks as the files they resolve to (`files_read`, with their digests), not
# as typed: a folder and the one file in it, or the same files in another order, are the same stage (as the same
# job of `mathmix decont`). See pipelines.runner.stage_identity.
SETTINGS_AS_FILES = ("benchmarks",)


class Config(BaseModel):
    """Settings of the decont stage (the `decont:` block of a recipe)."""

    model_config = ConfigDict(extra="forbid")

    inputs: list[str] = Field(
        default_factory=list, description="Parquet/JSONL with id, text (default: dedup/data)"
    )
    benchmarks: list[str] = Field(
        default_factory=lambda: [DEFAULT_BENCHMARKS],
        description="benchmark JSONL files or folders of them ({run_dir} = the run folder; default: the "
        "quickstart's {run_dir}/sample/bench)",
    )
    ngram: int = Field(13, ge=1, description="n-gram size in word/number tokens")
    min_words: int = Field(
        3, ge=0, description="n-grams need this many prose words (formula-only ones skipped)"
    )
    short_min_tokens: int = Field(
        8,
        ge=0,
        description="problems shorter than one n-gram are matched whole from this many tokens (0: off)",
    )
    mode: Literal["remove", "flag"] = Field(
        "remove", description="remove contaminated docs or only flag them"
    )
    tasks: int | None = Field(None, ge=1, description="datatrove tasks (default: the executor's)")
    write_rejects: bool = Field(True, description="write removed documents to OUT/rejects/ with their reason")


def run_decont(config: Config, inputs: list[str], out_dir: Path, executor, benchmarks: list[str]) -> dict:
    """Run decontamination over `inputs` into `out_dir`; returns (and writes) the summary."""
    from curate.decont import BenchmarkIndex, validate_benchmarks
    from curate.decont_sources import left_out_training_splits
    from curate.dedup_io import (
        build_readers,
        build_rejects_writer,
        build_writer,
        document_files,
        drop_empty_text,
        file_split_field,
        minimal_schema,
        output_schema,
    )
    from curate.summary import ensure_data_file, summarize_logs, write_summary
    from mathmix.cli_util import console
    from pipelines.decont_index import INDEX_FILE, SavedIndexFilter, save_index
    from pipelines.job_record import check_job, check_output_outside_inputs
    from pipelines.output_folder import stage_seconds

    out_dir, start = Path(out_dir), time.time()
    check_output_outside_inputs(out_dir, inputs)
    check_output_outside_inputs(out_dir, benchmarks, "benchmark")
    files = document_files(inputs)
    # a missing file, or benchmarks with nothing to check, fail here, before the job is recorded
    validate_benchmarks(benchmarks, config.ngram, config.min_words, config.short_min_tokens)
    work = out_dir / "work"
    tasks = max(1, min(config.tasks or executor.tasks, len(files[0]) + len(files[1])))
    split = file_split_field(out_dir, ["logs"], tasks)  # an earlier mathmix's split is not resumed
    identity, earlier = decont_job_identity(
        config, [*files[0], *files[1]], out_dir.parent, benchmarks, tasks, split
    )
    try:
        check_job(out_dir, identity, "decont run", outputs=OUTPUTS, earlier=earlier)
    except ValueError as err:
        if (kept := _finished_by_other_matcher(out_dir, identity)) is not None:
            console.print(
                f"decont: {out_dir} was finished by an earlier matcher: kept as it is", markup=False
            )
            return kept
        if refusal := _training_splits_read_before(out_dir, identity, benchmarks) or _other_matcher(out_dir):
            raise refusal from err
        raise
    console.print(f"[dim]decont: indexing {len(identity['benchmarks'])} benchmark file(s)[/]")
    index = BenchmarkIndex(benchmarks, config.ngram, config.min_words, config.short_min_tokens)
    save_index(index, work / INDEX_FILE)
    rejects = build_rejects_writer(out_dir / "rejects", "${rank}.parquet") if config.write_rejects else None
    step = SavedIndexFilter(
        work / INDEX_FILE,
        benchmarks,
        config.ngram,
        config.mode,
        work / "report",
        exclusion_writer=rejects,
        min_words=config.min_words,
        short_min_tokens=config.short_min_tokens,
    )
    schema = output_schema(files[0], EXTRA_COLUMNS, files[1])  # one schema for every task's file
    empty_rejects = (
        build_rejects_writer(out_dir / "rejects", "empty_${rank}.parquet") if config.write_rejects else None
    )
    pipeline = [
        *build_readers(files, work),
        drop_empty_text(empty_rejects),
        step,
        build_writer(out_dir / "data", schema),
    ]
    workers = 1 if tasks == 1 else None  # one task: run it in this process, no pool to start
    executor.run(
        executor.build(pipeline, out_dir / "logs", job_name="mathmix-decont", tasks=tasks, workers=workers)
    )
    (work / INDEX_FILE).unlink(missing_ok=True)  # every task has finished with it
    ensure_data_file(out_dir / "data", schema or minimal_schema(EXTRA_COLUMNS))
    summary = summarize_logs(out_dir / "logs", seconds=stage_seconds(out_dir, start, executor))
    hits, contaminated = _merge_report(work / "report", out_dir / "contamination.jsonl")
    summary.update(
        {
            "mode": config.mode,
            "ngram": config.ngram,
            # documents, however many benchmarks each one hit (hits_per_benchmark counts them per benchmark)
            "flagged": contaminated if config.mode == "flag" else 0,
            "hits_per_benchmark": dict(sorted(hits.items())),
            "benchmark_records": dict(sorted(index.benchmarks.items())),
            # records found only whole (short problems), and records the rules cannot find at all
            "benchmark_records_matched_whole": dict(sorted(index.matched_whole.items())),
            "benchmark_records_unmatchable": dict(sorted(index.too_short.items())),
            # records whose problem statement alone no rule finds (a page copying only the problem is kept)
            "benchmark_problems_unmatchable": dict(sorted(index.problems_unmatchable.items())),
            # n-grams left out of the index: shared by distinct problems, or in the left-out training splits
            "benchmark_template_ngrams": index.template_ngrams,
            "matcher": index.matcher,
            # files that held no checkable record (an error when no file holds one)
            "benchmark_files_unused": [str(p) for p in index.unused_files],
            # training splits under the benchmark folders given, not read (a file named is always read)
            "benchmark_files_left_out": [
                str(p) for files in left_out_training_splits(benchmarks).values() for p in files
            ],
            "report": "contamination.jsonl",  # in the stage folder (as audit's report.html): spelled the same always
        }
    )
    write_summary(out_dir, summary)
    return summary


# What a decont job writes in OUT besides job.json and summary.json (cleared when another job takes over a
# folder where this one finished nothing).
OUTPUTS = ("data", "logs", "rejects", "work", "contamination.jsonl", "contamination.tmp")


# An earlier mathmix read benchmark folders whole, training splits too: a stage it finished (its record made with
# them) is kept as finished, with this said on every run, rather than refused: a run folder's later stages (a
# rewrite's GPU hours) hang on it. `pipelines.runner` reads it; within the context the stage's identity comes out
# as that record.
SUPERSEDED = (
    as_when_training_splits_were_read,
    "finished by an earlier mathmix against the training splits under its benchmark folders too: its corpus also "
    "lacks the pages quoting them (kept as finished; delete {out_dir} and the stages after it to redo it without)",
)


def files_read(
    config: Config, run_dir: Path | str, previous: Mapping[str, Path] | None = None
) -> dict[str, str]:
    """The benchmark files the stage's settings name, the default's included (see pipelines.web.files_read; PREVIOUS
    is not needed here); none while they are missing (the stage itself then says so)."""
    from curate.decont_sources import benchmark_paths

    return benchmark_paths(stage_benchmarks(config, run_dir, check=False))


def decont_job_identity(
    config: Config,
    files: Sequence[str | Path],
    run_dir: Path,
    benchmarks: list[str],
    tasks: int,
    split: Mapping[str, str] | None = None,
) -> tuple[dict, list[dict]]:
    """The decont job's identity, and its form from before benchmarks were recorded as files (a record in that
    form is this job too).

    Benchmarks are recorded as the files read, resolved and sorted (a folder and the files in it, or the same
    files in another order, are the same benchmarks: the output names and orders them alike), with their contents
    (`file_digests`, by benchmark name): a benchmark file replaced at the same path is another job. A record with
    the files in the order given (before they were sorted) is this job too. SPLIT: the `file_split` field
    (`curate.dedup_io.file_split_field`), none for a folder an earlier mathmix finished.
    """
    from curate.decont import MATCHER
    from curate.decont_sources import benchmark_files
    from pipelines.job_record import file_digest, job_identity

    named = [(name, str(path.resolve())) for name, path in benchmark_files(benchmarks)]
    # the benchmarks read are these files, not the block's patterns
    settings = config.model_dump(mode="json", exclude={"benchmarks"}, exclude_defaults=True)
    digests = {f"benchmark {name}": [path, file_digest(path)] for name, path in named}
    identity = job_identity(files, settings, run_dir, command="decont", benchmarks=sorted(p for _, p in named),
                            tasks=tasks, file_digests=digests, matcher=MATCHER, **(split or {}))  # fmt: skip
    given = job_identity([], {}, run_dir, benchmarks=[p for _, p in named])["benchmarks"]
    typed = job_identity([], {}, run_dir, benchmarks=[str(Path(b).resolve()) for b in benchmarks])
    legacy = {k: v for k, v in identity.items() if k not in ("command", "file_digests")}
    earlier = [{**identity, "benchmarks": given}] if given != identity["benchmarks"] else []
    return identity, [*earlier, {**legacy, "benchmarks": typed["benchmarks"]}]


def _merge_report(report_dir: Path, out_path: Path) -> tuple[Counter, int]:
    """Concatenate the per-task reports; count contaminated documents per benchmark, and in all."""
    hits: Counter = Counter()
    documents = 0
    tmp = out_path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for path in sorted(report_dir.glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                hits.update({o["benchmark"] for o in row["overlaps"]})
                documents += 1
                out.write(line + "\n")
    tmp.replace(out_path)
    return hits, documents


def check_prompts(
    prompt_files: list[str],
    evals: list[str],
    ngram: int = 13,
    min_words: int = 3,
    short_min_tokens: int = 8,
) -> dict:
    """Overlaps of RL prompt sets (JSONL or `.json` arrays) with eval sets.

    A row's prompt is read from `prompt` / `problem` / `question` / `text` / `messages` ... (see
    `curate.decont_sources.prompt_texts`); a row with none is counted in `unreadable` (first lines listed), not
    passed as clean. An eval folder's training splits are left out (`curate.decont_sources.is_training_split`), a
    prompt folder's are not. Returns {"prompts": N checked, "contaminated": K, "unreadable": U, "unreadable_rows":
    [...], "hits_per_benchmark": {...}, "benchmark_files_left_out": [...], "rows": [{file, line, overlaps}]}.
    No readable prompt at all is a ValueError.
    """
    from curate.decont import BenchmarkIndex
    from curate.decont_sources import benchmark_files, prompt_texts, say_left_out_training_splits
    from mathmix.records import read_records

    # a missing prompt file fails before the index; prompt sets are training data: a folder keeps every file
    files = benchmark_files(prompt_files, what="prompt")
    left_out = say_left_out_training_splits(evals)  # eval folders: their training splits are not checked
    # templates are read from the eval folders' training splits, never from the prompt sets being checked (MATH8K
    # checked against bench/ would otherwise find none of its own n-grams)
    checked = {path.resolve() for _, path in files}
    training = [p for p in left_out if p.resolve() not in checked]
    index = BenchmarkIndex(evals, ngram, min_words, short_min_tokens, training_files=training)
    rows: list[dict] = []
    unreadable: list[dict] = []
    hits: Counter = Counter()
    total = 0
    for _name, path in files:
        for line_no, record in read_records(path):
            texts = prompt_texts(record) if isinstance(record, dict) else []
            if not texts:
                reason = "no_prompt" if isinstance(record, dict) else "not_an_object"
                unreadable.append({"file": str(path), "line": line_no, "reason": reason})
                continue
            total += 1
            overlaps = [o for t in texts for o in index.find(t)]
            if overlaps:
                hits.update({o.benchmark for o in overlaps})
                rows.append({"file": str(path), "line": line_no, "overlaps": [o.to_dict() for o in overlaps]})
    if not total:
        shown = ", ".join(str(p) for _, p in files[:5]) + (" ..." if len(files) > 5 else "")
        raise ValueError(
            f"no readable prompt in {shown} ({len(unreadable)} rows): a row needs a prompt, problem, question, "
            "text or messages field"
        )
    return {
        "prompts": total,
        "contaminated": len(rows),
        "unreadable": len(unreadable),
        "unreadable_rows": unreadable[:100],
        "hits_per_benchmark": dict(sorted(hits.items())),
        "benchmark_files_left_out": [str(p) for p in left_out],
        "rows": rows,
    }


def stage_benchmarks(config: Config, run_dir: Path | str, check: bool = True) -> list[str]:
    """The benchmark paths of a recipe's decont block, `{run_dir}` expanded (`mathmix.paths.run_path`: a folder
    beside a run folder not made yet is found); with CHECK, ValueError where the block names none and the default
    (the quickstart's sample) is not there."""
    from mathmix.paths import run_path

    benchmarks = [run_path(b, run_dir) for b in config.benchmarks]
    if check and config.benchmarks == [DEFAULT_BENCHMARKS] and not Path(benchmarks[0]).exists():
        raise ValueError(
            f"no benchmarks to decontaminate against: set stages.decont.benchmarks (the default, {benchmarks[0]}, "
            "is the sample that only the quickstart writes)"
        )
    return benchmarks


def preflight(config: Config, run_dir: Path | str, plan: list[dict] | None = None) -> None:
    """What `run_decont` checks of the benchmarks before any work (`curate.decont.validate_benchmarks`: each path
    exists, and they hold a checkable record), checked by `mathmix run` before its first stage and in --dry-run."""
    from curate.decont import validate_benchmarks

    validate_benchmarks(
        stage_benchmarks(config, run_dir), config.ngram, config.min_words, config.short_min_tokens
    )


def run_stage(config: Config, ctx) -> dict:
    """Recipe stage `decont`: reads the previous stage's data/ (or `inputs`), writes RUN/decont/."""
    return run_decont(config, ctx.inputs, ctx.out_dir, ctx.executor, stage_benchmarks(config, ctx.run_dir))
