"""The rewriter's JSONL reader: `curate.doc_readers.CountingJsonlReader`, naming a file it could read nothing from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curate.doc_readers import CountingJsonlReader


class NotingJsonlReader(CountingJsonlReader):
    """CountingJsonlReader that warns, naming the file, when every line of a file is a `bad_record` (not a JSON
    object, or its text not a string): a JSON array saved as .jsonl, another format renamed. Those lines were
    counted under `dropped` with the rest, and nothing said which file was not JSON Lines. The file is also
    noted in NOTES_DIR (one small file per input file), for the job to name it again at its end."""

    def __init__(self, *args: Any, notes_dir: str | Path | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.notes_dir = notes_dir
        self._bad = self._empty = 0  # of the file being read

    def stat_update(self, *labels: str, value: int = 1, unit: str | None = None) -> None:
        if "dropped_bad_record" in labels:
            self._bad += value
        if "dropped_empty_text" in labels:
            self._empty += value
        super().stat_update(*labels, value=value, unit=unit)

    def read_file(self, filepath: str):
        from loguru import logger

        self._bad = self._empty = read = 0
        for document in super().read_file(filepath):
            read += 1
            yield document
        if read or self._empty or not self._bad:
            return
        path = self.data_folder.resolve_paths(filepath)
        logger.warning(
            f"{path}: none of its {self._bad:,} line(s) is a document, every one dropped as bad_record (not "
            "a JSON object, or its text not a string): is it JSON Lines, one JSON object per line?"
        )
        if self.notes_dir is not None:
            import hashlib

            folder = Path(self.notes_dir)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / hashlib.sha1(path.encode()).hexdigest()[:16]).write_text(f"{path}\n")
