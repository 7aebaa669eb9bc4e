"""The rows of the web reader's JSONL and JSON inputs, read up to any damage, and their provenance fields.

A `.json` file holds a JSON array of page objects or one object (JSONL named `.json` is still read line by line);
it is read whole, since an array cannot be split into rows without parsing it, and its rows are decoded one by
one, so an array cut off or broken mid-way still gives the rows before the damage. Compression is told by the
file's first bytes, not its name: a plain JSONL file named `.gz` is read as what it is (as warcio does for WARC).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import IO, Any

GZIP_MAGIC = b"\x1f\x8b"
_WHITESPACE = " \t\r\n"


class FileDamaged(Exception):
    """The rest of a file cannot be read: `reason` is `truncated_record` (the file ends inside a row or a
    compressed stream) or `damaged_file` (corrupt compressed data, or a JSON array broken mid-way)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


def open_text(path: str) -> IO[str]:
    """PATH as text (UTF-8, a BOM skipped, bad bytes replaced), gunzipped when its first bytes say gzip."""
    with open(path, "rb") as handle:
        gzipped = handle.read(2) == GZIP_MAGIC
    if gzipped:
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace")
    return open(path, encoding="utf-8-sig", errors="replace")


def rows(path: str) -> Iterator[tuple[int, Any]]:
    """(position, value) for every row of PATH: a JSONL line (position: line number; value None when the line is
    not JSON) or an element of a `.json` array (position: index). Raises FileDamaged where the file breaks off."""
    import zlib

    try:
        with open_text(path) as handle:
            if path.lower().endswith(".json"):
                yield from _json_rows(handle.read())
            else:
                yield from _line_rows(handle)
    except EOFError as err:  # gzip: the stream ends before its end marker
        raise FileDamaged("truncated_record", str(err)) from err
    except (OSError, zlib.error) as err:  # corrupt compressed data (bad CRC, invalid deflate data)
        raise FileDamaged("damaged_file", f"{type(err).__name__}: {err}") from err


def _parse(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _line_rows(lines) -> Iterator[tuple[int, Any]]:
    for line_no, line in enumerate(lines):
        if line.strip():
            yield line_no, _parse(line)


def _json_rows(text: str) -> Iterator[tuple[int, Any]]:
    body = text.lstrip(_WHITESPACE)
    if body.startswith("["):
        yield from _array_rows(body)
        return
    try:
        yield 0, json.loads(body)  # one object (pretty-printed or not)
    except ValueError:
        yield from _line_rows(text.split("\n"))  # JSONL named .json


def _array_rows(text: str) -> Iterator[tuple[int, Any]]:
    """The elements of the JSON array TEXT (which starts with `[`), decoded one at a time."""
    decoder = json.JSONDecoder()
    # an array that does not close was cut off; one that closes is broken where it stops parsing
    reason = "damaged_file" if text.rstrip(_WHITESPACE).endswith("]") else "truncated_record"
    pos, index = _skip(text, 1), 0
    if text[pos : pos + 1] == "]":
        return
    while True:
        try:
            value, pos = decoder.raw_decode(text, pos)
        except ValueError as err:
            raise FileDamaged(reason, f"element {index}: {err}") from err
        yield index, value
        index += 1
        pos = _skip(text, pos)
        sep = text[pos : pos + 1]
        if sep == "]":
            return
        if sep != ",":
            raise FileDamaged(reason, f"after element {index - 1}: expected ',' or ']'")
        pos = _skip(text, pos + 1)


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos


def field_text(row: dict, key: str) -> str | None:
    """ROW[KEY] as provenance text: a string as it is, a number written out, absent or null as None.

    Raises TypeError for anything else (a list, an object, true/false): the row is not a page record."""
    value = row.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"{key} is a {type(value).__name__}, not a string")
