"""A few-shot prompt longer than the model's context: whole exemplars are dropped (oldest first) until it fits,
never half an exemplar with no header; the shots each item was given are recorded."""

from __future__ import annotations

import json

import pytest

from evals.bench import run_bench


def _write_jsonl(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture()
def bench_dir(tmp_path):
    root = tmp_path / "bench"
    _write_jsonl(
        root / "gsm8k/train.jsonl",
        [{"question": f"What is {i}+{i}?", "answer": f"{i}+{i}={2 * i}\n#### {2 * i}"} for i in range(10)],
    )
    _write_jsonl(
        root / "gsm8k/test.jsonl",
        [{"question": f"What is {i}*2?", "answer": f"#### {2 * i}"} for i in range(3)],
    )
    return root


def _seen_prompts(generator, monkeypatch) -> list[str]:
    """The prompts the model is given (decoded from its input ids, padding aside), filled as it generates."""
    seen: list[str] = []
    real = generator.model.generate

    def record(**kwargs):
        for ids, mask in zip(kwargs["input_ids"].tolist(), kwargs["attention_mask"].tolist(), strict=True):
            seen.append(generator.tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m]))
        return real(**kwargs)

    monkeypatch.setattr(generator.model, "generate", record)
    return seen


def test_a_long_prompt_drops_whole_exemplars_oldest_first(tiny_model_dir, bench_dir, tmp_path, monkeypatch):
    """The prompt was cut from the left mid-exemplar: the model saw half an exemplar with no `Question:` header."""
    from evals.generate import TransformersGenerator

    generator = TransformersGenerator(tiny_model_dir, batch_size=4, device="cpu")
    generator.max_positions = 4 + 90  # room for a few of the 8 exemplars, not all
    seen = _seen_prompts(generator, monkeypatch)
    summary = run_bench(tiny_model_dir, [("gsm8k", 8)], bench_dir, tmp_path / "out", max_new_tokens=4,
                        generator=generator)  # fmt: skip
    assert len(seen) == 3
    for prompt in seen:
        assert prompt.startswith("Question: "), prompt[:60]
        assert len(generator.tokenizer(prompt)["input_ids"]) <= 90
    result = json.loads((tmp_path / "out/gsm8k.json").read_text())
    used = [item["shots"] for item in result["items"]]
    assert all(0 < k < 8 for k in used)
    assert [p.count("Question: ") - 1 for p in seen] == used  # each item's exemplars, its own question aside
    assert result["truncated_prompts"] == 3 and summary["benchmarks"]["gsm8k"]["truncated_prompts"] == 3
    assert result["shots_used"] == {str(k): used.count(k) for k in set(used)}


def test_with_no_exemplar_left_the_question_is_cut_from_the_left(
    tiny_model_dir, bench_dir, tmp_path, monkeypatch
):
    from evals.generate import TransformersGenerator

    generator = TransformersGenerator(tiny_model_dir, batch_size=4, device="cpu")
    generator.max_positions = 4 + 8  # not even the question fits
    seen = _seen_prompts(generator, monkeypatch)
    run_bench(
        tiny_model_dir, [("gsm8k", 2)], bench_dir, tmp_path / "out", max_new_tokens=4, generator=generator
    )
    result = json.loads((tmp_path / "out/gsm8k.json").read_text())
    assert [item["shots"] for item in result["items"]] == [0, 0, 0]
    assert all("Question:" not in p[1:] and p.endswith("Answer:") for p in seen)
    assert result["truncated_prompts"] == 3
