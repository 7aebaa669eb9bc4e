"""The audit over a real run: the quickstart sample through the real web, dedup and decont stages, then `audit`.

Catches drift between what the stages write and what the audit's views and report expect.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from curate.audit import AuditSession


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    from pipelines.recipe import Recipe
    from pipelines.runner import run_recipe
    from pipelines.sample import write_sample

    run = tmp_path_factory.mktemp("audit_real") / "run"
    write_sample(run / "sample")
    recipe = Recipe.model_validate(
        {
            "name": "audit-real",
            "output_dir": str(run),
            "executor": {"kind": "local", "tasks": 1, "workers": 1},
            "stages": {
                "web": {"inputs": ["{run_dir}/sample/pages.warc.gz"], "write_rejects": True},
                "dedup": {},
                "decont": {},
                "audit": {},
            },
        }
    )
    summaries = run_recipe(recipe)
    return run, summaries


def test_every_view_of_a_real_run(real_run):
    run, summaries = real_run
    with AuditSession(run) as session:
        for view in ("web", "dedup", "decont", "corpus", "rejects", "stats", "summaries"):
            assert view in session.relations, view
        assert not any(r.startswith(("sample", "audit")) for r in session.relations)
        for stage in ("web", "dedup", "decont"):
            files = sorted((run / stage / "data").glob("*.parquet"))
            assert session.scalar(f"SELECT count(*) FROM {stage}") == sum(
                pq.read_metadata(f).num_rows for f in files
            )
            assert (
                session.scalar(f"SELECT docs_out FROM summaries WHERE stage = '{stage}'")
                == summaries[stage]["docs_out"]
            )
        assert {"url", "domain", "lang", "n_chars"} <= set(session.columns("corpus"))
        assert "minhash_cluster_size" in session.columns("dedup")
        drops = {
            (r["stage"], r["reason"]): r["dropped"]
            for r in session.rows("SELECT * FROM stats WHERE reason IS NOT NULL")
        }
        for stage in ("web", "dedup", "decont"):
            assert {k[1]: v for k, v in drops.items() if k[0] == stage} == summaries[stage]["dropped"]
        for relation in session.relations:
            session.query(f'SELECT * FROM "{relation}" LIMIT 5')


def test_report_of_a_real_run_equals_its_sql(real_run):
    run, summaries = real_run
    audit = json.loads((run / "audit" / "summary.json").read_text())
    assert audit["docs_out"] == summaries["decont"]["docs_out"]
    html = (run / "audit" / "report.html").read_text()
    assert "data:image/png;base64," in html
    with AuditSession(run) as session:
        for section in audit["sections"].values():
            for key, sql in section["sql"].items():
                assert session.rows(sql) == section[key], (section["title"], key)
    stages = {r["stage"]: r for r in audit["sections"]["funnel"]["stages"]}
    for stage in ("web", "dedup", "decont"):
        assert stages[stage]["docs_in"] == summaries[stage]["docs_in"]
        assert stages[stage]["unaccounted"] == 0
    # a real run adds up: no stage unbalanced, unfinished, or holding other documents than its summary says
    assert not [n for n in audit["sections"]["funnel"]["notes"] if n.startswith("warning")]
    hits = summaries["decont"].get("hits_per_benchmark", {})
    if hits:  # the sample plants a contaminated page; the report counts it per benchmark like the stage does
        got = {r["benchmark"]: r["docs"] for r in audit["sections"]["contamination"]["benchmarks"]}
        assert got == hits
