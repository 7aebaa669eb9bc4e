"""`mathmix eval rl-probe` and `eval sweep` on the command line: the benchmark folder found from any cwd (never a
silent skip of the overlap check), one-line errors before any run, and the probe's size options in the sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from probe_data import probe_inputs, write_jsonl
from typer.testing import CliRunner

from evals.probe_prompts import eval_set_files, load_prompts

# The smallest probe TRL runs: 2 prompts x 2 rollouts per step, 2 held out, 8-token responses.
TINY = [
    "--prompts-per-step", "2", "--rollouts", "2", "--micro-batch", "4", "--max-response", "8",
    "--heldout", "2", "--heldout-samples", "2", "--math500-limit", "2", "--eval-every", "1",
]  # fmt: skip


@pytest.fixture()
def inputs(tmp_path) -> tuple[Path, Path]:
    """Ten clean prompts plus one MATH500 problem, and a bench folder holding that MATH500 problem."""
    return probe_inputs(tmp_path)


@pytest.fixture()
def elsewhere(tmp_path, monkeypatch) -> Path:
    """A cwd with no ../shared/data/bench, and a checkout without one either."""
    import evals.bench_dir as where

    cwd = tmp_path / "deep" / "cwd"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(where, "CHECKOUT_BENCH_DIR", tmp_path / "no-checkout-bench")
    return cwd


def _eval(*args: str):
    from mathmix.cli import app

    return CliRunner().invoke(app, ["eval", *args])


@pytest.mark.parametrize("command", ["rl-probe", "sweep"])
def test_no_benchmark_folder_is_an_error_not_a_silent_skip(tiny_model_dir, inputs, elsewhere, command):
    prompts, _ = inputs
    sizes = ["--steps", "2", *TINY, "--mini-batch" + ("es" if command == "sweep" else ""), "2"]
    result = _eval(command, str(tiny_model_dir), "--prompts", str(prompts), *sizes, "-o", "out")
    assert result.exit_code == 2, result.output
    assert "benchmark folder not found" in result.stderr and "--no-eval-sets" in result.stderr
    assert not (elsewhere / "out").exists()


def test_probe_from_another_cwd_checks_overlap_against_the_checkout_bench(
    tiny_model_dir, inputs, elsewhere, monkeypatch
):
    import evals.bench_dir as where

    prompts, bench = inputs
    monkeypatch.setattr(where, "CHECKOUT_BENCH_DIR", bench)
    sizes = ["--steps", "1", *TINY, "--mini-batch", "2"]
    result = _eval("rl-probe", str(tiny_model_dir), "--prompts", str(prompts), *sizes, "-o", "p")
    assert result.exit_code == 0, result.output
    summary = json.loads((elsewhere / "p/summary.json").read_text())
    assert summary["overlap"]["checked"] and summary["overlap"]["dropped"] == 1
    assert summary["math500_items"] == 2


def test_a_benchmark_folder_without_eval_sets_is_refused(tmp_path):
    (tmp_path / "bench").mkdir()
    with pytest.raises(ValueError, match="no eval test set under .*bench .*math500/test.jsonl"):
        eval_set_files(tmp_path / "bench")
    assert eval_set_files(None) == []  # --no-eval-sets


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--on-overlap", "foo"], "--on-overlap: Input should be 'drop', 'fail' or 'warn' (got 'foo')"),
        (["--vllm", "maybe"], "--vllm: Input should be 'auto', 'on' or 'off' (got 'maybe')"),
        (["--lr", "0"], "--lr: Input should be greater than 0"),
        (
            ["--prompts-per-step", "3", "--mini-batch", "2"],
            "--prompts-per-step must be a multiple of --mini-batch",
        ),
        (["--prompts", "nope.jsonl"], "prompt file not found: nope.jsonl (--prompts)"),
        (["--heldout", "10"], "11 prompts in"),  # 10 held out + 2 per step
        (["--no-eval-sets", "--data-dir", "x"], "--data-dir and --no-eval-sets exclude each other"),
    ],
)
def test_probe_options_fail_in_one_line(inputs, tmp_path, args, message):
    prompts, bench = inputs
    base = ["rl-probe", "m", "--prompts", str(prompts), "-o", str(tmp_path / "p"), *TINY, "--mini-batch", "2"]
    result = _eval(*base, *args) if "--data-dir" in args else _eval(*base, "--data-dir", str(bench), *args)
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert "Traceback" not in result.output and not (tmp_path / "p").exists()


def test_prompt_files_without_prompts_are_named(tmp_path, inputs):
    empty, fields, broken = tmp_path / "empty.jsonl", tmp_path / "fields.jsonl", tmp_path / "broken.jsonl"
    empty.write_text("\n")
    write_jsonl(fields, [{"q": "1+1?", "a": "2"}, {"text": "x"}])
    broken.write_text('{"prompt": "1+1?", "answer": "2"}\n{"prompt": \n')
    with pytest.raises(ValueError, match="no prompts in .*empty.jsonl"):
        load_prompts(empty)
    with pytest.raises(
        ValueError, match=r"no prompt/answer fields in .*fields.jsonl \(fields found: a, q, text"
    ):
        load_prompts(fields)
    with pytest.raises(ValueError, match="broken.jsonl:2: not valid JSON"):
        load_prompts(broken)
    _, bench = inputs
    result = _eval("rl-probe", "m", "--prompts", str(fields), "--data-dir", str(bench))
    assert result.exit_code == 2 and "no prompt/answer fields in" in result.stderr, result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lrs", "1e-6,abc"], "--lrs: 'abc' is not a number"),
        (["--lrs", "-1e-6"], "--lrs: '-1e-6' must be > 0"),
        (["--mini-batches", "2,x"], "--mini-batches: 'x' is not an integer"),
        (["--mini-batches", "3"], "--prompts-per-step must be a multiple of --mini-batches"),
        (["--prompts", "nope.jsonl"], "prompt file not found: nope.jsonl (--prompts)"),
        (["--heldout", "10"], "11 prompts in"),
        (["--steps", "1"], "3 or more validations"),
    ],
)
def test_sweep_options_fail_before_any_run(inputs, tmp_path, args, message):
    prompts, bench = inputs
    base = ["sweep", "m", "--prompts", str(prompts), "--data-dir", str(bench), "-o", str(tmp_path / "s")]
    result = _eval(*base, "--steps", "2", *TINY, "--mini-batches", "2", *args)
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert "Traceback" not in result.output and not (tmp_path / "s").exists()


def test_sweep_passes_the_probe_sizes_through_and_fits_only_what_varied(tiny_model_dir, inputs, tmp_path):
    prompts, bench = inputs
    out = tmp_path / "sweep"
    args = ["sweep", str(tiny_model_dir), "--prompts", str(prompts), "--data-dir", str(bench), "-o", str(out)]
    sizes = ["--lrs", "1e-6,2e-6", "--mini-batches", "2", "--steps", "2", *TINY]
    result = _eval(*args, *sizes)
    assert result.exit_code == 0, result.output
    config = json.loads((out / "lr1e-06_mb2/summary.json").read_text())["config"]
    assert (config["prompts_per_step"], config["rollouts"], config["heldout"], config["max_response"]) == (
        2,
        2,
        2,
        8,
    )
    fit = json.loads((out / "sweep.json").read_text())
    assert fit["hyperparameters"] == ["lr"] and fit["fixed"] == {"batch_size": 2}
    assert "slope_log_batch_size" not in fit["A"]
    # A rerun with other sizes must not skip the old runs and fit a mix of both.
    result = _eval(*args, *sizes, "--max-response", "16")
    assert result.exit_code == 2 and "another job than this rl-probe" in result.stderr, result.output
    assert "settings.max_response: 8 -> 16" in result.stderr


@pytest.mark.parametrize("model", ["missing-folder", "nope", "org/not-cached"])
def test_a_missing_model_is_refused_before_anything_is_written(inputs, tmp_path, model):
    """The probe wrote OUT/overlap.json, then found the model missing: a half-made probe folder was left behind."""
    prompts, bench = inputs
    model = str(tmp_path / model) if model == "missing-folder" else model
    out = tmp_path / "probe"
    sizes = ["--steps", "1", *TINY, "--mini-batch", "2"]
    result = _eval(
        "rl-probe", model, "--prompts", str(prompts), "--data-dir", str(bench), *sizes, "-o", str(out)
    )
    assert result.exit_code == 2 and "model not found" in result.stderr, result.output
    assert not out.exists()


def test_vllm_on_without_vllm_is_one_line_before_anything_runs(inputs, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a)
    )
    prompts, bench = inputs
    out = tmp_path / "p"
    result = _eval("rl-probe", "m", "--prompts", str(prompts), "--data-dir", str(bench), "-o", str(out), *TINY,
                   "--mini-batch", "2", "--vllm", "on")  # fmt: skip
    assert result.exit_code == 2 and "--vllm on: vLLM is not installed" in result.stderr, result.output
    assert (
        "Traceback" not in result.output and not out.exists()
    )  # TRL's ImportError came after the overlap check


def test_corrupt_weights_are_one_line_naming_the_model(tiny_model_dir, inputs, tmp_path):
    """A truncated or garbled model.safetensors ended bench and rl-probe with a SafetensorError traceback."""
    import shutil

    prompts, bench = inputs
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.safetensors").write_text("garbage")
    for args in (
        ["bench", str(broken), "--benchmarks", "math500:0", "--data-dir", str(bench), "-o", str(tmp_path / "b")],
        ["rl-probe", str(broken), "--prompts", str(prompts), "--data-dir", str(bench), "-o", str(tmp_path / "p"),
         "--steps", "1", *TINY, "--mini-batch", "2"],
    ):  # fmt: skip
        result = _eval(*args)
        assert result.exit_code == 2, result.output
        assert f"error: {broken}: cannot load" in result.stderr and "SafetensorError" in result.stderr
        assert "Traceback" not in result.output


def test_a_trainer_setup_error_is_not_reported_as_the_model(tiny_model_dir, inputs, tmp_path):
    """Any OSError while GRPOTrainer was built said 'cannot load the model', here OUT/trainer being a file."""
    prompts, bench = inputs
    out = tmp_path / "p"
    out.mkdir()
    (out / "trainer").write_text("not a folder")
    result = _eval("rl-probe", str(tiny_model_dir), "--prompts", str(prompts), "--data-dir", str(bench), "-o",
                   str(out), "--steps", "1", *TINY, "--mini-batch", "2")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "cannot load the model" not in result.stderr and "Traceback" not in result.output
    assert f"error: {out}: cannot set up the GRPO trainer: FileExistsError" in result.stderr
    assert str(out / "trainer") in result.stderr


def test_a_corrupt_pytorch_model_bin_is_one_line_for_rl_probe_as_for_bench(tiny_model_dir, inputs, tmp_path):
    """bench caught torch's RuntimeError for a broken pytorch_model.bin; rl-probe, which handled corrupt weights
    on its own (OSError and SafetensorError only), ended with its traceback."""
    import shutil

    prompts, bench = inputs
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.safetensors").unlink()
    (broken / "pytorch_model.bin").write_bytes(b"PK\x03\x04garbage" * 10)  # a torch zip archive cut short
    for args, what in (
        (["bench", str(broken), "--benchmarks", "math500:0", "--data-dir", str(bench), "-o", str(tmp_path / "b")],
         "with transformers AutoModelForCausalLM"),
        (["rl-probe", str(broken), "--prompts", str(prompts), "--data-dir", str(bench), "-o", str(tmp_path / "p"),
          "--steps", "1", *TINY, "--mini-batch", "2"], "the model for GRPO"),
    ):  # fmt: skip
        result = _eval(*args)
        assert result.exit_code == 2, result.output
        assert f"error: {broken}: cannot load {what}: RuntimeError: PytorchStreamReader" in result.stderr
        assert "Traceback" not in result.output
