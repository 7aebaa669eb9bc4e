"""What users ran into: `mix -o` over a manifest or into a stage folder, RUN/shards given to validate and inspect,
manifest totals that disagree with the files, `inspect -o FILE`, notes for unchecked tokenizers and `{run_dir}`."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from typer.testing import CliRunner

from mathmix.cli import app
from shards.indexed import write_indexed
from shards.inspection import inspect_shards
from shards.manifest import file_entry, resolve_prefixes, write_manifest
from shards.validate import validate_path

DOCS = [[5, 6, 7, 0], [8, 9, 0], [10, 11, 12, 13, 14, 0], [15, 16, 0]]
runner = CliRunner()


def _shard_folder(out: Path, docs=DOCS, name: str = "toy", with_job: bool = True) -> Path:
    info = write_indexed(out / "00000_00000", docs, vocab_size=32)
    entry = file_entry(out, "00000_00000", info["documents"], info["tokens"])
    tokenizer = str(out.parent / "tokenizer")
    write_manifest(out, [entry], name=name, tokenizer=tokenizer, vocab_size=32, eos_id=0, dtype="uint16")
    if with_job:  # what `shards build` leaves beside its shards
        (out / "job.json").write_text(json.dumps({"inputs": [], "settings": {"tokenizer": tokenizer}}))
        (out / "summary.json").write_text("{}")
    return out


def _run_shards(tmp_path: Path) -> Path:
    """RUN/shards as the recipe's shards stage leaves it: source folders and a manifest listing them."""
    shards = tmp_path / "run" / "shards"
    _shard_folder(shards / "corpus", name="corpus")
    _shard_folder(shards / "qa", DOCS[:2], name="qa")
    manifest = {
        "tokenizer": str(shards / "tokenizer"),
        "vocab_size": 32,
        "eos_id": 0,
        "dtype": "uint16",
        "sources": {
            "corpus": {"path": str(shards / "corpus"), "documents": 4, "tokens": 16},
            "qa": {"path": str(shards / "qa"), "documents": 2, "tokens": 7},
        },
    }
    (shards / "manifest.json").write_text(json.dumps(manifest))
    (shards / "recipe-stage.json").write_text("{}")
    (shards / "summary.json").write_text("{}")
    return shards


def _mixture(tmp_path: Path, *paths: str) -> Path:
    recipe = tmp_path / "mix.yaml"
    sources = [{"name": f"s{k}", "paths": [p], "weight": 1.0} for k, p in enumerate(paths)]
    recipe.write_text(yaml.safe_dump({"name": "m", "sources": sources}))
    return recipe


def _one_line_error(result) -> str:
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


def test_mix_output_refuses_other_files_stage_folders_and_folders(tmp_path):
    shards = _run_shards(tmp_path)
    recipe = _mixture(tmp_path, str(shards / "corpus"))
    manifest = shards / "corpus" / "manifest.json"
    before = manifest.read_text()
    error = _one_line_error(runner.invoke(app, ["shards", "mix", str(recipe), "-o", str(manifest)]))
    assert "not a `shards mix` report" in error and manifest.read_text() == before
    other = tmp_path / "notes.json"
    other.write_text('{"mine": 1}')
    assert "refusing" in _one_line_error(runner.invoke(app, ["shards", "mix", str(recipe), "-o", str(other)]))
    for inside in (
        shards / "mix.json",
        shards / "corpus" / "mix.json",
        shards / "corpus" / "sub" / "mix.json",
    ):
        error = _one_line_error(runner.invoke(app, ["shards", "mix", str(recipe), "-o", str(inside)]))
        assert "stage folder" in error and not inside.exists()
    folder = tmp_path / "adir"
    folder.mkdir()
    error = _one_line_error(runner.invoke(app, ["shards", "mix", str(recipe), "-o", str(folder)]))
    assert "is a folder" in error and not (tmp_path / "adir.tmp").exists()
    report = tmp_path / "report.json"  # a new file, then an earlier report: both written
    for _ in range(2):
        result = runner.invoke(app, ["shards", "mix", str(recipe), "-o", str(report)])
        assert result.exit_code == 0, result.output
        assert json.loads(report.read_text())["tokens"] == 16


def test_validate_a_runs_shards_folder_checks_every_source_and_its_manifest(tmp_path):
    shards = _run_shards(tmp_path)
    report = validate_path(shards)
    assert report["ok"] and report["files"] == 2 and report["sources"] == ["corpus", "qa"], report["errors"]
    result = runner.invoke(app, ["shards", "validate", str(shards)])
    assert result.exit_code == 0 and "2 source folder(s) (corpus, qa)" in result.output, result.output

    manifest = json.loads((shards / "manifest.json").read_text())
    manifest["sources"]["qa"]["tokens"] = 99
    manifest["vocab_size"] = 64
    (shards / "manifest.json").write_text(json.dumps(manifest))
    qa_bin = shards / "qa" / "00000_00000.bin"
    qa_bin.write_bytes(qa_bin.read_bytes()[:-2])
    _shard_folder(shards / "stray", name="stray")
    errors = validate_path(shards)["errors"]
    assert any("source qa: tokens 99, " in e and "holds 7" in e for e in errors), errors
    assert any("source corpus: vocab_size 64" in e for e in errors), errors
    assert any("qa/00000_00000.bin: truncated" in e for e in errors), errors
    assert any("stray: a shard folder not listed" in e for e in errors), errors
    result = runner.invoke(app, ["shards", "validate", str(shards)])
    assert result.exit_code == 1 and "Traceback" not in result.output


def test_inspect_a_runs_shards_folder_counts_each_source(tmp_path):
    shards = _run_shards(tmp_path)
    assert len(resolve_prefixes(shards)) == 2
    report = inspect_shards(shards, tmp_path / "insp", samples=6)
    assert report["files"] == 2 and report["documents"] == 6 and report["tokens"] == 23
    assert report["sources"]["qa"] == {"files": 1, "documents": 2, "tokens": 7}
    assert {s["file"] for s in report["samples"]} == {"corpus/00000_00000", "qa/00000_00000"}
    result = runner.invoke(app, ["shards", "inspect", str(shards), "-o", str(tmp_path / "insp2")])
    assert result.exit_code == 0, result.output


def test_manifest_totals_are_checked_against_the_files(tmp_path):
    out = _shard_folder(tmp_path / "shards")
    manifest = json.loads((out / "manifest.json").read_text())
    for key, wrong in (("tokens", 999999), ("documents", 50)):
        bad = dict(manifest, **{key: wrong})
        (out / "manifest.json").write_text(json.dumps(bad))
        errors = validate_path(out)["errors"]
        held = manifest[key]
        assert errors == [f"{out / 'manifest.json'}: {key} {wrong}, its .idx files hold {held}"], errors
    # a damaged .idx is named once, per file, not again in the totals
    (out / "manifest.json").write_text(json.dumps(manifest))
    idx = out / "00000_00000.idx"
    raw = bytearray(idx.read_bytes())
    raw[34:38] = struct.pack("<i", 5)  # first sequence length 4 -> 5
    idx.write_bytes(bytes(raw))
    errors = validate_path(out)["errors"]
    assert not any("manifest.json: tokens" in e for e in errors) and any("17 tokens" in e for e in errors), (
        errors
    )


def test_inspect_output_an_existing_file_is_one_line(tmp_path):
    out = _shard_folder(tmp_path / "shards")
    afile = tmp_path / "afile"
    afile.write_text("keep")
    error = _one_line_error(runner.invoke(app, ["shards", "inspect", str(out), "-o", str(afile)]))
    assert "exists and is not a folder" in error and afile.read_text() == "keep"


def test_inspect_warns_of_a_damaged_index(tmp_path):
    out = _shard_folder(tmp_path / "shards")
    idx = out / "00000_00000.idx"
    raw = bytearray(idx.read_bytes())
    raw[34:38] = struct.pack("<i", 5)
    idx.write_bytes(bytes(raw))
    report = inspect_shards(out, tmp_path / "insp", samples=0)
    assert any("00000_00000.bin: truncated" in w for w in report["warnings"]), report["warnings"]
    result = runner.invoke(app, ["shards", "inspect", str(out), "-o", str(tmp_path / "insp2")])
    assert result.exit_code == 0 and "warning:" in result.output and "shards validate" in result.output


def test_mix_notes_unchecked_tokenizers_and_a_missing_run_dir(tmp_path):
    bare = tmp_path / "bare"
    write_indexed(bare / "00000_00000", DOCS, vocab_size=32)
    result = runner.invoke(app, ["shards", "mix", str(_mixture(tmp_path, str(bare)))])
    assert result.exit_code == 0 and "could not be checked" in result.output, result.output
    shards = _run_shards(tmp_path)
    result = runner.invoke(app, ["shards", "mix", str(_mixture(tmp_path, str(shards / "corpus")))])
    assert result.exit_code == 0 and "could not be checked" not in result.output, result.output
    recipe = _mixture(tmp_path, "{run_dir}/shards/corpus")
    assert "--run-dir not given" in _one_line_error(runner.invoke(app, ["shards", "mix", str(recipe)]))
    result = runner.invoke(app, ["shards", "mix", str(recipe), "--run-dir", str(shards.parent)])
    assert result.exit_code == 0, result.output


def test_build_refuses_a_stage_folder_of_another_kind(tmp_path):
    web = tmp_path / "run" / "web"
    (web / "data").mkdir(parents=True)
    (web / "job.json").write_text(json.dumps({"inputs": [], "settings": {"write_rejects": True}}))
    (web / "recipe-stage.json").write_text("{}")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "x"}) + "\n")
    args = ["shards", "build", str(corpus), "-o", str(web), "--tokenizer", str(tmp_path / "tok")]
    error = _one_line_error(runner.invoke(app, args))
    assert "the `web` stage folder of a run" in error and "data/" in error
    evals = tmp_path / "run" / "eval"
    evals.mkdir()
    (evals / "job.json").write_text(json.dumps({"command": "eval bench", "inputs": [], "settings": {}}))
    args[4] = str(evals)
    assert "written by `eval bench`" in _one_line_error(runner.invoke(app, args))


def test_mix_output_allows_a_project_folder_an_empty_file_and_refuses_a_trailing_slash(tmp_path):
    """A user's folder holding data/ and logs/ is no stage folder (every path under it was refused); an empty file
    loses nothing; `-o newdir/` wrote a file named newdir."""
    shards = _run_shards(tmp_path)
    recipe = _mixture(tmp_path, str(shards / "corpus"))
    project = tmp_path / "proj"
    for sub in ("data", "logs", "reports"):
        (project / sub).mkdir(parents=True)
    report = project / "reports" / "mix.json"
    result = runner.invoke(app, ["shards", "mix", str(recipe), "-o", str(report)])
    assert result.exit_code == 0 and json.loads(report.read_text())["tokens"] == 16, result.output
    empty = tmp_path / "empty.json"
    empty.touch()
    result = runner.invoke(app, ["shards", "mix", str(recipe), "-o", str(empty)])
    assert result.exit_code == 0 and json.loads(empty.read_text())["tokens"] == 16, result.output
    error = _one_line_error(
        runner.invoke(app, ["shards", "mix", str(recipe), "-o", f"{tmp_path / 'newdir'}/"])
    )
    assert "names a folder" in error and not (tmp_path / "newdir").exists()


def test_train_tokenizer_skips_rows_whose_text_is_not_a_string(tmp_path):
    # `"text": 5` or a list crashed BPE training with "TypeError: 'int' object is not iterable"
    corpus = tmp_path / "c.jsonl"
    rows = [{"text": f"x = {i} + {i}"} for i in range(20)] + [{"text": 5}, {"text": ["a list"]}]
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = runner.invoke(app, ["shards", "train-tokenizer", str(corpus), "-o", str(tmp_path / "tok")])
    assert result.exit_code == 0, result.output
    assert "skipped 2 JSONL row(s)" in result.output and (tmp_path / "tok" / "tokenizer.json").is_file()
    numbers = tmp_path / "n.parquet"
    pq.write_table(pa.table({"text": [1, 2, 3]}), numbers)
    args = ["shards", "train-tokenizer", str(numbers), "-o", str(tmp_path / "tok2")]
    error = _one_line_error(runner.invoke(app, args))
    assert str(numbers) in error and "holds int64, not text" in error


def test_build_refuses_odd_option_values_in_one_line(tmp_path):
    # --tasks 0 printed pydantic's 4-line ValidationError, --max-shard-mb inf an OverflowError traceback, and
    # --batch-size 0 / --max-shard-mb -1 ran; an unknown --eos-token was told to "pass --eos-token"
    from shards.tokenizer import train_tokenizer

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"x = {i}"}) + "\n" for i in range(5)))
    tok = train_tokenizer([f"x = {i}" for i in range(50)], tmp_path / "tok", vocab_size=300)
    base = ["shards", "build", str(corpus), "-o", str(tmp_path / "out"), "--tokenizer", str(tok)]
    for option, value in [("--tasks", "0"), ("--workers", "0"), ("--batch-size", "0"), ("--batch-size", "-1"),
                          ("--max-shard-mb", "-1"), ("--max-shard-mb", "inf"), ("--max-shard-mb", "nan")]:  # fmt: skip
        error = _one_line_error(runner.invoke(app, [*base, option, value]))
        assert error.startswith(f"error: {option} ") and "must be" in error, error
    for blank in ("", "  "):  # '' fell back to the folder's name without a word, '  ' was the manifest's name
        error = _one_line_error(runner.invoke(app, [*base, "--name", blank]))
        assert error.startswith(f"error: --name {blank!r}: must name the source"), error
    error = _one_line_error(runner.invoke(app, [*base, "--eos-token", "<nope>"]))
    assert "'<nope>', is not in its vocabulary" in error and "pass --eos-token" not in error
    assert not (tmp_path / "out").exists()


def test_a_damaged_manifest_is_named_by_mix_inspect_and_validate(tmp_path):
    # json's bare "Expecting value: line 1 column 1" named no file; a list manifest crashed mix (AttributeError)
    shards = _run_shards(tmp_path)
    manifest = shards / "qa" / "manifest.json"
    for text in ("{not json", "[1]"):
        manifest.write_text(text)
        error = _one_line_error(
            runner.invoke(app, ["shards", "mix", str(_mixture(tmp_path, str(shards / "qa")))])
        )
        assert str(manifest) in error
        error = _one_line_error(runner.invoke(app, ["shards", "inspect", str(shards / "qa")]))
        assert str(manifest) in error
        assert validate_path(shards)["errors"][0].startswith(f"{manifest}: not ")


def test_train_tokenizer_reads_a_categorical_and_a_string_view_text_column(tmp_path):
    # bc6f7f2's type check took only string/large_string/null, so a pandas categorical column (read back as
    # dictionary<values=string>) and an Arrow string_view column failed with "holds dictionary<...>, not text"
    texts = [f"x = {i} + {i}" for i in range(20)]
    categorical = tmp_path / "cat.parquet"
    pq.write_table(pa.table({"text": pa.array(texts).dictionary_encode()}), categorical)
    view = tmp_path / "view.parquet"
    pq.write_table(pa.table({"text": pa.array(texts, type=pa.string_view())}), view)
    assert pa.types.is_dictionary(pq.ParquetFile(categorical).schema_arrow.field("text").type)
    assert pq.ParquetFile(view).schema_arrow.field("text").type == pa.string_view()
    from shards.tokenizer import iter_texts

    assert list(iter_texts([categorical])) == texts and list(iter_texts([view])) == texts
    for corpus in (categorical, view):
        out = tmp_path / f"tok-{corpus.stem}"
        result = runner.invoke(app, ["shards", "train-tokenizer", str(corpus), "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert (out / "tokenizer.json").is_file()
    codes = tmp_path / "codes.parquet"  # a dictionary of numbers is still not text
    pq.write_table(pa.table({"text": pa.array([1, 2, 1]).dictionary_encode()}), codes)
    error = _one_line_error(
        runner.invoke(app, ["shards", "train-tokenizer", str(codes), "-o", str(tmp_path / "t")])
    )
    assert str(codes) in error and "not text" in error


def test_build_refuses_a_file_named_that_is_no_corpus_file(tmp_path):
    # notes.txt (or a .warc.gz) was read as JSONL: exit 0, `warning: no line of notes.txt is a document`, and a
    # finished, empty shard folder
    import gzip

    from shards.tokenizer import train_tokenizer

    tok = train_tokenizer([f"x = {i}" for i in range(50)], tmp_path / "tok", vocab_size=300)
    (tmp_path / "notes.txt").write_text("just some words\nand more words\n")
    with gzip.open(tmp_path / "crawl.warc.gz", "wt") as f:
        f.write("WARC/1.0\r\nWARC-Type: warcinfo\r\n\r\n")
    for name in ("notes.txt", "crawl.warc.gz"):
        given = tmp_path / name
        out = tmp_path / f"out-{name}"
        for command in (["shards", "build", str(given), "-o", str(out), "--tokenizer", str(tok)],
                        ["shards", "train-tokenizer", str(given), "-o", str(out)]):  # fmt: skip
            error = _one_line_error(runner.invoke(app, command))
            assert error.startswith(
                f"error: {given}: not a corpus file: its first line is not a JSON object"
            ), error
            assert not out.exists()
    # JSON lines named directly are read whatever their name (the suffixes choose a folder's files only)
    for name in ("c.jsonl", "rows.json", "rows.ndjson", "ROWS.JSONL"):
        good = tmp_path / name
        good.write_text("\n" + json.dumps({"text": "x = 1"}) + "\n")
        result = runner.invoke(
            app, ["shards", "build", str(good), "-o", str(tmp_path / f"ok-{name}"), "--tokenizer", str(tok)]
        )
        assert result.exit_code == 0, result.output
        assert json.loads((tmp_path / f"ok-{name}" / "summary.json").read_text())["documents"] == 1


def test_mix_names_a_missing_mixture_file_and_a_folder(tmp_path):
    # was `error: /nope.yaml: [Errno 2] No such file or directory: '/nope.yaml'`
    error = _one_line_error(runner.invoke(app, ["shards", "mix", str(tmp_path / "nope.yaml")]))
    assert error == f"error: {tmp_path / 'nope.yaml'}: mixture file not found", error
    error = _one_line_error(runner.invoke(app, ["shards", "mix", str(tmp_path)]))
    assert error.startswith(f"error: {tmp_path}: is a folder; name the mixture YAML file"), error
