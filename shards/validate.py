"""`shards validate`: check shards against their index and manifest; every problem names its file.

Checks per PREFIX: the .idx header (magic, version, dtype code) and its exact size, sequence lengths >= 0,
pointers starting at 0 and equal to the running sum of lengths (so monotone and contiguous), document indices
from 0 to the sequence count and monotone, the .bin size equal to what the index describes, token ids below the
manifest's vocab size; and against the manifest: dtype, byte sizes, sha256, document and token counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from shards.indexed import IndexFormatError, read_index
from shards.manifest import MANIFEST, read_manifest, sha256_file


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
    prefix = str(prefix)
    idx, bin_ = Path(prefix + ".idx"), Path(prefix + ".bin")
    missing = [f"{p}: missing" for p in (idx, bin_) if not p.is_file()]
    if missing:
        return missing
    try:
        index = read_index(idx)
    except IndexFormatError as err:
        return [str(err)]
    errors = _index_errors(idx, index)
    dtype = index["dtype"]
    want_bytes = int(index["sequence_lengths"].astype(np.int64).sum()) * dtype.itemsize
    have_bytes = bin_.stat().st_size
    if have_bytes != want_bytes:
        kind = "truncated" if have_bytes < want_bytes else "too long"
        errors.append(f"{bin_}: {kind}: {have_bytes} bytes, the index describes {want_bytes}")
    info = info or {}
    if info.get("dtype") and info["dtype"] != str(dtype):
        errors.append(f"{idx}: dtype {dtype}, the manifest says {info['dtype']}")
    if entry:
        errors += _manifest_errors(idx, bin_, index, entry)
    if not errors and info.get("vocab_size") and have_bytes:
        tokens = np.memmap(bin_, mode="r", dtype=dtype)
        top = int(tokens.max())
        if top >= info["vocab_size"] or int(tokens.min()) < 0:
            errors.append(f"{bin_}: token id {top} outside the vocabulary ({info['vocab_size']})")
    return errors


def _manifest_errors(idx: Path, bin_: Path, index: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    errors = []
    for path, key in ((bin_, "bin"), (idx, "idx")):
        want = entry.get(key, {})
        size = path.stat().st_size
        if want.get("bytes") is not None and size != want["bytes"]:
            errors.append(f"{path}: {size} bytes, the manifest says {want['bytes']}")
        elif want.get("sha256") and sha256_file(path) != want["sha256"]:
            errors.append(f"{path}: sha256 differs from the manifest (corrupted)")
    documents = len(index["document_indices"]) - 1
    tokens = int(index["sequence_lengths"].astype(np.int64).sum())
    if entry.get("documents") is not None and documents != entry["documents"]:
        errors.append(f"{idx}: {documents} documents, the manifest says {entry['documents']}")
    if entry.get("tokens") is not None and tokens != entry["tokens"]:
        errors.append(f"{idx}: {tokens} tokens, the manifest says {entry['tokens']}")
    return errors


def validate_path(path: str | Path) -> dict[str, Any]:
    """Validate a shard folder (with or without manifest.json) or one PREFIX.

    Returns {"path", "files": n, "documents", "tokens", "errors": [...], "ok": bool}.
    """
    p = Path(path)
    errors: list[str] = []
    checked: list[str] = []
    if p.is_dir() and (p / MANIFEST).is_file():
        manifest = read_manifest(p)
        listed = {str(p / f["prefix"]) for f in manifest["files"]}
        for entry in manifest["files"]:
            checked.append(str(p / entry["prefix"]))
            errors += validate_prefix(p / entry["prefix"], entry, manifest)
        on_disk = {str(i)[:-4] for i in p.glob("*.idx")}
        errors += [f"{extra}.idx: not listed in {p / MANIFEST}" for extra in sorted(on_disk - listed)]
    elif p.is_dir():
        checked = sorted(str(i)[:-4] for i in p.rglob("*.idx"))
        if not checked:
            errors.append(f"{p}: no manifest.json and no .idx files")
        for prefix in checked:
            errors += validate_prefix(prefix)
    else:
        prefix = str(p)[:-4] if str(p).endswith((".bin", ".idx")) else str(p)
        checked = [prefix]
        errors += validate_prefix(prefix)
    return {"path": str(p), "files": len(checked), "errors": errors, "ok": not errors}
