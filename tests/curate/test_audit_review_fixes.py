"""Audit review findings: sums over `stats` count each rewriter drop once, a folder that is no run is an error,
a query with a syntax error is one line (not a refusal), and a stage is compared with the nearest earlier stage
present in the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curate.audit import AuditSession
from curate.audit_sections import write_report
from tests.curate.audit_runs import audit_cli


def _summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


def test_summing_over_stats_counts_each_rewriter_drop_once(base_run):
    top = [p for p in sorted(base_run.iterdir()) if (p / "summary.json").is_file()]
    tasks = sorted(p for p in (base_run / "branches").iterdir() if (p / "summary.json").is_file())
    assert tasks, "the synthetic run has rewriter tasks"
    with AuditSession(base_run) as s:
        assert s.scalar("SELECT sum(dropped) FROM stats") == sum(
            sum(_summary(p)["dropped"].values()) for p in top
        )
        assert s.scalar("SELECT count(*) FROM stats WHERE stage LIKE 'branches/%'") == 0
        assert s.scalar("SELECT count(*) FROM summaries WHERE stage LIKE 'branches/%'") == 0
        # the tasks are in their own tables, which sum to the rewriter's total in stats
        assert s.scalar("SELECT sum(dropped) FROM task_stats") == sum(
            _summary(base_run / "branches")["dropped"].values()
        )
        assert s.scalar("SELECT sum(dropped) FROM stats WHERE stage = 'branches'") == s.scalar(
            "SELECT sum(dropped) FROM task_stats"
        )
        rows = s.rows("SELECT stage, task, docs_in, docs_out FROM task_summaries ORDER BY task")
        assert rows == [
            {"stage": f"branches/{t.name}", "task": t.name, "docs_in": _summary(t)["docs_in"],
             "docs_out": _summary(t)["docs_out"]}
            for t in tasks
        ]  # fmt: skip


def test_the_report_still_shows_the_rewriter_per_task(base_run, tmp_path):
    result = write_report(base_run, tmp_path / "r.html", None)
    stages = [r["stage"] for r in result["sections"]["funnel"]["stages"]]
    assert "branches" not in stages and {"branches/qa", "branches/refine"} <= set(stages)
    drops = {(r["stage"], r["reason"]) for r in result["sections"]["funnel"]["drops"]}
    assert not any(stage == "branches" for stage, _ in drops) and any(st == "branches/qa" for st, _ in drops)
    acceptance = result["sections"]["rewriter"]["acceptance"]
    assert [r["task"] for r in acceptance] == ["qa", "refine"]
    assert {r["task"] for r in result["sections"]["rewriter"]["reasons"]} == {"qa", "refine"}


@pytest.mark.parametrize(
    "args",
    [["schema"], ["sql", "SELECT 1"], ["sample"], ["report", "-o", "OUT/r.html"], ["report"]],
)
def test_a_folder_that_is_no_run_is_one_line_exit_2(tmp_path, args):
    folder = tmp_path / "notrun"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("x")
    args = [a.replace("OUT", str(tmp_path / "out")) for a in args]
    out = CliRunner().invoke(audit_cli(), ["audit", args[0], str(folder), *args[1:]])
    assert out.exit_code == 2, out.output
    lines = [line for line in out.output.splitlines() if line.strip()]
    assert lines == [
        f"error: no stage output found under {folder}: give a run folder (the output_dir of a recipe)"
    ]
    assert not (tmp_path / "out").exists() and not (folder / "audit").exists()  # no empty report written


def test_a_syntax_error_is_one_line_and_no_refusal(base_run):
    for query, where in (("SELEC 1", '"SELEC" (line 1)'), ("SELECT 1 +\nFROM (", '"FROM" (line 2)')):
        out = CliRunner().invoke(audit_cli(), ["audit", "sql", str(base_run), query])
        assert out.exit_code == 2, out.output
        lines = [line for line in out.output.splitlines() if line.strip()]
        assert lines == [f"error: Parser Error: syntax error at or near {where}"], out.output
    out = CliRunner().invoke(audit_cli(), ["audit", "sample", str(base_run), "--where", "math_score <"])
    assert out.exit_code == 2 and "refused" not in out.output
    assert [line for line in out.output.splitlines() if line.strip()][-1].startswith("error: Parser Error: ")
    out = CliRunner().invoke(
        audit_cli(), ["audit", "sql", str(base_run), "DROP TABLE stats"]
    )  # still a refusal
    assert out.exit_code == 2 and "error: refused: DROP statements are refused" in out.output


def test_a_stage_is_compared_with_the_nearest_earlier_stage_present(run, tmp_path):
    web, decont = _summary(run / "web"), _summary(run / "decont")
    assert web["docs_out"] != decont["docs_in"]  # dedup dropped some between them
    shutil.rmtree(run / "dedup")
    out = CliRunner().invoke(audit_cli(), ["audit", "report", str(run), "-o", str(tmp_path / "r.html")])
    assert out.exit_code == 0, out.output
    line = (
        f"decont: docs_in {decont['docs_in']} != docs_out {web['docs_out']} of web, the stage before it (dedup not "
        "in this run): decont did not read what web wrote"
    )
    assert f"warning: {line}" in out.stderr and f"> warning: {line}" in (tmp_path / "r.md").read_text()


def test_consecutive_stages_that_do_not_chain_are_flagged(run, tmp_path):
    dedup = _summary(run / "dedup")
    path = run / "decont" / "summary.json"
    decont = json.loads(path.read_text())
    path.write_text(
        json.dumps(decont | {"docs_in": decont["docs_in"] + 5, "docs_out": decont["docs_out"] + 5})
    )
    result = write_report(run, tmp_path / "r.html", None)
    assert (
        f"decont: docs_in {decont['docs_in'] + 5} != docs_out {dedup['docs_out']} of dedup, the stage before it: "
        "decont did not read what dedup wrote"
    ) in result["warnings"]
