"""`shards validate` catches truncation and corruption naming the file; `shards inspect`; the CLI end to end."""

from __future__ import annotations

import json
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from mathmix.cli import app
from shards.indexed import IndexedDataset, write_index, write_indexed
from shards.inspection import _samples, inspect_shards
from shards.manifest import file_entry, write_manifest
from shards.validate import validate_path

DOCS = [[5, 6, 7, 0], [8, 9, 0], [10, 11, 12, 13, 14, 0], [15, 16, 0]]
runner = CliRunner()


def _folder(tmp_path):
    out = tmp_path / "shards"
    no_tokenizer = str(tmp_path / "absent-tokenizer")  # samples then show ids only
    entries = []
    for k in range(2):
        info = write_indexed(out / f"0000{k}_00000", DOCS, vocab_size=32)
        entries.append(file_entry(out, f"0000{k}_00000", info["documents"], info["tokens"]))
    write_manifest(out, entries, name="toy", tokenizer=no_tokenizer, vocab_size=32, eos_id=0, dtype="uint16")
    return out


def test_valid_folder_passes(tmp_path):
    report = validate_path(_folder(tmp_path))
    assert report["ok"] and report["files"] == 2 and report["errors"] == []


def test_truncated_bin_fails_naming_it(tmp_path):
    out = _folder(tmp_path)
    target = out / "00001_00000.bin"
    target.write_bytes(target.read_bytes()[:-2])
    errors = validate_path(out)["errors"]
    assert any("00001_00000.bin" in e and "truncated" in e for e in errors), errors
    assert not any("00000_00000" in e for e in errors)


def test_flipped_byte_fails_the_checksum(tmp_path):
    out = _folder(tmp_path)
    target = out / "00000_00000.bin"
    data = bytearray(target.read_bytes())
    data[3] ^= 0xFF
    target.write_bytes(bytes(data))
    errors = validate_path(out)["errors"]
    assert errors == [f"{target}: sha256 differs from the manifest (corrupted)"]


def test_corrupted_pointers_and_header(tmp_path):
    out = _folder(tmp_path)
    idx = out / "00000_00000.idx"
    raw = bytearray(idx.read_bytes())
    raw[50 + 8 : 50 + 16] = struct.pack("<q", 999)  # second sequence pointer
    idx.write_bytes(bytes(raw))
    errors = validate_path(out / "00000_00000")["errors"]  # a bare prefix: no manifest to compare against
    assert any("00000_00000.idx: sequence pointer 1 is 999" in e for e in errors), errors
    raw[:3] = b"XXX"
    idx.write_bytes(bytes(raw))
    assert "bad magic" in validate_path(out / "00000_00000")["errors"][0]


def test_token_ids_beyond_vocab_and_unlisted_files(tmp_path):
    out = _folder(tmp_path)
    write_indexed(out / "stray", [[1, 0]], vocab_size=32)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["vocab_size"] = 10
    for entry in manifest["files"]:  # checksums still right: only the vocab check can fail
        entry.pop("bin")
    (out / "manifest.json").write_text(json.dumps(manifest))
    errors = validate_path(out)["errors"]
    assert any("token id 16 outside the vocabulary" in e for e in errors)
    assert any("stray.idx: not listed" in e for e in errors)


def test_cli_validate_exit_codes(tmp_path):
    out = _folder(tmp_path)
    ok = runner.invoke(app, ["shards", "validate", str(out)])
    assert ok.exit_code == 0, ok.output
    (out / "00000_00000.idx").write_bytes((out / "00000_00000.idx").read_bytes()[:40])
    bad = runner.invoke(app, ["shards", "validate", str(out)])
    assert bad.exit_code == 1
    assert "00000_00000.idx" in bad.output and "truncated" in bad.output


def test_cli_validate_a_path_that_names_nothing_is_one_line(tmp_path):
    # it was "missing .idx / missing .bin, 1 shard file(s) checked", as if a shard had lost both its files
    out = _folder(tmp_path)
    for missing in (tmp_path / "nonexist", tmp_path / "nonexist.idx"):
        result = runner.invoke(app, ["shards", "validate", str(out), str(missing)])
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
        assert result.output.strip() == f"error: no such shard, prefix or folder: {missing}"
    (out / "00001_00000.bin").unlink()  # a prefix whose .bin alone is missing: reported as before
    result = runner.invoke(app, ["shards", "validate", str(out / "00001_00000")])
    assert result.exit_code == 1 and f"invalid: {out / '00001_00000.bin'}: missing" in result.output


def test_inspect_counts_and_histogram(tmp_path):
    out = _folder(tmp_path)
    report = inspect_shards(out, samples=2)
    assert report["documents"] == 8 and report["tokens"] == 32 and report["files"] == 2
    assert report["length"]["min"] == 3 and report["length"]["max"] == 6 and report["length"]["mean"] == 4.0
    png = out / "inspect" / "length_hist.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(report["samples"]) == 2 and all(s["ids"][-1] == 0 for s in report["samples"])


def test_cli_train_tokenizer_build_inspect(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    texts = [f"Let $n = {i}$; then $n^2 = {i * i}$ and the sum is \\boxed{{{2 * i}}}." for i in range(200)]
    pq.write_table(pa.table({"id": [str(i) for i in range(200)], "text": texts}), corpus / "part.parquet")
    tok = tmp_path / "tok"
    result = runner.invoke(
        app, ["shards", "train-tokenizer", str(corpus), "-o", str(tok), "--vocab-size", "300"]
    )
    assert result.exit_code == 0, result.output
    out = tmp_path / "shards"
    args = ["shards", "build", str(corpus), "-o", str(out), "--tokenizer", str(tok), "--tasks", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["docs_out"] == 200
    result = runner.invoke(app, ["shards", "inspect", str(out), "--samples", "1"])
    assert result.exit_code == 0, result.output
    assert "the sum is" in result.output  # a decoded sample, through the manifest's tokenizer

    # a damaged file is named; out-of-range options are refused by the CLI, not by a Rust OverflowError
    (corpus / "zz.parquet").write_bytes((corpus / "part.parquet").read_bytes()[:300])
    result = runner.invoke(app, ["shards", "train-tokenizer", str(corpus), "-o", str(tmp_path / "t2")])
    assert result.exit_code == 2 and "zz.parquet: not a readable Parquet file" in result.output, result.output
    for option in (["--min-frequency", "-1"], ["--max-docs", "0"]):
        result = runner.invoke(
            app, ["shards", "train-tokenizer", str(corpus), "-o", str(tmp_path / "t3"), *option]
        )
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output


def _tiny_docs_shard(prefix, documents: int) -> None:
    """PREFIX.bin/.idx of DOCUMENTS one-token documents, written without a Python object per document."""
    write_index(f"{prefix}.idx", np.ones(documents, np.int32), np.uint16)
    Path(f"{prefix}.bin").write_bytes(bytes(2 * documents))


def test_inspect_samples_without_a_list_of_every_document(tmp_path):
    # the samples were drawn from a list of (file, document) tuples of every document: ~100 bytes a document,
    # gigabytes at 200M; now from the document count, mapped back to (file, document) by the files' counts
    for k in range(2):
        _tiny_docs_shard(tmp_path / f"0000{k}_00000", 500_000)
    datasets = [IndexedDataset(tmp_path / f"0000{k}_00000") for k in range(2)]
    tracemalloc.start()
    try:
        rows = _samples(datasets, None, 3, 200, 0, tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(rows) == 3 and all(row["ids"] == [0] for row in rows)
    assert peak < 10_000_000, f"{peak:,} bytes to sample 3 of 1,000,000 documents"


def test_inspect_samples_are_the_documents_the_seed_drew_before(tmp_path):
    # the same (file, document) picks as the per-document list gave, across files of several sizes and an empty one
    sizes = [3, 0, 1, 5, 2]
    names = [f"0000{k}_00000" for k in range(len(sizes))]
    for k, n in enumerate(sizes):
        write_indexed(tmp_path / names[k], [[k + 1, j + 1, 0] for j in range(n)], vocab_size=32)
    datasets = [IndexedDataset(tmp_path / name) for name in names]
    flat = [(names[k], i) for k, size in enumerate(sizes) for i in range(size)]

    def before(n: int, seed: int) -> list[tuple[str, int]]:
        chosen = np.random.default_rng(seed).choice(len(flat), size=min(n, len(flat)), replace=False)
        return [flat[j] for j in sorted(chosen)]

    for seed in range(20):
        for n in (1, 4, 11, 20):
            rows = _samples(datasets, None, n, 200, seed, tmp_path)
            assert [(row["file"], row["document"]) for row in rows] == before(n, seed)
            assert all(row["ids"][:2] == [int(row["file"][4]) + 1, row["document"] + 1] for row in rows)
    rows = inspect_shards(tmp_path, samples=4, seed=3)["samples"]
    assert [(row["file"], row["document"]) for row in rows] == before(4, 3)
