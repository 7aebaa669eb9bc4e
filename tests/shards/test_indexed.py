"""The Megatron indexed-dataset reader and writer: exact bytes, round trips both ways with megatron-core."""

from __future__ import annotations

import struct
import warnings

import numpy as np
import pytest

from shards.indexed import MAGIC, IndexedDataset, IndexFormatError, token_dtype, write_indexed

# 16 tokens in 4 documents (EOS = 0 closes each), OLMo-core style: exact values asserted below.
DOCS = [[5, 6, 7, 0], [8, 9, 0], [10, 11, 12, 13, 14, 0], [15, 16, 0]]


def _megatron():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pytest.importorskip("megatron.core.datasets.indexed_dataset")


def test_write_16_tokens_exact_bytes(tmp_path):
    info = write_indexed(tmp_path / "toy", DOCS, vocab_size=32)
    assert info["documents"] == 4 and info["tokens"] == 16 and info["dtype"] == "uint16"
    tokens = np.fromfile(tmp_path / "toy.bin", dtype=np.uint16)
    assert tokens.tolist() == [5, 6, 7, 0, 8, 9, 0, 10, 11, 12, 13, 14, 0, 15, 16, 0]
    raw = (tmp_path / "toy.idx").read_bytes()
    assert raw[:9] == MAGIC
    assert struct.unpack("<QBQQ", raw[9:34]) == (1, 8, 4, 5)  # version, uint16 code, sequences, documents+1
    assert np.frombuffer(raw, np.int32, 4, 34).tolist() == [4, 3, 6, 3]
    assert np.frombuffer(raw, np.int64, 4, 50).tolist() == [0, 8, 14, 26]  # byte pointers
    assert np.frombuffer(raw, np.int64, 5, 82).tolist() == [0, 1, 2, 3, 4]
    assert len(raw) == 34 + 4 * 4 + 8 * 4 + 8 * 5


def test_reader_random_access(tmp_path):
    write_indexed(tmp_path / "toy", DOCS, vocab_size=32)
    ds = IndexedDataset(tmp_path / "toy")
    assert len(ds) == 4 and ds.num_tokens == 16 and ds.dtype == np.uint16
    assert ds.sizes.tolist() == [4, 3, 6, 3]
    assert ds[2].tolist() == [10, 11, 12, 13, 14, 0]
    assert ds[-1].tolist() == [15, 16, 0]
    assert ds.get(2, offset=1, length=3).tolist() == [11, 12, 13]
    with pytest.raises(IndexError):
        ds[4]


def test_dtype_follows_vocab_size(tmp_path):
    assert token_dtype(50_000) == np.uint16 and token_dtype(65_500) == np.int32
    info = write_indexed(tmp_path / "big", [[100_000, 3, 1]], vocab_size=128_256)
    assert info["dtype"] == "int32"
    assert IndexedDataset(tmp_path / "big")[0].tolist() == [100_000, 3, 1]
    with pytest.raises(ValueError, match="out of range"):
        write_indexed(tmp_path / "bad", [[40]], vocab_size=32)


def test_written_here_read_by_megatron_core(tmp_path):
    mcore = _megatron()
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 70_000, rng.integers(1, 50)).tolist() + [1] for _ in range(200)]
    write_indexed(tmp_path / "rnd", docs, vocab_size=70_000)
    theirs = mcore.IndexedDataset(str(tmp_path / "rnd"))
    assert len(theirs) == 200 and theirs.index.dtype == np.int32
    for i in (0, 17, 199):
        assert theirs[i].tolist() == docs[i]
    assert theirs.get(5, offset=1, length=2).tolist() == docs[5][1:3]


def test_written_by_megatron_core_read_here(tmp_path):
    mcore = _megatron()
    import torch

    prefix = str(tmp_path / "mc")
    builder = mcore.IndexedDatasetBuilder(prefix + ".bin", dtype=np.uint16)
    for doc in DOCS:
        builder.add_item(torch.tensor(doc))
        builder.end_document()
    # a document made of two sequences (Megatron's sentence-split preprocessing)
    builder.add_item(torch.tensor([20, 21]))
    builder.add_item(torch.tensor([22, 0]))
    builder.end_document()
    builder.finalize(prefix + ".idx")
    ds = IndexedDataset(prefix)
    assert len(ds) == 5
    assert [ds[i].tolist() for i in range(4)] == DOCS
    assert ds[4].tolist() == [20, 21, 22, 0]


def test_truncated_files_fail_naming_the_file(tmp_path):
    write_indexed(tmp_path / "toy", DOCS, vocab_size=32)
    bin_path = tmp_path / "toy.bin"
    bin_path.write_bytes(bin_path.read_bytes()[:-4])
    with pytest.raises(IndexFormatError, match="toy.bin"):
        IndexedDataset(tmp_path / "toy")
    write_indexed(tmp_path / "toy", DOCS, vocab_size=32)
    idx_path = tmp_path / "toy.idx"
    idx_path.write_bytes(idx_path.read_bytes()[:60])
    with pytest.raises(IndexFormatError, match="toy.idx"):
        IndexedDataset(tmp_path / "toy")


def test_pickles_by_path_not_by_tokens(tmp_path):
    import pickle

    write_indexed(tmp_path / "toy", DOCS * 1000, vocab_size=32)
    ds = IndexedDataset(tmp_path / "toy")
    blob = pickle.dumps(ds)
    assert len(blob) < 1000  # the path, not 32 KB of tokens
    again = pickle.loads(blob)
    assert len(again) == 4000 and again[2].tolist() == DOCS[2]
