"""`--emit megatron`: where each command loads and saves checkpoints, that a rerun resumes, that nothing trains from
random init unasked, and what a decay branch's data is in Megatron."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

TRACKER = "latest_checkpointed_iteration.txt"


def _blocks(text: str) -> dict[str, str]:
    """{stage: its block} of emit()'s text (the conversion line and the closing note left out)."""
    return {b.split("\n", 1)[0].split()[2]: b for b in text.split("\n\n") if b.startswith("# stage ")}


def _flag(block: str, flag: str) -> str | None:
    words = shlex.split(block, comments=True)
    return words[words.index(flag) + 1] if flag in words else None


def _pretrained(tmp_path: Path, tiny_shards: Path, mt, out: str, **recipe_args):
    """The tiny recipe with a local HF base (`model.path`), its output_dir OUT (relative: the working folder's)."""
    from transformers import LlamaConfig

    from midtrain.config import TrainRecipe

    recipe = mt.recipe(tiny_shards, Path(out), decay_tokens=512, **recipe_args)
    LlamaConfig(**recipe["model"]["config"]).save_pretrained(tmp_path / "base")
    recipe["model"] = {"path": str(tmp_path / "base")}
    return TrainRecipe.model_validate(recipe)


def test_every_path_is_absolute_and_each_stage_loads_what_it_must(tiny_shards, tmp_path, mt, monkeypatch):
    # --save/--load were relative to the folder the command ran in (a decay run from another folder found no
    # checkpoint), and nothing passed --exit-on-missing-checkpoint: Megatron then trained a random model
    from midtrain.megatron import emit

    monkeypatch.chdir(tmp_path)
    recipe = _pretrained(tmp_path, tiny_shards, mt, "runs/x")
    blocks = _blocks(emit(recipe, nproc=2))
    run = tmp_path / "runs" / "x"
    for name, block in blocks.items():
        folder = str(run / name / "megatron")
        assert _flag(block, "--load") == folder and _flag(block, "--save") == folder  # a rerun resumes it
        assert "--exit-on-missing-checkpoint" in shlex.split(block, comments=True)
        assert "--finetune" not in block  # finetune on every run restarted the stage at iteration 0
        data = shlex.split(block, comments=True)
        prefixes = data[data.index("--data-path") + 2 : data.index("--split") : 2]
        assert prefixes and all(os.path.isabs(p) for p in prefixes)
        assert os.path.isabs(_flag(block, "--tokenizer-model") or "")
    # the base is read while the stable folder has no checkpoint yet (Megatron's --pretrained-checkpoint)
    assert _flag(blocks["stable"], "--pretrained-checkpoint") == f"{tmp_path / 'base'}-mcore"
    assert _flag(blocks["decay"], "--pretrained-checkpoint") is None

    # a model built from its config starts from random init by design: its first run must not exit
    from midtrain.config import TrainRecipe

    scratch = _blocks(emit(TrainRecipe.model_validate(mt.recipe(tiny_shards, Path("runs/y"))), nproc=2))
    assert "--exit-on-missing-checkpoint" not in scratch["stable"]
    assert _flag(scratch["stable"], "--load") == str(tmp_path / "runs" / "y" / "stable" / "megatron")


def _fake_torchrun(tmp_path: Path) -> dict[str, str]:
    """PATH with a `torchrun` that writes its arguments, one a line, to $TORCHRUN_LOG."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "torchrun").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$TORCHRUN_LOG"\n')
    (bin_dir / "torchrun").chmod(0o755)
    log = tmp_path / "torchrun.log"
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", TORCHRUN_LOG=str(log))


def _checkpoint(folder: Path, iteration: int) -> Path:
    """A Megatron checkpoint folder as save_checkpoint leaves it: iter_N/ and the tracker naming N."""
    (folder / f"iter_{iteration:07d}").mkdir(parents=True)
    (folder / f"iter_{iteration:07d}" / "common.pt").write_text(f"weights {iteration}")
    (folder / TRACKER).write_text(str(iteration))
    return folder / f"iter_{iteration:07d}"


def test_a_decay_branch_starts_from_the_stable_end_once_then_resumes_itself(tiny_shards, tmp_path, mt):
    # the branch loaded the stable checkpoint on every run: a rerun after a preemption restarted the branch
    from midtrain.megatron import emit

    run = tmp_path / "my run"  # a space: the seed's paths are quoted too
    decay = _blocks(emit(_pretrained(tmp_path, tiny_shards, mt, str(run)), nproc=2))["decay"]
    env = _fake_torchrun(tmp_path)
    elsewhere = tmp_path / "elsewhere"  # the folder the command is run from does not matter
    elsewhere.mkdir()

    def run_block() -> subprocess.CompletedProcess:
        Path(env["TORCHRUN_LOG"]).unlink(missing_ok=True)
        return subprocess.run(["bash", "-c", decay], cwd=elsewhere, env=env, capture_output=True, text=True)

    stable, branch = run / "stable" / "megatron", run / "decay" / "megatron"
    _checkpoint(stable, 8)  # stable preempted at iteration 8 of 16: no branch from there
    result = run_block()
    assert result.returncode != 0 and not Path(env["TORCHRUN_LOG"]).exists()
    assert "has no checkpoint of stage stable's last iteration 16" in result.stderr
    assert not (branch / TRACKER).exists()

    last = _checkpoint(stable, 16)  # stable finished (4096 tokens / 256 a step)
    result = run_block()
    assert result.returncode == 0, result.stderr
    assert (branch / TRACKER).read_text().strip() == "16"
    seeded = branch / "iter_0000016" / "common.pt"
    assert seeded.read_text() == "weights 16" and seeded.stat().st_ino == (last / "common.pt").stat().st_ino
    args = Path(env["TORCHRUN_LOG"]).read_text().splitlines()
    assert args[args.index("--load") + 1] == str(branch) == args[args.index("--save") + 1]

    # the branch checkpointed at iteration 17, then was preempted: the rerun resumes it, not the stable end
    _checkpoint(branch, 17)
    (branch / TRACKER).write_text("17")
    assert run_block().returncode == 0
    assert (branch / TRACKER).read_text() == "17" and (branch / "iter_0000017").is_dir()
    assert (last / "common.pt").read_text() == "weights 16"  # the stable checkpoint untouched


def test_the_stable_command_runs_from_any_folder(tiny_shards, tmp_path, mt, monkeypatch):
    from midtrain.megatron import emit

    monkeypatch.chdir(tmp_path)
    stable = _blocks(emit(_pretrained(tmp_path, tiny_shards, mt, "runs/x"), nproc=2))["stable"]
    env = _fake_torchrun(tmp_path)
    subprocess.run(["bash", "-c", stable], cwd=tiny_shards, env=env, check=True)
    args = Path(env["TORCHRUN_LOG"]).read_text().splitlines()
    assert args[args.index("--load") + 1] == str(tmp_path / "runs" / "x" / "stable" / "megatron")


def test_a_branch_says_how_megatron_reads_its_sources(tiny_shards, tmp_path, mt):
    # the branch inherits the stable checkpoint's consumed samples: Megatron builds the blend for stable + branch
    # samples and reads its tail, a random draw with repeats where mathmix reads each document once
    from midtrain.megatron import SourceShards, data_note, emit
    from shards.indexed import IndexedDataset

    recipe = _pretrained(tmp_path, tiny_shards, mt, str(tmp_path / "run"))
    decay = _blocks(emit(recipe, nproc=2))["decay"]
    assert "consumed_train_samples 128 " in decay and "--train-samples 144 (~9x the branch)" in decay
    tokens = IndexedDataset(str(tiny_shards / "a" / "part")).num_tokens
    epochs, reads = 144 * 0.7 * 32 / tokens, 16 * 0.7 * 32 / tokens
    assert f"#   a: {tokens:,} tokens, share 0.7: {epochs:.2f} epochs built, {reads:.2f}x read: " in decay

    # a source holding its branch share exactly, in a branch of a tenth of the run (the 3B recipe's 20B of 220B)
    note = data_note(recipe, [SourceShards("web", 1.0, ["/x"], [1000 * 32])], base=10_000, samples=1000)
    assert note[-1].endswith(
        "11.00 epochs built, 1.00x read: about 35% of it never read, 26% read twice or more"
    )


@pytest.mark.parametrize("built", [True, False])
def test_shards_not_built_yet_are_said(tiny_shards, tmp_path, mt, built):
    # folder paths went into --data-path as prefixes, which Megatron fails on much later
    from midtrain.config import TrainRecipe
    from midtrain.megatron import emit

    shards = tiny_shards if built else tmp_path / "nothing"
    text = emit(TrainRecipe.model_validate(mt.recipe(shards, tmp_path / "run", decay_tokens=512)), nproc=2)
    for block in _blocks(text).values():
        assert ("# shards not found: " in block) is not built
        if not built:
            assert f"{shards / 'a'}, {shards / 'b'}: " in block and "emit these commands again" in block


def test_the_branch_data_estimate_is_what_megatron_core_reads(tiny_shards, tmp_path, mt):
    """data_note's share of a source never read and read twice or more, against megatron-core's own GPTDataset
    index for stable + branch samples, read from the stable stage's consumed samples on."""
    from types import SimpleNamespace

    import numpy as np

    pytest.importorskip("megatron.core.datasets.helpers_cpp")
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from megatron.core.datasets.utils import Split

    from midtrain.config import TrainRecipe
    from midtrain.megatron import SourceShards, data_note
    from shards.indexed import write_indexed

    recipe = TrainRecipe.model_validate(mt.recipe(tiny_shards, tmp_path / "run"))
    seq = recipe.trainer.seq_len
    rng = np.random.default_rng(0)
    docs = [[*rng.integers(1, 60, size=int(rng.integers(seq // 2, 3 * seq // 2))), 0] for _ in range(4000)]
    write_indexed(tmp_path / "web" / "part", docs, vocab_size=64)
    shards = IndexedDataset(str(tmp_path / "web" / "part"))
    tokens = int(shards.sequence_lengths.sum())
    tokenizer = SimpleNamespace(vocab_size=64, eod=0, pad=-1, unique_identifiers={"class": "test"})
    config = GPTDatasetConfig(random_seed=1234, sequence_length=seq, blend=None, blend_per_split=None,
                              split="100,0,0", path_to_cache=None, reset_position_ids=False,
                              reset_attention_mask=False, eod_mask_loss=False, tokenizer=tokenizer)  # fmt: skip
    branch = tokens // seq  # the source holds the branch's share of it once
    for base in (10 * branch, branch):
        data = GPTDataset(
            shards, None, np.arange(len(docs), dtype=np.int32), base + branch, Split.train, config
        )
        reads = np.zeros(len(docs), dtype=int)
        for i in data.shuffle_index[base : base + branch]:  # the samples the branch reads
            (d0, o0), (d1, o1) = data.sample_index[i], data.sample_index[i + 1]
            first = range(d0 if o0 == 0 else d0 + 1, d1 + 1 if o1 > 0 else d1)  # documents that start in it
            np.add.at(reads, data.document_index[list(first)], 1)
        line = data_note(recipe, [SourceShards("web", 1.0, ["web/part"], [tokens])], base, branch)[-1]
        found = re.search(r"about (\d+)% of it never read, (\d+)% read twice or more", line)
        assert found, line
        never, twice = (int(n) for n in found.groups())
        assert abs(never - 100 * np.mean(reads == 0)) < 2 and abs(twice - 100 * np.mean(reads >= 2)) < 2, line


@pytest.mark.parametrize("tracker", ["5", "release"])
def test_a_branch_from_a_megatron_folder_outside_the_recipe_seeds_what_its_tracker_names(
    tiny_shards, tmp_path, mt, tracker
):
    from midtrain.megatron import emit

    start = tmp_path / "other run" / "megatron"
    folder = start / ("release" if tracker == "release" else f"iter_{int(tracker):07d}")
    folder.mkdir(parents=True)
    (folder / "common.pt").write_text("weights")
    (start / TRACKER).write_text(tracker)
    recipe = _pretrained(tmp_path, tiny_shards, mt, str(tmp_path / "run"))
    recipe.stages[1].start_from = str(start)
    decay = _blocks(emit(recipe, nproc=2))["decay"]
    env = _fake_torchrun(tmp_path)
    subprocess.run(["bash", "-c", decay], cwd=tmp_path, env=env, check=True)
    branch = tmp_path / "run" / "decay" / "megatron"
    assert (branch / TRACKER).read_text().strip() == tracker
    assert (branch / folder.name / "common.pt").read_text() == "weights"


def test_a_branch_from_a_megatron_folder_counts_its_samples_from_the_folders_iteration(
    tiny_shards, tmp_path, mt
):
    """Counted from 0, the branch's samples ended before the folder's iteration: Megatron resumed there and
    trained nothing. From the folder at the stable stage's last iteration, the flags are the named branch's."""
    from midtrain.megatron import emit, end_samples

    recipe = _pretrained(tmp_path, tiny_shards, mt, str(tmp_path / "run"))
    named = _blocks(emit(recipe, nproc=2))["decay"]
    last = end_samples(recipe, recipe.stage("stable")) // recipe.trainer.sequences_per_step()
    start = tmp_path / "other run" / "megatron"
    start.mkdir(parents=True)
    recipe.stages[1].start_from = str(start)
    unknown = _blocks(emit(recipe, nproc=2))["decay"]
    assert f"{start} has no {TRACKER} yet: the samples below count from 0" in unknown
    assert _flag(unknown, "--train-samples") == str(
        end_samples(recipe, recipe.stage("decay"))
    )  # the branch's
    (start / TRACKER).write_text(f"{last}\n")
    folder = _blocks(emit(recipe, nproc=2))["decay"]
    assert "samples below count from 0" not in folder
    for flag in ("--train-samples", "--lr-decay-samples", "--lr-wsd-decay-samples"):
        assert _flag(folder, flag) == _flag(named, flag), flag
    assert int(_flag(folder, "--train-samples")) > last * recipe.trainer.sequences_per_step()
    assert "# data: the branch goes on from consumed_train_samples" in folder
    # the seed checks the tracker still names the iteration the samples count from
    (start / f"iter_{last + 1:07d}").mkdir()
    (start / TRACKER).write_text(f"{last + 1}\n")
    seed = subprocess.run(["bash", "-c", folder], cwd=tmp_path, env=_fake_torchrun(tmp_path),
                          capture_output=True, text=True)  # fmt: skip
    assert seed.returncode != 0 and f"no longer names iteration {last}" in seed.stderr, seed.stderr
