"""Scale: a synthetic corpus (default 100k documents; `--docs 1000000` for the 1M target) through the whole dedup
job on 2 tasks / 2 workers, with wall time per stage and the peak memory of the process tree.

Documents: `--words` words drawn from a Zipf-distributed 50k-word vocabulary, with numbers mixed in; 10% are exact
copies (upper-cased) and 10% near copies (2% of the words replaced, numbers kept) of other documents, so the job has real
work at every stage. Peak memory = the largest sum of RSS over this process and its children, sampled every 0.2 s
(target < 4 GB). Prints the docs removed against the planted counts.

    .venv/bin/python bench/bench_dedup_scale.py [--docs 100000] [--words 120] [--out /tmp/mathmix-bench-scale]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class PeakRss:
    """Samples the summed RSS of this process and all its descendants in a background thread."""

    def __init__(self, interval: float = 0.2):
        import psutil

        self.proc, self.interval, self.peak, self._stop = psutil.Process(), interval, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            for p in [self.proc, *self.proc.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(self.interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def make_corpus(out: Path, n_docs: int, words: int, files: int, seed: int) -> dict[str, int]:
    """Write the synthetic corpus as `files` Parquet files; returns the planted counts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = np.array(["".join(rng.choice(letters, rng.integers(2, 10))) for _ in range(50_000)], dtype=object)
    vocab[:200] = [str(i) for i in range(200)]  # numbers among the most frequent tokens
    n_exact, n_near = n_docs // 10, n_docs // 10
    n_unique = n_docs - n_exact - n_near
    per_file = -(-n_docs // files)
    ids = np.arange(n_docs)
    out.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        lo, hi = f * per_file, min(n_docs, (f + 1) * per_file)
        texts, scores = [], rng.random(hi - lo)
        for i in range(lo, hi):
            if i < n_unique:
                texts.append(_doc(np.random.default_rng([seed, i]), vocab, words))
                continue
            src = int(np.random.default_rng([seed, i, 1]).integers(0, n_unique))
            text = _doc(np.random.default_rng([seed, src]), vocab, words)
            texts.append(
                text.upper() if i < n_unique + n_exact else _near(text, vocab, np.random.default_rng(i))
            )
        table = pa.table({"id": [f"d{i}" for i in ids[lo:hi]], "text": texts, "math_score": scores})
        pq.write_table(table, out / f"part{f:03d}.parquet")
    return {"unique": n_unique, "exact_copies": n_exact, "near_copies": n_near}


def _doc(rng: np.random.Generator, vocab: np.ndarray, words: int) -> str:
    ranks = np.minimum(rng.zipf(1.2, words), len(vocab)) - 1
    return " ".join(vocab[ranks])


def _near(text: str, vocab: np.ndarray, rng: np.random.Generator) -> str:
    """2% of the words replaced, numbers left alone (a copy with other numbers is another document)."""
    tokens = text.split()
    words = [i for i, t in enumerate(tokens) if not t.isdigit()]
    for i in rng.choice(words, min(len(words), max(1, len(tokens) // 50)), replace=False):
        tokens[i] = vocab[rng.integers(200, len(vocab))]
    return " ".join(tokens)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--words", type=int, default=120)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("/tmp/mathmix-bench-scale"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from pipelines.dedup import Config, run_dedup
    from pipelines.executors import ExecutorConfig

    shutil.rmtree(args.out, ignore_errors=True)
    start = time.time()
    planted = make_corpus(args.out / "in", args.docs, args.words, args.files, args.seed)
    print(
        f"corpus: {args.docs:,} docs x {args.words} words in {time.time() - start:.0f} s; planted {planted}"
    )
    start = time.time()
    with PeakRss() as rss:
        summary = run_dedup(
            Config(), [str(args.out / "in")], args.out / "run", ExecutorConfig(tasks=2, workers=2)
        )
    seconds = time.time() - start
    print(json.dumps(summary, indent=1, default=str))
    print(
        f"RESULT {args.docs:,} docs in {seconds:.0f} s ({args.docs / seconds:,.0f} docs/s on 2 workers); "
        f"peak RSS of the process tree {rss.peak / 2**30:.2f} GiB (target < 4); "
        f"removed {summary['docs_in'] - summary['docs_out']:,} (planted copies {planted['exact_copies'] + planted['near_copies']:,})"
    )


if __name__ == "__main__":
    main()
