"""datatrove's Parquet and JSONL readers, counting what they cannot read instead of skipping it with a log line.

datatrove's readers skip a JSONL line that is not JSON, and any row without text, with one warning in the log
and no count, so a damaged or half-empty file loses documents silently. These drop a line that is not a JSON
object as `bad_record` and a row without text as `empty_text` (the `dropped_*` convention of `curate.summary`,
which counts a reader's docs_in as what it passed on plus what it dropped). Blank lines are not rows. Adapters
that hand empty text on (dedup and decont read it as " " so that their own steps count it) are unaffected.

A row whose id is missing or null gets `missing_id`: its file's path from the folder holding all the stage's input
files, then its row (`x/000_00000.parquet/0`). datatrove's readers gave a null id through as None (rewrite read
every such row as one id, `None`, and dropped all but the first as `duplicate_id`), and dedup named the row by its
file's base name alone, so the files of two folders, both named `000_00000.parquet` as every stage names them,
gave the same ids.

Compression of a JSONL file is told by its first bytes, not its name (as the web stage's `curate.page_rows` does):
gzip data named `.jsonl` was read as text, every line a `bad_record`, and a plain file named `.jsonl.gz` was an
unreadable file, both with exit 0.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable
from pathlib import Path

from datatrove.pipeline.readers import JsonlReader, ParquetReader

from curate.page_rows import GZIP_MAGIC
from curate.summary import NO_TEXT_FIELD, UNREADABLE_FILES

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def sniff_compression(head: bytes) -> str | None:
    """fsspec's compression name for a file starting with HEAD: gzip, zstd, or None (plain)."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


def missing_id(source_file: str, id_in_file: int | str, prefix: str = "") -> str:
    """The id of a row without one (missing or null): PREFIX (`id_prefix`) + SOURCE_FILE (the path the reader
    read it by, relative to its data folder) + its row, e.g. `x/000_00000.parquet/0`. Deterministic: a rerun gives
    the row the same id."""
    return f"{prefix}{source_file}/{id_in_file}"


def id_root(files: Iterable[str | Path]) -> Path:
    """The deepest folder holding all FILES (the input files a stage reads): missing ids name a file from here."""
    return Path(os.path.commonpath([str(Path(f).resolve().parent) for f in files]))


def id_prefix(data_folder: str | Path, root: str | Path) -> str:
    """A reader's `id_prefix`: its DATA_FOLDER relative to ROOT (`id_root`), "" when it is ROOT."""
    rel = Path(data_folder).resolve().relative_to(Path(root).resolve()).as_posix()
    return "" if rel == "." else f"{rel}/"


def file_compression(open_binary, path: str) -> str | None:
    """The compression of PATH by its first bytes; OPEN_BINARY(path) opens it uncompressed ("rb")."""
    with open_binary(path) as handle:
        return sniff_compression(handle.read(4))


class _CountingMixin:
    """Counts a row left without text as `dropped_empty_text` (datatrove's `documents` counts what is passed on;
    `curate.summary` adds the two: counting every row here would also count the one row datatrove reads past
    its `limit` and never passes on).

    `rank_offset`: the number of files listed before this reader's when a stage runs one reader per format; the
    files of all readers are then dealt to the tasks round-robin as one list (each reader dealing its own list from
    rank 0 gave every format's first files to task 0, and nothing to the last tasks).

    `total_files` (set with `rank_offset` and a `paths_file`): the files of all readers are cut into one contiguous
    block per task instead (task 0 the first files, ...), so the tasks' outputs, taken in rank order, hold the
    documents in input order (file, then row) whatever the number of tasks. Dedup's keep rule `first` and its
    document indices rely on that: dealt round-robin, which document of a pair came first depended on --workers.

    `id_prefix`: put before a file's path in the id a row without one gets (`missing_id`): the reader's data folder
    relative to the folder holding all the stage's input files (`id_prefix`), so that files of one name in two
    input folders read by two readers give different ids.

    `pass_non_string_text`: hand a row whose text is not a string (`text: 12345`, a list) on to the adapter (dedup
    and decont drop it as `text_not_string` with a rejects row naming its id) instead of dropping it here as
    `bad_record`.
    """

    rank_offset = 0
    total_files: int | None = None
    pass_non_string_text = False
    id_prefix = ""

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        if self.total_files is None or not self.paths_file:  # type: ignore[attr-defined]
            return super().run(data, (rank - self.rank_offset) % world_size, world_size)  # type: ignore[misc]
        return self._run_block(data, rank, world_size)

    def _run_block(self, data, rank: int, world_size: int):
        from datatrove.io import open_file

        if data:
            yield from data
        total = self.total_files or 0
        start, end = rank * total // world_size, (rank + 1) * total // world_size
        with open_file(self.paths_file, mode="rt") as listing:  # type: ignore[attr-defined]
            paths = [line.strip() for line in listing if line.strip()]
        first = self.rank_offset
        shard = paths[max(start - first, 0) : max(end - first, 0)]
        for doc in self.read_files_shard(shard):  # type: ignore[attr-defined]
            self.update_doc_stats(doc)  # type: ignore[attr-defined]
            yield doc

    def get_document_from_dict(self, data: dict, source_file: str, id_in_file: int | str):
        if self.text_key not in data:  # type: ignore[attr-defined]
            # not a drop reason of its own (the row is still counted once, below or by the stage's adapter):
            # a note that the text may sit under another column name
            self.stat_update(NO_TEXT_FIELD)  # type: ignore[attr-defined]
        value = data.get(self.text_key)  # type: ignore[attr-defined]
        # `text: 12345`, a list: it killed the run
        not_string = value is not None and not isinstance(value, str)
        if not_string and not self.pass_non_string_text:
            self.stat_update("dropped_bad_record")  # type: ignore[attr-defined]
            return None
        id_key = self.id_key  # type: ignore[attr-defined]
        if data.get(id_key) is None:  # missing, or null: datatrove passed a null id on as None
            data[id_key] = missing_id(source_file, id_in_file, self.id_prefix)
        document = super().get_document_from_dict(data, source_file, id_in_file)  # type: ignore[misc]
        if not document:
            self.stat_update("dropped_empty_text")  # type: ignore[attr-defined]
        return document


def _unreadable(reader, filepath: str, err: BaseException) -> None:
    """A file that cannot be opened, or ends early (truncated gzip, damaged Parquet): its readable rows are kept,
    the rest cannot be counted, so the file is counted (`unreadable_files`, shown with the summary) and named."""
    from loguru import logger

    reader.stat_update(UNREADABLE_FILES)
    logger.warning(
        f"{filepath}: unreadable from here on ({type(err).__name__}: {err}); the rest of it is skipped"
    )


class CountingParquetReader(_CountingMixin, ParquetReader):
    """datatrove's ParquetReader; rows without text are counted as dropped (`empty_text`), a damaged file as
    `unreadable_files`."""

    def read_file(self, filepath: str):
        import pyarrow as pa

        try:
            yield from super().read_file(filepath)
        except (pa.ArrowException, OSError, EOFError) as err:
            _unreadable(self, filepath, err)


class CountingJsonlReader(_CountingMixin, JsonlReader):
    """datatrove's JsonlReader; a line that is not a JSON object is dropped as `bad_record` (invalid UTF-8
    included: lines are decoded one by one, so one bad line does not end the file), a row without text as
    `empty_text`. With compression `infer` (the default), gzip and zstd are told by the file's first bytes."""

    def read_file(self, filepath: str):
        import orjson

        try:
            compression = self.compression
            if compression == "infer":
                compression = file_compression(lambda p: self.data_folder.open(p, "rb"), filepath)
            with self.data_folder.open(filepath, "rb", compression=compression) as handle:
                for line_no, line in enumerate(handle):
                    if not line.strip():
                        continue
                    with self.track_time():
                        try:
                            row = orjson.loads(line)
                        except orjson.JSONDecodeError:
                            row = None
                        if not isinstance(row, dict):
                            self.stat_update("dropped_bad_record")
                            continue
                        document = self.get_document_from_dict(row, filepath, line_no)
                    if document:
                        yield document
        except (OSError, EOFError, zlib.error) as err:  # a truncated or damaged .gz ends the file here
            _unreadable(self, filepath, err)
