"""`shards build`: tokenize Parquet/JSONL corpora into Megatron shards through a datatrove executor.

Each datatrove task tokenizes its share of the input files and writes its own shards, RANK_SHARD.bin/.idx, cut
when a shard passes `max_shard_bytes` (checked per batch). Tasks compute their files' sha256 in parallel and
leave a part file; the driver merges the parts into OUT/manifest.json, so the manifest never waits on a re-read.
A rerun skips finished tasks, except one whose shard files are gone or changed size since it finished: that task
runs again (its completion marker, part file and shards removed first), so the manifest never lists missing files.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from mathmix.cli_util import write_json
from shards.indexed import IndexedWriter, token_dtype
from shards.manifest import file_entry, write_manifest
from shards.tokenizer import corpus_files, load_tokenizer

PARTS = "parts"
log = logging.getLogger("mathmix.shards")


class MegatronShardWriter(PipelineStep):
    """Tokenize documents (EOS after each) into megatron-core-layout shards; the last step of a pipeline.

    Args:
        output_folder: local folder for RANK_SHARD.bin/.idx.
        tokenizer: Hugging Face tokenizer folder or hub name.
        eos_token: token appended to each document (default: the tokenizer's EOS).
        batch_size: documents per `encode_batch` call.
        max_shard_bytes: a new shard starts once the current .bin passes this size.
        logging_dir: where the per-task part files (shard entries with checksums) go.
    """

    name = "🔢 Megatron shards"
    type = "🔢 - TOKENIZER"

    def __init__(
        self,
        output_folder: str | Path,
        tokenizer: str,
        eos_token: str | None = None,
        batch_size: int = 1000,
        max_shard_bytes: int = 1 << 30,
        logging_dir: str | Path | None = None,
    ) -> None:
        super().__init__()
        self.output_folder = Path(output_folder)
        self.tokenizer_name = str(tokenizer)
        self.eos_token = eos_token
        self.batch_size = batch_size
        self.max_shard_bytes = max_shard_bytes
        self.parts_dir = Path(logging_dir or self.output_folder / "logs") / PARTS

    def _open(self, rank: int, shard: int, tok: Any) -> IndexedWriter:
        prefix = self.output_folder / f"{rank:05d}_{shard:05d}"
        return IndexedWriter(prefix, token_dtype(tok.vocab_size), vocab_size=tok.vocab_size)

    def _finish(self, writer: IndexedWriter, entries: list[dict[str, Any]]) -> None:
        info = writer.close()
        name = Path(info["prefix"]).name
        if info["documents"] == 0:  # a task with no input leaves no empty shard behind
            for ext in ("bin", "idx"):
                (self.output_folder / f"{name}.{ext}").unlink(missing_ok=True)
            return
        entries.append(file_entry(self.output_folder, name, info["documents"], info["tokens"]))

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        from shards.tokenizer import load_tokenizer

        tok = load_tokenizer(self.tokenizer_name, self.eos_token)
        self.output_folder.mkdir(parents=True, exist_ok=True)
        shard, entries = 0, []  # type: tuple[int, list[dict[str, Any]]]
        writer = self._open(rank, shard, tok)
        batch: list[str] = []
        for doc in data or ():
            if not doc.text or not doc.text.strip():
                self.stat_update("dropped_empty_text")
                continue
            batch.append(doc.text)
            if len(batch) >= self.batch_size:
                self._write(batch, writer, tok)
                batch = []
                if writer.num_bytes >= self.max_shard_bytes:
                    self._finish(writer, entries)
                    shard += 1
                    writer = self._open(rank, shard, tok)
        self._write(batch, writer, tok)
        self._finish(writer, entries)
        part = {"rank": rank, "tokenizer": tok.name, "tokenizer_sha256": tok.fingerprint}
        part |= {"vocab_size": tok.vocab_size, "eos_id": tok.eos_id}
        part |= {"dtype": str(token_dtype(tok.vocab_size)), "files": entries}
        write_json(self.parts_dir / f"{rank:05d}.json", part)
        return
        yield  # a generator that yields nothing: the last step of the pipeline

    def _write(self, texts: list[str], writer: IndexedWriter, tok: Any) -> None:
        if not texts:
            return
        with self.track_time(unit="batch"):
            ids = tok.encode_batch(texts)
            eos = [tok.eos_id]
            writer.add_documents([doc + eos for doc in ids])
        self.stat_update("total", value=len(texts))
        self.stat_update("tokens", value=sum(len(d) for d in ids) + len(ids))


def _readers(files: list[Path], list_dir: Path) -> list[PipelineStep]:
    """One datatrove reader per format over exactly `files` (a paths file), sharded across tasks by file."""
    from curate.doc_readers import CountingJsonlReader, CountingParquetReader

    root = Path(os.path.commonpath([str(f.parent.resolve()) for f in files]))
    groups = {
        "parquet": [f for f in files if f.suffix == ".parquet"],
        "jsonl": [f for f in files if f.suffix != ".parquet"],
    }
    readers: list[PipelineStep] = []
    list_dir.mkdir(parents=True, exist_ok=True)
    for fmt, group in groups.items():
        if not group:
            continue
        paths_file = list_dir / f"inputs_{fmt}.txt"
        paths_file.write_text("".join(f"{f.resolve().relative_to(root)}\n" for f in group))
        if fmt == "parquet":  # read_metadata=False: only the id and text columns are read
            readers.append(CountingParquetReader(str(root), paths_file=str(paths_file), read_metadata=False))
        else:
            reader = CountingJsonlReader(str(root), paths_file=str(paths_file))
            reader.rank_offset = len(groups["parquet"])  # one round-robin over all files
            readers.append(reader)
    for reader in readers:  # the writer reads the text alone; resolving each document's path cost ~12 us
        reader.add_file_path = False  # type: ignore[attr-defined]
    return readers


def build_shards(
    inputs: Sequence[str | Path],
    out_dir: str | Path,
    tokenizer: str,
    executor: Any = None,
    eos_token: str | None = None,
    batch_size: int = 1000,
    max_shard_bytes: int = 1 << 30,
    name: str | None = None,
    run_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Tokenize `inputs` into OUT/*.bin/.idx with OUT/manifest.json and OUT/summary.json; return the summary.

    `executor` is a `pipelines.executors.ExecutorConfig` (default: local, 2 tasks). Reruns skip finished tasks.
    """
    from curate.summary import summarize_logs, write_summary
    from pipelines.executors import ExecutorConfig
    from pipelines.job_record import check_job, job_identity

    start = time.time()
    out = Path(out_dir)
    refuse_other_kind(out)  # first: a wrong -o is named before any input or tokenizer is read
    logs = out / "logs"
    files = corpus_files(inputs)
    if not files:
        raise FileNotFoundError(f"no Parquet/JSONL files in {[str(i) for i in inputs]}")
    executor = executor or ExecutorConfig()
    loaded = load_tokenizer(tokenizer, eos_token)  # once, here: a bad name fails before any task starts
    tokenizer = loaded.name
    step = MegatronShardWriter(out, tokenizer, loaded.eos_token, batch_size, max_shard_bytes, logs)
    tasks = min(executor.tasks, len(files))
    # the EOS as resolved: `--eos-token X` where X is the tokenizer's own is the same job as no --eos-token
    settings: dict[str, Any] = {"tokenizer": str(tokenizer), "tokenizer_sha256": loaded.fingerprint}
    settings |= {"eos_token": loaded.eos_token, "max_shard_bytes": max_shard_bytes}
    run_dir = run_dir or out.parent
    identity = job_identity(files, settings, run_dir, tasks=tasks)
    if check_job(
        out, identity, "shards build", earlier=_earlier_forms(out, identity, loaded), run_dir=run_dir
    ):
        redo = damaged_tasks(out, tasks)  # a rerun: finished tasks are skipped, unless their shards are gone
        for rank, why in redo.items():
            log.warning("%s: task %d finished, but %s: tokenizing its files again", out, rank, why)
            _forget_task(out, rank)
        if redo:  # a new summary, with this run's timing (an equal one kept the old seconds and finished_at)
            (out / "summary.json").unlink(missing_ok=True)
    job = executor.build([*_readers(files, logs), step], logs, job_name=f"shards-{out.name}", tasks=tasks)
    executor.run(job)
    parts = [json.loads(p.read_text()) for p in sorted((logs / PARTS).glob("*.json"))]
    if len(parts) < tasks:
        raise RuntimeError(f"{out}: only {len(parts)} of {tasks} tokenization tasks finished (see {logs})")
    info = {k: parts[0].get(k) for k in ("tokenizer", "tokenizer_sha256", "vocab_size", "eos_id", "dtype")}
    info["tokenizer"] = tokenizer  # where it is now (a byte-identical copy elsewhere: the same fingerprint)
    manifest = write_manifest(out, [f for p in parts for f in p["files"]], name=name or out.name, **info)
    summary = summarize_logs(logs, seconds=time.time() - start)
    summary |= {
        "tokens": manifest["tokens"],
        "documents": manifest["documents"],
        "files": len(manifest["files"]),
    }
    summary |= {"input_files": len(files), **info}
    if summary["dropped"].get("bad_record"):
        if no_documents := files_of_no_documents(files):  # print_summary names them
            summary["files_all_bad_records"] = no_documents
    write_summary(out, summary)
    return summary


def _earlier_forms(out: Path, identity: dict[str, Any], loaded: Any) -> list[dict[str, Any]]:
    """Forms of IDENTITY that OUT's job.json may hold for this same job: the tokenizer at another path with the
    same fingerprint (a byte-identical copy), and `eos_token` null where the EOS is the tokenizer's own (records
    from before the resolved EOS was recorded)."""
    try:
        previous = json.loads((out / "job.json").read_text())
    except (OSError, ValueError):
        return []
    before = previous.get("settings") if isinstance(previous, dict) else None
    if not isinstance(before, dict):
        return []
    settings = dict(identity["settings"])
    if before.get("tokenizer_sha256") == settings["tokenizer_sha256"] and "tokenizer" in before:
        settings["tokenizer"] = before["tokenizer"]
    if before.get("eos_token", "") is None and loaded.eos_token == loaded.default_eos:
        # null was the tokenizer's own EOS then: the same token only if the finished tasks closed documents with
        # this id (its tokenizer_config.json is not in the fingerprint)
        ids = set()
        for part in (out / "logs" / PARTS).glob("*.json"):
            try:
                ids.add(json.loads(part.read_text()).get("eos_id"))
            except (OSError, ValueError, AttributeError):
                ids.add(None)
        if ids <= {loaded.eos_id}:
            settings["eos_token"] = None
    return [{**identity, "settings": settings}] if settings != identity["settings"] else []


def files_of_no_documents(files: list[Path], lines: int = 20) -> list[str]:
    """The input files that give no document at all, every row dropped as bad_record: a Parquet file whose text
    column holds no text (numbers), a file read as JSONL (`.txt`, ...) whose first LINES non-blank lines are none
    of them a JSON object with a string or missing text. The build only counts drops; this names the files."""
    import pyarrow.parquet as pq

    from shards.tokenizer import _is_text_type, _open_binary

    found = []
    for path in files:
        try:
            if path.suffix == ".parquet":
                schema = pq.ParquetFile(path).schema_arrow
                if "text" in schema.names and not _is_text_type(schema.field("text").type):
                    found.append(str(path))
                continue
            seen, bad = 0, 0
            with _open_binary(path) as handle:
                for raw in handle:
                    if not raw.strip():
                        continue
                    try:
                        row = json.loads(raw.decode("utf-8"))
                    except ValueError:
                        row = None
                    text = row.get("text") if isinstance(row, dict) else None
                    seen += 1
                    bad += not isinstance(row, dict) or (text is not None and not isinstance(text, str))
                    if seen >= lines:
                        break
            if seen and bad == seen:
                found.append(str(path))
        except Exception:  # noqa: BLE001 - a damaged file is counted as unreadable by the build itself
            continue
    return found


def refuse_other_kind(out: Path) -> None:
    """Raise ValueError when OUT is another command's output folder (documents, or a job record of no
    `shards build`): its job record's differences would not say what the folder is."""
    from mathmix.paths import _written_by_a_stage

    kind = f"the `{out.name}` stage folder of a run" if (out / "recipe-stage.json").is_file() else None
    if (out / "data").is_dir():
        kind = kind or ("a stage folder" if _written_by_a_stage(out) else "a dataset folder")
        raise ValueError(
            f"{out}: {kind}, holding documents (data/), not shards; write the shards to a new folder"
        )
    try:
        record = json.loads((out / "job.json").read_text())
    except (OSError, ValueError):
        return
    settings = record.get("settings") if isinstance(record, dict) else None
    if not isinstance(settings, dict) or "tokenizer" not in settings or "max_shard_bytes" not in settings:
        command = record.get("command") if isinstance(record, dict) else None
        written = f"written by `{command}`" if command else "its job.json is no `shards build` record"
        raise ValueError(
            f"{out}: {kind or 'the output folder of another command'} ({written}), not shards; "
            "write the shards to a new folder"
        )


def damaged_tasks(out: Path, tasks: int) -> dict[int, str]:
    """The finished tasks (datatrove completion marker) whose part file or shard files are missing, or whose
    shards differ in size from their part's record, with what is wrong."""
    logs = out / "logs"
    damaged = {}
    for rank in range(tasks):
        if not (logs / "completions" / f"{rank:05d}").is_file():
            continue  # not finished: datatrove runs it anyway
        try:
            part = json.loads((logs / PARTS / f"{rank:05d}.json").read_text())
        except (OSError, ValueError):
            damaged[rank] = f"its record {logs / PARTS / f'{rank:05d}.json'} is missing or unreadable"
            continue
        for entry in part.get("files", []):
            for ext in ("bin", "idx"):
                path = out / f"{entry['prefix']}.{ext}"
                want = entry.get(ext, {}).get("bytes")
                if not path.is_file():
                    damaged[rank] = f"{path} is missing"
                elif want is not None and path.stat().st_size != want:
                    damaged[rank] = f"{path} has {path.stat().st_size} bytes, {want} when written"
            if rank in damaged:
                break
    return damaged


def _forget_task(out: Path, rank: int) -> None:
    """Remove what task RANK wrote (shards, part file, completion marker) so that the executor runs it again."""
    for shard in out.glob(f"{rank:05d}_*.*"):
        if shard.suffix in (".bin", ".idx"):
            shard.unlink()
    (out / "logs" / PARTS / f"{rank:05d}.json").unlink(missing_ok=True)
    (out / "logs" / "completions" / f"{rank:05d}").unlink(missing_ok=True)
