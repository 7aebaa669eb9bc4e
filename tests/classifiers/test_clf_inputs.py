"""What classifier inputs are read: every supported kind, in every subfolder, and what is skipped is reported."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from classifiers.data import read_input

MATH_WORDS = "let x be integer prove theorem equation solve derivative integral lemma".split()


def _docs(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(MATH_WORDS) for _ in range(40)) + f"\npage {i}" for i in range(n)]


def _jsonl_gz(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    return path


def test_gzipped_jsonl_is_read_as_web_and_dedup_read_it(tmp_path):
    rows = [{"text": t, "url": f"https://m.org/{i}"} for i, t in enumerate(_docs(3, 0))]
    path = _jsonl_gz(tmp_path / "pages.jsonl.gz", rows)
    assert [d.text for d in read_input(path)] == [r["text"] for r in rows]
    (tmp_path / "sub").mkdir()
    _jsonl_gz(tmp_path / "sub" / "more.JSONL.GZ", rows[:1])
    assert len(read_input(tmp_path)) == 4


def _page(body: str) -> str:
    return f"<html><head><title>t</title></head><body><article><p>{body}</p></article></body></html>"


def _warc(path: Path, pages: dict[str, str]) -> Path:
    import io

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        for url, html in pages.items():
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.0")
            payload = io.BytesIO(html.encode())
            writer.write_record(
                writer.create_warc_record(url, "response", payload=payload, http_headers=headers)
            )
    return path


@pytest.fixture
def mixed_folder(tmp_path) -> Path:
    """Every kind the classifier reads, in subfolders and upper case, plus what it must skip and name."""
    texts = _docs(9, 1)
    root = tmp_path / "mixdir"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "upper").mkdir()
    (root / "top.html").write_text(_page(texts[0]))
    (root / "sub" / "deeper" / "deep.html").write_text(_page(texts[1]))
    (root / "upper" / "PAGE.HTM").write_text(_page(texts[2]))
    (root / "latin1.html").write_bytes(
        b'<html><head><meta charset="iso-8859-1"></head><body><article><p>'
        + texts[3].encode()
        + " caf\xe9 na\xefve".encode("latin-1")
        + b"</p></article></body></html>"
    )
    rows = [
        {"html": _page(texts[4]), "url": "https://j.org/1"},
        {"html": _page(texts[5]), "url": "https://j.org/2"},
    ]
    (root / "sub" / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "sub" / "corpus.jsonl").write_text(json.dumps({"text": texts[6]}) + "\n")
    _warc(root / "crawl.warc.gz", {"https://w.org/1": _page(texts[7]), "https://w.org/2": _page(texts[8])})
    (root / "notes.txt").write_text("hello")
    (root / "sub" / "broken.jsonl").write_text("{not json\n")
    (root / "blank.html").write_text("<html><body><div></div></body></html>")
    return root


def test_folders_are_read_whole_recursively_and_skips_are_named(mixed_folder):
    from classifiers.data import Skipped

    skipped = Skipped()
    docs = read_input(mixed_folder, skipped)
    pages = {d.page for d in docs}
    assert {"top.html", "sub/deeper/deep.html", "upper/PAGE.HTM", "latin1.html"} <= pages
    assert {"https://j.org/1", "https://j.org/2", "https://w.org/1", "https://w.org/2"} <= pages
    assert len(docs) == 9
    latin = next(d for d in docs if d.page == "latin1.html")
    assert "café naïve" in latin.text  # decoded by its meta charset, as the web stage does
    assert dict(skipped.counts) == {"unsupported_file": 1, "bad_file": 1, "empty_text": 1}
    text = skipped.describe()
    assert (
        "notes.txt" in text
        and "sub/broken.jsonl" in text
        and "not valid JSON" in text
        and "blank.html" in text
    )


def test_score_reads_every_kind_and_says_what_it_skipped(mixed_folder, tmp_path):
    from classifiers.cli import load_training_data
    from classifiers.train import TrainSettings, train_model
    from mathmix.cli import app

    math = tmp_path / "m.jsonl"
    math.write_text("".join(json.dumps({"text": t}) + "\n" for t in _docs(12, 5)))
    text = tmp_path / "t.jsonl"
    rng = random.Random(0)
    words = "the match team season city mayor said market".split()
    text.write_text(
        "".join(json.dumps({"text": " ".join(rng.choices(words, k=40))}) + "\n" for _ in range(12))
    )
    model = tmp_path / "model.bin"
    train_model(
        load_training_data([math], [text], [], 3.0), model, TrainSettings(dim=8, epoch=5, bucket=5000)
    )
    result = CliRunner().invoke(app, ["classifier", "score", str(model), str(mixed_folder)])
    assert result.exit_code == 0, result.output
    assert len(result.stdout.strip().splitlines()) == 9
    warning = " ".join(result.stderr.split())
    assert "skipped" in warning and "notes.txt" in warning and "sub/broken.jsonl" in warning
    upper = CliRunner().invoke(
        app, ["classifier", "score", str(model), str(mixed_folder / "upper" / "PAGE.HTM")]
    )
    assert upper.exit_code == 0 and len(upper.stdout.strip().splitlines()) == 1


def test_a_folder_with_nothing_readable_names_what_it_holds(tmp_path):
    from classifiers.data import InputError

    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(InputError, match=r"no \.html pages.*a\.txt"):
        read_input(tmp_path)


def test_shared_html_folder_is_read_through_its_subfolders(shared_data):
    from classifiers.data import Skipped

    skipped = Skipped()
    docs = read_input(shared_data / "html", skipped)
    assert len(docs) + skipped.counts["empty_text"] == 333
    assert skipped.counts["unsupported_file"] == 1 and "manifest.csv" in skipped.describe()


@pytest.fixture
def page_folders(tmp_path) -> dict[str, Path]:
    """Math and non-math page folders (one non-math page has no text), as the quickstart sample lays them out."""
    rng = random.Random(3)
    words = "the match team season city mayor said market shares film actor recipe".split()
    folders = {"math": tmp_path / "html" / "math", "nonmath": tmp_path / "html" / "nonmath"}
    for folder in folders.values():
        folder.mkdir(parents=True)
    for i, text in enumerate(_docs(12, 7)):
        (folders["math"] / f"m{i}.html").write_text(_page(text))
    for i in range(12):
        (folders["nonmath"] / f"n{i}.html").write_text(_page(" ".join(rng.choices(words, k=40))))
    (folders["nonmath"] / "blank.html").write_text("<html><body><div></div></body></html>")
    return folders


def _cut_gzip(path: Path, lines: list[str]) -> int:
    """Write LINES gzipped and cut at half the stream (a copy interrupted); returns how many whole lines the kept
    bytes hold (decompressed with zlib, not with the gzip module the reader uses)."""
    import zlib

    data = gzip.compress("".join(line + "\n" for line in lines).encode())
    cut = data[: len(data) // 2]
    path.write_bytes(cut)
    whole = zlib.decompressobj(wbits=31).decompress(cut).count(b"\n")
    assert 3 < whole < len(lines)  # cut mid-file, after the first lines
    return whole


def test_a_cut_gzip_stream_in_a_folder_keeps_the_rows_before_the_cut(tmp_path):
    """A .jsonl.gz cut mid-file (an interrupted copy) was a bad_file: every row of it unread. The rows before the
    cut are read, and the cut is counted once, as `truncated_file`, naming the line and the records kept; a file
    cut before its first line is still one bad_file, and a cut file given as the input is still an error."""
    from classifiers.data import InputError, Skipped

    folder = tmp_path / "in"
    folder.mkdir()
    texts = _docs(400, 11)
    lines = [json.dumps({"text": texts[0]}), "{bad", json.dumps({"other": 1})]
    lines += [json.dumps({"text": t}) for t in texts[1:]]
    whole = _cut_gzip(folder / "cut.jsonl.gz", lines)
    (folder / "early.jsonl.gz").write_bytes(gzip.compress(lines[0].encode() + b"\n")[:12])
    _jsonl_gz(folder / "ok.jsonl.gz", [{"text": "a whole other file"}])
    skipped = Skipped()
    docs = read_input(folder, skipped)
    found = skipped.as_dict()
    kept = [d.text for d in docs if d.text != "a whole other file"]
    assert kept == [texts[0], *texts[1 : whole - 2]]  # every row before the cut, in order
    records = whole - 1  # the lines read as records: all but the bad one
    assert found["truncated_file"] == {"n": 1, "examples": [
        f"cut.jsonl.gz line {whole + 1}: gzip stream cut (Compressed file ended before the end-of-stream marker "
        f"was reached); {records} records before it kept"]}  # fmt: skip
    # Nothing counted twice: the lines before the cut are the documents plus one drop each, the cut once.
    assert found["bad_record"]["n"] == 1 and found["no_text_field"]["n"] == 1
    assert whole == len(kept) + found["bad_record"]["n"] + found["no_text_field"]["n"]
    assert found["bad_file"] == {"n": 1, "examples": [
        "early.jsonl.gz: line 1: gzip stream cut (Compressed file ended before the end-of-stream marker was "
        "reached)"]}  # fmt: skip
    assert set(found) == {"truncated_file", "bad_record", "no_text_field", "bad_file"}
    given = tmp_path / "given.jsonl.gz"
    _cut_gzip(given, lines[:1] + lines[3:])
    with pytest.raises(
        InputError, match=r"given.jsonl.gz: cannot be read as jsonl.gz \(Compressed file ended"
    ):
        read_input(given)


def test_train_says_in_one_line_which_file_was_cut_and_what_it_kept(tmp_path):
    from mathmix.cli import app

    folder = tmp_path / "pos"
    folder.mkdir()
    whole = _cut_gzip(folder / "rows.jsonl.gz", [json.dumps({"text": t}) for t in _docs(400, 12)])
    negative = tmp_path / "neg.jsonl"
    rng = random.Random(1)
    words = "the match team season city mayor said market".split()
    negative.write_text(
        "".join(json.dumps({"text": " ".join(rng.choices(words, k=40))}) + "\n" for _ in range(20))
    )
    out = tmp_path / "m.bin"
    result = CliRunner().invoke(app, _train_args(out, "-p", str(folder), "-n", str(negative)))
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, result.stderr
    assert warnings[0] == (
        f"warning: skipped 1: 1 truncated_file (rows.jsonl.gz line {whole + 1}: gzip stream cut (Compressed file "
        f"ended before the end-of-stream marker was reached); {whole} records before it kept)"
    )
    card = json.loads(out.with_suffix(".card.json").read_text())
    assert card["counts"]["positive_docs"] == whole and card["counts"]["skipped"] == {
        "truncated_file": {"n": 1, "examples": [warnings[0].split("(", 1)[1].removesuffix(")")]}
    }


def _train_args(out: Path, *inputs: str) -> list[str]:
    return ["classifier", "train", *inputs, "-o", str(out), "--dim", "8", "--epoch", "5", "--bucket", "5000"]


def test_the_same_files_as_math_and_nonmath_are_refused(page_folders, tmp_path):
    from mathmix.cli import app

    math = page_folders["math"]
    for negative in (str(math) + "/", str(math / "m3.html"), str(math.parent)):
        out = tmp_path / "m.bin"
        result = CliRunner().invoke(app, _train_args(out, "-p", str(math), "-n", negative))
        words = " ".join(result.output.split())
        assert result.exit_code == 2, words
        assert "both math (-p/positives) and non-math (-n/negatives)" in words, words
        assert "m3.html" in words or "m0.html" in words
        assert not out.exists()


def test_relative_paths_in_both_classes_are_refused_in_one_line(page_folders, tmp_path, monkeypatch):
    """Relative inputs resolve to other paths than they are written as: the refusal, not a KeyError traceback."""
    from mathmix.cli import app

    monkeypatch.chdir(tmp_path)
    cases = (("html", "html/nonmath", "13 file(s)"), ("html/math", "html/math/m3.html", "1 file(s)"))
    for positive, negative, count in cases:
        result = CliRunner().invoke(app, _train_args(Path("c/m.bin"), "-p", positive, "-n", negative))
        words = " ".join(result.output.split())
        assert result.exit_code == 2, (words, result.exception)
        assert words.startswith("error: ") and "Traceback" not in words, words
        assert f"error: {count} are inputs of both math (-p/positives) and non-math (-n/negatives)" in words
        assert f"(through {positive} and {negative})" in words, words
        assert not (tmp_path / "c").exists()


def test_recipe_relative_paths_in_both_classes_are_refused(page_folders, tmp_path, monkeypatch):
    from mathmix.cli import app

    monkeypatch.chdir(tmp_path)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "name: r\noutput_dir: run\nstages:\n  classifier:\n"
        "    positives: [html]\n    negatives: [html/nonmath]\n"
    )
    result = CliRunner().invoke(app, ["run", str(recipe)])
    words = " ".join(result.output.split())
    assert result.exit_code == 2, (words, result.exception)
    assert "error: stage classifier: 13 file(s) are inputs of both math" in words, words
    assert "Traceback" not in words and not (tmp_path / "run" / "classifier" / "model.bin").exists()


def test_an_input_given_twice_is_read_once_and_said(page_folders):
    from classifiers.cli import load_training_data

    math, nonmath = page_folders["math"], page_folders["nonmath"]
    data = load_training_data([math, Path(str(math) + "/"), math / "m0.html"], [nonmath], [], 3.0)
    assert len(data.positives) == 12 and len(data.negatives) == 12
    assert data.skipped["given_twice"]["n"] == 13
    assert data.skipped["empty_text"] == {"n": 1, "examples": ["blank.html"]}


def test_train_help_names_the_files_a_training_writes(page_folders, tmp_path, monkeypatch):
    """`-o c/m.bin` writes c/m.card.json and c/m.train-pages.tsv (suffix replaced), as --help says."""
    from mathmix.cli import app

    words = " ".join(CliRunner().invoke(app, ["classifier", "train", "--help"]).output.split())
    assert "c/m.card.json" in words and "c/m.train-pages.tsv" in words, words
    assert "MODEL.card.json" not in words and "MODEL.train-pages.tsv" not in words, words
    monkeypatch.chdir(tmp_path)
    args = _train_args(Path("c/m.bin"), "-p", str(page_folders["math"]), "-n", str(page_folders["nonmath"]))
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["m.bin", "m.card.json", "m.train-pages.tsv"]


def test_pages_with_no_text_are_counted_in_the_card_and_the_summary(page_folders, tmp_path):
    from mathmix.cli import app

    out = tmp_path / "m.bin"
    args = _train_args(out, "-p", str(page_folders["math"]), "-n", str(page_folders["nonmath"]))
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    card = json.loads(out.with_suffix(".card.json").read_text())
    assert card["counts"]["negative_docs"] == 12
    assert card["counts"]["skipped"] == {"empty_text": {"n": 1, "examples": ["blank.html"]}}
    assert "1 empty_text (blank.html)" in " ".join(result.output.split())


def test_page_and_archive_kinds_are_the_web_readers():
    from classifiers.pages import ARCHIVE_SUFFIXES, PAGE_SUFFIXES
    from curate.readers import HTML_SUFFIXES, WARC_SUFFIXES

    assert set(PAGE_SUFFIXES) == set(HTML_SUFFIXES) and set(ARCHIVE_SUFFIXES) == set(WARC_SUFFIXES)


def test_wet_records_are_read_as_the_text_they_are(tmp_path):
    import io

    from warcio.warcwriter import WARCWriter

    text = "if a<b and b>c then\nthe theorem holds for every integer x"
    path = tmp_path / "crawl.warc.wet.gz"
    with path.open("wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        record = writer.create_warc_record(
            "https://w.org/1", "conversion", payload=io.BytesIO(text.encode()), warc_content_type="text/plain"
        )
        writer.write_record(record)
    docs = read_input(path)
    assert len(docs) == 1 and "a<b and b>c" in docs[0].text and "then\nthe theorem" in docs[0].text


def _eval_json(model: Path, *args: str) -> tuple[int, str, dict | None]:
    from mathmix.cli import app

    result = CliRunner().invoke(app, ["classifier", "eval", str(model), *args, "--json"])
    words = " ".join(result.output.split())
    last = result.output.strip().splitlines()[-1] if result.output.strip() else ""
    return result.exit_code, words, json.loads(last) if last.startswith("{") else None


def test_eval_leaves_out_training_pages_by_content_or_origin_not_by_name(page_folders, tmp_path):
    """20 never-trained pages copied under training pages' names all vanished ("0 non-math; left out as seen")."""
    from mathmix.cli import app

    model = tmp_path / "m.bin"
    args = _train_args(model, "-p", str(page_folders["math"]), "-n", str(page_folders["nonmath"]))
    assert CliRunner().invoke(app, [*args, "--holdout", "0"]).exit_code == 0
    fresh_math = tmp_path / "fresh" / "math"
    fresh_math.mkdir(parents=True)
    for i, text in enumerate(_docs(3, 70)):
        (fresh_math / f"f{i}.html").write_text(_page(text))
    rng = random.Random(71)
    words = "the ferry timetable harbour crowd garden museum opening hours tickets".split()
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    for i in range(12):  # new pages under the training pages' names
        (renamed / f"n{i}.html").write_text(_page(" ".join(rng.choices(words, k=40))))
    copied = (
        page_folders["nonmath"] / "n0.html"
    )  # a training page under a new name: its content was trained on
    (renamed / "copy-of-n0.html").write_bytes(copied.read_bytes())
    code, out, metrics = _eval_json(model, "--math", str(fresh_math), "--nonmath", str(renamed))
    assert code == 0, out
    assert metrics["n_nonmath"] == 12 and metrics["n_math"] == 3, out
    assert isinstance(metrics["precision"], float)
    # The training folder itself: left out whole (by origin, as by content), so --nonmath is refused.
    code, out, _ = _eval_json(model, "--math", str(fresh_math), "--nonmath", str(page_folders["nonmath"]))
    assert code == 2 and "nothing to evaluate from --nonmath: all 12 documents" in out, out
    assert "precision" not in out


def test_eval_reads_training_pages_files_of_two_columns_as_before(page_folders, tmp_path):
    """A train-pages.tsv written before origins (page, content key) still leaves out pages by name."""
    from classifiers.evaluate import training_keys, unseen

    pages = tmp_path / "old.train-pages.tsv"
    pages.write_text("n0.html\tabc\nhttps://a.org/1\t0123456789abcdef\n")
    keys = training_keys(tmp_path / "old.bin")
    assert keys.names == {"n0.html", "https://a.org/1"} and keys.contents == {"abc", "0123456789abcdef"}
    docs = read_input(page_folders["nonmath"])
    kept, n_seen = unseen(docs, keys)
    assert n_seen == 1 and "n0.html" not in {d.page for d in kept}
    assert unseen(docs, training_keys(tmp_path / "none.bin")) == (docs, 0)


def test_a_bad_line_in_a_folder_drops_that_line_not_the_file(tmp_path):
    """One bad line made a whole JSONL file of a folder a bad_file (its good rows unread), where rewrite counts
    the line as a bad_record; a file given as the input is still refused at its first bad line."""
    from classifiers.data import InputError, Skipped

    folder = tmp_path / "in"
    folder.mkdir()
    texts = _docs(4, 9)
    lines = [json.dumps({"text": texts[0]}), "{cut", "[1, 2]", json.dumps({"text": texts[1]}), ""]
    (folder / "mixed.jsonl").write_text("\n".join(lines))
    gz_lines = [json.dumps({"text": texts[2]}).encode(), b"\xff\xfe", json.dumps({"text": texts[3]}).encode()]
    (folder / "more.jsonl.gz").write_bytes(gzip.compress(b"\n".join(gz_lines) + b"\n"))
    (folder / "all_bad.jsonl").write_text("{nope\n{nope\n")
    skipped = Skipped()
    docs = read_input(folder, skipped)
    assert sorted(d.text for d in docs) == sorted(texts)
    found = skipped.as_dict()
    assert found["bad_record"]["n"] == 3, found
    assert found["bad_record"]["examples"] == [
        "mixed.jsonl line 2: not valid JSON (Expecting property name enclosed in double quotes)",
        "mixed.jsonl line 3: not a JSON object",
        "more.jsonl.gz line 2: not UTF-8 text",
    ]
    assert found["bad_file"] == {"n": 1, "examples": ["all_bad.jsonl: line 1: not valid JSON (Expecting "
                                                      "property name enclosed in double quotes)"]}  # fmt: skip
    with pytest.raises(InputError, match="mixed.jsonl:2: not valid JSON"):
        read_input(folder / "mixed.jsonl")
