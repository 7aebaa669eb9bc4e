"""The stage folders of a run folder, as the audit reads them: which there are, in pipeline order, and the rows of
the `stats`/`summaries` tables made from their summary.json files (`curate.audit_views` makes the tables).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DOCUMENT_STAGES = ("web", "dedup", "decont")  # in pipeline order; `corpus` is the last one present
# Stage folders in the order `pipelines.stages.STAGES` runs them (rewrite writes `branches/`, shards `shards/`).
STAGE_FOLDERS = ("classifier", "web", "dedup", "decont", "branches", "shards", "train", "eval", "audit")


def holds_run(run_dir: Path, path: Path) -> bool:
    """Whether `path` is a link to a folder holding the run folder (`/`, the run's parent, the run itself): read
    as a stage folder, the audit would read the run again under another name and everything beside it."""
    return path.is_symlink() and Path(os.path.realpath(run_dir)).is_relative_to(os.path.realpath(path))


def looping_links(run_dir: Path) -> list[Path]:
    """The stage folders (RUN/<name>, RUN/branches/<task>) that are links to a folder holding the run: left out."""
    branches = run_dir / "branches"
    found = [p for p in sorted(run_dir.iterdir()) if _stage_folder(p) and holds_run(run_dir, p)]
    if branches.is_dir() and not holds_run(run_dir, branches):
        found += [p for p in sorted(branches.iterdir()) if p.name[0] not in "._" and holds_run(run_dir, p)]
    return found


def _stage_folder(p: Path) -> bool:
    # A stage folder is a known stage's or one with a summary.json (not the quickstart's sample/); the audit's
    # own folder is output, not a stage to audit (a rerun would otherwise read its last report).
    return (
        p.is_dir() and p.name[0] not in "._" and p.name != "audit"
        and (p.name in STAGE_FOLDERS or (p / "summary.json").is_file())
    )  # fmt: skip


def stage_dirs(run_dir: Path) -> list[Path]:
    """Stage folders: RUN/<stage>/ and RUN/branches/<task>/ (the rewriter writes one folder per task); one that is
    a link to a folder holding the run (`looping_links`) is none."""
    top = [p for p in sorted(run_dir.iterdir()) if _stage_folder(p) and not holds_run(run_dir, p)]
    branches = run_dir / "branches"
    nested = (
        sorted(
            p
            for p in branches.iterdir()
            if p.is_dir() and p.name[0] not in "._" and not holds_run(run_dir, p)
        )
        if branches in top
        else []
    )
    return top + nested


def stage_output_found(run_dir: Path) -> bool:
    """Whether RUN_DIR holds any stage folder with a file in it: else it is no run folder (a typo, the folder
    above the run), and every view, table and report section would be absent, as if the run were empty."""
    if not run_dir.is_dir():
        return False
    return any(any(p.is_file() for p in folder.rglob("*")) for folder in stage_dirs(run_dir))


def stage_name(run_dir: Path, folder: Path) -> str:
    return folder.relative_to(run_dir).as_posix()


def stats_rows(run_dir: Path, tasks: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows of `stats` (one per stage and drop reason) and `summaries` (one per stage) from every summary.json of
    a stage (RUN/<stage>/); with TASKS, those of `task_stats` and `task_summaries` instead, from the rewriter's
    per-task summaries (RUN/branches/<task>/, rows with a `task` column). Apart, because branches/summary.json
    sums its tasks' summaries: in one table, each rewriter document and drop was counted twice by a sum."""
    stats, summaries = [], []
    for folder in stage_dirs(run_dir):
        if (folder.parent != run_dir) != tasks:
            continue
        path = folder / "summary.json"
        if not path.is_file():
            continue
        try:
            summary = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue  # a half-written summary is not a finished stage
        if not isinstance(summary, dict):
            continue
        stage = stage_name(run_dir, folder)
        raw_dropped = summary.get("dropped")
        dropped: dict[str, Any] = raw_dropped if isinstance(raw_dropped, dict) else {}
        base: dict[str, Any] = {
            "stage": stage,
            **({"task": folder.name} if tasks else {}),
            "position": _position(stage),
            "docs_in": _int(summary.get("docs_in")),
            "docs_out": _int(summary.get("docs_out")),
            "seconds": _float(summary.get("seconds")),
        }
        extra = {k: v for k, v in summary.items() if k not in ("docs_in", "docs_out", "dropped", "seconds")}
        counts = [_int(v) for v in dropped.values()]  # a drop that is no count leaves the total unknown
        total = None if None in counts else _int(sum(counts))  # type: ignore[arg-type]
        summaries.append(base | {"dropped_total": total, "extra": json.dumps(extra)})
        for reason, count in sorted(dropped.items()) or [(None, 0)]:  # type: ignore[list-item]
            stats.append(base | {"reason": reason, "dropped": _int(count)})
    order = lambda row: (row["position"], row["stage"])  # noqa: E731 - pipeline order, not folder order
    return sorted(stats, key=order), sorted(summaries, key=order)


def unfinished_stages(run_dir: Path, relations: dict[str, str]) -> list[str]:
    """One line per stage folder with output but no readable summary.json (a stage that did not finish, or
    whose summary is half-written): the funnel leaves it out, while its views still read its partial data/."""
    lines = []
    for folder in stage_dirs(run_dir):
        path = folder / "summary.json"
        try:
            finished = isinstance(json.loads(path.read_text()), dict)
        except (OSError, ValueError):
            finished = False
        if finished or not any(folder.iterdir()):
            continue
        stage = stage_name(run_dir, folder)
        why = "a summary.json that does not read" if path.exists() else "no summary.json"
        views = [stage] if stage in relations and stage in DOCUMENT_STAGES else []
        if (
            stage.startswith("branches/")
            and "branches" in relations
            and any((folder / "data").rglob("*.parquet"))
        ):
            views.append("branches")
        if views and relations.get("corpus", "").startswith(f"= {stage} "):
            views.append("corpus")
        if "rejects" in relations and any((folder / "rejects").rglob("*.parquet")):
            views.append("rejects")
        reads = f"; the views {', '.join(views)} read its partial output" if views else ""
        where = "task_summaries/task_stats" if folder.parent != run_dir else "summaries/stats"
        lines.append(f"{stage}: an unfinished stage ({why}): not in {where} or the report's funnel{reads}")
    return lines


def _position(stage: str) -> int:
    """Pipeline order of a stage folder (branches/<task> share the rewrite stage's place)."""
    head = stage.split("/", 1)[0]
    return STAGE_FOLDERS.index(head) if head in STAGE_FOLDERS else len(STAGE_FOLDERS)


INT64 = 2**63


def _int(value: Any) -> int | None:
    """A count as DuckDB's BIGINT holds it; None for no number (text, NaN, Infinity, one past int64)."""
    try:
        number = int(value) if value is not None else None
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number is not None and -INT64 <= number < INT64 else None


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
