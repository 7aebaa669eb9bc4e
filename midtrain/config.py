"""Typed configs of a training recipe; each component's config builds its component (OLMo-core style).

A train recipe is one YAML file: `model`, `trainer` (batch, optimizer, schedule, checkpoints) and a list of
`stages` run in order. A `stable` stage trains at constant LR after warmup; a `decay` stage starts from another
stage's final checkpoint (`start_from`) and decays the LR over its own budget, with its own data mixture, so the
decay branches of one stable run are independent runs that share a starting point.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mathmix.cli_util import format_validation_errors
from mathmix.yaml_files import load_yaml
from midtrain.schedule import DecayShape

# Names other architectures give the core settings; a key among them that the model type does not know is refused.
ALIASES = {
    **dict.fromkeys(("num_layers", "n_layer", "n_layers", "num_decoder_layers"), "num_hidden_layers"),
    **dict.fromkeys(("d_model", "n_embd", "dim", "hidden_dim", "model_dim"), "hidden_size"),
    **dict.fromkeys(("n_head", "n_heads", "num_heads"), "num_attention_heads"),
    **dict.fromkeys(("n_kv_heads", "num_kv_heads", "multi_query_group_num"), "num_key_value_heads"),
    **dict.fromkeys(("d_ff", "ffn_dim", "n_inner", "ffn_hidden_size"), "intermediate_size"),
    **dict.fromkeys(("n_positions", "max_seq_len", "seq_length", "n_ctx"), "max_position_embeddings"),
}


# An Adam beta: a decay rate of a moving average, in [0, 1) (torch refuses others, once training has started).
Beta = Annotated[float, Field(ge=0, lt=1)]


class TrainRecipeError(ValueError):
    """A train recipe that cannot be read or does not validate; the message names the file and the key."""


class ModelConfig(BaseModel):
    """Any transformers causal LM: a local pretrained `path`, or a `config` dict (random init, e.g. tiny)."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = None  # local folder of a pretrained model (nothing is downloaded)
    config: dict[str, Any] | None = None  # kwargs of AutoConfig.for_model, `model_type` defaults to llama
    tokenizer: str | None = None  # tokenizer.json or a HF folder; copied into exports (default: `path`)
    # auto: flash_attention_2 on GPU when installed, else flex_attention (packed documents) or sdpa (causal)
    attn_implementation: str = "auto"
    activation_checkpointing: bool = False
    compile: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if (self.path is None) == (self.config is None):
            raise ValueError(
                "model: give exactly one of `path` (pretrained folder) or `config` (architecture)"
            )
        return self

    def build_hf_config(self):
        """The transformers config of the model."""
        from transformers import AutoConfig

        if self.path is not None:
            if not (Path(self.path) / "config.json").is_file():
                raise FileNotFoundError(f"model.path {self.path}: no local model folder (config.json) there")
            return AutoConfig.from_pretrained(self.path)
        kwargs = dict(self.config or {})
        model_type = kwargs.pop("model_type", "llama")
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        if (
            model_type not in CONFIG_MAPPING
        ):  # transformers' own message lists every model type (12k characters)
            near = difflib.get_close_matches(str(model_type), list(CONFIG_MAPPING.keys()), n=3)
            raise ValueError(
                f"model.config.model_type {model_type!r}: not a transformers model type"
                + (f" (did you mean {' or '.join(near)}?)" if near else "")
            )
        # transformers keeps any key it does not know as a plain attribute: a typo (hidden_sizee) would leave
        # the real setting at its default, silently (a 1.6B model instead of a tiny one). Refused: unknown keys
        # that look like a misspelt setting (close to one not given). Others pass: official config.json files
        # carry keys transformers reads in setup (partial_rotary_factor) or ignores (use_mrope).
        config = AutoConfig.for_model(model_type, **kwargs)
        defaults = [k for k in vars(CONFIG_MAPPING[model_type]()) if not k.startswith("_")]
        typos = {
            key: near[0]
            for key in kwargs
            if key not in defaults
            and (
                near := difflib.get_close_matches(
                    key, [d for d in defaults if d not in kwargs], n=1, cutoff=0.85
                )
            )
        }
        # Other architectures' names for a setting (GPT-2's n_layer, T5's d_model) are no typo, and are kept as
        # plain attributes just the same: num_layers: 2 built a 32-layer Llama.
        mapped = getattr(CONFIG_MAPPING[model_type], "attribute_map", {})
        for key in kwargs:
            meant = ALIASES.get(key)
            if key not in defaults and key not in mapped and key not in typos and meant in defaults:
                typos[key] = meant
        if typos:
            hints = ", ".join(f"{k} (did you mean {m}?)" for k, m in typos.items())
            raise ValueError(f"model.config: not a setting of a {model_type} model: {hints}")
        return config

    def build(self, attn_implementation: str):
        """The model in fp32 on CPU (random init from the config with the current torch seed)."""
        import torch
        from transformers import AutoModelForCausalLM

        if self.path is not None:
            self.build_hf_config()  # a clear error for a missing folder
            return AutoModelForCausalLM.from_pretrained(
                self.path, dtype=torch.float32, attn_implementation=attn_implementation
            )
        config = self.build_hf_config()
        config._attn_implementation = attn_implementation
        return AutoModelForCausalLM.from_config(config, dtype=torch.float32)

    @property
    def tokenizer_source(self) -> str | None:
        return self.tokenizer or self.path


class TrainerConfig(BaseModel):
    """Batch, optimizer, schedule defaults, checkpoints and logging; shared by every stage of a recipe."""

    model_config = ConfigDict(extra="forbid")

    seq_len: int = Field(2048, gt=0)
    global_batch_tokens: int = Field(4 * 1024 * 1024, gt=0)  # per optimizer step, all ranks together
    micro_batch_size: int = Field(1, gt=0)  # sequences per rank per forward pass
    intra_document: bool = True  # attention stays within each document (position ids reset per document)
    # Optimizer values out of range trained without a word: a negative grad_clip flipped every gradient
    # (gradient ascent), grad_clip 0 zeroed them (no update at all), a negative weight_decay grew the weights;
    # betas outside [0, 1) or eps <= 0 failed inside torch's AdamW after job.json was written. inf/nan neither.
    lr: float = Field(3e-5, gt=0, allow_inf_nan=False)  # peak
    min_lr_ratio: float = Field(0.1, ge=0, le=1)  # decay floor as a fraction of the peak
    weight_decay: float = Field(0.1, ge=0, allow_inf_nan=False)
    betas: tuple[Beta, Beta] = (0.9, 0.95)
    eps: float = Field(1e-8, gt=0, allow_inf_nan=False)
    grad_clip: float = Field(1.0, ge=0, allow_inf_nan=False)  # max gradient norm; 0: no clipping (Megatron's)
    seed: int = Field(0, ge=0)  # numpy (Megatron's --seed) refuses a negative seed
    device: Literal["auto", "cpu", "cuda"] = "auto"
    checkpoint_every: int = Field(1000, gt=0)  # optimizer steps
    keep_checkpoints: int = Field(2, gt=0)  # newest step checkpoints kept per stage
    log_every: int = Field(1, gt=0)
    tensorboard: bool = False
    # per device, for MFU; default: a table of known GPUs, none on CPU (0 gave no MFU, a negative one negative MFU)
    peak_tflops: float | None = Field(None, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _check_batch(self) -> TrainerConfig:
        # checked when the recipe is read: a bad batch used to surface as a traceback once training had started
        # (after job.json was written); the split over ranks is checked by the preflight, which knows the ranks
        self.sequences_per_step()
        self.accumulation_steps(1)
        return self

    def sequences_per_step(self) -> int:
        if self.global_batch_tokens % self.seq_len:
            raise ValueError(
                f"trainer.global_batch_tokens {self.global_batch_tokens} is not a multiple of trainer.seq_len "
                f"{self.seq_len} (e.g. {max(1, self.global_batch_tokens // self.seq_len) * self.seq_len})"
            )
        return self.global_batch_tokens // self.seq_len

    def accumulation_steps(self, world_size: int) -> int:
        """Micro-batches per rank per optimizer step, so that all ranks together make the global batch."""
        per_pass = self.micro_batch_size * world_size
        seqs = self.sequences_per_step()
        if seqs % per_pass:
            ranks = f" x {world_size} ranks" if world_size > 1 else ""
            raise ValueError(
                f"trainer.global_batch_tokens {self.global_batch_tokens} / seq_len {self.seq_len} = {seqs} "
                f"sequences per step do not split into trainer.micro_batch_size {self.micro_batch_size}{ranks}"
            )
        return seqs // per_pass


class StageConfig(BaseModel):
    """One stage: its token budget, data mixture, and LR shape; decay stages start from another stage."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: Literal["stable", "decay"]
    tokens: int = Field(gt=0)
    # shards.mixture.MixtureConfig (sources: name, paths, weight|tokens; seed), inline or a mixture YAML path
    mixture: dict[str, Any] | str
    start_from: str | None = None  # a stage name of this recipe, or a checkpoint folder
    warmup_tokens: int = Field(0, ge=0)
    decay_shape: DecayShape = "cosine"
    lr: float | None = Field(None, gt=0, allow_inf_nan=False)  # this stage's peak LR (default: trainer.lr)

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        # the stage's folder is output_dir/NAME: `../evil` trained into a sibling of output_dir (an absolute name
        # anywhere), and "" wrote the stage's checkpoints, done.json and metrics.jsonl into output_dir itself
        if name in ("", ".", "..") or any(c in name for c in "/\\\0"):
            raise ValueError(
                f"stage name {name!r} is not a plain folder name: the stage trains into output_dir/NAME, so a "
                "name is not empty, not . or .., and holds no / or \\"
            )
        return name

    @model_validator(mode="after")
    def _check_kind(self) -> StageConfig:
        if self.kind == "decay" and self.start_from is None:
            raise ValueError(f"stage {self.name}: a decay stage needs `start_from` (a stage or checkpoint)")
        return self

    @field_validator("mixture")
    @classmethod
    def _check_mixture(cls, raw: dict[str, Any] | str) -> dict[str, Any] | str:
        _load_mixture(raw, run_dir=None)  # raises with the bad key (or missing file) named
        return raw

    def decay_tokens(self) -> int:
        return self.tokens if self.kind == "decay" else 0

    def build_mixture(self, run_dir: str | Path | None):
        """The stage's shards.mixture.MixtureConfig, `{run_dir}` in its paths replaced."""
        return _load_mixture(self.mixture, run_dir)


def _load_mixture(raw: dict[str, Any] | str, run_dir: str | Path | None):
    from shards.mixture import MixtureConfig

    if isinstance(raw, str):
        if not Path(raw).is_file():
            raise ValueError(f"mixture file {raw} not found")
        return MixtureConfig.from_yaml(raw, run_dir=run_dir)
    config = MixtureConfig.model_validate(raw)
    if run_dir is not None:
        for source in config.sources:
            source.paths = [p.replace("{run_dir}", str(run_dir)) for p in source.paths]
    return config


class TrainRecipe(BaseModel):
    """A training run: the model, the trainer settings and the stages, written under `output_dir/STAGE/`."""

    model_config = ConfigDict(extra="forbid")

    name: str
    output_dir: Path = Path("runs/train")
    run_dir: str | None = None  # replaces `{run_dir}` in mixture paths (the pipeline run folder)
    model: ModelConfig
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    stages: list[StageConfig]

    @field_validator("stages")
    @classmethod
    def _some_stages(cls, stages: list[StageConfig]) -> list[StageConfig]:
        if not stages:  # `stages: []` ran nothing and exited 0
            raise ValueError(
                "empty; a train recipe trains at least one stage (a stable stage, then decay stages)"
            )
        return stages

    @model_validator(mode="after")
    def _check_stages(self) -> TrainRecipe:
        if self.run_dir is not None:
            # absolute, so that checkpoints record paths that an export from any folder can read
            self.run_dir = str(Path(self.run_dir).resolve())
        for key in ("tokenizer", "path"):
            value = getattr(self.model, key)
            if value is not None:
                setattr(self.model, key, _local_path(value, self.run_dir))
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names must be unique, got {names}")
        for i, stage in enumerate(self.stages):
            if stage.start_from in names and names.index(stage.start_from) >= i:
                raise ValueError(f"stage {stage.name}: start_from {stage.start_from!r} must come before it")
        return self

    def stage(self, name: str) -> StageConfig:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"no stage {name!r}; stages: {[s.name for s in self.stages]}")

    def stage_dir(self, name: str) -> Path:
        return self.output_dir / name


def _local_path(value: str, run_dir: str | None) -> str:
    """`{run_dir}` replaced, and a path under run_dir or one that exists made absolute (resolved against the
    working folder, as shard paths are); anything else (a Hugging Face hub name) is kept as written."""
    if run_dir is not None and "{run_dir}" in value:
        return str(Path(value.replace("{run_dir}", run_dir)).resolve())
    return str(Path(value).resolve()) if Path(value).exists() else value


def load_train_recipe(path: str | Path, overrides: dict[str, Any] | None = None) -> TrainRecipe:
    """Read and validate a train recipe YAML; `{recipe_dir}` in strings means the recipe's folder."""
    path = Path(path)
    if path.is_dir():
        raise TrainRecipeError(
            f"{path}: a folder, not a train recipe (a YAML file, e.g. recipes/tiny-cpu.yaml)"
        )
    if not path.is_file():
        raise TrainRecipeError(f"{path}: train recipe not found")
    text = path.read_text().replace("{recipe_dir}", str(path.resolve().parent))
    try:
        raw = load_yaml(text, path)
    except ValueError as err:
        raise TrainRecipeError(str(err)) from None
    if not isinstance(raw, dict):
        raise TrainRecipeError(f"{path}: a train recipe is a mapping with keys name, model, trainer, stages")
    raw.update(overrides or {})
    try:
        return TrainRecipe.model_validate(raw)
    except ValidationError as err:
        raise TrainRecipeError(f"{path}: {format_validation_errors(err)}") from None
