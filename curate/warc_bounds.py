"""Where WARC records start and end in a file, for the web reader's recovery after a record it cannot parse.

After warcio fails on a record, the reader resumes at the next gzip member or `WARC/` header. When there is none,
the failed record may simply be cut off (the file ends inside it: a response with its headers and no body, say);
that is told from a malformed record by its declared Content-Length running past the end of the file.
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
    """Byte offset of the next gzip member or `WARC/` header after `after` (the file size when there is none)."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        marker = GZIP_MEMBER if data[:2] == GZIP_MEMBER[:2] else b"WARC/"
        found = data.find(marker, after)
        return found if found >= 0 else len(data)


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
