"""`mathmix rewrite INPUT... -o OUT --task ...` (LLM branches) and `mathmix rewrite serve` (the CPU server)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from mathmix.cli_util import DefaultCommandGroup, check_output, fail, print_summary

rewrite_app = typer.Typer(
    cls=DefaultCommandGroup,
    help="LLM rewriter: refine | qa | longcot | score over documents, validated, decontaminated, deduplicated.",
    no_args_is_help=False,
)
TASKS = ("refine", "qa", "longcot", "score")
SERVERS = ("transformers", "vllm", "sglang", "endpoint")


# The options given to RewriteSettings, by its field: the model checks them (counts, ranges), as it checks the
# recipe's keys, and a ValidationError names the option (`_settings_error`).
OPTIONS = {"model": "--model", "server": "--server", "endpoint": "--endpoint", "max_tokens": "--max-tokens",
           "temperature": "--temperature", "samples": "--samples", "max_docs": "--max-docs", "text_key": "--text-key",
           "decont_benchmarks": "--decont", "corpus_docs": "--corpus-docs", "tp": "--tp", "retries": "--retries",
           "max_attempts": "--max-attempts", "request_timeout_s": "--request-timeout",
           "server_ready_timeout_s": "--server-timeout", "max_concurrent": "--max-concurrent"}  # fmt: skip


def _settings_error(err) -> str:
    """RewriteSettings' ValidationError as one line, each error naming its option: `Invalid value for '--max-docs':
    must be a positive number of documents, or -1 for all (got -5)`; a check of several settings says its own."""
    parts = []
    for error in err.errors():
        message = error["msg"].removeprefix("Value error, ")
        option = OPTIONS.get(str(error["loc"][0])) if error["loc"] else None
        if option is None:  # the model's checks across settings name the options themselves
            parts.append(message)
            continue
        message = message[:1].lower() + message[1:]
        parts.append(f"Invalid value for '{option}': {message} (got {error['input']!r})")
    return "; ".join(parts)


@rewrite_app.command("run")
def run_rewrite(
    inputs: list[Path] = typer.Argument(
        ..., help="stage folders (their data/), folders of Parquet/JSONL, or files"
    ),
    output: Path = typer.Option(..., "-o", "--output", help="output folder for this task"),
    task: str = typer.Option(..., "--task", help="refine | qa | longcot | score"),
    model: str = typer.Option(
        ..., "--model", help="HF model folder or name; 'auto' = tiny random plumbing model"
    ),
    server: str = typer.Option(
        "transformers", "--server", help="transformers (CPU) | vllm | sglang | endpoint"
    ),
    endpoint: str | None = typer.Option(
        None, "--endpoint", help="OpenAI-compatible base URL (--server endpoint)"
    ),
    max_tokens: int | None = typer.Option(
        None,
        "--max-tokens",
        help="completion tokens per request (default: the task's, score 512, qa 2048, refine 4096, longcot 16384, "
        "lowered to fit the model's context)",
    ),
    temperature: float = typer.Option(0.7, "--temperature"),
    samples: int = typer.Option(1, "--samples", help="samples per document; >1 = self-consistency"),
    max_docs: int = typer.Option(
        -1,
        "--max-docs",
        help="read at most N documents per input and kind of file: a folder's Parquet files and its JSONL files "
        "are two inputs, N each (-1: all)",
    ),
    text_key: str = typer.Option("text", "--text-key", help="input field holding the text (e.g. problem)"),
    decont: list[str] | None = typer.Option(
        None, "--decont", help="benchmark file/folder to decontaminate against"
    ),
    corpus_docs: int | None = typer.Option(
        None, "--corpus-docs", help="corpus size for the GPU-hours estimate"
    ),
    tp: int = typer.Option(1, "--tp", help="tensor parallel GPUs (vllm, sglang)"),
    retries: int = typer.Option(2, "--retries", help="retries of a failed request (backoff 2 s, doubling)"),
    max_attempts: int = typer.Option(
        3,
        "--max-attempts",
        help="runs whose requests may fail a document before it is dropped as "
        "request_failed (in rejects/); until then each rerun requests it again",
    ),
    request_timeout: float = typer.Option(
        600.0, "--request-timeout", help="seconds one request may take before it is retried"
    ),
    server_timeout: float | None = typer.Option(
        None,
        "--server-timeout",
        help="seconds to wait for the server to answer (default 1800; endpoint: 60)",
    ),
    max_concurrent: int = typer.Option(
        64, "--max-concurrent", help="requests in flight at once (lower it for a rate-limited endpoint)"
    ),
) -> None:
    """Rewrite documents with an LLM and keep only outputs that pass validation.

    Reads Parquet/JSONL documents; writes OUT/data/*.parquet (outputs with provenance: source_id, task,
    prompt_version, model, sampling; `math_score_llm` for --task score), OUT/rejects/*.parquet (with `reason`),
    OUT/raw/ (raw generations), OUT/checkpoints/, OUT/decont/ (with --decont), OUT/throughput.json (tokens/s,
    GPU-hours estimate), OUT/summary.json, OUT/logs/, OUT/job.json (what wrote the folder). A killed run resumes
    from OUT/checkpoints without redoing finished requests.
    """
    from pydantic import ValidationError

    from curate.rewrite.job import RewriteSettings, run_task
    from curate.rewrite.rollout import RequestsFailedError
    from pipelines.executors import ExecutorConfig

    if task not in TASKS:
        fail(f"--task must be one of {', '.join(TASKS)}, got {task!r}")
    if server not in SERVERS:
        fail(f"--server must be one of {', '.join(SERVERS)}, got {server!r}")
    if server == "endpoint" and not endpoint:
        fail("--server endpoint needs --endpoint URL")
    for path in inputs:
        if not path.exists():
            fail(f"{path}: no such input")
    if server_timeout is None and server == "endpoint":  # already up: no model to load
        server_timeout = 60.0
    timeout = {"server_ready_timeout_s": server_timeout} if server_timeout is not None else {}
    try:
        settings = RewriteSettings(
            model=model, server=server, endpoint=endpoint, max_tokens=max_tokens, temperature=temperature,
            samples=samples, max_docs=max_docs, text_key=text_key, decont_benchmarks=decont or [],
            corpus_docs=corpus_docs, tp=tp, retries=retries, max_attempts=max_attempts,
            request_timeout_s=request_timeout, max_concurrent=max_concurrent, **timeout,
        )  # fmt: skip
    except ValidationError as err:  # the model's checks, as for the recipe's keys, naming the option
        fail(_settings_error(err))
    # A file, a folder under a file, a run folder: one line now, not a FileExistsError after the endpoint check
    # with the advice to rerun. OUT is made here (and removed again, empty, when the job is refused).
    check_output(output)
    try:
        summary = run_task([str(p) for p in inputs], output, task, settings, ExecutorConfig(tasks=1))
    except (ValueError, FileNotFoundError) as err:  # bad settings, inputs, endpoint; OUT holds another job
        if os.environ.get("MATHMIX_DEBUG"):
            raise
        fail(str(err))
        return
    except RequestsFailedError as err:  # the rest is done; a rerun requests only these again
        if os.environ.get("MATHMIX_DEBUG"):
            raise
        fail(str(err), code=1)
        return
    except Exception as err:  # the server died or never started: say so; a rerun resumes from checkpoints
        if os.environ.get("MATHMIX_DEBUG"):
            raise
        fail(
            f"rewrite failed: {type(err).__name__}: {err} (rerun the same command to resume; "
            "MATHMIX_DEBUG=1 shows the traceback)"
        )
        return
    print_summary(summary, title=f"rewrite {task}")


@rewrite_app.command("serve")
def serve(
    model: str = typer.Option(..., "--model", help="local Hugging Face model folder"),
    port: int = typer.Option(8000, "--port"),
    host: str = typer.Option("127.0.0.1", "--host"),
    threads: int = typer.Option(0, "--threads", help="torch threads (0: default)"),
) -> None:
    """Serve a transformers model on CPU as an OpenAI-compatible API (/v1/chat/completions, /v1/completions).

    Reads the model folder; writes nothing. Use with `--server endpoint --endpoint http://HOST:PORT/`.
    """
    from curate.cpu_server import ServeError
    from curate.cpu_server import serve as serve_model
    from mathmix.hub import check_model_source

    if not 0 <= port <= 65535:
        fail(f"--port must be 0-65535, got {port}")
    try:
        check_model_source(model)  # before the port is taken and torch is imported
        serve_model(model, port, host=host, threads=threads)
    except (ValueError, ServeError) as err:  # no such model, a port in use
        if os.environ.get("MATHMIX_DEBUG"):
            raise
        fail(str(err))


def register(app: typer.Typer) -> None:
    app.add_typer(rewrite_app, name="rewrite")
