"""The dedup tokens keep math: operators and relations are tokens of the exact key and of the MinHash shingles;
case folding and NFKC reach beyond ASCII; `empty` means exactly "no text key"."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from curate.dedup_exact import _is_empty
from curate.minhash import MinhashSigner
from curate.minhash_tokens import batch_text_hashes, batch_tokens

# pairs that an exact key built from letters and digits alone took for one text (review of the dedup defaults)
DIFFERENT = [
    ("Find all x with x ≤ 3.", "Find all x with x ≥ 3."),
    ("Compute 2+3.", "Compute 2-3."),
    ("What is 1/2 of 8?", "What is 1.2 of 8?"),
    ("Let $y = x^2$.", "Let $y = x_2$."),
    ("Integrate $e^{-x}$.", "Integrate $e^{x}$."),
    ("Describe $A ∪ B$.", "Describe $A ∩ B$."),
    ("Suppose $k > 0$.", "Suppose $k < 0$."),
    ("The odd number 2n-1.", "The odd number 2n+1."),
    ("Solve x − 4 = 0.", "Solve x + 4 = 0."),  # U+2212 minus sign
    ("Compute 5!", "Compute 5"),
    ("Find |x|.", "Find x."),
    ("Let $a * b$ be given.", "Let $a b$ be given."),
    ("p ⇒ q", "p ⇔ q"),
    ("a ⩽ b", "a ⩾ b"),  # U+2A7D / U+2A7E
]
SAME = [
    ("Hello, world.", "hello   WORLD"),
    ("(a) the case; and: 'b'", "a the case and b"),
    ("ÉCOLE Ünïcode", "école ünïcode"),  # case beyond ASCII
    ("ΑΒΓ δ", "αβγ Δ"),
    ("２x + ３", "2x + 3"),  # full-width forms
    ("𝑥 + 𝑦", "x + y"),  # math alphanumerics
    ("ﬁnd it", "find it"),  # ligature
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_operators_and_relations_make_another_exact_key(a: str, b: str) -> None:
    ha, hb = batch_text_hashes([a, b])
    assert ha != hb and ha != 0 and hb != 0


@pytest.mark.parametrize(("a", "b"), SAME)
def test_case_prose_punctuation_and_compatibility_forms_do_not_count(a: str, b: str) -> None:
    ha, hb = batch_text_hashes([a, b])
    assert ha == hb != 0


def test_operators_are_in_the_shingles() -> None:
    signer = MinhashSigner()
    a = "Let k be a real number such that k > 0 and find the value of the expression below"
    sa, sb = (set(signer.shingles([t])[0].tolist()) for t in (a, a.replace(">", "<")))
    assert sa != sb and len(sa ^ sb) == 10  # the operator is in 5 shingles of each


TEXTS = [
    "",
    " ",
    "...",
    "½",
    "ℝ",
    "²",
    "™",
    "+",
    "- = -",
    "→",
    "数",
    "é",
    "Ω",
    "𝑥",
    "２",
    "\u00a0",
    "—",
    "\x00",
    "ª",
]


def test_empty_is_exactly_the_texts_without_a_key() -> None:
    keys = batch_text_hashes(TEXTS)
    for text, key in zip(TEXTS, keys, strict=True):
        assert _is_empty(text) == (key == 0), repr(text)
    assert _is_empty("+") and _is_empty("- = -") and not _is_empty("½") and not _is_empty("ℝ")


def test_a_batch_tokenizes_as_its_texts_one_at_a_time() -> None:
    # texts that NFKC changes are tokenized again on their own and spliced back in place
    texts = ["plain x+1", "½ of ２", "", "ＡＢ and ab", "数学 x ≤ y", "ﬁ", "z", "x\x00y ²"]
    hashes, counts, is_number = batch_tokens(texts)
    alone = [batch_tokens([t]) for t in texts]
    assert counts.tolist() == [int(c[0]) for _, c, _ in alone]
    assert hashes.tolist() == [h for a in alone for h in a[0].tolist()]
    assert is_number.tolist() == [x for a in alone for x in a[2].tolist()]


def test_tables_agree_with_the_reference_classes() -> None:
    from curate.minhash_tokens import _tables, char_class

    cls, _, _ = _tables()
    assert (cls == np.array([char_class(cp) for cp in range(0x10000)], dtype=np.uint8)).all()


def _math_problems(shared: Path) -> dict[str, str]:
    problems = {}
    for split in ("train", "test"):
        path = shared / "bench" / "math_hendrycks" / f"{split}.jsonl"
        for i, line in enumerate(path.read_text().splitlines()):
            problems[f"{split}-{i}"] = json.loads(line)["problem"]
    return problems


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("train-723", "train-746"),
        ("train-2586", "train-2913"),
        ("train-3994", "train-4412"),
        ("train-4385", "test-2716"),
    ],
)
def test_real_math_problems_with_other_operators_keep_their_keys(shared_data: Path, a: str, b: str) -> None:
    """MATH problems whose letters and digits agree and whose answers differ (`k > 0` / `k < 0`, `2n-1` /
    `2n+1`, `-2018` / `+2018`): one exact key made `mathmix dedup` drop one as duplicate_text."""
    problems = _math_problems(shared_data)
    ha, hb = batch_text_hashes([problems[a], problems[b]])
    assert ha != hb
