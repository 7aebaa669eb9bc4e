"""Control tokens written in corpus text stay text; truncation/padding saved in a tokenizer.json are off; shards
that hold special token ids inside documents (built before that) are flagged by `validate` and `inspect`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from mathmix.cli import app
from pipelines.executors import ExecutorConfig
from shards.build import build_shards
from shards.indexed import IndexedDataset, write_indexed
from shards.inspection import inspect_shards
from shards.manifest import file_entry, read_manifest, resolve_prefixes, write_manifest
from shards.tokenizer import BOS, EOS, PAD, load_tokenizer, train_tokenizer
from shards.validate import validate_path

TEXTS = [f"Let $x^2 + {i}x = {i * i}$. Hello world, solve for x: the answer is {i % 7}." for i in range(200)]
LITERAL = [
    f"Hello {EOS} world",  # the lesswrong page in shared/data/html/nonmath writes it so
    f"{BOS}Solve x + 1 = 2.{PAD}{PAD}",
    f"A chat log: user: hi{EOS}{BOS}assistant: x = 3",
]
runner = CliRunner()


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return train_tokenizer(TEXTS, tmp_path_factory.mktemp("tok") / "bpe", vocab_size=320)


def _specials(backend) -> set[int]:
    return {i for i, token in backend.get_added_tokens_decoder().items() if token.special}


def _built_documents(out):
    return [
        ds[i].tolist() for p in resolve_prefixes(out) for ds in [IndexedDataset(p)] for i in range(len(ds))
    ]


def test_control_tokens_written_in_text_are_built_as_text(tmp_path, tokenizer_dir):
    src = tmp_path / "corpus"
    src.mkdir()
    (src / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in LITERAL))
    out = tmp_path / "shards"
    build_shards([src], out, str(tokenizer_dir), ExecutorConfig(tasks=1))
    tok = load_tokenizer(tokenizer_dir)
    specials = _specials(tok.backend)
    assert tok.eos_id in specials and len(specials) == 3
    docs = _built_documents(out)
    assert len(docs) == len(LITERAL)
    for doc in docs:  # the EOS closing each document is the real EOS id, and no special id comes before it
        assert doc[-1] == tok.eos_id and not specials & set(doc[:-1]), doc
    decoded = sorted(tok.backend.decode(doc[:-1], skip_special_tokens=False) for doc in docs)
    assert decoded == sorted(LITERAL)  # the text round-trips, control tokens as their characters
    assert validate_path(out)["warnings"] == []


def test_a_transformers_loaded_tokenizer_encodes_text_as_text_too(tokenizer_dir, monkeypatch):
    """A hub name goes through transformers (AutoTokenizer); its backend tokenizer gets the same treatment, and
    the transformers object holding it is left as it is."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    import mathmix.hub

    loaded = []

    def cached(cls, name, **kwargs):  # the hub cache, as mathmix.hub.from_pretrained reads it
        assert name == "tiny/math-bpe"
        loaded.append(AutoTokenizer.from_pretrained(str(tokenizer_dir)))
        return loaded[-1]

    monkeypatch.setattr(mathmix.hub, "from_pretrained", cached)
    tok = load_tokenizer("tiny/math-bpe")
    hf = loaded[0]
    ids = tok.encode_batch(LITERAL)
    assert all(not _specials(hf.backend_tokenizer) & set(doc) for doc in ids)
    assert [hf.decode(doc) for doc in ids] == LITERAL
    assert hf(EOS, add_special_tokens=False)["input_ids"] == [hf.eos_token_id]  # its own behaviour is kept
    # a PreTrainedTokenizerFast built around a tokenizer object, and the bare tokenizer.json, alike
    from shards.tokenizer import for_encoding

    wrapped = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_dir / "tokenizer.json"))
    encoder = for_encoding(wrapped.backend_tokenizer)
    assert [e.ids for e in encoder.encode_batch_fast(LITERAL, add_special_tokens=False)] == ids
    assert [encoder.encode(t, add_special_tokens=False).ids for t in LITERAL] == ids
    assert load_tokenizer(tokenizer_dir / "tokenizer.json", EOS).encode_batch(LITERAL) == ids
    assert not wrapped.backend_tokenizer.encode_special_tokens


SAVED = {
    "truncating": lambda t: t.enable_truncation(max_length=16),
    "padding": lambda t: t.enable_padding(pad_id=2, pad_token=PAD, length=400),
}


@pytest.mark.parametrize("saved", sorted(SAVED))
def test_truncation_and_padding_saved_in_a_tokenizer_json_are_off(tmp_path, tokenizer_dir, saved):
    from tokenizers import Tokenizer

    from midtrain.export import tokenizer_fingerprint

    plain = load_tokenizer(tokenizer_dir)
    want = plain.encode_batch(TEXTS[:20])
    assert max(len(ids) for ids in want) > 16
    raw = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    SAVED[saved](raw)
    folder = tmp_path / saved
    folder.mkdir()
    raw.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": EOS}))
    tok = load_tokenizer(folder)
    assert tok.encode_batch(TEXTS[:20]) == want
    # the fingerprint is still the file's as saved: what `train` and `train export` compute
    assert tok.fingerprint == tokenizer_fingerprint(str(folder)) != plain.fingerprint
    src = tmp_path / "corpus"
    src.mkdir()
    (src / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS[:20]))
    build_shards([src], tmp_path / "shards", str(folder), ExecutorConfig(tasks=1))
    assert sorted(_built_documents(tmp_path / "shards")) == sorted(w + [tok.eos_id] for w in want)


def _old_build(tmp_path, tokenizer_dir, docs, name="old"):
    """A shard folder as `shards build` wrote it before text was encoded as text (special ids inside)."""
    out = tmp_path / name
    tok = load_tokenizer(tokenizer_dir)
    entries = []
    for k, part in enumerate((docs[: len(docs) // 2], docs[len(docs) // 2 :])):
        info = write_indexed(out / f"0000{k}_00000", part, vocab_size=tok.vocab_size)
        entries.append(file_entry(out, f"0000{k}_00000", info["documents"], info["tokens"]))
    write_manifest(
        out,
        entries,
        name=name,
        tokenizer=str(tokenizer_dir.resolve()),
        tokenizer_sha256=tok.fingerprint,
        vocab_size=tok.vocab_size,
        eos_id=tok.eos_id,
        dtype="uint16",
    )
    return out


def test_validate_and_inspect_flag_special_ids_inside_documents(tmp_path, tokenizer_dir):
    tok = load_tokenizer(tokenizer_dir)
    eos, bos = tok.eos_id, tok.backend.token_to_id(BOS)
    clean = [ids + [eos] for ids in tok.encode_batch(TEXTS[:10])]
    docs = list(clean)
    docs[6] = docs[6][:3] + [eos] + docs[6][3:]  # "Hello <|endoftext|> world" as the old build stored it
    docs[8] = docs[8][:1] + [bos] + docs[8][1:]  # a BOS written in the text (at the start it is not counted)
    docs[9] = docs[9][:2] + [eos, eos] + docs[9][2:]
    out = _old_build(tmp_path, tokenizer_dir, docs)
    report = validate_path(out)
    assert report["ok"] and report["errors"] == []  # the files are sound: a warning, not a failure
    [warning] = report["warnings"]
    assert "3 of 10 documents hold a special token id" in warning and "4 time(s)" in warning
    assert f"first: {out / '00001_00000'} document 1" in warning and f"({eos}, {bos})" in warning

    done = runner.invoke(app, ["shards", "validate", str(out)])
    assert done.exit_code == 0 and "warning: " in done.output and "3 of 10 documents" in done.output

    inspected = inspect_shards(out, tmp_path / "report")
    assert inspected["special_tokens"]["documents"] == 3 and not inspected["special_tokens"]["sampled"]
    assert "3 of 10 documents hold" in inspected["special_tokens_warning"]
    assert inspected["warnings"] == []  # not a damaged file
    done = runner.invoke(app, ["shards", "inspect", str(out), "-o", str(tmp_path / "r2")])
    assert done.exit_code == 0 and "3 of 10 documents hold" in done.output.replace("\n", " ")

    assert validate_path(_old_build(tmp_path, tokenizer_dir, clean, "clean"))["warnings"] == []
    assert "special_tokens_warning" not in inspect_shards(tmp_path / "clean", tmp_path / "r3")


def test_a_run_shards_folder_carries_its_sources_warnings(tmp_path, tokenizer_dir):
    tok = load_tokenizer(tokenizer_dir)
    docs = [[5, tok.eos_id, 6, tok.eos_id], [7, tok.eos_id]]
    run = tmp_path / "shards"
    _old_build(run, tokenizer_dir, docs, "corpus")
    manifest = read_manifest(run / "corpus")
    info = {k: manifest[k] for k in ("tokenizer", "tokenizer_sha256", "vocab_size", "eos_id", "dtype")}
    sources = {"corpus": {"path": "corpus", "documents": 2, "tokens": 6}}
    (run / "manifest.json").write_text(json.dumps({**info, "sources": sources}))
    report = validate_path(run)
    assert report["ok"] and len(report["warnings"]) == 1 and "1 of 2 documents" in report["warnings"][0]


def test_inspect_reads_a_sample_of_big_shards_and_says_so(tmp_path, tokenizer_dir, monkeypatch):
    import shards.inspection

    tok = load_tokenizer(tokenizer_dir)
    docs = [[5, 6, tok.eos_id]] * 50 + [
        [5, tok.eos_id, 6, tok.eos_id]
    ] * 50  # the bad ones at each file's end
    out = _old_build(tmp_path, tokenizer_dir, docs[:25] + docs[50:75] + docs[25:50] + docs[75:])
    monkeypatch.setattr(shards.inspection, "INSPECT_SCAN_TOKENS", 2 * 30)  # 10 documents of each file
    report = inspect_shards(out, tmp_path / "report")
    assert report["special_tokens"]["sampled"] and report["special_tokens"]["documents_checked"] == 20
    assert "special_tokens_warning" not in report  # the bad documents lie past the sample
    monkeypatch.setattr(shards.inspection, "INSPECT_SCAN_TOKENS", 2 * 3 * 50 + 2 * 4 * 50)
    report = inspect_shards(out, tmp_path / "report")
    assert not report["special_tokens"]["sampled"] and report["special_tokens"]["documents"] == 50
    assert "in the sample read" not in report["special_tokens_warning"]
    assert validate_path(out)["warnings"][0].startswith(f"{out}: 50 of 100 documents hold")


def test_the_scan_matches_a_document_by_document_count(tmp_path, monkeypatch):
    """Across chunk and block boundaries (tiny ones here), with empty documents: the vectorised count is the
    count of documents holding a special id after their first token and before their last."""
    import shards.validate
    from shards.validate import scan_special_tokens

    rng = np.random.default_rng(0)
    special = [0, 1, 2]
    docs = [rng.integers(0, 40, size=int(rng.integers(0, 12))).tolist() for _ in range(300)]
    docs = [d + [0] if d and rng.random() < 0.8 else d for d in docs]
    write_indexed(tmp_path / "x", docs, vocab_size=40)
    bad = [i for i, d in enumerate(docs) if set(d[1:-1]) & set(special)]
    occurrences = sum(sum(t in special for t in d[1:-1]) for d in docs)
    for chunk, block in ((1 << 24, 1 << 20), (7, 5), (1, 1), (13, 64)):
        monkeypatch.setattr(shards.validate, "SCAN_CHUNK", chunk)
        monkeypatch.setattr(shards.validate, "SCAN_DOCS", block)
        scan = scan_special_tokens([IndexedDataset(tmp_path / "x")], special)
        assert scan["documents"] == len(bad) and scan["occurrences"] == occurrences, (chunk, block)
        assert scan["first"][1] == bad[0] and scan["documents_checked"] == len(docs)
        assert not scan["sampled"]


def test_a_bos_opening_each_document_is_not_flagged(tmp_path):
    # Megatron's preprocess_data with a BOS-adding tokenizer (Llama 3) writes BOS ... EOS: not damage
    from shards.validate import scan_special_tokens

    write_indexed(tmp_path / "m", [[1, 7, 8, 9, 0], [1, 5, 0], [1, 6, 0, 4, 0]], vocab_size=40)
    scan = scan_special_tokens([IndexedDataset(tmp_path / "m")], [0, 1, 2])
    assert scan["documents"] == 1 and scan["first"][1] == 2 and scan["found_ids"] == [0]
