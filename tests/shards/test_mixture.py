"""Mixtures: token planning, deterministic blends, per-source shares within 0.1%, repetition reports."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from shards.indexed import write_indexed
from shards.mixture import BlendedDocuments, MixtureConfig, MixtureSource, plan_tokens, select_documents

REPO = Path(__file__).resolve().parents[2]


def _source(tmp_path: Path, name: str, n_docs: int, first_token: int, seed: int) -> str:
    """A shard whose documents are [first_token, ..., first_token, EOS=0] of random lengths 5..200."""
    rng = np.random.default_rng(seed)
    docs = [[first_token] * int(n) + [0] for n in rng.integers(4, 200, n_docs)]
    prefix = tmp_path / name / "00000"
    write_indexed(prefix, docs, vocab_size=16)
    return str(prefix)


@pytest.fixture
def three_sources(tmp_path):
    return {
        "web": _source(tmp_path, "web", 6000, 1, 0),
        "qa": _source(tmp_path, "qa", 1500, 2, 1),
        "longcot": _source(tmp_path, "longcot", 300, 3, 2),  # small: has to be repeated
    }


def _config(paths, seed=7, **weights):
    return MixtureConfig(
        seed=seed, sources=[MixtureSource(name=n, paths=[paths[n]], weight=w) for n, w in weights.items()]
    )


def test_sixteen_token_blend_is_exact(tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    write_indexed(a, [[1, 1, 0], [1, 0]], vocab_size=8)  # 5 tokens
    write_indexed(b, [[2, 2, 2, 0], [2, 2, 0], [2, 2, 2, 2, 0]], vocab_size=8)  # 12 tokens
    config = MixtureConfig(
        sources=[
            MixtureSource(name="a", paths=[str(a)], tokens=5),
            MixtureSource(name="b", paths=[str(b)], tokens=11),
        ]
    )
    blend = BlendedDocuments(config)
    report = {r["name"]: r for r in blend.report()["sources"]}
    assert report["a"]["tokens"] == 5 and report["a"]["documents"] == 2
    assert report["b"]["tokens"] in (9, 12)  # whole documents, the closest to 11 (7 or 8 is farther)
    assert blend.num_tokens == report["a"]["tokens"] + report["b"]["tokens"]
    tokens = np.concatenate([blend[i] for i in range(len(blend))])
    assert int((tokens == 1).sum()) == 3 and len(tokens) == blend.num_tokens
    assert all(blend[i][0] == {"a": 1, "b": 2}[blend.source_of(i)] for i in range(len(blend)))


def test_shares_within_a_tenth_of_a_percent(three_sources):
    config = _config(three_sources, web=0.6, qa=0.3, longcot=0.1)
    blend = BlendedDocuments(config, total_tokens=1_000_000)
    report = {r["name"]: r for r in blend.report()["sources"]}
    for name, weight in (("web", 0.6), ("qa", 0.3), ("longcot", 0.1)):
        assert abs(report[name]["share"] - weight) < 0.001, report[name]
    assert abs(blend.num_tokens - 1_000_000) < 1000
    # exact accounting: the report's counts are the blend's actual documents
    counted = {"web": 0, "qa": 0, "longcot": 0}
    for i in range(0, len(blend), 7):
        counted[blend.source_of(i)] += 1
        assert blend[i][0] == {"web": 1, "qa": 2, "longcot": 3}[blend.source_of(i)]
    assert report["longcot"]["repeated"] and report["longcot"]["epochs"] > 3
    assert not report["web"]["repeated"]


def test_every_prefix_of_the_blend_keeps_the_shares(three_sources):
    blend = BlendedDocuments(_config(three_sources, web=0.7, qa=0.3), total_tokens=400_000)
    first = slice(0, len(blend) // 10)
    ids = np.array([blend.source_of(i) == "qa" for i in range(first.stop)])
    qa_share = blend.sizes[first][ids].sum() / blend.sizes[first].sum()
    assert abs(qa_share - 0.3) < 0.01


def test_deterministic_for_a_seed(three_sources):
    one = BlendedDocuments(_config(three_sources, seed=3, web=1, qa=1), total_tokens=200_000)
    two = BlendedDocuments(_config(three_sources, seed=3, web=1, qa=1), total_tokens=200_000)
    other = BlendedDocuments(_config(three_sources, seed=4, web=1, qa=1), total_tokens=200_000)
    assert np.array_equal(one.sizes, two.sizes) and len(one) == len(two)
    assert [one.source_of(i) for i in range(50)] == [two.source_of(i) for i in range(50)]
    assert not np.array_equal(one.sizes[:200], other.sizes[:200])


def test_no_total_means_one_epoch_of_the_scarcest(three_sources):
    blend = BlendedDocuments(_config(three_sources, web=0.5, longcot=0.5))
    report = {r["name"]: r for r in blend.report()["sources"]}
    assert report["longcot"]["tokens"] == report["longcot"]["available_tokens"]
    assert not report["longcot"]["repeated"] and abs(report["web"]["share"] - 0.5) < 0.01


def test_budgets_and_weights_together(three_sources):
    sources = [
        MixtureSource(name="qa", paths=[three_sources["qa"]], tokens=50_000),
        MixtureSource(name="web", paths=[three_sources["web"]], weight=1.0),
    ]
    targets = plan_tokens(MixtureConfig(sources=sources), {"qa": 10**6, "web": 10**6}, 200_000)
    assert targets == {"qa": 50_000, "web": 150_000}
    with pytest.raises(ValueError, match="exceed"):
        plan_tokens(MixtureConfig(sources=sources), {"qa": 1, "web": 1}, 10_000)


def test_select_documents_repeats_whole_epochs():
    sizes = np.array([10, 20, 30])
    docs = select_documents(sizes, 130, np.random.default_rng(0))
    assert sorted(docs[:3].tolist()) == [0, 1, 2] and sorted(docs[3:6].tolist()) == [0, 1, 2]
    assert int(sizes[docs].sum()) in (120, 130, 140, 150)


def test_config_errors_name_the_problem():
    with pytest.raises(ValidationError, match="exactly one of weight or tokens"):
        MixtureSource(name="x", paths=["p"], weight=1.0, tokens=5)
    with pytest.raises(ValidationError, match="unique"):
        MixtureConfig(sources=[MixtureSource(name="x", paths=["p"], weight=1)] * 2)


def test_shipped_mixtures_load():
    files = sorted((REPO / "recipes" / "mixtures").glob("*.yaml"))
    assert {f.stem for f in files} >= {"octothinker-stable", "decay-short", "decay-long", "decay-hybrid"}
    for path in files:
        config = MixtureConfig.from_yaml(path, run_dir="/runs/x")
        assert all(p.startswith("/runs/x") for s in config.sources for p in s.paths), path


def test_absurd_repetition_is_refused(three_sources):
    config = _config(three_sources, web=0.5, longcot=0.5)
    with pytest.raises(ValueError, match="source (web|longcot): .* epochs"):
        BlendedDocuments(config, total_tokens=10**15)


def test_cli_mix_reports_repetition(three_sources, tmp_path):
    import yaml
    from typer.testing import CliRunner

    from mathmix.cli import app

    recipe = tmp_path / "mix.yaml"
    recipe.write_text(yaml.safe_dump(_config(three_sources, web=0.5, longcot=0.5).model_dump()))
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        app, ["shards", "mix", str(recipe), "--total-tokens", "600000", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "repeated" in result.output
    import json

    rows = {r["name"]: r for r in json.loads(out.read_text())["sources"]}
    assert rows["longcot"]["repeated"] and rows["longcot"]["tokens"] + rows["web"]["tokens"] > 599_000


def test_empty_source_gives_its_share_to_the_others(three_sources, tmp_path):
    empty = tmp_path / "empty"
    write_indexed(empty / "00000", [], vocab_size=16)
    paths = dict(three_sources, qa=str(empty / "00000"))
    blend = BlendedDocuments(_config(paths, web=0.7, qa=0.3), total_tokens=100_000)
    report = {r["name"]: r for r in blend.report()["sources"]}
    assert report["qa"]["empty"] and report["qa"]["tokens"] == 0
    assert abs(report["web"]["tokens"] - 100_000) < 200
    with pytest.raises(ValueError, match="every source is empty"):
        BlendedDocuments(_config({"qa": str(empty / "00000")}, qa=1.0), total_tokens=10)


def test_cached_index_is_built_once_and_memory_mapped(three_sources, tmp_path):
    config = _config(three_sources, web=0.7, qa=0.3)
    plain = BlendedDocuments(config, total_tokens=300_000)
    cache = tmp_path / "cache"
    first = BlendedDocuments(config, total_tokens=300_000, cache_dir=cache)
    files = sorted(p.name for p in cache.glob("*.npy"))
    assert len(files) == 3 and not list(cache.glob("*.tmp*"))
    second = BlendedDocuments(config, total_tokens=300_000, cache_dir=cache)
    assert isinstance(second._doc_ids, np.memmap)  # read back, not rebuilt
    assert sorted(p.name for p in cache.glob("*.npy")) == files
    for blend in (first, second):
        assert len(blend) == len(plain) and blend.report() == plain.report()
        assert all(np.array_equal(blend[i], plain[i]) for i in range(0, len(plain), 97))
        assert [blend.source_of(i) for i in range(200)] == [plain.source_of(i) for i in range(200)]
    # another seed or budget is another index, next to the first
    BlendedDocuments(_config(three_sources, seed=8, web=0.7, qa=0.3), total_tokens=300_000, cache_dir=cache)
    BlendedDocuments(config, total_tokens=200_000, cache_dir=cache)
    assert len(list(cache.glob("*.npy"))) == 9


def test_cache_key_follows_the_shards(three_sources, tmp_path):
    config = _config(three_sources, web=0.7, qa=0.3)
    before = BlendedDocuments(config, total_tokens=300_000)
    key = before.cache_key()
    write_indexed(Path(three_sources["qa"]), [[2, 2, 0]] * 1500, vocab_size=16)  # same count, other sizes
    changed = BlendedDocuments(config, total_tokens=300_000)
    assert changed.targets == before.targets and changed.cache_key() != key  # only the sizes differ


def test_shards_of_different_tokenizers_are_refused(tmp_path):
    from shards.manifest import write_manifest

    folders = []
    for name, vocab in (("a", 512), ("b", 2048)):
        prefix = Path(_source(tmp_path, name, 50, 1, 0))
        entry = {"prefix": prefix.name, "documents": 50, "tokens": 0}
        write_manifest(
            prefix.parent, [entry], tokenizer=f"/tok/{name}", vocab_size=vocab, eos_id=0, dtype="uint16"
        )
        folders.append(str(prefix.parent))
    same = MixtureConfig(name="m", sources=[MixtureSource(name="a", paths=[folders[0]], weight=1.0)])
    assert len(BlendedDocuments(same)) > 0
    mixed = MixtureConfig(
        name="m",
        sources=[MixtureSource(name=n, paths=[f], weight=0.5) for n, f in zip("ab", folders, strict=True)],
    )
    with pytest.raises(ValueError, match=r"different tokenizers .*vocab 512.*vocab 2048"):
        BlendedDocuments(mixed)
    # a source named by its PREFIX is checked by the manifest of the prefix's folder
    prefixes = [str(Path(f) / "00000") for f in folders]
    by_prefix = MixtureConfig(
        name="m",
        sources=[MixtureSource(name=n, paths=[p], weight=0.5) for n, p in zip("ab", prefixes, strict=True)],
    )
    with pytest.raises(ValueError, match=r"different tokenizers"):
        BlendedDocuments(by_prefix)


def test_shards_of_two_tokenizers_with_one_vocabulary_size_are_refused(tmp_path):
    """Two BPE tokenizers of the same size map text to different ids: the manifests' fingerprints tell them apart
    (and one tokenizer read from two folders is the same)."""
    import json
    import shutil

    from shards.build import build_shards
    from shards.tokenizer import train_tokenizer

    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        "".join(json.dumps({"text": f"Let x = {i} and y = {i * i}."}) + "\n" for i in range(200))
    )
    tok_a = train_tokenizer([f"Let x = {i} and y = {i * i}." for i in range(200)], tmp_path / "tok_a", 300)
    tok_b = train_tokenizer(
        [f"The value {i} squared is {i * i}." for i in range(200)], tmp_path / "tok_b", 300
    )
    shutil.copytree(tok_a, tmp_path / "tok_a_copy")
    folders = {}
    for name, tok in (("a", tok_a), ("a_copy", tmp_path / "tok_a_copy"), ("b", tok_b)):
        build_shards([corpus], tmp_path / name, str(tok))
        folders[name] = str(tmp_path / name)

    def blend(*names: str) -> BlendedDocuments:
        sources = [MixtureSource(name=n, paths=[folders[n]], weight=1 / len(names)) for n in names]
        return BlendedDocuments(MixtureConfig(name="m", sources=sources))

    assert len(blend("a", "a_copy")) > 0
    with pytest.raises(ValueError, match="different tokenizers .*tokenizer [0-9a-f]{16}"):
        blend("a", "b")


def test_cli_mix_names_bad_yaml_and_bad_keys_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from mathmix.cli import app

    runner = CliRunner()
    (tmp_path / "bad.yaml").write_text("[1, 2")
    (tmp_path / "neg.yaml").write_text("name: x\nsources:\n  - {name: a, paths: [x], weight: -1}\n")
    for name, message in (
        ("bad.yaml", "not valid YAML"),
        ("neg.yaml", "sources.0.weight: Input should be greater"),
    ):
        result = runner.invoke(app, ["shards", "mix", str(tmp_path / name)])
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
        assert "Traceback" not in result.output and "errors.pydantic.dev" not in result.output
