"""Benchmark folders are checked against their eval sets only: training splits under them are left out (pages
holding MATH / GSM8K training problems are good math data), a file named is always read, prompt folders keep
every file, and a folder of training splits only is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curate.decont_sources import benchmark_files, benchmark_paths
from mathmix.cli import app

TEST_Q = "Ann has {n} red marbles and gives {k} of them to her brother Tom after school. How many are left?"
TRAIN_Q = "A baker sells {n} loaves of bread every morning and {k} cakes every evening at the shop. How many?"
TRAIN_P = "Find all real numbers $x$ such that the sum of {n} and twice the square of the number equals {k}."


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture()
def bench(tmp_path: Path) -> Path:
    """BENCH/gsm8k/{test,train}.jsonl and BENCH/math/train.jsonl, as the shared folder and the sample hold them."""
    root = tmp_path / "bench"
    _jsonl(
        root / "gsm8k" / "test.jsonl",
        [{"question": TEST_Q.format(n=10 + i, k=i), "answer": "7"} for i in range(3)],
    )
    _jsonl(
        root / "gsm8k" / "train.jsonl",
        [{"question": TRAIN_Q.format(n=20 + i, k=i), "answer": "9"} for i in range(5)],
    )
    _jsonl(
        root / "math" / "train.jsonl",
        [{"problem": TRAIN_P.format(n=30 + i, k=i), "solution": "x = 1"} for i in range(5)],
    )
    return root


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    """The reviewer's repro, small: forum and homework pages quoting training problems, one quoting a test one."""
    rows = [
        {"id": f"forum{i}", "text": "Forum post. " + TRAIN_P.format(n=30 + i, k=i) + " x = 1"}
        for i in range(5)
    ]
    rows += [
        {"id": f"hw{i}", "text": "Homework help: " + TRAIN_Q.format(n=20 + i, k=i) + " 9"} for i in range(5)
    ]
    rows.append({"id": "test0", "text": "Quiz tonight: " + TEST_Q.format(n=10, k=0) + " Thanks!"})
    return _jsonl(tmp_path / "docs.jsonl", rows)


def _flat(output: str) -> str:
    return "".join(output.split())


@pytest.mark.parametrize(
    ("path", "training"),
    [
        ("gsm8k/train.jsonl", True),
        ("math8k_limr/math8k_train.jsonl", True),
        ("math_hendrycks/prm800k_style_train12k_derived.jsonl", True),
        ("training/set.jsonl", True),
        ("Train.jsonl", True),
        ("gsm8k/test.jsonl", False),
        ("physics/strain.jsonl", False),
        ("retrain/test.jsonl", False),
        ("qwen_eval/olympiadbench/test.jsonl", False),
    ],
)
def test_training_split_names(path: str, training: bool) -> None:
    from curate.decont_sources import is_training_split

    assert is_training_split(path) is training


def test_a_benchmark_folder_leaves_out_its_training_splits(bench: Path, docs: Path, tmp_path: Path) -> None:
    """All 11 pages were removed: 10 of them quote training problems, which is good data, not contamination."""
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["decont", str(docs), "-o", str(out), "--benchmarks", str(bench)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dropped"] == {"contaminated": 1} and summary["hits_per_benchmark"] == {"gsm8k/test": 1}
    assert summary["benchmark_records"] == {"gsm8k/test": 3}
    assert summary["benchmark_files_left_out"] == [
        str(bench / "gsm8k" / "train.jsonl"),
        str(bench / "math" / "train.jsonl"),
    ]
    said = _flat(result.output)
    assert said.count("leftout2training-splitfilesunder") == 1 and "(gsm8k/train,math/train)" in said
    record = json.loads((out / "job.json").read_text())
    assert record["benchmarks"] == ["{run_dir}/bench/gsm8k/test.jsonl"]


def test_a_training_file_named_is_checked(bench: Path, docs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    train = bench / "gsm8k" / "train.jsonl"
    args = ["decont", str(docs), "-o", str(out), "--benchmarks", str(bench), "--benchmarks", str(train)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["hits_per_benchmark"] == {"gsm8k/test": 1, "gsm8k/train": 5}
    assert summary["benchmark_files_left_out"] == [str(bench / "math" / "train.jsonl")]
    assert "leftout1training-splitfileunder" in _flat(result.output)
    only = benchmark_files([train])  # a training file alone: read, nothing said
    assert [name for name, _ in only] == ["gsm8k/train"]


def test_a_folder_of_training_splits_only_is_refused(bench: Path, docs: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["decont", str(docs), "-o", str(tmp_path / "o"), "--benchmarks", str(bench / "math")]
    )
    assert result.exit_code == 2, result.output
    assert "holdsonlytrainingsplits(train.jsonl)" in _flat(result.output) and str(bench / "math") in _flat(
        result.output
    )
    assert not (tmp_path / "o" / "job.json").exists()
    assert benchmark_paths([bench / "math"]) == {}  # a job record's files: none, the job's own check says why


def test_prompt_folders_keep_their_training_files(bench: Path, tmp_path: Path) -> None:
    """`--check PROMPTS`: prompt sets are training data; a folder of them is read whole. The eval folder given
    to --against is checked without its training splits."""
    prompts = tmp_path / "rl"
    _jsonl(prompts / "math8k_train.jsonl", [{"prompt": TEST_Q.format(n=10, k=0), "answer": "10"}])
    _jsonl(prompts / "train" / "more.jsonl", [{"prompt": TRAIN_P.format(n=30, k=0), "answer": "1"}])
    assert len(benchmark_files([prompts], what="prompt")) == 2
    report_path = tmp_path / "report.json"
    args = ["decont", "--check", str(prompts), "--against", str(bench), "-o", str(report_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output  # the test question, in a prompt file named *train*
    report = json.loads(report_path.read_text())
    assert report["prompts"] == 2 and report["contaminated"] == 1  # the MATH train problem is no eval problem
    assert report["hits_per_benchmark"] == {"gsm8k/test": 1}
    assert len(report["benchmark_files_left_out"]) == 2 and "leftout2training-split" in _flat(result.output)


def test_recipe_stage_reads_the_eval_sets_of_its_benchmark_folder(
    bench: Path, docs: Path, tmp_path: Path
) -> None:
    """The recipe's decont stage (the quickstart's `{run_dir}/sample/bench`) and rewrite's decont_benchmarks
    (`benchmark_paths`, as job records name them) leave the training splits out too."""
    from pipelines.decont import Config, files_read
    from pipelines.recipe import Recipe
    from pipelines.runner import run_recipe

    run = tmp_path / "run"
    (run / "sample").mkdir(parents=True)
    bench.rename(run / "sample" / "bench")
    assert sorted(files_read(Config(), run)) == ["benchmark gsm8k/test"]
    assert list(benchmark_paths([run / "sample" / "bench"])) == ["benchmark gsm8k/test"]
    recipe = Recipe.model_validate(
        {
            "name": "t",
            "output_dir": str(run),
            "executor": {"tasks": 1},
            "stages": {"decont": {"inputs": [str(docs)]}},
        }
    )
    summary = run_recipe(recipe)["decont"]
    assert summary["dropped"] == {"contaminated": 1} and summary["docs_out"] == 10
    assert sorted(json.loads((run / "decont" / "recipe-stage.json").read_text())["file_digests"]) == [
        "benchmark gsm8k/test"
    ]


def test_a_folder_finished_against_training_splits_too_is_refused_in_one_line(
    bench: Path, docs: Path, tmp_path: Path
) -> None:
    """A folder an earlier mathmix decontaminated against a benchmark folder, training splits included (recorded
    as the files it read, as naming them all does now): another job, said in a line, not two lists of files."""
    from pipelines.decont import Config, run_decont
    from pipelines.executors import ExecutorConfig

    one = ExecutorConfig(tasks=1, workers=1)
    out = tmp_path / "out"
    train = [str(bench / "gsm8k" / "train.jsonl"), str(bench / "math" / "train.jsonl")]
    before = run_decont(Config(), [str(docs)], out, one, [str(bench), *train])
    assert before["dropped"] == {"contaminated": 11}
    with pytest.raises(ValueError, match=r"also checked against the training splits now left out") as err:
        run_decont(Config(), [str(docs)], out, one, [str(bench)])
    assert str(bench / "math" / "train.jsonl") in str(err.value) and "test.jsonl" not in str(err.value)
    again = run_decont(Config(), [str(docs)], out, one, [str(bench), *train])  # named: the same job, resumed
    assert again["dropped"] == before["dropped"]


def test_a_recipe_stage_an_earlier_mathmix_finished_against_training_splits_is_kept_and_said(
    bench: Path, docs: Path, tmp_path: Path, capsys
) -> None:
    """`make quickstart` over an existing quickstart-run, or a run whose later stages (a rewrite's GPU hours) hang
    on its decont: refused as another job, the run could not go on without deleting them. A finished stage is
    kept, its record as it was, and said on every run; one not finished is still another job."""
    from curate.decont_sources import as_when_training_splits_were_read
    from pipelines.recipe import Recipe
    from pipelines.runner import StageFailed, run_recipe

    run = tmp_path / "run"
    (run / "sample").mkdir(parents=True)
    bench.rename(run / "sample" / "bench")
    recipe = Recipe.model_validate(
        {
            "name": "t",
            "output_dir": str(run),
            "executor": {"tasks": 1},
            "stages": {"decont": {"inputs": [str(docs)]}},
        }  # fmt: skip
    )
    with as_when_training_splits_were_read():  # as an earlier mathmix ran it
        before = run_recipe(recipe)["decont"]
    record = (run / "decont" / "recipe-stage.json").read_text()
    assert before["dropped"] == {"contaminated": 11}
    capsys.readouterr()
    for _ in range(2):
        assert run_recipe(recipe)["decont"] == before  # kept as finished
        said = " ".join("".join(capsys.readouterr()).split())
        assert "decont: finished by an earlier mathmix against the training splits" in said
        assert (run / "decont" / "recipe-stage.json").read_text() == record  # kept: said again next time
    (run / "decont" / "summary.json").unlink()  # not finished: resuming would mix two benchmark sets
    with pytest.raises(StageFailed, match="another job"):
        run_recipe(recipe)
