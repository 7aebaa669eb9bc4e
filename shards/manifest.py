"""Shard manifests: what a shard folder holds (documents, tokens, checksums) and how a path names shards.

OUT/manifest.json:
    {"name", "tokenizer", "tokenizer_sha256", "vocab_size", "eos_id", "dtype", "documents", "tokens",
     "files": [{"prefix": "<relative PREFIX>", "documents", "tokens",
                "bin": {"path", "bytes", "sha256"}, "idx": {"path", "bytes", "sha256"}}, ...]}

A run's shards stage writes one such folder per source, RUN/shards/NAME/, and a run-level RUN/shards/manifest.json
that lists the sources instead of files:
    {"tokenizer", "vocab_size", "eos_id", "dtype", "sources": {NAME: {"path", "documents", "tokens"}, ...}}
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
    """FOLDER/manifest.json as a mapping.

    Raises:
        ValueError: not JSON, or JSON that is not an object; the message names the file.
    """
    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError: json's message names no file
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: not a shard manifest (a JSON {type(manifest).__name__}, not an object)")
    return manifest


def is_run_manifest(manifest: Any) -> bool:
    """Whether MANIFEST is a run's RUN/shards/manifest.json (its `sources`), not a shard folder's (its `files`)."""
    return (
        isinstance(manifest, dict) and "files" not in manifest and isinstance(manifest.get("sources"), dict)
    )


def check_manifest_shape(folder: Path, manifest: Any) -> None:
    """Raise ValueError unless MANIFEST lists files (a shard folder) or sources (a run's shards folder)."""
    if is_run_manifest(manifest):
        return
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise ValueError(
            f"{folder / MANIFEST}: not a shard manifest (no `files` list) nor a run's shards manifest "
            "(no `sources` mapping)"
        )


def source_folders(folder: str | Path, manifest: dict[str, Any]) -> dict[str, Path]:
    """The shard folders a run-level manifest lists, by source name: FOLDER/<the recorded folder's name>.

    The shards stage writes each source in the folder of the run-level manifest; the absolute path it records is
    that of the run it was written in, so a copied or moved run is read from its own folders, not the original's.
    """
    out = {}
    for name, source in manifest["sources"].items():
        recorded = source.get("path") if isinstance(source, dict) else None
        out[str(name)] = Path(folder) / (Path(str(recorded)).name if recorded else str(name))
    return out


def unfinished_build(folder: str | Path) -> str | None:
    """Why FOLDER is a `shards build` that did not finish (None: it finished, or it is no `shards build` folder).

    The build writes OUT/job.json before any task starts, a datatrove completion marker per finished task
    (OUT/logs/completions/RANK) and OUT/manifest.json last, once every task has finished. A folder whose job.json
    is a build's record and that has no manifest.json was stopped part-way: its shards hold part of the corpus. So
    was a rerun that removed a task's marker to redo it (the manifest is then the earlier run's). A folder with
    no job.json (another tool's .bin/.idx pairs), or a finished build copied without its logs/, is not one.
    """
    folder = Path(folder)
    try:
        record = json.loads((folder / "job.json").read_text())
    except (OSError, ValueError):
        return None
    settings = record.get("settings") if isinstance(record, dict) else None
    if not isinstance(settings, dict) or "tokenizer" not in settings or "max_shard_bytes" not in settings:
        return None  # another command's record (`shards build` refuses to write into such a folder)
    tasks = record.get("tasks")
    markers = folder / "logs" / "completions"
    done = None
    if isinstance(tasks, int) and markers.is_dir():
        done = sum((markers / f"{rank:05d}").is_file() for rank in range(tasks))
    finished = f"{done} of {tasks} tasks finished, " if done is not None else ""
    if not (folder / MANIFEST).is_file():
        why = f"{finished}no {MANIFEST}"
    elif done is not None and isinstance(tasks, int) and done < tasks:
        why = f"{finished}its {MANIFEST} is an earlier run's"
    else:
        return None
    return (
        f"{folder}: a `shards build` that did not finish ({why}): its shards hold part of the corpus; rerun "
        f"the same `mathmix shards build ... -o {folder}` to finish it"
    )


def check_finished(folder: str | Path) -> None:
    """Raise ValueError where FOLDER is a `shards build` that did not finish (`unfinished_build`)."""
    if why := unfinished_build(folder):
        raise ValueError(why)


def bins_without_index(folder: str | Path, recursive: bool = False) -> list[str]:
    """The prefixes of FOLDER's .bin files that have no .idx (a task stopped before it closed its shard)."""
    found = Path(folder).rglob("*.bin") if recursive else Path(folder).glob("*.bin")
    return sorted(str(b)[:-4] for b in found if not Path(str(b)[:-4] + ".idx").is_file())


def resolve_prefixes(path: str | Path) -> list[str]:
    """Shard prefixes named by `path`: a folder with manifest.json (its files, in order), a run's shards folder
    (RUN/shards: every source folder its manifest lists, in order), a folder of .idx files (sorted), or a
    PREFIX / PREFIX.bin / PREFIX.idx.

    Raises:
        FileNotFoundError: nothing there, or a source folder of a run's manifest is missing.
        ValueError: a manifest.json that lists neither files nor sources; a `shards build` folder (or one below
            a folder of .idx files) that did not finish (`unfinished_build`).
    """
    p = Path(path)
    if p.is_dir():
        check_finished(p)
        if (p / MANIFEST).is_file():
            manifest = read_manifest(p)
            check_manifest_shape(p, manifest)
            if is_run_manifest(manifest):
                prefixes = []
                for name, folder in source_folders(p, manifest).items():
                    if not (folder / MANIFEST).is_file():
                        raise FileNotFoundError(
                            f"{folder}: source {name} of {p / MANIFEST} is missing (no {folder / MANIFEST})"
                        )
                    if is_run_manifest(read_manifest(folder)):  # a loop (a recorded path of "." or "..")
                        raise ValueError(
                            f"{p / MANIFEST}: source {name} names a run's shards folder, {folder}"
                        )
                    prefixes += resolve_prefixes(folder)
                return prefixes
            return [str(p / f["prefix"]) for f in manifest["files"]]
        prefixes = sorted(str(idx)[:-4] for idx in p.rglob("*.idx"))
        if not prefixes:
            raise FileNotFoundError(f"{p}: no manifest.json and no .idx files")
        for folder in sorted({Path(prefix).parent for prefix in prefixes} - {p}):
            check_finished(folder)  # a build stopped part-way in a folder below
        return prefixes
    text = str(p)
    prefix = text[:-4] if text.endswith((".bin", ".idx")) else text
    if not Path(prefix + ".idx").is_file():
        raise FileNotFoundError(f"{path}: no shard folder, and no {prefix}.idx")
    return [prefix]
