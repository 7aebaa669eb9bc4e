"""A user review of the shards commands: a tokenizer.json file as --tokenizer (it went to the hub), the recipe
stage's lost notes, inspect decoding with a replaced tokenizer, train-tokenizer writing into folders in use, and
train-tokenizer failing on JSONL lines that `shards build` counts as dropped."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from mathmix import hub
from mathmix.cli import app
from pipelines.executors import ExecutorConfig
from shards.build import build_shards
from shards.inspection import inspect_shards
from shards.manifest import read_manifest
from shards.tokenizer import iter_texts, load_tokenizer, train_tokenizer
from shards.validate import validate_path

runner = CliRunner()
TEXTS = [f"Let $n = {i}$; then $n^2 = {i * i}$ and the sum is \\boxed{{{2 * i}}}." for i in range(200)]
OTHER = [
    f"Words about weather number {i}: rain, sun, wind and {i % 5} clouds over the hills." for i in range(200)
]


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Path:
    return train_tokenizer(TEXTS, tmp_path_factory.mktemp("tok") / "bpe", vocab_size=300)


@pytest.fixture(scope="module")
def other_tok(tmp_path_factory) -> Path:
    return train_tokenizer(OTHER, tmp_path_factory.mktemp("tok") / "other", vocab_size=300)


def _corpus(folder: Path, texts=TEXTS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), folder / "p.parquet")
    return folder


def _one_line_error(result) -> str:
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


# 1. a tokenizer.json file


def test_a_tokenizer_json_file_loads_like_its_folder(tok, tmp_path):
    folder = load_tokenizer(tok)
    file = load_tokenizer(tok / "tokenizer.json")  # the EOS from the tokenizer_config.json beside it
    assert (file.eos_id, file.vocab_size, file.fingerprint) == (
        folder.eos_id,
        folder.vocab_size,
        folder.fingerprint,
    )
    assert file.name == str((tok / "tokenizer.json").resolve())
    bare = tmp_path / "elsewhere" / "my.json"  # no config beside it: the EOS must be given
    bare.parent.mkdir()
    shutil.copy(tok / "tokenizer.json", bare)
    with pytest.raises(ValueError, match="no EOS token.*pass --eos-token"):
        load_tokenizer(bare)
    assert load_tokenizer(bare, "<|endoftext|>").eos_id == folder.eos_id
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="notes.txt: not a tokenizer.json file"):
        load_tokenizer(tmp_path / "notes.txt")


def test_build_with_a_tokenizer_json_file(tok, tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    out = tmp_path / "shards"
    args = ["shards", "build", str(corpus), "-o", str(out), "--tokenizer", str(tok / "tokenizer.json")]
    result = runner.invoke(app, [*args, "--tasks", "1"])
    assert result.exit_code == 0, result.output
    manifest = read_manifest(out)
    assert manifest["tokenizer"] == str((tok / "tokenizer.json").resolve())
    assert manifest["tokenizer_sha256"] == load_tokenizer(tok).fingerprint and manifest["documents"] == 200
    report = inspect_shards(out, tmp_path / "insp", samples=1)  # decoded with the file
    assert "the sum is" in report["samples"][0]["text"]


def test_a_path_that_exists_never_goes_to_the_hub(tmp_path, monkeypatch):
    """transformers takes a file path for a hub name: it spent ~50 s retrying huggingface.co/tok/tokenizer.json."""
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(key, raising=False)
    calls = []

    class Loader:
        @staticmethod
        def from_pretrained(name, local_files_only=False, **kwargs):
            calls.append((name, local_files_only))
            if not local_files_only:
                raise AssertionError(f"{name}: looked up on the hub")
            return "local"

    file = tmp_path / "tokenizer.json"
    file.write_text("{}")
    for path in (file, tmp_path):
        assert hub.from_pretrained(Loader, path) == "local"
    assert calls == [(str(file), True), (str(tmp_path), True)]


def test_the_recipe_stage_records_a_tokenizer_json_file_it_reads(tok, tmp_path):
    from pipelines.tokenize import Config, files_read

    read = files_read(Config(tokenizer=str(tok / "tokenizer.json")), tmp_path)
    assert read["tokenizer tokenizer.json"] == str((tok / "tokenizer.json").resolve())
    assert read["tokenizer tokenizer_config.json"] == str((tok / "tokenizer_config.json").resolve())


# 2. the recipe stage keeps the build's notes


def test_the_recipe_stage_carries_the_notes_of_its_sources(tmp_path, capsys):
    from pipelines.recipe import load_recipe
    from pipelines.runner import run_recipe

    data = _corpus(tmp_path / "run" / "decont" / "data")
    with open(data / "q.jsonl", "w") as f:  # rows whose text sits under another name
        for i in range(3):
            f.write(json.dumps({"id": f"q{i}", "content": TEXTS[i]}) + "\n")
    good = gzip.compress("".join(json.dumps({"text": t}) + "\n" for t in TEXTS[:50]).encode())
    (data / "z.jsonl.gz").write_bytes(good[: len(good) // 2])  # truncated: read up to the damage
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{tasks: 1, workers: 1}}\nstages:\n"
        "  shards: {inputs: ['{run_dir}/decont/data'], vocab_size: 300, branches: false}\n"
    )
    summary = run_recipe(load_recipe(recipe))["shards"]
    written = json.loads((tmp_path / "run" / "shards" / "summary.json").read_text())
    for got in (summary, written):
        assert got["rows_without_text_field"] == 3 and got["unreadable_files"] == 1
        assert got["sources"]["corpus"]["rows_without_text_field"] == 3
    out = " ".join(capsys.readouterr().err.split())  # the runner's print_summary warns of each
    assert "3 of" in out and "have no `text` field" in out and "damaged or truncated" in out


# 3. inspect and validate check the tokenizer's fingerprint


def test_inspect_and_validate_refuse_a_replaced_tokenizer(tok, other_tok, tmp_path):
    mine = tmp_path / "tok"
    shutil.copytree(tok, mine)
    out = tmp_path / "shards"
    build_shards([_corpus(tmp_path / "corpus")], out, str(mine), ExecutorConfig(tasks=1))
    assert "text" in inspect_shards(out, tmp_path / "i0", samples=1)["samples"][0]
    # a byte-identical copy elsewhere has the same fingerprint: it decodes
    assert "text" in inspect_shards(out, tmp_path / "i1", str(tok), samples=1)["samples"][0]
    # another tokenizer given: ids only, and why
    report = inspect_shards(out, tmp_path / "i2", str(other_tok), samples=1)
    assert (
        "text" not in report["samples"][0]
        and "is not the one these shards were built with" in (report["tokenizer_warning"])
    )
    assert validate_path(out)["ok"]
    # the manifest's tokenizer overwritten: inspect prints ids and a warning, validate fails naming it
    for f in other_tok.iterdir():
        shutil.copy(f, mine / f.name)
    result = runner.invoke(app, ["shards", "inspect", str(out), "-o", str(tmp_path / "i3"), "--samples", "1"])
    assert result.exit_code == 0 and "has changed since these shards were built" in result.output, (
        result.output
    )
    assert "the sum is" not in result.output
    report = validate_path(out)
    assert not report["ok"] and any(
        "has changed since these shards were built" in e for e in report["errors"]
    )


# 4. train-tokenizer -o: a new folder only


def test_train_tokenizer_refuses_a_folder_in_use(tok, tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    used = tmp_path / "tok"
    shutil.copytree(tok, used)
    before = (used / "tokenizer.json").read_bytes()
    error = _one_line_error(runner.invoke(app, ["shards", "train-tokenizer", str(corpus), "-o", str(used)]))
    assert "holds a tokenizer" in error and "pick a new folder" in error
    assert (used / "tokenizer.json").read_bytes() == before
    shards = tmp_path / "shards"
    build_shards([corpus], shards, str(used), ExecutorConfig(tasks=1))
    error = _one_line_error(runner.invoke(app, ["shards", "train-tokenizer", str(corpus), "-o", str(shards)]))
    assert "is not empty" in error and not (shards / "tokenizer.json").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(
        app, ["shards", "train-tokenizer", str(corpus), "-o", str(empty), "--vocab-size", "300"]
    )
    assert result.exit_code == 0 and (empty / "tokenizer.json").is_file(), result.output


# 5. train-tokenizer reads bad JSONL lines as shards build does


def test_train_tokenizer_skips_lines_that_build_drops_naming_the_first(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    lines = [json.dumps({"text": t}).encode() for t in TEXTS[:100]]
    lines[3] = b'{"text": "caf\xff"}'  # not UTF-8
    lines[7] = b"{not json"
    lines[9] = b"[1, 2]"  # JSON, not an object
    (corpus / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    result = runner.invoke(
        app, ["shards", "train-tokenizer", str(corpus), "-o", str(tmp_path / "t"), "--vocab-size", "300"]
    )
    assert result.exit_code == 0, result.output
    assert "skipped 3 JSONL row(s)" in " ".join(result.output.split())
    assert f"{corpus / 'a.jsonl'}:4" in result.output.replace("\n", "")
    out = tmp_path / "shards"
    summary = build_shards([corpus], out, str(tmp_path / "t"), ExecutorConfig(tasks=1))
    assert summary["dropped"]["bad_record"] == 3  # the same lines
    skipped: dict = {}
    assert len(list(iter_texts([corpus], skipped=skipped))) == 97 and skipped["bad_record"] == 3


# 6. shards mix: a mistyped total, an empty source


def _mixture(tmp_path: Path, sources: dict[str, str], total: int | None = None) -> Path:
    import yaml

    recipe = tmp_path / "mix.yaml"
    body = {"name": "m", "sources": [{"name": n, "paths": [p], "weight": 1.0} for n, p in sources.items()]}
    if total:
        body["total_tokens"] = total
    recipe.write_text(yaml.safe_dump(body))
    return recipe


def test_mix_refuses_a_total_that_repeats_a_source_absurdly_and_notes_an_empty_source(tmp_path):
    import time

    from shards.indexed import write_indexed
    from shards.mixture import check_mixture_plan

    write_indexed(tmp_path / "a" / "00000", [[5, 6, 7, 0]] * 50, vocab_size=16)  # 200 tokens
    write_indexed(tmp_path / "empty" / "00000", [], vocab_size=16)
    recipe = _mixture(tmp_path, {"a": str(tmp_path / "a"), "e": str(tmp_path / "empty")}, total=10**8)
    start = time.monotonic()
    error = _one_line_error(runner.invoke(app, ["shards", "mix", str(recipe)]))
    assert time.monotonic() - start < 10
    assert "source a: repeated x500,000" in error and "total_tokens 100,000,000" in error
    from shards.mixture import MixtureConfig

    with pytest.raises(ValueError, match="source a: repeated x500,000"):  # training's check before a run
        check_mixture_plan(MixtureConfig.from_yaml(recipe), None)
    result = runner.invoke(app, ["shards", "mix", str(recipe), "--total-tokens", "1000"])
    assert result.exit_code == 0, result.output
    assert "source e has no tokens; its share goes to the others" in " ".join(result.output.split())


# 7. build: the resolved EOS, a copied tokenizer, files that give nothing, a redone task's timing


def test_build_rerun_with_the_default_eos_spelled_out_or_a_copied_tokenizer(tok, tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    out = tmp_path / "shards"
    build_shards([corpus], out, str(tok), ExecutorConfig(tasks=1))
    before = read_manifest(out)
    build_shards([corpus], out, str(tok), ExecutorConfig(tasks=1), eos_token="<|endoftext|>")
    copy = tmp_path / "copy"
    shutil.copytree(tok, copy)
    build_shards([corpus], out, str(copy), ExecutorConfig(tasks=1))  # the same fingerprint elsewhere
    after = read_manifest(out)
    assert after["files"] == before["files"] and after["tokenizer"] == str(copy.resolve())
    # a record from before the resolved EOS was recorded (eos_token null) is still this job
    record = json.loads((out / "job.json").read_text())
    record["settings"]["eos_token"] = None
    (out / "job.json").write_text(json.dumps(record))
    build_shards([corpus], out, str(copy), ExecutorConfig(tasks=1))
    with pytest.raises(ValueError, match="eos_token"):  # another EOS is another job
        build_shards([corpus], out, str(copy), ExecutorConfig(tasks=1), eos_token="<|pad|>")


def test_build_names_files_that_give_no_document(tok, tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    pq.write_table(pa.table({"text": [1, 2, 3]}), corpus / "numbers.parquet")
    # a .jsonl of plain lines (a file of another suffix is refused before anything runs: test_user_refusals.py)
    notes = tmp_path / "notes.jsonl"
    notes.write_text("just some words\nand more words\n")
    out = tmp_path / "shards"
    result = runner.invoke(
        app,
        ["shards", "build", str(corpus), str(notes), "-o", str(out), "--tokenizer", str(tok), "--tasks", "1"],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["files_all_bad_records"] == [str(corpus / "numbers.parquet"), str(notes)]
    flat = " ".join(result.output.split())
    assert (
        "numbers.parquet" in flat and "notes.jsonl" in flat and "every one was dropped as bad_record" in flat
    )


def test_a_redone_task_gets_a_new_summary_timing(tok, tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    out = tmp_path / "shards"
    first = build_shards([corpus], out, str(tok), ExecutorConfig(tasks=1))
    assert (
        build_shards([corpus], out, str(tok), ExecutorConfig(tasks=1))["finished_at"] == first["finished_at"]
    )
    (out / "00000_00000.bin").unlink()
    again = build_shards([corpus], out, str(tok), ExecutorConfig(tasks=1))
    assert again["finished_at"] != first["finished_at"]
    assert json.loads((out / "summary.json").read_text())["finished_at"] == again["finished_at"]
