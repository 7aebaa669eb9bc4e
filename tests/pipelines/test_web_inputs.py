"""`mathmix web` on inputs of every kind it accepts, odd ones included: what comes out, and what is counted."""

from __future__ import annotations

import gzip
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
    "<html><head><script src='mathjax.js'></script></head><body><article><h1>Quadratic equations NUM</h1>"
    + "".join(
        f"<p>Step {i}: the roots of <script type='math/tex'>ax^{i}+bx+c=0</script> are given by the quadratic "
        "formula, and we prove that the discriminant decides how many real solutions the equation has.</p>"
        for i in range(4)
    )
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


def _page_rows(n: int, name: str) -> list[dict]:
    return [
        {"html": PAGE.replace("NUM", f"{name}{i}"), "url": f"https://j.example/{name}{i}"} for i in range(n)
    ]


def _jsonl(rows: list) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


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


def test_a_json_array_of_pages_is_read_as_its_records(tmp_path):
    (tmp_path / "arr.json").write_text(json.dumps(_page_rows(3, "a")))
    (tmp_path / "arr_pretty.json").write_text(json.dumps(_page_rows(3, "b"), indent=1))
    result, summary = _web([tmp_path / "arr.json", tmp_path / "arr_pretty.json"], tmp_path / "w")
    assert result.exit_code == 0, result.output
    assert summary["docs_in"] == 6 and summary["docs_out"] == 6 and _balanced(summary)
    assert sorted(r["url"] for r in _rows(tmp_path / "w")) == [
        f"https://j.example/{n}{i}" for n in "ab" for i in range(3)
    ]


def test_a_damaged_gzip_is_counted_and_the_run_goes_on(tmp_path):
    packed = gzip.compress(_jsonl(_page_rows(60, "c")).encode())
    (tmp_path / "cut.jsonl.gz").write_bytes(packed[: len(packed) * 2 // 3])
    (tmp_path / "notgz.jsonl.gz").write_text(_jsonl(_page_rows(2, "n")))
    (tmp_path / "good.jsonl").write_text(_jsonl(_page_rows(2, "g")))
    files = [tmp_path / n for n in ("cut.jsonl.gz", "notgz.jsonl.gz", "good.jsonl")]
    result, summary = _web(files, tmp_path / "w")
    assert result.exit_code == 0, result.output
    assert summary["dropped"] == {"truncated_record": 1} and _balanced(summary)
    urls = {r["url"] for r in _rows(tmp_path / "w")}
    assert {
        "https://j.example/n0",
        "https://j.example/n1",
        "https://j.example/g0",
        "https://j.example/g1",
    } <= urls
    assert 4 < summary["docs_out"] < 64


def test_provenance_fields_of_other_types_do_not_crash_the_run(tmp_path):
    rows = _page_rows(4, "t")
    rows[0]["url"], rows[1]["url"], rows[2]["date"], rows[3]["id"] = 123, ["a"], 20240101, {"k": 1}
    (tmp_path / "odd.jsonl").write_text(_jsonl(rows))
    result, summary = _web([tmp_path / "odd.jsonl"], tmp_path / "w")
    assert result.exit_code == 0, result.output
    assert summary["dropped"] == {"bad_record": 2} and summary["docs_out"] == 2
    got = {r["url"]: r["fetch_date"] for r in _rows(tmp_path / "w")}
    assert got == {"123": None, "https://j.example/t2": "20240101"}


def test_an_unfinished_folder_of_the_earlier_reader_is_refused_by_name(tmp_path):
    """Pages read by mathmix-web/1 (no BOM rule, no gzip resync, StackExchange chrome kept) and by /2 must not
    mix in one output: a web folder of the earlier reader with unfinished tasks is refused, naming both versions;
    one of the same reader resumes; a finished one (one reading) is kept, as a finished job's rerun always was."""
    from pipelines.web import EXTRACTION

    pages = tmp_path / "pages.jsonl"
    pages.write_text(_jsonl(_page_rows(3, "v")))
    out = tmp_path / "web"
    result, summary = _web([pages], out)
    assert result.exit_code == 0 and summary, result.output
    record = json.loads((out / "job.json").read_text())
    assert record["extraction"] == EXTRACTION
    del record["extraction"]  # as the earlier reader wrote it
    (out / "job.json").write_text(json.dumps(record))
    kept, again = _web([pages], out)
    assert kept.exit_code == 0 and again == summary, kept.output
    assert "finished by an earlier reader" in " ".join(kept.output.split())
    assert "extraction" not in json.loads((out / "job.json").read_text())  # still says what read it

    def cut_short():
        (out / "summary.json").unlink()
        for marker in list((out / "logs" / "completions").iterdir())[1:]:
            marker.unlink()

    cut_short()
    refused, _ = _web([pages], out)
    assert refused.exit_code != 0
    said = " ".join(refused.output.split())
    assert "mathmix-web/1" in said and EXTRACTION in said, refused.output
    (out / "job.json").write_text(json.dumps({**record, "extraction": EXTRACTION}))
    resumed, _ = _web([pages], out)
    assert resumed.exit_code == 0, resumed.output  # the same reader resumes


def test_another_setting_of_a_web_record_from_before_its_command_is_named(tmp_path):
    """A record from before web recorded its command and its reader, with another setting: the refusal names the
    setting. The reader's version, recorded since, made it read as another command's folder."""
    pages = tmp_path / "pages.jsonl"
    pages.write_text(_jsonl(_page_rows(3, "v")))
    out = tmp_path / "web"
    assert _web([pages], out)[0].exit_code == 0
    record = json.loads((out / "job.json").read_text())
    old = {k: v for k, v in record.items() if k not in ("command", "extraction")}
    old["settings"] = {**old["settings"], "min_words": 7}
    (out / "job.json").write_text(json.dumps(old))
    refused, _ = _web([pages], out)
    said = " ".join(refused.output.split())
    assert refused.exit_code != 0 and "min_words" in said and "another command" not in said, refused.output
