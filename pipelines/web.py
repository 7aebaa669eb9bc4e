"""The web stage: WARC / HTML / JSONL -> math-aware text -> URL blocklist -> language ID -> math prefilter ->
quality -> (fastText math score) -> Parquet, as one datatrove pipeline.

Used by `mathmix web` and by the `web` recipe stage. Output: OUT/data/*.parquet (schema WEB_SCHEMA),
OUT/summary.json, OUT/logs/ (datatrove stats and completion markers; a rerun skips finished tasks).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from curate.summary import ensure_data_file

# What a web job reads a page as. Recorded in job.json: an unfinished folder of another version is refused (its
# finished tasks would hold pages read another way than the rest); a finished one is kept. 2: a UTF-8 BOM wins over the declared charset,
# reading resumes past a damaged gzip member, WARCs gzipped as one stream, StackExchange chrome removed, `<ol start=N>` numbers kept, MathML
# accents without accent="true" as \dot{x}, `$ x_i $` on TeX pages and
# `$..$` in class math-inline as math, a formula after `\require{..}`/definitions kept,
# <pre> lines from <br>/blocks, table captions kept, an equation-class image
# with a prose alt not math, MediaWiki chrome ("[edit]", jump links, navboxes) removed. None
# recorded: 1.
EXTRACTION = "mathmix-web/2"

WEB_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("url", pa.string()),
        ("domain", pa.string()),
        ("source_file", pa.string()),
        ("warc_offset", pa.int64()),
        ("warc_length", pa.int64()),
        ("record_id", pa.string()),
        ("fetch_date", pa.string()),
        ("content_type", pa.string()),
        ("charset", pa.string()),
        ("lang", pa.string()),
        ("lang_score", pa.float64()),
        ("prefilter_score", pa.float64()),
        ("n_chars", pa.int64()),
        ("extractor", pa.string()),
        ("math_score", pa.float64()),
    ]
)


class Config(BaseModel):
    """Settings of the web stage (the `web:` block of a recipe)."""

    model_config = ConfigDict(extra="forbid")

    inputs: list[str] = Field(default_factory=list, description="WARC files, .html folders, JSONL with html")
    max_page_bytes: int = Field(5_000_000, gt=0, description="pages larger than this are dropped (too_large)")
    engine: str = Field("fast", pattern="^(fast|clean)$")
    extract_timeout_s: float = Field(5.0, gt=0)
    blocklist: str | None = Field(None, description="plain file: one domain or URL prefix per line")
    languages: list[str] = Field(default_factory=lambda: ["en"])
    lang_threshold: float = Field(0.65, ge=0, le=1)
    prefilter_threshold: float = Field(1.0, ge=0)
    min_words: int = Field(20, ge=0)
    max_duplicate_line_fraction: float = Field(0.5, gt=0, le=1)
    min_alpha_fraction: float = Field(0.25, ge=0, le=1)
    math_model: str | None = Field(
        None, description="fastText math classifier; default: the run's classifier/model.bin when it exists"
    )
    math_threshold: float | None = Field(None, ge=0, le=1, description="keep docs with math_score >= this")
    keep_top_percent: float | None = Field(None, gt=0, le=100, description="keep the top k% by math_score")
    tasks: int | None = Field(None, ge=1, description="datatrove tasks (default: the executor's)")
    write_rejects: bool = Field(
        False, description="write dropped documents to OUT/rejects/ with their reason"
    )


def _adapter(self, document) -> dict[str, Any]:
    row = {name: document.metadata.get(name) for name in WEB_SCHEMA.names}
    row["id"] = document.id
    row["text"] = document.text
    row["n_chars"] = len(document.text)
    return row


REJECT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("url", pa.string()),
        ("domain", pa.string()),
        ("reason", pa.string()),
        ("step", pa.string()),
        ("source_file", pa.string()),
        ("warc_offset", pa.int64()),
        ("lang", pa.string()),
        ("lang_score", pa.float64()),
        ("prefilter_score", pa.float64()),
        ("math_score", pa.float64()),
        ("n_chars", pa.int64()),
        ("text", pa.string()),
    ]
)


def _reject_adapter(step: str):
    def adapter(self, document) -> dict[str, Any]:
        return {
            "id": document.id,
            "url": document.metadata.get("url"),
            "domain": document.metadata.get("domain"),
            "reason": document.metadata.get("filter_reason"),
            "step": step,
            **{
                key: document.metadata.get(key)
                for key in (
                    "source_file",
                    "warc_offset",
                    "lang",
                    "lang_score",
                    "prefilter_score",
                    "math_score",
                )
            },
            "n_chars": len(document.text),
            "text": document.text[:20_000],  # enough to see why it was dropped
        }

    return adapter


def build_pipeline(config: Config, files: list[str], out_dir: Path, math_model: str | None) -> list[Any]:
    """The web stage's datatrove steps, reading the files listed in OUT/logs/inputs.txt."""
    from datatrove.pipeline.writers import ParquetWriter

    from curate.extract_step import MathAwareExtractor
    from curate.filters import MathQualityFilter, UrlBlocklistFilter
    from curate.lid import MathLanguageFilter
    from curate.prefilter import HtmlMathMarkers, MathPrefilter
    from curate.readers import WebPageReader

    paths_file = out_dir / "logs" / "inputs.txt"
    paths_file.parent.mkdir(parents=True, exist_ok=True)
    paths_file.write_text("".join(f.lstrip("/") + "\n" for f in files))
    rejects = config.write_rejects

    def exclusion(step: str):
        if not rejects:
            return None
        return ParquetWriter(
            str(out_dir / "rejects"),
            output_filename=step + "-${rank}.parquet",
            adapter=_reject_adapter(step),
            schema=REJECT_SCHEMA,
        )

    steps: list[Any] = [
        WebPageReader(str(paths_file), max_bytes=config.max_page_bytes, doc_progress=True),
        UrlBlocklistFilter(config.blocklist),
        HtmlMathMarkers(),
        MathAwareExtractor(
            engine=config.engine, timeout_s=config.extract_timeout_s, max_bytes=config.max_page_bytes
        ),
        MathLanguageFilter(languages=tuple(config.languages), threshold=config.lang_threshold),
        MathPrefilter(threshold=config.prefilter_threshold),
        MathQualityFilter(
            min_words=config.min_words,
            max_duplicate_line_fraction=config.max_duplicate_line_fraction,
            min_alpha_fraction=config.min_alpha_fraction,
        ),
    ]
    if math_model:
        from classifiers.scorer import MathScoreFilter

        steps.append(
            MathScoreFilter(
                math_model, threshold=config.math_threshold, keep_top_percent=config.keep_top_percent
            )
        )
    for step in steps:
        if hasattr(step, "exclusion_writer") and rejects:
            step.exclusion_writer = exclusion(type(step).__name__)
    steps.append(
        ParquetWriter(
            str(out_dir / "data"), output_filename="${rank}.parquet", adapter=_adapter, schema=WEB_SCHEMA
        )
    )
    return steps


def check_input_kinds(inputs: list[str]) -> None:
    """ValueError naming an input file of a kind the reader does not read (a `.csv` a recipe glob matched): it
    would read 0 pages from it and count it among `input_files`, as if it held none. Files of other kinds inside
    an input folder are skipped, as documented."""
    from curate.readers import HTML_SUFFIXES, JSONL_SUFFIXES, WARC_SUFFIXES

    kinds = WARC_SUFFIXES + HTML_SUFFIXES + JSONL_SUFFIXES
    for item in inputs:
        if Path(item).is_file() and not Path(item).name.lower().endswith(kinds):
            raise ValueError(
                f"{item}: not a supported input; the web stage reads {', '.join(kinds)} files and folders of them"
                " (a recipe glob that matched it can name the kind: crawl/*.warc.gz)"
            )


def run_web(
    config: Config, inputs: list[str], out_dir: Path, executor, math_model: str | None = None
) -> dict:
    """Run the web stage over `inputs` into `out_dir`; returns (and writes) the summary."""
    from curate.readers import NO_HTML_FIELD, input_files
    from curate.summary import summarize_logs, write_summary
    from pipelines.job_record import check_job, check_output_outside_inputs
    from pipelines.output_folder import stage_seconds
    from pipelines.prerun_checks import check_math_model

    out_dir = Path(out_dir)
    check_output_outside_inputs(out_dir, inputs)
    check_input_kinds(inputs)
    if math_model:  # before job.json: the scoring step loads it only at the first page it scores
        check_math_model(math_model)
    files = input_files(inputs)
    if not files:
        raise FileNotFoundError(f"no WARC, .html or JSONL files in {', '.join(inputs)}")
    start = time.time()
    tasks = min(config.tasks or executor.tasks, len(files))
    identity, earlier = web_job_identity(config, files, out_dir.parent, math_model, tasks)
    try:
        check_job(out_dir, identity, "web run", outputs=OUTPUTS, earlier=earlier)
    except ValueError as err:
        kept = _other_extraction(out_dir, identity)
        if isinstance(kept, dict):
            from mathmix.cli_util import console

            console.print(f"web: {out_dir} was finished by an earlier reader: kept as it is", markup=False)
            return kept
        if kept is not None:
            raise kept from err
        raise
    pipeline = build_pipeline(config, files, out_dir, math_model)
    executor.run(executor.build(pipeline, out_dir / "logs", job_name="mathmix-web", tasks=tasks))
    ensure_data_file(out_dir / "data", WEB_SCHEMA)
    summary = summarize_logs(out_dir / "logs", seconds=stage_seconds(out_dir, start, executor))
    summary["input_files"] = len(files)
    if no_html := _rows_without_html(out_dir / "logs"):
        summary[NO_HTML_FIELD] = no_html
    write_summary(out_dir, summary)
    return summary


def _rows_without_html(logs: Path) -> int:
    """JSONL/JSON rows that are objects without an `html` field (the reader's count; each is a bad_record)."""
    from curate.readers import NO_HTML_FIELD
    from curate.summary import read_step_stats

    return int(sum(labels.get(NO_HTML_FIELD, 0) for _, labels in read_step_stats(logs)))


OUTPUTS = ("data", "logs", "rejects")  # what a web job writes in OUT, besides job.json and summary.json


def web_job_identity(
    config: Config, files: list[str], run_dir: Path, math_model: str | None, tasks: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The web job's identity, and its form from before web recorded its command (a record in that form is
    this job too).

    The math model and the blocklist are read besides the inputs: their contents count (`file_digests`), so a
    model retrained, or a list edited, at the same path is another job.
    """
    from pipelines.job_record import file_digest, job_identity

    read = {"math_model": math_model, "blocklist": config.blocklist}
    digests = {what: [path, file_digest(path)] for what, path in read.items() if path}
    extra: dict[str, Any] = {"file_digests": digests} if digests else {}
    identity = job_identity(
        files,
        config,
        run_dir,
        command="web",
        math_model=math_model,
        tasks=tasks,
        extraction=EXTRACTION,
        **extra,
    )
    return identity, [{k: v for k, v in identity.items() if k != "command"}]


def _earlier_reader_record(out_dir: Path) -> dict[str, Any] | None:
    """OUT's job record where it is a web job's (or one from before web recorded its command) of another
    EXTRACTION version; None otherwise."""
    import json

    from pipelines.job_record import JOB_FILE

    try:
        old = json.loads((out_dir / JOB_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(old, dict) or old.get("command", "web") != "web" or old.get("extraction") == EXTRACTION:
        return None
    return old


def _reader_refusal(out_dir: Path, old: dict[str, Any]) -> ValueError:
    earlier = old.get("extraction") or "mathmix-web/1"
    return ValueError(
        f"{out_dir} holds unfinished output of a web run by an earlier reader ({earlier}; this is {EXTRACTION}, "
        "which reads some pages otherwise): its finished tasks and the rest would differ. Write to a new folder, "
        "or delete this one to start over"
    )


def _other_extraction(out_dir: Path, identity: dict[str, Any]) -> ValueError | dict[str, Any] | None:
    """For a folder holding this web job (the same inputs and settings as IDENTITY) by another EXTRACTION version
    (none recorded: mathmix-web/1): its summary where it finished (one reading: kept, as the rerun of a finished
    job always was), else the refusal. None for any other record (check_job's refusal says it)."""
    import json

    old = _earlier_reader_record(out_dir)
    if old is None or any(old.get(key) != identity.get(key) for key in ("inputs", "settings")):
        return None
    try:
        return json.loads((out_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return _reader_refusal(out_dir, old)


def earlier_reader_refusal(out_dir: Path) -> ValueError | None:
    """For the recipe runner, its runs and dry runs alike: the refusal of a web stage folder holding unfinished
    work of another EXTRACTION version (a finished one is kept, a folder with nothing finished taken over)."""
    from pipelines.job_record import has_progress

    old = _earlier_reader_record(out_dir)
    if old is None or (out_dir / "summary.json").is_file() or not has_progress(out_dir):
        return None
    return _reader_refusal(out_dir, old)


def files_read(
    config: Config, run_dir: Path | str, previous: Mapping[str, Path] | None = None
) -> dict[str, str]:
    """Files the stage reads besides its inputs (PREVIOUS: the recipe's earlier stages and their folders): the
    recipe stage's record holds their digests, so a finished stage is not reported complete after its model was
    retrained at the same path. The model is the one the stage reads, the run classifier's by default: left out,
    a model.bin retrained in place outside the recipe left the stage "already complete" with the old scores."""
    paths = resolve_paths(config, run_dir)
    read = {"math_model": math_model(config, paths, previous or {}), "blocklist": paths.get("blocklist")}
    return {key: value for key, value in read.items() if value}


def math_model(config: Config, paths: Mapping[str, Any], previous: Mapping[str, Path]) -> str | None:
    """The model the stage scores with: the recipe's `math_model` (PATHS: `resolve_paths`), else the model.bin of
    a classifier stage the recipe runs before web, where it exists."""
    if config.math_model is not None:
        return paths["math_model"]
    if "classifier" in previous:
        candidate = Path(previous["classifier"]) / "model.bin"
        return str(candidate) if candidate.is_file() else None
    return None


def resolve_paths(config: Config, run_dir: Path | str) -> dict[str, Any]:
    """`{run_dir}` substituted in the stage's path settings (its inputs are resolved by the runner)."""
    return {
        key: value.replace("{run_dir}", str(run_dir))
        for key in ("math_model", "blocklist")
        if isinstance(value := getattr(config, key), str)
    }


def preflight(config: Config, run_dir: Path | str, plan: list[dict] | None = None) -> None:
    """What the stage reads that no earlier stage writes, checked by `mathmix run` before its first stage and in
    --dry-run: the math model (`check_math_model`; one in an earlier stage's folder, the classifier's, is left to
    the stage) and the blocklist file."""
    from pipelines.prerun_checks import check_math_model, written_by_earlier_stage

    paths = resolve_paths(config, run_dir)
    model = paths.get("math_model")
    if model and not written_by_earlier_stage(model, plan, "web"):
        check_math_model(model)
    blocklist = paths.get("blocklist")
    if blocklist and not written_by_earlier_stage(blocklist, plan, "web") and not Path(blocklist).is_file():
        raise FileNotFoundError(f"{blocklist}: URL blocklist file not found")


def run_stage(config: Config, ctx) -> dict:
    """Recipe stage `web`: inputs from the recipe; scores with the run's classifier when it trained one."""
    paths = resolve_paths(config, ctx.run_dir)
    config = config.model_copy(update=paths)
    model = math_model(config, paths, ctx.previous)
    if (
        model is None
    ):  # as `mathmix web` says it: a run without a classifier stage kept every page unscored, silently
        from mathmix.cli_util import console

        console.print(
            "note: web: no math classifier (no classifier stage in this recipe, no web.math_model): pages that pass "
            "the math prefilter are kept unscored (math_score null)",
            soft_wrap=True,
            markup=False,
        )
    return run_web(config, ctx.inputs, ctx.out_dir, ctx.executor, math_model=model)
