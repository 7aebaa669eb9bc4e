"""Near-duplicate detection quality of the dedup job on planted pairs made from real pages and real problems.

Pairs: (1) each real page (../shared/data/html, extracted) with copies edited at random rates (word substitutions,
deletions, insertions); the true Jaccard of their 5-gram shingle sets is computed exactly. (2) every GSM8K test
question and MATH500 problem with a copy whose numbers all differ. The corpus goes through the real job
(`pipelines.dedup.run_dedup`: exact + MinHash, 11 bands x 10 rows) and a pair counts as merged when both end in one
cluster. Targets: recall >= 0.95 for pairs with J >= 0.85, <= 1% merged for J < 0.5, number variants never merged.
Prints the LSH theory curve next to the measured rates.

    .venv/bin/python bench/bench_dedup_quality.py [--variants 4] [--out /tmp/dedup-quality]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_minhash import load_pages  # noqa: E402
from curate.minhash import MinhashSigner  # noqa: E402

NUMBER_RE = re.compile(r"\d+")


_SIGNER = MinhashSigner()


def shingle_set(text: str) -> set[int]:
    """The 5-gram shingles the job signs (start and end markers included)."""
    grams, _ = _SIGNER.shingles([text])
    return set(grams.tolist())


def jaccard(a: str, b: str) -> float:
    sa, sb = shingle_set(a), shingle_set(b)
    return len(sa & sb) / max(1, len(sa | sb))


def edit(text: str, rate: float, vocab: list[str], rng: random.Random) -> str:
    """Substitute, delete or insert words, each word touched with probability `rate`."""
    out = []
    for word in text.split():
        if rng.random() >= rate:
            out.append(word)
            continue
        op = rng.random()
        if op < 0.5:
            out.append(rng.choice(vocab))
        elif op < 0.75:
            out += [word, rng.choice(vocab)]
        # else: deleted
    return " ".join(out)


def renumber(text: str, rng: random.Random) -> str:
    """Every number replaced by a different one of similar size."""
    return NUMBER_RE.sub(lambda m: str(int(m.group()) + rng.randint(1, 9)), text)


def build_corpus(shared: Path, variants: int, rng: random.Random):
    pages = [p for p in load_pages(shared) if len(shingle_set(p)) >= 50]
    vocab = sorted({w for p in pages for w in p.split() if w.isalpha() and len(w) < 12})
    rows, pairs = [], []
    for i, page in enumerate(pages):
        rows.append({"id": f"page{i}", "text": page})
        for v in range(variants):
            copy = edit(
                page, rng.choice([0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5]) * rng.random() * 2, vocab, rng
            )
            rows.append({"id": f"page{i}_v{v}", "text": copy})
            pairs.append(("page", f"page{i}", f"page{i}_v{v}", jaccard(page, copy)))
    problems = [
        json.loads(x)["question"] for x in (shared / "bench/gsm8k/test.jsonl").read_text().splitlines()
    ]
    problems += [
        json.loads(x)["problem"] for x in (shared / "bench/math500/test.jsonl").read_text().splitlines()
    ]
    for i, prob in enumerate(problems):
        if not NUMBER_RE.search(prob):
            continue
        rows += [{"id": f"prob{i}", "text": prob}, {"id": f"prob{i}_n", "text": renumber(prob, rng)}]
        pairs.append(("numbers", f"prob{i}", f"prob{i}_n", jaccard(prob, rows[-1]["text"])))
    return rows, pairs


def cluster_of(out: Path) -> dict[str, str]:
    """Document id -> representative: exact groups and MinHash clusters joined (a doc removed as an exact copy
    never reaches MinHash, so its group's kept doc stands for it there)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for line in (out / "clusters.jsonl").read_text().splitlines():
        c = json.loads(line)
        for doc in c["removed"]:
            parent[find(doc)] = find(c["kept"])
    return {x: find(x) for x in list(parent)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--variants", type=int, default=4, help="edited copies per page")
    ap.add_argument("--out", type=Path, default=Path("/tmp/mathmix-bench-dedup-quality"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.dedup import Config, run_dedup
    from pipelines.executors import ExecutorConfig

    rows, pairs = build_corpus(args.shared, args.variants, random.Random(args.seed))
    shutil.rmtree(args.out, ignore_errors=True)
    (args.out / "in").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), args.out / "in" / "corpus.parquet")
    start = time.time()
    summary = run_dedup(
        Config(exact_url=False), [str(args.out / "in")], args.out / "run", ExecutorConfig(tasks=1)
    )
    print(f"{len(rows)} docs deduplicated in {time.time() - start:.1f} s: {summary['dropped']}")
    member = cluster_of(args.out / "run")

    def merged(a: str, b: str) -> bool:
        return a in member and member.get(a) == member.get(b)

    print(f"number guard blocked pairs: {_blocked(args.out / 'run')}")

    def theory(j: float) -> float:  # P(candidate) for 11 bands x 10 rows
        return 1 - (1 - j**10) ** 11

    print(f"{'pairs':28s} {'n':>6s} {'merged':>8s} {'rate':>7s} {'LSH theory':>10s}")
    bands = [
        ("J >= 0.85", 0.85, 1.01),
        ("0.75 <= J < 0.85", 0.75, 0.85),
        ("0.5 <= J < 0.75", 0.5, 0.75),
        ("J < 0.5", -1, 0.5),
    ]
    results = {}
    for label, lo, hi in bands:
        sel = [(a, b, j) for kind, a, b, j in pairs if kind == "page" and lo <= j < hi]
        m = sum(merged(a, b) for a, b, _ in sel)
        th = sum(theory(j) for *_, j in sel) / max(1, len(sel))
        results[label] = m / max(1, len(sel))
        print(f"pages {label:22s} {len(sel):6d} {m:8d} {results[label]:7.3f} {th:10.3f}")
    num = [(a, b, j) for kind, a, b, j in pairs if kind == "numbers"]
    num_merged = sum(merged(a, b) for a, b, _ in num)
    print(
        f"{'problems, numbers changed':28s} {len(num):6d} {num_merged:8d} {num_merged / max(1, len(num)):7.3f} "
        f"{sum(theory(j) for *_, j in num) / max(1, len(num)):10.3f}   (max J {max(j for *_, j in num):.2f})"
    )
    print(
        f"TARGETS recall(J>=0.85) = {results['J >= 0.85']:.3f} (>= 0.95); merged(J<0.5) = "
        f"{results['J < 0.5']:.4f} (<= 0.01); number variants merged = {num_merged} (0)"
    )


def _blocked(run: Path) -> int:
    stats = json.loads((run / "logs" / "5_clusters" / "stats.json").read_text())
    return int(sum(step["stats"].get("pairs_blocked_by_numbers", {}).get("total", 0) for step in stats))


if __name__ == "__main__":
    main()
