"""One rewrite task over a set of inputs, as two datatrove jobs chained on disk.

1. generate: readers -> datatrove `InferenceRunner` (vLLM, SGLang, an endpoint, or `curate/cpu_server.py` through
   the custom-server hook) -> OUT/raw/*.jsonl.gz, with request checkpointing under OUT/checkpoints, so a killed run
   resumes without redoing or losing requests;
2. validate: OUT/raw -> `RewriteValidator` -> decontamination -> exact dedup -> OUT/data/*.parquet
   (+ OUT/rejects/*.parquet), in one task so that dedup sees every output.
Generation and validation are separate so that validation can change (and rerun) without paying for generation.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from curate.rewrite.endpoint import LOCAL_HOSTS, check_endpoint_url, local_server_root, wait_for_endpoint
from curate.rewrite.inputs import build_readers, files_all_bad_records, input_sources
from curate.rewrite.settings import RewriteSettings, Server
from curate.rewrite.tasks import sampling_json
from curate.summary import ensure_data_file, summarize_logs, write_summary

if TYPE_CHECKING:
    from curate.rewrite.rollout import RequestsFailedError

CPU_SERVER = str(Path(__file__).resolve().parents[1] / "cpu_server.py")
# Where the generation readers note an input file every line of which was a bad_record (in OUT).
ALL_BAD_RECORDS = Path("logs") / "generate" / "files_all_bad_records"

# The settings and the endpoint checks live in their own modules; imported from here as before they were split off
# (run_task looks wait_for_endpoint up here, where tests patch it).
__all__ = [
    "ALL_BAD_RECORDS",
    "CPU_SERVER",
    "LOCAL_HOSTS",
    "RewriteSettings",
    "Server",
    "check_endpoint_url",
    "generation_pipeline",
    "inference_config",
    "local_server_root",
    "resolve_model",
    "run_task",
    "validation_pipeline",
    "wait_for_endpoint",
]


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
    from curate.rewrite.identity import check_out_dir, rewrite_identity, weights_note

    start = time.time()
    out_dir = Path(out_dir)
    gen_logs, val_logs = out_dir / "logs" / "generate", out_dir / "logs" / "validate"
    _check_before_writing(inputs, out_dir, task, settings, gen_logs)
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
        raise _failed_requests_error(failed, settings)
    gen_seconds = time.time() - start
    if any((out_dir / "raw").glob("*.jsonl.gz")):
        steps, decont = validation_pipeline(out_dir, task, settings, model)
        _run_all(executor, steps, val_logs, f"rewrite-{task}-val", 1)
        summary = summarize_logs(val_logs)
    else:  # no input document was usable, so nothing was generated: nothing to validate
        decont, summary = "skipped (nothing generated)", {"docs_in": 0, "docs_out": 0, "dropped": {}}
    _ensure_data_file(out_dir / "data", task)
    generated = summarize_logs(gen_logs)
    _add_generation_counts(summary, generated, out_dir)
    report = _write_throughput(out_dir, gen_logs, gen_seconds, generated, settings)
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


def _check_before_writing(
    inputs: list[str], out_dir: Path, task: str, settings: RewriteSettings, gen_logs: Path
) -> None:
    """The checks run before job.json is written or a server started: each fails with a one-line error."""
    from curate.decont import validate_benchmarks
    from curate.rewrite.prechecks import check_longcot_inputs, check_server_package
    from curate.rewrite.tasks import prompt_template
    from mathmix.hub import check_model_source
    from mathmix.paths import stage_data
    from pipelines.job_record import check_output_outside_inputs

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


def _failed_requests_error(failed: list[dict], settings: RewriteSettings) -> RequestsFailedError:
    """The RequestsFailedError for the failure reports of generation tasks (`_reopen_failed_tasks`)."""
    from curate.rewrite.rollout import RequestsFailedError

    count = sum(r["documents"] for r in failed)
    examples = [e for r in failed for e in r["examples"]][:3]
    # Failures that were the server's, not the documents': no step towards --max-attempts, and said so.
    spared = [r["not_counted"] for r in failed if r.get("not_counted")]
    not_counted = ""
    if spared:
        n = sum(s["documents"] for s in spared)
        which = "not" if n == count else f"{n} of them not"
        not_counted = f"; {which} counted against --max-attempts, as {spared[-1]['why']}"
    return RequestsFailedError(
        f"{count} document(s) failed their requests (e.g. {', '.join(examples)}; last error: "
        f"{failed[-1]['last_error'][:300]}; refusals, HTTP 400/401/403/404, are not retried){not_counted}; "
        "the other documents are done and kept: rerun "
        "the same command to request only the failed ones again (--retries / --request-timeout to wait "
        f"longer; after {settings.max_attempts} failed runs, --max-attempts, a document is dropped as "
        "request_failed)"
    )


def _add_generation_counts(summary: dict[str, Any], generated: dict[str, Any], out_dir: Path) -> None:
    """Fold the generation job's counts (`generated`: the inputs and the rows their readers dropped) into the
    validation job's `summary`, in place."""
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


def _write_throughput(
    out_dir: Path, gen_logs: Path, gen_seconds: float, generated: dict[str, Any], settings: RewriteSettings
) -> dict[str, Any]:
    """Write OUT/throughput.json (the generation's speed and cost estimate) and return it."""
    from curate.rewrite.report import inference_stats, throughput_report
    from mathmix.cli_util import write_json

    gpus = settings.tp * settings.dp * settings.inference_tasks
    # The documents that reached the model (in this run or before it): the corpus the estimate defaults to.
    usable = generated["docs_in"] - sum(generated["dropped"].values())
    report = throughput_report(inference_stats(str(gen_logs)), gen_seconds, usable, settings.server, gpus,
                               settings.corpus_docs, settings.gpu_output_tokens_per_s)  # fmt: skip
    write_json(out_dir / "throughput.json", report)
    return report


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
