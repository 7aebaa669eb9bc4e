"""The web stage's job record: the files it reads besides its inputs (the math model, the blocklist), its command,
a killed job's partial output when another job takes the folder, and an output folder inside an input folder."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.executors import ExecutorConfig
from pipelines.web import Config, run_web

MATH = (
    "<html><head><script src='mathjax.js'></script></head><body><article><h1>Quadratic equations {i}</h1>"
    + "<p>The roots of <script type='math/tex'>ax^2+bx+c=0</script> are given by the quadratic formula, and "
    "we prove that the discriminant decides how many real solutions the equation {i} has.</p>"
    * 8
    + "</article></body></html>"
)
ONE_TASK = ExecutorConfig(tasks=1, workers=1)


def _pages(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"p{i}.html").write_text(MATH.replace("{i}", str(i)))
    return folder


def _train(out: Path, seed: int) -> Path:
    from classifiers.data import LabelledDoc
    from classifiers.train import TrainData, TrainSettings, train_model

    rng = random.Random(seed)
    math = "let x be integer prove theorem equation solve derivative integral lemma".split()
    text = "the match team season city mayor said market shares film actor recipe".split()

    def docs(words: list[str], label: str) -> list[LabelledDoc]:
        return [
            LabelledDoc(" ".join(rng.choice(words) for _ in range(30)), label, f"{label}{i}")
            for i in range(20)
        ]

    train_model(TrainData(docs(math, "m"), docs(text, "n")), out,
                TrainSettings(dim=8, epoch=5, bucket=5000, seed=seed))  # fmt: skip
    return out


def test_a_retrained_model_or_an_edited_blocklist_at_the_same_path_is_another_job(tmp_path):
    pages = _pages(tmp_path / "pages", 2)
    model = _train(tmp_path / "clf" / "model.bin", 1)
    blocklist = tmp_path / "bl.txt"
    blocklist.write_text("example.org\n")
    config = Config(math_model=str(model), math_threshold=0.5, blocklist=str(blocklist))
    out = tmp_path / "web"
    run_web(config, [str(pages)], out, ONE_TASK, math_model=str(model))
    run_web(config, [str(pages)], out, ONE_TASK, math_model=str(model))  # the same job: kept
    card = model.with_name("model.card.json")  # its card records the model's digest: restored with it below
    before, card_before = model.read_bytes(), card.read_bytes()
    _train(model, 2)
    assert model.read_bytes() != before
    with pytest.raises(
        ValueError, match=r"another job than this web run \(math_model: other contents at the same"
    ):
        run_web(config, [str(pages)], out, ONE_TASK, math_model=str(model))
    model.write_bytes(before)
    card.write_bytes(card_before)
    run_web(config, [str(pages)], out, ONE_TASK, math_model=str(model))
    blocklist.write_text("example.com\n")  # the same size, another domain
    with pytest.raises(ValueError, match=r"blocklist: other contents at the same path"):
        run_web(config, [str(pages)], out, ONE_TASK, math_model=str(model))


def test_a_web_record_names_its_command_and_an_older_one_is_still_this_job(tmp_path):
    pages = _pages(tmp_path / "pages", 1)
    out = tmp_path / "web"
    run_web(Config(), [str(pages)], out, ONE_TASK)
    record = json.loads((out / "job.json").read_text())
    assert record["command"] == "web"
    summary = (out / "summary.json").read_bytes()
    # a record written before the command and the read files were recorded: the same job, kept as it is
    del record["command"]
    (out / "job.json").write_text(json.dumps(record))
    run_web(Config(), [str(pages)], out, ONE_TASK)
    assert json.loads((out / "job.json").read_text())["command"] == "web"
    assert (out / "data").is_dir() and summary


def test_a_job_taking_over_a_killed_jobs_folder_leaves_no_file_of_it(tmp_path):
    out = tmp_path / "X"
    run_web(Config(), [str(_pages(tmp_path / "big", 3))], out, ONE_TASK)
    # as the killed job left it: its record, a log and a 0-byte Parquet file, nothing finished
    (out / "summary.json").unlink()
    for marker in (out / "logs" / "completions").iterdir():
        marker.unlink()
    (out / "data" / "000_00001.parquet").write_bytes(b"")
    summary = run_web(Config(), [str(_pages(tmp_path / "one", 1))], out, ONE_TASK)
    table = pq.read_table(out / "data")  # read whole, as the next stage reads it
    assert summary["docs_in"] == 1 and table.num_rows == summary["docs_out"]
    assert not (out / "data" / "000_00001.parquet").exists()


def test_an_output_folder_inside_an_input_folder_is_refused(tmp_path):
    pages = _pages(tmp_path / "pages", 1)
    with pytest.raises(ValueError, match=r"pages/out is inside the input folder"):
        run_web(Config(), [str(pages)], pages / "out", ONE_TASK)
    assert not (pages / "out").exists()
