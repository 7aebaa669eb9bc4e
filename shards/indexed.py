"""Megatron indexed datasets (PREFIX.bin + PREFIX.idx): a memory-mapped reader and a writer.

The layout is exactly megatron-core's `indexed_dataset.py` (version 1), so Megatron-LM, NeMo and datatrove read
what is written here and the other way round:

    .idx  magic b"MMIDIDX\\x00\\x00" | u64 version (1) | u8 dtype code | u64 sequence count S
          | u64 document count D (= documents + 1) | i32 sequence_lengths[S] | i64 sequence_pointers[S] (bytes)
          | i64 document_indices[D] (sequence index where each document starts, then S)
    .bin  the tokens of every sequence, back to back, in the index's dtype

mathmix writes one sequence per document (its tokens with the trailing EOS). The reader is document-based (a
document may span several sequences in files written by Megatron's sentence-split preprocessing), since documents
are what the trainer packs.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
HEADER_BYTES = len(MAGIC) + 8 + 1 + 8 + 8  # 34
# megatron-core DType codes
DTYPE_CODES: dict[int, type[np.number]] = {
    1: np.uint8,
    2: np.int8,
    3: np.int16,
    4: np.int32,
    5: np.int64,
    6: np.float64,
    7: np.float32,
    8: np.uint16,
}
CODE_OF_DTYPE = {np.dtype(v): k for k, v in DTYPE_CODES.items()}
# megatron-core's DType.optimal_dtype threshold: uint16 below it, int32 at or above it.
UINT16_VOCAB_LIMIT = 65500


class IndexFormatError(ValueError):
    """A .bin/.idx pair that is not a valid Megatron indexed dataset; the message names the file."""


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every token id fits (megatron-core's rule), else int32."""
    return np.dtype(np.uint16 if vocab_size < UINT16_VOCAB_LIMIT else np.int32)


def prefix_of(path: str | Path) -> str:
    """PREFIX for PREFIX, PREFIX.bin or PREFIX.idx."""
    text = str(path)
    return text[:-4] if text.endswith((".bin", ".idx")) else text


def read_index(idx_path: str | Path) -> dict[str, Any]:
    """Parse a .idx file into {dtype, sequence_lengths, sequence_pointers, document_indices} (memory-mapped).

    Raises:
        IndexFormatError: bad magic, version, dtype code, or a file shorter than its header says.
    """
    idx_path = Path(idx_path)
    size = idx_path.stat().st_size
    with open(idx_path, "rb") as f:
        header = f.read(HEADER_BYTES)
    if len(header) < HEADER_BYTES:
        raise IndexFormatError(f"{idx_path}: truncated index ({size} bytes, header needs {HEADER_BYTES})")
    if header[: len(MAGIC)] != MAGIC:
        raise IndexFormatError(f"{idx_path}: bad magic {header[: len(MAGIC)]!r}, expected {MAGIC!r}")
    version, code, n_seq, n_doc = struct.unpack("<QBQQ", header[len(MAGIC) :])
    if version != VERSION:
        raise IndexFormatError(f"{idx_path}: unsupported version {version}")
    if code not in DTYPE_CODES:
        raise IndexFormatError(f"{idx_path}: unknown dtype code {code}")
    expected = HEADER_BYTES + n_seq * (4 + 8) + n_doc * 8
    if size < expected:
        raise IndexFormatError(f"{idx_path}: truncated index ({size} bytes, its header needs {expected})")
    if n_doc < 1:
        raise IndexFormatError(f"{idx_path}: document index is empty (needs at least the leading 0)")
    buf = np.memmap(idx_path, mode="r", dtype=np.uint8) if size else np.empty(0, np.uint8)
    lengths = np.frombuffer(buf, dtype=np.int32, count=n_seq, offset=HEADER_BYTES)
    pointers = np.frombuffer(buf, dtype=np.int64, count=n_seq, offset=HEADER_BYTES + 4 * n_seq)
    doc_idx = np.frombuffer(buf, dtype=np.int64, count=n_doc, offset=HEADER_BYTES + 12 * n_seq)
    return {
        "dtype": np.dtype(DTYPE_CODES[code]),
        "sequence_lengths": lengths,
        "sequence_pointers": pointers,
        "document_indices": doc_idx,
        "index_bytes": size,
        "expected_index_bytes": expected,
    }


def index_counts(index: dict[str, Any]) -> tuple[int, int]:
    """(documents, tokens) a parsed index (`read_index`) holds: its document index less the leading 0, and its
    int32 sequence lengths summed as int64."""
    return len(index["document_indices"]) - 1, int(index["sequence_lengths"].sum(dtype=np.int64))


_CHECK_BLOCK = 1 << 20


def _one_sequence_per_document(document_indices: np.ndarray, n_seq: int) -> bool:
    """Whether the document index is 0, 1, ..., n_seq (checked blockwise, without an index-sized temporary)."""
    if len(document_indices) != n_seq + 1:
        return False
    for lo in range(0, n_seq + 1, _CHECK_BLOCK):
        block = document_indices[lo : lo + _CHECK_BLOCK]
        if not np.array_equal(block, np.arange(lo, lo + len(block))):
            return False
    return True


class IndexedDataset:
    """Memory-mapped reader of PREFIX.bin/PREFIX.idx: `len()` documents, `[i]` -> tokens of document i.

    Args:
        path_prefix: PREFIX (a trailing .bin or .idx is accepted too).

    Attributes:
        sizes: tokens per document (including the trailing EOS mathmix writes): the index's int32 lengths,
            memory-mapped, when every document is one sequence (the usual case), else int64.
        dtype: the token dtype (uint16 or int32 for files written here).
    """

    def __init__(self, path_prefix: str | Path) -> None:
        self.path_prefix = prefix_of(path_prefix)
        self.idx_path = Path(self.path_prefix + ".idx")
        self.bin_path = Path(self.path_prefix + ".bin")
        for path in (self.idx_path, self.bin_path):
            if not path.is_file():
                raise FileNotFoundError(f"{path}: not found")
        index = read_index(self.idx_path)
        self.dtype: np.dtype = index["dtype"]
        self.sequence_lengths: np.ndarray = index["sequence_lengths"]
        self.sequence_pointers: np.ndarray = index["sequence_pointers"]
        self.document_indices: np.ndarray = index["document_indices"]
        bin_bytes = self.bin_path.stat().st_size
        if bin_bytes % self.dtype.itemsize:
            raise IndexFormatError(
                f"{self.bin_path}: {bin_bytes} bytes is not a whole number of {self.dtype}"
            )
        self._tokens = (
            np.memmap(self.bin_path, mode="r", dtype=self.dtype) if bin_bytes else np.empty(0, self.dtype)
        )
        n_seq = len(self.sequence_lengths)
        if _one_sequence_per_document(self.document_indices, n_seq):
            # The usual layout (ours, and megatron's without sentence splitting): sizes and offsets are read
            # from the memory-mapped index, so a rank holds no per-document arrays of its own.
            self.sizes: np.ndarray = self.sequence_lengths
            self._offsets: np.ndarray = self.sequence_pointers
            self._offset_unit = self.dtype.itemsize  # byte pointers -> token offsets
            end = 0
            for lo in range(0, n_seq, _CHECK_BLOCK):  # blockwise: no index-sized temporaries
                block = self.sequence_pointers[lo : lo + _CHECK_BLOCK] // self.dtype.itemsize
                end = max(end, int((block + self.sequence_lengths[lo : lo + _CHECK_BLOCK]).max()))
        else:
            # Documents -> token offsets; sequences are contiguous within a document (megatron writes them so).
            seq_cum = np.concatenate([[0], np.cumsum(self.sequence_lengths, dtype=np.int64)])
            first, last = self.document_indices[:-1], self.document_indices[1:]
            self.sizes = seq_cum[last] - seq_cum[first]
            has_seq = first < n_seq
            safe_first = np.minimum(first, max(n_seq - 1, 0))
            starts = (
                self.sequence_pointers[safe_first] // self.dtype.itemsize if n_seq else np.zeros_like(first)
            )
            self._offsets = np.where(has_seq, starts, seq_cum[-1]).astype(np.int64)
            self._offset_unit = 1
            end = int((self._offsets + self.sizes).max()) if len(self.sizes) else 0
        if end > len(self._tokens):
            raise IndexFormatError(
                f"{self.bin_path}: truncated data ({len(self._tokens)} tokens, the index needs {end})"
            )

    def _offset(self, i: int) -> int:
        """Token offset of document i in the .bin file."""
        return int(self._offsets[i]) // self._offset_unit

    def __getstate__(self) -> dict[str, Any]:
        # DataLoader workers get the path and reopen the memmaps, not a copy of the tokens.
        return {"path_prefix": self.path_prefix}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path_prefix"])  # type: ignore[misc]

    def __len__(self) -> int:
        return len(self.sizes)

    def __getitem__(self, i: int) -> np.ndarray:
        n = len(self.sizes)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"document {i} out of range for {n} documents in {self.path_prefix}")
        start = self._offset(i)
        return np.asarray(self._tokens[start : start + int(self.sizes[i])])

    def get(self, i: int, offset: int = 0, length: int | None = None) -> np.ndarray:
        """Tokens `offset:offset+length` of document i (a view, no copy)."""
        doc = self[i]
        return doc[offset:] if length is None else doc[offset : offset + length]

    @property
    def num_tokens(self) -> int:
        return int(self.sizes.sum())

    def __repr__(self) -> str:
        return f"IndexedDataset({self.path_prefix!r}, documents={len(self)}, dtype={self.dtype})"


class IndexedWriter:
    """Streams documents into PREFIX.bin and writes PREFIX.idx on `close()` (one sequence per document).

    Args:
        path_prefix: output PREFIX; parent folders are created.
        dtype: token dtype (see `token_dtype`).
        vocab_size: when given, every token id is checked to be below it (a wrong tokenizer/dtype pair
            would otherwise wrap around silently in uint16).
    """

    def __init__(
        self, path_prefix: str | Path, dtype: np.dtype | type, vocab_size: int | None = None
    ) -> None:
        self.path_prefix = prefix_of(path_prefix)
        self.dtype = np.dtype(dtype)
        if self.dtype not in CODE_OF_DTYPE:
            raise ValueError(f"dtype {self.dtype} has no megatron-core code")
        self.vocab_size = vocab_size
        Path(self.path_prefix).parent.mkdir(parents=True, exist_ok=True)
        self._bin = open(self.path_prefix + ".bin", "wb", buffering=1 << 22)
        self._lengths: list[np.ndarray] = []
        self.num_tokens = 0
        self.num_documents = 0

    @property
    def num_bytes(self) -> int:
        """Bytes of token data written so far."""
        return self.num_tokens * self.dtype.itemsize

    def add_documents(self, documents: Sequence[Sequence[int] | np.ndarray]) -> None:
        """Append a batch of documents (each a list/array of token ids) in one write."""
        if not documents:
            return
        lengths = np.fromiter((len(d) for d in documents), dtype=np.int64, count=len(documents))
        flat = np.concatenate([np.asarray(d, dtype=np.int64) for d in documents]) if lengths.sum() else None
        if flat is not None:
            if self.vocab_size is not None and (flat.max() >= self.vocab_size or flat.min() < 0):
                raise ValueError(f"token id out of range [0, {self.vocab_size}) in {self.path_prefix}")
            self._bin.write(flat.astype(self.dtype).tobytes())
        self._lengths.append(lengths.astype(np.int32))
        self.num_tokens += int(lengths.sum())
        self.num_documents += len(documents)

    def add_document(self, tokens: Sequence[int] | np.ndarray) -> None:
        self.add_documents([tokens])

    def close(self) -> dict[str, Any]:
        """Finish the .bin, write the .idx; return {prefix, documents, tokens, dtype}."""
        self._bin.close()
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int32)
        write_index(self.path_prefix + ".idx", lengths, self.dtype)
        return {
            "prefix": self.path_prefix,
            "documents": self.num_documents,
            "tokens": self.num_tokens,
            "dtype": str(self.dtype),
        }

    def __enter__(self) -> IndexedWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._bin.closed:
            self.close()


def write_index(idx_path: str | Path, sequence_lengths: np.ndarray, dtype: np.dtype) -> None:
    """Write a .idx for one-sequence-per-document data with the given sequence lengths."""
    dtype = np.dtype(dtype)
    lengths = np.asarray(sequence_lengths, dtype=np.int32)
    n = len(lengths)
    pointers = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(lengths[:-1], dtype=np.int64, out=pointers[1:])
        pointers *= dtype.itemsize
    doc_idx = np.arange(n + 1, dtype=np.int64)
    with open(idx_path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<QBQQ", VERSION, CODE_OF_DTYPE[dtype], n, n + 1))
        f.write(lengths.tobytes())
        f.write(pointers.tobytes())
        f.write(doc_idx.tobytes())


def write_indexed(
    path_prefix: str | Path, documents: Iterable[Sequence[int]], vocab_size: int, batch: int = 4096
) -> dict[str, Any]:
    """Write `documents` (token id lists, EOS already appended) as PREFIX.bin/PREFIX.idx.

    The dtype is uint16 when `vocab_size` fits, else int32. Returns {prefix, documents, tokens, dtype}.
    """
    writer = IndexedWriter(path_prefix, token_dtype(vocab_size), vocab_size=vocab_size)
    pending: list[Sequence[int]] = []
    for doc in documents:
        pending.append(doc)
        if len(pending) >= batch:
            writer.add_documents(pending)
            pending = []
    writer.add_documents(pending)
    return writer.close()
