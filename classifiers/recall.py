"""Iterative recall (DeepSeekMath): find math domains and URL patterns, collect their missed pages for review.

One round: score a corpus, group pages by domain, call a domain math when more than `domain_share` of its pages
score above the threshold, find the URL path prefixes (first path segment) that hold its math pages, and export
the pages under those prefixes that the classifier did not select: the candidates for the next round's
positives, after review. The round is appended to the model card's `recall_rounds`.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from classifiers.data import Skipped, read_input
from classifiers.model import MathClassifier, ModelError, file_sha256, found_card_path, read_card
from mathmix.cli_util import write_json


def domain_of(url: str) -> str:
    """`https://www.Math.StackExchange.com/q/1` -> `math.stackexchange.com`."""
    host = urlsplit(url).hostname or ""
    return host[4:] if host.startswith("www.") else host


def path_pattern(url: str) -> str:
    """The URL's domain and first path segment: `mathoverflow.net/questions/`."""
    parts = [p for p in urlsplit(url).path.split("/") if p]
    return f"{domain_of(url)}/{parts[0]}/" if len(parts) > 1 else f"{domain_of(url)}/"


def find_math_domains(
    rows: list[dict[str, Any]], threshold: float, domain_share: float, min_pages: int
) -> dict[str, dict[str, Any]]:
    """{domain: stats} for domains with >= min_pages pages and more than `domain_share` of them above threshold."""
    by_domain: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_domain[row["domain"]].append(row)
    math_domains = {}
    for domain, pages in by_domain.items():
        high = [p for p in pages if p["math_score"] >= threshold]
        share = len(high) / len(pages)
        if len(pages) >= min_pages and share > domain_share:
            patterns: dict[str, list[int]] = defaultdict(lambda: [0, 0])
            for p in pages:
                patterns[p["pattern"]][0] += 1
                patterns[p["pattern"]][1] += p["math_score"] >= threshold
            math_patterns = sorted(pat for pat, (n, k) in patterns.items() if k / n > domain_share)
            math_domains[domain] = {
                "pages": len(pages),
                "math_pages": len(high),
                "share": round(share, 4),
                "patterns": math_patterns,
            }
    return math_domains


OUTPUTS = ("domains.json", "candidates.jsonl")


def check_out_dir(out_dir: Path, model_path: str | Path, corpus: Sequence, settings: dict[str, Any]) -> None:
    """Record this round's job in OUT/job.json, or raise ValueError when OUT holds other output.

    Another command's folder (a web stage: its own job.json) or another round (other corpus, model or settings)
    is refused as `mathmix web`, dedup and eval refuse it; a folder of other files with no job record is refused
    naming a few (a rerun of the same round is what may write here); so is OUT inside a corpus folder.
    """
    from pipelines.job_record import (
        check_foreign_files,
        check_job,
        check_output_outside_inputs,
        has_progress,
        model_job_identity,
    )

    # A rerun would read its candidates as corpus. ("--corpus input": the helper appends "s" to name them all.)
    check_output_outside_inputs(out_dir, corpus, "--corpus input")
    check_foreign_files(out_dir, OUTPUTS, "classifier recall")
    settings = {**settings, "model_sha256": file_sha256(model_path)}  # a retrained model at the same path
    identity = model_job_identity("classifier recall", model_path, corpus, settings)
    check_job(
        out_dir,
        identity,
        "classifier recall",
        progress=lambda d: has_progress(d) or any((d / name).is_file() for name in OUTPUTS),
    )


def recall_round(
    model_path: str | Path,
    corpus: Sequence[str | Path],
    out_dir: str | Path,
    threshold: float | None = None,
    domain_share: float = 0.1,
    min_pages: int = 3,
) -> dict[str, Any]:
    """Run one recall round; write OUT/domains.json and OUT/candidates.jsonl; record it in the card.

    A rerun into the same OUT (the same round: see `check_out_dir`) rewrites its files and its card entry.
    """
    clf = MathClassifier(model_path)
    if not clf.card:
        # The round is recorded in the card: one holding only `recall_rounds` is then refused as a model of the
        # older preprocessing.
        raise ModelError(
            f"{model_path}: its card {found_card_path(model_path)} is missing or empty: recall records its round "
            "there and scores by its threshold; copy the model's card with it"
        )
    out_dir = Path(out_dir)
    settings = {"threshold": threshold, "domain_share": domain_share, "min_pages": min_pages}
    check_out_dir(out_dir, model_path, corpus, settings)
    threshold = clf.threshold if threshold is None else threshold
    skipped = Skipped()
    docs = []
    for doc in (d for path in corpus for d in read_input(path, skipped)):
        if doc.url:
            docs.append(doc)
        else:
            skipped.add("no_url", doc.page)
    if not docs:
        raise ValueError(
            "recall needs documents with a `url` (column or metadata.url); none found in the corpus"
        )
    scores = clf.score([d.text for d in docs])
    rows: list[dict[str, Any]] = [
        {
            "url": d.url,
            "domain": domain_of(cast(str, d.url)),  # docs without a URL were left out above
            "pattern": path_pattern(cast(str, d.url)),
            "math_score": float(s),
            "doc": d,
        }
        for d, s in zip(docs, scores, strict=True)
    ]
    math_domains = find_math_domains(rows, threshold, domain_share, min_pages)
    patterns = {p for stats in math_domains.values() for p in stats["patterns"]}
    candidates = [r for r in rows if r["math_score"] < threshold and r["pattern"] in patterns]
    write_json(out_dir / "domains.json", math_domains)
    _write_candidates(out_dir / "candidates.jsonl", candidates)
    summary = {
        "corpus": [str(p) for p in corpus],
        "out": str(out_dir.resolve()),  # absolute: a rerun from another folder finds its round
        "threshold": threshold,
        "domain_share": domain_share,
        "min_pages": min_pages,
        "pages": len(rows),
        "domains": len({r["domain"] for r in rows}),
        "math_domains": len(math_domains),
        "url_patterns": sorted(patterns),
        "candidates": len(candidates),
        "skipped": skipped.as_dict(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _record_round(model_path, summary)
    return summary


def _write_candidates(path: Path, candidates: list[dict[str, Any]]) -> None:
    """candidates.jsonl, written under a temporary name and renamed: a killed round leaves no half file."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as fh:
        for r in candidates:
            rec = {"text": r["doc"].text, "url": r["url"], "domain": r["domain"], "pattern": r["pattern"]}
            fh.write(json.dumps({**rec, "math_score": round(r["math_score"], 6)}) + "\n")
    tmp.replace(path)


def _record_round(model_path: str | Path, summary: dict[str, Any]) -> None:
    """Append the round to the card, or replace the round written to the same OUT (a rerun of it)."""
    card = read_card(model_path)
    rounds = card.setdefault("recall_rounds", [])
    same = [i for i, r in enumerate(rounds) if _resolved(r.get("out")) == summary["out"]]
    if same:
        rounds[same[0]] = {"round": rounds[same[0]].get("round", same[0] + 1), **summary}
    else:
        rounds.append({"round": len(rounds) + 1, **summary})
    write_json(found_card_path(model_path), card)


def _resolved(path: Any) -> str | None:
    """A card's `out` as an absolute path (rounds recorded before outs were absolute held them as given)."""
    return str(Path(path).resolve()) if isinstance(path, str) else None
