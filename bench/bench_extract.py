"""Extraction benchmark: speed (docs/s) and quality (formula recall, bag-of-words F1), side by side in one run.

Speed: every page of ../shared/data/html (math + nonmath) through datatrove's stock `Trafilatura` step and
through `MathAwareExtractor` (fast and clean engines), all as datatrove steps with their worker-process sandbox,
the same per-document timeout for all (the stock default of 1 s would drop slow pages and flatter the baseline).
The three run in turn, `--rounds` times (default 3), and each one's median docs/s is reported with its spread: on a
shared machine one pass of the fast engine (~2 s) swings by +-20% from run to run, the ratio with it.
Quality: ../shared/data/extraction_gold/pages.jsonl for each engine, datatrove's Trafilatura and resiliparse plain:
formula recall, the same recall counting only formulas inside `$..$`/`$$..$$` (TeX left bare is missed), BoW F1.

    .venv/bin/python bench/bench_extract.py [--limit N] [--timeout S] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from curate.extract_eval import delimited_formula_recall, gold_formulas, load_gold, score_pages  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"


def load_pages(html_dir: Path, limit: int | None) -> list[tuple[str, str]]:
    files = sorted(html_dir.glob("*/*.html"))[:limit]
    return [(str(f), f.read_bytes().decode("utf-8", errors="replace")) for f in files]


def time_step(step, pages: list[tuple[str, str]]) -> dict:
    """Run a datatrove step over the pages; docs/s counts every input page (kept or dropped)."""
    from datatrove.data import Document

    docs = (Document(text=html, id=path, metadata={"url": None}) for path, html in pages)
    t0 = time.perf_counter()
    kept = sum(1 for _ in step.run(docs))
    seconds = time.perf_counter() - t0
    stats = dict(step.stats.stats.items())
    return {
        "docs": len(pages),
        "kept": kept,
        "seconds": round(seconds, 2),
        "docs_per_s": round(len(pages) / seconds, 2),
        "stats": {k: str(v) for k, v in stats.items()},
    }


def median_round(runs: list[dict]) -> dict:
    """The run with the median docs/s (the lower middle one of an even count), with every round's docs/s."""
    ordered = sorted(runs, key=lambda r: r["docs_per_s"])
    return {**ordered[(len(ordered) - 1) // 2], "rounds_docs_per_s": [r["docs_per_s"] for r in runs]}


def quality(gold: list[dict]) -> dict:
    from datatrove.pipeline.extractors import Trafilatura
    from resiliparse.extract.html2text import extract_plain_text

    from curate.extract import extract

    stock = Trafilatura()
    fns = {
        "mathmix-fast": lambda h, u: extract(h, u, engine="fast"),
        "mathmix-clean": lambda h, u: extract(h, u, engine="clean"),
        "datatrove-trafilatura": lambda h, u: stock.extract(h) or "",
        "resiliparse-plain": lambda h, u: extract_plain_text(h, main_content=True),
    }
    out = {}
    for name, fn in fns.items():
        texts: list[str] = []  # score_pages runs the pages in order

        def keep(html: str, url: str | None, fn=fn, texts=texts) -> str:
            texts.append(fn(html, url))
            return texts[-1]

        scores = score_pages(gold, keep)
        delimited = [delimited_formula_recall(t, gold_formulas(p)) for t, p in zip(texts, gold, strict=True)]
        delimited_pages = [r for r in delimited if r is not None]
        out[name] = {
            "recall": round(scores["recall"], 4),
            "delimited_recall": round(sum(delimited_pages) / len(delimited_pages), 4)
            if delimited_pages
            else 0.0,
            "f1": round(scores["f1"], 4),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--html-dir", type=Path, default=SHARED / "html")
    ap.add_argument("--gold", type=Path, default=SHARED / "extraction_gold" / "pages.jsonl")
    ap.add_argument("--limit", type=int, default=None, help="only the first N pages (default: all)")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-document timeout for every extractor")
    ap.add_argument(
        "--rounds", type=int, default=3, help="passes of each extractor, in turn (median reported)"
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    if args.rounds < 1:
        sys.exit(f"--rounds must be at least 1, got {args.rounds}")
    if not args.html_dir.is_dir():
        sys.exit(f"{args.html_dir} not found (../shared/data is needed)")

    from datatrove.pipeline.extractors import Trafilatura

    from curate.extract_step import MathAwareExtractor

    pages = load_pages(args.html_dir, args.limit)
    print(
        f"speed: {len(pages)} pages from {args.html_dir} ({sum(len(h) for _, h in pages) / 1e6:.1f} M chars)"
    )
    steps = {
        "datatrove-trafilatura": lambda: Trafilatura(timeout=args.timeout),
        "mathmix-fast": lambda: MathAwareExtractor(engine="fast", timeout_s=args.timeout),
        "mathmix-clean": lambda: MathAwareExtractor(engine="clean", timeout_s=args.timeout),
    }
    rounds: dict[str, list[dict]] = {name: [] for name in steps}
    for _ in range(args.rounds):  # in turn, so a slow spell of the machine falls on all of them
        for name, make in steps.items():
            rounds[name].append(time_step(make(), pages))
    speed = {name: median_round(runs) for name, runs in rounds.items()}
    base = speed["datatrove-trafilatura"]["docs_per_s"]
    for name, row in speed.items():
        row["ratio_vs_datatrove_trafilatura"] = round(row["docs_per_s"] / base, 2)
        print(
            f"  {name:24s} {row['docs_per_s']:8.2f} docs/s  {row['seconds']:7.2f} s  kept {row['kept']}/{row['docs']}"
            f"  x{row['ratio_vs_datatrove_trafilatura']:.2f} vs datatrove Trafilatura"
            f"  (median of {len(row['rounds_docs_per_s'])}: {', '.join(f'{r:.1f}' for r in row['rounds_docs_per_s'])})"
        )
    result = {"speed": speed}
    if args.gold.is_file():
        gold = load_gold(args.gold)
        print(f"quality: {len(gold)} gold pages from {args.gold}")
        result["quality"] = quality(gold)
        for name, row in result["quality"].items():
            print(
                f"  {name:24s} formula recall {row['recall']:.3f}   in $..$/$$..$$ {row['delimited_recall']:.3f}"
                f"   bag-of-words F1 {row['f1']:.3f}"
            )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
