"""Few-shot eval harness: answer extraction and math-verify grading on hand-written outputs, benchmark field
mapping, exemplar drawing, and the whole `mathmix eval bench` run on a tiny random Llama."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.bench import run_bench
from evals.benchmarks import build_prompt, load_benchmark, load_exemplars, normalize, parse_benchmarks
from evals.grading import (
    GRADER,
    answers_match,
    boxed_reward,
    cut_at_next_problem,
    extract_answer,
    gold_answer_from_solution,
    grade,
    last_boxed,
    truncate_at_stops,
)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("so x = \\boxed{\\frac{1}{2}}.", ("\\frac{1}{2}", "boxed")),
        ("first \\boxed{3} then \\boxed{\\sqrt{2}}", ("\\sqrt{2}", "boxed")),
        ("She sold 48 + 24 = 72 clips.\n#### 72", ("72", "hashes")),
        ("48 / 2 = 24. The answer is 72.", ("72", "answer_is")),
        ("Therefore the final answer is $\\pi$.", ("\\pi", "answer_is")),
        ("I am not sure.", (None, "none")),
        # a unit after the number: math-verify read "18 dollars" as a product of letters and graded it wrong
        ("He pays 9 * 2 = 18. The answer is 18 dollars.", ("18", "answer_is")),
        ("The answer is $40 miles per hour.", ("40", "answer_is")),
        ("#### 1/2 cup", ("1/2", "hashes")),
        ("The answer is 2 pi.", ("2 pi", "answer_is")),  # math words after a number stay
        ("The answer is 3 and 4.", ("3 and 4", "answer_is")),
    ],
)
def test_extract_answer(output, expected):
    assert extract_answer(output) == expected


def test_a_unit_after_the_number_is_graded_on_the_number():
    assert grade("The answer is 18 dollars.", "18")["correct"]
    assert grade("#### 2,000 meters", "2000")["correct"]


@pytest.mark.parametrize(
    ("output", "extracted", "gold"),
    [
        # 9f29def cut these words as units: "2 million" was graded right against a gold 2
        ("The answer is 2 million.", "2 million", "2"),
        ("#### 3 thousand", "3 thousand", "3"),
        ("The answer is 2 thirds.", "2 thirds", "2"),
        ("#### 5 factorial", "5 factorial", "5"),
        ("#### 4 dozen", "4 dozen", "4"),
        ("The answer is 3 quarters.", "3 quarters", "3"),
        ("#### 1 half", "1 half", "1"),
        ("#### 7 hundredths", "7 hundredths", "7"),
    ],
)
def test_a_word_that_changes_the_value_keeps_the_answer_whole(output, extracted, gold):
    assert extract_answer(output)[0] == extracted
    assert not grade(output, gold)["correct"]
    assert gold_answer_from_solution(f"Some working.\n{output}") == extracted  # gold answers too


def test_units_are_still_cut_and_percent_is_read_by_math_verify():
    assert extract_answer("The answer is 90 degrees.")[0] == "90"  # a unit, not a value word
    assert extract_answer("#### 40 per hour")[0] == "40" and extract_answer("#### 2 seconds")[0] == "2"
    assert grade("The answer is 50 percent.", "50")["correct"]  # math-verify reads it as 50%
    assert extract_answer("#### 5 per cent")[0] == "5 per cent" and grade("#### 5 per cent", "5")["correct"]


def test_last_boxed_balances_braces():
    assert last_boxed("\\boxed{\\frac{a}{b}+\\{1\\}}") == "\\frac{a}{b}+\\{1\\}"
    assert last_boxed("no box") is None


@pytest.mark.parametrize(
    ("predicted", "gold", "correct"),
    [
        ("0.5", "\\frac{1}{2}", True),
        ("27", "27", True),
        ("(3, \\pi/2)", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
        ("19", "18", False),
        (None, "18", False),
    ],
)
def test_math_verify_grading(predicted, gold, correct):
    assert answers_match(predicted, gold) is correct


def test_grade_and_reward_use_the_extracted_answer():
    # grade reads up to a made-up next problem itself (it read this one's answer, 4, before mathmix-grading/4)
    assert grade("The answer is 18.\n\nQuestion: 2+2? The answer is 4.", "4")["extracted"] == "18"
    cut = truncate_at_stops("The answer is 18.\n\nQuestion: 2+2? The answer is 4.", ["\n\nQuestion:"])
    assert grade(cut, "18")["correct"]
    assert boxed_reward("... \\boxed{27.0}", "27") == 1.0
    assert boxed_reward("The answer is 27", "27") == -1.0  # the RL reward reads \\boxed{} only


def test_normalize_maps_every_benchmark_shape():
    gsm = normalize({"question": "q", "answer": "steps\n#### 1,000"}, 0)
    assert gsm["answer"] == "1,000" and gsm["solution"].startswith("steps")
    assert normalize({"problem": "p", "answer": 27.0}, 1)["answer"] == "27"  # AMC23 floats
    assert normalize({"question": "p", "final_answer": ["2"], "id": 7}, 2) == {
        "id": "7",
        "question": "p",
        "answer": "2",
        "solution": "",
    }
    assert normalize({"problem": "p", "solution": "so \\boxed{5}"}, 3)["answer"] == "5"  # MATH train
    assert normalize({"problem": "p"}, 4) is None


def _write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture()
def bench_dir(tmp_path) -> Path:
    """A bench folder in the quickstart sample's layout: gsm8k train/test, math500 test, math train."""
    root = tmp_path / "bench"
    _write_jsonl(
        root / "gsm8k/train.jsonl",
        [
            {"question": f"What is {i}+{i}?", "answer": f"{i}+{i}=<<{i}+{i}={2 * i}>>{2 * i}\n#### {2 * i}"}
            for i in range(10)
        ],
    )
    _write_jsonl(
        root / "gsm8k/test.jsonl",
        [{"question": f"What is {i}*2?", "answer": f"#### {2 * i}"} for i in range(4)],
    )
    _write_jsonl(
        root / "math500/test.jsonl",
        [{"problem": f"Find {i}/2.", "solution": "", "answer": f"\\frac{{{i}}}{{2}}"} for i in range(1, 4)],
    )
    _write_jsonl(
        root / "math/train.jsonl",
        [{"problem": f"Find {i}-1.", "solution": f"It is \\boxed{{{i - 1}}}."} for i in range(8)],
    )
    return root


def test_exemplars_are_seeded_and_come_from_the_train_split(bench_dir, tmp_path):
    first = load_exemplars("gsm8k", bench_dir, 4, seed=0)
    assert first == load_exemplars("gsm8k", bench_dir, 4, seed=0)
    assert len(first) == 4 and all("+" in e["question"] for e in first)
    prompt = build_prompt(load_benchmark("gsm8k", bench_dir)[0], first, "gsm8k")
    assert prompt.count("Question:") == 5 and prompt.endswith("Answer:") and "<<" not in prompt
    user = tmp_path / "shots.jsonl"
    _write_jsonl(user, [{"problem": "Mine?", "solution": "\\boxed{1}", "benchmark": "math500"}])
    assert load_exemplars("math500", bench_dir, 4, prompt_file=user)[0]["question"] == "Mine?"
    assert "\\boxed{}" in build_prompt({"question": "q"}, [], "math")  # zero-shot instruction


def test_parse_benchmarks():
    assert parse_benchmarks("octothinker", None)[0] == ("gsm8k", 8)
    assert parse_benchmarks(None, "math500,amc23:2") == [("math500", 4), ("amc23", 2)]
    with pytest.raises(ValueError, match="unknown benchmark"):
        parse_benchmarks(None, "nope")


class HandWritten:
    """Test double for a generator: returns fixed outputs, so grading and bookkeeping are checked exactly."""

    backend = "hand-written"

    def __init__(self, outputs: list[str]):
        self.outputs = outputs

    def generate(self, prompts, max_new_tokens, stops, progress=None):
        return [truncate_at_stops(o, stops) for o in self.outputs[: len(prompts)]]


def test_run_bench_grades_hand_written_outputs(bench_dir, tmp_path):
    outputs = [
        "0*2 = 0. The answer is 0.",
        "The answer is 3.\n\nQuestion: x? The answer is 2.",
        "#### 4",
        "no idea",
    ]
    summary = run_bench("hand", [("gsm8k", 2)], bench_dir, tmp_path / "out", generator=HandWritten(outputs))
    assert summary["benchmarks"]["gsm8k"] == {"shots": 2, "n": 4, "correct": 2, "accuracy": 0.5}
    result = json.loads((tmp_path / "out/gsm8k.json").read_text())
    assert [i["correct"] for i in result["items"]] == [True, False, True, False]
    assert result["extraction"] == {"answer_is": 2, "hashes": 1, "none": 1}


def test_test_records_without_a_question_or_answer_are_counted_not_lost(bench_dir, tmp_path, capsys):
    test = bench_dir / "gsm8k/test.jsonl"
    test.write_text(
        test.read_text()
        + '{"question": "What is 9*2?"}\n{"answer": "#### 3"}\n{"question": "q", "answer": ""}\n'
    )
    summary = run_bench(
        "hand", [("gsm8k", 0)], bench_dir, tmp_path / "out", generator=HandWritten(["#### 0"] * 4)
    )
    row = summary["benchmarks"]["gsm8k"]
    assert row["n"] == 4 and row["dropped_items"] == {"no_answer": 2, "no_question": 1}
    assert json.loads((tmp_path / "out/gsm8k.json").read_text())["dropped_items"] == row["dropped_items"]
    assert "gsm8k: 3 record(s) of" in capsys.readouterr().err
    test.write_text('{"question": "What is 9*2?"}\n')  # nothing usable: said, not "no test set"
    with pytest.raises(ValueError, match="gsm8k: no usable item in .*test.jsonl \\(no_answer: 1\\)"):
        run_bench("hand", [("gsm8k", 0)], bench_dir, tmp_path / "o2", generator=HandWritten([]))


class Counting(HandWritten):
    """HandWritten that records the prompts it was asked to answer."""

    def __init__(self, outputs: list[str]):
        super().__init__(outputs)
        self.prompts: list[str] = []

    def generate(self, prompts, max_new_tokens, stops, progress=None):
        self.prompts += prompts
        return super().generate(prompts, max_new_tokens, stops, progress)


def test_a_rerun_regrades_results_of_another_grader_without_generating_again(bench_dir, tmp_path, capsys):
    out, plan = tmp_path / "out", [("gsm8k", 0)]
    outputs = ["#### 0", "The answer is 2 million.", "#### 4", "#### 6"]  # golds 0, 2, 4, 6
    run_bench("hand", plan, bench_dir, out, generator=Counting(outputs))
    result = json.loads((out / "gsm8k.json").read_text())
    assert result["grader"] == GRADER and result["correct"] == 3
    assert json.loads((out / "results.json").read_text())["grader"] == GRADER
    # as written by 9f29def's grader: no version recorded, "2 million" graded right against 2
    del result["grader"]
    result["items"][1]["correct"], result["items"][1]["extracted"] = True, "2"
    result["correct"], result["accuracy"] = 4, 1.0
    (out / "gsm8k.json").write_text(json.dumps(result))
    summary = run_bench("hand", plan, bench_dir, out, generator=Counting([]))  # nothing generated
    assert summary["benchmarks"]["gsm8k"] == {"shots": 0, "n": 4, "correct": 3, "accuracy": 0.75}
    regraded = json.loads((out / "gsm8k.json").read_text())
    assert regraded["grader"] == GRADER and regraded["items"][1]["extracted"] == "2 million"
    assert [i["output"] for i in regraded["items"]] == outputs and regraded["backend"] == "hand-written"
    assert (
        f"gsm8k: its kept outputs were graded by a grader before versions were recorded; regraded by {GRADER}"
        in (capsys.readouterr().err.replace("\n", " "))
    )
    regraded["grader"], regraded["items"][0]["id"] = (
        "mathmix-grading/1",
        "not-an-item",
    )  # items that do not line up
    (out / "gsm8k.json").write_text(json.dumps(regraded))
    again = Counting(outputs)
    run_bench("hand", plan, bench_dir, out, generator=again)
    assert len(again.prompts) == 4  # evaluated again
    assert json.loads((out / "gsm8k.json").read_text())["items"][0]["id"] != "not-an-item"


def test_a_rerun_keeps_finished_benchmarks_and_another_job_is_refused(bench_dir, tmp_path):
    out, plan = tmp_path / "out", [("gsm8k", 0), ("math500", 0)]
    run_bench("hand", plan, bench_dir, out, generator=Counting(["#### 0"] * 4))
    gsm8k = (out / "gsm8k.json").read_text()
    (out / "math500.json").unlink()  # killed while math500 was generating
    (out / "results.json").unlink()
    again = Counting(["#### 0"] * 4)
    summary = run_bench("hand", plan, bench_dir, out, generator=again)
    assert len(again.prompts) == 3 and all("/2." in p for p in again.prompts)  # math500's 3 items only
    assert (out / "gsm8k.json").read_text() == gsm8k
    assert set(summary["benchmarks"]) == {"gsm8k", "math500"}
    with pytest.raises(ValueError, match="another job than this eval bench .*seed: .*0 -> 1"):
        run_bench("hand", plan, bench_dir, out, seed=1, generator=Counting([]))
    with pytest.raises(ValueError, match="another job than this eval bench .*other input paths"):
        run_bench(str(bench_dir), plan, bench_dir, out, generator=Counting([]))  # another model
    kept = (out / "results.json").read_text()
    run_bench("hand", plan, bench_dir, out, generator=Counting([]))  # all kept: the real timing stays
    assert json.loads((out / "results.json").read_text())["seconds"] == json.loads(kept)["seconds"]
    recipe_stage = tmp_path / "run" / "decont"
    recipe_stage.mkdir(parents=True)
    (recipe_stage / "summary.json").write_text("{}")
    (recipe_stage / "job.json").write_text('{"inputs": [], "settings": {}}')
    with pytest.raises(ValueError, match="it holds the output of another command"):
        run_bench("hand", plan, bench_dir, recipe_stage, generator=Counting([]))  # replaced decont's record


def test_nothing_to_evaluate_and_a_bad_prompt_file_fail_before_any_generation(bench_dir, tmp_path):
    (bench_dir / "math/train.jsonl").unlink()
    generator = Counting(["#### 0"] * 4)
    with pytest.raises(ValueError, match="nothing to evaluate under .*bench: math500: no training split"):
        run_bench("hand", [("math500", 2)], bench_dir, tmp_path / "out", generator=generator)
    shots = tmp_path / "shots.jsonl"
    _write_jsonl(shots, [{"question": "q?", "solution": "#### 1", "benchmark": "gsm8k"}])
    with pytest.raises(ValueError, match="no math500 exemplars in"):
        run_bench("hand", [("gsm8k", 1), ("math500", 1)], bench_dir, tmp_path / "o", prompt_file=shots,
                  generator=generator)  # fmt: skip
    assert generator.prompts == [] and not (tmp_path / "o" / "gsm8k.json").exists()


def test_prompts_cut_to_fit_the_model_are_counted_and_said(tiny_model_dir, bench_dir, tmp_path, capsys):
    from evals.generate import TransformersGenerator

    generator = TransformersGenerator(tiny_model_dir, batch_size=4, device="cpu")
    generator.max_positions = 40  # 8-shot GSM8K prompts are far longer than 40 - 4 tokens
    summary = run_bench(tiny_model_dir, [("gsm8k", 8)], bench_dir, tmp_path / "out", max_new_tokens=4,
                        generator=generator)  # fmt: skip
    assert summary["benchmarks"]["gsm8k"]["truncated_prompts"] == 4
    assert json.loads((tmp_path / "out/gsm8k.json").read_text())["truncated_prompts"] == 4
    assert "4 of 4 prompts longer than the model's positions" in capsys.readouterr().err
    generator.max_positions = 4096
    summary = run_bench(tiny_model_dir, [("gsm8k", 8)], bench_dir, tmp_path / "fits", max_new_tokens=4,
                        generator=generator)  # fmt: skip
    assert "truncated_prompts" not in summary["benchmarks"]["gsm8k"]


def test_bench_cli_end_to_end_with_a_tiny_model(tiny_model_dir, bench_dir, tmp_path):
    from mathmix.cli import app

    out = tmp_path / "results"
    args = [
        "eval",
        "bench",
        str(tiny_model_dir),
        "--benchmarks",
        "gsm8k:2,math500:1,aime24",
        "--data-dir",
        str(bench_dir),
        "--limit",
        "2",
        "--max-new-tokens",
        "4",
        "--backend",
        "transformers",
        "-o",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "results.json").read_text())
    assert summary["backend"] == "transformers"
    assert {k: v["n"] for k, v in summary["benchmarks"].items()} == {"gsm8k": 2, "math500": 2}
    assert "aime24" in summary["skipped"]
    items = json.loads((out / "math500.json").read_text())["items"]
    keys = {"id", "question", "gold", "output", "extracted", "method", "correct", "hit_max_new_tokens"}
    assert set(items[0]) == keys
    hits = sum(i["hit_max_new_tokens"] for i in items)
    assert summary["benchmarks"]["math500"]["hit_max_new_tokens"] == hits


def test_bench_cli_names_a_model_it_cannot_load(tmp_path):
    from mathmix.cli import app

    data = tmp_path / "bench"
    _write_jsonl(data / "math500/test.jsonl", [{"problem": "1+1?", "answer": "2"}])
    (tmp_path / "empty_model").mkdir()
    for model, message in (
        (tmp_path / "empty_model", "no config.json"),
        (tmp_path / "nope", "model not found"),
    ):
        result = CliRunner().invoke(
            app,
            [
                "eval",
                "bench",
                str(model),
                "--benchmarks",
                "math500:0",
                "--data-dir",
                str(data),
                "-o",
                str(tmp_path / "out"),
            ],  # fmt: skip
        )
        assert result.exit_code == 2 and message in result.stderr, result.output
        assert not (tmp_path / "out").exists()  # not even OUT/job.json: the job never ran


def test_a_model_that_cannot_load_leaves_no_job_record_in_a_folder_that_was_there(tmp_path):
    data = tmp_path / "bench"
    _write_jsonl(data / "math500/test.jsonl", [{"problem": "1+1?", "answer": "2"}])
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ValueError, match="model not found"):
        run_bench(str(tmp_path / "nope"), [("math500", 0)], data, out, backend="transformers")
    assert list(out.iterdir()) == []


def _bench(args: list[str]):
    from mathmix.cli import app

    return CliRunner().invoke(app, ["eval", "bench", *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--limit", "0"], "--limit must be >= 1 (got 0)"),  # evaluated every item
        (["--limit", "-2"], "--limit must be >= 1 (got -2)"),  # dropped the last two items
        (
            ["--prompt-file", "nope.jsonl"],
            "prompt file not found: nope.jsonl (--prompt-file)",
        ),  # a skip, exit 0
        (["--benchmarks", "gsm8k:x"], "--benchmarks: 'gsm8k:x': shots must be a whole number"),
        (["--suite", "nope"], "--suite: unknown suite 'nope'"),
        (["--benchmarks", "gsm8k:1,gsm8k:2"], "--benchmarks: gsm8k given twice"),  # ran twice, kept one
        (["--suite", "quick", "--benchmarks", "gsm8k"], "--suite and --benchmarks exclude each other"),
    ],
)
def test_bench_cli_rejects_bad_options_in_one_line(bench_dir, tmp_path, args, message):
    result = _bench(["some-model", "--data-dir", str(bench_dir), "-o", str(tmp_path / "o"), *args])
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert "Traceback" not in result.output and not (tmp_path / "o").exists()


def test_limit_below_one_is_refused_by_the_loader(bench_dir):
    assert len(load_benchmark("gsm8k", bench_dir, limit=None)) == 4
    assert len(load_benchmark("gsm8k", bench_dir, limit=3)) == 3
    for limit in (0, -1):
        with pytest.raises(ValueError, match="limit must be >= 1"):
            load_benchmark("gsm8k", bench_dir, limit=limit)


def test_a_data_dir_without_any_test_set_is_an_error_naming_it(tmp_path):
    empty = tmp_path / "bench"
    empty.mkdir()
    with pytest.raises(ValueError, match="no test set under .*bench.*gsm8k/test.jsonl"):
        run_bench("hand", [("gsm8k", 0)], empty, tmp_path / "out", generator=HandWritten([]))
    result = _bench(["some-model", "--data-dir", str(empty), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "no test set under" in result.stderr, result.output
    assert not (tmp_path / "out" / "results.json").exists()


def test_vllm_backend_without_vllm_names_the_extra(bench_dir, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a)
    )
    cli_out = tmp_path / "ev" / "y"
    result = _bench(["m", "--data-dir", str(bench_dir), "--backend", "vllm", "-o", str(cli_out)])
    assert result.exit_code == 2, result.output
    assert "vLLM is not installed (pip install mathmix[gpu])" in result.stderr
    assert not (tmp_path / "ev").exists()  # refused before OUT (or its job.json) is written
    out = tmp_path / "stage"  # a recipe's eval stage: its folder is there, run_bench is called directly
    out.mkdir()
    with pytest.raises(ValueError, match="vLLM is not installed"):
        run_bench("m", [("gsm8k", 0)], bench_dir, out, backend="vllm")
    assert list(out.iterdir()) == []


def test_prompt_file_without_exemplars_for_a_benchmark_is_an_error(bench_dir, tmp_path):
    shots = tmp_path / "shots.jsonl"
    _write_jsonl(shots, [{"question": "q?", "solution": "#### 1", "benchmark": "gsm8k"}])
    assert load_exemplars("gsm8k", bench_dir, 2, prompt_file=shots)[0]["question"] == "q?"
    with pytest.raises(ValueError, match="no math500 exemplars in .*shots.jsonl"):
        load_exemplars("math500", bench_dir, 2, prompt_file=shots)  # was a silent zero-shot prompt
    shots.write_text('{"question": "q?"\n')
    with pytest.raises(ValueError, match="shots.jsonl:1: not valid JSON"):
        load_exemplars("gsm8k", bench_dir, 2, prompt_file=shots)


def test_default_bench_dir_is_found_from_any_cwd(bench_dir, tmp_path, monkeypatch):
    import evals.bench_dir as where

    monkeypatch.chdir(tmp_path)  # ../shared/data/bench from here does not exist
    monkeypatch.setattr(where, "CHECKOUT_BENCH_DIR", bench_dir)
    assert where.find_bench_dir(None) == bench_dir
    monkeypatch.setattr(where, "CHECKOUT_BENCH_DIR", tmp_path / "absent")
    with pytest.raises(ValueError, match="benchmark folder not found: neither"):
        where.find_bench_dir(None)
    result = _bench(["m", "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "pass --data-dir" in result.stderr, result.output


class WithTokenizer(HandWritten):
    """HandWritten that says, as the real generators do (`cut`), which outputs ran to the budget: those of at least
    max_new_tokens tokens of the tiny model's tokenizer."""

    def __init__(self, outputs: list[str], tokenizer):
        super().__init__(outputs)
        self.tokenizer = tokenizer

    def generate(self, prompts, max_new_tokens, stops, progress=None):
        outputs = super().generate(prompts, max_new_tokens, stops, progress)
        ids = self.tokenizer(self.outputs[: len(prompts)], add_special_tokens=False)["input_ids"]
        self.cut = [len(i) >= max_new_tokens for i in ids]
        return outputs


def test_outputs_cut_by_the_generation_budget_are_counted_marked_and_said(tiny_model_dir, bench_dir, tmp_path,
                                                                           capsys):  # fmt: skip
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    long = " 1 2 3 4 5 6 7 8 9" * 8  # well over 16 tokens
    assert len(tokenizer(long, add_special_tokens=False)["input_ids"]) > 16
    outputs = [
        "The answer is 0.",  # finished
        f"We add{long}",  # ran to the budget: cut
        f"The answer is 4.\n\nQuestion 2: What is{long}",  # finished, then ran on into a made-up problem
        "#### 6",
    ]
    out = tmp_path / "out"
    summary = run_bench("hand", [("gsm8k", 0)], bench_dir, out, max_new_tokens=16,
                        generator=WithTokenizer(outputs, tokenizer))  # fmt: skip
    assert summary["benchmarks"]["gsm8k"]["hit_max_new_tokens"] == 1
    result = json.loads((out / "gsm8k.json").read_text())
    assert result["hit_max_new_tokens"] == 1
    assert [i["hit_max_new_tokens"] for i in result["items"]] == [False, True, False, False]
    assert [i["correct"] for i in result["items"]] == [True, False, True, True]
    assert "gsm8k: 1 of 4 outputs ran to --max-new-tokens 16 unfinished" in capsys.readouterr().err
    # a generator that does not say: no count, rather than a 0 that was never checked
    summary = run_bench("hand", [("gsm8k", 0)], bench_dir, tmp_path / "o2", generator=HandWritten(outputs))
    assert "hit_max_new_tokens" not in summary["benchmarks"]["gsm8k"]
    assert "hit_max_new_tokens" not in json.loads((tmp_path / "o2/gsm8k.json").read_text())
    # regraded by another grader version: the marks stay, the outputs are not generated again
    result["grader"] = "mathmix-grading/3"
    (out / "gsm8k.json").write_text(json.dumps(result))
    summary = run_bench("hand", [("gsm8k", 0)], bench_dir, out, max_new_tokens=16, generator=Counting([]))
    assert summary["benchmarks"]["gsm8k"]["hit_max_new_tokens"] == 1
    regraded = json.loads((out / "gsm8k.json").read_text())
    assert regraded["grader"] == GRADER and [i["hit_max_new_tokens"] for i in regraded["items"]][1]


def test_the_table_shows_cut_prompts_dropped_records_and_budget_cut_outputs(capsys):
    from evals.bench import print_results_table

    summary = {
        "model": "m",
        "backend": "vllm",
        "benchmarks": {
            "gsm8k": {
                "shots": 8,
                "n": 4,
                "correct": 1,
                "accuracy": 0.25,
                "truncated_prompts": 4,
                "hit_max_new_tokens": 3,
            },  # fmt: skip
            "math500": {"shots": 4, "n": 2, "correct": 1, "accuracy": 0.5, "dropped_items": {"no_answer": 2}},
        },
        "skipped": {},
    }
    print_results_table(summary)
    shown = capsys.readouterr().out
    assert "cut at max-new-tokens" in shown and "8*" in shown
    assert "* gsm8k: 4 of 4 prompts lost their oldest exemplars to fit the model" in shown
    assert "math500: 2 test record(s) dropped, not evaluated (no_answer: 2)" in shown
    assert [line.split("│")[-2].strip() for line in shown.splitlines() if "math500 " in line] == ["-"]
    summary["benchmarks"] = {"math500": {"shots": 4, "n": 2, "correct": 1, "accuracy": 0.5}}
    print_results_table(summary)
    shown = capsys.readouterr().out
    assert "cut at" not in shown and "*" not in shown.replace("**", "")


def test_olympiadbench_tolerance_reaches_the_grader(bench_dir, tmp_path):
    _write_jsonl(
        bench_dir / "olympiadbench/test.jsonl",
        [{"id": 2592, "question": "How far?", "final_answer": ["4.2"], "error": "1e-1"},
         {"id": 1, "question": "How far?", "final_answer": ["4.2"], "error": None}],
    )  # fmt: skip
    run_bench(
        "hand",
        [("olympiadbench", 0)],
        bench_dir,
        tmp_path / "out",
        generator=HandWritten(["\\boxed{4.25}"] * 2),
    )
    result = json.loads((tmp_path / "out/olympiadbench.json").read_text())
    assert [i["correct"] for i in result["items"]] == [True, False]


def test_the_transformers_generator_says_which_rows_ran_to_the_budget():
    from evals.generate import ran_to_budget

    ends, stops = {2, 0}, ["\n\nQuestion:"]
    rows = [[5, 6, 7, 8], [5, 6, 2, 0], [5, 6, 7, 8], [5, 6, 7]]
    texts = ["a b c d", "a b", "ab\n\nQuestion: c", "a b c"]
    # full and open; ended by EOS then padded; full but stopped by a stop string; shorter than the budget
    assert ran_to_budget(rows, texts, 4, ends, stops) == [True, False, False, False]
    assert ran_to_budget([[5, 6, 7, 2]], ["a b c"], 4, ends, stops) == [
        False
    ]  # EOS as the last allowed token


def test_budget_cuts_come_from_the_generator_not_a_token_recount(tiny_model_dir, bench_dir, tmp_path):
    from evals.generate import TransformersGenerator

    generator = TransformersGenerator(tiny_model_dir, batch_size=4, device="cpu")
    summary = run_bench(tiny_model_dir, [("gsm8k", 0)], bench_dir, tmp_path / "out", max_new_tokens=6,
                        generator=generator)  # fmt: skip
    items = json.loads((tmp_path / "out/gsm8k.json").read_text())["items"]
    assert len(generator.cut) == len(items) == 4
    # a random tiny model almost never ends an answer: every output it cut short is flagged, and only those
    assert [i["hit_max_new_tokens"] for i in items] == [
        c and cut_at_next_problem(i["output"]) == i["output"]
        for c, i in zip(generator.cut, items, strict=True)
    ]
    assert summary["benchmarks"]["gsm8k"]["hit_max_new_tokens"] == sum(i["hit_max_new_tokens"] for i in items)
    assert any(generator.cut)
