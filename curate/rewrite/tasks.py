"""Rewriter tasks: a versioned prompt template each, and the validation that turns a generation into a row.

`refine` (MegaMath-Web-Pro style rewrite), `qa` (question + short solution ending in \\boxed{}), `longcot`
(long reasoning trace ending in \\boxed{}), `score` (FineMath-style 0-5 math score with a justification).
Checks run in a fixed order, cheapest and most general first, and the first failed check names the reason,
so that a truncated output is counted as truncated and not also as missing its boxed answer.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from curate.rewrite import validate as v
from curate.rewrite.clean import clean_output

PROMPTS_DIR = Path(__file__).parent / "prompts"
TASKS = ("refine", "qa", "longcot", "score")
TASKS_WITH_ANSWER = ("qa", "longcot")
QUESTION_KEYS = ("question", "problem", "prompt")  # longcot's question, when the input carries one
REASONS = (
    "request_failed", "bad_request", "malformed_response", "empty", "truncated", "degenerate_repetition", "prompt_echo",
    "unparseable_score",
    "wrong_format", "no_boxed_answer", "copy_of_input", "length_out_of_bounds", "wrong_language",
    "answer_mismatch", "self_consistency", "duplicate_id",
)  # fmt: skip


def prompt_path(task: str, version: str = "v1") -> Path:
    """The file of `task`'s prompt template of `version` (it may not exist)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; tasks: {', '.join(TASKS)}")
    return PROMPTS_DIR / f"{task}.{version}.txt"


def prompt_key(task: str) -> str:
    """The name of `task`'s template among the `file_digests` of a recipe stage's record (a job.json's: `prompt`):
    the text counts, not only its version, so a template edited in place is another job (listed in
    pipelines.job_record.LATER_FILE_DIGESTS: a record from before is adopted)."""
    return f"prompt {task}"


@lru_cache(maxsize=16)
def prompt_template(task: str, version: str = "v1") -> str:
    """The prompt template text for `task` (`{text}` marks where the document goes)."""
    path = prompt_path(task, version)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no prompt version {version!r} for task {task!r}")
    return path.read_text()


def source_text(task: str, text: str, metadata: dict[str, Any]) -> str:
    """What the prompt is about: the question for longcot (when the input carries one), else the text."""
    if task == "longcot":
        for key in QUESTION_KEYS:
            if isinstance(metadata.get(key), str) and metadata[key].strip():
                return metadata[key]
    return text


def model_input(text: str, max_input_chars: int = 12_000) -> str:
    """What the model is given of a source text: cut at `max_input_chars` so the prompt fits the context.

    Validation compares outputs with this, not the whole page: against the whole page a verbatim copy of the
    prompt's part of a long page passed as a refine, and a faithful refine of it failed the length check.
    """
    return text[:max_input_chars].strip()


def build_messages(task: str, text: str, version: str = "v1", max_input_chars: int = 12_000) -> list[dict]:
    """Chat messages for one document; the input is cut at `max_input_chars` so the prompt fits the context."""
    # str.replace, not str.format: documents are full of LaTeX braces.
    prompt = prompt_template(task, version).replace("{text}", model_input(text, max_input_chars))
    return [{"role": "user", "content": prompt}]


@dataclass
class ValidationSettings:
    """Bounds and switches of the checks (defaults suit 7B-class rewriters on web math)."""

    languages: tuple[str, ...] = ("en",)
    language_threshold: float = 0.5
    # refined chars / the model's input chars. The low end was 0.3: refines condense (MegaMath-Web-Pro's often to
    # 30-60% of the main content), and the input still holds the page's chrome, so a faithful refine of a forum
    # thread came to 0.22 of it and was dropped; 0.1 still drops a one-line summary of a page.
    refine_length_ratio: tuple[float, float] = (0.1, 2.0)
    qa_solution_chars: tuple[int, int] = (20, 6_000)
    longcot_chars: tuple[int, int] = (200, 200_000)
    score_justification_chars: tuple[int, int] = (0, 2_000)
    copy_threshold: float = 0.9
    max_dup_fraction: float = 0.5
    check_answers: bool = True
    min_agreement: float = 0.5  # self-consistency: share of the k samples that must give the majority answer
    prompt_version: str = "v1"  # whose template an echo is looked for (`prompt_echo`)


@dataclass
class Verdict:
    """The outcome of validating one generation: ok with its output fields, or a rejection reason."""

    ok: bool
    reason: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    answer: str | None = None  # what self-consistency compares (boxed answer or score)
    cleaned: list[str] = field(default_factory=list)  # what the task's check left out of the output, by name


def _reject(reason: str) -> Verdict:
    return Verdict(False, reason)


def validate_rollout(
    task: str, rollout: dict, source: str, metadata: dict, settings: ValidationSettings, lang: v.LanguageCheck
) -> Verdict:
    """Validate one generation of `task` for a source text; the first failed check names the reason."""
    if rollout.get("error"):
        known = ("bad_request", "malformed_response", "duplicate_id")
        return _reject(rollout["error"] if rollout["error"] in known else "request_failed")
    text, reasoning = rollout.get("text") or "", rollout.get("reasoning") or ""
    if not isinstance(text, str) or not isinstance(
        reasoning, str
    ):  # raw/ written before the rollout checked it
        return _reject("malformed_response")
    text, reasoning = text.strip(), reasoning.strip()
    if not text and not reasoning:
        return _reject("empty")
    if rollout.get("finish_reason") == "length":
        return _reject("truncated")
    # Thinking into `reasoning`, chatter and wrappers off: what is left is the answer, the same for every task.
    text, reasoning, cleaned = clean_output(text, reasoning)
    if v.is_degenerate(reasoning + "\n" + text, settings.max_dup_fraction):
        return _reject("degenerate_repetition")
    if not text:  # nothing outside the reasoning: an unclosed <think>, or reasoning_content alone
        return _reject("empty")
    if echoes_prompt(task, text, settings.prompt_version):
        return _reject("prompt_echo")
    check = {"refine": _refine, "qa": _qa, "longcot": _longcot, "score": _score}[task]
    verdict = check(text, reasoning, source, settings)
    if not verdict.ok:
        return verdict
    if task != "score" and not lang.ok(verdict.fields["text"]):
        return _reject("wrong_language")
    if task in TASKS_WITH_ANSWER:
        reference = v.reference_answer(metadata)
        verdict.fields["answer_check"] = "no_reference"
        if reference and settings.check_answers:
            if not v.answers_match(verdict.answer or "", reference):
                return _reject("answer_mismatch")
            verdict.fields["answer_check"] = "match"
    # Auditable: what was taken off the model's answer before it became the row ("" when nothing).
    verdict.fields["cleaned"] = ",".join(dict.fromkeys(cleaned + verdict.cleaned))
    return verdict


_PLACEHOLDER = re.compile(r"<[^<>\n]{3,}>|\\boxed\{[A-Z][A-Z_ ]*\}")
_ANSWER_PLACEHOLDER = re.compile(r"\\boxed\{\s*ANSWER\s*\}")


@lru_cache(maxsize=32)
def _template_echo_parts(task: str, version: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(placeholders, instruction lines) of a task's template: `<the question>`, `\\boxed{ANSWER}`; its lines of
    instructions (30+ characters, normalized, without a list's dash), the page's slot left out."""
    try:
        template = prompt_template(task, version)
    except (FileNotFoundError, ValueError):
        return (), ()
    placeholders = tuple(dict.fromkeys(_PLACEHOLDER.findall(template)))
    lines = (
        v.normalized(line.strip().lstrip("-*").strip())
        for line in template.splitlines()
        if "{text}" not in line
    )
    return placeholders, tuple(line for line in lines if len(line) >= 30)


def echoes_prompt(task: str, text: str, version: str = "v1") -> bool:
    """Whether an answer (its reasoning left out) repeats the prompt rather than doing the task: a placeholder of
    the template (`Question: <the question>`, `\\boxed{ANSWER}`) or, but for `score` (whose row is the page, and
    whose justification may quote a criterion), one of its lines of instructions: an echo of the whole refine
    prompt shared only 0.85 of its 3-grams with the page (copy_of_input is 0.9) and was kept as a refined page."""
    placeholders, lines = _template_echo_parts(task, version)
    if _ANSWER_PLACEHOLDER.search(text) or any(p in text for p in placeholders):
        return True
    if task == "score":
        return False
    flat = v.normalized(text)
    return any(line in flat for line in lines)


def _in(value: float, bounds: tuple[float, float]) -> bool:
    return bounds[0] <= value <= bounds[1]


def _refine(text: str, reasoning: str, source: str, s: ValidationSettings) -> Verdict:
    if v.is_copy(text, source, s.copy_threshold):
        return _reject("copy_of_input")
    if not _in(len(text) / max(len(source), 1), s.refine_length_ratio):
        return _reject("length_out_of_bounds")
    return Verdict(True, fields={"text": text})


def _qa(text: str, reasoning: str, source: str, s: ValidationSettings) -> Verdict:
    parsed = v.find_qa(text)
    if parsed is None:
        return _reject("wrong_format")
    question, solution = parsed.question, parsed.solution
    answer = v.last_boxed(solution)
    if answer is None:
        return _reject("no_boxed_answer")
    if v.is_copy(text, source, s.copy_threshold):
        return _reject("copy_of_input")
    if not _in(len(solution), s.qa_solution_chars):
        return _reject("length_out_of_bounds")
    out = f"Question: {question}\nSolution: {solution}"
    cleaned = ["preamble"] * parsed.preamble + ["extra_pairs"] * parsed.extra_pairs
    fields = {"text": out, "question": question, "answer": answer}
    return Verdict(True, fields=fields, answer=answer, cleaned=cleaned)


def _longcot(text: str, reasoning: str, source: str, s: ValidationSettings) -> Verdict:
    # Reasoning models may return the trace separately (reasoning_content, or a <think> block moved there by
    # clean_output); keep it, marked as thinking. The answer after it must hold the box: a box inside the thinking
    # only ("So \\boxed{1}? Hmm, let me verify..." and no answer after) is not a final answer.
    trace = f"<think>\n{reasoning}\n</think>\n\n{text}" if reasoning else text
    answer = v.last_boxed(text)
    if answer is None:
        return _reject("no_boxed_answer")
    if v.is_copy(trace, source, s.copy_threshold):
        return _reject("copy_of_input")
    if not _in(len(trace), s.longcot_chars):
        return _reject("length_out_of_bounds")
    out = f"Question: {source.strip()}\nSolution: {trace}"
    return Verdict(True, fields={"text": out, "question": source.strip(), "answer": answer}, answer=answer)


def _score(text: str, reasoning: str, source: str, s: ValidationSettings) -> Verdict:
    found = v.find_score(text)  # the answer only: a score considered in the thinking is not the one given
    if found is None or found[0] is None:
        return _reject("unparseable_score")
    score, start = found
    justification = v.score_justification(text, start)
    low, high = s.score_justification_chars
    if len(justification) < low:
        return _reject("length_out_of_bounds")
    cleaned = []
    if len(justification) > high:  # a verbose justification is no reason to lose the page's score
        justification, cleaned = _shorten(justification, high), ["justification_truncated"]
    # The row's text is the scored page itself: the classifier trains on (text, math_score_llm) pairs.
    fields = {"text": source, "math_score_llm": score, "score_justification": justification}
    return Verdict(True, fields=fields, answer=str(score), cleaned=cleaned)


def _shorten(text: str, limit: int) -> str:
    """TEXT cut to at most LIMIT characters: after its last whole sentence where that keeps over half, else at a
    space, marked with an ellipsis."""
    head = text[: max(limit - 1, 0)]
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)", text[: limit + 1])]
    if ends and limit // 2 <= ends[-1] <= limit:
        return text[: ends[-1]]
    space = head.rfind(" ")
    return (head[:space] if space >= limit // 2 else head).rstrip() + "…"


def decide(task: str, verdicts: list[Verdict], settings: ValidationSettings) -> tuple[Verdict, float]:
    """One outcome per document from its k rollouts: the majority answer among valid ones (self-consistency).

    Returns (verdict, agreement), agreement being the share of all k samples that gave the kept answer.
    """
    valid = [x for x in verdicts if x.ok]
    if not valid:
        # The most common reason among the samples (ties: the first sample's) names the document's drop.
        return _reject(Counter(x.reason or "empty" for x in verdicts).most_common(1)[0][0]), 0.0
    if len(verdicts) == 1 or task == "refine":
        return valid[0], len(valid) / len(verdicts) if task != "refine" else 1.0
    groups: list[list[Verdict]] = []
    for verdict in valid:
        for group in groups:
            if _same_answer(task, group[0].answer, verdict.answer):
                group.append(verdict)
                break
        else:
            groups.append([verdict])
    best = max(groups, key=len)  # max keeps the first of equal-sized groups
    agreement = len(best) / len(verdicts)
    if agreement < settings.min_agreement:
        return _reject("self_consistency"), agreement
    return best[0], agreement


def _same_answer(task: str, a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    return a == b if task == "score" else v.answers_match(a, b)


def sampling_json(params: dict[str, Any]) -> str:
    """Sampling parameters as a stable JSON string (provenance column)."""
    return json.dumps(params, sort_keys=True)
