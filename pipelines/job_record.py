"""What wrote an output folder: its inputs and settings, recorded in OUT/job.json before any work starts.

datatrove skips a task whose completion marker exists, whatever the task read: rerunning into a folder with other
inputs, settings or task count would silently keep the old results (or mix them with new ones). A rerun of the
same job resumes; a different one is refused with the differences named.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

JOB_FILE = "job.json"


def job_identity(
    inputs: Sequence[str | Path], config: Any, run_dir: Path | str | None = None, **extra: Any
) -> dict:
    """The inputs (absolute paths), the settings (a pydantic model or a dict) and any extra fields (e.g. tasks).

    Paths inside RUN_DIR are written as `{run_dir}/...`, so a run folder copied or moved elsewhere still resumes.
    """
    # Values left at their defaults are left out: a field added later (with a default) is not a different job.
    settings = (
        config.model_dump(mode="json", exclude_defaults=True)
        if hasattr(config, "model_dump")
        else dict(config)
    )
    identity = json.loads(json.dumps({"inputs": [str(Path(p).resolve()) for p in inputs], "settings": settings,
                                      **extra}, default=str))  # fmt: skip
    # The same paths with other contents (a stage redone elsewhere, a file replaced) are other inputs.
    if inputs:
        identity["input_sizes"] = [input_size(p) for p in inputs]
    if run_dir is None:
        return identity
    forms = sorted({str(Path(run_dir).resolve()), str(Path(run_dir))} - {"", "."}, key=len, reverse=True)

    def relative(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: relative(v) for k, v in value.items()}
        if isinstance(value, list):
            return [relative(v) for v in value]
        if isinstance(value, str):
            for form in forms:  # whole path parts only: /x/run2 is not inside /x/run
                if value == form or value.startswith(form.rstrip("/") + "/"):
                    return "{run_dir}" + value[len(form.rstrip("/")) :]
        return value

    return _shipped_files_by_place(relative(identity))


# mathmix's own files (a rewrite prompt template, a shipped train recipe) are recorded as {mathmix}/...: recorded
# by absolute path, a run folder resumed with another checkout or install of mathmix was refused over the path.
SOURCE_ROOT = Path(__file__).resolve().parent.parent


def _shipped_files_by_place(identity: dict[str, Any]) -> dict[str, Any]:
    """IDENTITY with the `file_digests` paths under SOURCE_ROOT written `{mathmix}/...`."""
    digests = identity.get("file_digests")
    if not isinstance(digests, dict):
        return identity
    root = str(SOURCE_ROOT).rstrip("/") + "/"

    def place(entry: Any) -> Any:
        if isinstance(entry, list) and entry and isinstance(entry[0], str) and entry[0].startswith(root):
            return ["{mathmix}/" + entry[0][len(root) :], *entry[1:]]
        return entry

    return {**identity, "file_digests": {k: place(v) for k, v in digests.items()}}


def input_size(path: str | Path) -> int | list[int] | None:
    """Bytes of a file; [files, bytes] of the files under a folder (a stage folder: its data/); None if missing.

    Sizes, not hashes or times: cheap on any corpus, unchanged by copying a run folder, and a different corpus
    at the same path is all but certain to differ in size.
    """
    from mathmix.paths import StageFoldersInside, stage_data

    try:
        path = stage_data(path)
    except StageFoldersInside:  # refused by the reader that follows: not worth walking a whole run folder
        return None
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        sizes = [f.stat().st_size for f in path.rglob("*") if f.is_file()]
        return [len(sizes), sum(sizes)]
    return None


def weights_digest(folder: str | Path) -> str | None:
    """A digest of a model folder's weights: each weight file's name and size and 1 MiB from its start, middle and
    end (None for no local folder).

    Sizes alone miss a model retrained or re-exported into the same folder (same shapes, same bytes); reading every
    byte of a 16 GB model on each eval would cost more than it saves. New weights differ in every sampled block.
    """
    import hashlib

    folder = Path(folder)
    if not folder.is_dir():
        return None
    digest = hashlib.sha256()
    block = 1 << 20
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.suffix not in (".safetensors", ".bin", ".pt", ".pth", ".gguf"):
            continue
        size = path.stat().st_size
        digest.update(f"{path.name}:{size}".encode())
        with path.open("rb") as handle:
            for at in sorted({0, max(0, size // 2 - block // 2), max(0, size - block)}):
                handle.seek(at)
                digest.update(handle.read(block))
    return digest.hexdigest()[:16]


def file_digest(path: str | Path) -> str | None:
    """`SIZE:SHA` of a file a job reads besides its inputs (a model, a blocklist, a benchmark); None if missing.

    Sizes alone miss a model retrained into the same file or a list edited in place. Files up to 64 MiB are
    hashed whole; a larger one (a fastText model of GBs) by its size and 1 MiB from its start, middle and end.
    """
    import hashlib

    path = Path(path)
    if not path.is_file():
        return None
    size, block = path.stat().st_size, 1 << 20
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        if size <= 64 * block:
            for chunk in iter(lambda: handle.read(block), b""):
                digest.update(chunk)
        else:
            for at in (0, size // 2 - block // 2, size - block):
                handle.seek(at)
                digest.update(handle.read(block))
    return f"{size}:{digest.hexdigest()[:16]}"


def yaml_digest(path: str | Path) -> str | None:
    """`yaml:SHA` of what a YAML file a job reads says (a train recipe, a mixture): its parsed contents, so a
    comment or the layout edited is not another job, as a `mathmix run` recipe's own comments are not (the shipped
    train recipes' comments are edited). A file that is not valid YAML is digested by its bytes (`file_digest`);
    None if missing."""
    import hashlib

    from mathmix.yaml_files import load_yaml

    path = Path(path)
    if not path.is_file():
        return None
    try:
        said = load_yaml(path.read_text(encoding="utf-8"), path)
    except (OSError, ValueError):  # UnicodeDecodeError included
        return file_digest(path)
    canonical = json.dumps(said, sort_keys=True, ensure_ascii=False, default=str)
    return f"yaml:{hashlib.sha256(canonical.encode()).hexdigest()[:16]}"


def model_job_identity(
    command: str,
    model: str | Path,
    inputs: Sequence[str | Path],
    settings: dict[str, Any],
    run_dir: Path | str | None = None,
) -> dict[str, Any]:
    """The identity of a job that reads MODEL: a local folder is an input (path, size) with a digest of its
    weights (`weights_digest`); a hub name is a setting (`model`). COMMAND names the job kind, so that another
    command's folder is told apart (`describe_difference`)."""
    local = Path(model).exists()
    settings = dict(settings) if local else {**settings, "model": str(model)}
    extra = {"model_digest": digest} if (digest := weights_digest(model)) else {}
    paths = [model, *inputs] if local else list(inputs)
    return job_identity(paths, settings, run_dir=run_dir, command=command, **extra)


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


def check_job(
    out_dir: Path | str,
    identity: dict[str, Any],
    what: str = "job",
    filename: str = JOB_FILE,
    progress: Callable[[Path], bool] | None = None,
    ignore: Collection[str] = (),
    outputs: Collection[str] = (),
    earlier: Sequence[dict[str, Any]] = (),
    run_dir: Path | str | None = None,
    write: bool = True,
) -> bool:
    """Record IDENTITY in OUT/job.json, or refuse (ValueError) when OUT holds the work of a different job.

    `progress(OUT)` says whether OUT holds finished work (default `has_progress`). `ignore`: settings an older
    record may hold that no longer make a job (`without_settings`). `earlier`: older forms of IDENTITY (before
    the command recorded its name, say): a record equal to one is this job, rewritten in today's form.
    `outputs`: the files and folders this job writes in OUT (`data`, `logs` ...); see `take_over`.
    `run_dir`: the folder IDENTITY's `{run_dir}/...` paths stand for (`job_identity`; default OUT's parent), named
    in a refusal by its path: the user gave paths, not the record's placeholder.
    A record that cannot be read (emptied, cut short, not a mapping) in a folder holding finished work is refused,
    naming it: taken as no record, it let any job adopt that work. `write=False` checks without writing or
    clearing anything (`mathmix run --dry-run`).
    Returns True when OUT already held the record of this very job (a rerun: its finished work may be kept),
    False when it was written now (or would be).
    """
    out, path = Path(out_dir), Path(out_dir) / filename
    previous: Any = None
    if path.is_file():
        try:
            previous = without_settings(json.loads(path.read_text()), ignore)
        except (OSError, ValueError) as err:
            previous, damage = None, str(err)
        else:
            damage = "" if isinstance(previous, dict) else "not a mapping"
        if damage and (progress or has_progress)(out):
            raise ValueError(
                f"{path} (the record of what wrote {out_dir}) cannot be read ({damage}), and {out_dir} holds "
                "finished work: delete the folder to start over, or restore the file"
            )
        if damage:  # nothing finished to protect: the record is written anew
            previous = None
    written = previous.pop(OUTPUTS_KEY, None) if isinstance(previous, dict) else None
    identity = _with_unseen_entries(previous, identity)
    if previous == identity:
        return True
    if isinstance(previous, dict) and any(_older_record_of(previous, form) for form in (identity, *earlier)):
        previous = None  # an older record of the same job: rewritten below with the new fields
    if previous is not None:
        difference = describe_difference(previous, _closest_form(previous, identity, earlier))
        difference = difference.replace("{run_dir}", str(Path(run_dir or out.parent).resolve()))
        difference = difference.replace("{mathmix}", str(SOURCE_ROOT))
        other = f"another job than this {what} ({difference})"
        if (progress or has_progress)(out):
            raise ValueError(
                f"{out_dir} holds the output of {other}; write to a new folder, or delete this one to start over"
            )
        take_over(out, written, outputs, filename, other, delete=write)
    if not write:
        return False
    # the outputs that hold nothing yet: only those are this job's to clear if another job takes OUT over
    record = (
        {**identity, OUTPUTS_KEY: [n for n in outputs if not _holds_files(out / n)]} if outputs else identity
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return False


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


def take_over(
    out: Path, written: Any, outputs: Collection[str], record_file: str, other: str, delete: bool = True
) -> None:
    """Clear what the job recorded in OUT wrote (nothing of it finished), before another job writes there.

    WRITTEN: the outputs that job's record lists, only those that did not exist when it started: nothing else is
    deleted (a user's files, a folder that held files before). Refused (ValueError, naming OTHER) while any of
    this job's OUTPUTS still holds files: new output would mix with files no record says are disposable.
    DELETE=False: only the refusal (a dry run).
    """
    import shutil

    names = [n for n in written if _plain_name(n, record_file)] if isinstance(written, list) else []
    left = [name for name in outputs if name not in names and _holds_files(out / name)]
    if left:  # refused before anything is deleted
        raise ValueError(
            f"{out} holds unfinished output of {other}: {', '.join(left)}, which its record does not list as its "
            f"own; delete {' and '.join(left)} (or the folder), or write to a new folder"
        )
    for name in names if delete else ():
        target = out / name
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)


def _plain_name(name: Any, record_file: str) -> bool:
    """A file or folder directly in OUT (a damaged record: never a path outside OUT, never the record itself)."""
    return isinstance(name, str) and name not in ("", ".", "..", record_file) and not {"/", "\\"} & set(name)


def _holds_files(path: Path) -> bool:
    if path.is_symlink() or path.is_file():
        return True
    return path.is_dir() and any(not p.is_dir() for p in path.rglob("*"))


def check_output_outside_inputs(
    out_dir: Path | str, inputs: Sequence[str | Path], what: str = "input"
) -> None:
    """ValueError when OUT is an input folder or lies inside one.

    A rerun would read OUT's own files as inputs, or refuse the input folder for the stage folder now in it.
    A file input in the same folder is fine: a rerun reads that file alone.
    """
    from mathmix.paths import expand_inputs

    out = Path(out_dir).expanduser().resolve()
    for raw in inputs:
        try:
            paths = expand_inputs([raw])
        except (OSError, ValueError):
            continue  # a glob that matches nothing: its reader names it
        for given in paths:
            folder = Path(given).resolve()
            if folder.is_dir() and (out == folder or folder in out.parents):
                raise ValueError(
                    f"{out_dir} is inside the {what} folder {given}: a rerun would find this output among the "
                    f"{what}s; write to a folder outside {given}"
                )


def without_settings(record: Any, keys: Collection[str]) -> Any:
    """A job record without the given `settings` keys (settings that once were recorded and no longer count)."""
    if not keys or not isinstance(record, dict) or not isinstance(record.get("settings"), dict):
        return record
    return {**record, "settings": {k: v for k, v in record["settings"].items() if k not in keys}}


def has_progress(out_dir: Path) -> bool:
    """Whether OUT (or a folder in it) holds finished work: a summary, a datatrove completion marker, generation
    checkpoints or raw generations, training checkpoints or a finished training stage.

    A job that failed before finishing anything (a bad model path, say) may be rerun with other settings.
    """
    for pattern in ("summary.json", "*/summary.json", "**/completions/*", "**/checkpoints/**/*", "**/raw/*",
                    "**/done.json"):  # fmt: skip
        if any(p.is_file() for p in out_dir.glob(pattern)):
            return True
    return False


def foreign_files(out_dir: Path | str, outputs: Collection[str]) -> list[str]:
    """The names in OUT that are none of OUTPUTS, what a command writes there (sorted); [] for no such folder."""
    out = Path(out_dir)
    if not out.is_dir():
        return []
    return sorted(p.name for p in out.iterdir() if p.name not in outputs)


def check_foreign_files(out_dir: Path | str, outputs: Collection[str], what: str) -> None:
    """ValueError when OUT has no job record and holds files other than OUTPUTS: the command would write among
    files it did not write (a rerun of the same job, with its record, is `check_job`'s to judge). WHAT names the
    command in the message: `holds files not written by WHAT (the first 5 names, ...)`."""
    if (Path(out_dir) / JOB_FILE).is_file():
        return
    others = foreign_files(out_dir, outputs)
    if others:
        more = ", ..." if len(others) > 5 else ""
        raise ValueError(
            f"{out_dir}: holds files not written by {what} ({', '.join(others[:5])}{more}); write to a new folder"
        )


def describe_difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    """`inputs differ`, `settings.ngram: 13 -> 8`, `tasks: 2 -> 4` ... (the first few; a setting missing on one
    side was at its default). Never empty: a record of other fields than this job's is another command's."""

    def show(d: dict[str, Any], k: str) -> str:
        return repr(d[k]) if k in d else "(default)"

    if old.get("command") != new.get("command"):  # another command's folder: settings unalike
        return f"it holds the output of {old.get('command') or 'another command'}"
    fields = sorted((set(old) ^ set(new)) - set(LATER_FIELDS))
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
