"""Packed training sequences from a stream of documents (the blended mixture of `shards`).

Documents (each ending in EOS) are concatenated in blend order and cut into windows of seq_len + 1 tokens with
stride seq_len (inputs = window[:-1], targets = window[1:]). The stream position (document index, offset in it)
is the whole data state, so a checkpoint restores it exactly. Every rank walks the same stream and keeps only its
own rows: walking is cheap (memmapped slices are views), and any number of ranks sees the same global batches.
With intra-document attention, the target of a document's last token (its EOS) is the next document's first
token, which that position cannot see: it is set to IGNORE_INDEX (Megatron's `eod_mask_loss`), so no step trains
on a prediction across a document boundary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

IGNORE_INDEX = -100  # torch cross_entropy's default ignore_index


class Documents(Protocol):
    """What the packer needs: `shards.mixture.BlendedDocuments` or `shards.indexed.IndexedDataset`."""

    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> np.ndarray: ...


@dataclass
class StreamPosition:
    """Where the next window starts: document index (wraps around the blend) and token offset in it."""

    doc: int = 0
    offset: int = 0
    windows: int = 0  # windows produced so far


class PackedSequences:
    """Windows of seq_len + 1 tokens over the document stream, with per-document position ids."""

    def __init__(self, documents: Documents, seq_len: int, intra_document: bool = True) -> None:
        if len(documents) == 0:
            raise ValueError("the data mixture has no documents")
        self.documents = documents
        self.seq_len = seq_len
        self.intra_document = intra_document
        self.position = StreamPosition()

    def _take(self, need: int, advance: bool) -> tuple[list[np.ndarray], list[int]]:
        """`need` tokens from the current position: (pieces, window offsets where a document starts)."""
        doc, offset = self.position.doc, self.position.offset
        pieces, starts, have = [], [], 0
        while have < need:
            tokens = self.documents[doc % len(self.documents)]
            if offset == 0:
                starts.append(have)
            piece = tokens[offset : offset + need - have]
            pieces.append(piece)
            have += len(piece)
            offset += len(piece)
            if offset >= len(tokens):
                doc, offset = doc + 1, 0
        if advance:
            self.position.doc, self.position.offset = doc, offset
        return pieces, starts

    def skip(self) -> None:
        """Advance past one window without building it (rows another rank trains on)."""
        self._take(self.seq_len, advance=True)
        self.position.windows += 1

    def next(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The next window: (input ids [T], target ids [T], position ids [T]) as int64.

        Targets that start a document are IGNORE_INDEX when `intra_document` (see the module docstring).
        """
        pieces, starts = self._take(self.seq_len, advance=True)
        # the target of the last input token, shared with the next window
        last, next_starts = self._take(1, advance=False)
        self.position.windows += 1
        window = np.concatenate([np.asarray(p, dtype=np.int64) for p in pieces + last])
        targets = window[1:].copy()
        positions = np.arange(self.seq_len, dtype=np.int64)
        if self.intra_document:
            # a target that starts a document (window offset s -> target s - 1) is not trained on
            boundary = [s - 1 for s in starts if s > 0] + ([self.seq_len - 1] if next_starts else [])
            targets[boundary] = IGNORE_INDEX
            # position = distance from the latest document start in this window (0 at the window start)
            seg_start = np.zeros(self.seq_len, dtype=np.int64)
            seg_start[[s for s in starts if s < self.seq_len]] = [s for s in starts if s < self.seq_len]
            positions = positions - np.maximum.accumulate(seg_start)
        return window[:-1], targets, positions

    def rank_batch(self, micro_batch_size: int, rank: int, world_size: int):
        """One micro-batch for `rank`: rows [rank*B, (rank+1)*B) of the next B*world windows -> [B, T] arrays."""
        rows = []
        for r in range(world_size):
            for _ in range(micro_batch_size):
                if r == rank:
                    rows.append(self.next())
                else:
                    self.skip()
        return tuple(np.stack(col) for col in zip(*rows, strict=True))

    def state_dict(self) -> dict[str, Any]:
        return asdict(self.position)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.position = StreamPosition(**state)
