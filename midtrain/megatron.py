"""`--emit megatron`: the Megatron-LM `pretrain_gpt.py` command equivalent to each stage of a train recipe.

Megatron counts in samples: a stage trains the trainer's steps (max(1, tokens // global batch)) x the batch. A
decay branch loads the stable checkpoint and runs Megatron's WSD schedule whose decay window is the branch.
Only Llama-family models are emitted; intra-document attention uses Megatron's local attention, the one path
that applies the dense mask `--reset-attention-mask` builds (MASK_NOTE).
"""

from __future__ import annotations

import shlex

from midtrain.config import StageConfig, TrainRecipe, TrainRecipeError

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


def stage_command(recipe: TrainRecipe, stage: StageConfig, model: list[str], nproc: int = 8) -> str:
    """One `torchrun ... pretrain_gpt.py` command line for `stage`, with `model` = model_args(...).

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
    save = recipe.stage_dir(stage.name) / "megatron"
    if stage.kind == "stable":
        lines += [f"--train-samples {samples}", "--lr-decay-style constant"]  # warmup, then the peak
        if recipe.model.path:  # the pretrained base, converted to Megatron format beforehand (see `emit`)
            lines += [f"--load {shlex.quote(recipe.model.path + '-mcore')}", "--finetune"]
    else:
        source = str(stage.start_from)  # a decay stage has one (StageConfig checks)
        base = train_samples(recipe, recipe.stage(source)) if source in [s.name for s in recipe.stages] else 0
        start = recipe.stage_dir(source) / "megatron" if base else source
        decay = max(1, stage.tokens // t.seq_len)  # the trainer decays over the stage's tokens
        lines += [
            f"--train-samples {base + samples}",
            f"--lr-decay-samples {base + decay}",
            "--lr-decay-style WSD",
            f"--lr-wsd-decay-style {WSD_STYLE[stage.decay_shape]}",
            f"--lr-wsd-decay-samples {decay}",
            f"--load {shlex.quote(str(start))}",
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
        f"--save {shlex.quote(str(save))}",
        f"--save-interval {t.checkpoint_every}",
        # the dense document mask needs Megatron's own attention and the unfused softmax (MASK_NOTE)
        "--transformer-impl local --no-masked-softmax-fusion"
        if t.intra_document
        else "--attention-backend flash",
    ]
    return " \\\n    ".join(lines)


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
        path = shlex.quote(recipe.model.path)
        size = "mistral" if hf_config.model_type == "mistral" else "llama3"
        impl = "local" if t.intra_document else "transformer_engine"
        blocks.append(
            "# first convert the HF base: python tools/checkpoint/convert.py --model-type GPT "
            f"--loader llama_mistral --saver core --saver-transformer-impl {impl} --checkpoint-type hf "
            f"--model-size {size} "
            f"--load-dir {path} --save-dir {shlex.quote(recipe.model.path + '-mcore')} --tokenizer-model {path}"
        )
    for stage in recipe.stages:
        if stages and stage.name not in stages:
            continue
        command = stage_command(recipe, stage, model, nproc)
        blocks.append(f"# stage {stage.name} ({stage.kind}, {stage.tokens:,} tokens)\n{command}")
    if t.intra_document:
        blocks.append(MASK_NOTE)
    return "\n\n".join(blocks) + "\n"
