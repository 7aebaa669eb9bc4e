"""Web pages as classifier documents: .html files and WARC/ARC archives read as the web stage reads them.

Pages go through `curate.readers.WebPageReader` (charset as `curate.readers.decode_html` reads it: labels as browsers read them;
binary, empty, oversized and truncated records dropped under a reason) and then `curate.extract`, so a model is
trained and evaluated on the text the web stage will score, and every page it cannot use is counted by reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from classifiers.skips import Skipped

# The web reader's own lists (`curate.readers`, checked equal in the tests), written out here: importing that
# module loads datatrove (0.2 s), and every classifier command reads inputs.
PAGE_SUFFIXES = (".html", ".htm", ".xhtml")
ARCHIVE_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz", ".wet.gz", ".wat.gz")


def is_page_file(path: Path) -> bool:
    return path.name.lower().endswith(PAGE_SUFFIXES)


def is_archive_file(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def extract_page(html: str, url: str | None) -> tuple[str, str | None]:
    """(text, None), or ("", reason): `empty_text`, `too_deep` (a nesting bomb) or `extract_error`."""
    from curate.extract import PageTooDeep, extract_strict

    try:
        text = extract_strict(html, url=url)
    except (RecursionError, PageTooDeep):
        return "", "too_deep"
    except Exception:  # noqa: BLE001 - a page the extractor cannot read is counted, not fatal
        return "", "extract_error"
    return (text, None) if text and text.strip() else ("", "empty_text")


class PageFiles:
    """Reads page files and archives one at a time through the web stage's reader."""

    def __init__(self) -> None:
        from curate.readers import WebPageReader

        self.reader = WebPageReader(paths_file="/dev/null")  # used file by file: no paths file is read

    def _drops(self) -> dict[str, int]:
        stats = self.reader.stats.stats
        return {k[len("dropped_") :]: int(v.total) for k, v in stats.items() if k.startswith("dropped_")}

    def read(self, path: Path, name: str, skipped: Skipped) -> Iterator[tuple[str, str, str | None]]:
        """(text, page key, url) of every usable page of PATH; the others are added to SKIPPED by reason.

        NAME (PATH relative to its input) is a page file's key; a record the reader drops is listed under it."""
        before = self._drops()
        for doc in self.reader.read_file(str(path.resolve())):
            url = doc.metadata.get("url")
            key = name if is_page_file(path) else str(url or doc.metadata.get("record_id") or doc.id)
            if (
                doc.metadata.get("content_type") == "text/plain"
            ):  # a WET record: text already, as web keeps it
                from curate.extract_step import plain_text

                text = plain_text(doc.text)
                reason = None if text.strip() else "empty_text"
            else:
                text, reason = extract_page(doc.text, url)
            if reason:
                skipped.add(reason, key)
            else:
                yield text, key, url
        for reason, n in self._drops().items():
            if n > before.get(reason, 0):
                skipped.add(reason, name, n - before.get(reason, 0))
