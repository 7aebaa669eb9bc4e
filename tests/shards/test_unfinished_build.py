"""A `shards build` folder left unfinished (the build killed: job.json and some tasks' shards, no manifest.json) is
refused by `validate`, `inspect`, `mix` and `train`, naming the folder and the rerun; a .bin without its .idx is
named. A bare Megatron folder of .bin/.idx pairs (no job.json: another tool's) reads as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from mathmix.cli import app
from shards.indexed import write_indexed
from shards.manifest import file_entry, resolve_prefixes, write_manifest
from shards.validate import validate_path

DOCS = [[5, 6, 7, 0], [8, 9, 0], [10, 11, 12, 13, 14, 0], [15, 16, 0]] * 8
runner = CliRunner()


def _job(out: Path, tasks: int = 2) -> None:
    """OUT/job.json as `shards build` writes it before any task starts."""
    settings = {"tokenizer": "{run_dir}/tok", "tokenizer_sha256": "0" * 16, "eos_token": "<eos>"}
    record = {"inputs": ["{run_dir}/in/a.parquet"], "settings": settings | {"max_shard_bytes": 1 << 20}}
    (out / "job.json").write_text(json.dumps(record | {"tasks": tasks, "input_sizes": [10]}))


def _unfinished(tmp_path: Path) -> Path:
    """What a build killed mid-way leaves: task 0 finished (marker, shards), task 1 cut short (an empty .bin,
    no .idx), no manifest.json."""
    out = tmp_path / "unf"
    out.mkdir(parents=True)
    _job(out)
    for k in range(2):
        write_indexed(out / f"00000_0000{k}", DOCS, vocab_size=32)
    (out / "00001_00000.bin").write_bytes(b"")
    (out / "logs" / "completions").mkdir(parents=True)
    (out / "logs" / "completions" / "00000").write_text("")
    return out


def _finished(tmp_path: Path) -> Path:
    out = tmp_path / "done"
    out.mkdir()
    _job(out)
    entries = []
    for rank in range(2):
        info = write_indexed(out / f"0000{rank}_00000", DOCS, vocab_size=32)
        entries.append(file_entry(out, f"0000{rank}_00000", info["documents"], info["tokens"]))
    write_manifest(out, entries, name="done", tokenizer="tok", vocab_size=32, eos_id=0, dtype="uint16")
    (out / "logs" / "completions").mkdir(parents=True)
    for rank in range(2):
        (out / "logs" / "completions" / f"{rank:05d}").write_text("")
    return out


def _bare(tmp_path: Path) -> Path:
    out = tmp_path / "bare"
    out.mkdir()
    for k in range(2):
        write_indexed(out / f"part_{k}", DOCS, vocab_size=32)
    return out


def _flat(output: str) -> str:
    return " ".join(output.split())  # rich wraps long lines at the terminal width


def test_validate_fails_an_unfinished_build_and_names_the_bin_without_index(tmp_path):
    out = _unfinished(tmp_path)
    report = validate_path(out)
    assert not report["ok"]
    assert any(
        str(out) in e and "did not finish" in e and "1 of 2 tasks" in e and f"-o {out}" in e
        for e in report["errors"]
    ), report["errors"]
    assert f"{out / '00001_00000.idx'}: missing" in " ".join(report["errors"]), report["errors"]
    result = runner.invoke(app, ["shards", "validate", str(out)])
    assert result.exit_code == 1 and "FAILED" in result.output and "did not finish" in result.output


def test_inspect_mix_and_resolving_refuse_an_unfinished_build(tmp_path):
    out = _unfinished(tmp_path)
    with pytest.raises(ValueError, match="did not finish"):
        resolve_prefixes(out)
    result = runner.invoke(app, ["shards", "inspect", str(out), "-o", str(tmp_path / "insp")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    message = _flat(result.output)
    assert str(out) in message and "did not finish" in message and "rerun" in message, message
    mixture = tmp_path / "mix.yaml"
    mixture.write_text(
        yaml.safe_dump({"name": "m", "sources": [{"name": "a", "paths": [str(out)], "weight": 1}]})
    )
    result = runner.invoke(app, ["shards", "mix", str(mixture)])
    assert result.exit_code == 2 and "did not finish" in _flat(result.output), result.output


def test_an_unfinished_build_inside_a_scanned_folder_is_refused(tmp_path):
    _unfinished(tmp_path / "all")  # tmp/all/unf: resolved through tmp/all's .idx files
    with pytest.raises(ValueError, match="did not finish"):
        resolve_prefixes(tmp_path / "all")
    assert not validate_path(tmp_path / "all")["ok"]


def test_a_rerun_that_stopped_leaves_a_stale_manifest_that_is_refused(tmp_path):
    out = _finished(tmp_path)
    (out / "logs" / "completions" / "00001").unlink()  # the rerun removed task 1's marker, then was killed
    with pytest.raises(ValueError, match="did not finish"):
        resolve_prefixes(out)
    assert any("did not finish" in e for e in validate_path(out)["errors"])


def test_a_finished_build_and_a_bare_megatron_folder_read_as_before(tmp_path):
    done = _finished(tmp_path)
    assert len(resolve_prefixes(done)) == 2 and validate_path(done)["ok"]
    shutil.rmtree(done / "logs")  # a finished build copied without its logs/
    assert len(resolve_prefixes(done)) == 2 and validate_path(done)["ok"]
    bare = _bare(tmp_path)
    assert len(resolve_prefixes(bare)) == 2
    report = validate_path(bare)
    assert report["ok"] and report["files"] == 2 and report["documents"] == 2 * len(DOCS)


def test_a_bin_without_its_index_in_a_bare_folder_is_named(tmp_path):
    bare = _bare(tmp_path)
    (bare / "part_2.bin").write_bytes(b"\x05\x00")
    report = validate_path(bare)
    assert not report["ok"] and f"{bare / 'part_2.idx'}: missing" in " ".join(report["errors"]), report
    result = runner.invoke(app, ["shards", "inspect", str(bare), "-o", str(tmp_path / "insp")])
    assert result.exit_code == 0 and f"{bare / 'part_2.idx'}: missing" in _flat(result.output), result.output


def test_train_refuses_an_unfinished_build_before_anything_is_written(tmp_path):
    out = _unfinished(tmp_path)
    recipe = {
        "name": "t",
        "output_dir": str(tmp_path / "train"),
        "model": {
            "config": {
                "vocab_size": 32,
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 1,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "max_position_embeddings": 64,
                "eos_token_id": 0,
            }
        },  # fmt: skip
        "trainer": {"seq_len": 16, "global_batch_tokens": 64, "micro_batch_size": 4, "device": "cpu"},
        "stages": [
            {
                "name": "stable",
                "kind": "stable",
                "tokens": 128,
                "warmup_tokens": 64,
                "mixture": {"sources": [{"name": "a", "paths": [str(out)], "weight": 1}]},
            }
        ],  # fmt: skip
    }
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    result = runner.invoke(app, ["train", str(path), "--no-progress"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    message = _flat(result.output)
    assert "stage stable: source a:" in message and "did not finish" in message, message
    assert not (tmp_path / "train").exists()
