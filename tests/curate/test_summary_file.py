"""summary.json: a stage redone from scratch is told apart from a rerun that found its work done."""

from __future__ import annotations

import json
import shutil

from curate.summary import write_summary


def test_a_redone_stage_gets_a_new_stamp_and_a_no_op_rerun_keeps_the_file(tmp_path):
    out = tmp_path / "dedup"
    out.mkdir()
    first = {"docs_in": 3, "docs_out": 2, "dropped": {"duplicate_text": 1}, "seconds": 0.27}
    path = write_summary(out, first)
    written = path.read_bytes()
    assert json.loads(written) == first and "finished_at" in first  # the caller's copy carries the stamp too

    rerun = {"docs_in": 3, "docs_out": 2, "dropped": {"duplicate_text": 1}, "seconds": 0.01}  # found all done
    write_summary(out, rerun)
    assert path.read_bytes() == written and rerun == first  # the file (and its timing) kept, and reported

    shutil.rmtree(out)  # redone from scratch, with the very same numbers and rounded timing
    out.mkdir()
    write_summary(out, {"docs_in": 3, "docs_out": 2, "dropped": {"duplicate_text": 1}, "seconds": 0.27})
    assert path.read_bytes() != written  # what the later stages' upstream.json hashes: the redo shows

    write_summary(out, {"docs_in": 3, "docs_out": 1, "dropped": {"duplicate_text": 2}, "seconds": 0.27})
    assert json.loads(path.read_text())["docs_out"] == 1  # other numbers: rewritten
