"""How two job records compare: the fields and file digests an older record may lack and still be the same job
(`LATER_FIELDS`, `LATER_FILE_DIGESTS`, `UNSEEN_FILE_DIGESTS`), and what differs, in words (`describe_difference`).

Apart from `job_record` (which re-exports all of it) because these rules read two records and touch no folder.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

# Fields added to job.json after it first shipped: a record written before one existed still matches.
# `file_split`: how dedup and decont cut the input files among their tasks (`curate.dedup_io.file_split_field`).
LATER_FIELDS = ("input_sizes", "file_digests", "file_split")


# `file_digests` entries that a run may not see (a hub-name model's cached snapshot: `model_snapshot`): a record
# without one (written before it existed, or where the name was not cached) is of the same job when all else
# matches, and one recorded but not seen now (the cache cleared, or another HF_HOME or node) is kept as recorded,
# as a rewrite job.json keeps its model digest: the server loads the model by name.
MODEL_SNAPSHOT = "model_snapshot"


UNSEEN_FILE_DIGESTS = (MODEL_SNAPSHOT,)


# `file_digests` entries a record written before they were recorded lacks; such a record is of the same job when
# all else matches (and is rewritten with them): `math_model` of a recipe's web stage scoring with the run
# classifier's model.bin by default, digested only where the recipe named the model until then; rewrite's prompt
# templates (`prompt` of a job.json, `prompt TASK` of a recipe stage), which kept only their version until then.
LATER_FILE_DIGESTS: tuple[str, ...] = (
    *UNSEEN_FILE_DIGESTS,
    "math_model",
    "prompt",
    *(f"prompt {t}" for t in ("refine", "qa", "longcot", "score")),
)


# What a job writes in OUT, kept in its record beside (not in) its identity: cleared when another job takes OUT.
OUTPUTS_KEY = "outputs"


def _with_unseen_entries(previous: Any, identity: dict[str, Any]) -> dict[str, Any]:
    """IDENTITY with PREVIOUS's `UNSEEN_FILE_DIGESTS` entries that this run did not see (see there)."""
    before = previous.get("file_digests") if isinstance(previous, dict) else None
    now = identity.get("file_digests") or {}
    if not isinstance(before, dict) or not isinstance(now, dict):
        return identity
    unseen = {k: v for k, v in before.items() if k in UNSEEN_FILE_DIGESTS and k not in now}
    return {**identity, "file_digests": {**now, **unseen}} if unseen else identity


def _older_record_of(previous: dict[str, Any], identity: dict[str, Any]) -> bool:
    """PREVIOUS is IDENTITY as recorded before some of its `LATER_FIELDS` (or `LATER_FILE_DIGESTS`) existed."""
    form = {k: v for k, v in identity.items() if k in previous or k not in LATER_FIELDS}
    digests, before = form.get("file_digests"), previous.get("file_digests")
    if isinstance(digests, dict) and isinstance(before, dict):
        kept = {k: v for k, v in digests.items() if k in before or k not in LATER_FILE_DIGESTS}
        form = {**form, "file_digests": kept}
    return previous == form


def _closest_form(
    previous: dict[str, Any], identity: dict[str, Any], earlier: Sequence[dict]
) -> dict[str, Any]:
    """The form of IDENTITY to name PREVIOUS's differences against: for a record without a command, IDENTITY or an
    earlier form, the first without a command that has the record's fields, else a form from before this command
    recorded its name (else the record is another command's). A recipe stage's record in today's form is told
    apart from today's form: against the form from before the stage recorded the files it reads (the classifier's
    `inputs: []`), a page added read as every page left out."""
    if isinstance(previous, dict) and "command" not in previous:
        plain = [form for form in (identity, *earlier) if "command" not in form]
        same = [form for form in plain if set(form) == set(previous)]
        return same[0] if same else next((form for form in earlier if "command" not in form), identity)
    return identity


def without_settings(record: Any, keys: Collection[str]) -> Any:
    """A job record without the given `settings` keys (settings that once were recorded and no longer count)."""
    if not keys or not isinstance(record, dict) or not isinstance(record.get("settings"), dict):
        return record
    return {**record, "settings": {k: v for k, v in record["settings"].items() if k not in keys}}


# A command's version of how it reads (web) or matches (decont), recorded since a later mathmix: a record without
# one is that command's earlier version, not another command's.
VERSION_FIELDS = ("extraction", "matcher")


def describe_difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    """`inputs differ`, `settings.ngram: 13 -> 8`, `tasks: 2 -> 4` ... (the first few; a setting missing on one
    side was at its default). Never empty: a record of other fields than this job's is another command's."""

    def show(d: dict[str, Any], k: str) -> str:
        return repr(d[k]) if k in d else "(default)"

    if old.get("command") != new.get("command"):  # another command's folder: settings unalike
        return f"it holds the output of {old.get('command') or 'another command'}"
    fields = sorted((set(old) ^ set(new)) - set(LATER_FIELDS) - set(VERSION_FIELDS))
    if fields and "command" not in old:  # e.g. web's math_model for dedup: commands that record no name
        return f"it holds the output of another command: {', '.join(fields)} in one record only"
    parts = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if (key in old) == (key in new) and a == b or key in LATER_FIELDS and not (key in old and key in new):
            continue
        if key == "file_digests" and isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if k not in a or k not in b:
                    parts.append(f"{k}: read by one job only")
                elif a[k] != b[k] and _path_of(a[k]) == _path_of(b[k]):
                    parts.append(f"{k}: other contents at the same path")
                elif a[k] != b[k]:  # named by its setting too, where one names it
                    parts.append(f"{k}: {_path_of(a[k])} -> {_path_of(b[k])}")
        elif isinstance(a, dict) and isinstance(b, dict):
            parts += [
                f"{key}.{k}: {show(a, k)} -> {show(b, k)}"
                for k in sorted(set(a) | set(b))
                if a.get(k) != b.get(k)
            ]
        elif key == "inputs":
            parts.append("other input paths" + _paths_changed(a, b))
        elif key == "model_digest":
            parts.append("the model's weights changed (same path or hub name)")
        elif key == "input_sizes":
            if old.get("inputs") == new.get("inputs"):  # with other paths the sizes differ too: said above
                which = _sizes_changed(new.get("inputs"), a, b)
                parts.append(
                    "the input files changed (other sizes at the same paths"
                    + (f": {which})" if which else ")")
                )
        else:
            parts.append(f"{key}: {show(old, key)} -> {show(new, key)}")
    parts = parts or [
        f"{', '.join(k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k))} differ"
    ]
    return "; ".join(parts[:4]) + (f"; and {len(parts) - 4} more" if len(parts) > 4 else "")


def _some(paths: list[Any], at_most: int = 3) -> str:
    """The first few of PATHS, and how many more."""
    more = f" and {len(paths) - at_most} more" if len(paths) > at_most else ""
    return ", ".join(str(p) for p in paths[:at_most]) + more


def _paths_changed(old: Any, new: Any) -> str:
    """` (added: ...; left out: ...)` for two input lists: a file a recipe glob now matches too was only 'other
    input paths', and the user was left to diff the expanded lists in the two records."""
    if not isinstance(old, list) or not isinstance(new, list):
        return ""
    # a crawl's inputs run to ~100k files: sets, not a scan of one list per path (minutes at that size)
    before, after = set(map(str, old)), set(map(str, new))
    added = [p for p in new if str(p) not in before]
    gone = [p for p in old if str(p) not in after]
    said = [f"added: {_some(added)}"] * bool(added) + [f"left out: {_some(gone)}"] * bool(gone)
    return f" ({'; '.join(said)})" if said else " (the same paths in another order)"


def _sizes_changed(paths: Any, old: Any, new: Any) -> str:
    """The first few of PATHS whose recorded sizes differ ('' where the records do not line up)."""
    lists = [v for v in (paths, old, new) if isinstance(v, list)]
    if len(lists) < 3 or len({len(v) for v in lists}) > 1:
        return ""
    return _some([path for path, x, y in zip(*lists, strict=True) if x != y])


def _path_of(entry: Any) -> Any:
    """The path of a `file_digests` entry ([path, digest]); another path is named by its setting, not here."""
    return entry[0] if isinstance(entry, list) and entry else None
