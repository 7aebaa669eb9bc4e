"""Stage summaries from datatrove's per-task stats: docs in, docs out, and every drop by reason.

Convention used by every mathmix step: a dropped document is counted with `stat_update(f"dropped_{reason}")`
(datatrove's BaseFilter does this itself when a filter returns `(False, reason)`), the first step counts what it
read as `docs_in` (datatrove readers count `documents`; a stage with one reader per input format sums them), and
the writer's `total` is docs_out.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mathmix.cli_util import write_json

DROP_PREFIX = "dropped_"
NO_TEXT_FIELD = "rows_without_text_field"  # counted by curate.doc_readers; reported, not a drop reason
UNREADABLE_FILES = "unreadable_files"  # damaged / truncated input files (curate.doc_readers); reported
READER_PREFIX = "📖 - READER"  # datatrove's step type for readers, the start of a step's name in its stats


def _total(value: Any) -> float:
    if isinstance(value, dict):
        return value.get("total", 0)
    return value or 0


def read_step_stats(logging_dir: Path | str) -> list[tuple[str, dict[str, float]]]:
    """Merge `stats/*.json` of every task: one (step name, {label: total}) per pipeline step, in order."""
    merged: list[tuple[str, dict[str, float]]] = []
    stats_dir = Path(logging_dir) / "stats"
    for path in sorted(stats_dir.glob("*.json")):
        steps = json.loads(path.read_text())
        for i, step in enumerate(steps):
            if i >= len(merged):
                merged.append((step["name"], {}))
            counts = merged[i][1]
            for label, value in step.get("stats", {}).items():
                counts[label] = counts.get(label, 0) + _total(value)
    return [(name, dict(counts)) for name, counts in merged]


def _read_count(labels: dict[str, float]) -> float:
    """What a reader read: its own `docs_in` where it counts one, else the documents it passed on plus the rows it
    dropped (`curate.doc_readers`; datatrove's `documents` counts only what was passed on)."""
    if "docs_in" in labels:
        return labels["docs_in"]
    return labels.get("documents", 0) + sum(v for k, v in labels.items() if k.startswith(DROP_PREFIX))


def summarize_logs(logging_dir: Path | str, seconds: float | None = None) -> dict[str, Any]:
    """Build {"docs_in", "docs_out", "dropped": {reason: n}, "seconds"} from a datatrove logging folder."""
    steps = read_step_stats(logging_dir)
    if not steps:
        return {"docs_in": 0, "docs_out": 0, "dropped": {}, "seconds": seconds or 0.0}
    last = steps[-1][1]
    # Every leading reader counts: a stage fed Parquet and JSONL runs one reader per format, one after another.
    readers = [labels for name, labels in steps[:-1] if name.startswith(READER_PREFIX)] or [steps[0][1]]
    docs_in = int(sum(_read_count(labels) for labels in readers))
    docs_out = int(last.get("total", 0))
    dropped: Counter = Counter()
    for _, labels in steps:
        for label, value in labels.items():
            if label.startswith(DROP_PREFIX):
                dropped[label[len(DROP_PREFIX) :]] += int(value)
    summary: dict[str, Any] = {
        "docs_in": docs_in,
        "docs_out": docs_out,
        "dropped": dict(sorted(dropped.items())),
        "seconds": round(seconds, 2) if seconds is not None else None,
    }
    for note in (NO_TEXT_FIELD, UNREADABLE_FILES):
        count = int(sum(labels.get(note, 0) for labels in readers))
        if count:
            summary[note] = count
    missing = docs_in - docs_out - sum(dropped.values())
    if missing:
        # Never hide a leak: the summary says so, and the tests check that it never appears.
        summary["unaccounted"] = missing
    return summary


def write_summary(out_dir: Path | str, summary: dict[str, Any]) -> Path:
    """Write OUT/summary.json atomically, stamped `finished_at` (UTC, also added to SUMMARY); its presence marks the
    stage complete for `mathmix run`.

    A rerun that found every task done (the same numbers, only its own few seconds) leaves the file as it was:
    it keeps the stage's real timing, and the later stages, which record a hash of it, still match. A stage redone
    from scratch gets a new stamp, so those hashes tell the redone stage apart even where its numbers and rounded
    timings came out the same (they did, once, in a test).
    """
    path = Path(out_dir) / "summary.json"
    if path.is_file():
        try:
            kept = json.loads(path.read_text())
            if _untimed(kept) == _untimed(json.loads(json.dumps(summary, default=str))):
                summary.update(kept)  # the caller sees what the file says, as a later rerun would
                return path
        except ValueError:
            pass
    summary["finished_at"] = datetime.now(UTC).isoformat(timespec="microseconds")  # the caller's copy too
    write_json(path, summary)
    return path


def _untimed(value: Any) -> Any:
    """VALUE without its timing fields (`seconds`, `*_seconds`, `*_per_s`, `finished_at`), at any depth."""
    if isinstance(value, dict):
        return {
            k: _untimed(v)
            for k, v in value.items()
            if not (
                k in ("seconds", "finished_at")
                or k.endswith("_seconds")
                or k.endswith("_per_s")
                or k.endswith("_per_second")
            )
        }
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def is_balanced(summary: dict[str, Any]) -> bool:
    """docs_in == docs_out + sum(dropped)."""
    return summary["docs_in"] == summary["docs_out"] + sum(summary["dropped"].values())


def ensure_data_file(data_dir: Path | str, schema: Any) -> None:
    """A stage that kept nothing still gets DATA_DIR with one empty Parquet file of its schema.

    datatrove's writers open a file only for their first document; without this, the next stage (or a reader of
    the run) would find no `data/` at all instead of zero documents.
    """
    import pyarrow.parquet as pq

    data_dir = Path(data_dir)
    if any(data_dir.glob("*.parquet")):
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(schema.empty_table(), data_dir / "00000_empty.parquet")
