"""datatrove steps after generation: validate the samples of each document, exact-dedup the outputs.

`RewriteValidator` turns a document carrying its rollouts (written by the InferenceRunner) into one output
document with provenance, or drops it with `dropped_<reason>` (and writes it to `rejects/` when asked).
"""

from __future__ import annotations

import hashlib
from typing import Any

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter

from curate.rewrite import validate as v
from curate.rewrite.tasks import ValidationSettings, decide, model_input, source_text, validate_rollout

ROLLOUTS_KEY = "rollout_results"
# Set on a document whose id was read before (`MarkDuplicateIds`): the id it was read under.
DUPLICATE_OF = "_rewrite_duplicate_of"


def _id_key(doc_id: Any) -> bytes:
    """8 bytes per id (not the id): sets of them stay small on a corpus of millions."""
    return hashlib.blake2b(str(doc_id).encode(), digest_size=8).digest()


class MarkDuplicateIds(PipelineStep):
    """Between the readers and the InferenceRunner: a document whose id was already read in this task goes on
    under a new id (`ID#duplicate-N`), marked with the id it was read under, and is answered without a request
    (`duplicate_id`, dropped by the validator, which also drops repeats read by other generation tasks).

    Two documents under one id both went to the model and gave two output rows with one id; and datatrove, which
    tells finished documents of an open checkpoint chunk by id, sent one of them again after a resume.
    """

    name = "🪪 Duplicate ids"
    type = "🔻 - FILTER"

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        seen: set[bytes] = set()
        repeats = 0
        for doc in data:
            key = _id_key(doc.id)
            if key in seen:
                repeats += 1
                self.stat_update("duplicate_ids")
                doc.metadata[DUPLICATE_OF] = str(doc.id)
                doc.id = f"{doc.id}#duplicate-{repeats}"
            else:
                seen.add(key)
            yield doc


def output_schema(task: str):
    """The Parquet schema of a task's branch data (explicit, so that no column changes type between files)."""
    import pyarrow as pa

    fields = [
        ("id", pa.string()), ("text", pa.string()), ("source_id", pa.string()), ("source_url", pa.string()),
        ("task", pa.string()), ("prompt_version", pa.string()), ("model", pa.string()), ("sampling", pa.string()),
        ("finish_reason", pa.string()), ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
        ("rollouts", pa.int64()), ("agreement", pa.float64()), ("cleaned", pa.string()),
    ]  # fmt: skip
    if task in ("qa", "longcot"):
        fields += [("question", pa.string()), ("answer", pa.string()), ("answer_check", pa.string())]
    if task == "score":
        fields += [("math_score_llm", pa.int64()), ("score_justification", pa.string())]
    return pa.schema(fields)


def rejects_schema():
    import pyarrow as pa

    names = ["id", "text", "reason", "source_id", "task", "prompt_version", "model", "finish_reason"]
    return pa.schema([(name, pa.string()) for name in names])


def flat_adapter(writer: Any, document: Document) -> dict:
    """id, text and every metadata key as its own column; unlike datatrove's default, keeps 0 and ''."""
    return {"id": document.id, "text": document.text, **document.metadata}


class RewriteValidator(PipelineStep):
    """Validate each document's rollouts; yield the kept output with provenance, drop the rest by reason."""

    name = "✅ Rewrite validator"
    type = "🔻 - FILTER"

    def __init__(
        self,
        task: str,
        prompt_version: str,
        model: str,
        sampling: str,
        settings: ValidationSettings | None = None,
        rejects_writer: Any = None,
        max_input_chars: int = 12_000,
    ):
        super().__init__()
        self.max_input_chars = max_input_chars
        self.task, self.prompt_version, self.model, self.sampling = task, prompt_version, model, sampling
        self.settings = settings or ValidationSettings()
        self.rejects_writer = rejects_writer
        self.lang = v.LanguageCheck(self.settings.languages, self.settings.language_threshold)
        self._ids: set[bytes] = set()  # source ids validated so far (a repeat from another generation task)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        rejects = self.rejects_writer
        if rejects is not None:
            rejects.__enter__()
        try:
            for doc in data:
                self.stat_update("docs_in")
                out = self.process(doc, rank)
                if out is not None:
                    self.stat_update("kept")
                    yield out
        finally:
            if rejects is not None:
                rejects.__exit__(None, None, None)

    def process(self, doc: Document, rank: int = 0) -> Document | None:
        """The output document for `doc`, or None (counted under its reason) when no sample passes."""
        rollouts = doc.metadata.pop(ROLLOUTS_KEY, None) or [{"error": "request_failed"}]
        read_as = doc.metadata.pop(DUPLICATE_OF, None)
        if read_as is not None:  # its rollouts say duplicate_id; its rows name the id it was read under
            doc.id = read_as
        elif _id_key(doc.id) in self._ids:  # read again by another generation task
            self._drop(doc, rollouts[0], "duplicate_id", rank)
            return None
        else:
            self._ids.add(_id_key(doc.id))
        source = model_input(source_text(self.task, doc.text, doc.metadata), self.max_input_chars)
        verdicts = []
        for rollout in rollouts:
            verdict = validate_rollout(self.task, rollout, source, doc.metadata, self.settings, self.lang)
            if not verdict.ok:
                self.stat_update(f"rejected_sample_{verdict.reason}")
            verdicts.append(verdict)
        verdict, agreement = decide(self.task, verdicts, self.settings)
        if not verdict.ok:
            # The rejects row shows a sample that gave the reason (sample 0 may have failed otherwise, or passed).
            shown = next((i for i, x in enumerate(verdicts) if x.reason == verdict.reason), 0)
            self._drop(doc, rollouts[shown], str(verdict.reason), rank)
            return None
        kept = rollouts[verdicts.index(verdict)]
        usage = kept.get("usage") or {}
        metadata = {
            "source_id": str(doc.id),
            "source_url": str(doc.metadata.get("url") or ""),
            "task": self.task,
            "prompt_version": f"{self.task}.{self.prompt_version}",
            "model": self.model,
            "sampling": self.sampling,
            "finish_reason": str(kept.get("finish_reason") or ""),
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
            "rollouts": len(rollouts),
            "agreement": round(agreement, 4),
            **{k: val for k, val in verdict.fields.items() if k != "text"},
        }
        return Document(text=verdict.fields["text"], id=f"{doc.id}/{self.task}", metadata=metadata)

    def _drop(self, doc: Document, rollout: dict, reason: str, rank: int) -> None:
        self.stat_update(f"dropped_{reason}")
        if self.rejects_writer is not None:
            self.rejects_writer.write(self._reject_doc(doc, rollout, reason), rank=rank)

    def _reject_doc(self, doc: Document, rollout: dict, reason: str) -> Document:
        text = rollout.get("text") or rollout.get("message") or ""
        metadata = {
            "reason": reason,
            "source_id": str(doc.id),
            "task": self.task,
            "prompt_version": f"{self.task}.{self.prompt_version}",
            "model": self.model,
            "finish_reason": str(rollout.get("finish_reason") or ""),
        }
        return Document(text=text, id=f"{doc.id}/{self.task}", metadata=metadata)


class ExactDedupFilter(BaseFilter):
    """Drop outputs whose normalized text was already seen in this task (reason `duplicate`).

    Exact, in-memory: the stage runs it in a single task, which holds one 20-byte hash per output.
    """

    name = "🫂 Exact dedup (outputs)"

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[bytes] = set()

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        digest = hashlib.sha1(v.normalized(doc.text).encode()).digest()
        if digest in self._seen:
            return False, "duplicate"
        self._seen.add(digest)
        return True
