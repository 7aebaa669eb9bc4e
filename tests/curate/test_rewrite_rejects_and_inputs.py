"""The validator's rows: the `cleaned` column; the rejects row shows the sample that gave the reason."""

from __future__ import annotations

import pyarrow as pa
from datatrove.data import Document

from curate.rewrite.steps import ROLLOUTS_KEY, RewriteValidator, output_schema
from curate.rewrite.tasks import ValidationSettings

QA = (
    "Question: Solve the equation $2x + 3 = 11$ for $x$.\n"
    "Solution: Subtract 3 from both sides to get $2x = 8$. Dividing both sides by 2 gives $x = 4$. "
    "Checking: $2 \\cdot 4 + 3 = 11$. The answer is \\boxed{4}."
)
PAGE = "Home | Forum\n\nHow do I solve 2x + 3 = 11? Reply: subtract 3, divide by 2, so x = 4. Cookie policy."


class Rejects:
    """A rejects writer that keeps what it is given."""

    def __init__(self) -> None:
        self.rows: list[Document] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def write(self, doc: Document, rank: int = 0) -> None:
        self.rows.append(doc)


def _validate(rollouts: list[dict], task: str = "qa") -> tuple[Document | None, Rejects]:
    rejects = Rejects()
    validator = RewriteValidator(
        task, "v1", "m", "{}", ValidationSettings(languages=()), rejects_writer=rejects
    )
    doc = Document(text=PAGE, id="p1", metadata={ROLLOUTS_KEY: rollouts})
    return validator.process(doc), rejects


def test_rejects_row_shows_a_sample_that_gave_the_reason():
    """Three samples, two cut at the token cap: the document is dropped as truncated, and its rejects row showed
    sample 0's text, a wrong_format answer that says nothing about the truncation."""
    rollouts = [
        {"text": "I cannot turn this page into a question.", "finish_reason": "stop"},
        {"text": "Question: Solve $2x + 3 = 11$.\nSolution: Subtract 3 from", "finish_reason": "length"},
        {"text": "Question: Solve $2x + 3 = 11$.\nSolution: We", "finish_reason": "length"},
    ]
    kept, rejects = _validate(rollouts)
    assert kept is None
    (row,) = rejects.rows
    assert row.metadata["reason"] == "truncated"
    assert row.text == rollouts[1]["text"] and row.metadata["finish_reason"] == "length"


def test_kept_row_says_what_was_cleaned_and_the_schema_has_the_column():
    kept, _ = _validate(
        [{"text": "Sure! Here is a question from the page:\n\n" + QA, "finish_reason": "stop"}]
    )
    assert kept is not None and kept.text.startswith("Question: Solve")
    assert kept.metadata["cleaned"] == "preamble"
    kept, _ = _validate([{"text": QA, "finish_reason": "stop"}])
    assert kept is not None and kept.metadata["cleaned"] == ""
    for task in ("refine", "qa", "longcot", "score"):
        assert output_schema(task).field("cleaned").type == pa.string()
