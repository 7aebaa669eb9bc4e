"""Rewriter throughput on CPU: the full path (InferenceRunner -> HTTP -> cpu_server) against the peer, plain
in-process `model.generate` on the same model and prompts, measured side by side in one run.

Prints tokens in/out per second of each, the ratio (overhead of the server, HTTP and datatrove), and the
GPU-hours estimate the run's throughput.json gives for a configured corpus. The model is the tiny random
plumbing Llama (so the figures measure the machinery, not a real rewriter's speed).

    .venv/bin/python bench/bench_rewrite.py [--docs 12] [--max-tokens 32] [--corpus-docs 1000000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def direct_generate(model_dir: Path, texts: list[str], max_tokens: int) -> tuple[int, int, float]:
    """(tokens in, tokens out, seconds) of in-process greedy generation, one prompt at a time."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from curate.rewrite.tasks import build_messages

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tokens_in = tokens_out = 0
    start = time.time()
    for text in texts:
        ids = tok.apply_chat_template(build_messages("qa", text), add_generation_prompt=True, tokenize=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=max_tokens, do_sample=False,
                                 pad_token_id=tok.pad_token_id)  # fmt: skip
        tokens_in += len(ids)
        tokens_out += out.shape[1] - len(ids)
    return tokens_in, tokens_out, time.time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--corpus-docs", type=int, default=1_000_000)
    args = parser.parse_args()

    import torch

    from curate.rewrite.job import RewriteSettings, run_task
    from curate.rewrite.tiny_model import build_tiny_llama
    from pipelines.executors import ExecutorConfig

    torch.set_num_threads(1)
    texts = [
        f"Example {i}: to solve $x + {i} = {2 * i}$, subtract {i} from both sides: $x = {i}$. " * 3
        for i in range(args.docs)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = build_tiny_llama(tmp / "model", texts, vocab_size=512, hidden_size=64)
        docs = tmp / "docs.jsonl"
        docs.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))

        d_in, d_out, d_sec = direct_generate(model, texts, args.max_tokens)
        settings = RewriteSettings(model=str(model), max_tokens=args.max_tokens, temperature=0.0, cpu_threads=1,
                                   max_concurrent=1, corpus_docs=args.corpus_docs)  # fmt: skip
        start = time.time()
        summary = run_task([str(docs)], tmp / "out", "qa", settings, ExecutorConfig(tasks=1))
        wall = time.time() - start
        report = json.loads((tmp / "out" / "throughput.json").read_text())

    print(f"documents: {args.docs}, max_tokens: {args.max_tokens}, 1 torch thread, tiny random Llama")
    print(f"{'path':<42}{'tok in/s':>12}{'tok out/s':>12}{'seconds':>10}")
    print(
        f"{'in-process model.generate (peer)':<42}{d_in / d_sec:>12,.1f}{d_out / d_sec:>12,.1f}{d_sec:>10.2f}"
    )
    print(
        f"{'InferenceRunner -> HTTP -> cpu_server':<42}{report['tokens_in_per_s']:>12,.1f}"
        f"{report['tokens_out_per_s']:>12,.1f}{report['generation_seconds']:>10.2f}"
    )
    print(
        f"ratio (server path / peer, tokens out per second): {report['tokens_out_per_s'] / (d_out / d_sec):.2f}"
    )
    print(f"server start (not in the rates above): {report['server_start_seconds']:.1f} s; whole task incl. model "
          f"build, validation, Parquet: {wall:.1f} s; docs_in={summary['docs_in']}")  # fmt: skip
    print(
        f"cost for {args.corpus_docs:,} documents: {report['corpus_tokens_out']:,} output tokens, "
        f"{report['corpus_hours_this_setup']:,.1f} h at this rate; GPU-hours estimate "
        f"{report['gpu_hours_estimate']:,.1f} ({report['gpu_hours_basis']})"
    )


if __name__ == "__main__":
    main()
