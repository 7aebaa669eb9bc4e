"""Trainer throughput: mathmix's loop vs Hugging Face `Trainer` on the same tiny model, data and batch (CPU).

Prints per-step tokens/s of both (median over alternating rounds, first steps of each run excluded as warm-up)
and tokens per CPU-second (the same work measured by process CPU time, which stays meaningful on a shared,
oversubscribed machine), their ratio (target >= 1.2x), and the share of step time spent loading data (<= 2%).
mathmix runs with `compile: true` (forward + loss as one graph); HF Trainer with its defaults, both 1 thread
unless --threads.
GPU: `--device cuda --model-size 1b` trains a 1B Llama in bf16 (FSDP2 mixed precision) and reports MFU.

    .venv/bin/python bench/bench_train.py                  # CPU, a few minutes on 2 cores
    python bench/bench_train.py --device cuda --model-size 1b
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = {  # Llama shapes
    "tiny": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=2048, tie_word_embeddings=True),
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True, rope_theta=500000.0),
}  # fmt: skip
WARMUP = 2


def write_shards(folder: Path, vocab: int, tokens: int, seed: int = 0) -> Path:
    """Random documents (200-2000 tokens, EOS = 0) totalling `tokens`, as one Megatron shard."""
    from shards.indexed import write_indexed

    rng = np.random.default_rng(seed)
    docs, total = [], 0
    while total < tokens:
        n = int(rng.integers(200, 2000))
        docs.append(np.append(rng.integers(1, vocab, n), 0))
        total += n + 1
    folder.mkdir(parents=True, exist_ok=True)
    write_indexed(folder / "part", docs, vocab_size=vocab)
    return folder


def recipe(shards: Path, out: Path, args, steps: int, intra_document: bool):
    from midtrain.config import TrainRecipe

    mix = {"seed": 0, "sources": [{"name": "bench", "paths": [str(shards)], "weight": 1.0}]}
    return TrainRecipe.model_validate({
        "name": "bench", "output_dir": str(out),
        "model": {"config": {**MODELS[args.model_size], "max_position_embeddings": args.seq_len, "eos_token_id": 0},
                  "activation_checkpointing": args.activation_checkpointing, "compile": args.compile,
                  "attn_implementation": getattr(args, "attn", "auto")},
        "trainer": {"seq_len": args.seq_len, "global_batch_tokens": args.seq_len * args.micro_batch * args.accum,
                    "micro_batch_size": args.micro_batch, "lr": 1e-3, "device": args.device,
                    "intra_document": intra_document, "checkpoint_every": 10**9},
        "stages": [{"name": "bench", "kind": "stable", "tokens": steps * args.seq_len * args.micro_batch * args.accum,
                    "mixture": mix}],
    })  # fmt: skip


def run_mathmix(shards: Path, out: Path, args, intra_document: bool) -> dict:
    from midtrain.trainer import train_stage

    summary = train_stage(recipe(shards, out, args, args.steps, intra_document), "bench", progress=False)
    rows = [json.loads(x) for x in (out / "bench" / "metrics.jsonl").read_text().splitlines()][WARMUP:]
    tokens = args.seq_len * args.micro_batch * args.accum
    return {
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in rows),
        "tokens_per_cpu_s": statistics.median(tokens / r["cpu_s"] for r in rows),
        "data_fraction": summary["data_fraction"],
        "mfu": statistics.median(r["mfu"] for r in rows) if rows[0]["mfu"] is not None else None,
    }


def run_hf_trainer(shards: Path, out: Path, args) -> dict:
    """HF Trainer on the same packed windows (plain causal attention, as ours with intra_document off)."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from midtrain.data import PackedSequences
    from midtrain.model import build_model
    from shards.mixture import BlendedDocuments

    config = recipe(shards, out, args, args.steps, intra_document=False)
    stage = config.stages[0]
    packer = PackedSequences(BlendedDocuments(stage.build_mixture(None), stage.tokens), args.seq_len, False)
    n = args.steps * args.micro_batch * args.accum
    windows = [packer.next()[0] for _ in range(n)]
    dataset = [{"input_ids": torch.from_numpy(w), "labels": torch.from_numpy(w)} for w in windows]
    model = build_model(config.model, torch.device("cpu"), 1, seed=0)

    class StepTimer(TrainerCallback):
        times: list[float] = []

        cpu: list[float] = []

        def on_step_begin(self, *a, **k):
            self.t0, self.c0 = time.perf_counter(), time.process_time()

        def on_step_end(self, *a, **k):
            self.times.append(time.perf_counter() - self.t0)
            self.cpu.append(time.process_time() - self.c0)

    timer = StepTimer()
    targs = TrainingArguments(
        output_dir=str(out / "hf"), per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=args.accum, max_steps=args.steps, learning_rate=1e-3, use_cpu=True,
        save_strategy="no", report_to=[], logging_steps=10**9, dataloader_num_workers=0, lr_scheduler_type="constant",
        weight_decay=0.1, max_grad_norm=1.0, disable_tqdm=True, seed=0,
    )  # fmt: skip
    Trainer(model=model, args=targs, train_dataset=dataset, callbacks=[timer]).train()
    tokens = args.seq_len * args.micro_batch * args.accum
    return {
        "tokens_per_s": statistics.median(tokens / t for t in timer.times[WARMUP:]),
        "tokens_per_cpu_s": statistics.median(tokens / t for t in timer.cpu[WARMUP:]),
    }


def matmul_tflops(n: int = 8192, repeat: int = 10) -> float:
    """Measured bf16 matmul rate of this GPU (random data, after warm-up): the practical ceiling next to MFU."""
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        a @ b
    end.record()
    torch.cuda.synchronize()
    return 2 * n**3 * repeat / (start.elapsed_time(end) / 1e3) / 1e12


def run_gpu(shards: Path, tmp: Path, args) -> None:
    """MFU of the 1B Llama in bf16 (FSDP2 mixed precision, one process per GPU), causal and intra-document."""
    import shutil

    from midtrain.model import GPU_PEAK_TFLOPS, resolve_attn_implementation

    name = torch.cuda.get_device_name()
    peak = next((v for k, v in GPU_PEAK_TFLOPS.items() if k in name), None)
    measured = matmul_tflops()
    print(f"{name}: datasheet dense bf16 {peak} TFLOP/s, measured 8192^3 bf16 matmul {measured:.0f} TFLOP/s")  # fmt: skip
    print(
        f"{'run':34s}{'tokens/s':>12s}{'step s':>9s}{'MFU':>8s}{'MFU vs matmul':>15s}{'peak GiB':>10s}{'data %':>8s}"
    )
    for run in args.gpu_runs.split(
        ","
    ):  # causal (flash sdpa), intra (packed documents: varlen, masked or flex)
        kind, _, args.attn = run.partition(":")
        args.attn = args.attn or "auto"
        intra = kind == "intra"
        torch.cuda.reset_peak_memory_stats()
        res = run_mathmix(shards, tmp / run, args, intra_document=intra)
        shutil.rmtree(tmp / run, ignore_errors=True)  # the 1B checkpoint: ~15 GB
        mfu = res["mfu"] or 0.0
        step = args.seq_len * args.micro_batch * args.accum / res["tokens_per_s"]
        vs_matmul = mfu * (peak or 0) / measured
        attn = resolve_attn_implementation(args.attn, torch.device("cuda"), intra)
        label = f"{'intra-document' if intra else 'causal'} {attn} mb{args.micro_batch}x{args.accum}"
        print(f"{label:34s}{res['tokens_per_s']:12,.0f}{step:9.3f}{100 * mfu:7.1f}%{100 * vs_matmul:14.1f}%"
              f"{torch.cuda.max_memory_allocated() / 2**30:10.1f}{100 * res['data_fraction']:7.2f}%")  # fmt: skip
    print("target: MFU >= 45% (of the datasheet peak) for a 1B+ Llama in bf16")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--model-size", default=None, choices=list(MODELS))
    parser.add_argument("--seq-len", type=int, default=None)
    parser.add_argument("--micro-batch", type=int, default=None)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (CPU), median taken")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--gpu-runs", default="causal,intra", help="GPU: runs, each causal|intra[:ATTENTION]")
    parser.add_argument(
        "--no-compile", dest="compile", action="store_false", help="mathmix without torch.compile"
    )
    parser.add_argument(
        "--activation-checkpointing", action="store_true", help="recompute layers in backward"
    )
    args = parser.parse_args()
    gpu = args.device == "cuda"
    args.model_size = args.model_size or ("1b" if gpu else "tiny")
    args.seq_len = args.seq_len or (4096 if gpu else 256)
    args.micro_batch = args.micro_batch or (4 if gpu else 8)
    args.steps = args.steps or (12 if gpu else 10)
    torch.set_num_threads(args.threads or (torch.get_num_threads() if gpu else 1))
    tmp = Path(tempfile.mkdtemp(prefix="bench_train_"))
    tokens_needed = (args.steps + 1) * args.seq_len * args.micro_batch * args.accum
    shards = write_shards(tmp / "shards", MODELS[args.model_size]["vocab_size"], tokens_needed)
    print(f"model {args.model_size}, seq {args.seq_len}, batch {args.micro_batch}x{args.accum} sequences, "
          f"{args.steps} steps, device {args.device}, threads {torch.get_num_threads()}")  # fmt: skip
    if gpu:
        run_gpu(shards, tmp, args)
        return
    runs: dict[str, list[dict]] = {"hf": [], "ours": [], "intra": []}
    for r in range(args.rounds):  # alternate, so a load change on a shared machine hits both alike
        runs["ours"].append(run_mathmix(shards, tmp / f"ours{r}", args, intra_document=False))
        runs["hf"].append(run_hf_trainer(shards, tmp / f"hf{r}", args))
        runs["intra"].append(run_mathmix(shards, tmp / f"intra{r}", args, intra_document=True))
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("tokens_per_s", "tokens_per_cpu_s")}
           for k, v in runs.items()}  # fmt: skip
    labels = {"hf": "HF Trainer", "ours": "mathmix (causal, same work)", "intra": "mathmix (intra-document)"}
    print(f"{'':32s}{'tokens/s (wall)':>18s}{'tokens/CPU-s':>16s}")
    for key, label in labels.items():
        print(f"{label:32s}{med[key]['tokens_per_s']:18,.0f}{med[key]['tokens_per_cpu_s']:16,.0f}")
    wall = med["ours"]["tokens_per_s"] / med["hf"]["tokens_per_s"]
    cpu = med["ours"]["tokens_per_cpu_s"] / med["hf"]["tokens_per_cpu_s"]
    print(f"ratio mathmix / HF Trainer: {wall:.2f}x wall, {cpu:.2f}x per CPU-second  (target >= 1.2x)")
    share = max(x["data_fraction"] for x in runs["ours"] + runs["intra"])
    print(f"data loading share of step time: {100 * share:.2f}%  (target <= 2%)")


if __name__ == "__main__":
    main()
