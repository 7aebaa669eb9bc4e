"""The rewriter's inputs: which files each input names, and one datatrove reader per kind of file.

An input is a stage folder (its data/), a folder of Parquet and/or JSONL files (not its subfolders), or one file.
A folder holding both kinds is read as two inputs, its Parquet files then its JSONL files: reading one kind only
lost the other's documents without a word.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mathmix.paths import stage_data, unique_files

PARQUET, JSONL = "*.parquet", "*.jsonl*"  # JSONL: .jsonl, .jsonl.gz, .jsonl.zst


def input_sources(inputs: list[str]) -> list[tuple[Path, str, int]]:
    """(folder, glob pattern, files listed before these in the same folder) per kind of file each input holds.

    FileNotFoundError naming the input: a path that does not exist, or a folder with no Parquet or JSONL file.
    """
    sources = []
    for raw in unique_files(inputs):  # an input given twice is read once
        path = stage_data(raw)  # a stage folder: its outputs, never its rejects/
        if path.is_dir():
            parquet = sum(1 for p in path.glob(PARQUET) if p.is_file())
            jsonl = any(p.is_file() for p in path.glob(JSONL))
            if (
                not parquet and not jsonl
            ):  # datatrove raised mid-run, after OUT held a job that blocked the next
                raise FileNotFoundError(
                    f"{path}: no input files in this folder (*.parquet, *.jsonl, *.jsonl.gz; subfolders are not read)"
                )
            sources += [(path, PARQUET, 0)] if parquet else []
            sources += [(path, JSONL, parquet)] if jsonl else []
        elif path.is_file():
            sources.append((path.parent, path.name, 0))
        else:
            raise FileNotFoundError(f"{raw}: no such input file or folder")
    return sources


def build_readers(inputs: list[str], settings: Any) -> list[Any]:
    """One datatrove reader per input and kind of file (`settings`: a RewriteSettings)."""
    from curate.doc_readers import CountingJsonlReader, CountingParquetReader

    readers = []
    for folder, pattern, before in input_sources(inputs):
        kind = CountingParquetReader if pattern.endswith(".parquet") else CountingJsonlReader
        kwargs = {"compression": "infer"} if kind is CountingJsonlReader else {}
        reader = kind(str(folder), glob_pattern=pattern, limit=settings.max_docs, text_key=settings.text_key,
                      id_key=settings.id_key, **kwargs)  # fmt: skip
        reader.rank_offset = before  # a folder's files are dealt to the tasks as one list
        readers.append(reader)
    return readers
