"""Found by running the recipe chain (web -> dedup -> decont -> audit) on the shared real WARC/ARC files and math
pages: what an uninterrupted run, a rerun and the audit of the run must agree on."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.executors import ExecutorConfig
from pipelines.web import Config, run_web


def _arc(path: Path, pages: list[tuple[str, bytes]]) -> None:
    """An ARC v1 file (what a 2000s crawl left): a filedesc header record, then one record per page."""
    head = b"1 0 mathmix test\nURL IP-address Archive-date Content-type Archive-length\n"
    out = [
        b"filedesc://%s 127.0.0.1 20090101000000 text/plain %d\n%s\n" % (path.name.encode(), len(head), head)
    ]
    for url, html in pages:
        body = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + html
        out.append(b"%s 93.184.216.34 20090101000000 text/html %d\n%s\n" % (url.encode(), len(body), body))
    path.write_bytes(b"".join(out))


def _ids(out: Path) -> tuple[list[str], list[str]]:
    kept = sorted(pq.read_table(out / "data", columns=["id"]).column("id").to_pylist())
    dropped = sorted(
        r["id"] + "|" + r["reason"]
        for f in sorted((out / "rejects").glob("*.parquet"))
        for r in pq.read_table(f, columns=["id", "reason"]).to_pylist()
    )
    return kept, dropped


def test_arc_pages_get_the_same_ids_on_every_run(tmp_path, shared_data):
    """warcio gives each ARC record a random WARC-Record-ID (uuid4) when it converts it: that was the page's id, so
    two runs over the same ARC file (or a task killed and redone) gave its pages other ids."""
    arc_dir = tmp_path / "arc"
    arc_dir.mkdir()
    math_page = sorted((shared_data / "html" / "math").glob("*.html"))[0]
    _arc(arc_dir / "math.arc", [(f"http://old.example.edu/{math_page.name}", math_page.read_bytes())])
    inputs = [
        str(arc_dir / "math.arc"),
        str(shared_data / "warc" / "warcio" / "example.arc"),  # real ARC files, one gzipped
        str(shared_data / "warc" / "warcio" / "example.arc.gz"),
        str(shared_data / "warc" / "warcio" / "example.warc.gz"),  # a WARC keeps its own record ids
    ]
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        run_web(Config(write_rejects=True), inputs, out, ExecutorConfig(tasks=1, workers=1))
        runs.append(_ids(out))
    (kept_a, dropped_a), (kept_b, dropped_b) = runs
    assert len(kept_a) == 1, "the math page in the ARC file is kept"
    assert kept_a == kept_b and dropped_a == dropped_b
    assert not any(i.startswith("<urn:uuid:") for i in kept_a)
    rows = pq.read_table(tmp_path / "a" / "data").to_pylist()
    assert rows[0]["record_id"] is None and rows[0]["url"].startswith("http://old.example.edu/")
    warc_ids = [i for i in dropped_a if i.startswith("<urn:uuid:")]
    assert len(warc_ids) == 1, "example.warc.gz's response keeps its WARC-Record-ID"


def test_audit_of_a_run_with_dedup_names_no_damaged_file(tmp_path, shared_data):
    """dedup's work/ids/RANK.ids.jsonl (one JSON string a line) was read as a report view: every audit command on
    any run with a dedup stage warned that all its lines 'do not parse', and the report's funnel said so."""
    from pipelines.recipe import load_recipe
    from pipelines.runner import run_recipe

    pages = sorted((shared_data / "html" / "math").glob("*.html"))[:6]
    html = tmp_path / "pages"
    html.mkdir()
    for page in pages + pages[:2]:  # two pages twice: dedup drops them
        (html / f"{len(list(html.iterdir()))}-{page.name}").write_bytes(page.read_bytes())
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{kind: local, tasks: 2, workers: 2}}\n"
        f"stages:\n  web: {{inputs: ['{html}']}}\n  dedup: {{}}\n  audit: {{}}\n"
    )
    summaries = run_recipe(load_recipe(recipe))
    run = tmp_path / "run"
    assert (run / "dedup" / "work" / "ids").is_dir()
    for stage in ("web", "dedup"):
        s = summaries[stage]
        assert s["docs_in"] == s["docs_out"] + sum(s["dropped"].values())
    assert summaries["dedup"]["dropped"].get("duplicate_text") == 2
    audit = json.loads((run / "audit" / "summary.json").read_text())
    assert "do not parse" not in json.dumps(audit)
    stages = {row["stage"]: row for row in audit["sections"]["funnel"]["stages"]}
    for stage in ("web", "dedup"):
        assert (stages[stage]["docs_in"], stages[stage]["docs_out"]) == (
            summaries[stage]["docs_in"],
            summaries[stage]["docs_out"],
        )
    from curate.audit import AuditSession  # what `mathmix audit sql/schema/report` open

    session = AuditSession(run)
    assert session.unreadable == []
    assert "dedup_clusters" in session.relations and "dedup_work_ids" not in session.relations


def test_a_recipe_input_of_a_kind_the_web_stage_does_not_read_is_named(tmp_path, shared_data):
    """`mathmix web notes.csv` is refused (docs/web.md), but the recipe's web stage read 0 pages from such a file (a
    glob `crawl/*` matching a manifest next to the WARCs), counted it in `input_files` and finished as if it held
    no page."""
    from pipelines.recipe import load_recipe
    from pipelines.runner import StageFailed, run_recipe

    crawl = tmp_path / "crawl"
    crawl.mkdir()
    (crawl / "example.warc.gz").write_bytes(
        (shared_data / "warc" / "warcio" / "example.warc.gz").read_bytes()
    )
    (crawl / "manifest.csv").write_bytes((shared_data / "html" / "manifest.csv").read_bytes())
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{kind: local, tasks: 1, workers: 1}}\n"
        f"stages:\n  web: {{inputs: ['{crawl}/*']}}\n"
    )
    with pytest.raises(StageFailed, match=r"manifest\.csv: not a supported input"):
        run_recipe(load_recipe(recipe))
    assert not (tmp_path / "run" / "web" / "summary.json").exists()


def test_a_run_into_another_runs_stage_folder_is_refused(tmp_path, shared_data):
    """`mathmix run R -o RUN/web` (a stage folder, not the run folder) ran the whole chain nested in RUN/web, next
    to its data/: RUN's audit then made views of the nested run's reports (web_dedup, web_decont, ...)."""
    from pipelines.recipe import load_recipe
    from pipelines.runner import run_recipe

    warc = shared_data / "warc" / "warcio" / "example.warc.gz"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{kind: local, tasks: 1, workers: 1}}\n"
        f"stages:\n  web: {{inputs: ['{warc}']}}\n"
    )
    run_recipe(load_recipe(recipe))
    for nested in (tmp_path / "run" / "web", tmp_path / "run" / "web" / "logs" / "x"):
        again = load_recipe(recipe)
        again.output_dir = nested
        with pytest.raises(ValueError, match="stage folder"):
            run_recipe(again)
    assert sorted(p.name for p in (tmp_path / "run" / "web").iterdir() if p.is_dir()) == ["data", "logs"]
    assert run_recipe(load_recipe(recipe))["web"]["docs_in"] == 1  # the run folder itself still resumes


def test_a_file_a_recipe_glob_now_matches_too_is_named_in_the_refusal(tmp_path, shared_data):
    """A WARC added to a folder a finished web stage's glob reads (crawl/*.warc.gz) was refused as only 'other input
    paths', and a file replaced in place as 'other sizes at the same paths': the user had to diff the records."""
    from pipelines.recipe import load_recipe
    from pipelines.runner import StageFailed, run_recipe

    warcs = shared_data / "warc" / "warcio"
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    (crawl / "a.warc.gz").write_bytes((warcs / "example.warc.gz").read_bytes())
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{kind: local, tasks: 1, workers: 1}}\n"
        f"stages:\n  web: {{inputs: ['{crawl}/*.warc.gz']}}\n"
    )
    run_recipe(load_recipe(recipe))
    (crawl / "b.warc.gz").write_bytes((warcs / "example-resource.warc.gz").read_bytes())
    with pytest.raises(StageFailed, match=r"other input paths \(added: .*/crawl/b\.warc\.gz\)"):
        run_recipe(load_recipe(recipe))
    (crawl / "b.warc.gz").unlink()
    (crawl / "a.warc.gz").write_bytes((warcs / "example-resource.warc.gz").read_bytes())
    with pytest.raises(StageFailed, match=r"other sizes at the same paths: .*/crawl/a\.warc\.gz\)"):
        run_recipe(load_recipe(recipe))


def test_a_run_folder_that_is_a_file_is_one_line(tmp_path):
    """`-o FILE` (or a folder under a file) failed in the first stage with a bare `[Errno 20] Not a directory`."""
    from pipelines.recipe import load_recipe
    from pipelines.runner import run_recipe

    (tmp_path / "notes.txt").write_text("x")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\noutput_dir: {tmp_path / 'run'}\nexecutor: {{kind: local, tasks: 1, workers: 1}}\n"
        f"stages:\n  web: {{inputs: ['{tmp_path}']}}\n"
    )
    for out, said in ((tmp_path / "notes.txt", "is a file"), (tmp_path / "notes.txt" / "run", "lies inside")):
        again = load_recipe(recipe)
        again.output_dir = out
        with pytest.raises(ValueError, match=said):
            run_recipe(again)
