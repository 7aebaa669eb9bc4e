"""Reading classifier inputs: corpora (Parquet/JSONL with `text`), HTML pages, WARC archives, benchmark JSONL.

A folder is read whole and recursively, every supported kind, names in any case, as `mathmix web` finds its
inputs; what it holds that cannot be used is counted in a `Skipped` (see `classifiers.skips`), never dropped unseen.

Every document carries a `source` (for balanced sampling and per-source reports) and a `page` key (the page it
came from), so that train/test splits and the eval command can make sure no source page is on both sides.
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from classifiers.pages import PageFiles, extract_page, is_archive_file, is_page_file
from classifiers.rows import (
    BENCH_FIELDS,
    CORPUS_SUFFIXES,
    BadLine,
    InputError,
    is_corpus_file,
    iter_located_rows,
    iter_rows,
    row_text,
)
from classifiers.skips import Skipped
from mathmix.cli_util import first_line
from mathmix.paths import StageFoldersInside
from mathmix.paths import stage_data as _stage_data

# The rows of one file are read in classifiers.rows (split off); its names are imported from here too, as before.
__all__ = [
    "BENCH_FIELDS",
    "CORPUS_SUFFIXES",
    "KINDS",
    "BadLine",
    "InputError",
    "LabelledDoc",
    "Skipped",
    "content_key",
    "input_files",
    "is_corpus_file",
    "is_input_file",
    "iter_located_rows",
    "iter_rows",
    "llm_seed_split",
    "origin_of",
    "read_input",
    "row_text",
    "source_name",
    "split_by_page",
    "stage_data",
]
KINDS = ".html pages (.htm, .xhtml), WARC/ARC archives or .parquet/.jsonl(.gz)/.json files"


def stage_data(path: str | Path) -> Path:
    """`mathmix.paths.stage_data`, its refusal of a folder of stage folders as an InputError."""
    try:
        return _stage_data(path)
    except StageFoldersInside as err:
        raise InputError(str(err)) from None


@dataclass(frozen=True)
class LabelledDoc:
    """One document of a classifier input."""

    text: str
    source: str  # the input it came from, e.g. `html/math` or `gsm8k/train.jsonl`
    page: str  # unique key of the source page (file name, URL or content hash)
    url: str | None = None
    kind: str = "corpus"  # corpus | html | bench | llm: benchmark rows get a smaller weight in training
    # Where it came from, whatever folder it was read through (see `origin_of`): eval leaves out a document whose
    # origin or content was trained on; `page` alone is only unique within one input (`sub/page.html`, a row id).
    origin: str = ""

    @property
    def where(self) -> str:
        """`origin`, or `page` for a document made without one."""
        return self.origin or self.page


def origin_of(file: Path, key: str, url: str | None = None) -> str:
    """A document's origin: its URL, else its file (resolved) and its key there (`/data/x.jsonl#17`); a page file
    is the file itself."""
    if url:
        return str(url)
    resolved, page_file = _file_origin(file)
    return resolved if page_file else f"{resolved}#{key}"


@functools.lru_cache(maxsize=4096)
def _file_origin(file: Path) -> tuple[str, bool]:
    """A file's resolved path and whether it is a page file: once per file, not per row (resolve() asks the
    filesystem about every part of the path)."""
    return str(file.resolve()), is_page_file(file)


def content_key(text: str) -> str:
    """A short, stable key of a document's content (used when a row has no id or URL)."""
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:16]


def source_name(path: Path) -> str:
    """A readable source name: the last two path parts (`html/math`, `gsm8k/train.jsonl`)."""
    parts = path.resolve().parts
    return "/".join(parts[-2:]) if len(parts) >= 2 else path.name


def _read_file(
    path: Path, source: str, name: str, skipped: Skipped, lenient: bool = False
) -> Iterator[LabelledDoc]:
    """Documents of a corpus file: `text` rows, benchmark pairs and web-page rows (`html`, run through the
    extractor); other rows are counted as `no_text_field`, and a file with no usable row at all is an error.

    LENIENT (a file inside a folder): a JSONL line that cannot be read is a `bad_record`, counted and named like a
    row with no text; a gzipped JSONL file cut mid-file keeps the rows before the cut and is one `truncated_file`
    (`big.jsonl.gz line 990: gzip stream cut (...); 989 records before it kept`); a file none of whose lines can be
    read is still an error (a `bad_file` of its folder, and nothing else of it counted)."""
    bad_lines: list[str] = []

    def bad(where: str, why: str, reason: str = "bad_record") -> None:
        bad_lines.append(f"{where}: {why}")
        if reason == "truncated_file":  # the rows read before the cut (each then kept or counted as below)
            why += f"; {n_rows} record{'' if n_rows == 1 else 's'} before it kept"
        skipped.add(reason, f"{name} {where}: {why}")

    n_rows = n_text = 0
    for where, row in iter_located_rows(path, bad if lenient else None):
        n_rows += 1
        text, kind = row_text(row), "corpus" if isinstance(row.get("text"), str) else "bench"
        meta: dict = row["metadata"] if isinstance(row.get("metadata"), dict) else {}
        url = row.get("url") or meta.get("url")
        if text is None and isinstance(row.get("html"), str):
            n_text += 1
            text, reason = extract_page(row["html"], url)
            kind = "html"
            if reason:
                skipped.add(reason, str(url or row.get("id") or f"{name} {where}"))
                continue
        elif text is None:
            skipped.add("no_text_field", f"{name} {where}")
            continue
        else:
            n_text += 1
        if not text.strip():
            skipped.add("empty_text", f"{name} {where}")
            continue
        page = str(url or row.get("id") or row.get("unique_id") or content_key(text))
        origin = origin_of(path, page, url)
        yield LabelledDoc(text=text, source=source, page=page, url=url, kind=kind, origin=origin)
    if bad_lines and not n_rows:
        raise InputError(f"{path}: {bad_lines[0]}")
    if n_rows and not n_text:
        pairs = ", ".join("+".join(p) for p in BENCH_FIELDS)
        raise InputError(f"{path}: no row has a `text` field, a benchmark pair ({pairs}) or an `html` page")


def is_input_file(path: Path) -> bool:
    """A file the classifier reads: a page, a WARC/ARC archive or a corpus file (names in any case)."""
    return is_page_file(path) or is_archive_file(path) or is_corpus_file(path)


class _FileReader:
    """Reads one input's files under its source name; the web page reader is made on the first page."""

    def __init__(self, source: str, skipped: Skipped):
        self.source, self.skipped = source, skipped
        self._pages: PageFiles | None = None

    def read(self, path: Path, name: str, lenient: bool = False) -> list[LabelledDoc]:
        """All documents of PATH (NAME: PATH relative to the input). Its skips are added once the whole file was
        read: a file that fails is one `bad_file`, not its rows and then the file. LENIENT: see `_read_file`."""
        skipped = Skipped()
        if is_page_file(path) or is_archive_file(path):
            self._pages = self._pages or PageFiles()
            found = self._pages.read(path, name, skipped)
            docs = [
                LabelledDoc(text, self.source, key, url, kind="html", origin=origin_of(path, key, url))
                for text, key, url in found
            ]
        else:
            docs = list(_read_file(path, self.source, name, skipped, lenient))
        self.skipped.update(skipped)
        return docs


def input_files(path: str | Path) -> list[Path]:
    """The files `read_input` reads of an input (a stage folder: its data/), sorted; missing is an InputError."""
    path = stage_data(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and is_input_file(p))


def read_input(
    path: str | Path, skipped: Skipped | None = None, seen: set[Path] | None = None
) -> list[LabelledDoc]:
    """All documents of one input: a file, or every page, archive and corpus file of a folder and its subfolders.

    A stage folder (one holding `data/`) means its `data/`: its summary, logs and rejects are not documents. A file
    given as the input must be readable (an InputError names it); in a folder, files of other kinds, files that
    cannot be read, and pages or rows with no text are added to SKIPPED by reason, with a few names. SEEN: the
    resolved files read through earlier inputs, read again as `given_twice` (`-p X -p X/` counted every page twice).
    """
    path = stage_data(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    skipped = Skipped() if skipped is None else skipped
    reader = _FileReader(source_name(path), skipped)
    seen = set() if seen is None else seen

    def first_time(f: Path, name: str) -> bool:
        if f.resolve() in seen:
            skipped.add("given_twice", name)
            return False
        seen.add(f.resolve())
        return True

    if path.is_file():
        if not is_input_file(path):
            raise InputError(f"{path}: expected {KINDS}, or a folder of them")
        return reader.read(path, path.name) if first_time(path, str(path)) else []
    files = sorted(p for p in path.rglob("*") if p.is_file())
    if not any(is_input_file(f) for f in files):
        names = [f.relative_to(path).as_posix() for f in files[:3]]
        held = f" (it holds {', '.join(names)}{', ...' if len(files) > 3 else ''})" if files else ""
        raise InputError(f"{path}: folder holds no {KINDS}{held}")
    docs: list[LabelledDoc] = []
    for f in files:
        name = f.relative_to(path).as_posix()
        if not is_input_file(f):
            skipped.add("unsupported_file", name)
            continue
        if not first_time(f, name):
            continue
        try:
            docs += reader.read(f, name, lenient=True)
        except (InputError, OSError) as err:
            skipped.add("bad_file", f"{name}: {_why(err, f)}")
    return docs


def _why(err: Exception, path: Path) -> str:
    """A file's error without its path: `line 2: not valid JSON (...)`, `cannot be read as parquet (...)`."""
    if isinstance(err, OSError):
        return err.strerror or str(err)
    text = first_line(err)
    if text.startswith(f"{path}:"):
        rest = text[len(str(path)) + 1 :]
        return f"line {rest}" if rest[:1].isdigit() else rest.strip()
    return text


def llm_seed_split(path: str | Path, threshold: float = 3.0, column: str = "math_score_llm"):
    """A corpus scored 0-5 by an LLM -> (positives, negatives): score >= threshold is math (FineMath style).

    Rows without a numeric score are left out (they were not scored, which says nothing about them).
    """
    path = stage_data(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    files = (
        [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and is_corpus_file(p))
    )
    if not files:
        raise InputError(f"{path}: no .parquet/.jsonl files")
    positives: list[LabelledDoc] = []
    negatives: list[LabelledDoc] = []
    # One source per class: a source is counted and balanced under one label (card `counts.by_source`).
    pos_source, neg_source = source_name(path) + ":llm-math", source_name(path) + ":llm-nonmath"
    seen_column = False
    for f in files:
        for row in iter_rows(f):
            score, text = row.get(column), row_text(row)
            if isinstance(score, int | float) and text:
                seen_column = True
                page = str(row.get("url") or row.get("id") or content_key(text))
                doc = LabelledDoc(
                    text, pos_source, page, kind="llm", origin=origin_of(f, page, row.get("url"))
                )
                if score >= threshold:
                    positives.append(doc)
                else:
                    negatives.append(replace(doc, source=neg_source))
    if not seen_column:
        raise InputError(f"{path}: no row has a numeric `{column}` column (0-5 LLM math score)")
    return positives, negatives


def split_by_page(docs: list[LabelledDoc], test_fraction: float, seed: int = 0):
    """(train, test) such that no page is on both sides; each source is split on its own (stratified)."""
    by_source: dict[str, list[str]] = {}
    for doc in docs:
        pages = by_source.setdefault(doc.source, [])
        if doc.page not in pages[-1:]:
            pages.append(doc.page)
    test_pages: set[tuple[str, str]] = set()
    rng = random.Random(seed)
    for source, pages in by_source.items():
        unique = sorted(set(pages))
        rng.shuffle(unique)
        n_test = round(len(unique) * test_fraction) if len(unique) > 1 else 0
        test_pages.update((source, p) for p in unique[:n_test])
    train = [d for d in docs if (d.source, d.page) not in test_pages]
    test = [d for d in docs if (d.source, d.page) in test_pages]
    return train, test
