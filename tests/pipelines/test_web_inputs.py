"""`mathmix web` on inputs of every kind it accepts, odd ones included: what comes out, and what is counted."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from mathmix.cli import app

PROOF = (
    "Inequalities and sums\n\n"
    "For all real numbers we know that if a<b and b>c then nothing follows about a and c.\n"
    "The sum of the first n integers is n(n+1)/2, and the integral of x^2 from 0 to 1 is 1/3.\n"
    "Line three of the proof: since x<y<z holds, we have x<z by transitivity of the order relation.\n"
    "Theorem. For every prime p the equation $x^{p} = \\frac{1}{3}$ has a solution; the lemma proves it.\n"
)
PAGE = (
    "<html><head><script src='mathjax.js'></script></head><body><article><h1>Quadratic equations</h1>"
    + "<p>The roots of <script type='math/tex'>ax^2+bx+c=0</script> are given by the quadratic formula, and "
    "we prove that the discriminant decides how many real solutions the equation has.</p>"
    * 4
    + "</article></body></html>"
)


def _web(inputs: list[Path], out: Path):
    result = CliRunner().invoke(app, ["web", *map(str, inputs), "-o", str(out)])
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").is_file() else None
    return result, summary


def _rows(out: Path) -> list[dict]:
    return [row for f in sorted((out / "data").glob("*.parquet")) for row in pq.read_table(f).to_pylist()]


def _balanced(summary: dict) -> bool:
    return summary["docs_in"] == summary["docs_out"] + sum(summary["dropped"].values())


def _page_rows(n: int) -> list[dict]:
    return [
        {"html": PAGE.replace("Quadratic", f"Quadratic {i}"), "url": f"https://j.example/{i}"}
        for i in range(n)
    ]


def test_wet_conversion_records_are_text_not_html(tmp_path):
    from warcio.warcwriter import WARCWriter

    wet = tmp_path / "mywet.warc.wet.gz"
    with wet.open("wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        writer.write_record(
            writer.create_warc_record(
                "http://example.com/ineq",
                "conversion",
                payload=io.BytesIO(PROOF.encode()),
                warc_content_type="text/plain",
            )
        )
    result, summary = _web([wet], tmp_path / "w")
    assert result.exit_code == 0, result.output
    [row] = _rows(tmp_path / "w")
    assert "if a<b and b>c then" in row["text"] and "since x<y<z holds, we have x<z" in row["text"]
    assert "Inequalities and sums\n\nFor all real numbers" in row["text"]  # lines kept
    assert "$x^{p} = \\frac{1}{3}$" in row["text"]  # the text pass of extracted pages: TeX kept as math
    assert row["content_type"] == "text/plain" and row["extractor"] == "plain-text"
