"""`mathmix web extract FILE.html... [--engine fast|clean]`: one JSON object per file."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from mathmix.cli import app

PAGE = (
    "<html><head><script src='mathjax.js'></script></head><body><article><h1>Roots</h1>"
    "<p>The roots of <script type='math/tex'>ax^2+bx+c=0</script> are given by the quadratic formula, which "
    "costs $0 to learn.</p><script type='math/tex; mode=display'>x=\\frac{-b\\pm\\sqrt{b^2-4ac}}{2a}</script>"
    "</article></body></html>"
)


def test_web_extract_prints_json_per_file(tmp_path):
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    a.write_text(PAGE, encoding="utf-8")
    b.write_bytes(
        b"<html><body><article><p>caf\xe9 \xff plain text page with words.</p></article></body></html>"
    )
    for engine in ("fast", "clean"):
        result = CliRunner().invoke(app, ["web", "extract", str(a), str(b), "--engine", engine])
        assert result.exit_code == 0, result.output
        rows = [json.loads(line) for line in result.output.splitlines() if line.strip()]
        assert [r["path"] for r in rows] == [str(a), str(b)]
        assert "$ax^2+bx+c=0$" in rows[0]["text"]
        assert "$$\nx=\\frac{-b\\pm\\sqrt{b^2-4ac}}{2a}\n$$" in rows[0]["text"]
        assert "\\$0" in rows[0]["text"]
        assert "plain text page" in rows[1]["text"]


def test_web_extract_rejects_unknown_engine_and_missing_file(tmp_path):
    page = tmp_path / "a.html"
    page.write_text(PAGE, encoding="utf-8")
    assert CliRunner().invoke(app, ["web", "extract", str(page), "--engine", "slow"]).exit_code != 0
    assert CliRunner().invoke(app, ["web", "extract", str(tmp_path / "missing.html")]).exit_code != 0
