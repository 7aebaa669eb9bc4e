"""MinHash signature throughput: mathmix's numpy signer vs rensa and datasketch (and datatrove's stock step).

Same pages (../shared/data/html, text extracted once up front), same shingles (5-grams of the same word/number/
operator tokens, between start and end markers; the plain-Python tokens match ours on ASCII text), same number of
permutations (bands x rows = 110). Each method goes from text to signature; rensa and
datasketch get the shingle strings built by the fastest plain-Python path. Rounds are interleaved and the best
round of each method is reported, so a busy machine hurts all methods alike. Also prints rensa / datasketch
with the shingles built beforehand (their hashing alone), for reference.

    .venv/bin/python bench/bench_minhash.py [--rounds 3] [--datatrove 40]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import re  # noqa: E402

from curate.minhash import MinhashSettings, MinhashSigner  # noqa: E402

# curate.minhash_tokens' tokens as a regex: letter runs, digit runs, math operators one character each
TOKEN_RE = re.compile(
    r"[^\W\d_]+|\d+|[-+<>=^_/*|!\u00ac\u00b1\u00d7\u00f7\u2190-\u22ff\u27c0-\u27ff\u2900-\u2aff]"
)


def load_pages(shared: Path) -> list[str]:
    """Main text of every page under shared/html (mathmix's extractor; resiliparse if it is not importable)."""
    try:
        from curate.extract import extract
    except Exception:  # the extractor is another module: fall back rather than not measuring at all
        from resiliparse.extract.html2text import extract_plain_text

        def extract(html: str) -> str:
            return extract_plain_text(html, main_content=True)

    pages = sorted((shared / "html").rglob("*.html"))
    return [extract(p.read_bytes().decode("utf-8", errors="replace")) for p in pages]


def shingle_strings(text: str, n: int) -> list[str]:
    tokens = ["<s>"] * (n - 1) + TOKEN_RE.findall(text.lower()) + ["</s>"] * (n - 1)
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def run_mathmix(texts: list[str], settings: MinhashSettings) -> None:
    signer = MinhashSigner(settings)
    for i in range(0, len(texts), 256):
        signer.signatures(texts[i : i + 256])


def run_rensa(texts: list[str], settings: MinhashSettings, pre: list[list[str]] | None = None) -> None:
    import rensa

    for i, text in enumerate(texts):
        m = rensa.RMinHash(num_perm=settings.num_hashes, seed=settings.seed)
        m.update(pre[i] if pre is not None else shingle_strings(text, settings.n_grams))
        m.digest()


def run_datasketch(texts: list[str], settings: MinhashSettings, pre: list[list[str]] | None = None) -> None:
    from datasketch import MinHash

    for i, text in enumerate(texts):
        m = MinHash(num_perm=settings.num_hashes, seed=settings.seed)
        sh = pre[i] if pre is not None else shingle_strings(text, settings.n_grams)
        m.update_batch([s.encode("utf-8") for s in sh])
        m.digest()


def run_datatrove(texts: list[str], settings: MinhashSettings) -> None:
    from datatrove.pipeline.dedup.minhash import MinhashDedupSignature

    step = MinhashDedupSignature("/tmp/unused-minhash-bench", config=settings.datatrove_config())
    for text in texts:
        step.get_signature(step.get_shingles(text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--datatrove", type=int, default=40, help="pages for datatrove's stock step (0: skip)")
    args = ap.parse_args()
    if not (args.shared / "html").is_dir():
        sys.exit(f"{args.shared}/html not found: the benchmark needs ../shared/data")
    texts = load_pages(args.shared)
    settings = MinhashSettings()
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(
        f"{len(texts)} pages, {mb:.1f} MB of text; {settings.n_grams}-gram shingles, {settings.num_hashes} perms"
    )
    pre = [shingle_strings(t, settings.n_grams) for t in texts]
    methods = {
        "mathmix (numpy)": lambda: run_mathmix(texts, settings),
        "rensa": lambda: run_rensa(texts, settings),
        "datasketch": lambda: run_datasketch(texts, settings),
        "rensa, shingles prebuilt": lambda: run_rensa(texts, settings, pre),
        "datasketch, shingles prebuilt": lambda: run_datasketch(texts, settings, pre),
    }
    best = {name: float("inf") for name in methods}
    for _ in range(args.rounds):
        for name, fn in methods.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    rate = {name: len(texts) / s for name, s in best.items()}
    if args.datatrove:
        sub = texts[: args.datatrove]
        try:
            start = time.perf_counter()
            run_datatrove(sub, settings)
            rate["datatrove stock (spaCy)"] = len(sub) / (time.perf_counter() - start)
        except Exception as err:  # spaCy missing: say so
            print(f"datatrove stock step not measured: {err}")
    ours = rate["mathmix (numpy)"]
    print(f"{'method':32s} {'docs/s':>10s} {'MB/s':>8s} {'mathmix x':>10s}")
    for name, r in rate.items():
        print(f"{name:32s} {r:10.0f} {r * mb / len(texts):8.2f} {ours / r:10.2f}")
    print(
        f"RATIO mathmix/rensa = {ours / rate['rensa']:.2f} (target >= 1.0); "
        f"mathmix/datasketch = {ours / rate['datasketch']:.2f} (target >= 5)"
    )


if __name__ == "__main__":
    main()
