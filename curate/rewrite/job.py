"""One rewrite task over a set of inputs, as two datatrove jobs chained on disk.

1. generate: readers -> datatrove `InferenceRunner` (vLLM, SGLang, an endpoint, or `curate/cpu_server.py` through
   the custom-server hook) -> OUT/raw/*.jsonl.gz, with request checkpointing under OUT/checkpoints, so a killed run
   resumes without redoing or losing requests;
2. validate: OUT/raw -> `RewriteValidator` -> decontamination -> exact dedup -> OUT/data/*.parquet
   (+ OUT/rejects/*.parquet), in one task so that dedup sees every output.
Generation and validation are separate so that validation can change (and rerun) without paying for generation.
"""

from __future__ import annotations

import importlib.util
import math
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from curate.rewrite.inputs import build_readers, files_all_bad_records, input_sources
from curate.rewrite.tasks import ValidationSettings, sampling_json
from curate.summary import ensure_data_file, summarize_logs, write_summary

if TYPE_CHECKING:
    from urllib.parse import ParseResult

CPU_SERVER = str(Path(__file__).resolve().parents[1] / "cpu_server.py")
# Where the generation readers note an input file every line of which was a bad_record (in OUT).
ALL_BAD_RECORDS = Path("logs") / "generate" / "files_all_bad_records"
Server = Literal["transformers", "vllm", "sglang", "endpoint"]


class RewriteSettings(BaseModel):
    """Settings of the rewriter (shared by `mathmix rewrite` and the recipe stage)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(
        "auto", description="HF folder or hub name; 'auto' = a tiny random plumbing-only Llama"
    )
    server: Server = "transformers"
    endpoint: str | None = Field(None, description="OpenAI-compatible base URL (server: endpoint)")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the endpoint's key")
    prompt_version: str = "v1"
    max_tokens: int | dict[str, int] | None = Field(
        None,
        description="completion tokens per request: one number, or one per task ({qa: 2048, longcot: 16384}); "
        "unset: the task's default (score 512, qa 2048, refine 4096, longcot 16384), lowered to fit the context",
    )
    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    samples: int = Field(1, ge=1, description="samples per document; >1 turns on self-consistency")
    min_agreement: float = Field(0.5, ge=0, le=1)
    max_input_chars: int = Field(12_000, ge=100)
    text_key: str = "text"
    id_key: str = "id"
    max_docs: int = Field(
        -1,
        description="read at most this many documents per input, kind of file and datatrove task (-1: all)",
    )
    model_max_context: int | None = Field(
        None,
        ge=64,
        description="the server's context (default: the model's own up to 32768; 8192 if unknown)",
    )
    max_concurrent: int = Field(64, ge=1, description="requests in flight at once")
    request_timeout_s: float = Field(600.0, gt=0)
    server_ready_timeout_s: float = Field(
        1800.0, ge=1, description="wait this long for the server to come up"
    )
    retries: int = Field(2, ge=0)
    max_attempts: int = Field(
        3, ge=1, description="runs whose requests may fail a document before it is dropped as request_failed"
    )
    retry_backoff_s: float = Field(2.0, ge=0, description="first retry delay; doubles each retry")
    tp: int = Field(1, ge=1)
    dp: int = Field(1, ge=1)
    cpu_threads: int = Field(0, ge=0, description="torch threads of the CPU server (0: torch's default)")
    inference_tasks: int = Field(1, ge=1, description="datatrove tasks for generation (one server each)")
    records_per_chunk: int = Field(500, ge=1, description="checkpoint chunk size (documents)")
    languages: list[str] = Field(default_factory=lambda: ["en"])
    check_answers: bool = True
    write_rejects: bool = True
    decont_benchmarks: list[str] = Field(
        default_factory=list, description="benchmark files/folders (13-grams)"
    )
    decont_ngram: int = 13
    corpus_docs: int | None = Field(None, ge=1, description="documents in the corpus to estimate cost for")
    gpu_output_tokens_per_s: float = Field(2500.0, gt=0, description="assumed GPU decode rate for estimates")

    @field_validator("endpoint")
    @classmethod
    def _a_local_endpoint_is_its_server_root(cls, value: str | None) -> str | None:
        return local_server_root(value)

    @field_validator("max_tokens")
    @classmethod
    def _max_tokens_are_counts(cls, value: int | dict[str, int] | None) -> int | dict[str, int] | None:
        from curate.rewrite.tasks import TASKS

        counts = value.values() if isinstance(value, dict) else [] if value is None else [value]
        if any(n < 1 for n in counts):
            raise ValueError("must be a positive number of tokens")
        if isinstance(value, dict) and (unknown := sorted(set(value) - set(TASKS))):
            raise ValueError(f"no task {', '.join(map(repr, unknown))} (tasks: {', '.join(TASKS)})")
        return value

    @field_validator("max_docs")
    @classmethod
    def _max_docs_is_a_count(cls, value: int) -> int:
        # datatrove read nothing for any other value (limit 0 or -5): an empty branch, without a word
        if value < 1 and value != -1:
            raise ValueError("must be a positive number of documents, or -1 for all")
        return value

    @model_validator(mode="after")
    def _endpoint_names_its_model(self) -> RewriteSettings:
        # 'auto' builds a tiny model in OUT/_model and sends its path as the model name: no endpoint serves that.
        if self.server == "endpoint" and self.model == "auto":
            raise ValueError(
                "server 'endpoint' needs the name of the model the endpoint serves (--model NAME / model:, as listed "
                "by GET URL/v1/models), not 'auto' (a tiny local model that an endpoint does not serve)"
            )
        return self

    def sampling(self, task: str) -> dict[str, Any]:
        """The sampling settings of `task`'s requests; max_tokens is the task's cap (`curate.rewrite.budget`), which
        a request whose prompt leaves less room in the model's context gets lowered."""
        from curate.rewrite.budget import task_max_tokens

        return {
            "max_tokens": task_max_tokens(task, self),
            "temperature": self.temperature,
            "top_p": self.top_p,
        }

    def validation(self) -> ValidationSettings:
        return ValidationSettings(
            languages=tuple(self.languages),
            check_answers=self.check_answers,
            min_agreement=self.min_agreement,
            prompt_version=self.prompt_version,
        )


def resolve_model(settings: RewriteSettings, inputs: list[str], model_dir: Path) -> str:
    """`auto`: build (once) a tiny random Llama + BPE tokenizer trained on the input texts in `model_dir`."""
    if settings.model != "auto":
        return settings.model
    if not (model_dir / "config.json").is_file():
        from curate.rewrite.tasks import TASKS, prompt_template
        from curate.rewrite.tiny_model import build_tiny_llama

        texts = [prompt_template(t, settings.prompt_version) for t in TASKS]
        for reader in build_readers(inputs, settings.model_copy(update={"max_docs": 200})):
            texts += [doc.text for doc in reader.run(rank=0, world_size=1)]
        logger.warning(f"model: auto -> building a tiny RANDOM (plumbing-only) Llama in {model_dir}")
        model_dir.parent.mkdir(parents=True, exist_ok=True)
        build_tiny_llama(model_dir, texts, max_positions=32_768)
    return str(model_dir)


def inference_config(settings: RewriteSettings, model: str, log_dir: Path):
    """datatrove's InferenceConfig for the chosen server."""
    import os

    from datatrove.pipeline.inference.run_inference import InferenceConfig

    from curate.rewrite.budget import FALLBACK_CONTEXT, model_context

    context = (
        model_context(settings) or FALLBACK_CONTEXT
    )  # an endpoint's is its own: datatrove only records it
    common: dict[str, Any] = dict(
        model_name_or_path=model,
        model_max_context=context,
        use_chat=True,
        rollouts_per_document=settings.samples,
        max_concurrent_generations=settings.max_concurrent,
        request_timeout=settings.request_timeout_s,
        server_log_folder=str(log_dir),
        metric_interval=60,
        tp=settings.tp,
        dp=settings.dp,
    )
    # Poll readiness often where the server is up in seconds (CPU server, a running endpoint); datatrove's 5 s
    # default would dominate short runs. The total wait stays `server_ready_timeout_s`.
    delay = 5.0 if settings.server in ("vllm", "sglang") else 0.5
    common.update(server_ready_delay_sec=delay,
                  server_ready_max_attempts=max(1, math.ceil(settings.server_ready_timeout_s / delay)))  # fmt: skip
    if settings.server == "transformers":
        kwargs = {"server_script": CPU_SERVER, "model": model, "max-context": context}
        if settings.cpu_threads:
            kwargs["threads"] = settings.cpu_threads
        return InferenceConfig(server_type="custom", model_kwargs=kwargs, **common)
    if settings.server == "endpoint":
        if not settings.endpoint:
            raise ValueError("server 'endpoint' needs an endpoint URL (--endpoint / endpoint:)")
        # Nothing to restart: one readiness window, then the run fails with a clear error.
        return InferenceConfig(server_type="endpoint", endpoint_url=settings.endpoint, server_start_max_retries=0,
                               api_key=os.environ.get(settings.api_key_env), **common)  # fmt: skip
    return InferenceConfig(server_type=settings.server, **common)


LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")  # reached by datatrove itself, not through the OpenAI client


def _is_local(parsed: ParseResult) -> bool:
    """Whether a parsed endpoint URL (`urllib.parse.urlparse`) is a local `http://` one, which datatrove reaches
    itself (and takes for the server's root); any other goes through the OpenAI client. ValueError from a host
    that does not parse."""
    return parsed.scheme == "http" and parsed.hostname in LOCAL_HOSTS


def local_server_root(url: str | None) -> str | None:
    """URL without a trailing `/v1` where datatrove takes it for the server's root: a local `http://` endpoint,
    to which it appends `/v1/chat/completions` and `/v1/models` itself (`http://127.0.0.1:8000/v1`, the OpenAI
    style of base URL, was probed at /v1/v1/models and refused after the whole wait). A remote endpoint's URL is
    the OpenAI client's base URL, where /v1 belongs: kept as given."""
    from urllib.parse import urlparse

    if not url:
        return url
    try:
        parsed = urlparse(url)
        local = _is_local(parsed)
    except ValueError:
        return url  # not a URL: check_endpoint_url names it
    path = parsed.path.rstrip("/")
    if not local or not path.endswith("/v1") or parsed.query or parsed.fragment:
        return url
    return parsed._replace(path=path[: -len("/v1")]).geturl()


def check_endpoint_url(url: str | None) -> None:
    """ValueError (one line naming URL) unless URL is an http(s) URL with a host that datatrove can use.

    datatrove talks to a local `http://` endpoint (localhost, 127.0.0.1, ::1) itself and to any other through
    the OpenAI client, which is not installed with mathmix: that case needs the `endpoint` extra (openai).
    """
    from urllib.parse import urlparse

    if not url:
        raise ValueError("server 'endpoint' needs an endpoint URL (--endpoint / endpoint:)")
    try:
        parsed = urlparse(url)
        host, _ = parsed.hostname, parsed.port  # .port raises on a port that is not a number
    except ValueError as err:
        raise ValueError(f"endpoint {url!r}: not a valid URL ({err})") from None
    if parsed.scheme not in ("http", "https") or not host:
        raise ValueError(
            f"endpoint {url!r}: not an http:// or https:// URL with a host (e.g. http://127.0.0.1:8000)"
        )
    if not _is_local(parsed) and importlib.util.find_spec("openai") is None:
        raise ValueError(
            f"endpoint {url}: a non-local endpoint is reached through the OpenAI client, which is not "
            "installed: pip install 'mathmix[endpoint]' (or openai)"
        )


def wait_for_endpoint(url: str, timeout_s: float) -> None:
    """Wait up to `timeout_s` for URL to answer datatrove's readiness check (GET URL/v1/models with 200), else
    ValueError naming URL. Run before anything is written, so a wrong or dead endpoint costs one line.

    A 404 is final (a server that is up, with nothing at that path: waiting does not change it), and the error
    says which part of the URL to check."""
    import httpx

    probe = url.rstrip("/") + "/v1/models"
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        left = deadline - time.monotonic()
        try:
            response = httpx.get(probe, timeout=max(0.5, min(5.0, left)))
            if response.status_code == 200:
                return
            if response.status_code == 404:
                raise ValueError(
                    f"endpoint {url}: GET {probe} answered 404 (not found); {_not_found_hint(url)}"
                )
            last = f"HTTP {response.status_code}"
        except httpx.HTTPError as err:
            last = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(0.5, left))
    raise ValueError(
        f"endpoint {url} did not answer GET {probe} with 200 within {timeout_s:g}s ({last}); is the server "
        "up at that URL? (--server-timeout / server_ready_timeout_s to wait longer)"
    )


def _not_found_hint(url: str) -> str:
    from urllib.parse import urlparse

    parsed = urlparse(url)
    if _is_local(parsed):
        return ("a local --endpoint is the server's root, the part before /v1/models and /v1/chat/completions "
                "(e.g. http://127.0.0.1:8000; a trailing /v1 is dropped): check its port and path")  # fmt: skip
    if parsed.path.rstrip("/").endswith("/v1"):
        return ("datatrove checks an endpoint with GET URL/v1/models, so a remote URL ending in /v1 (the OpenAI "
                "client's base URL) must answer there too; this one does not")  # fmt: skip
    return "a remote --endpoint is the OpenAI client's base URL, usually ending in /v1: check its path"


def _finished(logging_dir: Path, tasks: int) -> bool:
    """Whether every datatrove task of the job logging to `logging_dir` has its completion marker."""
    return all((logging_dir / "completions" / f"{rank:05d}").is_file() for rank in range(tasks))


def generation_pipeline(inputs: list[str], out_dir: Path, task: str, settings: RewriteSettings, model: str):
    """readers -> InferenceRunner writing OUT/raw with checkpoints in OUT/checkpoints."""
    from functools import partial

    from datatrove.pipeline.writers import JsonlWriter

    from curate.rewrite.budget import model_context
    from curate.rewrite.rollout import ATTEMPTS_DIR, FAILURES_DIR, TimedInferenceRunner, rewrite_rollout
    from curate.rewrite.steps import MarkDuplicateIds

    rollout = partial(
        rewrite_rollout, task=task, prompt_version=settings.prompt_version, sampling=settings.sampling(task),
        context=model_context(settings),
        max_input_chars=settings.max_input_chars,
        retries=settings.retries,
        backoff_s=settings.retry_backoff_s,
    )  # fmt: skip
    runner = TimedInferenceRunner(
        rollout_fn=rollout,
        request_timeout_s=settings.request_timeout_s,
        failures_dir=str(out_dir / "logs" / "generate" / FAILURES_DIR),
        max_attempts=settings.max_attempts,
        attempts_dir=str(out_dir / "checkpoints" / ATTEMPTS_DIR),
        config=inference_config(settings, model, out_dir / "logs" / "server"),
        output_writer=JsonlWriter(
            str(out_dir / "raw"), output_filename="${rank}_chunk_${chunk_index}.jsonl.gz"
        ),
        checkpoints_local_dir=str(out_dir / "checkpoints"),
        records_per_chunk=settings.records_per_chunk,
    )
    return [*build_readers(inputs, settings, out_dir / ALL_BAD_RECORDS), MarkDuplicateIds(), runner]


def validation_pipeline(out_dir: Path, task: str, settings: RewriteSettings, model: str) -> tuple[list, str]:
    """OUT/raw -> validator -> decont -> exact dedup -> OUT/data; returns (steps, decont status)."""
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import ParquetWriter

    from curate.rewrite.steps import (
        ExactDedupFilter,
        RewriteValidator,
        flat_adapter,
        output_schema,
        rejects_schema,
    )

    rejects = None
    if settings.write_rejects:
        rejects = ParquetWriter(str(out_dir / "rejects"), output_filename="${rank}.parquet", adapter=flat_adapter,
                                schema=rejects_schema(), use_content_defined_chunking=False)  # fmt: skip
    steps: list[Any] = [
        JsonlReader(str(out_dir / "raw"), glob_pattern="*.jsonl.gz"),
        RewriteValidator(task, settings.prompt_version, model, sampling_json(settings.sampling(task)),
                         settings.validation(), rejects_writer=rejects, max_input_chars=settings.max_input_chars),
    ]  # fmt: skip
    decont = "off (no decont_benchmarks)"
    if settings.decont_benchmarks:
        from curate.decont import DecontFilter

        steps.append(
            DecontFilter(list[str | Path](settings.decont_benchmarks), ngram=settings.decont_ngram, mode="remove",
                         report_folder=out_dir / "decont")
        )  # fmt: skip
        decont = f"{settings.decont_ngram}-gram vs {len(settings.decont_benchmarks)} benchmark path(s)"
    steps += [
        ExactDedupFilter(),
        ParquetWriter(str(out_dir / "data"), output_filename="${rank}.parquet", adapter=flat_adapter,
                      schema=output_schema(task), use_content_defined_chunking=False),
    ]  # fmt: skip
    return steps, decont


def run_task(inputs: list[str], out_dir: Path, task: str, settings: RewriteSettings, executor: Any,
             model_dir: Path | None = None, run_dir: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Run one rewrite task end to end; writes OUT/summary.json last and returns the summary."""
    from curate.decont import validate_benchmarks
    from curate.rewrite.identity import check_out_dir, rewrite_identity, weights_note
    from curate.rewrite.prechecks import check_longcot_inputs, check_server_package
    from curate.rewrite.report import inference_stats, throughput_report
    from curate.rewrite.rollout import RequestsFailedError
    from curate.rewrite.tasks import prompt_template
    from mathmix.cli_util import write_json
    from mathmix.hub import check_model_source
    from mathmix.paths import stage_data
    from pipelines.job_record import check_output_outside_inputs

    start = time.time()
    out_dir = Path(out_dir)
    gen_logs, val_logs = out_dir / "logs" / "generate", out_dir / "logs" / "validate"
    if not _finished(gen_logs, settings.inference_tasks):  # vllm / sglang: named before anything is read
        check_server_package(settings.server)
    for path in inputs:  # a run folder given as input is refused before job.json, or a wait on the endpoint
        stage_data(path)
    input_sources(inputs)  # so is an input folder without input files
    if task == "longcot":  # and web pages given to longcot, which would take each page for the question
        check_longcot_inputs(inputs, settings.text_key)
    prompt_template(
        task, settings.prompt_version
    )  # and a prompt_version without a template (it failed mid-run)
    # OUT in an input folder was accepted once, then every rerun read OUT's files as input and was refused.
    check_output_outside_inputs(out_dir, inputs)
    if settings.server != "endpoint" and settings.model != "auto":  # before a server starts and fails on it
        check_model_source(settings.model)
    if settings.decont_benchmarks:  # a bad benchmark path is found now, not after hours of generation
        validate_benchmarks(settings.decont_benchmarks, ngram=settings.decont_ngram)
    if settings.server == "endpoint":  # a bad URL or a dead endpoint is named before anything is written
        check_endpoint_url(settings.endpoint)
        if not _finished(gen_logs, settings.inference_tasks):  # nothing left to ask it otherwise
            wait_for_endpoint(str(settings.endpoint), settings.server_ready_timeout_s)
    run_dir = run_dir or out_dir.parent
    identity, earlier = rewrite_identity(inputs, settings, task, run_dir, out_dir)
    check_out_dir(out_dir, identity, earlier, run_dir)  # the message names the task each job is for
    weights = weights_note(settings, identity)  # said in summary.json
    model = resolve_model(settings, inputs, model_dir or out_dir / "_model")
    steps = generation_pipeline(inputs, out_dir, task, settings, model)
    _reopen_failed_tasks(gen_logs)  # an earlier run's failed requests: requested again now
    _run_all(executor, steps, gen_logs, f"rewrite-{task}-gen", settings.inference_tasks)
    failed = _reopen_failed_tasks(gen_logs)
    if failed:
        count = sum(r["documents"] for r in failed)
        examples = [e for r in failed for e in r["examples"]][:3]
        # Failures that were the server's, not the documents': no step towards --max-attempts, and said so.
        spared = [r["not_counted"] for r in failed if r.get("not_counted")]
        not_counted = ""
        if spared:
            n = sum(s["documents"] for s in spared)
            which = "not" if n == count else f"{n} of them not"
            not_counted = f"; {which} counted against --max-attempts, as {spared[-1]['why']}"
        raise RequestsFailedError(
            f"{count} document(s) failed their requests (e.g. {', '.join(examples)}; last error: "
            f"{failed[-1]['last_error'][:300]}; refusals, HTTP 400/401/403/404, are not retried){not_counted}; "
            "the other documents are done and kept: rerun "
            "the same command to request only the failed ones again (--retries / --request-timeout to wait "
            f"longer; after {settings.max_attempts} failed runs, --max-attempts, a document is dropped as "
            "request_failed)"
        )
    gen_seconds = time.time() - start
    if any((out_dir / "raw").glob("*.jsonl.gz")):
        steps, decont = validation_pipeline(out_dir, task, settings, model)
        _run_all(executor, steps, val_logs, f"rewrite-{task}-val", 1)
        summary = summarize_logs(val_logs)
    else:  # no input document was usable, so nothing was generated: nothing to validate
        decont, summary = "skipped (nothing generated)", {"docs_in": 0, "docs_out": 0, "dropped": {}}
    _ensure_data_file(out_dir / "data", task)
    generated = summarize_logs(gen_logs)
    for note in ("rows_without_text_field", "unreadable_files"):
        if generated.get(note):
            summary[note] = generated[note]
    if not_read := files_all_bad_records(out_dir / ALL_BAD_RECORDS):  # named by the reader, and again here
        summary["files_all_bad_records"] = not_read
    summary["docs_in"] = generated["docs_in"]  # the inputs, not the raw records the validator re-reads
    for reason, count in generated["dropped"].items():  # rows the input readers could not use
        summary["dropped"][reason] = summary["dropped"].get(reason, 0) + count
    if summary["dropped"].get("duplicate_id"):
        logger.warning(
            f"{summary['dropped']['duplicate_id']} input document(s) had an id read before: dropped as duplicate_id "
            "(only the first document read under each id is rewritten)"
        )
    missing = summary["docs_in"] - summary["docs_out"] - sum(summary["dropped"].values())
    summary.pop("unaccounted", None)
    if missing:
        summary["unaccounted"] = missing
    gpus = settings.tp * settings.dp * settings.inference_tasks
    # The documents that reached the model (in this run or before it): the corpus the estimate defaults to.
    usable = generated["docs_in"] - sum(generated["dropped"].values())
    report = throughput_report(inference_stats(str(gen_logs)), gen_seconds, usable, settings.server, gpus,
                               settings.corpus_docs, settings.gpu_output_tokens_per_s)  # fmt: skip
    write_json(out_dir / "throughput.json", report)
    summary.update(
        seconds=round(time.time() - start, 2), task=task, model=model, server=settings.server,
        prompt_version=f"{task}.{settings.prompt_version}", decont=decont,
        tokens_in_per_s=report["tokens_in_per_s"], tokens_out_per_s=report["tokens_out_per_s"],
        gpu_hours_estimate=report.get("gpu_hours_estimate"), **weights,
    )  # fmt: skip
    if settings.decont_benchmarks:  # training splits under the benchmark folders, not read (as decont says)
        from curate.decont_sources import left_out_training_splits

        left_out = left_out_training_splits(settings.decont_benchmarks).values()
        summary["benchmark_files_left_out"] = [str(p) for files in left_out for p in files]
    write_summary(out_dir, summary)
    return summary


def _run_all(executor: Any, steps: list, logging_dir: Path, name: str, tasks: int) -> None:
    """Run a datatrove job and fail loudly if any task did not finish (Slurm/Ray do not raise for them)."""
    # Locally one task at a time (each starts its own server on the same CPUs/GPUs); a cluster runs them all.
    workers = 1 if getattr(executor, "kind", "local") == "local" else None
    built = executor.build(steps, logging_dir, job_name=name, tasks=tasks, workers=workers)
    executor.run(built)
    unfinished = built.get_incomplete_ranks(range(tasks), skip_completed=True)
    if unfinished:
        raise RuntimeError(
            f"{name}: tasks {unfinished} did not finish (logs in {logging_dir}); rerun to resume"
        )


def _reopen_failed_tasks(gen_logs: Path) -> list[dict]:
    """The failure reports of generation tasks with failed requests; their completion markers are removed (so a
    rerun runs them again), then the reports (what is left to do is in the checkpoints)."""
    import json

    from curate.rewrite.rollout import FAILURES_DIR

    reports = [json.loads(p.read_text()) for p in sorted((gen_logs / FAILURES_DIR).glob("*.json"))]
    for report in reports:
        (gen_logs / "completions" / f"{report['rank']:05d}").unlink(missing_ok=True)
    shutil.rmtree(gen_logs / FAILURES_DIR, ignore_errors=True)
    return reports


def _ensure_data_file(data_dir: Path, task: str) -> None:
    """A task that kept nothing still gets one empty Parquet file with its schema, so readers find the columns."""
    from curate.rewrite.steps import output_schema

    ensure_data_file(data_dir, output_schema(task))
