"""`--emit megatron`: the Megatron-LM `pretrain_gpt.py` command equivalent to each stage of a train recipe.

Megatron counts in samples: a stage trains the trainer's steps (max(1, tokens // global batch)) x the batch. A
decay branch continues the stable checkpoint and runs Megatron's WSD schedule whose decay window is the branch.
Only Llama-family models are emitted; intra-document attention uses Megatron's local attention, the one path
that applies the dense mask `--reset-attention-mask` builds (MASK_NOTE).

Checkpoints, as Megatron-LM's megatron/training/checkpointing.py reads them (load_checkpoint, main branch): every
stage loads from and saves to its own folder (`--load` == `--save`), so a rerun after a preemption resumes there
(iteration, optimizer, consumed samples) as mathmix's trainer does. A folder without `latest_checkpointed_iteration.txt`
makes Megatron warn once and train from random init; `--exit-on-missing-checkpoint` makes it exit instead, wherever a
checkpoint must be loaded. The stable stage starts from the converted base with `--pretrained-checkpoint`: Megatron
reads it (and sets finetune: iteration 0, no optimizer state) only when `--load` holds no tracker, and raises
FileNotFoundError when neither does, so the exit flag never stops its first run. A decay branch's folder is first
seeded (`seed_branch`) with the stable stage's final iteration and a tracker naming it. Every path is absolute: the
commands run from any folder.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from midtrain.config import StageConfig, TrainRecipe, TrainRecipeError
from midtrain.megatron_data import SourceShards, data_note, data_path_args, stage_sources

__all__ = [  # the data's part lives in midtrain.megatron_data; imported from here as before the split
    "LLAMA3_ROPE",
    "MASK_NOTE",
    "TRACKER",
    "WSD_STYLE",
    "SourceShards",
    "data_note",
    "data_path_args",
    "emit",
    "end_samples",
    "folder_iteration",
    "megatron_dir",
    "model_args",
    "seed_branch",
    "stage_command",
    "stage_sources",
    "start_samples",
    "train_samples",
]

TRACKER = "latest_checkpointed_iteration.txt"  # Megatron's get_checkpoint_tracker_filename

WSD_STYLE = {"cosine": "cosine", "linear": "linear", "1-sqrt": "minus_sqrt"}
# Megatron's llama3 RoPE scaling hard-codes these (RotaryEmbedding._apply_scaling); only the factor is a flag
LLAMA3_ROPE = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
MASK_NOTE = (
    "# note: intra-document attention runs on --transformer-impl local --no-masked-softmax-fusion, not\n"
    "# --attention-backend flash: Transformer Engine attention (flash, fused, unfused) and the fused causal\n"
    "# softmax ignore the dense mask of --reset-attention-mask (NVIDIA/Megatron-LM#2357): documents would\n"
    "# see each other. The local path applies the mask but materializes seq x seq scores (slower, more\n"
    "# memory); with trainer.intra_document: false the commands use --attention-backend flash."
)


def model_args(hf_config) -> list[str]:
    """The Megatron GPT flags of a Llama-family HF config.

    Raises:
        TrainRecipeError: an architecture (model_type, biases, activation, RoPE) the flags cannot express.
    """
    c = hf_config
    kind = getattr(c, "model_type", None)

    def refuse(why: str) -> None:
        raise TrainRecipeError(f"--emit megatron: model_type {kind!r}: {why}")

    if kind not in ("llama", "mistral"):
        refuse(
            "only the Llama architecture (llama; mistral without sliding window) maps to Megatron GPT flags"
        )
    if getattr(c, "sliding_window", None):
        refuse(f"sliding_window {c.sliding_window} has no faithful Megatron flag; set it to null")
    if c.hidden_act != "silu":
        refuse(f"hidden_act {c.hidden_act!r}: Megatron's --swiglu is SiLU-gated")
    qkv_bias, mlp_bias = bool(getattr(c, "attention_bias", False)), bool(getattr(c, "mlp_bias", False))
    if qkv_bias != mlp_bias:  # Megatron's add_bias_linear covers the attention output projection and the MLP
        refuse(
            f"attention_bias {qkv_bias} with mlp_bias {mlp_bias}: Megatron biases o_proj and the MLP together"
        )
    rope = getattr(c, "rope_parameters", None) or getattr(c, "rope_scaling", None) or {}
    rope_type = rope.get("rope_type", rope.get("type")) or "default"
    if rope_type not in ("default", "llama3"):
        refuse(f"rope_type {rope_type!r}: Megatron's flags know plain RoPE and llama3 scaling only")
    if rope_type == "llama3" and any(float(rope.get(k, v)) != v for k, v in LLAMA3_ROPE.items()):
        refuse(f"llama3 RoPE scaling other than Megatron's fixed {LLAMA3_ROPE}")
    theta = getattr(c, "rope_theta", None) or rope.get("rope_theta", 10000)
    args = [
        f"--num-layers {c.num_hidden_layers}",
        f"--hidden-size {c.hidden_size}",
        f"--ffn-hidden-size {c.intermediate_size}",
        f"--num-attention-heads {c.num_attention_heads}",
        f"--max-position-embeddings {c.max_position_embeddings}",
        "--position-embedding-type rope",
        f"--rotary-base {int(theta)}",
        "--normalization RMSNorm",
        f"--norm-epsilon {c.rms_norm_eps}",
        "--swiglu",
        # with biases, Megatron's default add_bias_linear gives o_proj and the MLP theirs
        "--add-qkv-bias" if qkv_bias else "--disable-bias-linear",
        # Megatron's defaults are 0.1 each; the HF model trains with its own (0 for Llama: no hidden dropout)
        f"--attention-dropout {getattr(c, 'attention_dropout', 0.0) or 0.0}",
        f"--hidden-dropout {getattr(c, 'hidden_dropout', 0.0) or 0.0}",
    ]
    head_dim = getattr(c, "head_dim", None)
    if head_dim and head_dim != c.hidden_size // c.num_attention_heads:
        args.append(f"--kv-channels {head_dim}")
    kv = getattr(c, "num_key_value_heads", None)
    if kv and kv != c.num_attention_heads:
        args.append(f"--group-query-attention --num-query-groups {kv}")
    if rope_type == "llama3":
        args.append(f"--use-rope-scaling --rope-scaling-factor {rope.get('factor', 8.0)}")
    if not getattr(c, "tie_word_embeddings", False):
        args.append("--untie-embeddings-and-output-weights")
    return args


def train_samples(recipe: TrainRecipe, stage: StageConfig) -> int:
    """The samples the trainer trains in `stage`: its steps (midtrain/trainer.py) x the global batch."""
    t = recipe.trainer
    return max(1, stage.tokens // t.global_batch_tokens) * t.sequences_per_step()


def end_samples(recipe: TrainRecipe, stage: StageConfig) -> int:
    """Megatron's consumed samples at the end of `stage` (`start_samples` + its own)."""
    return start_samples(recipe, stage) + train_samples(recipe, stage)


def start_samples(recipe: TrainRecipe, stage: StageConfig) -> int:
    """Megatron's consumed samples where `stage` starts: a branch goes on from the counters of the stage it starts
    from, or of its checkpoint folder (the iteration its tracker names x the global batch: 0 where it names none
    yet, or `release`); a stable stage starts at 0. Counted from 0 for a folder at iteration N, a branch would
    train only its own samples less N steps' worth: nothing, from a stable stage's end."""
    if stage.kind != "decay" or stage.start_from is None:
        return 0
    if stage.start_from in [s.name for s in recipe.stages]:
        return end_samples(recipe, recipe.stage(stage.start_from))
    return (folder_iteration(stage.start_from) or 0) * recipe.trainer.sequences_per_step()


def folder_iteration(folder: str) -> int | None:
    """The iteration the tracker of Megatron checkpoint FOLDER names; None without a tracker, or for `release`."""
    try:
        text = (Path(folder) / TRACKER).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def megatron_dir(recipe: TrainRecipe, name: str) -> str:
    """The Megatron checkpoint folder of stage NAME (absolute: the commands run from any folder)."""
    return os.path.abspath(recipe.stage_dir(name) / "megatron")


def seed_branch(branch: str, start: str, iteration: int | None, why: str) -> list[str]:
    """Shell lines (ending in `&&`) that, only while BRANCH has no tracker yet, put START's checkpoint of ITERATION
    (None: the one START's tracker names) into BRANCH with a tracker naming it, so that `--load BRANCH` starts
    the branch there and a rerun resumes the branch's own checkpoints. Hard links (a copy across file systems):
    Megatron writes each save into a new iter_N folder and never rewrites the seeded one. WHY: the message when
    START has no checkpoint at ITERATION (its stage has not finished)."""
    q = shlex.quote
    into, tracker = q(branch + "/"), q(f"{branch}/{TRACKER}")
    if iteration is None:  # the folder the tracker names: iter_%07d, or `release`
        read = f"it=$(cat {q(f'{start}/{TRACKER}')})"
        name = '$(if [ "$it" = release ]; then echo release; else printf \'iter_%07d\' "$it"; fi)'
        check, folder, value = f"{read} && d={name}", '"$d"', '"$it"'
    else:
        found = f'"$(cat {q(f"{start}/{TRACKER}")} 2>/dev/null)"'
        check = f"{{ [ {found} = {iteration} ] || {{ echo {q(why)} >&2; false; }}; }}"
        folder, value = f"iter_{iteration:07d}", str(iteration)
    src, dst = f"{q(start)}/{folder}", f"{q(branch)}/{folder}"
    return [
        f"[ -f {tracker} ] || {{ {check}",
        f"&& rm -rf {dst} && mkdir -p {q(branch)}",
        f"&& {{ cp -al {src} {into} 2>/dev/null || {{ rm -rf {dst} && cp -a {src} {into}; }}; }}",
        f"&& echo {value} > {tracker}; }} &&",
    ]


def stage_command(recipe: TrainRecipe, stage: StageConfig, model: list[str], nproc: int = 8) -> str:
    """One `torchrun ... pretrain_gpt.py` command line for `stage`, with `model` = model_args(...); a decay branch's
    is preceded by the shell lines that seed its folder (`seed_branch`) and comments on its data (`data_note`).

    Raises:
        TrainRecipeError: a warmup Megatron's scheduler cannot run as the trainer does (one that does not end
            before the stage's last sample, or one in a decay branch).
    """
    t = recipe.trainer
    samples, warmup = train_samples(recipe, stage), stage.warmup_tokens // t.seq_len
    where = f"--emit megatron: stage {stage.name}: warmup_tokens {stage.warmup_tokens:,}"
    if stage.kind == "decay" and warmup:
        raise TrainRecipeError(
            f"{where}: Megatron counts a warmup from the run's first sample, not the branch's"
        )
    if warmup >= samples:  # Megatron asserts warmup < decay samples (= train samples for a stable stage)
        raise TrainRecipeError(
            f"{where} do not end before the stage's last step ({samples // t.sequences_per_step()} steps of "
            f"{t.global_batch_tokens:,} tokens): Megatron needs --lr-warmup-samples below --train-samples"
        )
    q = shlex.quote
    folder = megatron_dir(recipe, stage.name)
    sources = stage_sources(recipe, stage)
    head: list[str] = []
    lines = [f"torchrun --nproc_per_node {nproc} pretrain_gpt.py", *model]
    lines += [
        f"--seq-length {t.seq_len}",
        f"--micro-batch-size {t.micro_batch_size}",
        f"--global-batch-size {t.sequences_per_step()}",
        f"--lr {stage.lr or t.lr}",
        f"--min-lr {(stage.lr or t.lr) * t.min_lr_ratio:.6g}",
        f"--weight-decay {t.weight_decay}",
        f"--adam-beta1 {t.betas[0]} --adam-beta2 {t.betas[1]} --adam-eps {t.eps}",
        f"--clip-grad {t.grad_clip}",
        "--bf16",
        f"--seed {t.seed}",
        f"--lr-warmup-samples {warmup}",
    ]
    if stage.kind == "stable":
        lines += _stable_lines(recipe, folder, samples, head)
    else:
        lines += _decay_lines(recipe, stage, folder, samples, sources, head)
    if t.intra_document:  # positions restart per document, no attention or loss across a document boundary
        lines.append("--reset-position-ids --reset-attention-mask --eod-mask-loss")
    tokenizer = recipe.model.tokenizer_source
    if tokenizer:
        tokenizer = os.path.abspath(tokenizer) if os.path.exists(tokenizer) else tokenizer  # else a hub name
        lines.append(f"--tokenizer-type HuggingFaceTokenizer --tokenizer-model {q(tokenizer)}")
    missing = [s for s in sources if s.tokens is None]
    if missing:
        paths = ", ".join(p for s in missing for p in s.prefixes)
        head.append(
            f"# shards not found: {paths}: the data prefixes below are those folders, which Megatron cannot "
            "read; build the shards, then emit these commands again"
        )
    lines += [
        "--data-path " + " ".join(q(a) for a in data_path_args(recipe, stage, sources)),
        "--split 100,0,0",
        f"--save {q(folder)}",
        f"--save-interval {t.checkpoint_every}",
        # the dense document mask needs Megatron's own attention and the unfused softmax (MASK_NOTE)
        "--transformer-impl local --no-masked-softmax-fusion"
        if t.intra_document
        else "--attention-backend flash",
    ]
    comments = [line for line in head if line.startswith("#")]
    shell = [line for line in head if not line.startswith("#")]
    return "\n".join(comments + [" \\\n    ".join(shell + lines)])


def _stable_lines(recipe: TrainRecipe, folder: str, samples: int, head: list[str]) -> list[str]:
    """The schedule and checkpoint flags of a stable stage (its comments appended to HEAD)."""
    q = shlex.quote
    lines = [f"--train-samples {samples}", "--lr-decay-style constant"]  # warmup, then the peak
    lines.append(f"--load {q(folder)}")  # its own checkpoints: a rerun resumes
    if recipe.model.path:  # the pretrained base, converted to Megatron format beforehand (see `emit`)
        # read only while --load has no checkpoint, with finetune semantics (iteration 0, no optimizer state);
        # neither there: FileNotFoundError. The exit flag stops a Megatron without that fallback from
        # training a random model instead.
        pretrained = q(os.path.abspath(recipe.model.path) + "-mcore")
        lines += [f"--pretrained-checkpoint {pretrained}", "--exit-on-missing-checkpoint"]
    else:  # model.config: the recipe trains from random init, which its first run does
        head.append("# model.config: the first run starts from random init (no checkpoint in --load yet)")
    return lines


def _decay_lines(
    recipe: TrainRecipe, stage: StageConfig, folder: str, samples: int, sources: list[SourceShards],
    head: list[str],
) -> list[str]:  # fmt: skip
    """The schedule and checkpoint flags of a decay branch; its comments and the shell lines that seed its folder
    (`seed_branch`) are appended to HEAD."""
    q, t = shlex.quote, recipe.trainer
    source = str(stage.start_from)  # a decay stage has one (StageConfig checks)
    named = source in [s.name for s in recipe.stages]
    base = start_samples(recipe, stage)
    start = megatron_dir(recipe, source) if named else os.path.abspath(source)
    # the iteration the start stage ends at, or the one the folder's tracker names: `base` counts from it
    last = base // t.sequences_per_step() if named else folder_iteration(source)
    decay = max(1, stage.tokens // t.seq_len)  # the trainer decays over the stage's tokens
    why = (
        f"{stage.name}: {start} has no checkpoint of stage {source}'s last iteration {last}: run that stage "
        "to its end first"
        if named
        else f"{stage.name}: the tracker of {start} no longer names iteration {last}, which these commands "
        "count from: emit them again"
    )
    if not named and not (Path(source) / TRACKER).is_file():
        head.append(
            f"# {source} has no {TRACKER} yet: the samples below count from 0, and the branch trains only "
            "what they exceed the checkpoint's iteration by: emit these commands again once it has one"
        )
    head.append(
        f"# seed: on the first run only (no {TRACKER} in {folder} yet), the branch folder gets "
        + (f"stage {source}'s final checkpoint (iteration {last})" if named else f"the checkpoint {source}")
        + ", hard-linked; a rerun resumes the branch"
    )
    if base:
        head += data_note(recipe, sources, base, samples)
    head += seed_branch(folder, start, last, why)
    return [
        f"--train-samples {base + samples}",
        f"--lr-decay-samples {base + decay}",
        "--lr-decay-style WSD",
        f"--lr-wsd-decay-style {WSD_STYLE[stage.decay_shape]}",
        f"--lr-wsd-decay-samples {decay}",
        f"--load {q(folder)}",
        "--exit-on-missing-checkpoint",  # a folder the seed did not fill: exit, not train a random model
        "--override-opt_param-scheduler",
    ]


def emit(recipe: TrainRecipe, stages: list[str] | None = None, nproc: int = 8) -> str:
    """The commands of every stage (or `stages`), one block each, with the stage name as a comment.

    Raises:
        TrainRecipeError: the global batch does not split into micro-batches over `nproc` data-parallel ranks
            (Megatron would stop at start-up), or the model or a stage's schedule has no faithful flags.
    """
    t = recipe.trainer
    if t.sequences_per_step() % (t.micro_batch_size * nproc):
        raise TrainRecipeError(
            f"--emit megatron: {t.sequences_per_step()} sequences per step do not split into "
            f"trainer.micro_batch_size {t.micro_batch_size} x {nproc} GPUs (--nproc)"
        )
    hf_config = recipe.model.build_hf_config()
    model = model_args(hf_config)
    blocks = []
    if recipe.model.path:
        path = shlex.quote(os.path.abspath(recipe.model.path))
        size = "mistral" if hf_config.model_type == "mistral" else "llama3"
        impl = "local" if t.intra_document else "transformer_engine"
        blocks.append(
            "# first convert the HF base: python tools/checkpoint/convert.py --model-type GPT "
            f"--loader llama_mistral --saver core --saver-transformer-impl {impl} --checkpoint-type hf "
            f"--model-size {size} "
            f"--load-dir {path} --save-dir {shlex.quote(os.path.abspath(recipe.model.path) + '-mcore')} --tokenizer-model {path}"
        )
    for stage in recipe.stages:
        if stages and stage.name not in stages:
            continue
        command = stage_command(recipe, stage, model, nproc)
        blocks.append(f"# stage {stage.name} ({stage.kind}, {stage.tokens:,} tokens)\n{command}")
    if t.intra_document:
        blocks.append(MASK_NOTE)
    return "\n\n".join(blocks) + "\n"
