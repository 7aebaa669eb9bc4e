"""Reading JSON records: one reader for JSONL files and JSON arrays, used by decont, the classifier and the evals.

Its errors name the file and the line (`FILE:LINE: not valid JSON (...)`, `FILE:LINE: not UTF-8 text`), so a
user can open the bad record; every command that reads JSON records reports them the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


def read_records(path: str | Path, one_object: bool = False) -> Iterator[tuple[int, Any]]:
    """(position, JSON value) of every record: 0-based line of a JSONL file, or index in a JSON array.

    A `.json` file, or any file whose text starts with `[`, is one JSON array; anything else is JSONL. Blank
    lines are skipped. With `one_object`, a `.json` file holding one object is that one record (MATH's layout:
    one problem per file).

    Raises:
        ValueError: naming the file (and line) where the text is not UTF-8 or not JSON, or where a `.json`
            file holds something other than an array.
    """
    path = Path(path)
    if is_json_array(path):
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not UTF-8 text") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
        if one_object and isinstance(data, dict):
            yield 0, data
            return
        if not isinstance(data, list):
            raise ValueError(f"{path}: a .json file must hold a list of records, not a {type(data).__name__}")
        yield from enumerate(data)
        return
    with path.open("rb") as f:
        yield from jsonl_lines(path, f)


def is_json_array(path: str | Path) -> bool:
    """A `.json` file, or any file whose text starts with `[`: one JSON array, read whole (not as JSONL)."""
    path = Path(path)
    if path.suffix.lower() == ".json":  # `1.JSON` too: the classifier and web take names in any case
        return True
    with path.open("rb") as f:
        return f.read(64).lstrip().startswith(b"[")


def jsonl_lines(path: str | Path, lines: Iterable[bytes]) -> Iterator[tuple[int, Any]]:
    """(0-based line, JSON value) of JSONL lines read from `path` (plain or through gzip), blank lines skipped;
    ValueError naming the file and line where one is not UTF-8 or not JSON."""
    for line_no, raw in enumerate(lines):
        try:
            line = raw.decode("utf-8").strip()
            if line:
                yield line_no, json.loads(line)
        except UnicodeDecodeError:
            raise ValueError(f"{path}:{line_no + 1}: not UTF-8 text") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{line_no + 1}: not valid JSON ({err.msg})") from None


def read_objects(path: str | Path) -> list[dict[str, Any]]:
    """The records of PATH (see `read_records`), each required to be a JSON object.

    Raises:
        ValueError: as `read_records`, or naming the first record that is not an object, counted from 1 as
            lines are: `FILE: line 3 is not a JSON object` (JSONL, the file's line), `FILE: record 1 is not a JSON
            object` (a JSON array, under any name, `record 1` its first element).
    """
    records = []
    array = is_json_array(path)
    for position, record in read_records(path):
        if not isinstance(record, dict):
            where = f"record {position + 1}" if array else f"line {position + 1}"
            raise ValueError(f"{path}: {where} is not a JSON object")
        records.append(record)
    return records
