"""MediaWiki chrome ("[edit]" after each heading, "Jump to navigation", "From Wikipedia, the free encyclopedia",
navboxes, categories) is removed by its elements on MediaWiki pages only; references, infobox and math stay."""

from __future__ import annotations

from pathlib import Path

import pytest
from resiliparse.parse.html import HTMLTree

from curate.dom_sites import drop_site_chrome
from curate.extract import extract

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TSNE = SHARED / "html" / "math" / "trafilatura__en.wikipedia.org.tsne.html"
CHROME = ("[edit]", "Jump to navigation", "Jump to search", "From Wikipedia, the free encyclopedia")

PAGE = """<html><head><meta name="generator" content="MediaWiki 1.41.0-wmf.1"></head><body>
<a class="mw-jump-link" href="#bodyContent">Jump to navigation</a>
<a class="mw-jump-link" href="#searchInput">Jump to search</a>
<h1>Heat equation</h1>
<div id="siteSub">From Wikipedia, the free encyclopedia</div>
<div id="contentSub"></div>
<div id="mw-content-text"><div class="mw-parser-output">
<table class="infobox"><tr><th>Field</th><td>Partial differential equations</td></tr></table>
<p>The heat equation is a parabolic partial differential equation that describes how heat spreads out
over time in a region of space, written with the Laplacian as
<span class="mwe-math-element"><math alttext="{\\displaystyle u_t = \\Delta u}"><semantics><mrow><mi>u</mi></mrow>
<annotation encoding="application/x-tex">{\\displaystyle u_t = \\Delta u}</annotation></semantics></math></span>
and studied since Fourier's work on the propagation of heat in solid bodies.</p>
<h2><span class="mw-headline">Statement</span><span class="mw-editsection"><span class="mw-editsection-bracket">[
</span><a href="?action=edit&amp;section=1">edit</a><span class="mw-editsection-bracket">]</span></span></h2>
<p>In mathematics and physics the heat equation describes the diffusion of heat in a body over time, and many
other diffusive processes obey the same equation with the same well-posedness and smoothing properties.</p>
<h2><span class="mw-headline">References</span><span class="mw-editsection">[<a href="#">edit</a>]</span></h2>
<div class="mw-references-wrap"><ol class="references"><li>Cannon, John Rozier (1984). The One-Dimensional
Heat Equation. Addison-Wesley.</li></ol></div>
<div class="navbox"><a href="#">Navbox link: Parabolic equations list</a></div>
<div class="mw-authority-control">Authority control: National libraries Germany</div>
</div></div>
<div class="printfooter">Retrieved from "https://en.wikipedia.org/wiki/Heat_equation"</div>
<div id="catlinks">Categories: Parabolic partial differential equations</div>
</body></html>"""


def test_snippet_loses_chrome_keeps_content():
    text = extract(PAGE)
    assert not [c for c in CHROME if c in text], text
    assert "## Statement\n" in text + "\n" and "edit" not in text
    for gone in ("Navbox link", "Authority control", "Retrieved from", "Categories:"):
        assert gone not in text, gone
    assert "\\displaystyle u_t = \\Delta u" in text  # the math stays
    assert "Cannon, John Rozier" in text  # references are content
    assert "Partial differential equations" in text  # the infobox stays


def test_other_pages_are_untouched():
    # the same class names without the article container #mw-content-text: nothing removed
    page = PAGE.replace('<div id="mw-content-text">', "<div>").replace("MediaWiki", "WordPress")
    assert drop_site_chrome(HTMLTree.parse(page)) == 0
    assert drop_site_chrome(HTMLTree.parse(PAGE)) > 0


def test_real_wikipedia_page():
    if not TSNE.is_file():
        pytest.skip(f"{TSNE.name} not found under {SHARED}: ../shared/data not found")
    html = TSNE.read_text(encoding="utf-8", errors="replace")
    text = extract(html)
    assert not [c for c in CHROME if c in text]
    assert "## Details\n" in text and "## References\n" in text
    assert "van der Maaten, L.J.P.; Hinton, G.E." in text  # references stay
    # all 34 formulas stay, each as ${\displaystyle ...}$
    assert text.count("${\\displaystyle") == 34
