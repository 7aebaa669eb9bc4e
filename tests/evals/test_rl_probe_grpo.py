"""The GRPO RL probe: a few TRL steps with a tiny random Llama on CPU, its validation log, the overlap check;
and the `eval` recipe stage on the same tiny model."""

from __future__ import annotations

import csv
import json

import pytest
from probe_data import LEAKED, probe_inputs, write_jsonl

from evals.curves import load_curves
from evals.rl_probe import ProbeConfig, check_overlap, grpo_args, load_prompts, run_probe


def test_octothinker_defaults_map_onto_grpo_config(tmp_path):
    args = grpo_args(ProbeConfig(), tmp_path, on_gpu=False, use_vllm=False)
    assert args.generation_batch_size == 128 * 16 and args.num_generations == 16
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 64 * 16
    assert (args.learning_rate, args.beta, args.temperature, args.max_completion_length) == (
        1e-6,
        0.0,
        1.0,
        4096,
    )
    assert args.max_steps == 100 * 2  # two mini-batch updates per rollout step


def test_overlapping_prompts_are_dropped_or_refused(tmp_path):
    prompts_path, bench = probe_inputs(tmp_path)
    prompts = load_prompts(prompts_path)
    kept, report = check_overlap(prompts, [bench / "math500/test.jsonl"], "drop")
    assert report["checked"] and report["overlapping_prompts"] == 1 and len(kept) == len(prompts) - 1
    assert LEAKED not in [p["question"] for p in kept]
    try:
        check_overlap(prompts, [bench / "math500/test.jsonl"], "fail")
    except ValueError as err:
        assert "overlap" in str(err)
    else:
        raise AssertionError("fail policy did not refuse a contaminated prompt set")


def test_a_short_eval_problem_inside_a_longer_prompt_is_dropped(tmp_path):
    short = "What is $\\sqrt{53}$ in simplest radical form?"  # 8 tokens: no 13-gram to match
    evals = tmp_path / "math500" / "test.jsonl"
    write_jsonl(evals, [{"problem": short, "answer": "\\sqrt{53}"}])
    prompts = [
        {
            "question": short + " Put the final answer in a box and explain every step you take.",
            "answer": "x",
        },
        {"question": "What is $\\sqrt{54}$ in simplest radical form? Put it in a box.", "answer": "x"},
    ]
    kept, report = check_overlap(prompts, [evals], "drop")
    assert report["overlapping_prompts"] == 1 and kept == prompts[1:]


def test_an_eval_problem_too_short_for_any_ngram_rule_is_caught_as_the_prompt_itself(tmp_path):
    """62 of MATH500's problems ("Simplify $\\sqrt{242}$.") escape the 13-gram and whole-match rules:
    a prompt file holding them verbatim was trained on, even with --on-overlap fail."""
    evals = tmp_path / "math500" / "test.jsonl"
    write_jsonl(
        evals,
        [{"problem": "Simplify $\\sqrt{242}$.", "answer": "11\\sqrt2"}, {"problem": LEAKED, "answer": "x"}],
    )
    prompts = [
        {"question": "simplify  $\\sqrt{242}$.", "answer": "x"},
        {"question": "Simplify $\\sqrt{243}$.", "answer": "x"},
    ]
    kept, report = check_overlap(prompts, [evals], "drop")
    assert (
        kept == prompts[1:] and report["overlapping_prompts"] == report["identical_to_an_eval_problem"] == 1
    )


def test_grpo_probe_runs_a_few_steps_and_logs_validation(tiny_model_dir, tmp_path, capsys):
    prompts, bench = probe_inputs(tmp_path)
    # records without a prompt and an answer are left out, counted by reason (they used to vanish silently)
    prompts.write_text(prompts.read_text() + '5\n{"prompt": "What is 1 plus 1?"}\n{"answer": "3"}\n')
    config = ProbeConfig(
        prompts_per_step=2,
        rollouts=2,
        mini_batch=2,
        micro_batch=4,
        max_response=8,
        steps=2,
        eval_every=1,
        heldout=2,
        heldout_samples=2,
        math500_limit=2,
    )
    out = tmp_path / "probe"
    summary = run_probe(tiny_model_dir, prompts, out, config, bench)
    assert summary["overlap"]["dropped"] == 1
    assert summary["train_prompts"] == 8 and summary["heldout_prompts"] == 2
    assert summary["dropped_prompts"] == {"no_answer": 1, "no_prompt": 1, "not_an_object": 1}
    assert "skipped 3 record(s) of" in capsys.readouterr().err
    with (out / "validation.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["Step"]) for r in rows] == [0, 1, 2]
    for row in rows:
        assert 0.0 <= float(row["heldout_mean@2"]) <= 1.0 and 0.0 <= float(row["math500"]) <= 1.0
        assert 0 < float(row["mean_response_length"]) <= 8
    assert -1.0 <= float(rows[-1]["train_reward"]) <= 1.0
    # The forecast reads the probe folder: accuracy columns only, lengths and rewards left out.
    assert {c.name for c in load_curves(out)} == {"heldout_mean@2", "math500"}


def test_eval_stage_runs_on_the_run_folder(tiny_model_dir, tmp_path):
    from pipelines.evaluate import Config, run_stage
    from pipelines.executors import ExecutorConfig
    from pipelines.stages import StageContext

    run_dir = tmp_path / "run"
    _, bench = probe_inputs(tmp_path)
    write_jsonl(bench / "gsm8k/train.jsonl", [{"question": "1+1?", "answer": "#### 2"}] * 3)
    write_jsonl(bench / "gsm8k/test.jsonl", [{"question": "2+2?", "answer": "#### 4"}] * 3)
    write_jsonl(bench / "math/train.jsonl", [{"problem": "1+2?", "solution": "\\boxed{3}"}] * 3)
    config = Config(model=str(tiny_model_dir), data_dir=str(bench), max_new_tokens=4, backend="transformers")
    ctx = StageContext(run_dir=run_dir, out_dir=run_dir / "eval", inputs=[], executor=ExecutorConfig())
    summary = run_stage(config, ctx)
    assert summary["docs_in"] == summary["docs_out"] == 3 + 2
    assert "accuracy_gsm8k" in summary and "accuracy_math500" in summary
    assert json.loads((run_dir / "eval/summary.json").read_text()) == json.loads(json.dumps(summary))
    assert (run_dir / "eval/gsm8k.json").exists() and (run_dir / "eval/results.json").exists()
    # `suite:` alone names the benchmarks (the default `benchmarks:` used to win over it silently)
    quick = Config(model=str(tiny_model_dir), data_dir=str(bench), max_new_tokens=4, backend="transformers",
                   suite="quick", limit=1)  # fmt: skip
    ctx = StageContext(run_dir=run_dir, out_dir=run_dir / "quick", inputs=[], executor=ExecutorConfig())
    run_stage(quick, ctx)
    results = json.loads((run_dir / "quick/results.json").read_text())["benchmarks"]
    assert {name: row["shots"] for name, row in results.items()} == {
        "gsm8k": 3,
        "math500": 3,
    }  # 8/4 asked, 3 there


def _kill_at_step_2(monkeypatch, model, prompts, out, config, bench) -> None:
    """Run the probe until its step-2 validation, then die (steps 0 and 1 validated and checkpointed)."""
    import evals.rl_probe as probe

    real, calls = probe.validate, []

    def killed_at_step_2(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(probe, "validate", killed_at_step_2)
    try:
        run_probe(model, prompts, out, config, bench)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the probe was not interrupted")
    monkeypatch.setattr(probe, "validate", real)


def test_a_killed_probe_resumes_from_its_last_checkpoint(tiny_model_dir, tmp_path, monkeypatch):
    import evals.rl_probe as probe

    prompts, bench = probe_inputs(tmp_path)
    config = ProbeConfig(prompts_per_step=2, rollouts=2, mini_batch=2, micro_batch=4, max_response=8, steps=3,
                         eval_every=1, heldout=2, heldout_samples=2, math500_limit=2)  # fmt: skip
    out = tmp_path / "probe"
    real, calls = probe.validate, []
    _kill_at_step_2(monkeypatch, tiny_model_dir, prompts, out, config, bench)
    kept = (out / "validation.csv").read_text().splitlines()
    assert len(kept) == 3 and (out / "trainer" / "checkpoint-1").is_dir()

    calls.clear()
    monkeypatch.setattr(probe, "validate", lambda *args: calls.append(1) or real(*args))
    summary = run_probe(tiny_model_dir, prompts, out, config, bench)
    assert len(calls) == 2  # steps 2 and 3 only: steps 0 and 1 came from the first run, not redone
    rows = (out / "validation.csv").read_text().splitlines()
    assert rows[:3] == kept and [int(r.split(",")[0]) for r in rows[1:]] == [0, 1, 2, 3]
    assert summary["validation_rows"] == 4 and not (out / "trainer").exists()  # checkpoints gone when done

    calls.clear()
    assert run_probe(tiny_model_dir, prompts, out, config, bench) == summary and calls == []  # finished: kept
    other = config.model_copy(update={"learning_rate": 1e-5})
    try:
        run_probe(tiny_model_dir, prompts, out, other, bench)
    except ValueError as err:
        assert "another job than this rl-probe" in str(err) and "learning_rate" in str(err)
    else:
        raise AssertionError("another probe's settings were run into a finished probe's folder")


def _tiny_probe(steps: int) -> ProbeConfig:
    return ProbeConfig(prompts_per_step=2, rollouts=2, mini_batch=2, micro_batch=4, max_response=8, steps=steps,
                       eval_every=1, heldout=2, heldout_samples=2, math500_limit=2)  # fmt: skip


def test_a_probe_killed_after_its_last_step_writes_its_summary_without_training_more(
    tiny_model_dir, tmp_path, monkeypatch
):
    import evals.rl_probe as probe

    prompts, bench = probe_inputs(tmp_path)
    # 2 micro-batches per update, the last step mid-epoch: there the resume trained a 3rd step
    out = tmp_path / "probe"
    config = _tiny_probe(2).model_copy(update={"micro_batch": 2})
    real_write, real_validate, calls = probe.write_json, probe.validate, []

    def killed_at_the_summary(path, data):
        if path.name == "summary.json":
            raise KeyboardInterrupt
        real_write(path, data)

    monkeypatch.setattr(probe, "write_json", killed_at_the_summary)
    try:
        run_probe(tiny_model_dir, prompts, out, config, bench)
    except KeyboardInterrupt:
        pass
    rows = (out / "validation.csv").read_text()
    assert (out / "trainer" / "checkpoint-2").is_dir()
    monkeypatch.setattr(probe, "write_json", real_write)
    monkeypatch.setattr(probe, "validate", lambda *args: calls.append(1) or real_validate(*args))
    summary = run_probe(tiny_model_dir, prompts, out, config, bench)
    assert calls == [] and (out / "validation.csv").read_text() == rows  # a step past --steps, validated
    assert summary["resumed_from_step"] == 2 and summary["last_validation"]["Step"] == 2
    assert not (out / "trainer").exists()


def test_a_broken_checkpoint_is_not_resumed_and_the_probe_starts_over(tiny_model_dir, tmp_path, monkeypatch):
    import evals.rl_probe as probe

    prompts, bench = probe_inputs(tmp_path)
    out, config = tmp_path / "probe", _tiny_probe(2)
    real_validate, calls = probe.validate, []
    _kill_at_step_2(monkeypatch, tiny_model_dir, prompts, out, config, bench)
    (out / "trainer" / "checkpoint-1" / "optimizer.pt").unlink()  # killed while the checkpoint was written
    calls.clear()
    monkeypatch.setattr(probe, "validate", lambda *args: calls.append(1) or real_validate(*args))
    summary = run_probe(
        tiny_model_dir, prompts, out, config, bench
    )  # failed: "Can't find a valid checkpoint"
    assert len(calls) == 3 and summary["resumed_from_step"] is None and summary["validation_rows"] == 3


def test_the_probe_record_tells_weights_and_other_commands_apart(tiny_model_dir, tmp_path):
    import shutil

    from evals.bench import run_bench
    from evals.rl_probe import probe_identity

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    prompts, bench = probe_inputs(tmp_path)
    config = _tiny_probe(2)
    before = probe_identity(model, prompts, bench, config)
    assert probe_identity(model, prompts, bench, config.model_copy(update={"vllm": "off", "checkpoints": False,
                                                                           "micro_batch": 2})) == before  # fmt: skip
    weights = model / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-8:] = bytes(8)  # new weights, same size: a model re-exported into the same folder
    weights.write_bytes(bytes(data))
    assert probe_identity(model, prompts, bench, config)["model_digest"] != before["model_digest"]

    out = tmp_path / "probe"
    run_probe(model, prompts, out, config, bench)
    write_jsonl(bench / "gsm8k/test.jsonl", [{"question": "2+2?", "answer": "#### 4"}])
    try:  # eval bench into a probe folder replaced the probe's job record
        run_bench(model, [("gsm8k", 0)], bench, out, backend="transformers")
    except ValueError as err:
        assert "it holds the output of rl-probe" in str(err)
    else:
        raise AssertionError("eval bench wrote into a probe's folder")


def test_a_prompt_identical_to_an_eval_problem_names_it_in_the_examples(tmp_path):
    # overlap.json's examples listed such a prompt with empty overlaps: nothing said which eval problem it was
    evals = tmp_path / "math500" / "test.jsonl"
    write_jsonl(
        evals, [{"problem": LEAKED, "answer": "x"}, {"problem": "Simplify $\\sqrt{242}$.", "answer": "y"}]
    )
    prompts = [
        {"question": "Simplify $\\sqrt{243}$.", "answer": "x"},
        {"question": "simplify $\\sqrt{242}$.", "answer": "x"},
    ]
    _, report = check_overlap(prompts, [evals], "warn")
    assert report["identical_to_an_eval_problem"] == 1
    (example,) = report["examples"]
    assert example["prompt"] == 1
    assert example["overlaps"][0] == {
        "benchmark": "math500/test",
        "problem": "Simplify $\\sqrt{242}$.",
        "identical": True,
    }


def _signal_during_rollout_step_1(monkeypatch, sig: int):
    """Send `sig` to this process from the first reward of the probe (inside rollout step 1's first update).
    Returns the handler to put back: meanwhile a signal the probe does not handle fails the test."""
    import os
    import signal

    import evals.rl_probe as probe

    real, sent = probe.boxed_reward, []

    def reward_then_signal(*args):
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), sig)
        return real(*args)

    monkeypatch.setattr(probe, "boxed_reward", reward_then_signal)

    def reached_the_test(
        signum, frame
    ):  # without the probe's handler: a failure, not the test process killed
        raise AssertionError(f"{signal.Signals(signum).name} was not handled by the probe")

    return signal.signal(sig, reached_the_test)


def test_sigterm_checkpoints_the_rollout_step_in_flight_and_the_rerun_resumes(tiny_model_dir, tmp_path,
                                                                                monkeypatch):  # fmt: skip
    import signal

    from mathmix.signals import StoppedBySignal

    prompts, bench = probe_inputs(tmp_path)
    # 2 optimizer updates per rollout step, a checkpoint every 2 rollout steps: before, a SIGTERM in step 1 lost it
    config = _tiny_probe(4).model_copy(update={"mini_batch": 1, "micro_batch": 2, "eval_every": 2})
    out = tmp_path / "probe"
    previous = _signal_during_rollout_step_1(monkeypatch, signal.SIGTERM)
    try:
        with pytest.raises(StoppedBySignal, match="stopped by SIGTERM at rollout step 1 of 4") as stopped:
            run_probe(tiny_model_dir, prompts, out, config, bench)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert stopped.value.signum == signal.SIGTERM and "rerun the same command to resume" in str(stopped.value)
    assert [p.name for p in (out / "trainer").glob("checkpoint-*")] == [
        "checkpoint-2"
    ]  # the rollout step's end
    assert not (out / "summary.json").exists()
    assert [r.split(",")[0] for r in (out / "validation.csv").read_text().splitlines()[1:]] == ["0"]

    monkeypatch.undo()
    summary = run_probe(tiny_model_dir, prompts, out, config, bench)
    assert summary["resumed_from_step"] == 1
    straight = run_probe(tiny_model_dir, prompts, tmp_path / "straight", config, bench)
    assert summary["validation_rows"] == straight["validation_rows"] == 3  # steps 0, 2, 4
    assert (out / "validation.csv").read_text() == (tmp_path / "straight" / "validation.csv").read_text()


def test_rollout_steps_of_two_optimizer_updates_are_validated(tiny_model_dir, tmp_path):
    # OctoThinker's 128 prompts in mini-batches of 64: the last update's log has no "reward", and the probe
    # validated step 0 only (a one-row curve for the forecast)
    prompts, bench = probe_inputs(tmp_path)
    config = _tiny_probe(2).model_copy(update={"mini_batch": 1, "micro_batch": 2})
    summary = run_probe(tiny_model_dir, prompts, tmp_path / "probe", config, bench)
    with (tmp_path / "probe" / "validation.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["Step"]) for r in rows] == [0, 1, 2] and summary["validation_rows"] == 3
    assert all(-1.0 <= float(r["train_reward"]) <= 1.0 for r in rows[1:])  # each step's own rollouts
    assert float(rows[1]["rollouts"]) == 2 * 2


def test_a_stopped_probe_is_one_line_and_exits_as_the_signal(tiny_model_dir, tmp_path, monkeypatch):
    import signal

    from typer.testing import CliRunner

    from mathmix.cli import app

    prompts, bench = probe_inputs(tmp_path)
    sizes = ["--steps", "4", "--eval-every", "2", "--prompts-per-step", "2", "--rollouts", "2", "--mini-batch",
             "1", "--micro-batch", "2", "--max-response", "8", "--heldout", "2", "--heldout-samples", "2",
             "--math500-limit", "2"]  # fmt: skip
    args = ["eval", "rl-probe", str(tiny_model_dir), "--prompts", str(prompts), "--data-dir", str(bench)]
    previous = _signal_during_rollout_step_1(monkeypatch, signal.SIGUSR1)
    try:
        result = CliRunner().invoke(app, [*args, *sizes, "-o", str(tmp_path / "p")])
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert result.exit_code == 128 + signal.SIGUSR1, result.output
    assert "stopped: rl-probe stopped by SIGUSR1 at rollout step 1 of 4" in " ".join(result.output.split())
    assert "Traceback" not in result.output and (tmp_path / "p" / "trainer" / "checkpoint-2").is_dir()


def test_the_probe_refuses_to_run_as_several_processes(tiny_model_dir, tmp_path, monkeypatch):
    # under torchrun every rank validated and wrote OUT, and each update was WORLD_SIZE mini-batches
    prompts, bench = probe_inputs(tmp_path)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="one process .*WORLD_SIZE=2"):
        run_probe(tiny_model_dir, prompts, tmp_path / "probe", _tiny_probe(1), bench)
    assert not (tmp_path / "probe").exists()
