"""`shards validate`: check shards against their index and manifest; every problem names its file.

Checks per PREFIX: the .idx header (magic, version, dtype code) and its exact size, sequence lengths >= 0,
pointers starting at 0 and equal to the running sum of lengths (so monotone and contiguous), document indices
from 0 to the sequence count and monotone, the .bin size equal to what the index describes, token ids below the
manifest's vocab size; and against the manifest: dtype, byte sizes, sha256, document and token counts, and the
manifest's top-level totals against its files. A run's shards folder (RUN/shards, whose manifest lists sources)
is checked source folder by source folder, and its manifest against them: each source's counts, the tokenizer,
vocab size, EOS id and dtype, and no shard folder left out. A warning (not an error: the files are sound) names
documents that hold a special token id (the manifest's EOS, the tokenizer's special tokens) before their closing
EOS: control tokens written in the text and encoded as those tokens (shards built before text was encoded as
text). A folder whose job.json is a `shards build` record that did not finish (no manifest.json: the build was
stopped part-way) fails, and so does a .bin without its .idx.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shards.indexed import IndexedDataset, IndexFormatError, index_counts, read_index
from shards.manifest import (
    MANIFEST,
    bins_without_index,
    check_manifest_shape,
    is_run_manifest,
    read_manifest,
    sha256_file,
    source_folders,
    token_space_difference,
    unfinished_build,
)


def _index_errors(idx: Path, index: dict[str, Any]) -> list[str]:
    errors = []
    lengths, pointers, doc_idx = (
        index["sequence_lengths"],
        index["sequence_pointers"],
        index["document_indices"],
    )
    extra = index["index_bytes"] - index["expected_index_bytes"]
    if extra not in (0, len(lengths)):  # + one mode byte per sequence in multimodal files
        errors.append(f"{idx}: {extra} bytes after the index arrays (corrupted or wrong counts)")
    if len(lengths) and lengths.min() < 0:
        errors.append(f"{idx}: negative sequence length")
    expected = np.zeros(len(lengths), np.int64)
    if len(lengths):
        np.cumsum(lengths[:-1].astype(np.int64), out=expected[1:])
    expected *= index["dtype"].itemsize
    if not np.array_equal(pointers, expected):
        bad = int(np.argmax(pointers != expected))
        monotone = bool(np.all(np.diff(pointers) >= 0))
        errors.append(
            f"{idx}: sequence pointer {bad} is {int(pointers[bad])}, expected {int(expected[bad])}"
            + ("" if monotone else " (pointers not monotone)")
        )
    if doc_idx[0] != 0 or doc_idx[-1] != len(lengths) or np.any(np.diff(doc_idx) < 0):
        errors.append(f"{idx}: document indices must rise from 0 to the sequence count {len(lengths)}")
    return errors


def validate_prefix(
    prefix: str | Path, entry: dict[str, Any] | None = None, info: dict[str, Any] | None = None
) -> list[str]:
    """Problems with PREFIX.bin/.idx (empty list: valid); `entry`/`info` are its manifest entry and header."""
    return _check_prefix(prefix, entry, info)[0]


def _check_prefix(
    prefix: str | Path, entry: dict[str, Any] | None = None, info: dict[str, Any] | None = None
) -> tuple[list[str], tuple[int, int] | None]:
    """(problems, (documents, tokens) the .idx holds, or None where it cannot be read)."""
    prefix = str(prefix)
    idx, bin_ = Path(prefix + ".idx"), Path(prefix + ".bin")
    if not idx.is_file():
        return [f"{p}: missing" for p in (idx, bin_) if not p.is_file()], None
    try:
        index = read_index(idx)
    except IndexFormatError as err:
        return [str(err)] + ([] if bin_.is_file() else [f"{bin_}: missing"]), None
    counts = index_counts(index)
    if not bin_.is_file():
        return [f"{bin_}: missing"], counts
    errors = _index_errors(idx, index)
    dtype = index["dtype"]
    want_bytes = counts[1] * dtype.itemsize
    have_bytes = bin_.stat().st_size
    if have_bytes != want_bytes:
        kind = "truncated" if have_bytes < want_bytes else "too long"
        errors.append(f"{bin_}: {kind}: {have_bytes} bytes, the index describes {want_bytes}")
    info = info or {}
    if info.get("dtype") and info["dtype"] != str(dtype):
        errors.append(f"{idx}: dtype {dtype}, the manifest says {info['dtype']}")
    if entry:
        errors += _manifest_errors(idx, bin_, counts, entry)
    if not errors and info.get("vocab_size") and have_bytes:
        tokens = np.memmap(bin_, mode="r", dtype=dtype)
        top = int(tokens.max())
        if top >= info["vocab_size"] or int(tokens.min()) < 0:
            errors.append(f"{bin_}: token id {top} outside the vocabulary ({info['vocab_size']})")
    return errors, counts


def _manifest_errors(idx: Path, bin_: Path, counts: tuple[int, int], entry: dict[str, Any]) -> list[str]:
    errors = []
    for path, key in ((bin_, "bin"), (idx, "idx")):
        want = entry.get(key, {})
        size = path.stat().st_size
        if want.get("bytes") is not None and size != want["bytes"]:
            errors.append(f"{path}: {size} bytes, the manifest says {want['bytes']}")
        elif want.get("sha256") and sha256_file(path) != want["sha256"]:
            errors.append(f"{path}: sha256 differs from the manifest (corrupted)")
    documents, tokens = counts
    if entry.get("documents") is not None and documents != entry["documents"]:
        errors.append(f"{idx}: {documents} documents, the manifest says {entry['documents']}")
    if entry.get("tokens") is not None and tokens != entry["tokens"]:
        errors.append(f"{idx}: {tokens} tokens, the manifest says {entry['tokens']}")
    return errors


SCAN_CHUNK = 1 << 24  # tokens compared at once (a 16 MB mask)
SCAN_DOCS = 1 << 20  # documents mapped at once (their offsets: 8 MB)


def scan_special_tokens(
    datasets: Sequence[IndexedDataset], special: Iterable[int], max_tokens: int | None = None
) -> dict[str, Any]:
    """Documents of DATASETS holding a SPECIAL id (EOS, BOS, pad, ...) after their first position and before their
    last (a BOS opening each document is what other tools write).

    `shards build` closes each document with the EOS and writes no other special token: one inside a document is
    a control token written in its text (`<|endoftext|>` on a web page) that a tokenizer matched as that token
    (before `shards.tokenizer.for_encoding`), an EOS that splits the document in training. Vectorised over the
    memory-mapped tokens, SCAN_CHUNK at a time. MAX_TOKENS: read about that many tokens, in whole documents from
    the start of each file (at least one document per file), and say so (`sampled`); None: everything.

    Returns {"ids", "documents_checked", "tokens_checked", "documents" (holding one), "occurrences",
    "found_ids", "first": [PREFIX, document] or None, "sampled"}.
    """
    ids = np.unique(np.asarray(list(special), dtype=np.int64))
    result: dict[str, Any] = {"ids": ids.tolist(), "documents_checked": 0, "tokens_checked": 0}
    result |= {"documents": 0, "occurrences": 0, "found_ids": [], "first": None, "sampled": False}
    if not len(ids):
        return result
    per_file = None if max_tokens is None else max(max_tokens // max(len(datasets), 1), 1)
    found: set[int] = set()
    for ds in datasets:
        budget = per_file
        for lo in range(0, len(ds), SCAN_DOCS):
            sizes = np.asarray(ds.sizes[lo : lo + SCAN_DOCS], dtype=np.int64)
            stop = False
            if budget is not None:  # whole documents up to the budget, at least one per file
                keep = int(np.searchsorted(np.cumsum(sizes), budget, side="right"))
                keep = max(keep, 1) if lo == 0 else keep
                stop = keep < len(sizes)
                sizes = sizes[:keep]
                budget -= int(sizes.sum())
            if len(sizes):
                _scan_block(ds, lo, sizes, ids, result, found)
            if stop:  # documents of this file left unread
                result["sampled"] = True
                break
    result["found_ids"] = sorted(found)
    return result


def _scan_block(
    ds: IndexedDataset, lo: int, sizes: np.ndarray, ids: np.ndarray, result: dict[str, Any], found: set[int]
) -> None:
    """`scan_special_tokens` over documents lo .. lo + len(sizes) of DS, added into RESULT and FOUND."""
    # token offsets of the documents (IndexedDataset keeps them as byte pointers or token offsets)
    starts = np.asarray(ds._offsets[lo : lo + len(sizes)], dtype=np.int64) // ds._offset_unit
    ends = starts + sizes
    order = np.argsort(starts, kind="stable") if np.any(np.diff(starts) < 0) else None
    if order is not None:  # a file not written in order (mathmix's are): documents by offset
        starts, ends = starts[order], ends[order]
    tokens = ds._tokens
    first, last = int(starts.min()), int(ends.max())
    hits = [
        np.flatnonzero(np.isin(tokens[c : min(c + SCAN_CHUNK, last)], ids)) + c
        for c in range(first, last, SCAN_CHUNK)
    ]
    result["documents_checked"] += len(sizes)
    result["tokens_checked"] += int(sizes.sum())
    pos = np.concatenate(hits) if hits else np.zeros(0, np.int64)
    if not len(pos):
        return
    doc = np.searchsorted(starts, pos, side="right") - 1  # the last document starting at or before each hit
    safe = np.maximum(doc, 0)
    # a special id at a document's first position is not counted: Megatron's preprocess_data with a tokenizer that
    # adds a BOS (Llama 3's) starts every document with it, and those shards are not damaged
    inside = (doc >= 0) & (pos < ends[safe]) & (pos != ends[safe] - 1) & (pos != starts[safe])
    if not inside.any():
        return
    docs = doc[inside] if order is None else order[doc[inside]]
    held = np.unique(docs)
    if result["first"] is None:
        result["first"] = [ds.path_prefix, lo + int(held[0])]
    result["documents"] += len(held)
    result["occurrences"] += int(inside.sum())
    found.update(int(t) for t in np.unique(np.asarray(tokens[pos[inside]])))


def special_token_warning(where: str, scan: dict[str, Any]) -> str | None:
    """The warning of a `scan_special_tokens` result that found any, naming WHERE; None where it found none."""
    if not scan["documents"]:
        return None
    prefix, document = scan["first"]
    sample = ", in the sample read" if scan["sampled"] else ""
    return (
        f"{where}: {scan['documents']} of {scan['documents_checked']} documents{sample} hold a special token id "
        f"({', '.join(map(str, scan['found_ids']))}) before their end, {scan['occurrences']} time(s); first: "
        f"{prefix} document {document}. Control tokens written in the text (`<|endoftext|>`) were encoded as "
        "those tokens (shards built before mathmix encoded text as text): training splits these documents there "
        "and learns text after an EOS; rebuild these shards into a new folder"
    )


def validate_path(path: str | Path) -> dict[str, Any]:
    """Validate a shard folder (with or without manifest.json), a run's shards folder (RUN/shards) or one PREFIX.

    Returns {"path", "files": n, "documents", "tokens", "errors": [...], "warnings": [...], "ok": bool}
    (documents and tokens as the .idx files hold them; None where one cannot be read), and "sources" (their
    names) for a run's shards folder. `warnings` (special token ids inside documents, `scan_special_tokens`, in
    folders whose manifest records the EOS id) leave `ok` as it is.
    """
    p = Path(path)
    if p.is_dir() and (p / MANIFEST).is_file():
        try:
            manifest = read_manifest(p)
            check_manifest_shape(p, manifest)
        except ValueError as err:  # not JSON, or neither kind of manifest
            return _report(p, [], [f"{p / MANIFEST}: {err}" if MANIFEST not in str(err) else str(err)], [])
        if is_run_manifest(manifest):
            return _validate_run_shards(p, manifest)
        return _validate_manifest_folder(p, manifest)
    if p.is_dir():
        checked = sorted(str(i)[:-4] for i in p.rglob("*.idx"))
        orphans = bins_without_index(p, recursive=True)
        errors = [] if checked or orphans else [f"{p}: no manifest.json and no .idx files"]
        below = sorted({Path(prefix).parent for prefix in checked + orphans} | {p})
        errors += [why for folder in below if (why := unfinished_build(folder))]
        errors += missing_index_errors(orphans)
    else:
        checked = [str(p)[:-4] if str(p).endswith((".bin", ".idx")) else str(p)]
        errors = []
    results = [_check_prefix(prefix) for prefix in checked]
    return _report(p, checked, errors + [e for found, _ in results for e in found], [c for _, c in results])


def missing_index_errors(prefixes: list[str]) -> list[str]:
    """One error per .bin without its .idx: the index a reader needs is missing (a task stopped part-way)."""
    return [f"{prefix}.idx: missing ({Path(prefix).name}.bin has no index)" for prefix in prefixes]


def _report(
    p: Path, checked: list[str], errors: list[str], counts: list[tuple[int, int] | None]
) -> dict[str, Any]:
    whole = bool(counts) and all(c is not None for c in counts)
    return {
        "path": str(p),
        "files": len(checked),
        "documents": sum(c[0] for c in counts if c) if whole or not checked else None,
        "tokens": sum(c[1] for c in counts if c) if whole or not checked else None,
        "errors": errors,
        "warnings": [],
        "ok": not errors,
    }


def _validate_manifest_folder(p: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """A shard folder against its manifest: every listed file, no unlisted .idx, the top-level totals."""
    errors: list[str] = []
    checked = [str(p / entry["prefix"]) for entry in manifest["files"]]
    results = [_check_prefix(p / e["prefix"], e, manifest) for e in manifest["files"]]
    for found, _ in results:
        errors += found
    on_disk = {str(i)[:-4] for i in p.glob("*.idx")}
    errors += [f"{extra}.idx: not listed in {p / MANIFEST}" for extra in sorted(on_disk - set(checked))]
    errors += missing_index_errors([prefix for prefix in bins_without_index(p) if prefix not in checked])
    if why := unfinished_build(p):
        errors.append(why)
    problems, special = _tokenizer_check(p, manifest)
    errors += problems
    report = _report(p, checked, errors, [c for _, c in results])
    if isinstance(manifest.get("eos_id"), int):  # sound files only: a damaged one reads wrong spans
        sound = [prefix for prefix, (found, _) in zip(checked, results, strict=True) if not found]
        scan = scan_special_tokens(
            [IndexedDataset(prefix) for prefix in sound], [manifest["eos_id"], *special]
        )
        if warning := special_token_warning(str(p), scan):
            report["warnings"].append(warning)
    for key in ("documents", "tokens"):
        said = manifest.get(key)
        if said is None:
            continue
        listed = [e.get(key) for e in manifest["files"]]
        # a file whose .idx disagrees with its own entry is named above: here, totals that are not their sum
        wrong = said != sum(listed) if None not in listed else report[key] is not None and said != report[key]
        if wrong:
            held = report[key] if report[key] is not None else sum(listed)
            source = "its .idx files hold" if report[key] is not None else "its files' entries sum to"
            errors.append(f"{p / MANIFEST}: {key} {said}, {source} {held}")
    report["ok"] = not errors
    return report


def _tokenizer_check(p: Path, manifest: dict[str, Any]) -> tuple[list[str], list[int]]:
    """(problems, special token ids): the manifest's tokenizer, where it is a local tokenizer, against the
    fingerprint it records: one replaced at that path since (`inspect` and `train` would decode the shards' ids as
    other tokens); its special token ids where it is the one recorded (none where not checked)."""
    from shards.tokenizer import fingerprint_of, special_ids, tokenizer_mismatch

    recorded, built = manifest.get("tokenizer"), manifest.get("tokenizer_sha256")
    if not (isinstance(recorded, str) and isinstance(built, str) and recorded and Path(recorded).exists()):
        # a hub name, a tokenizer moved away, or a manifest from before fingerprints: not checked
        return [], []
    backend = _local_tokenizer(recorded)
    if backend is None:
        return [f"{p / MANIFEST}: tokenizer {recorded} cannot be read as a tokenizer any more"], []
    problem = tokenizer_mismatch(recorded, fingerprint_of(backend), {built: recorded}, given=False)
    return ([f"{p / MANIFEST}: {problem}"], []) if problem else ([], special_ids(backend))


def _local_tokenizer(path: str) -> Any:
    """The local tokenizer at PATH, as its files define it (None: not a tokenizer)."""
    from shards.tokenizer import open_tokenizer

    try:
        return open_tokenizer(path)[0]
    except (OSError, ValueError):
        return None


def _validate_run_shards(p: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """A run's shards folder: each source folder as a shard folder, and the run's manifest against them."""
    errors: list[str] = []
    warnings: list[str] = []
    files, documents, tokens = 0, 0, 0
    whole = True
    folders = source_folders(p, manifest)
    for name, folder in folders.items():
        where = f"{p / MANIFEST}: source {name}"
        if not (folder / MANIFEST).is_file():
            errors.append(f"{folder}: missing (no {MANIFEST}), listed as source {name} in {p / MANIFEST}")
            whole = False
            continue
        try:
            own = read_manifest(folder)
        except ValueError as err:  # its message names the file
            errors.append(str(err))
            whole = False
            continue
        if is_run_manifest(own):
            errors.append(f"{where}: names a run's shards folder, {folder}")
            whole = False
            continue
        report = validate_path(folder)
        errors += report["errors"]
        warnings += report["warnings"]
        files += report["files"]
        recorded = manifest["sources"][name] if isinstance(manifest["sources"][name], dict) else {}
        for key in ("documents", "tokens"):
            if report[key] is None:
                whole = False
            elif recorded.get(key) is not None and recorded[key] != report[key]:
                errors.append(f"{where}: {key} {recorded[key]}, {folder} holds {report[key]}")
        documents += report["documents"] or 0
        tokens += report["tokens"] or 0
        if differs := token_space_difference(manifest, own):
            errors.append(
                f"{where}: {differs} {manifest.get(differs)}, {folder / MANIFEST} says {own.get(differs)}"
            )
        elif manifest.get("dtype") and own.get("dtype") and manifest["dtype"] != own["dtype"]:
            errors.append(f"{where}: dtype {manifest['dtype']}, {folder / MANIFEST} says {own['dtype']}")
    listed = {f.resolve() for f in folders.values()}
    for child in sorted(c for c in p.iterdir() if c.is_dir() and (c / MANIFEST).is_file()):
        if child.resolve() not in listed:
            errors.append(f"{child}: a shard folder not listed in {p / MANIFEST}")
    return {
        "path": str(p),
        "files": files,
        "documents": documents if whole else None,
        "tokens": tokens if whole else None,
        "sources": list(folders),
        "errors": errors,
        "warnings": warnings,
        "ok": not errors,
    }
