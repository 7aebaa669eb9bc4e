"""The web stage's inputs: which files are read (and of which kind), and the small checks a page body and a WARC
file go through before the reader parses them. Apart from `curate.readers`' record loop so that both stay short;
`curate.readers` re-exports every name.
"""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path
from urllib.parse import urlsplit

WARC_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz", ".wet.gz", ".wat.gz")
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
# JSONL/JSON objects without `html` (each dropped as bad_record): a count the summary reports
NO_HTML_FIELD = "rows_without_html_field"
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json")
HTML_TYPES = ("text/html", "application/xhtml+xml", "text/xml", "application/xml")
# The content type of a page that is already text (a WET `conversion` record): the extractor keeps it as it is.
PLAIN_TEXT = "text/plain"
DOC_RECORD_TYPES = ("response", "resource", "conversion")


def input_files(inputs: list[str]) -> list[str]:
    """Expand inputs (files or folders) into the sorted list of readable files; error on a missing path."""
    files: list[str] = []
    empty: list[str] = []  # an empty folder or a 0-byte file among the inputs: said, not left to the counts
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            named = [
                p
                for p in sorted(path.rglob("*"))
                if p.name.lower().endswith(WARC_SUFFIXES + HTML_SUFFIXES + JSONL_SUFFIXES)
            ]
            found = [p for p in named if p.is_file()]
            broken = [p for p in named if p.is_symlink() and not p.exists()]
            if broken:  # a page file that cannot be read is said, not skipped in silence
                from mathmix.cli_util import console

                shown = ", ".join(str(p) for p in broken[:3]) + (", ..." if len(broken) > 3 else "")
                console.print(
                    f"warning: {item}: {len(broken)} broken link(s) skipped: {shown}",
                    markup=False,
                    soft_wrap=True,
                )
            files.extend(str(p.resolve()) for p in found)
            if not found:
                empty.append(f"{item} (no page file in it)")
            empty += [f"{p} (0 bytes)" for p in found if p.stat().st_size == 0]
        elif path.is_file():
            files.append(str(path.resolve()))
            if path.stat().st_size == 0:
                empty.append(f"{item} (0 bytes)")
        else:
            raise FileNotFoundError(f"{item}: no such file or folder")
    if empty and files:  # no file at all: the caller's error says so
        from mathmix.cli_util import console

        shown = ", ".join(empty[:3]) + (f" and {len(empty) - 3} more" if len(empty) > 3 else "")
        console.print(f"warning: inputs that add no page: {shown}", markup=False, soft_wrap=True)
    return list(dict.fromkeys(files))  # each file once, however many inputs reach it


def is_binary(body: bytes) -> bool:
    """A body with NUL bytes or a known binary signature is not a web page, whatever its label says."""
    head = body[:2048]
    if b"\x00" in head:
        return True
    signatures = (b"%PDF", b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"PK\x03\x04", b"\x1f\x8b")
    return head.startswith(signatures)


def domain(url: str | None) -> str | None:
    """The host of URL, None where there is none or the URL cannot be parsed (`http://[broken`)."""
    try:
        return (urlsplit(url).hostname or None) if url else None
    except ValueError:
        return None


def is_arc_file(path: str) -> bool:
    """Whether a WARC-suffixed file holds ARC records (its first line an ARC header: `URL IP DATE MIME LENGTH`,
    or more fields ending in the length), gzipped or not. warcio converts ARC records to WARC ones with a random
    WARC-Record-ID (uuid4), new on every read: an ARC page's id must come from its file, offset and body."""
    with open(path, "rb") as stream:
        head = stream.read(16 * 1024)
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 4096)
        except zlib.error:
            return False
    fields = head.lstrip().split(b"\n", 1)[0].split()
    return len(fields) >= 5 and not fields[0].startswith(b"WARC/") and fields[-1].isdigit()


def doc_id(*parts: object) -> str:
    return hashlib.sha1("|".join(str(p) for p in parts).encode()).hexdigest()[:24]
