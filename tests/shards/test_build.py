"""`shards build` and `shards train-tokenizer`: tokens match the tokenizer exactly, manifests add up, reruns."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.executors import ExecutorConfig
from shards.build import build_shards
from shards.indexed import IndexedDataset
from shards.manifest import read_manifest, resolve_prefixes, sha256_file
from shards.tokenizer import iter_texts, load_tokenizer, train_tokenizer

TEXTS = [
    f"Problem {i}. Let $x^2 + {i}x = {i * i}$. Solve for x. The answer is \\boxed{{{i % 7}}}."
    for i in range(300)
] + ["A plain sentence about the weather, with no mathematics in it at all."] * 20


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return train_tokenizer(TEXTS, tmp_path_factory.mktemp("tok") / "bpe", vocab_size=400)


def _corpus(tmp_path):
    src = tmp_path / "corpus"
    src.mkdir()
    pq.write_table(pa.table({"id": [str(i) for i in range(150)], "text": TEXTS[:150]}), src / "a.parquet")
    pq.write_table(pa.table({"id": ["e1", "e2"], "text": ["", "   "]}), src / "empty.parquet")
    with open(src / "b.jsonl", "w") as f:
        for i, text in enumerate(TEXTS[150:]):
            f.write(json.dumps({"id": f"j{i}", "text": text}) + "\n")
        f.write("{not json\n")
    return src


def test_trained_tokenizer_loads_with_transformers(tokenizer_dir):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    assert hf.eos_token == "<|endoftext|>" and hf.bos_token and hf.pad_token
    assert hf.decode(hf("x = 12")["input_ids"], skip_special_tokens=True) == "x = 12"
    # digits are split one by one
    assert [hf.decode([t]) for t in hf("2024", add_special_tokens=False)["input_ids"]] == ["2", "0", "2", "4"]
    tok = load_tokenizer(tokenizer_dir)
    assert tok.eos_id == hf.eos_token_id and tok.vocab_size == len(hf)


def test_build_tokens_match_the_tokenizer(tmp_path, tokenizer_dir):
    out = tmp_path / "shards"
    summary = build_shards(
        [_corpus(tmp_path)], out, str(tokenizer_dir), ExecutorConfig(tasks=2), batch_size=16
    )
    # every row is counted: "" and whitespace-only text as empty_text, the line that is not JSON as bad_record
    assert summary["docs_in"] == 323 and summary["docs_out"] == 320 and "unaccounted" not in summary
    assert summary["dropped"] == {"empty_text": 2, "bad_record": 1}
    manifest = read_manifest(out)
    assert manifest["documents"] == 320 and manifest["dtype"] == "uint16"
    tok = load_tokenizer(tokenizer_dir)
    expected = {tuple(ids + [tok.eos_id]) for ids in tok.encode_batch(TEXTS)}
    seen, total = [], 0
    for entry in manifest["files"]:
        ds = IndexedDataset(out / entry["prefix"])
        assert len(ds) == entry["documents"] and ds.num_tokens == entry["tokens"]
        assert sha256_file(out / entry["bin"]["path"]) == entry["bin"]["sha256"]
        seen += [tuple(ds[i].tolist()) for i in range(len(ds))]
        total += ds.num_tokens
    assert set(seen) == expected and len(seen) == 320
    assert total == manifest["tokens"] == summary["tokens"]
    assert all(doc[-1] == tok.eos_id and tok.eos_id not in doc[:-1] for doc in seen)


def test_shards_cut_by_size_and_rerun_is_identical(tmp_path, tokenizer_dir):
    out = tmp_path / "shards"
    corpus = _corpus(tmp_path)
    build_shards(
        [corpus], out, str(tokenizer_dir), ExecutorConfig(tasks=1), batch_size=8, max_shard_bytes=2000
    )
    manifest = read_manifest(out)
    assert len(manifest["files"]) > 3
    assert all(f["bin"]["bytes"] < 2000 + 8 * 200 for f in manifest["files"])
    assert len(resolve_prefixes(out)) == len(manifest["files"])
    (out / "summary.json").unlink()
    build_shards(
        [corpus], out, str(tokenizer_dir), ExecutorConfig(tasks=1), batch_size=8, max_shard_bytes=2000
    )
    assert read_manifest(out) == manifest  # completed task skipped, same files and checksums
    fresh = tmp_path / "fresh"  # built again from scratch: byte-identical shards
    build_shards(
        [corpus], fresh, str(tokenizer_dir), ExecutorConfig(tasks=1), batch_size=8, max_shard_bytes=2000
    )
    assert [f["bin"]["sha256"] for f in read_manifest(fresh)["files"]] == [
        f["bin"]["sha256"] for f in manifest["files"]
    ]


def test_megatron_core_reads_built_shards(tmp_path, tokenizer_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mcore = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    out = tmp_path / "shards"
    build_shards([_corpus(tmp_path)], out, str(tokenizer_dir), ExecutorConfig(tasks=1))
    prefix = resolve_prefixes(out)[0]
    theirs, ours = mcore.IndexedDataset(prefix), IndexedDataset(prefix)
    assert len(theirs) == len(ours) == 320
    for i in (0, 1, 150, 319):
        assert np.array_equal(theirs[i], ours[i])


def test_real_math_text_round_trips(tmp_path, shared_data):
    """Real MATH solutions (LaTeX, unicode, newlines): shards decode back to exactly the source texts."""
    rows = [json.loads(line) for line in open(shared_data / "bench" / "math_hendrycks" / "train.jsonl")][:400]
    texts = [f"{r['problem']}\n\n{r['solution']}" for r in rows]
    tok_dir = train_tokenizer(texts, tmp_path / "tok", vocab_size=1024)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    with open(corpus / "math.jsonl", "w") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in texts)
    out = tmp_path / "shards"
    summary = build_shards([corpus], out, str(tok_dir), ExecutorConfig(tasks=1))
    assert summary["docs_out"] == 400
    tok = load_tokenizer(tok_dir)
    ds = IndexedDataset(resolve_prefixes(out)[0])
    decoded = [tok.backend.decode(ds[i][:-1].tolist(), skip_special_tokens=False) for i in range(len(ds))]
    assert sorted(decoded) == sorted(texts)


def test_a_folder_without_a_tokenizer_is_named(tmp_path):
    with pytest.raises(ValueError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(ValueError, match=f"tokenizer not found: {tmp_path}"):
        load_tokenizer(tmp_path)


def test_a_cached_hub_name_loads_without_the_network(tokenizer_dir, tmp_path):
    """A hub name in the local cache loads at once with HF_HUB_OFFLINE unset (transformers alone spends ~50 s on
    network retries first where there is no network, as on these machines), and a name in no cache says so."""
    import os
    import shutil
    import subprocess
    import sys
    import time

    snapshot = tmp_path / "hub" / "models--tiny--math-bpe" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    for f in tokenizer_dir.iterdir():
        shutil.copy(f, snapshot / f.name)
    (snapshot / "config.json").write_text(
        '{"model_type": "llama"}'
    )  # AutoTokenizer reads the model config too
    (tmp_path / "hub" / "models--tiny--math-bpe" / "refs").mkdir()
    (tmp_path / "hub" / "models--tiny--math-bpe" / "refs" / "main").write_text("abc123")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["HF_HUB_CACHE"] = str(tmp_path / "hub")
    code = "from shards.tokenizer import load_tokenizer; print(load_tokenizer('tiny/math-bpe').vocab_size)"
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) == load_tokenizer(tokenizer_dir).vocab_size
    assert time.monotonic() - start < 30
    assert "fetching it from the hub" not in done.stderr

    env["HF_HUB_OFFLINE"] = "1"
    code = "from shards.tokenizer import load_tokenizer; load_tokenizer('tiny/not-cached')"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "tokenizer not found: tiny/not-cached" in done.stderr


def test_train_tokenizer_refuses_no_text_and_a_tiny_vocabulary(tmp_path):
    notext = tmp_path / "notext.parquet"
    pq.write_table(pa.table({"id": ["a"], "body": ["text in another column"]}), notext)
    with pytest.raises(ValueError, match="no `text` column"):
        train_tokenizer(iter_texts([notext]), tmp_path / "t1")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="no text to train"):
        train_tokenizer(iter_texts([tmp_path / "empty.jsonl"]), tmp_path / "t2")
    with pytest.raises(ValueError, match="at least 259"):
        train_tokenizer(TEXTS, tmp_path / "t3", vocab_size=10)


def test_a_bad_tokenizer_fails_before_any_task_and_manifests_hold_absolute_paths(tmp_path, tokenizer_dir):
    import os
    import time

    src = _corpus(tmp_path)
    start = time.time()
    with pytest.raises(ValueError, match="no tokenizer.json"):
        build_shards([src], tmp_path / "bad", str(tmp_path), ExecutorConfig(tasks=2))
    assert time.time() - start < 5 and not (tmp_path / "bad" / "logs").exists()
    cwd = os.getcwd()
    os.chdir(tokenizer_dir.parent)
    try:
        build_shards([src], tmp_path / "ok", tokenizer_dir.name, ExecutorConfig(tasks=1))
    finally:
        os.chdir(cwd)
    assert read_manifest(tmp_path / "ok")["tokenizer"] == str(tokenizer_dir.resolve())


def test_files_of_both_formats_are_dealt_to_every_task(tmp_path, tokenizer_dir):
    """One Parquet and one JSONL file over 2 tasks: one file each (one reader per format used to give task 0 the
    first file of each format, and task 1 nothing)."""
    src = tmp_path / "corpus"
    src.mkdir()
    pq.write_table(pa.table({"id": ["p"], "text": [TEXTS[0]]}), src / "a.parquet")
    (src / "b.jsonl").write_text(json.dumps({"id": "j", "text": TEXTS[1]}) + "\n")
    summary = build_shards([src], tmp_path / "out", str(tokenizer_dir), ExecutorConfig(tasks=2, workers=1))
    assert summary["docs_out"] == 2
    ranks = sorted(f["prefix"].split("_")[0] for f in read_manifest(tmp_path / "out")["files"])
    assert ranks == ["00000", "00001"]


def test_a_rerun_rebuilds_the_shards_of_a_finished_task_that_are_gone(tmp_path, tokenizer_dir):
    """A finished job whose .bin was deleted (or truncated) used to rerun as a no-op, leaving a manifest that lists
    a missing file: only the task that wrote it runs again, and gives the same bytes."""
    from shards.validate import validate_path

    out, corpus = tmp_path / "shards", tmp_path / "corpus"
    corpus.mkdir()
    for name, texts in (("a", TEXTS[:150]), ("b", TEXTS[150:])):
        pq.write_table(
            pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), corpus / f"{name}.parquet"
        )

    def build() -> None:
        build_shards(
            [corpus],
            out,
            str(tokenizer_dir),
            ExecutorConfig(tasks=2, workers=1),
            batch_size=16,
            max_shard_bytes=4000,
        )

    build()
    manifest = read_manifest(out)
    shards = [out / f"{f['prefix']}.bin" for f in manifest["files"]]
    first = next(
        p for p in shards if p.name == "00000_00001.bin"
    )  # a task cut its output into several shards
    other = next(p for p in shards if p.name.startswith("00001_"))
    kept = other.stat().st_mtime_ns
    first.unlink()
    build()
    assert read_manifest(out) == manifest and validate_path(out)["ok"]
    assert other.stat().st_mtime_ns == kept  # the other task was not run again
    first.with_suffix(".idx").write_bytes(first.with_suffix(".idx").read_bytes()[:-2])
    build()
    assert read_manifest(out) == manifest and validate_path(out)["ok"]
