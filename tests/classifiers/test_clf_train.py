"""Training, the card, eval, LLM seeds, recall rounds and the bad inputs, on small corpora made in the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from classifiers.cli import load_training_data
from classifiers.data import InputError, llm_seed_split, read_input
from classifiers.model import MathClassifier, ModelError, card_path
from classifiers.train import TrainSettings, train_model
from mathmix.cli import app
from tests.classifiers.corpus import FAST, MATH_WORDS, TEXT_WORDS, docs, write_jsonl


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("corpora")
    math = docs(MATH_WORDS, 40, 1)
    text = docs(TEXT_WORDS, 40, 2)
    return {
        "math": write_jsonl(
            d / "math.jsonl", [{"text": t, "url": f"https://m{i % 4}.org/q/{i}"} for i, t in enumerate(math)]
        ),
        "bench": write_jsonl(
            d / "bench.jsonl", [{"problem": t[:80], "solution": t[80:]} for t in docs(MATH_WORDS, 20, 3)]
        ),
        "text": write_jsonl(
            d / "text.jsonl",
            [{"text": t, "url": f"https://news{i % 4}.com/a/{i}"} for i, t in enumerate(text)],
        ),
        "dir": d,
    }


@pytest.fixture(scope="module")
def model(corpora, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("model") / "model.bin"
    data = load_training_data([corpora["math"], corpora["bench"]], [corpora["text"]], [], 3.0)
    train_model(data, out, FAST)
    return out


def test_card_records_inputs_counts_hyperparameters_threshold_metrics(model, corpora):
    card = json.loads(card_path(model).read_text())
    assert card["inputs"]["positives"] == [str(corpora["math"]), str(corpora["bench"])]
    assert card["counts"]["positive_docs"] == 60 and card["counts"]["negative_docs"] == 40
    assert card["hyperparameters"]["dim"] == 16 and card["hyperparameters"]["min_count_used"] == 1
    assert 0.5 <= card["threshold"] <= 1
    held = card["metrics"]["heldout"]
    assert held["n_math"] == 10 and held["n_nonmath"] == 10  # 25% of each source's pages, web pages only
    rows = card["metrics"]["heldout_rows"]  # the benchmark rows held out, measured apart
    assert rows["n_math"] == 5 and rows["n_nonmath"] == 0 and rows["precision"] is None
    assert held["f1"] >= 0.9  # separable vocabularies: a model that learned nothing fails this
    assert card["recall_rounds"] == []


def test_scores_separate_unseen_texts(model):
    clf = MathClassifier(model)
    math, text = docs(MATH_WORDS, 5, 9), docs(TEXT_WORDS, 5, 10)
    scores = clf.score(math + text + ["", "prove theorem lemma integral"])
    assert (scores[:5] > 0.5).all() and (scores[5:10] < 0.5).all()
    assert scores[10] == 0.0 and scores[11] == 0.0  # empty, and too short to judge (< 16 tokens)


def test_eval_json_has_the_issue_keys_and_leaves_out_training_pages(model, corpora, tmp_path):
    from mathmix.cli import app

    fresh = write_jsonl(tmp_path / "fresh.jsonl", [{"text": t} for t in docs(MATH_WORDS, 6, 11)])
    args = [
        "classifier",
        "eval",
        str(model),
        "--math",
        str(corpora["math"]),
        "--math",
        str(fresh),
        "--nonmath",
        str(corpora["text"]),
        "--json",
        "--plot",
        str(tmp_path / "pr.png"),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output.strip().splitlines()[-1])
    assert set(out) == {"precision", "recall", "f1", "threshold", "n_math", "n_nonmath"}
    # only the held-out quarter of the training corpora plus the 6 fresh documents are measured
    assert out["n_math"] == 10 + 6 and out["n_nonmath"] == 10
    assert (tmp_path / "pr.png").stat().st_size > 1000


def test_eval_report_has_breakdown_thresholds_and_ood(model, corpora, tmp_path):
    from classifiers.evaluate import evaluate_model

    ood = write_jsonl(tmp_path / "ood.jsonl", [{"text": t} for t in docs(MATH_WORDS[:6], 5, 12)])
    res = evaluate_model(
        model, [corpora["math"]], [corpora["text"]], [ood], [corpora["text"]], plot_path=tmp_path / "pr.png"
    )
    assert set(res["heldout"]["by_source"]) == {
        corpora["math"].parent.name + "/math.jsonl",
        corpora["text"].parent.name + "/text.jsonl",
    }
    assert res["heldout"]["roc_auc"] > 0.9
    assert res["heldout"]["threshold_for_precision_0.95"] is not None
    assert 0 <= res["heldout"]["threshold_for_top_10_percent"] <= 1
    assert res["ood"]["n_math"] == 5


def test_llm_seeds_split_by_threshold(tmp_path):
    rows = [{"text": f"doc {i}", "math_score_llm": i} for i in range(6)] + [{"text": "unscored"}]
    pos, neg = llm_seed_split(write_jsonl(tmp_path / "seeds.jsonl", rows), threshold=3)
    assert [d.text for d in pos] == ["doc 3", "doc 4", "doc 5"]
    assert [d.text for d in neg] == ["doc 0", "doc 1", "doc 2"]
    with pytest.raises(InputError, match="math_score_llm"):
        llm_seed_split(write_jsonl(tmp_path / "plain.jsonl", [{"text": "a"}]))


def test_recall_round_finds_math_domains_and_records_the_round(model, corpora, tmp_path):
    import shutil

    from classifiers.recall import recall_round

    local = tmp_path / "model.bin"
    for suffix in (".bin", ".card.json", ".train-pages.tsv"):
        shutil.copy(model.with_suffix(suffix), local.with_suffix(suffix))
    rows = [
        {"text": t, "url": f"https://www.mathsite.org/questions/{i}"}
        for i, t in enumerate(docs(MATH_WORDS, 6, 20))
    ]
    rows += [
        {"text": t, "url": f"https://mathsite.org/questions/x{i}"}
        for i, t in enumerate(docs(TEXT_WORDS, 2, 21))
    ]
    rows += [{"text": t, "url": f"https://news.com/a/{i}"} for i, t in enumerate(docs(TEXT_WORDS, 6, 22))]
    summary = recall_round(
        local, [write_jsonl(tmp_path / "crawl.jsonl", rows)], tmp_path / "round1", domain_share=0.5
    )
    domains = json.loads((tmp_path / "round1" / "domains.json").read_text())
    assert list(domains) == ["mathsite.org"] and domains["mathsite.org"]["patterns"] == [
        "mathsite.org/questions/"
    ]
    cands = [json.loads(x) for x in (tmp_path / "round1" / "candidates.jsonl").read_text().splitlines()]
    assert {c["url"] for c in cands} == {
        "https://mathsite.org/questions/x0",
        "https://mathsite.org/questions/x1",
    }
    assert summary["candidates"] == 2
    card = json.loads(card_path(local).read_text())
    assert [r["round"] for r in card["recall_rounds"]] == [1]


def test_bad_model_files_are_clear_errors(model, tmp_path):
    with pytest.raises(ModelError, match="not found"):
        MathClassifier(tmp_path / "missing.bin")
    corrupt = tmp_path / "corrupt.bin"
    corrupt.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(ModelError, match="not a readable fastText model"):
        MathClassifier(corrupt)
    import subprocess
    import sys

    from classifiers.train import _FIT_SCRIPT

    other = tmp_path / "other.bin"
    train = tmp_path / "t.txt"
    train.write_text("__label__sports a b c\n__label__news d e f\n" * 20)
    kwargs = {"input": str(train), "dim": 4, "epoch": 1, "minCount": 1, "wordNgrams": 2, "bucket": 1000}
    # a fresh interpreter, as training does: this fastText wheel can fail after other trainings in-process
    subprocess.run([sys.executable, "-c", _FIT_SCRIPT, json.dumps(kwargs), str(other)], check=True)
    with pytest.raises(ModelError, match="not a math classifier"):
        MathClassifier(other)


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_input(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="no row has a `text` field"):
        read_input(write_jsonl(tmp_path / "x.jsonl", [{"title": "a"}]))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no .html pages"):
        read_input(tmp_path / "empty")


def test_train_cli_writes_model_and_card(corpora, tmp_path):
    from mathmix.cli import app

    out = tmp_path / "m.bin"
    args = [
        "classifier",
        "train",
        "-p",
        str(corpora["math"]),
        "-n",
        str(corpora["text"]),
        "-o",
        str(out),
        "--dim",
        "8",
        "--epoch",
        "5",
        "--bucket",
        "5000",
        "--word-ngrams",
        "1",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert out.is_file() and card_path(out).is_file()
    bad = CliRunner().invoke(
        app, ["classifier", "train", "-p", str(tmp_path / "none"), "-n", str(corpora["text"]), "-o", str(out)]
    )
    assert bad.exit_code == 2 and "no such file" in " ".join(bad.output.split())


def test_words_seen_in_one_training_document_become_unk(tmp_path):
    from classifiers.data import LabelledDoc
    from classifiers.train import build_training_file

    pos = [LabelledDoc(f"prove the lemma zeta{'abc'[i]} twice", "m", f"m{i}") for i in range(3)]
    pos.append(LabelledDoc("prove the lemma onlyhere", "m", "m9"))
    neg = [LabelledDoc(f"the match report city{'xy'[i // 2]}", "n", f"n{i}") for i in range(4)]
    path = tmp_path / "train.txt"
    build_training_file(pos, neg, TrainSettings(min_doc_freq=2), path)
    words = path.read_text().split()
    assert "onlyhere" not in words and "zetaa" not in words and "<unk>" in words  # one document each
    assert "cityx" in words and "cityy" in words and "lemma" in words  # two documents or more


def test_unknown_words_are_scored_as_unk(model):
    clf = MathClassifier(model)
    assert json.loads(card_path(model).read_text())["preprocess"]["unknown_token"] == "<unk>"
    assert "<unk>" in clf.vocabulary and "qwzx" not in clf.vocabulary
    unseen = clf.score_lines(["qwzx " * 20 + "theorem"])
    as_unk = clf.score_lines(["<unk> " * 20 + "theorem"])
    skipped = clf.score_lines(["theorem"])
    assert unseen[0] == pytest.approx(as_unk[0]) and unseen[0] != pytest.approx(skipped[0])


def _stage_folder(path: Path, rows: list[dict]) -> Path:
    """A stage folder as the web stage writes it: data/ plus a summary, logs and rejects that are not input."""
    (path / "data").mkdir(parents=True)
    (path / "logs").mkdir()
    (path / "rejects").mkdir()
    write_jsonl(path / "data" / "00000.jsonl", rows)
    (path / "summary.json").write_text(json.dumps({"docs_in": len(rows) + 1, "docs_out": len(rows)}))
    (path / "logs" / "executor.json").write_text(json.dumps({"pipeline": []}))
    write_jsonl(path / "rejects" / "00000.jsonl", [{"text": "dropped page", "math_score_llm": 5}])
    return path


def test_a_stage_folder_is_read_as_its_data(model, tmp_path):
    from mathmix.cli import app

    rows = [
        {"text": t, "url": f"https://m.org/q/{i}", "math_score_llm": 4}
        for i, t in enumerate(docs(MATH_WORDS, 3, 30))
    ]
    stage = _stage_folder(tmp_path / "web", rows)
    assert [d.text for d in read_input(stage)] == [r["text"] for r in rows]  # no rejects, summary or logs
    pos, neg = llm_seed_split(stage)
    assert len(pos) == 3 and neg == []
    result = CliRunner().invoke(app, ["classifier", "score", str(model), str(stage)])
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 3


def test_unreadable_files_and_unwritable_outputs_are_one_line_errors(model, corpora, tmp_path):
    from mathmix.cli import app

    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"x")
    with pytest.raises(InputError, match="corrupt.parquet: cannot be read as parquet"):
        read_input(corrupt)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(InputError, match="broken.json:1: not valid JSON"):
        read_input(broken)
    result = CliRunner().invoke(app, ["classifier", "score", str(model), str(corrupt)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "corrupt.parquet: cannot be read" in " ".join(result.output.split())
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out in (afile / "m.bin", tmp_path):
        args = ["classifier", "train", "-p", str(corpora["math"]), "-n", str(corpora["text"]), "-o", str(out)]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert isinstance(result.exception, SystemExit)  # typer.Exit, not a traceback
        assert str(out) in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--holdout", "1.5", "--holdout must be in [0, 1)"),
        ("--holdout", "1", "--holdout must be in [0, 1)"),
        ("--epoch", "0", "--epoch must be >= 1"),
        ("--dim", "0", "--dim must be >= 1"),
        ("--lr", "0", "--lr must be > 0"),
        ("--bucket", "0", "--bucket must be >= 1"),
        ("--min-doc-freq", "0", "--min-doc-freq must be >= 1"),
        ("--target-precision", "1.5", "--target-precision must be in (0, 1]"),
        ("--max-docs-per-input", "-1", "--max-docs-per-input"),
    ],
)
def test_train_options_out_of_range_are_named(corpora, tmp_path, option, value, message):
    from mathmix.cli import app

    out = tmp_path / "m.bin"
    args = ["classifier", "train", "-p", str(corpora["math"]), "-n", str(corpora["text"]), "-o", str(out)]
    result = CliRunner().invoke(app, [*args, option, value])
    assert result.exit_code == 2 and message in " ".join(result.output.split())
    assert not out.exists()  # rejected before any training


def test_holdout_that_leaves_no_training_page_says_so(tmp_path):
    from classifiers.data import LabelledDoc
    from classifiers.train import TrainData

    pos = [LabelledDoc("prove the lemma", "m", f"m{i}") for i in range(2)]
    neg = [LabelledDoc("the match report", "n", f"n{i}") for i in range(2)]
    with pytest.raises(ValueError, match="holdout 0.9 leaves no math page for training"):
        train_model(TrainData(pos, neg), tmp_path / "m.bin", TrainSettings(holdout=0.9))


def test_llm_seed_classes_are_counted_apart_in_the_card(corpora, tmp_path):
    seeds = [{"text": t, "math_score_llm": 5} for t in docs(MATH_WORDS, 6, 40)]
    seeds += [{"text": t, "math_score_llm": 0} for t in docs(TEXT_WORDS, 6, 41)]
    path = write_jsonl(tmp_path / "seeds.jsonl", seeds)
    data = load_training_data([corpora["math"]], [corpora["text"]], [path], 3.0)
    card = train_model(data, tmp_path / "m.bin", FAST)
    name = f"{tmp_path.name}/seeds.jsonl"
    by_source = card["counts"]["by_source"]
    assert by_source[f"{name}:llm-math"] == {"label": "math", "docs": 6}
    assert by_source[f"{name}:llm-nonmath"] == {"label": "nonmath", "docs": 6}
    assert sum(v["docs"] for v in by_source.values()) == card["counts"]["positive_docs"] + 46


def test_a_source_in_both_classes_is_counted_once_per_class():
    from classifiers.data import LabelledDoc
    from classifiers.train import _source_counts

    pos = [LabelledDoc("a", "same", "p1"), LabelledDoc("b", "only", "p2")]
    neg = [LabelledDoc("c", "same", "p3"), LabelledDoc("d", "same", "p4")]
    assert _source_counts(pos, neg) == {
        "same [math]": {"label": "math", "docs": 1},
        "only": {"label": "math", "docs": 1},
        "same [nonmath]": {"label": "nonmath", "docs": 2},
    }


def test_math_layout_one_problem_per_json_file_is_read(tmp_path):
    folder = tmp_path / "MATH" / "algebra"
    folder.mkdir(parents=True)
    for i in range(3):
        (folder / f"{i}.json").write_text(
            json.dumps({"problem": f"Solve $x+{i}=0$.", "solution": f"$x=-{i}$"})
        )
    docs = read_input(tmp_path / "MATH")
    assert len(docs) == 3 and all("Solve" in d.text for d in docs)


def test_records_that_are_not_objects_are_named(tmp_path):
    (tmp_path / "nums.json").write_text("[1, 2, 3]")
    (tmp_path / "mixed.jsonl").write_text('{"text": "a"}\n[1, 2]\n')
    with pytest.raises(InputError, match=r"nums.json: record 1 is not a JSON object"):
        read_input(tmp_path / "nums.json")
    with pytest.raises(InputError, match=r"mixed.jsonl: line 2 is not a JSON object"):
        read_input(tmp_path / "mixed.jsonl")
    # A JSONL-named file holding an array is read as one array: its positions are records, not lines.
    (tmp_path / "array.jsonl").write_text('[{"text": "a"},\n\n 2]')
    with pytest.raises(InputError, match=r"array.jsonl: record 2 is not a JSON object"):
        read_input(tmp_path / "array.jsonl")


def test_train_with_one_class_is_refused_before_reading(corpora, tmp_path, monkeypatch):
    import classifiers.data

    monkeypatch.setattr(classifiers.data, "read_input", lambda *a, **k: pytest.fail("read the inputs"))
    for option in ("-p", "-n"):
        args = ["classifier", "train", option, str(corpora["math"]), "-o", str(tmp_path / "m.bin")]
        result = CliRunner().invoke(app, args)
        words = " ".join(result.output.split())
        assert result.exit_code == 2 and "give math inputs (-p) and non-math inputs (-n)" in words, words


def test_an_input_with_no_document_is_named(corpora, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    args = [
        "classifier",
        "train",
        "-p",
        str(empty),
        "-n",
        str(corpora["text"]),
        "-o",
        str(tmp_path / "m.bin"),
    ]
    result = CliRunner().invoke(app, args)
    words = " ".join(result.output.split())
    assert result.exit_code == 2 and f"no math document in -p {empty}" in words, words


def test_skipped_rows_are_named_by_their_line_from_1_as_errors_are(tmp_path):
    from classifiers.data import Skipped

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "rows.jsonl").write_text('{"text": "a b"}\n\n{"x": 1}\n{"text": " "}\n')
    skipped = Skipped()
    assert len(read_input(folder, skipped)) == 1
    assert skipped.as_dict() == {
        "empty_text": {"n": 1, "examples": ["rows.jsonl line 4"]},
        "no_text_field": {"n": 1, "examples": ["rows.jsonl line 3"]},
    }
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["a", None]}), folder / "t.parquet")
    skipped = Skipped()
    read_input(folder / "t.parquet", skipped)
    assert skipped.as_dict()["no_text_field"]["examples"] == ["t.parquet row 2"]
