"""Checks made before any stage trains: the stages asked for exist, can start, and their inputs belong together.

Why up front: a missing shard folder or a vocabulary mismatch in a decay stage used to surface only after the
stable stage had trained (hours on a real run), as a traceback from the data or embedding code. Every problem
here is a TrainRecipeError whose one-line message names the stage, source, manifest or path at fault.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from midtrain.config import StageConfig, TrainerConfig, TrainRecipe, TrainRecipeError
from midtrain.stage_job import check_stage_job
from shards.manifest import token_space_difference

DONE_FILE = "done.json"


def select_stages(recipe: TrainRecipe, names: list[str] | None) -> list[StageConfig]:
    """The recipe's stages in recipe order, or only `names` (an unknown name is an error listing the stages)."""
    known = [s.name for s in recipe.stages]
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        raise TrainRecipeError(
            f"--stage {', '.join(unknown)}: not a stage of {recipe.name} (its stages: {', '.join(known)})"
        )
    return [s for s in recipe.stages if not names or s.name in names]


def check_run(
    recipe: TrainRecipe, names: list[str] | None = None, world_size: int | None = None, notes: bool = True
) -> list[StageConfig]:
    """Check everything the selected stages need, writing nothing; returns the stages to run, in order.

    `world_size`: the processes that will train (default: WORLD_SIZE, as torchrun sets it, else 1). `notes`: print
    the notes on settings that train but may not be meant (the torchrun launcher leaves them to rank 0)."""
    from midtrain import checkpoint as ckpt

    if world_size is None:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
    stages = select_stages(recipe, names)
    planned: set[str] = set()  # stages that will have finished before the next one starts
    manifests: dict[Path, dict[str, Any]] = {}
    trains = False
    for stage in stages:
        check_stage_job(recipe, stage, record=False)
        stage_dir = recipe.stage_dir(stage.name)
        if not (stage_dir / DONE_FILE).exists():  # a finished stage is skipped: it needs nothing
            if not ckpt.list_checkpoints(stage_dir / "checkpoints"):  # a resume needs no start checkpoint
                check_start(recipe, stage, planned)
            manifests |= check_mixture(recipe, stage)
            trains = True
        planned.add(stage.name)
    if trains:
        check_device(recipe.trainer, world_size)
        check_output_dir(recipe)
        if recipe.trainer.tensorboard:  # it failed as a 51-line traceback after the model was built
            import importlib.util

            if importlib.util.find_spec("tensorboard") is None:
                raise TrainRecipeError(
                    "trainer.tensorboard: true, but the tensorboard package is not installed (pip install "
                    "tensorboard), or set it false: metrics.jsonl is written either way"
                )
        check_batch(recipe.trainer, world_size)
        check_vocabulary(recipe, manifests)
        check_model(recipe, manifests, notes)
        if notes:
            note_budgets(recipe, [s for s in stages if not (recipe.stage_dir(s.name) / DONE_FILE).exists()])
    return stages


def check_device(trainer: TrainerConfig, world_size: int) -> None:
    """`device: cuda` has a GPU for every process of this node: it failed as an AttributeError traceback from
    torch's CUDA setup on a CPU-only machine, after job.json was written."""
    import torch

    if trainer.device != "cuda":
        return
    if not torch.cuda.is_available():
        raise TrainRecipeError(
            "trainer.device: cuda, but torch finds no CUDA GPU here (torch.cuda.is_available() is false; torch "
            f"{torch.__version__}): use device auto or cpu, or install a CUDA build of torch"
        )
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))  # processes on this node (torchrun sets it)
    if local > torch.cuda.device_count():
        raise TrainRecipeError(
            f"trainer.device: cuda with {local} processes on this node, but torch finds "
            f"{torch.cuda.device_count()} GPU(s): one process per GPU (lower --nproc)"
        )


def check_output_dir(recipe: TrainRecipe) -> None:
    """The stage folders do not go inside a folder the run reads: a shard folder of a mixture source (its .idx
    files are found recursively), the model or tokenizer folder, a start checkpoint (`-o` a shard folder put
    `stable/` among its .bin/.idx files). A PREFIX source's folder may hold other things: not refused."""
    from pipelines.job_record import check_output_outside_inputs

    names = [s.name for s in recipe.stages]
    inputs = [
        (path, "shard", f"stage {stage.name}, source {source.name}")
        for stage in recipe.stages
        for source in stage.build_mixture(recipe.run_dir).sources
        for path in source.paths
    ]
    inputs += [
        (stage.start_from, "checkpoint", f"stage {stage.name}'s start_from")
        for stage in recipe.stages
        if stage.start_from is not None and stage.start_from not in names
    ]
    inputs += [
        (value, "model", f"model.{key}")
        for key in ("path", "tokenizer")
        if (value := getattr(recipe.model, key))
    ]
    for path, what, setting in inputs:
        if not Path(path).is_dir():  # a file, a PREFIX, a hub name, or missing (named by the other checks)
            continue
        try:
            check_output_outside_inputs(recipe.output_dir, [path], what=what)
        except ValueError as err:
            raise TrainRecipeError(f"output_dir {err} ({setting})") from None


def check_model(recipe: TrainRecipe, manifests: dict[Path, dict[str, Any]], notes: bool = True) -> None:
    """The attention implementation exists and can train here; windows fit a model with learned positions (a
    RoPE model past its max_position_embeddings gets a note: context extension is a mid-training job); a model
    built from a config ends documents with the shards' EOS (its export would not stop generating otherwise)."""
    import importlib.util

    import torch
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    attn = recipe.model.attn_implementation
    known = ["auto", "eager", *ALL_ATTENTION_FUNCTIONS.keys()]
    if attn not in known:
        raise TrainRecipeError(f"model.attn_implementation {attn!r}: not one of {', '.join(known)}")
    if attn == "flash_attention_2" and importlib.util.find_spec("flash_attn") is None:
        raise TrainRecipeError(
            "model.attn_implementation flash_attention_2: the flash-attn package is not installed (use auto)"
        )
    device = recipe.trainer.device
    on_gpu = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if attn.startswith("flex_attention") and not on_gpu:
        raise TrainRecipeError(
            "model.attn_implementation flex_attention: it has no backward on CPU (use auto, sdpa or eager)"
        )
    hf = recipe.model.build_hf_config()  # it built in _model_vocab_size: no error left to name here
    positions, seq_len = getattr(hf, "max_position_embeddings", None), recipe.trainer.seq_len
    rope = any(getattr(hf, k, None) for k in ("rope_parameters", "rope_theta", "rope_scaling"))
    if (
        positions and seq_len > positions and not rope
    ):  # a learned position table (GPT-2): an index error later
        raise TrainRecipeError(
            f"trainer.seq_len {seq_len} is longer than the model's {positions} learned positions "
            "(max_position_embeddings): shorten seq_len or raise the model's limit"
        )
    if positions and seq_len > positions and notes and int(os.environ.get("RANK", "0")) == 0:
        import sys

        print(
            f"note: trainer.seq_len {seq_len} is past the model's max_position_embeddings {positions}: its RoPE "
            "positions extrapolate (raise max_position_embeddings or set rope scaling if that is not meant)",
            file=sys.stderr,
        )
    # transformers does not check them: 1.5 failed inside the first forward pass (after job.json was written),
    # 1.0 dropped every activation and trained on noise
    where = "model.config." if recipe.model.config is not None else f"{recipe.model.path}/config.json: "
    for key, value in sorted(hf.to_dict().items()):
        if (
            key.endswith(("dropout", "_pdrop"))
            and isinstance(value, int | float)
            and not isinstance(value, bool)
            and not 0 <= value < 1
        ):
            raise TrainRecipeError(f"{where}{key} {value}: a dropout probability is at least 0 and below 1")
    eos_ids = {eos for m in manifests.values() if (eos := m.get("eos_id")) is not None}
    model_eos = hf.eos_token_id if isinstance(hf.eos_token_id, list) else [hf.eos_token_id]
    if recipe.model.config is not None and eos_ids and not eos_ids & set(model_eos):
        raise TrainRecipeError(
            f"model.config.eos_token_id {hf.eos_token_id}, but the shards end documents with token "
            f"{sorted(eos_ids)[0]} (their manifest's eos_id): set eos_token_id to it"
        )


def note_budgets(recipe: TrainRecipe, stages: list[StageConfig]) -> None:
    """Say where a stage's token budget is not a whole number of global batches (it trains floor(tokens / batch)
    steps, at least one): silent rounding made a 100-token stage train 512; and where its warmup outlasts it (a
    "stable" stage that never reaches its peak LR, silently: `--emit megatron` refuses it)."""
    import sys

    if int(os.environ.get("RANK", "0")) != 0:
        return
    batch = recipe.trainer.global_batch_tokens
    for stage in stages:
        total = stage.build_mixture(recipe.run_dir).total_tokens
        if total is not None and total != stage.tokens:
            print(
                f"note: stage {stage.name}: its mixture's total_tokens {total:,} is not used: a stage blends "
                f"its own tokens ({stage.tokens:,})",
                file=sys.stderr,
            )
        steps = max(1, stage.tokens // batch)
        if stage.warmup_tokens > (steps - 1) * batch:  # the last step's LR is still below the peak
            print(
                f"note: stage {stage.name}: warmup_tokens {stage.warmup_tokens:,} do not end before its last step "
                f"({steps} step{'s' * (steps > 1)} of {batch:,} tokens): its LR never reaches the peak "
                f"{stage.lr or recipe.trainer.lr:g}",
                file=sys.stderr,
            )
        if stage.tokens % batch:
            print(
                f"note: stage {stage.name}: {stage.tokens:,} tokens is not a whole number of {batch:,}-token "
                f"batches; it trains {steps} step{'s' * (steps > 1)} ({steps * batch:,} tokens)",
                file=sys.stderr,
            )


def check_batch(trainer: TrainerConfig, world_size: int) -> None:
    """The global batch splits into micro-batches over the ranks (seq_len and micro_batch_size alone are
    checked when the recipe is read; the ranks are known only now)."""
    try:
        trainer.accumulation_steps(world_size)
    except ValueError as err:
        raise TrainRecipeError(f"{err}: change the batch or the number of processes") from None


def check_start(recipe: TrainRecipe, stage: StageConfig, planned: set[str]) -> None:
    """A decay stage's start: a recipe stage that is finished or runs before it, or a checkpoint folder."""
    from midtrain import checkpoint as ckpt

    if stage.start_from is None or stage.start_from in planned:
        return
    if stage.start_from in [s.name for s in recipe.stages]:
        start_dir = recipe.stage_dir(stage.start_from)
        if not (start_dir / DONE_FILE).exists() or not ckpt.list_checkpoints(start_dir / "checkpoints"):
            raise TrainRecipeError(
                f"stage {stage.name} starts from stage {stage.start_from!r}, which has not finished in "
                f"{start_dir}: run it first (or together: --stage {stage.start_from} --stage {stage.name})"
            )
    elif not (Path(stage.start_from) / ckpt.STATE_FILE).exists():
        raise TrainRecipeError(
            f"stage {stage.name}: start_from {stage.start_from} is neither a stage of this recipe nor a "
            f"checkpoint folder (no {ckpt.STATE_FILE})"
        )
    else:  # a checkpoint from elsewhere: trained with the recipe's tokenizer? (recorded since tokenizer_sha256)
        import json

        trained = json.loads((Path(stage.start_from) / ckpt.STATE_FILE).read_text()).get("tokenizer_sha256")
        ours = recipe_tokenizer_print(recipe) if trained else None
        if trained and ours and trained != ours:
            raise TrainRecipeError(
                f"stage {stage.name}: start_from {stage.start_from} was trained with another tokenizer "
                f"(fingerprint {trained}) than model.tokenizer {recipe.model.tokenizer_source} ({ours}): "
                "its token ids would mean other tokens"
            )


def check_mixture(recipe: TrainRecipe, stage: StageConfig) -> dict[Path, dict[str, Any]]:
    """Every path of every source names shards; returns the shard manifests found, by path."""
    from shards.manifest import MANIFEST, resolve_prefixes
    from shards.mixture import check_mixture_plan

    manifests = {}
    mixture = stage.build_mixture(recipe.run_dir)
    for source in mixture.sources:
        for path in source.paths:
            try:
                prefixes = resolve_prefixes(path)
            except (FileNotFoundError, ValueError) as err:  # ValueError: a damaged manifest.json, named
                raise TrainRecipeError(f"stage {stage.name}: source {source.name}: {err}") from None
            folders = [Path(path)] if Path(path).is_dir() else [Path(p).parent for p in prefixes]
            for folder in folders:
                manifest = _read_manifest(folder / MANIFEST)
                if manifest is not None:
                    manifests[folder / MANIFEST] = manifest
    try:  # the blend the stage builds: token budgets over stage.tokens used to fail once training had started
        check_mixture_plan(mixture, stage.tokens)
    except ValueError as err:  # IndexFormatError (a damaged .idx) included
        # the blend's total is the stage's `tokens` (the mixture's own total_tokens is not used): the message
        # named "total_tokens", which sent readers to the mixture file
        message = re.sub(r"\btotal_tokens\b", f"stage {stage.name}'s tokens", str(err))
        raise TrainRecipeError(f"stage {stage.name}: {message}") from None
    return manifests


def _read_manifest(path: Path) -> dict[str, Any] | None:
    """A shard folder's manifest (one with `vocab_size`); None where there is none (bare .bin/.idx files)."""
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except ValueError:
        raise TrainRecipeError(f"{path}: not valid JSON") from None
    return manifest if isinstance(manifest, dict) and "vocab_size" in manifest else None


def check_vocabulary(recipe: TrainRecipe, manifests: dict[Path, dict[str, Any]]) -> None:
    """Shards, model and tokenizer agree: one tokenizer, vocabulary and EOS over all manifests; every token id
    fits the model's embedding; the recipe's tokenizer loads and is the size the shards were built with."""
    vocab = _model_vocab_size(recipe)
    first: tuple[Path, dict[str, Any]] | None = None
    for path, manifest in sorted(manifests.items()):
        if manifest["vocab_size"] > vocab:
            raise TrainRecipeError(
                f"{path}: shards of a {manifest['vocab_size']}-token vocabulary (tokenizer "
                f"{manifest.get('tokenizer')}), larger than the model's vocab_size {vocab}"
            )
        if first is None:
            first = (path, manifest)
            continue
        key = token_space_difference(manifest, first[1])
        if key is not None:
            raise TrainRecipeError(
                f"{path}: {key} {manifest.get(key)!r}, but {first[0]} has {first[1].get(key)!r}: the sources "
                "of a run must be built with one tokenizer"
            )
    _check_tokenizer(recipe, vocab, first, manifests)


def _model_vocab_size(recipe: TrainRecipe) -> int:
    try:
        return int(recipe.model.build_hf_config().vocab_size)
    except Exception as err:  # transformers' own config checks raise their own classes too
        # (StrictDataclassClassValidationError for a layer_types of the wrong length): all one line here
        from mathmix.cli_util import first_line

        message = first_line(err)
        message = message if message.startswith("model") else f"model: {message}"
        raise TrainRecipeError(message[:400] + ("..." if len(message) > 400 else "")) from None


def _check_tokenizer(
    recipe: TrainRecipe,
    vocab: int,
    first: tuple[Path, dict[str, Any]] | None,
    manifests: dict[Path, dict[str, Any]],
) -> None:
    """The tokenizer exports copy: it must load now, not after training; its size matches the shards', and it is
    the tokenizer they were built with (its fingerprint is each manifest's `tokenizer_sha256`, where recorded:
    two BPE tokenizers of one size map text to different ids)."""
    from mathmix.cli_util import first_line
    from midtrain.export import load_tokenizer, tokenizer_fingerprint

    source = recipe.model.tokenizer_source
    if source is None:
        return
    try:
        tok = load_tokenizer(source, None)
        size, fingerprint = len(tok), tokenizer_fingerprint(source, tok)
    except (OSError, ValueError) as err:
        raise TrainRecipeError(f"model.tokenizer {source}: cannot be loaded ({first_line(err)})") from None
    if size > vocab:
        raise TrainRecipeError(
            f"model.tokenizer {source}: {size} tokens, more than the model's vocab_size {vocab}"
        )
    if first is not None and size != first[1]["vocab_size"]:
        raise TrainRecipeError(
            f"model.tokenizer {source}: {size} tokens, but {first[0]} was built with a tokenizer of "
            f"{first[1]['vocab_size']} ({first[1].get('tokenizer')})"
        )
    for path, manifest in sorted(manifests.items()):
        built = manifest.get("tokenizer_sha256")
        if built and fingerprint and built != fingerprint:
            raise TrainRecipeError(
                f"model.tokenizer {source}: fingerprint {fingerprint}, but {path} was built with another "
                f"tokenizer ({manifest.get('tokenizer')}, tokenizer_sha256 {built}): exports would decode its "
                "token ids as other tokens"
            )


def recipe_tokenizer_print(recipe: TrainRecipe) -> str | None:
    """The fingerprint of the recipe's tokenizer, recorded in each checkpoint (None: no tokenizer, or not a fast
    one)."""
    from mathmix.cli_util import first_line
    from midtrain.export import tokenizer_fingerprint

    source = recipe.model.tokenizer_source
    if source is None:
        return None
    try:
        return tokenizer_fingerprint(source)
    except (OSError, ValueError) as err:
        raise TrainRecipeError(f"model.tokenizer {source}: cannot be loaded ({first_line(err)})") from None
