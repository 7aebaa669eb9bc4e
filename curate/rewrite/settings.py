"""The rewriter's settings (`RewriteSettings`), shared by `mathmix rewrite` and the recipe stage.

Kept apart from the job that runs them (`curate.rewrite.job`), which re-exports them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from curate.rewrite.endpoint import local_server_root
from curate.rewrite.tasks import ValidationSettings

Server = Literal["transformers", "vllm", "sglang", "endpoint"]


class RewriteSettings(BaseModel):
    """Settings of the rewriter (shared by `mathmix rewrite` and the recipe stage)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(
        "auto", description="HF folder or hub name; 'auto' = a tiny random plumbing-only Llama"
    )
    server: Server = "transformers"
    endpoint: str | None = Field(None, description="OpenAI-compatible base URL (server: endpoint)")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the endpoint's key")
    prompt_version: str = "v1"
    max_tokens: int | dict[str, int] | None = Field(
        None,
        description="completion tokens per request: one number, or one per task ({qa: 2048, longcot: 16384}); "
        "unset: the task's default (score 512, qa 2048, refine 4096, longcot 16384), lowered to fit the context",
    )
    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    samples: int = Field(1, ge=1, description="samples per document; >1 turns on self-consistency")
    min_agreement: float = Field(0.5, ge=0, le=1)
    max_input_chars: int = Field(12_000, ge=100)
    text_key: str = "text"
    id_key: str = "id"
    max_docs: int = Field(
        -1,
        description="read at most this many documents per input, kind of file and datatrove task (-1: all)",
    )
    model_max_context: int | None = Field(
        None,
        ge=64,
        description="the server's context (default: the model's own up to 32768; 8192 if unknown)",
    )
    max_concurrent: int = Field(64, ge=1, description="requests in flight at once")
    request_timeout_s: float = Field(600.0, gt=0)
    server_ready_timeout_s: float = Field(
        1800.0, ge=1, description="wait this long for the server to come up"
    )
    retries: int = Field(2, ge=0)
    max_attempts: int = Field(
        3, ge=1, description="runs whose requests may fail a document before it is dropped as request_failed"
    )
    retry_backoff_s: float = Field(2.0, ge=0, description="first retry delay; doubles each retry")
    tp: int = Field(1, ge=1)
    dp: int = Field(1, ge=1)
    cpu_threads: int = Field(0, ge=0, description="torch threads of the CPU server (0: torch's default)")
    inference_tasks: int = Field(1, ge=1, description="datatrove tasks for generation (one server each)")
    records_per_chunk: int = Field(500, ge=1, description="checkpoint chunk size (documents)")
    languages: list[str] = Field(default_factory=lambda: ["en"])
    check_answers: bool = True
    write_rejects: bool = True
    decont_benchmarks: list[str] = Field(
        default_factory=list, description="benchmark files/folders (13-grams)"
    )
    decont_ngram: int = 13
    corpus_docs: int | None = Field(None, ge=1, description="documents in the corpus to estimate cost for")
    gpu_output_tokens_per_s: float = Field(2500.0, gt=0, description="assumed GPU decode rate for estimates")

    @field_validator("endpoint")
    @classmethod
    def _a_local_endpoint_is_its_server_root(cls, value: str | None) -> str | None:
        return local_server_root(value)

    @field_validator("max_tokens")
    @classmethod
    def _max_tokens_are_counts(cls, value: int | dict[str, int] | None) -> int | dict[str, int] | None:
        from curate.rewrite.tasks import TASKS

        counts = value.values() if isinstance(value, dict) else [] if value is None else [value]
        if any(n < 1 for n in counts):
            raise ValueError("must be a positive number of tokens")
        if isinstance(value, dict) and (unknown := sorted(set(value) - set(TASKS))):
            raise ValueError(f"no task {', '.join(map(repr, unknown))} (tasks: {', '.join(TASKS)})")
        return value

    @field_validator("max_docs")
    @classmethod
    def _max_docs_is_a_count(cls, value: int) -> int:
        # datatrove read nothing for any other value (limit 0 or -5): an empty branch, without a word
        if value < 1 and value != -1:
            raise ValueError("must be a positive number of documents, or -1 for all")
        return value

    @model_validator(mode="after")
    def _endpoint_names_its_model(self) -> RewriteSettings:
        # 'auto' builds a tiny model in OUT/_model and sends its path as the model name: no endpoint serves that.
        if self.server == "endpoint" and self.model == "auto":
            raise ValueError(
                "server 'endpoint' needs the name of the model the endpoint serves (--model NAME / model:, as listed "
                "by GET URL/v1/models), not 'auto' (a tiny local model that an endpoint does not serve)"
            )
        return self

    def sampling(self, task: str) -> dict[str, Any]:
        """The sampling settings of `task`'s requests; max_tokens is the task's cap (`curate.rewrite.budget`), which
        a request whose prompt leaves less room in the model's context gets lowered."""
        from curate.rewrite.budget import task_max_tokens

        return {
            "max_tokens": task_max_tokens(task, self),
            "temperature": self.temperature,
            "top_p": self.top_p,
        }

    def validation(self) -> ValidationSettings:
        return ValidationSettings(
            languages=tuple(self.languages),
            check_answers=self.check_answers,
            min_agreement=self.min_agreement,
            prompt_version=self.prompt_version,
        )
