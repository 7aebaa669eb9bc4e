"""A page with a UTF-16 byte order mark is UTF-16, as browsers read it (WHATWG BOM sniffing): it was dropped as
binary_body (its NUL bytes) by the web stage and `mathmix web extract`. UTF-32 is no web encoding: dropped still."""

from __future__ import annotations

import codecs
import io
import json
from pathlib import Path

from typer.testing import CliRunner

from curate.readers import decode_html
from mathmix.cli import app
from tests.curate.test_web_readers import _read

PAGE = "<html><head><meta charset='iso-8859-1'></head><body><p>Soit x ∈ ℝ, café 😀</p></body></html>"
LE = PAGE.encode("utf-16")  # FF FE on a little-endian machine
BE = codecs.BOM_UTF16_BE + PAGE.encode("utf-16-be")


def _warc(path: Path, records: list[tuple[str, bytes]]) -> None:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as handle:
        writer = WARCWriter(handle, gzip=False)
        for url, body in records:
            http = StatusAndHeaders(
                "200 OK", [("Content-Type", "text/html; charset=latin1")], protocol="HTTP/1.1"
            )
            writer.write_record(
                writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http)
            )


def test_a_utf16_bom_wins_over_the_labels():
    assert LE.startswith(codecs.BOM_UTF16_LE)
    assert decode_html(LE, "latin1") == (PAGE, "utf-16le")
    assert decode_html(BE, None) == (PAGE, "utf-16be")
    # a lone surrogate is replaced, as browsers do; a flood of bad code units is undecodable
    bad = codecs.BOM_UTF16_LE + "<p>a".encode("utf-16-le") + b"\x00\xd8" + "b</p>".encode("utf-16-le")
    assert decode_html(bad, None) == ("<p>a\ufffdb</p>", "utf-16le-replace")


def test_the_web_reader_keeps_utf16_bom_pages_and_drops_utf32_and_bomless_utf16(tmp_path):
    records = [
        ("https://x.example/le", LE),
        ("https://x.example/be", BE),
        ("https://x.example/utf32", PAGE.encode("utf-32")),  # FF FE 00 00: not UTF-16
        ("https://x.example/nobom", PAGE.encode("utf-16-le")),
    ]
    _warc(tmp_path / "a.warc", records)
    docs, summary = _read(tmp_path, [str(tmp_path / "a.warc")])
    got = sorted((d.metadata["url"], d.metadata["charset"], d.text) for d in docs)
    assert got == [("https://x.example/be", "utf-16be", PAGE), ("https://x.example/le", "utf-16le", PAGE)]
    assert summary["dropped"] == {"binary_body": 2}


def test_web_extract_reads_a_utf16_bom_file(tmp_path):
    page = tmp_path / "p.html"
    page.write_bytes(LE)
    result = CliRunner().invoke(app, ["web", "extract", str(page)])
    assert result.exit_code == 0, result.output
    assert "café" in json.loads(result.output.strip().splitlines()[-1])["text"]
    (tmp_path / "q.html").write_bytes(PAGE.encode("utf-32"))
    refused = CliRunner().invoke(app, ["web", "extract", str(tmp_path / "q.html")])
    assert refused.exit_code == 2 and "binary" in refused.output


def test_binary_bytes_after_an_ff_fe_by_chance_are_not_a_page():
    """FF FE then binary (small little-endian int32s: valid UTF-16 code units, NULs among them) was decoded into
    a page of control characters and dropped only by the language filter (before: binary_body)."""
    import random
    import struct

    from curate.charsets import decode_html

    rng = random.Random(1)
    body = b"\xff\xfe" + b"".join(struct.pack("<I", rng.randrange(1000)) for _ in range(1500))
    assert decode_html(body, None) == (None, None)
    page = "<html><body><p>Solve x + 1 = 2.\tThen check it.</p>\r\n</body></html>"
    assert decode_html(b"\xff\xfe" + page.encode("utf-16-le"), None) == (page, "utf-16le")
