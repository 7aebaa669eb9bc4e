"""Write a corpus of bad input that every stage must survive: `python -m pipelines.bad_corpus OUT_DIR`.

Truncated gzip WARC, malformed WARC headers, binary bodies labelled text/html, invalid UTF-8, mixed charsets, a
50 MB page, 100k-deep nesting, entity-expansion bombs, empty records, plus a few good pages so that later stages
get input. The fault tests run the whole curation chain over it and check that nothing crashes and that every
dropped document is counted under a reason.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

GOOD = (
    "<html><body><article><h1>Completing the square</h1><p>We solve the quadratic equation by completing the "
    "square, which rewrites it in a form where the square root can be taken directly.</p><p>Starting from "
    "<script type='math/tex'>x^2 + 6x + 5 = 0</script> we add and subtract nine to get "
    "<script type='math/tex'>(x+3)^2 = 4</script>, so the two roots are minus one and minus five. The same method "
    "proves the quadratic formula for every equation with a nonzero leading coefficient. {n}</p></article></body></html>"
)


def _response(writer, url: str, body: bytes, ctype: str = "text/html; charset=utf-8") -> None:
    from warcio.statusandheaders import StatusAndHeaders

    http = StatusAndHeaders("200 OK", [("Content-Type", ctype)], protocol="HTTP/1.1")
    writer.write_record(
        writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http)
    )


def _raw_record(headers: list[str], body: bytes) -> bytes:
    return ("\r\n".join(headers) + "\r\n\r\n").encode() + body + b"\r\n\r\n"


def write_bad_corpus(out: Path, big_page_mb: int = 50) -> dict[str, int]:
    """Write the bad-input files under OUT; returns {file name: number of response records written}."""
    from warcio.warcwriter import WARCWriter

    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}

    # 1. Good pages and hostile ones in one gzipped WARC.
    with (out / "hostile.warc.gz").open("wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        pages = [
            ("good-1", GOOD.format(n=1).encode()),
            ("good-2", GOOD.format(n=2).encode()),
            ("binary-labelled-html", b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 40),
            ("invalid-utf8", b"<html><body><p>" + b"\xff\xfe\xfa\xfb" * 5000 + b"</p></body></html>"),
            (
                "latin1-declared-utf8",
                "<p>Caf\u00e9 na\u00efve \u00e0 la carte, \u00bd price</p>".encode("latin-1"),
            ),
            ("cp1251-meta", '<meta charset="windows-1251"><p>Привет мир, это страница.</p>'.encode("cp1251")),
            ("deep-nesting", b"<div>" * 100_000 + b"deep text" + b"</div>" * 100_000),
            ("entity-bomb", _entity_bomb()),
            ("empty", b""),
            ("whitespace-only", b"   \n\t  "),
        ]
        for name, body in pages:
            _response(writer, f"https://bad.example/{name}", body)
        counts["hostile.warc.gz"] = len(pages)

    # 2. One page of BIG_PAGE_MB megabytes (dropped as too_large by the reader's byte cap).
    with (out / "big-page.warc.gz").open("wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        chunk = b"<p>" + b"lorem ipsum dolor sit amet " * 40 + b"</p>\n"
        body = b"<html><body>" + chunk * (big_page_mb * 1024 * 1024 // len(chunk)) + b"</body></html>"
        _response(writer, "https://bad.example/big", body)
        counts["big-page.warc.gz"] = 1

    # 3. A gzipped WARC cut in the middle of a member.
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=True)
    for i in range(6):
        _response(writer, f"https://bad.example/trunc-{i}", GOOD.format(n=100 + i).encode() * 5)
    data = buffer.getvalue()
    (out / "truncated.warc.gz").write_bytes(data[: int(len(data) * 0.6)])
    counts["truncated.warc.gz"] = 6

    # 4. Malformed WARC headers (uncompressed, written by hand).
    records = [
        _raw_record(["WARC/1.0", "WARC-Type: response", "Content-Length: 12"], b"not http at all"),
        _raw_record(
            ["WARC/1.0", "WARC-Type: response", "Content-Length: nan"], b"HTTP/1.1 200 OK\r\n\r\n<p>x</p>"
        ),
        b"GARBAGE LINE THAT IS NOT A WARC HEADER\r\n\r\n",
    ]
    (out / "malformed.warc").write_bytes(b"".join(records))
    counts["malformed.warc"] = len(records)
    return counts


def _entity_bomb() -> bytes:
    """A 'billion laughs' DOCTYPE: a parser that expands entities would build gigabytes."""
    lines = ['<?xml version="1.0"?>', "<!DOCTYPE lolz [", '<!ENTITY lol "lol">']
    for i in range(1, 10):
        prev = "lol" if i == 1 else f"lol{i - 1}"
        lines.append(f'<!ENTITY lol{i} "' + f"&{prev};" * 10 + '">')
    lines.append("]>")
    lines.append("<html><body><p>&lol9;</p></body></html>")
    return "\n".join(lines).encode()


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "bad-corpus")
    print(write_bad_corpus(target))
