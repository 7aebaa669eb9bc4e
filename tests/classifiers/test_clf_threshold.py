"""The threshold and the headline held-out metrics come from held-out web pages, not from benchmark rows.

`-p html/math -p math_hendrycks/train.jsonl -n html/nonmath` held out 1,500 MATH rows beside 8 math pages: the CLI
printed "held-out pages: precision 0.999, recall 0.986" for pages at precision 0.833, and with 1,508 positives vs
58 negatives the threshold for precision 0.95 could never move from 0.5 (0.75 was needed on the pages).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import classifiers.train as train_module
from classifiers.data import LabelledDoc
from classifiers.model import MathClassifier
from classifiers.train import TrainData, train_model
from mathmix.cli import app
from tests.classifiers.corpus import FAST, MATH_WORDS, TEXT_WORDS, docs, write_jsonl


class Scripted(MathClassifier):
    """The trained model, scoring by a marker in the text: benchmark rows 0.95, math pages 0.9, the hard
    non-math pages 0.7 (`$` amounts, MathJax loaded for nothing), other non-math pages 0.1."""

    def score(self, texts: list[str]) -> np.ndarray:
        marks = (("benchrow", 0.95), ("mathpage", 0.9), ("hardneg", 0.7))
        return np.array([next((s for m, s in marks if m in t), 0.1) for t in texts], dtype=np.float32)


def _data(n_math_pages: int, n_bench: int, n_nonmath: int) -> TrainData:
    math = [LabelledDoc(f"{t}\nmathpage", "html/math", f"m{i}.html", kind="html")
            for i, t in enumerate(docs(MATH_WORDS, n_math_pages, 1))]  # fmt: skip
    bench = [LabelledDoc(f"{t}\nbenchrow", "math/train.jsonl", f"row{i}", kind="bench")
             for i, t in enumerate(docs(MATH_WORDS, n_bench, 2))]  # fmt: skip
    nonmath = [LabelledDoc(f"{t}\n{'hardneg' if i % 2 else ''}", "html/nonmath", f"n{i}.html", kind="html")
               for i, t in enumerate(docs(TEXT_WORDS, n_nonmath, 3))]  # fmt: skip
    return TrainData(math + bench, nonmath)


def test_threshold_is_chosen_on_pages_the_benchmark_rows_measured_apart(tmp_path, monkeypatch):
    monkeypatch.setattr(train_module, "MathClassifier", Scripted)
    said: list[str] = []
    # 24 math pages, 1,000 MATH rows, 40 non-math pages, a quarter held out: 6 + 250 math, 10 non-math (5 hard).
    card = train_model(_data(24, 1000, 40), tmp_path / "m.bin", FAST, say=said.append)
    # Counted with the rows, precision at 0.5 was 256 / 261 = 0.98: the threshold stayed at 0.5.
    assert card["threshold"] == pytest.approx(0.8)  # midway between math pages (0.9) and hard negatives (0.7)
    held, rows = card["metrics"]["heldout"], card["metrics"]["heldout_rows"]
    assert (held["n_math"], held["n_nonmath"], held["precision"], held["recall"]) == (6, 10, 1.0, 1.0)
    assert (rows["n_math"], rows["n_nonmath"], rows["recall"], rows["precision"]) == (250, 0, 1.0, None)
    assert card["counts"]["heldout_pages"] == {"math": 6, "nonmath": 10}
    assert card["counts"]["heldout_rows"] == {"math": 250, "nonmath": 0}
    choice = card["threshold_choice"]
    assert choice["chosen"] and choice["heldout_pages"] == {"math": 6, "nonmath": 10}
    assert said[0].startswith("threshold 0.800: the lowest threshold reaching precision 0.95 on the 6 math")
    assert said[1].startswith("held-out benchmark/LLM-seed rows, not counted in the page metrics (250 math")


def test_too_few_held_out_pages_keep_the_default_and_say_so(tmp_path, monkeypatch):
    monkeypatch.setattr(train_module, "MathClassifier", Scripted)
    said: list[str] = []
    # 8 math pages (2 held out) beside 1,000 MATH rows (250 held out): 252 held-out "math" was enough before.
    card = train_model(_data(8, 1000, 40), tmp_path / "m.bin", FAST, say=said.append)
    assert card["metrics"]["heldout"]["n_math"] == 2  # the headline metrics are the pages' (was 252)
    choice = card["threshold_choice"]
    assert card["threshold"] == 0.5 and not choice["chosen"]
    assert "too few held-out pages" in choice["reason"] and "2 math and 10 non-math" in choice["reason"]
    assert said[0] == f"threshold 0.500: {choice['reason']}"


def test_train_command_says_how_the_threshold_was_set(tmp_path):
    math = write_jsonl(tmp_path / "math.jsonl", [{"text": t, "url": f"https://m.org/{i}"}
                                                 for i, t in enumerate(docs(MATH_WORDS, 12, 1))])  # fmt: skip
    bench = write_jsonl(tmp_path / "bench.jsonl", [{"problem": t[:80], "solution": t[80:]}
                                                   for t in docs(MATH_WORDS, 40, 3)])  # fmt: skip
    text = write_jsonl(tmp_path / "text.jsonl", [{"text": t, "url": f"https://n.com/{i}"}
                                                 for i, t in enumerate(docs(TEXT_WORDS, 12, 2))])  # fmt: skip
    out = tmp_path / "m.bin"
    args = ["classifier", "train", "-o", str(out), "-p", str(math), "-p", str(bench), "-n", str(text)]
    args += ["--dim", "16", "--epoch", "5", "--bucket", "10000", "--word-ngrams", "2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    card = json.loads(out.with_suffix(".card.json").read_text())
    assert card["counts"]["heldout_pages"] == {"math": 2, "nonmath": 2}  # 20% of 12 pages a class
    assert card["counts"]["heldout_rows"] == {"math": 8, "nonmath": 0}
    assert card["metrics"]["heldout"]["n_math"] == 2
    output = " ".join(result.output.split())
    assert "threshold 0.500: the default, not chosen: too few held-out pages" in output
    assert "held-out benchmark/LLM-seed rows, not counted in the page metrics (8 math, 0 non-math)" in output
