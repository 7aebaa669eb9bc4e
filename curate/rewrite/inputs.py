"""The rewriter's inputs: which files each input names, and one datatrove reader per kind of file.

An input is a stage folder (its data/), a folder of Parquet and/or JSONL files (not its subfolders), or one file.
A folder holding both kinds is read as two inputs, its Parquet files then its JSONL files: reading one kind only
lost the other's documents without a word. A file of another kind is refused, naming it: any file given was read
as JSONL, so a MATH-style `.json` array, an `.arrow`, `.html` or `.csv` file was every line a `bad_record`, exit 0.
A JSONL file none of whose lines is a document (every row a `bad_record`) is named in a warning.

A row without an id, or with a null one, gets its file's path from the folder holding all the input files, then
its row (`x/000_00000.parquet/0`, `curate.doc_readers.missing_id`): every null id was read as one id, `None`, and
all such rows but the first dropped as `duplicate_id`, that one traced to the job's own raw/ file.
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from mathmix.paths import stage_data, unique_files

PARQUET, JSONL = "*.parquet", "*.jsonl*"  # JSONL: .jsonl, .jsonl.gz, .jsonl.zst
KINDS = "Parquet (*.parquet) and JSONL (*.jsonl, *.jsonl.gz, *.jsonl.zst: one JSON object per line)"


def input_sources(inputs: list[str]) -> list[tuple[Path, str, int]]:
    """(folder, glob pattern, files listed before these in the same folder) per kind of file each input holds.

    FileNotFoundError naming the input: a path that does not exist, or a folder with no Parquet or JSONL file;
    ValueError naming a file of another kind.
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
            if not (fnmatch(path.name, PARQUET) or fnmatch(path.name, JSONL)):
                raise ValueError(_not_read(path))
            sources.append((path.parent, path.name, 0))
        else:
            raise FileNotFoundError(f"{raw}: no such input file or folder")
    return sources


def _not_read(path: Path) -> str:
    hint = ""
    if path.suffix == ".json":
        hint = (" (a JSON array or object is not read; a file of one JSON object per line can be renamed to "
                ".jsonl)")  # fmt: skip
    return f"{path}: not a kind of file rewrite reads; it reads {KINDS}{hint}"


def build_readers(inputs: list[str], settings: Any, notes_dir: str | Path | None = None) -> list[Any]:
    """One datatrove reader per input and kind of file (`settings`: a RewriteSettings). NOTES_DIR: where a JSONL
    reader notes a file none of whose lines it could read (`files_all_bad_records`)."""
    from curate.doc_readers import CountingParquetReader, id_prefix, id_root
    from curate.rewrite.readers import NotingJsonlReader

    readers = []
    sources = input_sources(inputs)
    # a row without an id (or a null one) is named by its file from the folder holding all the input files, then its
    # row (`curate.doc_readers.missing_id`, as dedup and decont name it): x/000_00000.parquet/0
    # (a reader reads the files in its folder, not below it: the folders' common folder is the files'; a file named
    # by a link is read by the link's folder, so the root is the folders', never a link target's)
    ids_from = id_root([folder.resolve() / "_" for folder, _, _ in sources])
    for folder, pattern, before in sources:
        kind = CountingParquetReader if pattern.endswith(".parquet") else NotingJsonlReader
        kwargs = {"compression": "infer", "notes_dir": notes_dir} if kind is NotingJsonlReader else {}
        reader = kind(str(folder), glob_pattern=pattern, limit=settings.max_docs, text_key=settings.text_key,
                      id_key=settings.id_key, **kwargs)  # fmt: skip
        reader.rank_offset = before  # a folder's files are dealt to the tasks as one list
        reader.id_prefix = id_prefix(folder, ids_from)
        readers.append(reader)
    return readers


def files_all_bad_records(notes_dir: str | Path) -> list[str]:
    """The input files noted by `NotingJsonlReader` in NOTES_DIR, sorted."""
    folder = Path(notes_dir)
    if not folder.is_dir():
        return []
    return sorted({p.read_text().strip() for p in folder.iterdir() if p.is_file()})
