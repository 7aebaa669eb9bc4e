"""Reading classifier inputs: corpora (Parquet/JSONL with `text`), HTML pages, WARC archives, benchmark JSONL.

A folder is read whole and recursively, every supported kind, names in any case, as `mathmix web` finds its
inputs; what it holds that cannot be used is counted in a `Skipped` (see `classifiers.skips`), never dropped unseen.

Every document carries a `source` (for balanced sampling and per-source reports) and a `page` key (the page it
came from), so that train/test splits and the eval command can make sure no source page is on both sides.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from classifiers.pages import PageFiles, extract_page, is_archive_file, is_page_file
from classifiers.skips import Skipped
from mathmix.cli_util import first_line
from mathmix.paths import StageFoldersInside
from mathmix.paths import stage_data as _stage_data
from mathmix.records import read_records

# Benchmark field pairs (question-like, answer-like), tried in order: MATH, GSM8K, OlympiadBench, MATH8K.
BENCH_FIELDS = [
    ("problem", "solution"),
    ("question", "answer"),
    ("question", "final_answer"),
    ("prompt", "answer"),
]
# Matched case-insensitively; `.jsonl.gz` as web and dedup read it.
CORPUS_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz", ".json")
KINDS = ".html pages (.htm, .xhtml), WARC/ARC archives or .parquet/.jsonl(.gz)/.json files"


def is_corpus_file(path: Path) -> bool:
    """A Parquet, JSONL (gzipped or not) or JSON file, by its name in any case."""
    return path.name.lower().endswith(CORPUS_SUFFIXES)


def _kind(path: Path) -> str:
    """`parquet`, `jsonl`, `jsonl.gz` or `json`: how a corpus file is read (named in errors)."""
    return next(
        s[1:] for s in sorted(CORPUS_SUFFIXES, key=len, reverse=True) if path.name.lower().endswith(s)
    )


class InputError(ValueError):
    """An input path that cannot be read as a classifier corpus; the message names the path."""


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


def _gzip_records(path: Path) -> Iterator[tuple[int, object]]:
    """(0-based line, JSON value) of a gzipped JSONL file, with `read_records`' errors (file and line named)."""
    from mathmix.records import jsonl_lines

    with gzip.open(path, "rb") as f:
        yield from jsonl_lines(path, f)


class BadLine(Protocol):
    """Called with (where, why) for a line of a JSONL file that is not read (see `iter_located_rows`), REASON
    `bad_record`; a gzip stream that ends mid-file is one call with `truncated_file` where the cut falls."""

    def __call__(self, where: str, why: str, reason: str = "bad_record") -> None: ...


def _lenient_jsonl(path: Path, bad: BadLine) -> Iterator[tuple[int, object]]:
    """(0-based line, JSON value) of a JSONL file (plain or gzipped); a line that is not UTF-8 JSON goes to BAD.

    A gzip stream cut mid-file (a copy interrupted) ends the file at the cut: the lines before it are read, and
    the cut is one `truncated_file` call naming its line (the line the stream ends in is never read: gzip gives
    no part of it)."""
    from mathmix.records import jsonl_lines

    with (gzip.open if _kind(path) == "jsonl.gz" else open)(path, "rb") as f:
        line_no = -1
        lines = iter(f)
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                return
            except EOFError as err:  # "Compressed file ended before the end-of-stream marker was reached"
                bad(f"line {line_no + 2}", f"gzip stream cut ({first_line(err)})", "truncated_file")
                return
            line_no += 1
            try:
                values = list(jsonl_lines(path, [raw]))  # the shared reader's parsing and reasons
            except ValueError as err:
                bad(f"line {line_no + 1}", str(err).removeprefix(f"{path}:1: "))
                continue
            yield from ((line_no, value) for _, value in values)


def _is_json_array(path: Path) -> bool:
    """A `.json` file, or a plain JSONL-named file holding an array: read whole, as `read_records` reads it."""
    from mathmix.records import is_json_array

    return _kind(path) == "json" or (_kind(path) == "jsonl" and is_json_array(path))


def _iter_json_rows(path: Path, bad: BadLine | None = None) -> Iterator[tuple[str, dict]]:
    gzipped = _kind(path) == "jsonl.gz"
    if bad is not None and not _is_json_array(path):
        records = _lenient_jsonl(path, bad)
    else:  # MATH ships one problem per .json file
        records = _gzip_records(path) if gzipped else read_records(path, one_object=True)
    json_file = _kind(path) == "json"
    # A JSONL-named file holding an array is read as one array: its positions are records, not lines.
    array = _is_json_array(path)
    try:
        for position, record in records:
            # 1-based, as the reader's errors count lines: `record 1` is an array's first
            where = f"record {position + 1}" if array else f"line {position + 1}"
            if not isinstance(record, dict):
                if bad is not None and not json_file:
                    bad(where, "not a JSON object")
                    continue
                raise InputError(f"{path}: {where} is not a JSON object (a row with a `text` field)")
            yield where, record
    except InputError:
        raise
    except ValueError as err:
        raise InputError(str(err)) from None


def iter_rows(path: Path) -> Iterator[dict]:
    """Rows of a Parquet, JSONL (.gz) or JSON file as dicts; a file that cannot be read is an InputError naming it."""
    for _, row in iter_located_rows(path):
        yield row


def iter_located_rows(path: Path, bad: BadLine | None = None) -> Iterator[tuple[str, dict]]:
    """(where, row) of every row: `where` is `line N` (JSONL, the file's line), `row N` (Parquet) or `record N`
    (a .json file), counted from 1 as errors count lines; an unreadable file is an InputError naming it.

    BAD: a JSONL line that is not UTF-8 JSON or not an object is passed to it (`line 2`, `not valid JSON (...)`)
    and skipped, instead of failing the file."""
    try:
        if _kind(path) == "parquet":
            import pyarrow.parquet as pq

            n = 0
            for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
                for row in batch.to_pylist():
                    n += 1
                    yield f"row {n}", row
        else:
            yield from _iter_json_rows(path, bad)
    except InputError:
        raise
    # pyarrow's ArrowInvalid is a ValueError, UnicodeDecodeError too; a cut gzip stream is an EOFError
    except (OSError, ValueError, EOFError, zlib.error) as err:
        raise InputError(f"{path}: cannot be read as {_kind(path)} ({first_line(err)})") from None


def row_text(row: dict) -> str | None:
    """The text of a corpus row (`text`) or of a benchmark row (problem + solution, question + answer, ...)."""
    if isinstance(row.get("text"), str):
        return row["text"]
    for first, second in BENCH_FIELDS:
        if isinstance(row.get(first), str) and row.get(second) is not None:
            return f"{row[first]}\n{row[second]}"
    return None


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
