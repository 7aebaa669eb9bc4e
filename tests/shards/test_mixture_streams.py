"""Source streams and blends that must hold a minimum: what a decay branch and a whole stage need of a mixture."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from shards.indexed import write_indexed
from shards.mixture import BlendedDocuments, MixtureConfig, MixtureSource, SourceStream, select_documents


def test_a_stream_read_in_two_parts_is_the_stream_read_at_once():
    sizes = np.array([10, 20, 30, 40, 50])  # 150 tokens: the second part crosses into the next epoch
    whole = select_documents(sizes, 400, np.random.default_rng(3), meet_target=True)
    first = select_documents(sizes, 100, np.random.default_rng(3), meet_target=True)
    second = select_documents(sizes, 160, np.random.default_rng(3), skip=len(first), meet_target=True)
    assert whole[: len(first) + len(second)].tolist() == first.tolist() + second.tolist()
    assert sorted(whole[:5].tolist()) == [0, 1, 2, 3, 4]  # whole seeded epochs still


def test_meet_target_keeps_the_last_document_and_no_more():
    sizes = np.array([7, 3, 50, 11, 9, 20])
    for target in range(1, 200, 7):
        docs = select_documents(sizes, target, np.random.default_rng(0), meet_target=True)
        assert int(sizes[docs].sum()) >= target > int(sizes[docs[:-1]].sum())
    # without it the closer one wins, as before (the default: `shards mix`, stages begun before)
    docs = select_documents(np.array([10, 100]), 12, np.random.default_rng(0))
    assert int(np.array([10, 100])[docs].sum()) in (10, 110)


def _sources(tmp_path, n: int) -> list[MixtureSource]:
    sources = []
    for k in range(n):
        rng = np.random.default_rng(k)
        write_indexed(
            tmp_path / f"s{k}", [[k + 1] * int(m) + [0] for m in rng.integers(4, 90, 400)], vocab_size=8
        )
        sources.append(MixtureSource(name=f"s{k}", paths=[str(tmp_path / f"s{k}")], weight=1.0))
    return sources


def test_min_tokens_is_met_when_the_weights_round_down(tmp_path):
    config = MixtureConfig(sources=_sources(tmp_path, 3))  # 1/3 each of 30,001: 10,000 x 3
    closest = BlendedDocuments(config, total_tokens=30_001)
    at_least = BlendedDocuments(config, total_tokens=30_001, min_tokens=30_001)
    assert at_least.num_tokens >= 30_001
    assert sum(at_least.targets.values()) == 30_001 and sum(closest.targets.values()) == 30_000
    for row in at_least.report()["sources"]:
        assert abs(row["share"] - 1 / 3) < 0.005  # within a document (<= 90 tokens) of 10,000


def test_a_moved_stream_reads_on_and_has_its_own_index(tmp_path):
    config = MixtureConfig(sources=_sources(tmp_path, 1))
    start = BlendedDocuments(config, total_tokens=4000, min_tokens=4000)
    read = start.streams_after(10, 5)  # began 11 documents
    assert read == {"s0": SourceStream(config.seed, "s0", 11)}
    after = BlendedDocuments(config, total_tokens=2000, min_tokens=2000, streams=read)
    longer = BlendedDocuments(config, total_tokens=8000, min_tokens=8000)
    assert np.asarray(after._doc_ids).tolist() == np.asarray(longer._doc_ids[11 : 11 + len(after)]).tolist()
    assert after.cache_key() != BlendedDocuments(config, total_tokens=2000, min_tokens=2000).cache_key()
    # the index a stage begun before streams and min_tokens existed saved keeps its name (it resumes on it)
    plain = BlendedDocuments(config, total_tokens=2000)
    digest = hashlib.sha256(
        json.dumps([config.model_dump(mode="json"), plain.targets], sort_keys=True).encode()
    )
    digest.update(np.ascontiguousarray(plain.sources[0].sizes).tobytes())
    assert plain.cache_key() == digest.hexdigest()[:20]
    assert start.streams_after(10**6, 0)["s0"].skip == len(start)  # wrapped: began them all


@pytest.mark.parametrize("skip", [0, 399, 400, 1234])
def test_skip_draws_the_epochs_before_it(skip):
    sizes = np.arange(1, 401)
    whole = select_documents(sizes, int(sizes.sum()) * 5, np.random.default_rng(1), meet_target=True)
    part = select_documents(sizes, 500, np.random.default_rng(1), skip=skip, meet_target=True)
    assert part.tolist() == whole[skip : skip + len(part)].tolist()
