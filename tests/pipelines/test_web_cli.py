"""`mathmix web` and `mathmix web extract` from the command line: options, bad inputs and outputs."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from mathmix.cli import app

MATH = (
    "<html><head><script src='mathjax.js'></script></head><body><article><h1>Quadratic equations</h1>"
    + "<p>The roots of <script type='math/tex'>ax^2+bx+c=0</script> are given by the quadratic formula, and "
    "we prove that the discriminant decides how many real solutions the equation has.</p>"
    * 8
    + "</article></body></html>"
)
NEWS = (
    "<html><body><article><p>The mayor said the city council would vote on the budget next week after the "
    "football season ended, and the market was closed for the holiday.</p></article></body></html>"
)


def _out(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture()
def pages(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "math.html").write_text(MATH)
    (folder / "news.html").write_text(NEWS)
    return folder


def test_an_input_of_an_unsupported_kind_is_named(tmp_path):
    text = tmp_path / "x.txt"
    text.write_text("hello")
    result = CliRunner().invoke(app, ["web", str(text), "-o", str(tmp_path / "w6")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert f"{text}: not a supported input" in _out(result) and ".warc.gz" in _out(result)
    assert not (tmp_path / "w6").exists()


def test_an_output_that_is_a_file_is_a_one_line_error(pages, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = CliRunner().invoke(app, ["web", str(pages), "-o", str(afile)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert f"{afile}: exists and is not a folder" in _out(result)


def test_write_rejects_flag_writes_every_dropped_page(pages, tmp_path):
    out = tmp_path / "w"
    result = CliRunner().invoke(app, ["web", str(pages), "-o", str(out), "--write-rejects"])
    assert result.exit_code == 0, result.output
    rejects = [
        row for f in sorted((out / "rejects").glob("*.parquet")) for row in pq.read_table(f).to_pylist()
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["docs_in"] == 2 and len(rejects) == sum(summary["dropped"].values()) >= 1
    help_text = _out(CliRunner().invoke(app, ["web", "run", "--help"]))
    assert "rejects/" in help_text and "--write-rejects" in help_text


def test_workers_and_write_rejects_override_the_recipe(pages, tmp_path, monkeypatch):
    import pipelines.web

    seen = {}

    def fake_run_web(config, inputs, out_dir, executor, math_model=None):
        seen.update(config=config, executor=executor)
        return {"docs_in": 0, "docs_out": 0, "dropped": {}}

    monkeypatch.setattr(pipelines.web, "run_web", fake_run_web)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "name: r\nexecutor: {kind: local, tasks: 4, workers: 1}\nstages:\n  web: {write_rejects: true}\n"
    )
    base = ["web", str(pages), "-o", str(tmp_path / "w"), "--recipe", str(recipe)]
    assert CliRunner().invoke(app, base).exit_code == 0
    assert seen["executor"].workers == 1 and seen["executor"].tasks == 4 and seen["config"].write_rejects
    result = CliRunner().invoke(app, [*base, "--workers", "3", "--no-write-rejects"])
    assert result.exit_code == 0, result.output
    assert seen["executor"].workers == 3 and seen["executor"].tasks == 4
    assert seen["config"].write_rejects is False


def test_extract_refuses_warc_gzip_and_binary_files(tmp_path):
    warc = tmp_path / "big.warc.gz"
    warc.write_bytes(gzip.compress(b"WARC/1.0\r\nWARC-Type: response\r\n\r\n"))
    plain_warc = tmp_path / "a.warc"
    plain_warc.write_bytes(b"WARC/1.0\r\nWARC-Type: warcinfo\r\n\r\n")
    binary = tmp_path / "img.html"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    for path, kind in ((warc, "a gzip file"), (plain_warc, "a WARC file"), (binary, "a binary file")):
        result = CliRunner().invoke(app, ["web", "extract", str(path)])
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
        assert f"{path}: {kind}, not HTML" in _out(result) and "mathmix web" in _out(result)
        assert result.stdout == ""  # nothing printed as "text"


def test_extract_a_folder_extracts_its_html_files(pages, tmp_path):
    result = CliRunner().invoke(app, ["web", "extract", str(pages)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in io.StringIO(result.stdout) if line.strip()]
    assert [r["path"] for r in rows] == [str(pages / "math.html"), str(pages / "news.html")]
    assert "$ax^2+bx+c=0$" in rows[0]["text"]
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(app, ["web", "extract", str(empty)])
    assert result.exit_code == 2 and f"{empty}: is a folder with no" in _out(result)


def test_group_help_names_the_default_command():
    from typer.testing import CliRunner

    from mathmix.cli import app

    for group in ("web", "train", "rewrite"):
        out = CliRunner().invoke(app, [group, "--help"], env={"COLUMNS": "200"})
        assert (
            out.exit_code == 0
            and f"`mathmix {group} ARGS...` without a command name runs `run`" in out.output
        )


def test_extract_decodes_pages_as_the_web_stage_does(tmp_path):
    body = "<html><body><article><p>Théorème de Pythagore : la somme des carrés des côtés.</p></article></body></html>"
    meta = tmp_path / "meta.html"
    meta.write_bytes(
        body.replace("<html>", "<html><head><meta charset='iso-8859-1'></head>").encode("latin-1")
    )
    nometa = tmp_path / "nometa.html"
    nometa.write_bytes(body.encode("latin-1"))
    result = CliRunner().invoke(app, ["web", "extract", str(meta), str(nometa)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in io.StringIO(result.stdout) if line.strip()]
    assert all("Théorème de Pythagore" in r["text"] and "\ufffd" not in r["text"] for r in rows), rows


def test_extract_refuses_json_and_text_files(tmp_path):
    jsonl = tmp_path / "pages.jsonl"
    jsonl.write_text(json.dumps({"html": "<p>one</p>"}) + "\n")
    array = tmp_path / "pages.json"
    array.write_text(json.dumps([{"html": "<p>one</p>"}]))
    text = tmp_path / "notes.txt"
    text.write_text("plain notes, no markup at all: 1 < 2 and 3 > 2\n")
    for path, kind in (
        (jsonl, "a JSON/JSONL file"),
        (array, "a JSON/JSONL file"),
        (text, "text without markup"),
    ):
        result = CliRunner().invoke(app, ["web", "extract", str(path)])
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
        assert f"{path}: {kind}, not HTML" in _out(result) and "mathmix web" in _out(result)
        assert result.stdout == ""
    snippet = tmp_path / "snippet.txt"
    snippet.write_text("<p>A page saved under another name, about sets and functions and their graphs.</p>")
    result = CliRunner().invoke(app, ["web", "extract", str(snippet)])
    assert result.exit_code == 0 and "sets and functions" in result.stdout


def test_inputs_without_pages_are_named_plainly(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(app, ["web", str(empty), "-o", str(tmp_path / "w")])
    assert result.exit_code == 2 and f"error: no WARC, .html or JSONL files in {empty}" in _out(result)
    assert "[" not in result.output and not (tmp_path / "w").exists()


def test_math_model_scores_pages_and_math_threshold_keeps_by_it(tmp_path):
    from classifiers.data import LabelledDoc
    from classifiers.train import TrainData, TrainSettings, train_model
    from tests.classifiers.corpus import MATH_WORDS, TEXT_WORDS, docs

    model = tmp_path / "clf" / "model.bin"
    model.parent.mkdir()
    pos = [
        LabelledDoc(t, "m", f"m{i}") for i, t in enumerate(docs(MATH_WORDS, 30, 1, length=30, numbered=False))
    ]
    neg = [
        LabelledDoc(t, "n", f"n{i}") for i, t in enumerate(docs(TEXT_WORDS, 30, 2, length=30, numbered=False))
    ]
    train_model(
        TrainData(pos, neg), model, TrainSettings(dim=8, lr=0.3, word_ngrams=2, epoch=10, bucket=5000)
    )
    pages = tmp_path / "pages"
    pages.mkdir()
    body = "".join(  # MATH's paragraphs, each its own (8 copies of one line were dropped as repeated_lines)
        f"<p>In example {i} the roots of <script type='math/tex'>x^2+{i}x+{i}=0</script> are given by the quadratic "
        f"formula, and we prove that the discriminant {i * i - 4 * i} decides how many real solutions it has.</p>"
        for i in range(1, 9)
    )
    (pages / "math.html").write_text(
        f"<html><head><script src='mathjax.js'></script></head><body>{body}</body></html>"
    )
    (pages / "news.html").write_text(NEWS)

    plain = CliRunner().invoke(app, ["web", str(pages), "-o", str(tmp_path / "plain")])
    assert plain.exit_code == 0, plain.output
    assert "note: no math classifier (--math-model)" in _out(plain)
    assert pq.read_table(tmp_path / "plain" / "data").column("math_score").to_pylist() == [None]

    scored = CliRunner().invoke(
        app, ["web", str(pages), "-o", str(tmp_path / "scored"), "--math-model", str(model)]
    )
    assert scored.exit_code == 0, scored.output
    assert "no math classifier" not in _out(scored)
    summary = json.loads((tmp_path / "scored" / "summary.json").read_text())
    rows = pq.read_table(tmp_path / "scored" / "data").to_pylist() if summary["docs_out"] else []
    assert all(isinstance(r["math_score"], float) for r in rows)
    assert summary["docs_out"] + sum(summary["dropped"].values()) == summary["docs_in"] == 2

    strict = CliRunner().invoke(app, ["web", str(pages), "-o", str(tmp_path / "strict"), "--math-model", str(model),
                                      "--math-threshold", "1"])  # fmt: skip
    assert strict.exit_code == 0, strict.output
    summary = json.loads((tmp_path / "strict" / "summary.json").read_text())
    assert (
        summary["docs_out"] == 0
        and summary["dropped"].get("low_math_score", 0) + summary["dropped"].get("too_short", 0) >= 1
    )

    missing = CliRunner().invoke(
        app, ["web", str(pages), "-o", str(tmp_path / "m"), "--math-model", "nope.bin"]
    )
    assert missing.exit_code == 2 and "nope.bin: no such model file" in _out(missing)
    alone = CliRunner().invoke(app, ["web", str(pages), "-o", str(tmp_path / "a"), "--math-threshold", "0.5"])
    assert alone.exit_code == 2 and "--math-threshold needs a model" in _out(alone)


def test_a_math_model_that_is_no_fasttext_model_is_refused_before_any_page(pages, tmp_path):
    # one WARC whose page was dropped before scoring: exit 0, job.json recording the bad model; a folder of pages:
    # an ERROR traceback from the scoring step's first page, then the error, OUT half-written
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "not a model"}\n')
    warc = (
        Path(__file__).resolve().parents[2].parent / "shared" / "data" / "warc" / "warcio" / "example.warc.gz"
    )
    for source in [pages, warc] if warc.is_file() else [pages]:
        out = tmp_path / f"w-{source.name}"
        result = CliRunner().invoke(app, ["web", str(source), "-o", str(out), "--math-model", str(bad)])
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
        assert f"error: --math-model {bad}: not a readable fastText model" in _out(result)
        assert "Traceback" not in result.output and not out.exists()
    # a recipe's model too, named with the recipe
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: t\nstages:\n  web: {{math_model: {bad}}}\n")
    result = CliRunner().invoke(app, ["web", str(pages), "-o", str(tmp_path / "w"), "--recipe", str(recipe)])
    assert result.exit_code == 2 and f"error: {recipe}: web.math_model {bad}: not a readable" in _out(result)
    assert not (tmp_path / "w").exists()


def test_a_recipe_without_a_web_stage_is_refused(pages, tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: t\nstages:\n  dedup: {inputs: [x.jsonl]}\n")
    result = CliRunner().invoke(app, ["web", str(pages), "-o", str(tmp_path / "w"), "--recipe", str(recipe)])
    assert result.exit_code == 2 and f"error: {recipe}: has no web stage (its stages: dedup)" in _out(result)
    assert not (tmp_path / "w").exists()
