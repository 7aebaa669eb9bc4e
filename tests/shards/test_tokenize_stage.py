"""The `shards` recipe stage: trains a tokenizer, shards the corpus and every rewriter branch, sums them up."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from curate.summary import is_balanced
from pipelines.executors import ExecutorConfig
from pipelines.stages import StageContext, parse_stage_config
from pipelines.tokenize import Config, run_stage
from shards.indexed import IndexedDataset
from shards.manifest import resolve_prefixes
from shards.mixture import BlendedDocuments, MixtureConfig, MixtureSource
from shards.validate import validate_path


def _parquet(folder, texts):
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), folder / "p0.parquet"
    )


def test_stage_shards_corpus_and_branches(tmp_path):
    run = tmp_path / "run"
    corpus = [f"Theorem {i}: for all $n > {i}$, $n^2 > {i}n$. Proof by induction on n." for i in range(120)]
    _parquet(run / "decont" / "data", corpus + [" "])
    _parquet(
        run / "branches" / "qa" / "data", [f"Q: what is {i}+{i}? A: \\boxed{{{2 * i}}}" for i in range(40)]
    )
    (run / "branches" / "longcot" / "data").mkdir(parents=True)  # a branch without output is skipped
    _parquet(run / "branches" / "score" / "data", corpus[:5])  # classifier labels, not training text
    _parquet(run / "branches" / "refine" / "data", [])  # every rewrite rejected: an empty source
    config = Config(vocab_size=300)
    ctx = StageContext(run_dir=run, out_dir=run / "shards", inputs=[], executor=ExecutorConfig(tasks=1))
    summary = run_stage(config, ctx)
    assert set(summary["sources"]) == {"corpus", "qa", "refine"}
    assert summary["sources"]["refine"]["docs_out"] == 0
    assert (
        summary["docs_in"] == 161 and summary["docs_out"] == 160 and summary["dropped"] == {"empty_text": 1}
    )
    assert is_balanced(summary)
    assert json.loads((run / "shards" / "summary.json").read_text()) == summary
    manifest = json.loads((run / "shards" / "manifest.json").read_text())
    assert manifest["tokenizer"] == str(run / "shards" / "tokenizer") and manifest["dtype"] == "uint16"
    assert manifest["sources"]["qa"]["documents"] == 40
    for name in ("corpus", "qa", "refine"):
        assert validate_path(run / "shards" / name)["ok"]
    ds = IndexedDataset(resolve_prefixes(run / "shards" / "qa")[0])
    assert summary["tokens_out"] == manifest["sources"]["corpus"]["tokens"] + ds.num_tokens
    assert all(ds[i][-1] == manifest["eos_id"] for i in range(len(ds)))
    # the trainer's view: a mixture over the stage's output folders
    mix = MixtureConfig(
        sources=[
            MixtureSource(name="corpus", paths=[str(run / "shards" / "corpus")], weight=0.7),
            MixtureSource(name="qa", paths=[str(run / "shards" / "qa")], weight=0.3),
            MixtureSource(name="refine", paths=[str(run / "shards" / "refine")], weight=0.3),
        ]
    )
    blend = BlendedDocuments(mix, total_tokens=5000)
    assert {blend.source_of(i) for i in range(len(blend))} == {"corpus", "qa"}


def test_stage_config_validates():
    assert parse_stage_config("shards", {"tokenizer": "train", "vocab_size": 2048}).vocab_size == 2048
    with pytest.raises(ValidationError, match="vocab_sise"):
        Config.model_validate({"vocab_sise": 10})


@pytest.mark.parametrize("size", [float("inf"), float("nan"), 0, -1])
def test_stage_refuses_a_shard_size_that_is_not_a_positive_number(size):
    # inf passed the recipe check and died later in int(inf * 2**20) with an OverflowError traceback.
    with pytest.raises(ValidationError, match="max_shard_mb"):
        Config.model_validate({"max_shard_mb": size})


@pytest.mark.parametrize("name", ["", " ", ".", "..", "a/b", "../x"])
def test_stage_refuses_a_corpus_name_that_is_not_a_folder_name(name):
    # the name is RUN/shards/<name>: '' or '.' put the corpus shards among the stage's own files, '..' outside
    with pytest.raises(ValidationError, match="corpus_name"):
        Config.model_validate({"corpus_name": name})


def test_a_branch_named_like_the_corpus_is_refused_not_swapped_for_it(tmp_path):
    run = tmp_path / "run"
    _parquet(run / "decont" / "data", [f"Theorem {i}: $n^2 > {i}n$ for large n." for i in range(20)])
    _parquet(run / "branches" / "qa" / "data", [f"Q: {i}+{i}? A: \\\\boxed{{{2 * i}}}" for i in range(20)])
    ctx = StageContext(run_dir=run, out_dir=run / "shards", inputs=[], executor=ExecutorConfig(tasks=1))
    with pytest.raises(ValueError, match="corpus's source name 'qa'"):
        run_stage(Config(vocab_size=300, corpus_name="qa"), ctx)


def test_without_a_decont_stage_the_corpus_after_a_rewrite_is_dedups_data(tmp_path):
    """A recipe web -> dedup -> rewrite -> shards: the previous document stage's data/ is RUN/branches/data, which
    no stage writes, and the stage failed with 'no such corpus file or folder'."""
    from pipelines.tokenize import find_sources

    run = tmp_path / "run"
    for folder in ("web/data", "dedup/data", "branches/qa/data"):
        (run / folder).mkdir(parents=True)
    pq.write_table(pa.table({"id": ["q"], "text": ["a question"]}), run / "branches/qa/data/00000.parquet")
    previous = {"web": run / "web", "dedup": run / "dedup", "rewrite": run / "branches"}
    config = parse_stage_config("shards", {})
    found = find_sources(config, [str(run / "branches" / "data")], run, previous)
    assert found["corpus"] == [str(run / "dedup" / "data")]
    assert found["qa"] == [str(run / "branches" / "qa" / "data")]
    # with no dedup stage, web's; with a decont stage, decont's (as before)
    assert find_sources(config, [str(run / "branches/data")], run, {"web": run / "web"})["corpus"] == [
        str(run / "web" / "data")
    ]
    (run / "decont/data").mkdir(parents=True)
    assert find_sources(config, [str(run / "branches/data")], run, previous)["corpus"] == [
        str(run / "decont/data")
    ]
