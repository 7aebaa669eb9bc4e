"""The web reader survives every bad record, counts it under a reason, and keeps provenance."""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from pathlib import Path

import pytest
from datatrove.executor import LocalPipelineExecutor

from curate.readers import WebPageReader, decode_html, input_files, is_binary
from curate.summary import summarize_logs


def _warc(path: Path, records: list[tuple[str, bytes, str]], status: str = "200 OK") -> None:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as handle:
        writer = WARCWriter(handle, gzip=path.name.endswith(".gz"))
        for url, body, ctype in records:
            http = StatusAndHeaders(status, [("Content-Type", ctype)], protocol="HTTP/1.1")
            writer.write_record(
                writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http)
            )


def _read(tmp_path: Path, inputs: list[str]) -> tuple[list, dict]:
    files = input_files(inputs)
    paths_file = tmp_path / "paths.txt"
    paths_file.write_text("".join(f.lstrip("/") + "\n" for f in files))
    docs: list = []

    def collect(data, rank=0, world_size=1):
        for doc in data:
            docs.append(doc)
            yield doc

    logs = tmp_path / "logs"
    LocalPipelineExecutor(
        [WebPageReader(str(paths_file), max_bytes=200_000), collect], logging_dir=str(logs)
    ).run()
    return docs, summarize_logs(logs)


def test_bad_records_are_counted_by_reason(tmp_path):
    page = b"<html><body><p>Hello world, a page about sets.</p></body></html>"
    _warc(
        tmp_path / "a.warc.gz",
        [
            ("https://ok.example/1", page, "text/html; charset=utf-8"),
            ("https://bad.example/empty", b"", "text/html"),
            ("https://bad.example/bin", b"\x00\x01\x02" * 100, "text/html"),
            ("https://bad.example/img", b"\x89PNG....", "image/png"),
            ("https://bad.example/huge", b"<p>" + b"a" * 300_000 + b"</p>", "text/html"),
            (
                "https://ok.example/latin1",
                "<p>café au lait</p>".encode("latin-1"),
                "text/html; charset=iso-8859-1",
            ),
        ],
    )
    docs, summary = _read(tmp_path, [str(tmp_path / "a.warc.gz")])
    assert summary["docs_in"] == 6
    assert summary["dropped"] == {"empty_page": 1, "binary_body": 1, "not_html": 1, "too_large": 1}
    assert summary["docs_in"] == len(docs) + sum(summary["dropped"].values())
    by_url = {d.metadata["url"]: d for d in docs}
    assert "café" in by_url["https://ok.example/latin1"].text
    meta = by_url["https://ok.example/1"].metadata
    assert meta["warc_offset"] == 0 and meta["warc_length"] > len(page)
    assert meta["record_id"].startswith("<urn:uuid:") and meta["charset"] == "utf-8"
    assert meta["content_type"] == "text/html" and meta["domain"] == "ok.example"


def test_truncated_gzip_member_is_counted_not_fatal(tmp_path):
    pages = [
        (f"https://ok.example/{i}", b"<p>page %d " % i + b"word " * 200 + b"</p>", "text/html")
        for i in range(5)
    ]
    full = tmp_path / "full.warc.gz"
    _warc(full, pages)
    data = full.read_bytes()
    clipped = tmp_path / "clipped.warc.gz"
    clipped.write_bytes(data[: int(len(data) * 0.7)])
    docs, summary = _read(tmp_path, [str(clipped)])
    assert 1 <= len(docs) < 5
    assert summary["dropped"] == {"truncated_record": 1}
    assert summary["docs_in"] == len(docs) + sum(summary["dropped"].values())


def test_every_shared_warc_file_is_read_without_a_crash(tmp_path, shared_data):
    files = sorted(str(p) for p in (shared_data / "warc").rglob("*") if p.is_file())
    docs, summary = _read(tmp_path, files)
    assert summary["docs_in"] == len(docs) + sum(summary["dropped"].values())
    urls = [d.metadata["url"] for d in docs]
    # ClueWeb09 (WARC/0.18): datatrove's WarcReader yields none of its 29 responses; this reader reads them.
    assert sum("clueweb" in d.metadata["source_file"] for d in docs) >= 20
    # clipped.warc.gz: its one record is cut short; it is counted, not kept, and nothing crashes.
    assert summary["dropped"].get("truncated_record", 0) >= 1
    assert len(urls) >= 30


def test_html_folders_and_jsonl(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "a.html").write_text("<p>alpha</p>")
    (folder / "b.htm").write_bytes(b"")
    rows = [{"html": "<p>one</p>", "url": "https://j.example/1"}, {"nohtml": 1}, "not json"]
    with gzip.open(tmp_path / "pages.jsonl.gz", "wt") as handle:
        for row in rows:
            handle.write((json.dumps(row) if not isinstance(row, str) else row) + "\n")
    docs, summary = _read(tmp_path, [str(folder), str(tmp_path / "pages.jsonl.gz")])
    assert sorted(d.text for d in docs) == ["<p>alpha</p>", "<p>one</p>"]
    assert summary["dropped"] == {"bad_record": 2, "empty_page": 1}
    assert summary["docs_in"] == 5


def test_missing_input_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.warc"):
        input_files([str(tmp_path / "nope.warc")])


def test_decode_and_binary_helpers():
    assert decode_html("naïve".encode(), None) == ("naïve", "utf-8")
    assert decode_html("naïve".encode("cp1252"), None)[0] == "naïve"
    assert decode_html(b'<meta charset="koi8-r">' + "мир".encode("koi8-r"), None)[1] == "koi8-r"
    assert is_binary(b"%PDF-1.4 ...") and is_binary(b"ab\x00cd") and not is_binary(b"<html>")


def test_reader_resumes_after_a_malformed_record(tmp_path):
    good = tmp_path / "good.warc"
    _warc(good, [(f"https://ok.example/{i}", b"<p>page %d</p>" % i, "text/html") for i in range(2)])
    data = good.read_bytes()
    cut = data.index(b"WARC/1", 10)  # start of the second record
    garbage = b"WARC/1.0\r\nWARC-Type: response\r\nContent-Length: 12\r\n\r\nnot http at all\r\n\r\n"
    mixed = tmp_path / "mixed.warc"
    mixed.write_bytes(data[:cut] + garbage + data[cut:])
    docs, summary = _read(tmp_path, [str(mixed)])
    assert [d.metadata["url"] for d in docs] == ["https://ok.example/0", "https://ok.example/1"]
    assert set(summary["dropped"]) == {
        "warc_read_error"
    }  # the malformed region, counted; nothing lost after it
    second = docs[1].metadata
    assert mixed.read_bytes()[second["warc_offset"] :].startswith(b"WARC/1")


def test_reader_drops_are_written_to_rejects_with_their_reason(tmp_path):
    from datatrove.pipeline.writers import ParquetWriter

    _warc(
        tmp_path / "a.warc.gz",
        [
            ("https://ok.example/1", b"<p>fine</p>", "text/html"),
            ("https://bad.example/img", b"\x89PNG....", "image/png"),
            ("https://bad.example/bin", b"\x00\x01" * 50, "text/html"),
        ],
    )
    paths_file = tmp_path / "paths.txt"
    paths_file.write_text(str(tmp_path / "a.warc.gz").lstrip("/") + "\n")
    rejects = ParquetWriter(str(tmp_path / "rejects"), output_filename="${rank}.parquet")
    reader = WebPageReader(str(paths_file), exclusion_writer=rejects)
    kept = list(reader.run())
    assert [d.metadata["url"] for d in kept] == ["https://ok.example/1"]
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "rejects").to_pylist()
    got = sorted((r["metadata"]["url"], r["metadata"]["filter_reason"]) for r in rows)
    assert got == [("https://bad.example/bin", "binary_body"), ("https://bad.example/img", "not_html")]


def _html_rows(n: int, tag: str = "p") -> list[dict]:
    return [{"html": f"<{tag}>page {i}</{tag}>", "url": f"https://j.example/{tag}{i}"} for i in range(n)]


def test_json_files_hold_an_array_or_one_object(tmp_path):
    rows = [*_html_rows(2), "not an object", {"nohtml": 1}]
    (tmp_path / "arr.json").write_text(json.dumps(rows))
    (tmp_path / "pretty.json").write_text(json.dumps(rows, indent=1))
    (tmp_path / "one.json").write_text(json.dumps(_html_rows(1, "b")[0], indent=2))
    (tmp_path / "lines.json").write_text("".join(json.dumps(r) + "\n" for r in _html_rows(2, "i")))
    docs, summary = _read(
        tmp_path, [str(tmp_path / n) for n in ("arr.json", "pretty.json", "one.json", "lines.json")]
    )
    assert summary["docs_in"] == 4 + 4 + 1 + 2
    assert summary["dropped"] == {"bad_record": 4}
    assert sorted(d.text for d in docs) == sorted(
        ["<p>page 0</p>", "<p>page 1</p>"] * 2 + ["<b>page 0</b>", "<i>page 0</i>", "<i>page 1</i>"]
    )
    by_file = {(Path(d.metadata["source_file"]).name, d.metadata["warc_offset"]) for d in docs}
    assert ("pretty.json", 1) in by_file  # a record's position: its index in the array


def test_damaged_json_and_gzip_files_are_read_up_to_the_damage(tmp_path):
    lines = "".join(json.dumps(r) + "\n" for r in _html_rows(400))
    packed = gzip.compress(lines.encode())
    (tmp_path / "a_cut.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    (tmp_path / "b_plain.jsonl.gz").write_text(lines)  # not gzipped at all: read as what it is
    garbled = bytearray(packed)
    garbled[len(packed) // 2 : len(packed) // 2 + 64] = b"\xff" * 64
    (tmp_path / "c_garbled.jsonl.gz").write_bytes(bytes(garbled))
    (tmp_path / "d_cut.json").write_text(json.dumps(_html_rows(3))[:-30])
    (tmp_path / "e_good.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _html_rows(3, "b")))
    docs, summary = _read(tmp_path, [str(tmp_path)])
    per_file = {}
    for doc in docs:
        name = Path(doc.metadata["source_file"]).name
        per_file[name] = per_file.get(name, 0) + 1
    assert 0 < per_file["a_cut.jsonl.gz"] < 400 and per_file["c_garbled.jsonl.gz"] < 400
    assert per_file["b_plain.jsonl.gz"] == 400 and per_file["e_good.jsonl"] == 3
    assert per_file["d_cut.json"] == 2
    # garbled lines read before the CRC check fails are bad records; each file's damage is counted once
    dropped = dict(summary["dropped"])
    assert dropped.pop("bad_record", 0) < 100 and dropped == {"truncated_record": 2, "damaged_file": 1}
    assert summary["docs_in"] == len(docs) + sum(summary["dropped"].values())


def test_provenance_fields_of_other_types_are_coerced_or_counted(tmp_path):
    rows = [
        {"html": "<p>a</p>", "url": 123},
        {"html": "<p>b</p>", "url": "https://ok.example/b", "date": 20240101, "id": 7},
        {"html": "<p>c</p>", "url": "http://[broken/c"},
        {"html": "<p>d</p>", "url": ["a"]},
        {"html": "<p>e</p>", "url": {"x": 1}},
        {"html": "<p>f</p>", "date": True},
        {"html": "<p>g</p>", "id": [1]},
    ]
    (tmp_path / "odd.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    docs, summary = _read(tmp_path, [str(tmp_path / "odd.jsonl")])
    assert summary["docs_in"] == 7 and summary["dropped"] == {"bad_record": 4}
    meta = {d.text: d.metadata for d in docs}
    assert meta["<p>a</p>"]["url"] == "123" and meta["<p>a</p>"]["domain"] is None
    assert meta["<p>b</p>"]["fetch_date"] == "20240101" and meta["<p>b</p>"]["record_id"] == "7"
    assert meta["<p>c</p>"]["url"] == "http://[broken/c" and meta["<p>c</p>"]["domain"] is None
    assert {d.id for d in docs if d.text == "<p>b</p>"} == {"7"}


def test_a_record_cut_off_after_its_headers_is_truncated_and_text_is_not_a_warc(tmp_path):
    good = tmp_path / "good.warc"
    _warc(good, [("https://ok.example/0", b"<p>page 0</p>", "text/html")])
    head = b"WARC/1.0\r\nWARC-Type: response\r\nContent-Length: 999999\r\n\r\n"
    (tmp_path / "c.warc").write_bytes(head + b"short")  # the review's file: no target URI either
    uri = b"WARC-Target-URI: https://cut.example/\r\n"
    (tmp_path / "d.warc").write_bytes(
        good.read_bytes() + head.replace(b"\r\nContent", b"\r\n" + uri + b"Content")
    )
    gz = tmp_path / "e.warc.gz"
    gz.write_bytes(gzip.compress(head + b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>cut"))
    (tmp_path / "f.warc.gz").write_bytes(b"hello world this is not a warc\n")
    for name, reason in (
        ("c.warc", "truncated_record"),
        ("d.warc", "truncated_record"),
        ("e.warc.gz", "truncated_record"),
        ("f.warc.gz", "warc_read_error"),
    ):
        (work := tmp_path / name.replace(".", "_")).mkdir()
        docs, summary = _read(work, [str(tmp_path / name)])
        assert summary["dropped"] == {reason: 1}, name
        assert summary["docs_in"] == len(docs) + 1 and len(docs) == (name == "d.warc"), name


def test_a_broken_link_in_an_input_folder_is_named_not_skipped_in_silence(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "page.html").write_text("<html><body><p>x</p></body></html>")
    (tmp_path / "in" / "gone.warc.gz").symlink_to(tmp_path / "nowhere.warc.gz")
    assert input_files([str(tmp_path / "in")]) == [str((tmp_path / "in" / "page.html").resolve())]
    assert "1 broken link(s) skipped" in capsys.readouterr().err


def test_an_empty_folder_or_a_zero_byte_file_among_the_inputs_is_said(tmp_path, capsys):
    """An empty input folder among others, or a 0-byte WARC, added 0 pages without a word (a zero-byte file still
    counted in input_files): a crawl sync that failed for one folder went unnoticed."""
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "a.html").write_text("<html><body><p>x</p></body></html>")
    (tmp_path / "empty").mkdir()
    (tmp_path / "zero.warc.gz").write_bytes(b"")
    files = input_files([str(tmp_path / "good"), str(tmp_path / "empty"), str(tmp_path / "zero.warc.gz")])
    assert len(files) == 2
    said = capsys.readouterr().err
    assert (
        f"{tmp_path / 'empty'} (no page file in it)" in said
        and f"{tmp_path / 'zero.warc.gz'} (0 bytes)" in said
    )
    input_files([str(tmp_path / "good")])
    assert "add no page" not in capsys.readouterr().err


def test_a_bom_page_in_a_warc_is_read_as_utf8_without_the_bom(tmp_path):
    page = "<html><body><p>Soit x ∈ ℝ, café au lait</p></body></html>"
    _warc(
        tmp_path / "a.warc",
        [("https://bom.example/", b"\xef\xbb\xbf" + page.encode(), "text/html; charset=latin1")],
    )
    docs, _ = _read(tmp_path, [str(tmp_path / "a.warc")])
    assert [(d.text, d.metadata["charset"]) for d in docs] == [(page, "utf-8")]


def test_unreadable_warc_records_are_named_in_one_warning_line_per_file(tmp_path):
    """A bad WARC record was counted under warc_read_error with no line naming its file: which of 1,000 WARCs
    is damaged could not be told. Each file with unreadable records now gets one warning (not one per record)
    naming it, the first one's offset and why, and how many more there are."""
    good = tmp_path / "good.warc"
    _warc(good, [(f"https://ok.example/{i}", b"<p>page %d</p>" % i, "text/html") for i in range(3)])
    data = good.read_bytes()
    second, third = data.index(b"WARC/1", 10), data.rindex(b"WARC/1")
    garbage = b"WARC/1.0\r\nWARC-Type: response\r\nContent-Length: 12\r\n\r\nnot http at all\r\n\r\n"
    mixed = tmp_path / "mixed.warc"
    mixed.write_bytes(data[:second] + garbage + data[second:third] + garbage + data[third:])
    docs, summary = _read(tmp_path, [str(mixed), str(good)])
    errors = summary["dropped"]["warc_read_error"]
    assert len(docs) == 6 and errors >= 2 and summary["dropped"] == {"warc_read_error": errors}
    log = (tmp_path / "logs" / "logs" / "task_00000.log").read_text()
    warnings = [line for line in log.splitlines() if "WARNING" in line and "warc_read_error" in line]
    assert len(warnings) == 1, log[-3000:]
    named = re.search(rf"{re.escape(str(mixed))}: offset (\d+): ", warnings[0])
    assert named and second - 4 <= int(named.group(1)) <= second, warnings  # the end of the last good record
    assert "Error: " in warnings[0] and f"(and {errors - 1} more unreadable records in it)" in warnings[0]
    assert str(good) not in log.split("WARNING", 1)[-1]


def _gzip_members(data: bytes) -> list[int]:
    """Where each gzip member of DATA starts."""
    starts, pos = [], 0
    while pos < len(data):
        inflate = zlib.decompressobj(31)
        inflate.decompress(data[pos:])
        starts.append(pos)
        pos = len(data) - len(inflate.unused_data)
    return starts


def _read_one(tmp_path: Path, name: str, data: bytes) -> tuple[list, dict]:
    (work := tmp_path / name.replace(".", "_")).mkdir()
    (work / name).write_bytes(data)
    return _read(work, [str(work / name)])


def test_a_bad_crc_in_a_member_loses_that_record_only(tmp_path, shared_data):
    """One gzip member per record, each of the 50 members of a real WARC with a bad CRC in turn: warcio raises, or
    cuts the record short, or (its data all read) says nothing, and after some it stopped quietly: 14 of 16 pages
    lost as one truncated_record, or 6 lost with no count at all. Now a damaged member costs one page at most
    (its own, or the next one, that warcio read its broken bytes into: warc_read_error), the records before and after
    are kept, and the counts balance."""
    data = (shared_data / "warc" / "resiliparse" / "warcfile.warc.gz").read_bytes()
    good, _ = _read_one(tmp_path, "good.warc.gz", data)
    ids = [d.id for d in good]
    starts = _gzip_members(data)
    assert len(starts) == 50 and len(ids) == 16
    ends = [*starts[1:], len(data)]
    for member in range(len(starts)):
        bad = bytearray(data)
        bad[ends[member] - 8] ^= 0xFF  # its CRC32
        docs, summary = _read_one(tmp_path, f"crc{member}.warc.gz", bytes(bad))
        dropped = sum(summary["dropped"].values())
        assert set(summary["dropped"]) <= {"warc_read_error"} and dropped <= 2, member
        assert summary["docs_in"] == len(docs) + dropped, member
        kept = [d.id for d in docs]
        assert len(kept) >= len(ids) - 1 and kept == [i for i in ids if i in kept], member


def test_a_warc_gzipped_as_one_stream_is_read_up_to_its_damage(tmp_path, shared_data):
    """`gzip x.warc` (one gzip stream, not one member per record): warcio refuses to read past the first record
    (non-chunked gzip), and the whole file was one warc_read_error, its 16 pages lost. It is now read through the
    decompressed stream: all of it when intact; with a bad CRC at its end (a byte wrong somewhere), the records
    read before the check fails are kept and the rest counted once as damaged_file; cut short, truncated_record."""
    chunked = (shared_data / "warc" / "resiliparse" / "warcfile.warc.gz").read_bytes()
    whole = gzip.compress(gzip.decompress(chunked))
    good, _ = _read_one(tmp_path, "chunked.warc.gz", chunked)
    docs, summary = _read_one(tmp_path, "whole.warc.gz", whole)
    assert len(good) == 16 and summary["dropped"] == {} and summary["docs_in"] == 16
    assert [(d.id, d.text) for d in docs] == [(d.id, d.text) for d in good]
    offset = docs[3].metadata["warc_offset"]  # an offset in the decompressed stream
    assert gzip.decompress(whole)[offset:].startswith(b"WARC/1")

    bad = bytearray(whole)
    bad[-8] ^= 0xFF  # the stream's CRC32
    for name, data, reason in (
        ("crc.warc.gz", bytes(bad), "damaged_file"),
        ("cut.warc.gz", whole[:-5000], "truncated_record"),
    ):
        damaged, summary = _read_one(tmp_path, name, data)
        assert summary["dropped"] == {reason: 1}, name
        assert summary["docs_in"] == len(damaged) + 1, name
        assert 10 <= len(damaged) < 16 and [d.id for d in damaged] == [d.id for d in good[: len(damaged)]], (
            name
        )
        log = (tmp_path / name.replace(".", "_") / "logs" / "logs" / "task_00000.log").read_text()
        assert f"{name}: offset " in log and f"counted as {reason}" in log, name


@pytest.mark.parametrize("prose", [False, True])
def test_a_page_quoting_a_warc_record_is_one_page_in_an_uncompressed_warc(tmp_path, prose):
    """A healthy `.warc` whose last page shows a WARC record (a spec page, a tutorial) is read as its pages only:
    the check for records after a clean pass once resumed inside that page's body and read the quoted record as
    a page (docs_in 4, a false warc_read_error and a warning naming a good file), or counted prose mentioning
    `WARC/1.0` as a non-document record."""
    quoted = (
        b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://phantom.example/\r\n"
        b"Content-Type: application/http; msgtype=response\r\nContent-Length: 60\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>phantom page</p>\r\n\r\n"
    )
    spec = b"<html><body><p>The format starts each record with WARC/1.0 and headers.</p></body></html>"
    if not prose:
        spec = b"<html><body><pre>\n" + quoted + b"</pre></body></html>"
    path = tmp_path / "a.warc"
    _warc(
        path,
        [
            ("http://example.com/1", b"<p>one</p>", "text/html"),
            ("http://example.com/spec", spec, "text/html"),
        ],
    )
    docs, summary = _read(tmp_path, [str(path)])
    assert [d.metadata["url"] for d in docs] == ["http://example.com/1", "http://example.com/spec"]
    assert summary["docs_in"] == 2 and not summary.get("dropped"), summary
    assert "non_document_records" not in (tmp_path / "logs" / "stats.json").read_text()


def test_an_uncompressed_warc_cut_off_after_a_quoted_record_is_one_truncated_page(tmp_path):
    """A `.warc` cut off inside a last page that quotes a WARC record: that page is one truncated_record. The
    check for a damaged gzip member (records after a record that ends early) ran on uncompressed files too, read
    the quoted record as a page and said 'its gzip member is damaged' of a file with no gzip."""
    quoted = (
        b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://phantom.example/\r\n"
        b"Content-Type: application/http; msgtype=response\r\nContent-Length: 60\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>phantom page</p>\r\n\r\n"
    )
    spec = b"<html><body><pre>\n" + quoted + b"</pre>" + b"<p>tail</p>" * 200 + b"</body></html>"
    path = tmp_path / "a.warc"
    _warc(
        path,
        [
            ("http://example.com/1", b"<p>one</p>", "text/html"),
            ("http://example.com/spec", spec, "text/html"),
        ],
    )
    path.write_bytes(path.read_bytes()[:-1000])  # cut off inside the spec page, after the quote
    docs, summary = _read(tmp_path, [str(path)])
    assert [d.metadata["url"] for d in docs] == ["http://example.com/1"]
    assert summary["docs_in"] == 2 and summary["dropped"] == {"truncated_record": 1}, summary
