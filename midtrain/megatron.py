"""`--emit megatron`: the Megatron-LM `pretrain_gpt.py` command equivalent to each stage of a train recipe.

Megatron counts in samples (sequences), so token budgets become samples of seq_len. A decay branch loads the
stable stage's checkpoint and runs Megatron's WSD schedule whose whole decay window is the branch: cumulative
train samples = stable + branch, `--lr-wsd-decay-samples` = the branch, with the scheduler overridden.
"""

from __future__ import annotations

import shlex

from midtrain.config import StageConfig, TrainRecipe

WSD_STYLE = {"cosine": "cosine", "linear": "linear", "1-sqrt": "minus_sqrt"}
MASK_NOTE = (
    "# note: Megatron's flash / Transformer Engine attention ignores the dense mask of --reset-attention-mask\n"
    "# (NVIDIA/Megatron-LM#2357): check that your version keeps attention inside documents as mathmix does."
)


def data_path_args(recipe: TrainRecipe, stage: StageConfig) -> list[str]:
    """Weighted `--data-path w1 prefix1 w2 prefix2 ...`: each source's share split over its shard files by tokens."""
    from shards.indexed import IndexedDataset
    from shards.manifest import resolve_prefixes

    mixture = stage.build_mixture(recipe.run_dir)
    budgets = {s.name: s.tokens for s in mixture.sources if s.tokens is not None}
    rest = max(0.0, 1.0 - sum(budgets.values()) / stage.tokens)
    wsum = sum(s.weight for s in mixture.sources if s.weight is not None) or 1.0
    args: list[str] = []
    for source in mixture.sources:
        share = budgets[source.name] / stage.tokens if source.name in budgets else rest * source.weight / wsum
        try:
            prefixes = [p for path in source.paths for p in resolve_prefixes(path)]
            tokens = [IndexedDataset(p).num_tokens for p in prefixes]
        except FileNotFoundError:  # shards not built yet: name the paths as given
            prefixes, tokens = list(source.paths), [1] * len(source.paths)
        total = sum(tokens) or 1
        for prefix, n in zip(prefixes, tokens, strict=True):
            args += [f"{share * n / total:.6g}", prefix]
    return args


def model_args(hf_config) -> list[str]:
    c = hf_config
    args = [
        f"--num-layers {c.num_hidden_layers}",
        f"--hidden-size {c.hidden_size}",
        f"--ffn-hidden-size {c.intermediate_size}",
        f"--num-attention-heads {c.num_attention_heads}",
        f"--max-position-embeddings {c.max_position_embeddings}",
        "--position-embedding-type rope",
        f"--rotary-base {int(getattr(c, 'rope_theta', None) or (c.rope_parameters or {}).get('rope_theta', 10000))}",
        "--normalization RMSNorm",
        f"--norm-epsilon {c.rms_norm_eps}",
        "--swiglu",
        "--disable-bias-linear",
        # Megatron's defaults are 0.1 each; the HF model trains with its own (0 for Llama: no hidden dropout)
        f"--attention-dropout {getattr(c, 'attention_dropout', 0.0) or 0.0}",
        f"--hidden-dropout {getattr(c, 'hidden_dropout', 0.0) or 0.0}",
    ]
    kv = getattr(c, "num_key_value_heads", None)
    if kv and kv != c.num_attention_heads:
        args.append(f"--group-query-attention --num-query-groups {kv}")
    rope = getattr(c, "rope_scaling", None) or getattr(c, "rope_parameters", None) or {}
    if rope.get("rope_type") == "llama3":
        args.append("--use-rope-scaling")
    if not getattr(c, "tie_word_embeddings", False):
        args.append("--untie-embeddings-and-output-weights")
    return args


def stage_command(recipe: TrainRecipe, stage: StageConfig, nproc: int = 8) -> str:
    """One `torchrun ... pretrain_gpt.py` command line for `stage`."""
    t = recipe.trainer
    samples = stage.tokens // t.seq_len
    lines = [f"torchrun --nproc_per_node {nproc} pretrain_gpt.py"]
    lines += model_args(recipe.model.build_hf_config())
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
        f"--lr-warmup-samples {stage.warmup_tokens // t.seq_len}",
    ]
    save = recipe.stage_dir(stage.name) / "megatron"
    if stage.kind == "stable":
        lines += [f"--train-samples {samples}", "--lr-decay-style constant"]  # warmup, then the peak
        if recipe.model.path:  # the pretrained base, converted to Megatron format beforehand (see `emit`)
            lines += [f"--load {recipe.model.path}-mcore", "--finetune"]
    else:
        base = recipe.stage(stage.start_from).tokens // t.seq_len if stage.start_from in _names(recipe) else 0
        start = recipe.stage_dir(stage.start_from) / "megatron" if base else stage.start_from
        lines += [
            f"--train-samples {base + samples}",
            f"--lr-decay-samples {base + samples}",
            "--lr-decay-style WSD",
            f"--lr-wsd-decay-style {WSD_STYLE[stage.decay_shape]}",
            f"--lr-wsd-decay-samples {samples}",
            f"--load {start}",
            "--override-opt_param-scheduler",
        ]
    if t.intra_document:  # positions restart per document, no attention or loss across a document boundary
        lines.append("--reset-position-ids --reset-attention-mask --eod-mask-loss")
    tokenizer = recipe.model.tokenizer_source
    if tokenizer:
        lines.append(f"--tokenizer-type HuggingFaceTokenizer --tokenizer-model {shlex.quote(tokenizer)}")
    lines += [
        "--data-path " + " ".join(shlex.quote(a) for a in data_path_args(recipe, stage)),
        "--split 100,0,0",
        f"--save {save}",
        f"--save-interval {t.checkpoint_every}",
        "--attention-backend flash",
    ]
    return " \\\n    ".join(lines)


def _names(recipe: TrainRecipe) -> list[str]:
    return [s.name for s in recipe.stages]


def emit(recipe: TrainRecipe, stages: list[str] | None = None, nproc: int = 8) -> str:
    """The commands of every stage (or `stages`), one block each, with the stage name as a comment.

    Raises:
        TrainRecipeError: the global batch does not split into micro-batches over `nproc` data-parallel ranks
            (Megatron would stop at start-up).
    """
    from midtrain.config import TrainRecipeError

    t = recipe.trainer
    if t.sequences_per_step() % (t.micro_batch_size * nproc):
        raise TrainRecipeError(
            f"--emit megatron: {t.sequences_per_step()} sequences per step do not split into "
            f"trainer.micro_batch_size {t.micro_batch_size} x {nproc} GPUs (--nproc)"
        )
    blocks = []
    if recipe.model.path:
        blocks.append(
            f"# first convert the HF base: python tools/checkpoint/convert.py --model-type GPT --loader llama_mistral "
            f"--saver core --checkpoint-type hf --model-size llama3 --load-dir {recipe.model.path} "
            f"--save-dir {recipe.model.path}-mcore --tokenizer-model {recipe.model.path}"
        )
    for stage in recipe.stages:
        if stages and stage.name not in stages:
            continue
        blocks.append(
            f"# stage {stage.name} ({stage.kind}, {stage.tokens:,} tokens)\n{stage_command(recipe, stage, nproc)}"
        )
    if recipe.trainer.intra_document:
        blocks.append(MASK_NOTE)
    return "\n\n".join(blocks) + "\n"
