"""The validator's rows (the `cleaned` column; the rejects row shows the sample that gave the reason) and the
refusal of longcot over inputs without questions."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datatrove.data import Document

from curate.rewrite.prechecks import check_longcot_inputs
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


def _parquet(path, rows: list[dict] | None = None, schema: pa.Schema | None = None):
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows or [], schema=schema) if schema else pa.Table.from_pylist(rows or [])
    pq.write_table(table, path)
    return path


def test_longcot_over_web_pages_is_refused_naming_the_file_and_the_way_to_feed_questions(tmp_path):
    pages = _parquet(
        tmp_path / "decont" / "data" / "00000.parquet", [{"id": "1", "text": "a forum page", "url": "u"}]
    )
    with pytest.raises(ValueError) as err:
        check_longcot_inputs([str(tmp_path / "decont")])
    message = str(err.value)
    assert str(pages) in message and "question / problem / prompt" in message
    assert 'task_inputs: {longcot: ["{run_dir}/branches/qa"]}' in message and "\n" not in message
    jsonl = tmp_path / "pages.jsonl"
    jsonl.write_text(json.dumps({"id": "1", "text": "a page"}) + "\n")
    with pytest.raises(ValueError, match="pages.jsonl: longcot needs questions"):
        check_longcot_inputs([str(jsonl)])


def test_longcot_inputs_with_questions_pass(tmp_path):
    # the qa branch, even one that kept nothing (model: auto): its schema has the question column
    from curate.rewrite.steps import output_schema

    _parquet(tmp_path / "branches" / "qa" / "data" / "00000.parquet", schema=output_schema("qa"))
    check_longcot_inputs([str(tmp_path / "branches" / "qa")])
    problems = tmp_path / "math.jsonl"
    problems.write_text(json.dumps({"id": "1", "problem": "Solve $x+1=2$.", "answer": "1"}) + "\n")
    check_longcot_inputs([str(problems)], text_key="problem")  # the text is the question
    with_question = tmp_path / "q.jsonl"
    with_question.write_text(json.dumps({"id": "1", "text": "page", "question": "Solve $x+1=2$."}) + "\n")
    check_longcot_inputs([str(with_question)])


def test_run_task_refuses_longcot_over_pages_before_writing_anything(tmp_path):
    from curate.rewrite.job import RewriteSettings, run_task

    _parquet(tmp_path / "pages" / "00000.parquet", [{"id": "1", "text": "a forum page"}])
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="longcot needs questions"):
        run_task([str(tmp_path / "pages")], out, "longcot", RewriteSettings(model="auto"), executor=None)
    assert not out.exists()
