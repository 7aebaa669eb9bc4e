"""MinHash signatures: tokens, Jaccard estimates, numbers, bad input, and datatrove's file formats."""

from __future__ import annotations

import random
import re
import string
import struct

import numpy as np
import pytest
from datatrove.data import Document

from curate.dedup_text import canonical_url, ngram_hashes, token_hashes
from curate.minhash import FastMinhashSignature, MinhashSettings, MinhashSigner
from curate.minhash_tokens import batch_token_hashes


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 8))) for _ in range(n)]


# the byte tokenizer's tokens on ASCII text: letter runs, digit runs, each math operator alone
ASCII_TOKEN_RE = re.compile(r"[a-z]+|[0-9]+|[-+<>=^_/*|!]")


def test_batch_tokens_match_the_regex_tokenizer_on_ascii() -> None:
    texts = ["Hello, World! 2x+3y=10; x_1 (a-b)", "", "one", "A  B\nC\t42abc"]
    hashes, counts = batch_token_hashes(texts)
    expected = [ASCII_TOKEN_RE.findall(t.lower()) for t in texts]
    assert counts.tolist() == [len(e) for e in expected] == [16, 0, 1, 5]
    # same token, same hash, wherever it is; the regex path's hashes differ (another hash) but equality agrees
    flat = [tok for e in expected for tok in e]
    for i, j in [(i, j) for i in range(len(flat)) for j in range(len(flat))]:
        assert (hashes[i] == hashes[j]) == (flat[i] == flat[j])


def test_non_latin_scripts_tokenize() -> None:
    _, counts = batch_token_hashes(["数学问题", "Привет мир", "café — naïve", "a\u00a0b", "x\x00y"])
    assert counts.tolist() == [4, 2, 2, 2, 2]  # CJK one char each; em dash and NBSP separate; NUL is a space


def test_signature_agreement_estimates_jaccard() -> None:
    rng = random.Random(0)
    signer = MinhashSigner(MinhashSettings(num_buckets=16, hashes_per_bucket=16))
    errors = []
    for _ in range(40):
        base = _words(rng, 200)
        other = list(base)
        for i in rng.sample(range(200), rng.randint(0, 120)):
            other[i] = _words(rng, 1)[0]
        sa, sb = (set(ngram_hashes(token_hashes(t), 5).tolist()) for t in (base, other))
        jaccard = len(sa & sb) / len(sa | sb)
        sig, ok = signer.signatures([" ".join(base), " ".join(other)])
        assert ok.all()
        errors.append((sig[0] == sig[1]).mean() - jaccard)
    assert abs(np.mean(errors)) < 0.02 and np.std(errors) < 0.05


def test_numbers_change_the_signature_and_short_docs_have_none() -> None:
    signer = MinhashSigner()
    a = "Tom has 3 apples and buys 5 more at the shop. How many apples does Tom have now at 7 pm?"
    b = a.replace("3", "4").replace("5", "6").replace("7", "8")
    sig, ok = signer.signatures([a, b, a.upper(), "", "one", "four words only here"])
    assert ok.tolist() == [True, True, True, False, False, False]
    assert (sig[0] == sig[2]).all()  # case does not matter
    assert (sig[0] == sig[1]).mean() < 0.5  # numbers do
    # no LSH band of 10 rows agrees, so the two problems never meet in a bucket
    assert not any((sig[0, b * 10 : (b + 1) * 10] == sig[1, b * 10 : (b + 1) * 10]).all() for b in range(11))


def test_batches_give_the_same_signatures_as_single_documents() -> None:
    rng = random.Random(1)
    texts = [" ".join(_words(rng, rng.randint(0, 3000))) for _ in range(12)]
    signer = MinhashSigner()
    together, _ = signer.signatures(texts)
    alone = np.concatenate([signer.signatures([t])[0] for t in texts])
    assert (together == alone).all()


def test_signature_files_are_datatrove_format_and_sorted(tmp_path) -> None:
    rng = random.Random(2)
    docs = [
        Document(text=" ".join(_words(rng, 50)), id=str(i), metadata={"math_score": i / 10}) for i in range(5)
    ]
    docs.insert(2, Document(text="too short", id="short"))
    FastMinhashSignature(tmp_path, MinhashSettings()).run(iter(docs), rank=3)
    record = struct.calcsize("<10II")
    for b in range(11):
        raw = (tmp_path / f"bucket_{b:03d}" / "00003.minhash.sig").read_bytes()
        rows = [struct.unpack("<10II", raw[i : i + record]) for i in range(0, len(raw), record)]
        assert len(rows) == 5 and rows == sorted(rows)
        assert sorted(r[-1] for r in rows) == [0, 1, 3, 4, 5]  # doc index counts the short doc (no signature)
    meta = np.load(tmp_path / "meta" / "00003.npy")
    assert meta["has_sig"].tolist() == [1, 1, 0, 1, 1, 1] and meta["score"][1] == pytest.approx(0.1)


def test_canonical_url() -> None:
    assert (
        canonical_url("HTTPS://www.Example.com:443/a/b/?utm_source=x&b=2&a=1#top")
        == "http://example.com/a/b?a=1&b=2"
    )
    assert canonical_url("http://example.com") == "http://example.com/"
    assert canonical_url("") is None and canonical_url(None) is None


def test_exact_text_hash_ignores_case_space_punctuation_only() -> None:
    from curate.minhash_tokens import batch_text_hashes

    h = batch_text_hashes(
        ["Hello,  World.", "hello world", "world hello", "", "...", "hello world 2", "hello"]
    )
    assert h[0] == h[1] and len({h[1], h[2], h[5], h[6]}) == 4
    assert h[3] == 0 and h[4] == 0 and (h[[0, 2, 5, 6]] != 0).all()
