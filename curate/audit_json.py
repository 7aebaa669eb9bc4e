"""Small JSON files of a run (shard manifests, stage reports) turned into rows of a table.

Their shapes belong to the stages that write them, so the rule is generic: a list of objects is rows; an object
holding lists of objects (or objects of objects, one row per key with `name` = the key) gives the rows of the
longest of them, each row also carrying the object's scalar keys; any other object is one row. Nested objects are flattened
one level (`parent.child`), anything deeper is kept as a JSON string.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa


def json_rows(data: Any) -> list[dict[str, Any]]:
    """Rows for one parsed JSON document (see the module docstring for the rule)."""
    if isinstance(data, list):
        return [_flatten(r) if isinstance(r, dict) else {"value": r} for r in data]
    if not isinstance(data, dict):
        return [{"value": data}]
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict | list)}
    tables: list[tuple[int, list[dict[str, Any]]]] = []
    for value in data.values():
        if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
            tables.append((len(value), value))
        elif _is_table(value):
            tables.append((len(value), [{"name": k} | v for k, v in value.items()]))
    if _is_table(data):
        tables.append((len(data), [{"name": k} | v for k, v in data.items()]))
    if tables:
        rows = max(tables, key=lambda t: t[0])[1]
        return [_flatten(scalars | row) for row in rows]
    return [_flatten(data)]


def _is_table(value: Any) -> bool:
    """An object of objects ({"gsm8k": {...}, "math": {...}}): one row per key."""
    return isinstance(value, dict) and bool(value) and all(isinstance(v, dict) for v in value.values())


def _flatten(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict):
            for sub, inner in value.items():
                out[f"{key}.{sub}"] = json.dumps(inner) if isinstance(inner, dict | list) else inner
        elif isinstance(value, list):
            out[key] = json.dumps(value)
        else:
            out[key] = value
    return out


def rows_to_arrow(rows: list[dict[str, Any]]) -> pa.Table:
    """An Arrow table from rows with varying keys; a column whose values mix types becomes strings."""
    columns: dict[str, list[Any]] = {}
    for row in rows:
        for key in row:
            columns.setdefault(key, [])
    for key, values in columns.items():
        values.extend(row.get(key) for row in rows)
    arrays = {}
    for key, values in columns.items():
        kinds = {_kind(v) for v in values if v is not None}
        if len(kinds) > 1 and kinds != {"int", "float"}:
            values = [
                None if v is None else (json.dumps(v) if isinstance(v, dict | list) else str(v))
                for v in values
            ]
        elif kinds == {"int", "float"}:
            values = [None if v is None else float(v) for v in values]
        try:
            arrays[key] = pa.array(values) if kinds else pa.array(values, type=pa.string())
        except (pa.ArrowException, OverflowError):  # a number past int64, lists of mixed items: kept as text
            arrays[key] = pa.array([None if v is None else _json_text(v) for v in values], type=pa.string())
    return pa.table(arrays)


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return type(value).__name__


def read_json_file(path: Path) -> list[dict[str, Any]]:
    """Rows of a .json document or of a .jsonl file (one object a line); unreadable lines are skipped, a .json
    document that does not parse raises ValueError (json.JSONDecodeError)."""
    text = path.read_text(errors="replace")
    if path.suffix == ".jsonl":
        rows: list[dict[str, Any]] = []
        for line in text.splitlines():
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            rows.extend(json_rows([value]) if isinstance(value, dict) else [{"value": value}])
        return rows
    return json_rows(json.loads(text))
