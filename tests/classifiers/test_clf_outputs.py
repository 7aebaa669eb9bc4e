"""What eval, recall and train leave behind: errors for nothing to measure, whole model sets, guarded folders."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from classifiers.cli import check_plot_not_input, load_training_data
from classifiers.train import train_model
from mathmix.cli import app
from tests.classifiers.corpus import FAST, MATH_WORDS, TEXT_WORDS, docs, write_jsonl


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("trained")
    math = write_jsonl(d / "math.jsonl", [{"text": t, "url": f"https://m{i % 3}.org/q/{i}"} for i, t in
                                     enumerate(docs(MATH_WORDS, 24, 1))])  # fmt: skip
    text = write_jsonl(d / "text.jsonl", [{"text": t, "url": f"https://n{i % 3}.com/a/{i}"} for i, t in
                                     enumerate(docs(TEXT_WORDS, 24, 2))])  # fmt: skip
    model = d / "model" / "model.bin"
    train_model(load_training_data([math], [text], [], 3.0), model, FAST)
    return {"math": math, "text": text, "model": model}


def _words(output: str) -> str:
    return " ".join(output.split())


def test_eval_help_and_check_agree_on_the_target_precision_range(trained):
    help_text = _words(CliRunner().invoke(app, ["classifier", "eval", "--help"]).output)
    assert "0<=x<=1" not in help_text and "(0, 1]" in help_text
    args = ["classifier", "eval", str(trained["model"]), "--math", str(trained["math"])]
    result = CliRunner().invoke(app, [*args, "--target-precision", "0"])
    assert result.exit_code == 2 and "--target-precision must be in (0, 1] (got 0.0)" in _words(result.output)
    result = CliRunner().invoke(app, [*args, "--top-percent", "0"])
    assert result.exit_code == 2 and "--top-percent must be in (0, 100] (got 0.0)" in _words(result.output)
    assert re.search(r"--top-percent.*\(0, 100\]", help_text)


def _training_rows(trained: dict[str, Path], corpus: str) -> list[dict]:
    pages = {
        line.split("\t")[0]
        for line in trained["model"].with_suffix(".train-pages.tsv").read_text().splitlines()
    }
    rows = [json.loads(line) for line in trained[corpus].read_text().splitlines()]
    return [r for r in rows if r["url"] in pages]


def test_eval_of_training_pages_only_is_an_error_not_zero_scores(trained, tmp_path):
    seen = write_jsonl(tmp_path / "seen.jsonl", _training_rows(trained, "text"))
    args = ["classifier", "eval", str(trained["model"]), "--nonmath", str(seen), "--json"]
    result = CliRunner().invoke(app, [*args, "--plot", str(tmp_path / "pr.png")])
    assert result.exit_code == 2, result.output
    words = _words(result.output)
    assert "nothing to evaluate" in words and "all 18 documents" in words and "training pages" in words
    assert "precision" not in words
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    result = CliRunner().invoke(app, [*args[:3], "--math", str(empty), "--plot", str(tmp_path / "pr.png")])
    assert result.exit_code == 2 and "nothing to evaluate" in _words(result.output)
    assert "no documents" in _words(result.output)


def test_eval_of_one_class_draws_no_empty_legend(trained, tmp_path):
    import warnings

    fresh = write_jsonl(tmp_path / "fresh.jsonl", [{"text": t} for t in docs(MATH_WORDS, 4, 50)])
    args = ["classifier", "eval", str(trained["model"]), "--math", str(fresh), "--json"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = CliRunner().invoke(app, [*args, "--plot", str(tmp_path / "pr.png")])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.output.strip().splitlines()[-1])
    assert metrics["n_math"] == 4 and metrics["n_nonmath"] == 0
    # Precision on no non-math page was 1.000, printed as a measure of the model.
    assert metrics["precision"] is None and metrics["f1"] is None and isinstance(metrics["recall"], float)
    words = _words(result.output)
    assert "warning: no non-math documents (--nonmath not given): precision and F1 not measured" in words
    assert not [w for w in caught if "artists" in str(w.message)]
    assert (tmp_path / "pr.png").is_file()


def _train(math: Path, text: Path, out: Path) -> Path:
    train_model(load_training_data([math], [text], [], 3.0), out, FAST)
    return out


@pytest.fixture(scope="module")
def two_sets(trained, tmp_path_factory) -> dict[str, Path]:
    """Two finished models (A: the module's inputs, B: other pages), each with its own card and pages."""
    d = tmp_path_factory.mktemp("sets")
    math_b = write_jsonl(d / "math_b.jsonl", [{"text": t, "url": f"https://b.org/{i}"} for i, t in
                                         enumerate(docs(MATH_WORDS, 20, 60))])  # fmt: skip
    text_b = write_jsonl(d / "text_b.jsonl", [{"text": t, "url": f"https://c.com/{i}"} for i, t in
                                         enumerate(docs(TEXT_WORDS, 20, 61))])  # fmt: skip
    return {"a": trained["model"], "b": _train(math_b, text_b, d / "b" / "model.bin"),
            "math_b": math_b, "text_b": text_b}  # fmt: skip


def _copy_set(model: Path, out: Path) -> Path:
    import shutil

    out.parent.mkdir(parents=True, exist_ok=True)
    for suffix in (".bin", ".card.json", ".train-pages.tsv"):
        shutil.copy(model.with_suffix(suffix), out.with_suffix(suffix))
    return out


def test_a_model_next_to_another_trainings_card_is_refused(two_sets, tmp_path):
    from classifiers.evaluate import training_keys
    from classifiers.model import MathClassifier, ModelError

    out = _copy_set(two_sets["a"], tmp_path / "model.bin")
    out.write_bytes(two_sets["b"].read_bytes())  # what a kill right after the model was rewritten left
    with pytest.raises(ModelError, match="not the model its card"):
        MathClassifier(out)
    result = CliRunner().invoke(app, ["classifier", "score", str(out), str(two_sets["math_b"])])
    assert result.exit_code == 2 and "not the model its card" in _words(result.output)
    out = _copy_set(two_sets["a"], tmp_path / "pages" / "model.bin")
    out.with_suffix(".train-pages.tsv").write_text(two_sets["b"].with_suffix(".train-pages.tsv").read_text())
    with pytest.raises(ModelError, match="not the training pages its card"):
        training_keys(out)


@pytest.mark.parametrize("renames_done", [0, 1, 2])
def test_a_training_killed_while_writing_leaves_a_whole_set_or_a_refused_one(
    two_sets, tmp_path, monkeypatch, renames_done
):
    """Retrain B's inputs over A's set, killed after each rename: never a model that loads with a wrong card."""
    from classifiers.evaluate import training_keys
    from classifiers.model import MathClassifier, ModelError

    out = _copy_set(two_sets["a"], tmp_path / "model.bin")
    real_replace, calls = Path.replace, []

    def replace(self, target):
        if len(calls) == renames_done:
            raise KeyboardInterrupt("killed")
        calls.append(target)
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        _train(two_sets["math_b"], two_sets["text_b"], out)
    monkeypatch.undo()
    try:
        clf = MathClassifier(out)
    except ModelError as err:
        assert "retrain" in str(err)
        return
    whole = next(m for m in (two_sets["a"], two_sets["b"]) if m.read_bytes() == out.read_bytes())
    expected = json.loads(whole.with_suffix(".card.json").read_text())
    assert clf.card["inputs"] == expected["inputs"] and clf.threshold == expected["threshold"]
    assert training_keys(out) == training_keys(whole)


def _web_stage_folder(path: Path) -> Path:
    """A folder as `mathmix web` leaves it: its job record, data/, summary and logs."""
    (path / "data").mkdir(parents=True)
    (path / "logs").mkdir()
    (path / "data" / "000_00000.parquet").write_bytes(b"PAR1")
    (path / "summary.json").write_text(json.dumps({"docs_in": 3, "docs_out": 2}))
    job = {"inputs": ["{run_dir}/math.warc.gz"], "settings": {}, "math_model": None, "tasks": 1}
    (path / "job.json").write_text(json.dumps(job))
    return path


def test_recall_refuses_folders_of_other_output_and_a_rerun_adds_no_round(trained, tmp_path):
    model = _copy_set(trained["model"], tmp_path / "clf" / "model.bin")
    out = tmp_path / "round1"
    args = [
        "classifier",
        "recall",
        str(model),
        "--corpus",
        str(trained["math"]),
        "--corpus",
        str(trained["text"]),
    ]
    first = CliRunner().invoke(app, [*args, "-o", str(out)])
    assert first.exit_code == 0, first.output
    written = {name: (out / name).read_bytes() for name in ("domains.json", "candidates.jsonl")}
    again = CliRunner().invoke(app, [*args, "-o", str(out)])
    assert again.exit_code == 0, again.output
    assert {name: (out / name).read_bytes() for name in written} == written
    rounds = json.loads(model.with_suffix(".card.json").read_text())["recall_rounds"]
    assert [r["round"] for r in rounds] == [1]  # the same round, not a second identical one
    other = CliRunner().invoke(app, [*args, "-o", str(out), "--domain-share", "0.3"])
    assert other.exit_code == 2 and "holds the output of another job" in _words(other.output)
    assert "domain_share" in _words(other.output)
    second = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "round2"), "--domain-share", "0.3"])
    assert second.exit_code == 0, second.output
    rounds = json.loads(model.with_suffix(".card.json").read_text())["recall_rounds"]
    assert [r["round"] for r in rounds] == [1, 2]

    web = _web_stage_folder(tmp_path / "wmath")
    result = CliRunner().invoke(app, [*args, "-o", str(web)])
    assert result.exit_code == 2 and "holds the output of another" in _words(result.output)
    assert not (web / "domains.json").exists() and not (web / "candidates.jsonl").exists()
    stray = tmp_path / "notes"
    stray.mkdir()
    (stray / "todo.txt").write_text("mine")
    result = CliRunner().invoke(app, [*args, "-o", str(stray)])
    assert result.exit_code == 2 and "todo.txt" in _words(result.output)
    assert sorted(p.name for p in stray.iterdir()) == ["todo.txt"]
    rounds = json.loads(model.with_suffix(".card.json").read_text())["recall_rounds"]
    assert len(rounds) == 2


def test_recall_into_its_own_corpus_folder_is_refused(trained, tmp_path):
    model = _copy_set(trained["model"], tmp_path / "clf" / "model.bin")
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    (crawl / "pages.jsonl").write_text(trained["math"].read_text())
    args = ["classifier", "recall", str(model), "--corpus", str(crawl), "-o", str(crawl / "round1")]
    result = CliRunner().invoke(app, args)
    words = _words(result.output)
    assert result.exit_code == 2 and "inside the --corpus input folder" in words, words
    assert "among the --corpus inputs" in words and "corpuss" not in words
    assert not (crawl / "round1").exists()  # a rerun would have read its candidates as corpus


def _train_cli(out: Path, *inputs: str) -> list[str]:
    return ["classifier", "train", *inputs, "-o", str(out), "--dim", "8", "--epoch", "3", "--bucket", "5000"]


def test_train_refuses_an_output_that_is_an_input_or_lies_in_one(trained, tmp_path):
    """-o in/pos.jsonl overwrote the positives with the model; -o posdir/m.bin made the next run read its card
    as a bad file: both are refused in one line before anything is read or written."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    pos = inputs / "pos.jsonl"
    pos.write_bytes(trained["math"].read_bytes())
    result = CliRunner().invoke(app, _train_cli(pos, "-p", str(pos), "-n", str(trained["text"])))
    words = _words(result.output)
    assert result.exit_code == 2 and f"-o {pos} is the positive input {pos}" in words, words
    assert pos.read_bytes() == trained["math"].read_bytes()
    card_named = inputs / "m.card.json"  # a JSON corpus named as the model's card would be
    card_named.write_text(json.dumps([{"text": "x"}]))
    result = CliRunner().invoke(app, _train_cli(inputs / "m.bin", "-p", str(pos), "-n", str(card_named)))
    words = _words(result.output)
    assert result.exit_code == 2 and f"writes {card_named}, the negative input" in words, words
    assert sorted(p.name for p in inputs.iterdir()) == ["m.card.json", "pos.jsonl"]
    result = CliRunner().invoke(
        app, _train_cli(inputs / "m.bin", "-p", str(inputs), "-n", str(trained["text"]))
    )
    words = _words(result.output)
    assert result.exit_code == 2 and f"is inside the positive folder {inputs}" in words, words
    assert sorted(p.name for p in inputs.iterdir()) == ["m.card.json", "pos.jsonl"]


def test_companion_files_replace_only_a_model_suffix():
    from classifiers.model import card_path, pr_plot_path, train_pages_path

    assert card_path("c/model.bin") == Path("c/model.card.json")  # the files users and docs have
    assert card_path("c/m.FTZ") == Path("c/m.card.json") and card_path("c/m") == Path("c/m.card.json")
    assert card_path("mdl/clf.v1") == Path("mdl/clf.v1.card.json")
    assert train_pages_path("mdl/clf.v1") == Path("mdl/clf.v1.train-pages.tsv")
    assert pr_plot_path("mdl/clf.v1") == Path("mdl/clf.v1.pr.png")
    assert pr_plot_path("c/model.bin") == Path("c/model.pr.png")


def test_models_named_apart_after_the_last_dot_keep_their_own_cards(two_sets, tmp_path):
    """clf.v1 and clf.v2 shared clf.card.json: the first model was then refused as another training's."""
    from classifiers.evaluate import training_keys
    from classifiers.model import MathClassifier

    v1 = _train(two_sets["math_b"], two_sets["text_b"], tmp_path / "mdl" / "clf.v1")
    v2 = _train(two_sets["math_b"], two_sets["text_b"], tmp_path / "mdl" / "clf.v2")
    for model in (v1, v2):
        assert MathClassifier(model).card["model"] == model.name
        assert training_keys(model)
    assert sorted(p.name for p in v1.parent.iterdir()) == [
        "clf.v1", "clf.v1.card.json", "clf.v1.train-pages.tsv", "clf.v2", "clf.v2.card.json",
        "clf.v2.train-pages.tsv"]  # fmt: skip


def test_a_training_over_another_models_card_is_refused(two_sets, tmp_path):
    """a.bin and a.ftz (and a) have one card, a.card.json: the second training is refused before reading."""
    from classifiers.model import MathClassifier, ModelError

    first = _train(two_sets["math_b"], two_sets["text_b"], tmp_path / "a.bin")
    card = first.with_suffix(".card.json").read_bytes()
    for other in ("a.ftz", "a"):
        args = _train_cli(tmp_path / other, "-p", str(two_sets["math_b"]), "-n", str(two_sets["text_b"]))
        result = CliRunner().invoke(app, args)
        words = _words(result.output)
        assert result.exit_code == 2 and f"would replace the card of the model {first}" in words, words
        assert not (tmp_path / other).exists() and first.with_suffix(".card.json").read_bytes() == card
        with pytest.raises(ModelError, match="would replace the card"):
            _train(two_sets["math_b"], two_sets["text_b"], tmp_path / other)
    MathClassifier(first)
    again = CliRunner().invoke(
        app, _train_cli(first, "-p", str(two_sets["math_b"]), "-n", str(two_sets["text_b"]))
    )
    assert again.exit_code == 0, again.output  # retraining a model into its own card


def test_a_set_named_the_older_way_is_still_read(two_sets, tmp_path):
    """Before, every suffix was replaced (clf.v1 -> clf.card.json): such a set is read when its card names it."""
    import shutil

    from classifiers.evaluate import training_keys
    from classifiers.model import MathClassifier

    old = tmp_path / "clf.v1"
    shutil.copy(two_sets["b"], old)
    card = json.loads(two_sets["b"].with_suffix(".card.json").read_text())
    (tmp_path / "clf.card.json").write_text(json.dumps({**card, "model": "clf.v1"}))
    shutil.copy(two_sets["b"].with_suffix(".train-pages.tsv"), tmp_path / "clf.train-pages.tsv")
    clf = MathClassifier(old)
    assert clf.card["model"] == "clf.v1" and clf.threshold == card["threshold"]
    assert training_keys(old) == training_keys(two_sets["b"])
    other = tmp_path / "clf.v2"  # an old card written for another model is not this one's
    shutil.copy(two_sets["b"], other)
    assert MathClassifier(other).card == {}


def test_a_model_without_its_card_says_what_it_assumes(trained, tmp_path):
    """Only model.bin copied to a scoring job scored with 0.5 and without `<unk>`, silently."""
    import shutil

    from classifiers.model import MathClassifier

    alone = tmp_path / "job" / "model.bin"
    alone.parent.mkdir()
    shutil.copy(trained["model"], alone)
    result = CliRunner().invoke(app, ["classifier", "score", str(alone), str(trained["math"])])
    words = _words(result.output)
    assert result.exit_code == 0 and f"warning: {alone} has no card" in words, words
    assert MathClassifier(trained["model"]).card_warning is None
    note = MathClassifier(alone).card_warning
    assert note and f"no card {alone.with_suffix('.card.json')}" in note and "threshold 0.5" in note
    assert "<unk>" in note
    fresh = write_jsonl(tmp_path / "fresh.jsonl", [{"text": t} for t in docs(MATH_WORDS, 4, 51)])
    args = ["classifier", "eval", str(alone), "--math", str(fresh), "--plot", str(tmp_path / "pr.png")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and f"warning: {alone} has no card" in _words(result.output)
    alone.with_suffix(".card.json").write_text("{}")
    result = CliRunner().invoke(app, ["classifier", "score", str(alone), str(trained["math"])])
    assert result.exit_code == 0 and "has an empty card" in _words(result.output)
    args = ["classifier", "recall", str(alone), "--corpus", str(trained["math"]), "-o", str(tmp_path / "r")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "is missing or empty: recall records its round" in _words(result.output)
    assert alone.with_suffix(".card.json").read_text() == "{}"


def test_the_scoring_step_logs_what_a_model_without_its_card_assumes(trained, tmp_path):
    import shutil

    from datatrove.data import Document
    from loguru import logger

    from classifiers.scorer import MathScoreFilter

    alone = tmp_path / "model.bin"
    shutil.copy(trained["model"], alone)
    logged: list[str] = []
    sink = logger.add(lambda message: logged.append(str(message)), level="WARNING")
    try:
        step = MathScoreFilter(alone)
        list(step.run(iter([Document(text=docs(MATH_WORDS, 1, 52)[0], id="a")])))
    finally:
        logger.remove(sink)
    assert step.threshold == 0.5 and any(f"{alone} has no card" in line for line in logged), logged


def test_eval_plot_is_written_where_it_says_and_checked_before_scoring(trained, tmp_path, monkeypatch):
    fresh = write_jsonl(tmp_path / "fresh.jsonl", [{"text": t} for t in docs(MATH_WORDS, 4, 53)])
    args = ["classifier", "eval", str(trained["model"]), "--math", str(fresh)]
    result = CliRunner().invoke(app, [*args, "--plot", str(tmp_path / "curve")])
    assert result.exit_code == 0 and f"PR curve: {tmp_path / 'curve'}" in _words(result.output)
    assert (tmp_path / "curve").read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "curve.png").exists()
    import classifiers.evaluate

    monkeypatch.setattr(classifiers.evaluate, "evaluate_model", lambda *a, **k: pytest.fail("scored"))
    folder = tmp_path / "odir"
    folder.mkdir()
    result = CliRunner().invoke(app, [*args, "--plot", str(folder)])
    words = _words(result.output)
    assert (
        result.exit_code == 2
        and f"{folder}: is a folder; give a file name (e.g. {folder}/model.pr.png)" in words
    )
    assert not (tmp_path / "odir.png").exists()
    (tmp_path / "ofile").write_text("")
    result = CliRunner().invoke(app, [*args, "--plot", str(tmp_path / "ofile" / "x.png")])
    assert result.exit_code == 2 and "cannot create its folder" in _words(result.output), result.output


def test_eval_refuses_a_plot_in_an_input_folder_or_over_an_input(trained, tmp_path, monkeypatch):
    """--plot posdir/pr.png wrote the PNG into a page folder, read by the next eval or train among its pages, as
    train's -o posdir/m.bin was (refused there); --plot over an input file overwrote it. Both are refused in one
    line before anything is scored or written."""
    import classifiers.evaluate

    monkeypatch.setattr(classifiers.evaluate, "evaluate_model", lambda *a, **k: pytest.fail("scored"))
    posdir, negdir = tmp_path / "pos", tmp_path / "neg"
    posdir.mkdir()
    negdir.mkdir()
    write_jsonl(posdir / "m.jsonl", [{"text": t} for t in docs(MATH_WORDS, 4, 54)])
    neg = write_jsonl(negdir / "n.jsonl", [{"text": t} for t in docs(TEXT_WORDS, 4, 55)])
    args = ["classifier", "eval", str(trained["model"]), "--math", str(posdir), "--nonmath", str(neg)]
    for plot in (posdir / "pr.png", posdir / "sub" / "pr.png"):  # a new subfolder is not made either
        result = CliRunner().invoke(app, [*args, "--plot", str(plot)])
        words = _words(result.output)
        assert result.exit_code == 2, words
        assert (
            f"--plot {plot} is inside the math input folder {posdir}: a rerun would find this output" in words
        )
        assert len(result.output.strip().splitlines()) == 1, result.output
    assert sorted(p.name for p in posdir.iterdir()) == ["m.jsonl"]
    # Beside a file input is fine, as for train: a rerun reads that file alone.
    check_plot_not_input(negdir / "pr.png", {"math": [posdir], "non-math": [neg]})
    result = CliRunner().invoke(app, [*args[:5], "--nonmath", str(negdir), "--plot", str(negdir / "pr.png")])
    assert result.exit_code == 2 and f"is inside the non-math input folder {negdir}" in _words(result.output)
    ood = tmp_path / "ood"
    ood.mkdir()
    result = CliRunner().invoke(app, [*args, "--ood-math", str(ood), "--plot", str(ood / "pr.png")])
    assert result.exit_code == 2 and f"is inside the OOD math input folder {ood}" in _words(result.output)
    before = neg.read_bytes()
    result = CliRunner().invoke(app, [*args, "--plot", str(neg)])
    words = _words(result.output)
    assert result.exit_code == 2 and f"--plot {neg} is the non-math input {neg}" in words, words
    assert neg.read_bytes() == before and sorted(p.name for p in negdir.iterdir()) == ["n.jsonl"]


def test_eval_refuses_a_file_given_as_both_classes(trained):
    args = ["classifier", "eval", str(trained["model"]), "--math", str(trained["math"]), "--nonmath"]
    result = CliRunner().invoke(app, [*args, str(trained["math"])])
    words = _words(result.output)
    assert result.exit_code == 2 and "are inputs of both --math and --nonmath" in words, words
    assert "precision" not in words


def test_score_of_no_document_says_so(trained, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = CliRunner().invoke(app, ["classifier", "score", str(trained["model"]), str(empty)])
    assert result.exit_code == 0 and f"warning: no documents to score in {empty}" in _words(result.output)


def test_eval_with_a_two_column_training_pages_file_says_it_matches_by_name(trained, tmp_path):
    model = _copy_set(trained["model"], tmp_path / "old" / "model.bin")
    pages = model.with_suffix(".train-pages.tsv")
    pages.write_text(
        "".join("\t".join(line.split("\t")[:2]) + "\n" for line in pages.read_text().splitlines())
    )
    card = json.loads(model.with_suffix(".card.json").read_text())
    del card["sha256"]["train_pages"]  # as cards were before the digests
    model.with_suffix(".card.json").write_text(json.dumps(card))
    named = [
        {"text": t, "url": r["url"]}
        for t, r in zip(docs(TEXT_WORDS, 30, 80), _training_rows(trained, "text"), strict=False)
    ]
    renamed = write_jsonl(tmp_path / "renamed.jsonl", named)  # new pages under training pages' names
    fresh = write_jsonl(tmp_path / "fresh.jsonl", [{"text": t} for t in docs(MATH_WORDS, 3, 81)])
    args = ["classifier", "eval", str(model), "--math", str(fresh), "--nonmath", str(renamed)]
    result = CliRunner().invoke(app, [*args, "--plot", str(tmp_path / "pr.png")])
    words = _words(result.output)
    assert result.exit_code == 2 and "predates origins and matches pages by name too" in words, words
