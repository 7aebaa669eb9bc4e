"""Decontamination recall and precision: benchmark problems pasted into real pages, and the clean pages alone.

Planted: problems from every eval set under ../shared/data/bench (GSM8K, MATH500, AIME24, AMC23, OlympiadBench,
Minerva, SAT, SVAMP, ASDiv, Gaokao, college math), each altered (random case, doubled spaces and line breaks, LaTeX
spacing: `\\,` inserted, spaces around operators dropped or added, `\\frac` <-> `\\dfrac`, `\\left( \\right)`) and
pasted at a paragraph break of a random real page (../shared/data/html, extracted). Clean: the real pages as they
are. Everything goes through the real job (`pipelines.decont.run_decont`, 13-grams, index over
../shared/data/bench: its eval sets, the training splits left out). Targets: >= 99% of planted problems found
(among those with at least one 13-gram of prose: problems the index cannot find even unaltered are counted apart),
0 hits on clean pages. Problems shorter than a 13-gram that the index matches whole are counted on their own rows
(`whole:`), outside the 13-gram target. The same problems are pasted again with their math rendered in Unicode
(`45π`, `√(3x−5)`, `x²`, `≤`) and in forum ASCII (`sqrt(3x-5)`, `pi`, `*`, `(a)/(b)`): recall of each. MATH and
GSM8K train problems with their solutions (homework pages quoting training data) are a second clean set: the
share of them dropped is the false-positive rate on math text.

    .venv/bin/python bench/bench_decont.py [--planted 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_minhash import load_pages  # noqa: E402
from curate.decont import BenchmarkIndex, benchmark_files, problem_texts  # noqa: E402

EVAL_SETS = ("gsm8k/test", "math500/test", "qwen_eval/")


def perturb(text: str, rng: random.Random) -> str:
    """Case, whitespace and LaTeX-spacing changes that do not change what the problem says."""
    text = text.replace("\\frac", "\\dfrac") if rng.random() < 0.5 else text.replace("\\dfrac", "\\frac")
    if rng.random() < 0.5:
        text = re.sub(r"\s*([=+\-<>])\s*", lambda m: f" {m.group(1)} ", text)  # spaces around operators
    else:
        text = re.sub(r"\s*([=+<>])\s*", r"\1", text)
    text = re.sub(r"\$(\S)", lambda m: "$ " + m.group(1) if rng.random() < 0.3 else m.group(0), text)
    text = text.replace("(", "\\left(" if rng.random() < 0.2 and "$" in text else "(")
    text = text.replace(")", "\\right)" if "\\left(" in text else ")")
    words = []
    for w in text.split(" "):
        r = rng.random()
        w = w.upper() if r < 0.1 else w.title() if r < 0.2 else w
        words.append(w + ("\\," if "$" in w and rng.random() < 0.1 else ""))
    glue = [rng.choice([" ", " ", " ", "  ", "\n", " \t"]) for _ in words]
    return "".join(w + g for w, g in zip(words, glue, strict=True)).strip()


_UNICODE = {
    r"\times": "×", r"\cdot": "·", r"\leq": "≤", r"\le": "≤", r"\geq": "≥", r"\ge": "≥", r"\neq": "≠",
    r"\pi": "π", r"\theta": "θ", r"\alpha": "α", r"\infty": "∞", r"\pm": "±", r"\div": "÷", r"\angle": "∠",
    r"\sqrt": "√", r"\cdots": "⋯", r"\ldots": "…", r"\dots": "…",
}  # fmt: skip
_ASCII = {r"\times": "*", r"\cdot": "*", r"\leq": "<=", r"\le": "<=", r"\geq": ">=", r"\ge": ">=", r"\neq": "!=",
          r"\pm": "+/-", r"\div": "/", r"\cdots": "...", r"\ldots": "...", r"\dots": "..."}  # fmt: skip


def _plain_math(text: str, symbols: dict[str, str], degree: str) -> str:
    """LaTeX as a page without MathJax writes it: \\text{...} unwrapped, fractions as (a)/(b), SYMBOLS replaced."""
    text = re.sub(r"\\(?:text|mathrm|textbf|mbox|operatorname)\s*\{([^{}]*)\}", r"\1", text)
    for _ in range(3):
        text = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"(\1)/(\2)", text)
    text = re.sub(r"\\[dt]?frac\s*(\d)(\d)", r"\1/\2", text)
    text = re.sub(r"\^\{?\\circ\}?", degree, text)
    for latex in sorted(symbols, key=len, reverse=True):
        text = re.sub(re.escape(latex) + r"(?![a-zA-Z])", symbols[latex], text)
    text = re.sub(r"\\(left|right|big|Big|,|;|!|quad|qquad)", "", text)
    return text.replace("\\$", "$").replace("$", "")


def unicode_math(text: str) -> str:
    """Math rendered in Unicode (`45π`, `√{7}`, `x²`)."""
    text = re.sub(r"\^\{?2\}?(?![0-9])", "²", re.sub(r"\^\{?3\}?(?![0-9])", "³", text))
    return _plain_math(text, _UNICODE, "°")


def ascii_math(text: str) -> str:
    """Math typed on a forum (`sqrt{3x-5}`, `pi`, `*`, `<=`, `(a)/(b)`)."""
    return re.sub(r"\\([a-zA-Z]+)", r"\1", _plain_math(text, _ASCII, " degrees"))


def planted_problems(bench: Path, n: int, rng: random.Random) -> list[tuple[str, str]]:
    """(benchmark, problem text) sampled from the eval sets: the problem field only."""
    out = []
    for name, path in benchmark_files([bench]):
        if not any(name.startswith(e) for e in EVAL_SETS):
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            # story before question (SVAMP, ASDiv); AMC/AIME carry the same text as problem and question
            parts = list(dict.fromkeys(problem_texts(record)))
            if parts:
                out.append((name, " ".join(parts)))
    rng.shuffle(out)
    return out[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--planted", type=int, default=1000)
    ap.add_argument(
        "--out", type=Path, default=None, help="a new or empty folder (default: a fresh temp folder)"
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    # never a fixed path (two runs clobbered each other) and never a folder with files (it was deleted whole)
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="mathmix-bench-decont-"))
    elif args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        sys.exit(f"--out {args.out}: must be a new or empty folder")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.decont import Config, run_decont
    from pipelines.executors import ExecutorConfig

    rng = random.Random(args.seed)
    pages = load_pages(args.shared)
    problems = planted_problems(args.shared / "bench", args.planted, rng)
    rows = [{"id": f"clean{i}", "text": p} for i, p in enumerate(pages)]
    train = [
        (f"math_train{i}", r["problem"] + "\n\n" + r["solution"])
        for i, r in enumerate(_records(args.shared / "bench" / "math_hendrycks" / "train.jsonl"))
    ]
    train += [
        (f"gsm8k_train{i}", r["question"] + "\n\n" + r["answer"])
        for i, r in enumerate(_records(args.shared / "bench" / "gsm8k" / "train.jsonl"))
    ]
    rows += [{"id": doc_id, "text": text} for doc_id, text in train]
    index = BenchmarkIndex([args.shared / "bench"])  # only to tell which rule can find each problem at all
    detectable = {}
    for i, (name, problem) in enumerate(problems):
        page = rng.choice(pages)
        breaks = [m.end() for m in re.finditer(r"\n", page)] or [len(page)]
        cut = rng.choice(breaks)
        rows.append(
            {"id": f"planted{i}", "text": page[:cut] + "\n" + perturb(problem, rng) + "\n" + page[cut:]}
        )
        for kind, render in (("unicode", unicode_math), ("ascii", ascii_math)):
            if render(problem) != problem:  # only problems with math to render
                rows.append(
                    {"id": f"{kind}{i}", "text": page[:cut] + "\n" + render(problem) + "\n" + page[cut:]}
                )
        hits = index.find(problem)
        rule = "ngram" if any(o.n_matched > o.whole for o in hits) else "whole" if hits else "none"
        detectable[f"planted{i}"] = (name, rule)
    (args.out / "in").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), args.out / "in" / "docs.parquet")
    start = time.time()
    summary = run_decont(
        Config(),
        [str(args.out / "in")],
        args.out / "run",
        ExecutorConfig(tasks=1),
        [str(args.shared / "bench")],
    )
    seconds = time.time() - start
    hit_ids = {
        json.loads(x)["id"] for x in (args.out / "run" / "contamination.jsonl").read_text().splitlines()
    }
    clean_hits = sorted(i for i in hit_ids if i.startswith("clean"))
    found, total = Counter(), Counter()
    for doc_id, (name, rule) in detectable.items():
        key = {"ngram": name, "whole": f"whole: {name}", "none": f"(none: {name})"}[rule]
        total[key] += 1
        found[key] += doc_id in hit_ids
    print(
        f"{len(rows)} docs ({len(pages)} clean pages, {len(problems)} planted) in {seconds:.1f} s "
        f"(index of {sum(summary['benchmark_records'].values()):,} benchmark records included)"
    )
    print(f"{'planted from':34s} {'n':>5s} {'found':>6s} {'rate':>6s}")
    for key in sorted(total):
        print(f"{key:34s} {total[key]:5d} {found[key]:6d} {found[key] / total[key]:6.3f}")
    det_total = sum(v for k, v in total.items() if not k.startswith(("(", "whole")))
    det_found = sum(v for k, v in found.items() if not k.startswith(("(", "whole")))
    whole_total = sum(v for k, v in total.items() if k.startswith("whole"))
    whole_found = sum(v for k, v in found.items() if k.startswith("whole"))
    misses = [
        r
        for r in rows
        if r["id"] in detectable and detectable[r["id"]][1] != "none" and r["id"] not in hit_ids
    ]
    for r in misses[:3]:
        print("MISSED", r["id"], detectable[r["id"]][0], repr(problems[int(r["id"][7:])][1][:300]))
    print(
        f"short problems matched whole: {whole_found}/{whole_total}; "
        f"found by neither rule: {sum(total.values()) - det_total - whole_total}"
    )
    for kind in ("unicode", "ascii"):
        ids = [
            r["id"]
            for r in rows
            if r["id"].startswith(kind) and detectable[f"planted{r['id'][len(kind) :]}"][1] != "none"
        ]
        got = sum(i in hit_ids for i in ids)
        print(
            f"{kind} rendering: found {got}/{len(ids)} = {got / max(1, len(ids)):.4f} (of the findable problems)"
        )
    for prefix, label in (("math_train", "MATH train"), ("gsm8k_train", "GSM8K train")):
        ids = [doc_id for doc_id, _ in train if doc_id.startswith(prefix)]
        got = sum(i in hit_ids for i in ids)
        print(f"{label} problem+solution pages dropped: {got}/{len(ids)} = {got / max(1, len(ids)):.4f}")
    print(
        f"TARGETS planted found = {det_found}/{det_total} = {det_found / max(1, det_total):.4f} (>= 0.99); "
        f"hits on clean pages = {len(clean_hits)} (0) {clean_hits[:5]}"
    )


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


if __name__ == "__main__":
    main()
