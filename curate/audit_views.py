"""The audit's relations over one run folder: what exists becomes a view, what does not is simply absent.

Parquet outputs stay lazy DuckDB views (a 1M-row corpus is never loaded whole; a query reads only its columns).
Small JSON files (summaries, manifests, stage reports) are flattened in Python into in-memory tables, because
their shapes are owned by other stages and vary; a missing stage leaves no relation, and `schema` lists what is
there. A datatrove `metadata` struct is flattened into top-level columns so that every stage reads the same way.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from curate.audit_json import read_json_file, rows_to_arrow

# The stage folders and their summaries are read in curate.audit_stages (split off); INT64, STAGE_FOLDERS,
# stage_output_found and unfinished_stages are imported from here too, as before.
from curate.audit_stages import (  # noqa: F401
    DOCUMENT_STAGES,
    INT64,
    STAGE_FOLDERS,
    _int,
    holds_run,
    looping_links,
    stage_dirs,
    stage_name,
    stage_output_found,
    stats_rows,
    unfinished_stages,
)
from mathmix.cli_util import first_line

REPORT_SUFFIXES = (".json",)  # JSON documents; .jsonl files become lazy views (create_jsonl_views)
# Sub-folders of a stage that are not reports: outputs, rejects, datatrove logs, models, tokenizers.
NOT_REPORT_FOLDERS = {"data", "rejects", "logs", "_model", "tokenizer", "model", "checkpoints"}
# work folders (under a stage folder) of .jsonl files that are no reports: dedup's work/ids/RANK.ids.jsonl holds one
# JSON string a line (curate/dedup_ids.py); as a view, every line of every file was named as not parsing
NOT_REPORT_SUBFOLDERS = {("work", "ids")}
# summaries and manifests have views of their own; job records (what wrote a folder) are not tables
NOT_REPORT_FILES = {"summary.json", "manifest.json", "job.json", "recipe-stage.json", "upstream.json"}
MAX_REPORT_BYTES = 32 * 1024 * 1024  # a stage report bigger than this is left to read_json() in a query
# Columns of the known JSON-lines reports, for the view over an empty one: a clean decont run writes an empty
# contamination.jsonl, and `SELECT count(*) FROM decont_contamination` must say 0, not "table does not exist".
# (curate/decont.py `Overlap.to_dict`, pipelines/dedup.py clusters.)
EMPTY_REPORT_COLUMNS = {
    "decont_contamination": {
        "id": "VARCHAR",
        "mode": "VARCHAR",
        "overlaps": "STRUCT(benchmark VARCHAR, item BIGINT, n_matched BIGINT, ngrams VARCHAR[], whole BIGINT)[]",
    },
    "dedup_clusters": {
        "kind": "VARCHAR",
        "cluster_id": "BIGINT",
        "size": "BIGINT",
        "kept": "VARCHAR",
        "removed": "VARCHAR[]",
    },
}


def _sql_str(value: str | Path) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def sql_name(name: str) -> str:
    """A column name as a quoted SQL identifier: the keys of JSON reports and Parquet columns are the data's,
    and one holding `"` (`say "hi"`) would end the identifier and break the statement."""
    return '"' + name.replace('"', '""') + '"'


# Files left out of the views by the last `create_all`: damaged or truncated Parquet, JSON that does not parse
UNREADABLE: list[str] = []
VIEW_FILES: dict[str, list[Path]] = {}  # {view: the Parquet files it reads}, for the last `create_all`
# Finished document stages (a summary.json) whose data/ gives no view, {stage: its summary's docs_out}, and one
# warning line each (plus one for `corpus` where the last of them is one), for the last `create_all`
NO_VIEW: dict[str, int | None] = {}
# Relations left out because DuckDB ran out of memory making them (a small --memory-limit), for the last `create_all`
OUT_OF_MEMORY: list[str] = []
NO_DATA: list[str] = []
# Every file a lazy view reads (Parquet and JSON lines), for the last `create_all`: the session lets DuckDB read
# exactly these outside the run folder (a file or folder linked in from elsewhere), nothing else there
READ_FILES: list[Path] = []
# Links to a folder holding the run folder (`RUN/web -> /`, `RUN/classifier -> ..`), left out of the views
LINKS_LEFT_OUT: list[Path] = []


def walk_files(run_dir: Path, folder: Path, pattern: str) -> list[Path]:
    """The files named `pattern` under FOLDER (a folder of RUN_DIR), sorted, links to folders followed (each real
    folder read once): `cp -rs`, git-annex and DVC link files, `data/part0 -> /elsewhere/part0` a level deeper. A
    link to a folder holding the run (`/`, the run's parent) is not followed; it is named in `LINKS_LEFT_OUT`."""
    chain = folder.relative_to(run_dir).parts
    for i in range(1, len(chain) + 1):  # a link on the way from the run folder (RUN/web -> /)
        if holds_run(run_dir, run_dir.joinpath(*chain[:i])):
            _left_out(run_dir.joinpath(*chain[:i]))
            return []
    if not folder.is_dir():
        return []
    found, seen = [], set()
    for top, dirs, names in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:  # a link loop, or two links to one folder
            dirs[:] = []
            continue
        seen.add(real)
        for name in list(dirs):
            if holds_run(run_dir, Path(top, name)):
                _left_out(Path(top, name))
                dirs.remove(name)
        found += [Path(top, n) for n in names if fnmatch.fnmatchcase(n, pattern) and Path(top, n).is_file()]
    return sorted(found)


def _left_out(link: Path) -> None:
    if link not in LINKS_LEFT_OUT:
        LINKS_LEFT_OUT.append(link)


# What pyarrow raises for a file it cannot read: ArrowInvalid is a ValueError, ArrowIOError an OSError, and
# ArrowNotImplementedError (a damaged page header naming an encoding or codec it does not know) is neither but a
# NotImplementedError; every Arrow error is an ArrowException
PYARROW_READ_ERRORS = (OSError, ValueError, NotImplementedError, pa.ArrowException)


def _parquet_files(run_dir: Path, folder: Path) -> list[Path]:
    """FOLDER's Parquet files whose footer reads (`walk_files`: links followed): one damaged file must not take the
    whole audit down (DuckDB refuses a view over it), so it is left out and named (`UNREADABLE`, shown by the CLI
    and the report)."""
    import pyarrow.parquet as pq

    files = []
    for path in walk_files(run_dir, folder, "*.parquet"):
        try:
            pq.read_metadata(path)
        except PYARROW_READ_ERRORS as err:
            UNREADABLE.append(f"{path}: {first_line(err)}")
            continue
        files.append(path)
    return files


def damaged_parquet(files: list[Path]) -> list[str]:
    """`FILE: why` for each file whose pages do not read (its footer read when the views were made, which says
    nothing of the pages): each file is read whole, a row group at a time. Slow on a large run: only for naming
    the file behind a DuckDB error that does not name it (`Variable-length int over 10 bytes.`)."""
    import pyarrow.parquet as pq

    damaged = []
    for path in files:
        try:
            parquet = pq.ParquetFile(path)
            for group in range(parquet.num_row_groups):
                parquet.read_row_group(group)
        except PYARROW_READ_ERRORS as err:
            damaged.append(f"{path}: {first_line(err)}")
    return damaged


def _scan(files: list[Path], filename: bool = False) -> str:
    READ_FILES.extend(files)
    paths = ", ".join(_sql_str(p) for p in files)
    extra = ", filename = true" if filename else ""
    return f"read_parquet([{paths}], union_by_name = true{extra})"


def _flat_select(con: duckdb.DuckDBPyConnection, source: str, extra: list[str] | None = None) -> str:
    """SELECT list that lifts the fields of a `metadata` struct to columns (top-level names win on clashes)."""
    rel = con.sql(f"SELECT * FROM {source} LIMIT 0")
    names, types = list(rel.columns), list(rel.types)
    extra_names = {e.rsplit(" AS ", 1)[-1].strip('"') for e in extra or []}
    meta = types[names.index("metadata")] if "metadata" in names else None
    fields = dict(meta.children) if meta is not None and meta.id == "struct" else {}
    parts = []
    for name, kind in zip(names, types, strict=True):
        if name in ("metadata", "filename") or name in extra_names:
            continue
        # Files written flat and files written with a metadata struct can meet in one union_by_name scan.
        column = sql_name(name)
        parts.append(
            f"coalesce({column}, TRY_CAST(metadata.{column} AS {kind})) AS {column}"
            if name in fields
            else column
        )
    if meta is not None:
        if fields:
            taken = set(names) | extra_names
            parts += [f"metadata.{sql_name(f)} AS {sql_name(f)}" for f in fields if f not in taken]
        else:
            parts.append('"metadata"')  # a JSON string or a map: kept as it is, for DuckDB's json functions
    return ", ".join(parts + (extra or []))


def _finished_docs_out(folder: Path) -> tuple[bool, int | None]:
    """(whether FOLDER has a summary.json that reads as an object, its docs_out)."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return False, None
    if not isinstance(summary, dict):
        return False, None
    return True, _int(summary.get("docs_out"))


def create_document_views(con: duckdb.DuckDBPyConnection, run_dir: Path) -> dict[str, str]:
    """Views web/dedup/decont over STAGE/data, `corpus` over the last of them; returns {view: description}.

    A finished stage (a summary.json) whose data/ holds no readable Parquet file gets no view and a line in
    `NO_DATA`; where it is the last document stage, there is no `corpus` either (another stage's documents
    would be a wrong answer, given without a word). One that kept 0 documents (docs_out 0) and wrote no Parquet
    file at all (a stage by an older mathmix, one's own pipeline) is an empty view with the columns of the stage
    before it (no view, said plainly, where there is none)."""
    made: dict[str, str] = {}
    last: str | None = None  # the last document stage: a view, or a finished stage without one
    kept_nothing: set[str] = set()  # finished stages that kept 0 documents, with no stage before to type them
    for stage in DOCUMENT_STAGES:
        damaged = len(UNREADABLE)
        files = _parquet_files(run_dir, run_dir / stage / "data")
        damaged = len(UNREADABLE) - damaged
        if not files:
            finished, docs_out = _finished_docs_out(run_dir / stage)
            if finished and docs_out == 0 and not damaged:  # kept nothing, as it says: an empty view
                before = last if last in made else None
                if before is not None:
                    con.execute(f'CREATE VIEW "{stage}" AS SELECT * FROM "{before}" WHERE false')
                    made[stage] = (
                        f"{stage}/data: no parquet file, its summary.json says docs_out 0 (0 rows, {before}'s columns)"
                    )
                    VIEW_FILES[stage] = []
                else:
                    NO_VIEW[stage] = docs_out
                    kept_nothing.add(stage)
                    NO_DATA.append(
                        f"{stage}: kept 0 documents (its summary.json says docs_out 0) and wrote no Parquet file, and "
                        f"no stage before it has one to take the columns from: no view {stage}"
                    )
                last = stage
                continue
            if finished:
                NO_VIEW[stage] = docs_out
                last = stage
                NO_DATA.append(
                    f"{stage}: its data/ holds no readable Parquet file (0 documents read) but its summary.json "
                    f"says docs_out {docs_out if docs_out is not None else '(no number)'}: no view {stage}"
                )
            continue
        source = _scan(files)
        con.execute(f'CREATE VIEW "{stage}" AS SELECT {_flat_select(con, source)} FROM {source}')
        made[stage] = f"{stage}/data: {len(files)} parquet file(s)"
        VIEW_FILES[stage] = files
        last = stage
    if last is not None and last not in made:
        earlier = [stage for stage in DOCUMENT_STAGES if stage in made]
        instead = f"; {earlier[-1]} is an earlier stage's output (query it by name)" if earlier else ""
        why = "kept 0 documents" if last in kept_nothing else "has no readable data"
        NO_DATA.append(f"no view corpus: {last}, the last curation stage, {why}{instead}")
    elif last is not None:
        con.execute(f'CREATE VIEW corpus AS SELECT * FROM "{last}"')
        VIEW_FILES["corpus"] = VIEW_FILES[last]
        made["corpus"] = f"= {last} (the last curation stage present)"
    return made


def create_branch_views(con: duckdb.DuckDBPyConnection, run_dir: Path) -> dict[str, str]:
    """`branches`: every branches/<task>/data Parquet file, with a `task` column."""
    tasks = (
        sorted((run_dir / "branches").glob("*/data")) if not holds_run(run_dir, run_dir / "branches") else []
    )
    files = [f for task in tasks for f in _parquet_files(run_dir, task)]
    if not files:
        return {}
    source = _scan(files, filename=True)
    task = r"regexp_extract(filename, '[/\\]branches[/\\]([^/\\]+)[/\\]data[/\\]', 1) AS task"
    con.execute(f"CREATE VIEW branches AS SELECT {_flat_select(con, source, [task])} FROM {source}")
    VIEW_FILES["branches"] = files
    return {"branches": f"branches/*/data: {len(files)} parquet file(s)"}


def create_reject_views(con: duckdb.DuckDBPyConnection, run_dir: Path) -> dict[str, str]:
    """`rejects`: STAGE/rejects/**/*.parquet with `stage` and `reason` (a column, else the sub-folder name)."""
    files = [f for stage_dir in stage_dirs(run_dir) for f in _parquet_files(run_dir, stage_dir / "rejects")]
    if not files:
        return {}
    source = _scan(files, filename=True)
    rel = con.sql(f"SELECT * FROM {source} LIMIT 0")
    names = list(rel.columns)
    meta = rel.types[names.index("metadata")] if "metadata" in names else None
    meta_fields = [f for f, _ in meta.children] if meta is not None and meta.id == "struct" else []
    root = _sql_str(str(run_dir.resolve()).replace("\\", "/") + "/")
    rel_path = f"substr(regexp_replace(filename, '\\\\', '/', 'g'), length({root}) + 1)"
    stage = f"regexp_extract({rel_path}, '^(.+)/rejects/', 1) AS stage"
    folder_reason = f"nullif(regexp_extract({rel_path}, '/rejects/([^/]+)/', 1), '')"
    # The reason: a `reason` column, datatrove's `filter_reason` (exclusion writers), else the sub-folder name.
    candidates = [f'nullif(CAST({src}"{key}" AS VARCHAR), \'\')' for key in ("reason", "filter_reason")
                  for src, present in (("", names), ("metadata.", meta_fields)) if key in present]  # fmt: skip
    reason = f"coalesce({', '.join([*candidates, folder_reason])})"
    extra = [stage, f"{reason} AS reason"]
    con.execute(f"CREATE VIEW rejects AS SELECT {_flat_select(con, source, extra)} FROM {source}")
    VIEW_FILES["rejects"] = files
    return {"rejects": f"*/rejects: {len(files)} parquet file(s)"}


def _table_name(*parts: str) -> str:
    return re.sub(r"\W+", "_", "_".join(parts)).strip("_").lower()


def _json_file_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of one JSON document; one that does not parse is left out and named (`UNREADABLE`)."""
    try:
        return read_json_file(path)
    except (OSError, ValueError) as err:  # json.JSONDecodeError is a ValueError
        UNREADABLE.append(f"{path}: {first_line(err)}")
        return []


def _create_table(con: duckdb.DuckDBPyConnection, name: str, rows: list[dict[str, Any]]) -> bool:
    """Whether the table was made: DuckDB out of memory (a small --memory-limit) leaves it out, named in
    `OUT_OF_MEMORY` (the file is fine: it is not said to be damaged)."""
    table = rows_to_arrow(rows)
    con.register("_audit_rows", table)
    try:
        con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM _audit_rows')
    except duckdb.OutOfMemoryException:
        OUT_OF_MEMORY.append(name)
        return False
    finally:
        con.unregister("_audit_rows")
    return True


def create_json_tables(con: duckdb.DuckDBPyConnection, run_dir: Path) -> dict[str, str]:
    """`stats`, `summaries`, `shards` (manifest rows) and one `<stage>_<file>` table per stage report file."""
    made: dict[str, str] = {}
    stats, summaries = stats_rows(run_dir)
    if stats:
        if _create_table(con, "stats", stats):
            made["stats"] = "every stage's summary.json: one row per stage and drop reason"
        if _create_table(con, "summaries", summaries):
            made["summaries"] = "every stage's summary.json: one row per stage"
    stats, summaries = stats_rows(run_dir, tasks=True)
    if stats:  # the rewriter's tasks, which branches/summary.json (a row of stats) sums
        if _create_table(con, "task_stats", stats):
            made["task_stats"] = "every branches/<task>/summary.json: one row per task and drop reason"
        if _create_table(con, "task_summaries", summaries):
            made["task_summaries"] = "every branches/<task>/summary.json: one row per task"
    manifests = walk_files(run_dir, run_dir / "shards", "manifest.json")
    rows = [
        {"manifest": m.relative_to(run_dir).as_posix()} | row for m in manifests for row in _json_file_rows(m)
    ]
    if rows and _create_table(con, "shards", rows):
        made["shards"] = f"shards manifest(s): {len(manifests)} file(s), one row per entry"
    for folder in stage_dirs(run_dir):
        for path in sorted(folder.iterdir()):
            if path.suffix not in REPORT_SUFFIXES or path.name in NOT_REPORT_FILES:
                continue
            if not path.is_file() or path.stat().st_size > MAX_REPORT_BYTES:
                continue
            name = _table_name(stage_name(run_dir, folder), path.stem)
            rows = _json_file_rows(path)
            if rows and any(rows) and name not in made:  # `{}` has no column to make a table of
                try:
                    if not _create_table(con, name, rows):
                        continue
                except (duckdb.Error, ValueError, TypeError) as err:  # a shape no table holds: named
                    UNREADABLE.append(f"{path}: {first_line(err)}")
                    continue
                made[name] = f"report {path.relative_to(run_dir).as_posix()}"
    return made


def create_jsonl_views(con: duckdb.DuckDBPyConnection, run_dir: Path) -> dict[str, str]:
    """Lazy `read_json` views over JSON-lines reports: `<stage>_<stem>` for STAGE/<stem>.jsonl and
    `<stage>_<sub>_<folder>` for the .jsonl files of each folder under the stage (e.g. decont's report/)."""
    made: dict[str, str] = {}
    for stage_dir in stage_dirs(run_dir):
        stage = stage_name(run_dir, stage_dir)
        groups = [([f], _table_name(stage, f.stem)) for f in sorted(stage_dir.glob("*.jsonl"))]
        by_folder: dict[Path, list[Path]] = {}
        for sub in sorted(p for p in stage_dir.iterdir() if p.is_dir() and p.name not in NOT_REPORT_FOLDERS):
            for f in walk_files(run_dir, sub, "*.jsonl"):
                if f.parent.relative_to(stage_dir).parts not in NOT_REPORT_SUBFOLDERS:
                    by_folder.setdefault(f.parent, []).append(f)
        groups += [
            (files, _table_name(stage, *d.relative_to(stage_dir).parts)) for d, files in by_folder.items()
        ]
        for files, name in groups:
            full = [f for f in files if f.is_file() and f.stat().st_size > 0]
            if full and name not in made and _json_view(con, name, full):
                where = full[0] if len(full) == 1 else full[0].parent
                made[name] = f"{where.relative_to(run_dir).as_posix()}: {len(full)} jsonl file(s)"
            elif not full and name in EMPTY_REPORT_COLUMNS and name not in made:
                _empty_view(con, name, EMPTY_REPORT_COLUMNS[name])
                made[name] = f"{files[0].relative_to(run_dir).as_posix()}: empty (0 rows)"
    return made


def _empty_view(con: duckdb.DuckDBPyConnection, name: str, columns: dict[str, str]) -> None:
    select = ", ".join(f'CAST(NULL AS {kind}) AS "{col}"' for col, kind in columns.items())
    con.execute(f'CREATE VIEW "{name}" AS SELECT {select} WHERE false')


# The end of a JSON-lines file checked for lines that do not parse: a stage killed while writing leaves its torn
# line last, and reading the whole of a multi-GB report on every session costs seconds to find it.
TAIL_LINES = 8  # at least this many of the last lines (all of the lines of the blocks read from the end)
TAIL_BYTES = 64 * 1024  # read from the end a block at a time, each twice the last
MAX_TAIL_BYTES = 32 * 1024 * 1024  # never more than this (a line longer than that is not checked)


def tail_lines(path: Path, lines: int = TAIL_LINES) -> tuple[list[bytes], bool]:
    """The complete lines at the end of `path` (blank ones left out; at least `lines` of them where the file
    holds them) and whether they are all of its lines. Blocks are read from the end only until they hold
    `lines` complete lines: a large file is never read whole."""
    with path.open("rb") as stream:
        start = stream.seek(0, 2)
        data, block = b"", TAIL_BYTES
        while start > 0 and data.count(b"\n") <= lines and len(data) < MAX_TAIL_BYTES:
            step = min(block, start, MAX_TAIL_BYTES - len(data))
            start -= step
            stream.seek(start)
            data = stream.read(step) + data
            block *= 2
    parts = data.split(b"\n")
    if start > 0:
        parts = parts[1:]  # it began before the first block read
    return [part for part in parts if part.strip()], start == 0


def _torn_lines(path: Path) -> tuple[int, int, bool]:
    """(lines that are no JSON object, lines checked, whether that is all of them) at the end of `path`."""
    checked, whole = tail_lines(path)
    bad = 0
    for line in checked:
        try:
            bad += not isinstance(json.loads(line.decode("utf-8", errors="replace")), dict)
        except ValueError:  # json.JSONDecodeError is a ValueError
            bad += 1
    return bad, len(checked), whole


def _json_view(con: duckdb.DuckDBPyConnection, name: str, files: list[Path]) -> bool:
    """A lazy view over JSON-lines files. A line that does not parse (a stage killed while writing it) would be
    a row of NULLs: it is left out of the view, and each file holding such lines is named (`UNREADABLE`) with
    their count; a known report (EMPTY_REPORT_COLUMNS) none of whose lines parse is an empty view. Only the end
    of each file is checked (`tail_lines`: where a killed stage leaves its torn line), so the view stays lazy."""
    taken = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]
    ).fetchall()
    if taken[0][0]:
        return False
    READ_FILES.extend(files)
    paths = ", ".join(_sql_str(f) for f in files)
    source = f"read_json([{paths}], format = 'newline_delimited', union_by_name = true, ignore_errors = true)"
    try:
        torn = {f: _torn_lines(f) for f in files}
        # each bind of read_json samples the first 32 MiB of the files for their schema: bound twice, no more
        columns = con.sql(f"SELECT * FROM {source} LIMIT 0").columns
        empty = name in EMPTY_REPORT_COLUMNS and all(
            whole and n_bad == n for n_bad, n, whole in torn.values()
        )
        if not empty:  # a known report of which every line was read and none parses is its empty view
            good = " OR ".join(f"{sql_name(c)} IS NOT NULL" for c in columns)
            where = f" WHERE {good}" if any(n_bad for n_bad, _, _ in torn.values()) else ""
            con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM {source}{where}')
    except duckdb.OutOfMemoryException:  # not the files' fault: named apart, with --memory-limit
        OUT_OF_MEMORY.append(name)
        return False
    except (duckdb.Error, OSError) as err:  # not JSON lines at all: left to read_json() in a query, said so
        UNREADABLE.extend(f"{f}: {first_line(err)}" for f in files)
        return False
    for file, (n_bad, n_lines, whole) in torn.items():
        if n_bad:
            of = f"{n_lines}" if whole else f"the last {n_lines}"
            UNREADABLE.append(f"{file}: {n_bad} of {of} line(s) do not parse (view {name})")
    if empty:
        _empty_view(con, name, EMPTY_REPORT_COLUMNS[name])
    return True


def create_all(con: duckdb.DuckDBPyConnection, run_dir: Path) -> dict[str, str]:
    """Every relation the run folder allows, {name: what it is over}; views of absent stages are absent."""
    UNREADABLE.clear()
    VIEW_FILES.clear()
    NO_VIEW.clear()
    OUT_OF_MEMORY.clear()
    NO_DATA.clear()
    READ_FILES.clear()
    LINKS_LEFT_OUT.clear()
    LINKS_LEFT_OUT.extend(looping_links(run_dir))
    made: dict[str, str] = {}
    builds = (create_document_views, create_branch_views, create_reject_views, create_json_tables,
              create_jsonl_views)  # fmt: skip
    for build in builds:
        made.update(build(con, run_dir))
    NO_DATA.extend(
        f"{link}: a link to {os.path.realpath(link)}, a folder holding the run folder: left out of the views"
        for link in LINKS_LEFT_OUT
    )
    return made
