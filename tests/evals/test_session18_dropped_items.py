"""Found by session 18's review of evals: a blank or non-text question or answer (`"   "`, `["a"]`, a mapping) was
evaluated by `eval bench` and trained on by `rl-probe` as its `str`, not dropped under a reason."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evals.bench import run_bench
from evals.benchmarks import load_benchmark, normalize
from evals.grading import truncate_at_stops
from evals.probe_prompts import load_prompts


class HandWritten:
    """Test double for a generator: fixed outputs, and the prompts it was asked to answer."""

    backend = "hand-written"

    def __init__(self, outputs: list[str]):
        self.outputs, self.prompts = outputs, []

    def generate(self, prompts, max_new_tokens, stops, progress=None):
        self.prompts += prompts
        return [truncate_at_stops(o, stops) for o in self.outputs[: len(prompts)]]


def _write_jsonl(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def bench(tmp_path) -> Path:
    root = tmp_path / "bench"
    _write_jsonl(
        root / "gsm8k/train.jsonl",
        [{"question": f"What is {i}+{i}?", "answer": f"{i}+{i}\n#### {2 * i}"} for i in range(4)],
    )
    _write_jsonl(
        root / "gsm8k/test.jsonl",
        [{"question": f"What is {i}*2?", "answer": f"#### {2 * i}"} for i in range(2)],
    )
    return root


# records a test file may hold that have no question or answer to evaluate (blank, or not text)
NOT_ITEMS = [
    ({"problem": "   ", "answer": 1}, "no_question"),
    ({"problem": ["a"], "answer": "1"}, "no_question"),
    ({"question": {"text": "What is 1+1?"}, "answer": "2"}, "no_question"),
    ({"problem": "\n\t", "answer": "2"}, "no_question"),
    ({"problem": "What is 1+1?", "answer": "  "}, "no_answer"),
    ({"problem": "What is 1+1?", "answer": {"value": 2}}, "no_answer"),
    ({"problem": "What is 1+1?", "answer": [{"value": 2}]}, "no_answer"),
    ({"problem": "What is 1+1?", "answer": True}, "no_answer"),
]


@pytest.mark.parametrize(("record", "reason"), NOT_ITEMS)
def test_a_blank_or_non_text_question_or_answer_is_dropped_with_a_reason(tmp_path, record, reason):
    assert normalize(record, 0) is None
    path = _write_jsonl(
        tmp_path / "b/qwen_eval/amc23/test.jsonl", [{"problem": "What is 3+4?", "answer": 7}, record]
    )
    dropped: Counter = Counter()
    items = load_benchmark("amc23", tmp_path / "b", dropped=dropped)
    assert [i["question"] for i in items or []] == ["What is 3+4?"] and dropped == {reason: 1}, path


def test_numbers_as_answers_and_text_questions_are_kept_as_before():
    assert normalize({"problem": "What is 3+4?", "answer": 7.0}, 0)["answer"] == "7"
    assert normalize({"problem": "What is 3+4?", "answer": 1}, 0)["answer"] == "1"
    assert normalize({"problem": "Half?", "answer": 0.5}, 0)["answer"] == "0.5"
    assert normalize({"problem": "Both?", "final_answer": ["$3$", 4]}, 0)["answer"] == "$3$, 4"
    # a blank field gives way to the next one, as an empty one did
    assert (
        normalize({"problem": "  ", "question": "What is 2+2?", "answer": "4"}, 0)["question"]
        == "What is 2+2?"
    )
    # the text is kept as written (its prompt unchanged)
    assert normalize({"problem": " What is 2+2?\n", "answer": " 4 "}, 0) == {
        "id": "0",
        "question": " What is 2+2?\n",
        "answer": " 4 ",
        "solution": "",
    }


def test_bench_counts_a_blank_question_under_dropped_items_and_does_not_evaluate_it(bench, tmp_path):
    _write_jsonl(
        bench / "qwen_eval/amc23/test.jsonl",
        [
            {"problem": "What is 3+4?", "answer": 7.0},
            {"problem": "   ", "answer": 1},
            {"problem": ["a"], "answer": 1},
        ],
    )
    generator = HandWritten(["\\boxed{7}"] * 3)
    summary = run_bench("hand", [("amc23", 0)], bench, tmp_path / "out", generator=generator)
    row = summary["benchmarks"]["amc23"]
    assert row["n"] == 1 and row["dropped_items"] == {"no_question": 2} and len(generator.prompts) == 1


def test_the_probe_prompt_loader_drops_blank_or_non_text_prompts_and_answers(tmp_path):
    path = _write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"prompt": "What is 1+1?", "answer": 2},
            {"prompt": "   ", "answer": "1"},
            {"prompt": ["a"], "answer": "1"},
            {"prompt": "What is 2+2?", "answer": " "},
            {"prompt": "What is 2+2?", "answer": {"v": 4}},
            {"prompt": "What is 2+2?", "answer": ["4"]},
            {"problem": "What is 3+3?", "answer": "6"},
        ],
    )
    dropped: Counter = Counter()
    prompts = load_prompts(path, dropped)
    assert prompts == [
        {"question": "What is 1+1?", "answer": "2"},
        {"question": "What is 2+2?", "answer": "4"},  # a list of final answers, joined as eval bench joins it
        {"question": "What is 3+3?", "answer": "6"},
    ]
    assert dropped == {"no_prompt": 2, "no_answer": 2}


def test_the_probe_reads_olympiadbench_style_final_answer_lists_as_eval_bench_does(tmp_path):
    """A prompt file with `final_answer: ["5"]` (OlympiadBench's form) trained before d1c71c2 and was then refused
    as having `no prompt/answer fields`; its gold is the joined list, as `eval bench` grades it."""
    records = [
        {"question": "What is 1 plus 4?", "final_answer": ["5"]},
        {"question": "Roots?", "final_answer": [1, "-2"]},
    ]
    path = _write_jsonl(tmp_path / "oly.jsonl", records)
    assert load_prompts(path) == [
        {"question": "What is 1 plus 4?", "answer": "5"},
        {"question": "Roots?", "answer": "1, -2"},
    ]
    assert [normalize(r, i)["answer"] for i, r in enumerate(records)] == ["5", "1, -2"]


@pytest.mark.parametrize("blank", ["", "   ", None])
def test_a_blank_answer_falls_back_to_the_solution_as_an_empty_one_does(blank):
    item = normalize({"problem": "x", "answer": blank, "solution": "so \\boxed{3}"}, 0)
    assert item is not None and item["answer"] == "3"
