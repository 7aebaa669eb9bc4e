"""Web page reader: WARC / ARC (gzipped or not), folders of .html files, JSONL (or a JSON array) with an `html`
field.

datatrove's WarcReader dies on a truncated gzip member (EOFError kills the task) and yields nothing from
WARC/0.18 files, so this reader iterates with warcio itself, survives every bad record and counts it under a
reason. Every page keeps its provenance (url, file, record offset and length, record id, date, content type,
charset), so the bytes of any document can be fetched again.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterator
from pathlib import Path

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.readers.base import BaseDiskReader

from curate.charsets import (  # noqa: F401 (whatwg_encoding: re-exported)
    _CHARSET_HEADER,
    decode_html,
    utf16_bom,
    whatwg_encoding,
)
from curate.warc_bounds import cut_short, next_record_start, single_gzip_stream
from curate.web_inputs import (  # noqa: F401 (re-exported)
    DOC_RECORD_TYPES,
    HTML_SUFFIXES,
    HTML_TYPES,
    JSONL_SUFFIXES,
    NO_HTML_FIELD,
    PLAIN_TEXT,
    WARC_SUFFIXES,
    doc_id,
    domain,
    input_files,
    is_arc_file,
    is_binary,
)


class WebPageReader(BaseDiskReader):
    """Reads WARC/ARC records, .html files and JSONL (`html` field) into documents whose text is the HTML (the
    text itself for WET `conversion` records, marked `content_type` text/plain).

    Counts every candidate page as `docs_in`; a page it cannot use is counted as `dropped_<reason>`:
    warc_read_error, truncated_record, damaged_file, bad_record, not_html, binary_body, too_large, empty_page,
    undecodable, http_status.
    """

    name = "🕸 Web pages (WARC/HTML/JSONL)"

    def __init__(
        self,
        paths_file: str,
        max_bytes: int = 5_000_000,
        keep_non_200: bool = False,
        exclusion_writer=None,
        **kwargs,
    ):
        super().__init__("/", paths_file=paths_file, **kwargs)
        self.max_bytes = max_bytes
        self.keep_non_200 = keep_non_200
        self.exclusion_writer = exclusion_writer  # optional datatrove writer for dropped pages (no body)
        self._writer = None
        self._rank = 0
        self._stream = False  # reading a WARC gzipped as one stream (`_warc_stream`)
        self._cut_at: int | None = None  # where a record of a damaged gzip member starts
        self._last_offset = 0  # where the last record read starts
        self._in_record = False  # within a record counted in docs_in and not yet kept or dropped

    def run(self, data=None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        self._rank = rank
        if self.exclusion_writer is None:
            yield from super().run(data, rank, world_size)
            return
        with self.exclusion_writer as writer:
            self._writer = writer
            yield from super().run(data, rank, world_size)

    def _drop(self, reason: str, path: str, offset: int | None = None, url: str | None = None) -> None:
        """Count a dropped page under `reason` and, when rejects are written, record where it came from."""
        self.stat_update(f"dropped_{reason}")
        if self._writer is not None:
            metadata = {
                "url": url,
                "domain": domain(url),
                "source_file": path,
                "warc_offset": offset,
                "filter_reason": reason,
            }
            self._writer.write(
                Document(text="", id=doc_id(Path(path).name, offset, url, reason), metadata=metadata),
                self._rank,
            )

    # -- per-format readers -------------------------------------------------------------------------
    def read_file(self, filepath: str) -> DocumentsPipeline:
        path = "/" + filepath.lstrip("/")
        name = path.lower()
        if name.endswith(WARC_SUFFIXES):
            yield from self._read_warc(path)
        elif name.endswith(HTML_SUFFIXES):
            self.stat_update("docs_in")
            doc = self._page(Path(path).read_bytes(), path, None, None, {"url": None})
            if doc:
                yield doc
        elif name.endswith(JSONL_SUFFIXES):
            yield from self._read_jsonl(path)

    def _read_warc(self, path: str) -> Iterator[Document]:
        """Read every record; after a malformed one, resume at the next record boundary instead of giving up.

        The records it cannot read are counted, and named in one warning line per file (its first, with the
        number of others), so that the file of a count is found among thousands without a line per record."""
        self._damage: list[tuple[int | None, str, str]] = []  # (offset, counted as, why) of this file's
        try:
            yield from self._warc_records(path)
        finally:
            if self._damage:
                from loguru import logger

                offset, reason, why = self._damage[0]
                more = len(self._damage) - 1
                others = (
                    f" (and {more} more unreadable record{'s' if more > 1 else ''} in it)" if more else ""
                )
                logger.warning(f"{path}: offset {offset}: {why}; counted as {reason}{others}")

    def _damaged(self, reason: str, path: str, offset: int | None, why: str, url: str | None = None) -> None:
        """Drop an unreadable WARC record under `reason`, noting it for the file's warning line."""
        self._damage.append((offset, reason, why))
        self._drop(reason, path, offset, url)

    def _warc_records(self, path: str) -> Iterator[Document]:
        from warcio.archiveiterator import ArchiveIterator

        size = Path(path).stat().st_size
        arc = size > 0 and is_arc_file(path)  # its record ids are warcio's random ones: not kept
        if size > 0 and single_gzip_stream(path):
            yield from self._warc_stream(path, arc)
            return
        start, end = 0, 0
        with open(path, "rb") as stream:
            gzipped = self._gzipped = stream.read(2) == b"\x1f\x8b"
            while start < size:
                stream.seek(start)
                iterator = ArchiveIterator(stream, arc2warc=True)
                self._cut_at, self._last_offset = None, start
                try:
                    for doc, record_end in self._each_record(iterator, path, arc):
                        end = record_end  # where a record that fails next starts
                        if doc:
                            yield doc
                    # warcio stops quietly after a damaged gzip member (a bad CRC): go on at the next member
                    if self._cut_at is not None:  # its record, cut short, is counted
                        resume = next_record_start(path, self._cut_at + 1)
                    elif gzipped:  # a record whose member broke can swallow the members after it: found again
                        resume = next_record_start(path, max(start, self._last_offset) + 1)
                    else:  # no members to swallow: only bytes past the last record's end can hold records
                        resume = next_record_start(path, end)
                    if not start < resume < size:
                        break
                    start = end = resume
                except Exception as err:  # garbage between records, bad headers, a record cut off
                    failed = max(start, end)
                    start = next_record_start(path, failed + 1)
                    # the last record, declaring more bytes than the file holds: cut off, not malformed
                    cut = start >= size and cut_short(path, failed)
                    self.stat_update("docs_in")
                    why = "cut off by the end of the file" if cut else f"{type(err).__name__}: {err}".strip()
                    self._damaged("truncated_record" if cut else "warc_read_error", path, failed, why[:300])
                    self.stat_update(f"warc_error_{type(err).__name__}")
                    end = start if start < size else end
                    if start >= size:
                        return
        # warcio stops quietly at a truncated gzip member: bytes left after the last record, with no member after
        # them, are a lost record.
        if size - end > 8:
            self.stat_update("docs_in")
            self._damaged("truncated_record", path, end, f"{size - end} bytes after the last record, cut off")

    def _warc_stream(self, path: str, arc: bool) -> Iterator[Document]:
        """A WARC gzipped as one stream, read through the decompressed stream (its offsets are offsets in it) up to
        the first damage; the rest is counted once: a gzip stream cannot be resumed at the next record, and a CRC
        that fails at its end says only that some byte of it is wrong, so the records read before are kept."""
        import gzip

        from warcio.archiveiterator import ArchiveIterator

        end, self._stream, self._in_record = 0, True, False
        with gzip.open(path, "rb") as stream:
            iterator = ArchiveIterator(stream, arc2warc=True)
            try:
                for doc, record_end in self._each_record(iterator, path, arc):
                    end = record_end
                    if doc:
                        yield doc
            except Exception as err:
                if isinstance(err, EOFError):
                    reason = "truncated_record"
                elif isinstance(err, OSError | zlib.error):  # gzip.BadGzipFile: a bad CRC or length, bad data
                    reason = "damaged_file"
                else:
                    reason = "warc_read_error"
                if not self._in_record:  # else counted as it was read
                    self.stat_update("docs_in")
                why = (
                    f"{type(err).__name__}: {err}".strip()[:300]
                    + " (one gzip stream: the rest of it is unread)"
                )
                self._damaged(reason, path, end, why)
                self.stat_update(f"warc_error_{type(err).__name__}")
            finally:
                self._stream = False

    def _each_record(self, iterator, path: str, arc: bool) -> Iterator[tuple[Document | None, int]]:
        """(the page or None, the offset where the record ends) for each record of `iterator`."""
        for record in iterator:
            if record.rec_type not in DOC_RECORD_TYPES:
                self.stat_update("non_document_records")
                iterator.read_to_end(record)
                self._last_offset = iterator.get_record_offset()
                yield None, iterator.get_record_offset() + iterator.get_record_length()
                continue
            self.stat_update("docs_in")
            self._in_record = True
            doc = self._warc_record(record, iterator, path, arc)  # reads the record to its end
            self._in_record = False
            self._last_offset = iterator.get_record_offset()  # (asked before, warcio reads to the end first)
            yield doc, iterator.get_record_offset() + (iterator.get_record_length() or 0)

    def _warc_record(self, record, iterator, path: str, arc: bool = False) -> Document | None:
        if not (record.rec_headers.get_header("Content-Length") or "").strip().isdigit():
            # not a record: a line of text that warcio took for an ARC header (`a b c d warc`), a broken header
            self.stat_update("warc_error_content_length")
            why = "no Content-Length: not a WARC record"
            self._damaged("warc_read_error", path, iterator.get_record_offset(), why)
            return None
        try:
            headers = record.rec_headers
            body = record.content_stream().read(self.max_bytes + 1)
            iterator.read_to_end(record)
            offset, length = iterator.get_record_offset(), iterator.get_record_length()
            if (
                getattr(record.raw_stream, "limit", 0) > 0
            ):  # the file ended inside this record, or its member did
                url = record.rec_headers.get_header("WARC-Target-URI")
                if (
                    not self._stream
                    and self._gzipped
                    and next_record_start(path, offset + 1) < Path(path).stat().st_size
                ):
                    # members follow: warcio ended it where its gzip member broke (a bad CRC), and stops there
                    self._cut_at = offset
                    why = "its gzip member is damaged (a bad CRC or data): its content ends early"
                    self._damaged("warc_read_error", path, offset, why, url)
                else:
                    self._damaged("truncated_record", path, offset, "cut off by the end of the file", url)
                return None
            http = record.http_headers
            status = int(http.get_statuscode() or 200) if http else 200
            content_type = (http.get_header("Content-Type") if http else None) or headers.get_header(
                "Content-Type"
            )
            provenance = {
                "url": headers.get_header("WARC-Target-URI"),
                # an ARC record has no id: warcio's is random, so the page's id is a hash of file, offset, body
                "record_id": None if arc else headers.get_header("WARC-Record-ID"),
                "fetch_date": headers.get_header("WARC-Date"),
                "content_type": (content_type or "").split(";")[0].strip().lower() or None,
            }
        except Exception as err:
            if self._stream and isinstance(err, EOFError | OSError | zlib.error):
                raise  # the gzip stream ended or is damaged here: `_warc_stream` counts this record and the rest
            why = f"{type(err).__name__}: {err}"[:300]
            self._damaged("bad_record", path, None, why)  # its offset: warcio would read on to find it
            return None
        if status != 200 and not self.keep_non_200:
            self._drop("http_status", path, offset, provenance["url"])
            return None
        ctype = provenance["content_type"]
        if record.rec_type == "conversion" and not (ctype or "").startswith(HTML_TYPES):
            provenance["content_type"] = PLAIN_TEXT  # WET: the text of the page, not markup
        elif ctype and not ctype.startswith(HTML_TYPES):
            self._drop("not_html", path, offset, provenance["url"])
            return None
        declared = _CHARSET_HEADER.search(content_type or "")
        return self._page(body, path, offset, length, provenance, declared.group(1) if declared else None)

    def _read_jsonl(self, path: str) -> Iterator[Document]:
        """JSONL rows, or the elements of a `.json` array (`curate.page_rows`); where the file breaks off (cut or
        corrupt gzip, a broken array) the rows before are kept and the rest is counted once, with a warning."""
        from curate.page_rows import FileDamaged, field_text, rows

        try:
            for position, row in rows(path):
                self.stat_update("docs_in")
                try:
                    if isinstance(row, dict) and "html" not in row:
                        # still a bad_record; counted too, so the summary can ask whether the page is under
                        # another key (a folder of benchmark JSONL read as pages was all bad_record, exit 0)
                        self.stat_update(NO_HTML_FIELD)
                    html = row["html"]
                    if not isinstance(html, str):
                        raise TypeError("html is not a string")
                    provenance = {
                        "url": field_text(row, "url"),
                        "record_id": field_text(row, "id"),
                        "fetch_date": field_text(row, "date"),
                    }
                except (TypeError, KeyError):  # not an object, no html, a list where a URL should be...
                    self._drop("bad_record", path, position)
                    continue
                doc = self._page(html.encode("utf-8", "replace"), path, position, None, provenance, "utf-8")
                if doc:
                    yield doc
        except FileDamaged as err:
            from loguru import logger

            logger.warning(f"{path}: unreadable from here on ({err}); counted as {err.reason}")
            self.stat_update("docs_in")
            self._drop(err.reason, path)

    # -- shared checks ------------------------------------------------------------------------------
    def _page(self, body, path, offset, length, provenance, declared=None) -> Document | None:
        url = provenance.get("url")
        reason = None
        if len(body) > self.max_bytes:
            reason = "too_large"
        elif not body.strip():
            reason = "empty_page"
        elif is_binary(body) and not utf16_bom(
            body
        ):  # a UTF-16 page's NUL bytes: decoded by its BOM, as browsers do
            reason = "binary_body"
        if reason:
            self._drop(reason, path, offset, url)
            return None
        html, charset = decode_html(body, declared)
        if html is None:
            self._drop("undecodable", path, offset, url)
            return None
        metadata = {
            "url": url,
            "domain": domain(url),
            "source_file": path,
            "warc_offset": offset,
            "warc_length": length,
            "record_id": provenance.get("record_id"),
            "fetch_date": provenance.get("fetch_date"),
            "content_type": provenance.get("content_type") or "text/html",
            "charset": charset,
        }
        # Ids must not depend on where the files sit, so Slurm, Ray and local runs give the same ids.
        ident = provenance.get("record_id") or doc_id(Path(path).name, offset, hashlib.sha1(body).hexdigest())
        return Document(text=html, id=str(ident), metadata=metadata)
