"""Shard manifests: what a shard folder holds (documents, tokens, checksums) and how a path names shards.

OUT/manifest.json:
    {"name", "tokenizer", "tokenizer_sha256", "vocab_size", "eos_id", "dtype", "documents", "tokens",
     "files": [{"prefix": "<relative PREFIX>", "documents", "tokens",
                "bin": {"path", "bytes", "sha256"}, "idx": {"path", "bytes", "sha256"}}, ...]}
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mathmix.cli_util import write_json

MANIFEST = "manifest.json"


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def file_entry(folder: Path, prefix: str, documents: int, tokens: int) -> dict[str, Any]:
    """A manifest entry for FOLDER/PREFIX.{bin,idx}: sizes and sha256 of both files."""
    entry: dict[str, Any] = {"prefix": prefix, "documents": documents, "tokens": tokens}
    for ext in ("bin", "idx"):
        path = folder / f"{prefix}.{ext}"
        entry[ext] = {"path": path.name, "bytes": path.stat().st_size, "sha256": sha256_file(path)}
    return entry


def token_space_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """The first key on which two manifests' token ids disagree (None: the same ids): the tokenizer, then
    `vocab_size`, then `eos_id`. A tokenizer is its fingerprint (`tokenizer_sha256`) where both manifests record
    one, so the folder it was read from does not matter; else its path (resolved where both exist)."""
    same_by_print = bool(a.get("tokenizer_sha256") and b.get("tokenizer_sha256"))
    for key in ("tokenizer_sha256" if same_by_print else "tokenizer", "vocab_size", "eos_id"):
        x, y = a.get(key), b.get(key)
        if key == "tokenizer" and x and y and Path(x).exists() and Path(y).exists():
            x, y = Path(x).resolve(), Path(y).resolve()
        if x != y:
            return key
    return None


def write_manifest(folder: Path, files: list[dict[str, Any]], **info: Any) -> dict[str, Any]:
    """Write FOLDER/manifest.json with totals over `files`; returns the manifest."""
    manifest = {
        **info,
        "documents": sum(f["documents"] for f in files),
        "tokens": sum(f["tokens"] for f in files),
        "files": sorted(files, key=lambda f: f["prefix"]),
    }
    write_json(folder / MANIFEST, manifest)
    return manifest


def read_manifest(folder: str | Path) -> dict[str, Any]:
    return json.loads((Path(folder) / MANIFEST).read_text())


def resolve_prefixes(path: str | Path) -> list[str]:
    """Shard prefixes named by `path`: a folder with manifest.json (its files, in order), a folder of .idx
    files (sorted), or a PREFIX / PREFIX.bin / PREFIX.idx.

    Raises:
        FileNotFoundError: nothing there.
    """
    p = Path(path)
    if p.is_dir():
        if (p / MANIFEST).is_file():
            return [str(p / f["prefix"]) for f in read_manifest(p)["files"]]
        prefixes = sorted(str(idx)[:-4] for idx in p.rglob("*.idx"))
        if not prefixes:
            raise FileNotFoundError(f"{p}: no manifest.json and no .idx files")
        return prefixes
    text = str(p)
    prefix = text[:-4] if text.endswith((".bin", ".idx")) else text
    if not Path(prefix + ".idx").is_file():
        raise FileNotFoundError(f"{path}: no shard folder, and no {prefix}.idx")
    return [prefix]
