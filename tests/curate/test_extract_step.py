"""MathAwareExtractor: output metadata, and bad input as counted drops with bounded time (never a crash/hang)."""

from __future__ import annotations

import json
import time

import pytest
from datatrove.data import Document

from curate.extract import PageTooDeep, extract, extract_strict
from curate.extract_step import MathAwareExtractor

GOOD = (
    "<html><body><article><p>Let <script type='math/tex'>x^2</script> be a square, and this sentence is long "
    "enough to be main content.</p></article></body></html>"
)
ENTITY_BOMB = (
    '<!DOCTYPE html [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
    '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>'
    "<html><body><p>&d;&d;&d;&d;</p><p>" + "&amp;&lt;&#x1F600;" * 50_000 + "</p></body></html>"
)
MALFORMED = "<p><b>unclosed <div></p></b><math><mi>x<table><td>1<tr><script type='math/tex'>y"
DEEP_CHAIN = "<html><body>" + "<div>" * 100_000 + "deep" + "</div>" * 100_000 + "</body></html>"
# A deep chain hidden in a middle child: not caught by the cheap nesting probe, so only the timeout stops it.
DEEP_MIDDLE = (
    "<html><body><p>first</p><section>" + "<div>" * 40_000 + "deep" + "</div>" * 40_000 + "</section>"
    "<p>last</p></body></html>"
)


def run_step(texts, **kwargs):
    step = MathAwareExtractor(**kwargs)
    docs = [Document(text=t, id=str(i), metadata={"url": "http://example.org"}) for i, t in enumerate(texts)]
    out = list(step.run(iter(docs)))
    stats = {k: v.total if hasattr(v, "total") else v for k, v in step.stats.stats.items()}
    return out, stats


@pytest.mark.parametrize("isolation", ["process", "alarm"])
def test_output_text_and_metadata(isolation):
    out, stats = run_step([GOOD, ""], isolation=isolation)
    assert len(out) == 1
    assert "$x^2$" in out[0].text
    assert out[0].metadata["extractor"] == "mathmix-fast"
    assert out[0].metadata["url"] == "http://example.org"
    assert stats.get("dropped_empty_text") == 1


def test_clean_engine_metadata():
    out, _ = run_step([GOOD], engine="clean", isolation="alarm")
    assert out[0].metadata["extractor"] == "mathmix-clean"


def test_50mb_page_dropped_as_too_large_quickly():
    big = "<html><body>" + "<p>word " * (50_000_000 // 8) + "</body></html>"
    t0 = time.monotonic()
    out, stats = run_step([big, GOOD], isolation="alarm")
    assert time.monotonic() - t0 < 10
    assert stats.get("dropped_too_large") == 1
    assert len(out) == 1


def test_byte_cap_counts_utf8_bytes():
    page = "<html><body><p>" + "é" * 3000 + "</p></body></html>"  # ~3000 chars, ~6000 bytes
    _, stats = run_step([page], max_bytes=5000, isolation="alarm")
    assert stats.get("dropped_too_large") == 1


def test_invalid_utf8_bytes_and_surrogates():
    raw = (
        b"<html><body><article><p>caf\xe9 \xff\xfe broken " + b"words " * 20 + b"</p></article></body></html>"
    )
    surrogate = "<html><body><article><p>bad \ud800 char " + "words " * 20 + "</p></article></body></html>"
    out, stats = run_step([raw, surrogate], isolation="alarm")
    assert len(out) == 2
    assert "broken" in out[0].text and "bad" in out[1].text


def test_entity_bomb_and_malformed_html_are_bounded():
    t0 = time.monotonic()
    for engine in ("fast", "clean"):
        assert len(extract(ENTITY_BOMB, engine=engine)) < 2_000_000
        extract(MALFORMED, engine=engine)
    assert time.monotonic() - t0 < 20


def test_deep_nesting_is_a_counted_drop():
    with pytest.raises(PageTooDeep):
        extract_strict(DEEP_CHAIN)
    assert extract(DEEP_CHAIN) == ""  # direct callers (the CLI) get no text, not an exception
    out, stats = run_step([DEEP_CHAIN, GOOD], isolation="alarm")
    assert stats.get("dropped_too_deep") == 1
    assert len(out) == 1


def test_hang_in_c_code_is_killed_by_the_process_timeout():
    t0 = time.monotonic()
    out, stats = run_step([DEEP_MIDDLE, GOOD], timeout_s=1.0, isolation="process")
    assert stats.get("dropped_extract_timeout") == 1
    assert len(out) == 1 and "$x^2$" in out[0].text  # the worker was restarted for the next page
    assert time.monotonic() - t0 < 30


def test_extract_error_is_counted(monkeypatch):
    import curate.extract as mod

    def boom(*a, **k):
        raise RuntimeError("broken page")

    monkeypatch.setattr(mod, "extract_strict", boom)
    out, stats = run_step([GOOD], isolation="alarm")
    assert out == [] and stats.get("dropped_extract_error") == 1


def test_alarm_timeout_interrupts_python_code(monkeypatch):
    import curate.extract as mod

    def spin(*a, **k):
        while True:
            pass

    monkeypatch.setattr(mod, "extract_strict", spin)
    t0 = time.monotonic()
    out, stats = run_step([GOOD], timeout_s=0.5, isolation="alarm")
    assert out == [] and stats.get("dropped_extract_timeout") == 1
    assert time.monotonic() - t0 < 10


def test_dropped_pages_go_to_the_exclusion_writer(tmp_path):
    from datatrove.pipeline.writers import JsonlWriter

    step = MathAwareExtractor(isolation="alarm", max_bytes=10_000)
    step.exclusion_writer = JsonlWriter(str(tmp_path), output_filename="rejects.jsonl", compression=None)
    docs = [Document(text=t, id=str(i), metadata={}) for i, t in enumerate([GOOD, "", "x" * 20_000])]
    assert len(list(step.run(iter(docs)))) == 1
    rows = [json.loads(line) for line in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert sorted(r["metadata"]["filter_reason"] for r in rows) == ["empty_text", "too_large"]


def test_in_a_datatrove_executor_with_worker_processes(tmp_path):
    """The forkserver pool of LocalPipelineExecutor, each task with its own sandbox worker: drops balance."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    from curate.summary import is_balanced, summarize_logs

    (tmp_path / "in").mkdir()
    for k in range(2):
        rows = [
            {"text": GOOD, "id": f"{k}-good"},
            {"text": DEEP_CHAIN, "id": f"{k}-deep"},
            {"text": "<p> </p>", "id": f"{k}-e"},
        ]
        (tmp_path / "in" / f"p{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    executor = LocalPipelineExecutor(
        pipeline=[
            JsonlReader(str(tmp_path / "in")),
            MathAwareExtractor(timeout_s=5),
            JsonlWriter(str(tmp_path / "out"), compression=None),
        ],
        tasks=2,
        workers=2,
        logging_dir=str(tmp_path / "logs"),
    )
    executor.run()
    summary = summarize_logs(tmp_path / "logs")
    assert summary["docs_in"] == 6 and summary["docs_out"] == 2
    assert summary["dropped"] == {"empty_text": 2, "too_deep": 2}
    assert is_balanced(summary)


@pytest.mark.parametrize("isolation", ["process", "alarm"])
def test_plain_text_documents_are_not_parsed_as_html(isolation):
    text = "if a<b and b>c then\r\nx<y<z, costs $5\n\n\n\nend <p>"
    step = MathAwareExtractor(isolation=isolation)
    doc = Document(text=text, id="0", metadata={"content_type": "text/plain"})
    [out] = list(step.run(iter([doc])))
    assert out.text == "if a<b and b>c then\nx<y<z, costs \\$5\n\nend <p>"
    assert out.metadata["extractor"] == "plain-text"


def test_ctrl_c_stops_the_worker_process_without_a_traceback(tmp_path):
    """Ctrl-C reaches the whole process group: the extraction worker must leave it to its parent, which ends it
    (it printed a KeyboardInterrupt traceback, before the CLI's one clean line, whenever it got there first)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "run.py"
    script.write_text(
        "import itertools, multiprocessing, time\n"
        "from datatrove.data import Document\n"
        "from curate.extract_step import MathAwareExtractor\n"
        f"page = {GOOD!r}\n"
        "docs = (Document(text=page, id=str(i), metadata={}) for i in itertools.count())\n"
        "try:\n"
        "    for i, doc in enumerate(MathAwareExtractor(isolation='process').run(docs)):\n"
        "        if i == 0:\n"
        "            print(*[p.pid for p in multiprocessing.active_children()], flush=True)\n"
        "        time.sleep(0.01)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    [worker] = proc.stdout.readline().split()
    os.kill(int(worker), signal.SIGINT)  # the worker first, as when its parent is slower to react
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert out == "interrupted\n"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def test_plain_text_drops_stackexchange_group_markers_as_html_extraction_does():
    from curate.extract_step import plain_text

    wet = "12\n$\\begingroup$ Let $x^2 = 4$ hold. $\\endgroup$\nanswered"
    text = plain_text(wet)
    assert "begingroup" not in text and "endgroup" not in text
    assert "Let" in text and "x^2 = 4" in text and "answered" in text
    assert "\\begingroup" in plain_text("$\\begingroup x$")  # a formula with more in it is kept whole


def _gc_state(_text):
    import gc

    return gc.get_threshold()[0], gc.get_freeze_count()


def test_the_worker_freezes_what_it_inherits_and_collects_the_young_generation_less_often():
    import gc

    from curate.extract_step import WORKER_GC_THRESHOLD, _Sandbox

    before = gc.get_threshold()
    with _Sandbox(timeout=10, warmup_text="") as sandbox:
        threshold, frozen = sandbox.process_document("", _gc_state)
    assert threshold == WORKER_GC_THRESHOLD
    assert frozen > 1000, "the objects the worker inherited were not frozen"
    assert gc.get_threshold() == before, "the parent's collector settings changed"


def test_a_web_run_with_one_worker_ends_without_a_traceback(tmp_path):
    # the sandbox terminates its worker (SIGTERM) at the end of every run; the worker kept mathmix's handler, which
    # turns SIGTERM into KeyboardInterrupt, and printed "Process Process-1: Traceback ... KeyboardInterrupt"
    import subprocess
    import sys

    page = tmp_path / "page.html"
    page.write_text(
        "<html><body><p>Let $x^2 = 4$, so $x = \\pm 2$ and the sum of roots is 0.</p></body></html>"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mathmix", "web", str(page), "-o", str(tmp_path / "out"), "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["docs_in"] == 1
