"""A decont folder written by an earlier mathmix: one whose job also read the training splits now left out, and one
of an earlier matcher (`curate.decont.MATCHER`): refused where its unfinished work would mix two matchings, kept
where it finished. Apart from `pipelines.decont`'s stage so that it stays short.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _training_splits_read_before(out_dir: Path, identity: dict, benchmarks: list[str]) -> ValueError | None:
    """The refusal of a folder finished by a mathmix that also read the training splits now left out of the
    benchmark folders (and nothing else differs): one line naming them, not both lists of files. None otherwise."""
    from curate.decont_sources import left_out_training_splits
    from pipelines.job_record import JOB_FILE, OUTPUTS_KEY, job_identity

    left_out = [p for files in left_out_training_splits(benchmarks).values() for p in files]
    try:
        old = json.loads((out_dir / JOB_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not left_out or not isinstance(old, dict) or not isinstance(old.get("benchmarks"), list):
        return None
    read_too = job_identity([], {}, out_dir.parent, benchmarks=[str(p.resolve()) for p in left_out])
    same_rest = {k: v for k, v in old.items() if k not in ("benchmarks", "file_digests", OUTPUTS_KEY)} == {
        k: v for k, v in identity.items() if k not in ("benchmarks", "file_digests")
    }
    if not same_rest or sorted(old["benchmarks"]) != sorted(identity["benchmarks"] + read_too["benchmarks"]):
        return None
    names = ", ".join(str(p) for p in left_out[:3]) + (
        f" and {len(left_out) - 3} more" if len(left_out) > 3 else ""
    )
    return ValueError(
        f"{out_dir} holds the output of a decont run that also checked against the training splits now left out "
        f"of the benchmark folders ({names}): this run's output would differ. Write to a new folder, delete this "
        "one to start over, or name those files with --benchmarks to check against them as before"
    )


def _finished_by_other_matcher(out_dir: Path, identity: dict[str, Any]) -> dict[str, Any] | None:
    """The summary of a folder that finished this very job (IDENTITY but its matcher) under another matcher: one
    matching, kept as a finished job's rerun always was; None otherwise."""
    from pipelines.job_record import JOB_FILE

    try:
        old = json.loads((out_dir / JOB_FILE).read_text())
        summary = json.loads((out_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(old, dict) or old.get("matcher") == identity.get("matcher"):
        return None

    from pipelines.job_record import OUTPUTS_KEY

    def plain(record: dict[str, Any]) -> dict[str, Any]:  # the record's outputs are what the job created
        return {k: v for k, v in record.items() if k not in ("matcher", OUTPUTS_KEY)}

    same = plain(old) == plain(identity)
    return summary if same and isinstance(summary, dict) else None


def earlier_matcher_refusal(out_dir: Path) -> ValueError | None:
    """For the recipe runner, its runs and dry runs alike: `_other_matcher`'s refusal of a decont stage folder
    holding unfinished work (a finished one is kept, a folder with nothing finished taken over)."""
    from pipelines.job_record import has_progress

    if (out_dir / "summary.json").is_file() or not has_progress(out_dir):
        return None
    return _other_matcher(out_dir)


def _other_matcher(out_dir: Path) -> ValueError | None:
    """The refusal of a folder holding work of another matcher version (`curate.decont.MATCHER`; none recorded:
    mathmix-decont/1): its finished tasks kept or dropped documents by other tokens and another rule, and the
    tasks left would not. None otherwise."""
    from curate.decont import MATCHER
    from pipelines.job_record import JOB_FILE

    try:
        old = json.loads((out_dir / JOB_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(old, dict) or old.get("command") != "decont" or old.get("matcher") == MATCHER:
        return None
    earlier = old.get("matcher") or "mathmix-decont/1"
    return ValueError(
        f"{out_dir} holds the output of decontamination by an earlier matcher ({earlier}; this is {MATCHER}, "
        "which tokenizes and matches documents otherwise): its documents would be checked two ways. Write to a "
        "new folder, or delete this one to start over"
    )
