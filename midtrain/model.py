"""Model building: a transformers causal LM, wrapped for FSDP2, optional activation checkpointing and compile.

FSDP2 (`fully_shard`) is applied per decoder layer then at the root (torchtitan's layout), with bf16 params and
fp32 gradient reduction on GPU. A single CPU process trains the plain module: sharding over one rank only adds
hooks, and the same checkpoints (torch.distributed.checkpoint) load into either form.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from midtrain.config import ModelConfig

if TYPE_CHECKING:  # transformers is imported where a model is built, not at import
    from transformers import PreTrainedModel

FLEX_MIN_HEAD_DIM = 16  # flex_attention's compiled kernels refuse narrower heads (NYI in torch 2.11)
# Dense bf16 peak TFLOP/s per device (no sparsity), for the MFU estimate.
GPU_PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "H800": 989.0, "A100": 312.0, "A800": 312.0, "L40S": 362.0}


def resolve_attn_implementation(
    requested: str, device: torch.device, intra_document: bool = False, hf_config=None
) -> str:
    """`auto`: flash_attention_2 (varlen over packed documents) on GPU when installed; else on GPU flex_attention
    for packed documents (it skips the blocks across documents: 49% MFU for a 1B Llama on an H200, where sdpa's
    dense document mask gave 37.5%) and sdpa for plain causal (its flash kernel: 48%); sdpa on CPU, where flex
    has no backward. With HF_CONFIG, each is picked only where the model class supports it (and flex only for
    heads of 16 or more without attention dropout, which its kernels refuse)."""
    if requested != "auto":
        return requested
    if device.type == "cuda":
        flash = _supports(hf_config, "_supports_flash_attn") or _supports(hf_config, "_supports_flash_attn_2")
        if (
            importlib.util.find_spec("flash_attn") is not None and flash
        ):  # (the second name: transformers 4.x)
            return "flash_attention_2"
        if intra_document and _supports(hf_config, "_supports_flex_attn") and _flex_fits(hf_config):
            return "flex_attention"
    return "sdpa"


def _supports(hf_config, flag: str) -> bool:
    """Whether the causal-LM class of HF_CONFIG sets FLAG (True where there is no config to ask)."""
    if hf_config is None:
        return True
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        model_class = MODEL_FOR_CAUSAL_LM_MAPPING[type(hf_config)]
    except KeyError:
        return False
    return bool(getattr(model_class, flag, False))


def _flex_fits(hf_config) -> bool:
    if hf_config is None:
        return True
    heads = getattr(hf_config, "num_attention_heads", None)
    width = getattr(hf_config, "head_dim", None) or (hf_config.hidden_size // heads if heads else 0)
    return width >= FLEX_MIN_HEAD_DIM and not getattr(hf_config, "attention_dropout", 0)


def decoder_layers(model: PreTrainedModel) -> list[nn.Module]:
    """The transformer blocks of a transformers causal LM (`model.model.layers` for Llama-like models)."""
    base = getattr(model, model.base_model_prefix, model)
    layers = getattr(base, "layers", None) or getattr(base, "h", None)
    if layers is None:
        raise ValueError(f"cannot find the decoder layers of {type(model).__name__}")
    return list(layers)


def build_model(
    config: ModelConfig, device: torch.device, world_size: int, seed: int, intra_document: bool = False
) -> PreTrainedModel:
    """Build, then activation checkpointing, then FSDP2 when world_size > 1 or on GPU (each decoder layer
    compiled first when `compile`: FSDP's hooks sit between layers). One CPU process stays a plain module, and
    `causal_lm_loss` compiles forward + loss as one graph instead."""
    torch.manual_seed(seed)  # same random init on every rank
    asks = config.attn_implementation == "auto" and device.type == "cuda"  # only then does the config matter
    hf_config = config.build_hf_config() if asks else None
    model = config.build(
        resolve_attn_implementation(config.attn_implementation, device, intra_document, hf_config)
    )
    model.config.use_cache = False
    model.train()  # from_pretrained returns eval mode, where activation checkpointing is off
    if config.activation_checkpointing:
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if world_size > 1 or device.type == "cuda":
        if config.compile:
            for layer in decoder_layers(model):
                layer.compile()
        _fully_shard(model, device)
    else:
        model.to(device)
    return model


def is_sharded(model: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def causal_lm_loss(model: nn.Module, inputs, targets, positions):
    """Mean next-token cross-entropy; inputs/targets/positions [B, T] (positions None: 0..T-1, plain causal)."""
    logits = model(input_ids=inputs, position_ids=positions, use_cache=False).logits  # [B, T, V]
    return nn.functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def loss_function(model: nn.Module, compile: bool):
    """`causal_lm_loss`, compiled whole (embedding, layers, head, loss: ~25% faster on CPU) for a plain module."""
    if compile and not is_sharded(model):
        return torch.compile(causal_lm_loss)
    return causal_lm_loss


def _fully_shard(model: PreTrainedModel, device: torch.device) -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = None
    if device.type == "cuda":
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    kwargs: dict[str, Any] = {"mp_policy": mp} if mp is not None else {}
    if device.type == "cuda":
        model.to(device)  # type: ignore[arg-type]  # transformers types it @wraps(nn.Module.to): self as an arg
    layers = decoder_layers(model)
    for i, layer in enumerate(layers):
        # the last layer's params are needed right away by the root's backward: no point resharding them
        fully_shard(layer, reshard_after_forward=i < len(layers) - 1, **kwargs)
    fully_shard(model, **kwargs)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def matmul_parameters(model: PreTrainedModel) -> int:
    """Parameters that take part in matmuls: all but an untied input embedding (a lookup, no FLOPs)."""
    n = count_parameters(model)
    if not getattr(model.config, "tie_word_embeddings", False):
        n -= cast(torch.Tensor, model.get_input_embeddings().weight).numel()
    return n


def flops_per_token(hf_config, n_params: int, seq_len: int) -> float:
    """Training FLOPs per token: 6N for the matmuls plus 6 * L * T * d for causal attention (PaLM appendix B,
    halved for the causal mask)."""
    layers = hf_config.num_hidden_layers
    hidden = hf_config.hidden_size
    return 6.0 * n_params + 6.0 * layers * seq_len * hidden


def peak_flops(device: torch.device, override_tflops: float | None) -> float | None:
    """Peak dense bf16 FLOP/s of one device; None where unknown (CPU), then MFU is not reported."""
    if override_tflops:
        return override_tflops * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, tflops in GPU_PEAK_TFLOPS.items():
        if key in name:
            return tflops * 1e12
    return None
