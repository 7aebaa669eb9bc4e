"""train-tokenizer: a vocabulary too large, a text the trainer cannot take, blank texts (found by the session's review)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from mathmix.cli import app
from pipelines.tokenize import Config
from shards.tokenizer import MAX_VOCAB_SIZE, iter_texts

runner = CliRunner()


def _corpus(tmp_path, lines: list[str], name: str = "c.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_a_huge_vocab_size_is_one_line_not_a_rust_abort(tmp_path):
    # 10**11 made the Rust BPE trainer ask for 4.5 TB and abort (SIGABRT, 86-frame backtrace); in a subprocess so
    # that an abort does not take the test run with it
    corpus = _corpus(tmp_path, [json.dumps({"text": "abc abc abd"})] * 3)
    args = ["shards", "train-tokenizer", str(corpus), "-o", str(tmp_path / "t"), "--vocab-size", str(10**11)]
    done = subprocess.run(
        [sys.executable, "-m", "mathmix", *args], capture_output=True, text=True, timeout=120, check=False
    )
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1, done.stdout + done.stderr[-2000:]
    assert f"at most {MAX_VOCAB_SIZE:,}" in errors[0] and "100,000,000,000" in errors[0]
    assert not (tmp_path / "t" / "tokenizer.json").exists()


def test_the_largest_vocab_size_allowed_still_trains(tmp_path):
    corpus = _corpus(tmp_path, [json.dumps({"text": "abc abc abd"})] * 3)
    args = [
        "shards",
        "train-tokenizer",
        str(corpus),
        "-o",
        str(tmp_path / "t"),
        "--vocab-size",
        str(MAX_VOCAB_SIZE),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "t" / "tokenizer.json").is_file()


def test_the_recipe_refuses_a_vocab_size_above_the_bound():
    assert Config.model_validate({"vocab_size": MAX_VOCAB_SIZE}).vocab_size == MAX_VOCAB_SIZE
    with pytest.raises(ValidationError, match="vocab_size"):
        Config.model_validate({"vocab_size": MAX_VOCAB_SIZE + 1})


def test_a_lone_surrogate_is_a_bad_record_named_by_file_and_line(tmp_path):
    # json.loads accepts "\ud800"; the Rust trainer failed on it with "surrogates not allowed", no file or line
    corpus = _corpus(tmp_path, ['{"text":"abc abc"}', '{"text":"\\ud800 abc"}', '{"text":"abd abd"}'])
    skipped: dict = {}
    assert list(iter_texts([corpus], skipped=skipped)) == ["abc abc", "abd abd"]
    assert skipped["bad_record"] == 1 and skipped["first_bad_record"] == f"{corpus}:2"
    result = runner.invoke(app, ["shards", "train-tokenizer", str(corpus), "-o", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    assert "skipped 1 JSONL row(s)" in result.output and f"{corpus.name}:2" in result.output.replace("\n", "")
    assert (tmp_path / "t" / "tokenizer.json").is_file()


def test_blank_texts_are_skipped_like_empty_ones(tmp_path):
    corpus = _corpus(tmp_path, ['{"text":"   "}', '{"text":"\\n\\t"}', '{"text":"abc"}', '{"text":""}'])
    skipped: dict = {}
    assert list(iter_texts([corpus], skipped=skipped)) == ["abc"]
    assert not skipped  # dropped as empty_text by `build`, not a bad record


def test_a_corpus_of_only_blank_texts_is_the_no_text_error(tmp_path):
    # it trained a 260-token tokenizer and said "tokenizer saved"
    corpus = _corpus(tmp_path, ['{"text":"   "}', '{"text":"\\n"}'])
    result = runner.invoke(app, ["shards", "train-tokenizer", str(corpus), "-o", str(tmp_path / "t")])
    assert result.exit_code == 2, result.output
    assert "no document with a non-empty text field" in result.output
    assert not (tmp_path / "t" / "tokenizer.json").exists()


def test_blank_parquet_texts_are_skipped(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": ["  ", "abc", None, "\t"]}), path)
    assert list(iter_texts([path])) == ["abc"]
