"""`shards inspect`: counts, a document-length histogram (PNG) and decoded samples of a shard folder.

A run's shards folder (RUN/shards) is inspected as all its sources together, with per-source counts. Each file's
index and .bin size are checked on the way (`validate_prefix` without the manifest's checksums): a damaged one
is listed under `warnings`, since the lengths and samples then read wrong token spans; so is a .bin without its
.idx. So is a sample of documents (the first INSPECT_SCAN_TOKENS tokens, spread over the files) holding a special
token id before their closing EOS (`shards.validate.scan_special_tokens`; `validate` reads every document):
`special_tokens_warning`. A `shards build` folder that did not finish is refused (`shards.manifest.unfinished_build`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mathmix.cli_util import write_json
from shards.indexed import IndexedDataset
from shards.manifest import (
    MANIFEST,
    bins_without_index,
    is_run_manifest,
    read_manifest,
    resolve_prefixes,
    source_folders,
)
from shards.validate import missing_index_errors, scan_special_tokens, special_token_warning, validate_prefix

# tokens read for special token ids inside documents (~64 MB of uint16; `validate` reads them all)
INSPECT_SCAN_TOKENS = 1 << 25


def length_stats(sizes: np.ndarray) -> dict[str, float]:
    """min / mean / percentiles / max of document lengths in tokens."""
    if not len(sizes):
        return {}
    q = np.percentile(sizes, [50, 90, 99])
    return {
        "min": int(sizes.min()),
        "mean": round(float(sizes.mean()), 2),
        "p50": float(q[0]),
        "p90": float(q[1]),
        "p99": float(q[2]),
        "max": int(sizes.max()),
    }


def plot_lengths(sizes: np.ndarray, path: Path, title: str) -> Path:
    """Histogram of document lengths, log-spaced bins (lengths span orders of magnitude)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    low = max(int(sizes.min()) if len(sizes) else 1, 1)
    top = max(int(sizes.max()) if len(sizes) else 1, low + 1)
    bins = np.unique(np.geomspace(low, top + 1, 50).astype(int)).tolist()
    ax.hist(sizes, bins=bins, color="#4477aa")
    ax.set_xscale("log")
    ax.set_xlabel("document length (tokens, incl. EOS)")
    ax.set_ylabel("documents")
    ax.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def inspect_shards(
    path: str | Path,
    out_dir: str | Path | None = None,
    tokenizer: str | None = None,
    samples: int = 3,
    sample_tokens: int = 200,
    seed: int = 0,
) -> dict[str, Any]:
    """Write OUT/inspect.json and OUT/length_hist.png for the shards at `path`; return the report.

    Samples are decoded with `tokenizer` (default: the manifest's tokenizer, when it is local), only when its
    fingerprint is the one the manifests record: else `tokenizer_warning` says why they are token ids.
    """
    p = Path(path)
    prefixes = resolve_prefixes(p)
    problems = {prefix: validate_prefix(prefix) for prefix in prefixes}
    warnings = [error for prefix in prefixes for error in problems[prefix]]
    if p.is_dir():  # a .bin whose .idx is missing is read by no one: its documents are not counted
        warnings += missing_index_errors(
            [b for b in bins_without_index(p, recursive=True) if b not in problems]
        )
    datasets = [IndexedDataset(prefix) for prefix in prefixes]
    sizes = np.concatenate([d.sizes for d in datasets]) if datasets else np.zeros(0, np.int64)
    manifest = read_manifest(p) if p.is_dir() and (p / MANIFEST).is_file() else {}
    out = Path(out_dir) if out_dir else (p / "inspect" if p.is_dir() else p.parent / "inspect")
    report: dict[str, Any] = {
        "path": str(p),
        "files": len(datasets),
        "documents": int(len(sizes)),
        "tokens": int(sizes.sum()),
        "dtype": str(datasets[0].dtype) if datasets else None,
    }
    if is_run_manifest(manifest):  # RUN/shards: every source's counts too
        report["sources"] = {}
        for name, folder in source_folders(p, manifest).items():
            mine = [d for d in datasets if Path(d.path_prefix).is_relative_to(folder)]
            report["sources"][name] = {
                "files": len(mine),
                "documents": sum(len(d) for d in mine),
                "tokens": sum(int(d.sizes.sum()) for d in mine),
            }
    report |= {
        "length": length_stats(sizes),
        "histogram": str(plot_lengths(sizes, out / "length_hist.png", f"{p.name}: {len(sizes):,} documents")),
        "warnings": warnings,
    }
    decode, problem, special = _decoder(tokenizer, manifest, built_with(p, manifest))
    if problem:
        report["tokenizer_warning"] = problem
    if isinstance(manifest.get("eos_id"), int):  # the EOS is known: sound files only (damaged: wrong spans)
        sound = [d for d, prefix in zip(datasets, prefixes, strict=True) if not problems[prefix]]
        scan = scan_special_tokens(sound, [manifest["eos_id"], *special], INSPECT_SCAN_TOKENS)
        report["special_tokens"] = {
            k: scan[k] for k in ("documents", "documents_checked", "sampled", "first")
        }
        if warning := special_token_warning(str(p), scan):
            more = f" (`mathmix shards validate {p}` reads every document)" if scan["sampled"] else ""
            report["special_tokens_warning"] = warning + more
    report["samples"] = _samples(datasets, decode, samples, sample_tokens, seed, p if p.is_dir() else None)
    write_json(out / "inspect.json", report)
    return report


def built_with(p: Path, manifest: dict[str, Any]) -> dict[str, str]:
    """{tokenizer_sha256: the tokenizer recorded with it} of the shards at P: its manifest's, or for a run's shards
    folder each source's (the run manifest records it too since it was added); empty where none records one."""
    prints: dict[str, str] = {}
    manifests = [manifest]
    if is_run_manifest(manifest):
        for folder in source_folders(p, manifest).values():
            try:
                manifests.append(read_manifest(folder))
            except (OSError, ValueError):
                continue
    for m in manifests:
        if isinstance(m.get("tokenizer_sha256"), str):
            prints.setdefault(m["tokenizer_sha256"], str(m.get("tokenizer")))
    return prints


def _decoder(
    tokenizer: str | None, manifest: dict[str, Any], prints: dict[str, str]
) -> tuple[Any, str | None, list[int]]:
    """(a function decoding token ids, or None: ids only; why the samples are not decoded, where that is a
    problem; its special token ids, where it decodes). The tokenizer is TOKENIZER, else the manifest's where it
    is local (or a hub name in the cache); its fingerprint must be what the manifests record (`tokenizer_sha256`),
    as `train` and `train export` check: a tokenizer replaced at the manifest's path, or another one given,
    decodes the ids into other text."""
    from shards.tokenizer import fingerprint_of, open_tokenizer, special_ids, tokenizer_mismatch

    source = tokenizer or manifest.get("tokenizer")
    if not source or not (Path(source).exists() or not Path(source).is_absolute()):
        return None, None, []  # no tokenizer, or a recorded folder that is gone: token ids only
    try:
        backend = open_tokenizer(source)[0]
    except (OSError, ValueError) as err:
        if tokenizer:  # asked for: say why the samples are ids
            return None, f"samples not decoded: {err}", []
        return None, None, []  # the recorded one is not available (offline hub name): ids only
    problem = tokenizer_mismatch(source, fingerprint_of(backend), prints, given=tokenizer is not None)
    if problem:
        return None, f"{problem}; samples shown as token ids", []
    return lambda ids: backend.decode(ids, skip_special_tokens=False), None, special_ids(backend)


def _samples(
    datasets: list[IndexedDataset], decode: Any, n: int, limit: int, seed: int, folder: Path | None
) -> list:
    # Global document j is document j - ends[k-1] of file k (files in order): the indices are drawn from the
    # total count and mapped back, so no per-document list is built (200M documents made gigabytes of tuples).
    ends = np.cumsum([len(d) for d in datasets], dtype=np.int64)
    total = int(ends[-1]) if len(ends) else 0
    if not total or n <= 0:
        return []
    rng = np.random.default_rng(seed)
    drawn = np.sort(rng.choice(total, size=min(n, total), replace=False))
    files = np.searchsorted(ends, drawn, side="right")  # the first file whose end lies past j
    starts = np.concatenate([[0], ends[:-1]])
    picks = [(int(k), int(j - starts[k])) for k, j in zip(files, drawn, strict=True)]
    out = []
    for k, i in picks:
        ids = datasets[k][i][:limit].tolist()
        prefix = Path(
            datasets[k].path_prefix
        )  # relative to PATH: RUN/shards has corpus/00000_00000, qa/00000_00000
        name = str(prefix.relative_to(folder)) if folder and prefix.is_relative_to(folder) else prefix.name
        row: dict[str, Any] = {"file": name, "document": i}
        row |= {"tokens": int(datasets[k].sizes[i]), "ids": ids[:32]}
        if decode:
            row["text"] = decode(ids)
        out.append(row)
    return out
