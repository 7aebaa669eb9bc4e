"""Where WARC records start and end in a file, for the web reader's recovery after a record it cannot parse.

After warcio fails on a record, the reader resumes at the next gzip member or `WARC/` header. When there is none,
the failed record may simply be cut off (the file ends inside it: a response with its headers and no body, say);
that is told from a malformed record by its declared Content-Length running past the end of the file.

A WARC gzipped whole (`gzip x.warc`: one gzip stream, not one member per record) is one warcio will not read past
its first record; `single_gzip_stream` tells it, and the reader reads it through the decompressed stream instead.
"""

from __future__ import annotations

import mmap
import re
import zlib

GZIP_MEMBER = b"\x1f\x8b\x08"
_HEADER_END = re.compile(rb"\r?\n\r?\n")
_CONTENT_LENGTH = re.compile(rb"^content-length:[ \t]*(\d+)[ \t]*\r?$", re.I | re.M)
_MAX_HEADER = 1 << 16


def next_record_start(path: str, after: int) -> int:
    """Byte offset of the next gzip member or `WARC/` header after `after` (the file size when there is none).

    A gzip member counts only where it inflates to a record's first line: its 3 magic bytes also occur by chance
    inside compressed data (about once in 5 MB). In an uncompressed file, `WARC/` counts only at a line's start."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        gzipped = data[:2] == GZIP_MEMBER[:2]
        found = data.find(GZIP_MEMBER if gzipped else b"WARC/", after)
        while gzipped and found >= 0 and not _record_member(data[found : found + 4096]):
            found = data.find(GZIP_MEMBER, found + 1)
        while not gzipped and found > 0 and data[found - 1 : found] != b"\n":  # a header starts a line
            found = data.find(b"WARC/", found + 1)
        return found if found >= 0 else len(data)


def _record_member(head: bytes) -> bool:
    """Whether HEAD starts a gzip member holding a WARC or ARC record (a `WARC/` line, or an ARC header line)."""
    try:
        text = zlib.decompressobj(31).decompress(head, 512)
    except zlib.error:
        return False
    if text.startswith(b"WARC/"):
        return True
    fields = text.split(b"\n", 1)[0].split()
    return len(fields) >= 5 and fields[-1].isdigit()


def cut_short(path: str, offset: int) -> bool:
    """Whether the WARC record at OFFSET (gzipped or not) declares more bytes than the file holds: it was cut off.

    Reads (and inflates) only up to the declared end, in chunks, so a large record costs no memory."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        inflate = zlib.decompressobj(31) if handle.read(2) == GZIP_MEMBER[:2] else None
        handle.seek(offset)
        head, seen, need = b"", 0, None
        while chunk := handle.read(1 << 20):
            try:
                data = inflate.decompress(chunk) if inflate else chunk
            except zlib.error:  # corrupt, not cut short
                return False
            seen += len(data)
            if need is None:
                head += data
                if not b"WARC/".startswith(head[:5]):  # not a WARC record (ARC, garbage)
                    return False
                end = _HEADER_END.search(head)
                if end is None:
                    if len(head) > _MAX_HEADER:
                        return False
                    continue
                length = _CONTENT_LENGTH.search(head, 0, end.start())
                if length is None:
                    return False
                need = end.end() + int(length.group(1))
            if seen >= need or (inflate is not None and inflate.eof):
                break
        if need is None:
            return head.startswith(b"WARC/")  # the file ends inside the record's headers
        return seen < need


def single_gzip_stream(path: str) -> bool:
    """Whether PATH is a WARC gzipped as one stream rather than one gzip member per record: warcio refuses it
    after its first record ("non-chunked gzip file"), and every record of such a file was lost."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    with open(path, "rb") as handle:
        if handle.read(2) != GZIP_MEMBER[:2]:
            return False
        handle.seek(0)
        try:
            for number, _ in enumerate(ArchiveIterator(handle)):
                if number >= 1:  # a second record read: one member per record
                    return False
        except ArchiveLoadFailed as err:
            return "non-chunked" in str(err)
        except Exception:  # damaged: the per-record reading counts it
            return False
    return False
