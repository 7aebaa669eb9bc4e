"""Throughput and cost report of a rewrite run: tokens in/out per second and GPU-hours for a corpus.

The estimate scales what was measured (tokens per document, documents per second) to `corpus_docs`. What was
measured is this run's: its requests, tokens and seconds over the documents it sent requests for
(`docs_generated`). On a resumed run these are fewer than the input documents (finished chunks and cached answers
cost nothing here), while the corpus to estimate for stays every input document by default. On a GPU
server (vllm, sglang) the GPU-hours are measured hours x GPUs; on the CPU server or an endpoint, where no GPU
was timed, they use `gpu_output_tokens_per_s`, an assumed per-GPU decode throughput, and say so.
"""

from __future__ import annotations

from typing import Any

from curate.summary import read_step_stats


def inference_stats(logging_dir: str) -> dict[str, float]:
    """Token and request counts of the InferenceRunner step (summed over tasks), plus its inference time."""
    for name, labels in read_step_stats(logging_dir):
        if "Inference" in name:
            return labels
    return {}


def throughput_report(
    stats: dict[str, float],
    wall_seconds: float,
    docs_in: int,
    server: str,
    gpus: int,
    corpus_docs: int | None,
    gpu_output_tokens_per_s: float,
) -> dict[str, Any]:
    """Measured throughput of this run and the cost of rewriting `corpus_docs` documents (default: `docs_in`).

    Per-document figures divide by the documents this run sent requests for (`documents_requested` in `stats`),
    so a resumed run, which sends requests for only part of `docs_in`, still estimates the whole corpus right.
    """
    tokens_in = int(stats.get("prompt_tokens", 0))
    tokens_out = int(stats.get("completion_tokens", 0))
    requests = int(stats.get("successful_requests", 0))  # answered; failed ones are `failed_requests`
    failed = int(stats.get("failed_requests", 0))
    # Generation time from the first request to the last answer; the inference time also holds the server start.
    total = float(stats.get("inference_time", 0.0)) or wall_seconds
    seconds = max(float(stats.get("generation_seconds", 0.0)) or total, 1e-9)
    report: dict[str, Any] = {
        "server": server,
        "requests": requests,
        "failed_requests": failed,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "generation_seconds": round(seconds, 2),
        "server_start_seconds": round(max(total - seconds, 0.0), 2),
        "tokens_in_per_s": round(tokens_in / seconds, 2),
        "tokens_out_per_s": round(tokens_out / seconds, 2),
        "requests_per_s": round(requests / seconds, 4),
    }
    if (
        not requests
    ):  # a rerun that only sent requests which failed again sent some: it said "no request was sent"
        report["note"] = (
            f"no request of this run was answered: the {failed} it sent failed"
            if failed
            else "no request was sent in this run (all answers came from the resume cache)"
        )
        return report
    # Stats of an older run lack documents_requested; documents_processed then counts this run's documents.
    docs = int(stats.get("documents_requested") or stats.get("documents_processed") or docs_in)
    corpus = corpus_docs or docs_in
    out_per_req = tokens_out / requests
    in_per_req = tokens_in / requests
    per_doc_requests = requests / max(docs, 1)
    corpus_out = out_per_req * per_doc_requests * corpus
    report.update(
        {
            "docs_generated": docs,
            "tokens_in_per_request": round(in_per_req, 1),
            "tokens_out_per_request": round(out_per_req, 1),
            "corpus_docs": corpus,
            "corpus_tokens_in": int(in_per_req * per_doc_requests * corpus),
            "corpus_tokens_out": int(corpus_out),
            "corpus_hours_this_setup": round(corpus / max(docs, 1) * seconds / 3600, 3),
        }
    )
    if docs < docs_in:
        report["note"] = (
            f"resumed: this run sent requests for {docs} of {docs_in} documents; per-document figures and the "
            "estimates are from those"
        )
    if server in ("vllm", "sglang"):
        report["gpu_hours_estimate"] = round(report["corpus_hours_this_setup"] * gpus, 3)
        report["gpu_hours_basis"] = f"measured on {gpus} GPU(s)"
    else:
        report["gpu_hours_estimate"] = round(corpus_out / gpu_output_tokens_per_s / 3600, 3)
        report["gpu_hours_basis"] = (
            f"assumed {gpu_output_tokens_per_s:,.0f} output tokens/s per GPU (not measured: server={server})"
        )
    return report
