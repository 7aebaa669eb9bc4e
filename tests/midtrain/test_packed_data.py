"""Packing documents into seq_len windows: exact tokens and position ids, rank splits, and the saved position."""

from __future__ import annotations

import numpy as np

from midtrain.data import PackedSequences

# three documents, each ending in EOS (0): 15 tokens in all
DOCS = [np.array([1, 2, 3, 0]), np.array([4, 5, 0]), np.array([6, 7, 8, 9, 10, 11, 12, 0])]


def test_windows_exact_tokens_and_positions():
    packer = PackedSequences(DOCS, seq_len=5)
    x, y, pos = packer.next()
    # EOS -> first token of the next document is no target (-100): that position cannot see the next document
    assert x.tolist() == [1, 2, 3, 0, 4] and y.tolist() == [2, 3, 0, -100, 5]
    assert pos.tolist() == [0, 1, 2, 3, 0]  # reset where document 2 starts
    x, y, pos = packer.next()
    assert x.tolist() == [5, 0, 6, 7, 8] and y.tolist() == [0, -100, 7, 8, 9]
    assert pos.tolist() == [0, 1, 0, 1, 2]  # a document continuing from the last window restarts at 0
    x, y, pos = packer.next()
    assert x.tolist() == [9, 10, 11, 12, 0] and y.tolist() == [10, 11, 12, 0, -100]  # wraps to document 0
    assert pos.tolist() == [0, 1, 2, 3, 4]


def test_positions_are_plain_without_intra_document():
    _, y, pos = PackedSequences(DOCS, seq_len=5, intra_document=False).next()
    assert pos.tolist() == [0, 1, 2, 3, 4]
    assert y.tolist() == [2, 3, 0, 4, 5]  # plain causal: every next token is a target


def test_state_restores_the_stream_exactly():
    a = PackedSequences(DOCS, seq_len=3)
    for _ in range(4):
        a.next()
    b = PackedSequences(DOCS, seq_len=3)
    b.load_state_dict(a.state_dict())
    for _ in range(5):
        assert all(np.array_equal(u, v) for u, v in zip(a.next(), b.next(), strict=True))


def test_ranks_split_the_same_global_batch():
    one = PackedSequences(DOCS, seq_len=3)
    full = [one.rank_batch(2, 0, 1)[0] for _ in range(2)]  # 1 rank: 2 micro-batches of 2
    parts = []
    for rank in (0, 1):
        packer = PackedSequences(DOCS, seq_len=3)
        parts.append(packer.rank_batch(2, rank, 2)[0])  # 2 ranks: one micro-batch of 2 each
    assert np.array_equal(np.concatenate(full), np.concatenate(parts))
