"""Short documents are merged only as true near-duplicates: shingles weigh a token at either end as one inside,
candidate pairs of short documents are confirmed by their exact Jaccard, the guard compares their math tokens,
and candidate pairs are counted once."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from datatrove.data import Document
from typer.testing import CliRunner

from curate.minhash import FastMinhashSignature, MinhashSettings, MinhashSigner
from curate.minhash_cluster import MinhashClusterByRule
from mathmix.cli import app

THRESHOLD = (1 - 0.5 ** (1 / 11)) ** (1 / 10)  # where an 11 x 10 LSH candidate is as likely as not: 0.756


def _jaccard(a: str, b: str) -> float:
    signer = MinhashSigner()
    sa, sb = (set(signer.shingles([t])[0].tolist()) for t in (a, b))
    return len(sa & sb) / len(sa | sb)


def test_a_token_at_either_end_counts_as_much_as_one_inside() -> None:
    """Without start/end markers the last token was in one shingle of 8: these two problems had J 0.78."""
    a = "If x - y = 6 and x + y = 12, what is the value of y?"
    assert _jaccard(a, a[:-2] + "x?") < 0.65
    b = "Determine the number of ways to arrange the letters of the word COMBINATION."
    assert _jaccard(b, b.replace("COMBINATION", "TOOT")) < 0.6
    assert _jaccard("TOOT is a word, " + b, "ALABAMA is a word, " + b) < 0.75


def test_math_tokens_of_problem_sized_texts_are_compared() -> None:
    """The guard's hash covers numbers, operators and one-letter variables, not only numbers."""
    signer = MinhashSigner()
    base = "Let x and y be real numbers with x^8 - 98x^4 + 1 = 0. Find the value of y in terms of the other."
    variants = [
        base.replace("value of y", "value of x"),
        base.replace("- 98", "+ 98"),
        base.replace("x^8", "x_8"),
        base.replace("Find", "Find all"),  # a word: not a math token
    ]
    _, _, _, num_hash = signer.signatures_and_numbers([base, *variants])
    assert (num_hash[1:4] != num_hash[0]).all() and num_hash[4] == num_hash[0]


def test_asymptote_drawings_do_not_count_toward_the_guard_size() -> None:
    """MATH problems with a drawing have 300-900 tokens, nearly all `[asy]` code: counted, they were no longer
    problem-sized, and 8 of them merged with a problem whose numbers differ."""
    statement = "The red parabola shown is the graph of the equation $x = ay^2 + by + c$.  Find $c$."
    drawing = "[asy]\nsize(150);\n" + "draw((0,0)--(4,0)--(0,3)--cycle);\n" * 30 + "[/asy]"
    _, ok, counts, _ = MinhashSigner().signatures_and_numbers(
        [statement, statement + drawing, drawing + statement]
    )
    assert ok.all() and counts.tolist() == [counts[0]] * 3 and counts[0] < 30


def _signatures(folder: Path, texts: list[str]) -> None:
    docs = [Document(text=t, id=str(i), metadata={"math_score": 0.5}) for i, t in enumerate(texts)]
    FastMinhashSignature(folder, MinhashSettings()).run(iter(docs), rank=0)


def _dups(folder: Path, pairs: list[tuple[int, int]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = np.array([(0, a, 0, b) for a, b in pairs], dtype="<u4")
    rows.tofile(folder / "000_00000.dups")


def _removed(folder: Path) -> list[int]:
    return np.fromfile(folder / "000000.remove", dtype="<u4").tolist()


WORDS = "the quick brown fox jumps over the lazy dog while seven wise owls watch from an old oak tree".split()


def test_a_cluster_never_chains_through_a_pair_below_the_threshold(tmp_path: Path) -> None:
    long = " ".join(WORDS * 4)  # 76 tokens
    near = long.replace("seven wise", "seven clever", 1)  # one word of 76: J ~0.88
    other = " ".join(WORDS[:10]) + " and then nothing else happened at all in this story today"
    _signatures(tmp_path / "sig", [long, near, other])
    # the bucket stage proposed 0-1 (a near copy) and 1-2 (an unlucky candidate of J < 0.5), twice each
    _dups(tmp_path / "dups", [(0, 1), (1, 2), (0, 1), (2, 1)])
    step = MinhashClusterByRule(tmp_path / "dups", tmp_path / "sig", tmp_path / "out", threshold=THRESHOLD)
    step.run()
    assert _removed(tmp_path / "out") == [0]  # 0 and 1 tie: the longer one (1) is kept; 2 is alone
    assert step.stats["candidate_pairs"].total == 2 and step.stats["pairs_below_threshold"].total == 1


def test_pairs_blocked_by_the_guard_are_counted_once(tmp_path: Path) -> None:
    a = "Tom has 3 apples and buys 5 more at the shop. How many apples does Tom have now?"
    b = a.replace("3", "4")
    _signatures(tmp_path / "sig", [a, b])
    _dups(tmp_path / "dups", [(0, 1)] * 5 + [(1, 0)] * 3)  # the pair in 8 bands
    step = MinhashClusterByRule(
        tmp_path / "dups", tmp_path / "sig", tmp_path / "out", number_guard_tokens=256
    )
    step.run()
    assert _removed(tmp_path / "out") == []
    assert step.stats["pairs_blocked_by_numbers"].total == 1


def _run(tmp_path: Path, rows: list[dict], *extra: str) -> tuple[dict, list[dict]]:
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(
        app, ["dedup", str(inp), "-o", str(tmp_path / "out"), "--workers", "1", *extra]
    )
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    clusters = [json.loads(line) for line in (out / "clusters.jsonl").read_text().splitlines()]
    return json.loads((out / "summary.json").read_text()), clusters


LETTERS = "COMBINATION TOOT TARTAR ALABAMA BANANA MISSISSIPPI RADII ELEVEN TEPEE PARABOLA BASIC GAMMA".split()
LONG_PROBLEM = (
    "A school club sells tickets to a concert in the gym. Adults pay more than students, and every family that "
    "buys at least three tickets receives a small discount on the whole order. After the first evening the club "
    "counted the money in the box and found that those sales covered the cost of the chairs, the lights and the "
    "sound system, with something left over for the spring trip. What is the smallest number of families that "
    "could have bought tickets on that evening, given that each family came with both of their parents?"
)


def test_templated_short_problems_are_kept_and_real_copies_merged(tmp_path: Path) -> None:
    rows = [
        {"id": f"word{i}", "text": f"Determine the number of ways to arrange the letters of the word {w}."}
        for i, w in enumerate(LETTERS)
    ]
    rows += [
        {"id": f"var_{v}", "text": f"If $x - y = 6$ and $x + y = 12$, what is the value of ${v}$?"}
        for v in "xy"
    ]
    rows += [
        {"id": "boxes_d", "text": "How many ways are there to put 4 distinguishable balls into 2 distinguishable boxes?"},
        {"id": "boxes_i", "text": "How many ways are there to put 4 distinguishable balls into 2 indistinguishable boxes?"},
        {"id": "cos_c", "text": "In right triangle $ABC$ with $\\angle A = 90^\\circ$, we have $AB = 6$ and $BC = 10$.  Find $\\cos C$."},
        {"id": "cos_a", "text": "In right triangle $ABC$ with $\\angle A = 90^\\circ$, we have $AB = 6$ and $BC = 10$.  Find $\\cos A$."},
        {"id": "those", "text": LONG_PROBLEM},
        {"id": "these", "text": LONG_PROBLEM.replace("those sales", "these sales")},
    ]  # fmt: skip
    summary, clusters = _run(tmp_path, rows)
    near = [c for c in clusters if c["kind"] == "minhash"]
    assert [sorted([c["kept"], *c["removed"]]) for c in near] == [["these", "those"]], near
    assert summary["dropped"] == {"near_duplicate": 1}


def test_real_templated_math_problems_are_not_merged(shared_data: Path, tmp_path: Path) -> None:
    """MATH train problems one word or variable apart, merged at the defaults before (17 `arrange the letters
    of the word ...` problems in one cluster, one kept)."""
    problems = [
        json.loads(x)["problem"]
        for split in ("train", "test")
        for x in (shared_data / f"bench/math_hendrycks/{split}.jsonl").open()
    ]
    arrange = [
        p for p in problems if p.startswith("Determine the number of ways to arrange the letters of the")
    ]
    assert len(arrange) >= 10
    rows = [{"id": f"a{i}", "text": p} for i, p in enumerate(arrange)]
    summary, clusters = _run(tmp_path, rows)
    assert not [c for c in clusters if c["kind"] == "minhash"] and summary["docs_out"] == len(set(arrange))


@pytest.mark.parametrize("pages", [4])
def test_short_pages_differing_in_boilerplate_numbers_are_merged(tmp_path: Path, pages: int) -> None:
    """Pages above the guard's limit (256 tokens) that differ in a view count and a copyright year are one page;
    at the former limit (512) they were kept apart."""
    body = " ".join(f"{w} {i}" if i % 9 == 0 else w for i, w in enumerate((WORDS * 20)[:330]))  # 367 tokens
    rows = []
    for p in range(pages):
        text = f"Page {p}: " + body.replace("fox", f"fox{p}")
        rows += [
            {
                "id": f"p{p}a",
                "text": f"Posted 12 March 2023 | 1204 views\n{text}\nCopyright 2023 example.com",
            },
            {
                "id": f"p{p}b",
                "text": f"Posted 12 March 2023 | 1377 views\n{text}\nCopyright 2024 example.com",
            },
        ]
    summary, _ = _run(tmp_path, rows)
    assert summary["dropped"] == {"near_duplicate": pages}


def test_the_number_guard_is_set_from_the_command_line(tmp_path: Path) -> None:
    # two copies of a long-enough problem that differ in one number: kept apart by the guard, merged without it
    rows = [
        {"id": "a", "text": LONG_PROBLEM + " Give 3 answers."},
        {"id": "b", "text": LONG_PROBLEM + " Give 4 answers."},
    ]
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    summary, _ = _run(tmp_path / "on", rows)
    assert summary["docs_out"] == 2
    summary, clusters = _run(tmp_path / "off", rows, "--number-guard-tokens", "0")
    assert summary["docs_out"] == 1 and clusters[0]["removed"] == ["b"]
    bad = CliRunner().invoke(app, ["dedup", str(tmp_path / "on" / "in.jsonl"), "-o", str(tmp_path / "x"),
                                   "--number-guard-tokens", "-1"])  # fmt: skip
    assert bad.exit_code == 2 and "bad option --number-guard-tokens" in " ".join(bad.output.split())


def test_signatures_an_earlier_mathmix_began_are_not_finished_with_other_tokens(tmp_path: Path) -> None:
    # an earlier mathmix's ranks hashed letters and digits only and kept no shingle sets: a rerun that would finish
    # the stage beside them is refused; once every rank was done (a finished job) the rerun goes on
    rows = [{"id": f"d{i}", "text": f"{LONG_PROBLEM} Variant {i} of {w}."} for i, w in enumerate(LETTERS)]
    out = tmp_path / "out"
    inputs = []
    for part in range(2):
        path = tmp_path / f"in{part}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows[part::2]))
        inputs.append(str(path))
    args = ["dedup", *inputs, "-o", str(out), "--workers", "2"]
    assert CliRunner().invoke(app, args).exit_code == 0
    (
        out / "work" / "signatures" / "shingles" / "00000.sizes.npy"
    ).unlink()  # rank 0 as the earlier mathmix left it
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output  # every rank done: a finished job, kept
    (out / "summary.json").unlink()
    (out / "logs" / "3_signatures" / "completions" / "00001").unlink()  # rank 1 not done yet
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2 and "begun by an earlier mathmix" in " ".join(refused.output.split())


def test_drawings_in_capitals_are_left_out_of_the_guards_size_too() -> None:
    from curate.minhash import _tokens_outside_drawings

    texts = [
        "Find x. [asy] draw((0,0)--(1,1)); [/asy]",
        "Find x. [ASY] draw((0,0)--(1,1)); [/ASY]",
        "Find x.",
    ]
    counts = np.array([20, 20, 2])
    assert _tokens_outside_drawings(texts, counts).tolist() == [2, 2, 2]
