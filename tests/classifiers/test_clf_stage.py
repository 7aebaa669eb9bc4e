"""The `classifier` recipe stage on a run folder laid out like the quickstart sample (pages made in the test)."""

from __future__ import annotations

import json
import random

from classifiers.model import MathClassifier
from pipelines.classify import Config, run_stage
from pipelines.executors import ExecutorConfig
from pipelines.stages import StageContext

MATH = (
    "Let $x^2 + y^2 = r^2$ be a circle. Prove that the derivative \\frac{dy}{dx} = -x/y holds. Theorem lemma."
)
NEWS = "The mayor said the city council would vote on the budget next week after the football season ended."


def _page(body: str) -> str:
    return f"<html><head><title>t</title></head><body><article><p>{body}</p></article></body></html>"


def test_stage_trains_model_card_and_summary(tmp_path):
    run = tmp_path / "run"
    rng = random.Random(0)
    for kind, text, n in (("math", MATH, 12), ("nonmath", NEWS, 18)):
        folder = run / "sample" / "html" / kind
        folder.mkdir(parents=True)
        for i in range(n):
            words = text.split()
            rng.shuffle(words)
            (folder / f"{kind}{i}.html").write_text(_page(" ".join(words)))
    bench = run / "sample" / "bench" / "math"
    bench.mkdir(parents=True)
    rows = [
        {"problem": f"Solve $x + {i} = {2 * i}$.", "solution": f"$x = {i}$, so \\boxed{{{i}}}."}
        for i in range(50)
    ]
    (bench / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    out = run / "classifier"
    ctx = StageContext(run_dir=run, out_dir=out, inputs=[], executor=ExecutorConfig())
    summary = run_stage(Config(), ctx)
    assert (out / "model.bin").is_file() and (out / "model.card.json").is_file()
    assert json.loads((out / "summary.json").read_text()) == json.loads(json.dumps(summary))
    assert summary["positive_docs"] == 12 + 50 and summary["negative_docs"] == 18
    assert summary["skipped"] == {}  # what the seed inputs held that was not read, by reason (none here)
    assert summary["docs_in"] == summary["docs_out"] + sum(summary["dropped"].values())
    card = json.loads((out / "model.card.json").read_text())
    assert card["hyperparameters"]["min_count_used"] == 1  # tiny input: minCount lowered
    clf = MathClassifier(out / "model.bin")
    math_score, news_score = clf.score([MATH, NEWS])
    assert math_score > clf.threshold > news_score
