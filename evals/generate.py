"""Greedy generation backends: vLLM where a GPU and vLLM are present, transformers otherwise (CPU, tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evals.grading import truncate_at_stops
from mathmix.hub import check_model_source, from_pretrained

Progress = Callable[[int], None]


def model_load_errors() -> tuple[type[BaseException], ...]:
    """What loading a model or tokenizer raises for a folder it cannot use: OSError and ValueError (missing files,
    a name not fetchable), and for corrupt weights safetensors' SafetensorError ("header too large") and torch's
    RuntimeError or KeyError for a broken pytorch_model.bin, which used to end a command with a traceback."""
    from safetensors import SafetensorError

    return (OSError, ValueError, KeyError, RuntimeError, SafetensorError)


def error_text(err: BaseException) -> str:
    """ERR's text on one line (its first line alone could stop mid-sentence: "... from one of: "), led by its type
    where the text alone says little ("KeyError: 174812789"), cut to 300 characters."""
    text = " ".join(str(err).split())
    if not isinstance(err, OSError | ValueError) or not text:
        text = f"{type(err).__name__}: {text}".rstrip(": ")
    return text if len(text) <= 300 else text[:297] + "..."


def cannot_load(model_path: str | Path, what: str, err: BaseException) -> ValueError:
    """`MODEL: cannot load WHAT: MESSAGE` (`error_text`), for a command to end on in one line."""
    return ValueError(f"{model_path}: cannot load {what}: {error_text(err)}")


def load_pretrained(loader, model_path: str | Path, **kwargs):
    """`loader.from_pretrained(MODEL)`, with any failure to load (`model_load_errors`, corrupt weights included)
    reported as a ValueError naming MODEL (`cannot_load`)."""
    try:
        return from_pretrained(loader, model_path, **kwargs)
    except model_load_errors() as err:
        raise cannot_load(model_path, f"with transformers {loader.__name__}", err) from None


class TransformersGenerator:
    """Batched greedy decoding with Hugging Face transformers (left padding; a prompt that still does not fit after
    `fit_prompts` dropped its exemplars is cut from the left)."""

    backend = "transformers"

    def __init__(self, model_path: str | Path, batch_size: int = 8, device: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        check_model_source(model_path)
        self.tokenizer = load_pretrained(AutoTokenizer, model_path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        self.model = load_pretrained(AutoModelForCausalLM, model_path, dtype=dtype).to(self.device).eval()
        self.batch_size = batch_size
        self.truncated = 0  # prompts of the last `generate` call cut to fit (the caller reports them)
        self.cut: list[bool] = []  # per output of the last `generate` call: stopped by max_new_tokens
        self.max_positions = int(getattr(self.model.config, "max_position_embeddings", 4096) or 4096)

    def prompt_budget(self, max_new_tokens: int) -> int:
        """The tokens a prompt may take: the model's positions less the answer's."""
        return max(8, self.max_positions - max_new_tokens)

    def prompt_tokens(self, prompt: str) -> int:
        return len(self.tokenizer(prompt)["input_ids"])

    def generate(
        self, prompts: list[str], max_new_tokens: int, stops: list[str], progress: Progress | None = None
    ) -> list[str]:
        import torch

        budget = self.prompt_budget(max_new_tokens)
        outputs: list[str] = []
        self.truncated, self.cut = 0, []
        ends = end_token_ids(self.model, self.tokenizer)
        for start in range(0, len(prompts), self.batch_size):
            batch = prompts[start : start + self.batch_size]
            self.truncated += sum(len(ids) > budget for ids in self.tokenizer(batch)["input_ids"])
            self.tokenizer.truncation_side = (
                "left"  # the last resort (`fit_prompts`): keep the question's end
            )
            enc = self.tokenizer(batch, return_tensors="pt", padding=True, truncation=True, max_length=budget)
            enc = {k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
            with torch.no_grad():
                out = self.model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=self.tokenizer.pad_token_id,
                    # a batch stops once every answer reached a stop (it ran to max_new_tokens every time)
                    stop_strings=[stop for stop in stops if stop.strip()] or None,
                    tokenizer=self.tokenizer,
                )
            new = out[:, enc["input_ids"].shape[1] :]
            texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
            self.cut.extend(ran_to_budget(new.tolist(), texts, max_new_tokens, ends, stops))
            outputs.extend(truncate_at_stops(t, stops) for t in texts)
            if progress:
                progress(len(batch))
        return outputs


def fit_prompts(
    generator, items: list[dict], exemplars: list[dict], style: str, max_new_tokens: int
) -> tuple[list[str], list[int]]:
    """Each item's few-shot prompt and the exemplars it kept: where the prompt is longer than the GENERATOR's
    budget (`prompt_budget`, `prompt_tokens`), whole exemplars are dropped, oldest (first) first, until it fits.
    Cutting tokens from the left put half an exemplar, with no header, before the newer ones; the generator
    cuts only a prompt with no exemplar left. A generator that cannot count tokens gets every prompt whole."""
    from evals.benchmarks import build_prompt

    count = getattr(generator, "prompt_tokens", None)
    budget = generator.prompt_budget(max_new_tokens) if count is not None else 0
    prompts, used = [], []
    for item in items:
        prompt, kept = build_prompt(item, exemplars, style), len(exemplars)
        while count is not None and kept > 0 and count(prompt) > budget:
            kept -= 1
            shots = exemplars[len(exemplars) - kept :]
            prompt = build_prompt(item, shots, style) if kept else _question_part(item, exemplars[-1:], style)
        prompts.append(prompt)
        used.append(kept)
    return prompts, used


def _question_part(item: dict, one: list[dict], style: str) -> str:
    """The item's own part of a few-shot prompt (its question in the exemplars' format, no exemplar): one exemplar
    and its separator is what a 2-shot prompt adds to a 1-shot one (the zero-shot prompt is another format)."""
    from evals.benchmarks import build_prompt

    p1, p2 = build_prompt(item, one, style), build_prompt(item, one * 2, style)
    return p1[len(p2) - len(p1) :]


def end_token_ids(model, tokenizer) -> set[int]:
    """The ids that end an answer: the model's generation EOS (one id or a list), the tokenizer's EOS, and the pad
    id that `generate` fills a finished row with."""
    ids: set[int] = set()
    for value in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id,
                  tokenizer.pad_token_id):  # fmt: skip
        ids.update(value if isinstance(value, list) else [] if value is None else [value])
    return ids


def ran_to_budget(rows: list[list[int]], texts: list[str], max_new_tokens: int, ends: set[int],
                  stops: list[str]) -> list[bool]:  # fmt: skip
    """Per generated row (its token ids, padded to the batch's longest) and its decoded text: whether it was stopped
    by MAX_NEW_TOKENS, not by an end token (a finished row ends in one, or in the pad that follows it) nor by a stop
    string (the batch runs on until every row reached one, so a row may be full and still have stopped)."""
    return [
        len(row) >= max_new_tokens and row[-1] not in ends and truncate_at_stops(text, stops) == text
        for row, text in zip(rows, texts, strict=True)
    ]


class VllmGenerator:
    """Greedy decoding through vLLM (GPU)."""

    backend = "vllm"

    def __init__(
        self, model_path: str | Path, tensor_parallel_size: int = 1, max_model_len: int | None = None
    ):
        from vllm import LLM

        check_model_source(model_path)  # vLLM, too, would retry the network for a name it cannot fetch
        self.llm = LLM(
            model=str(model_path),
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            seed=0,
            enforce_eager=False,
        )
        self.cut: list[bool] = []  # per output of the last `generate` call: stopped by max_tokens

    def generate(
        self, prompts: list[str], max_new_tokens: int, stops: list[str], progress: Progress | None = None
    ) -> list[str]:
        from vllm import SamplingParams

        params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens, stop=stops)
        results = self.llm.generate(prompts, params, use_tqdm=True)
        if progress:
            progress(len(prompts))
        # vLLM says why each output ended: "length" is max_tokens, "stop" an end token or a stop string
        self.cut = [r.outputs[0].finish_reason == "length" for r in results]
        return [truncate_at_stops(r.outputs[0].text, stops) for r in results]


def vllm_available() -> bool:
    """A CUDA device and an importable vLLM."""
    try:
        import torch

        if not torch.cuda.is_available():
            return False
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


def check_backend_installed(backend: str) -> None:
    """Raise ValueError when BACKEND (vllm) cannot be imported: said before a command writes its output folder."""
    import importlib.util

    if backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ValueError("backend vllm: vLLM is not installed (pip install mathmix[gpu])")


def make_generator(model_path: str | Path, backend: str = "auto", batch_size: int = 8):
    """`auto` picks vLLM on a GPU machine with vLLM installed, transformers otherwise."""
    if backend == "auto":
        backend = "vllm" if vllm_available() else "transformers"
    if backend == "vllm":
        check_backend_installed(backend)
        return VllmGenerator(model_path)
    if backend == "transformers":
        return TransformersGenerator(model_path, batch_size=batch_size)
    raise ValueError(f"unknown backend {backend!r} (auto, vllm, transformers)")
