"""Language ID on prose only, the math prefilter, the quality rules and the URL blocklist."""

from __future__ import annotations

from datatrove.data import Document

from curate.filters import MathQualityFilter, UrlBlocklistFilter
from curate.lid import LidModel, MathLanguageFilter, lid_model_path, strip_math
from curate.prefilter import MathPrefilter, html_marker_counts, math_signal_score

MATH_EN = (
    "We now prove that the sum converges. $$\\sum_{n=1}^{\\infty} \\frac{1}{n^2} = \\frac{\\pi^2}{6}$$ "
    "Recall that \\(a_n \\le b_n\\) implies the comparison test applies, so the series of $1/n^2$ is bounded."
)


def test_lid_model_ships_in_the_wheel():
    assert lid_model_path().name == "lid.176.ftz" and lid_model_path().stat().st_size > 100_000


def test_strip_math_removes_formulas_only():
    text = strip_math(MATH_EN)
    assert "\\sum" not in text and "\\le" not in text and "comparison test" in text


def test_language_filter_keeps_math_english_and_drops_german():
    step = MathLanguageFilter(threshold=0.65)
    en = Document(text=MATH_EN * 3, id="en")
    de = Document(text="Die Stadt baut in diesem Sommer neue Radwege entlang der Hauptstraße. " * 3, id="de")
    assert step.filter(en) is True and en.metadata["lang"] == "en" and en.metadata["lang_score"] >= 0.65
    assert step.filter(de) == (False, "language") and de.metadata["lang"] == "de"


def test_formula_only_text_is_undetermined():
    assert LidModel().predict("$$x^2+y^2=z^2$$ $a+b$") == ("und", 0.0)


def test_prefilter_scores_tex_above_prices():
    assert math_signal_score(MATH_EN) >= 1.0
    prices = "The council approved a $60 million budget. Tickets cost $5 and $12 for adults, $3.50 for kids."
    assert math_signal_score(prices) < 1.0
    step = MathPrefilter()
    doc = Document(text=prices, id="p")
    assert step.filter(doc) == (False, "no_math_signal") and doc.metadata["prefilter_score"] < 1


def test_html_markers_count_math_markup():
    html = '<script type="math/tex">x^2</script><math><mi>x</mi></math><img src="/latex.php?latex=x">'
    counts = html_marker_counts(html)
    assert counts["mathjax_script"] == 1 and counts["mathml"] == 1 and counts["tex_image"] == 1


def test_quality_rules_name_their_reason():
    step = MathQualityFilter(min_words=5)
    assert step.filter(Document(text="too short", id="a")) == (False, "too_short")
    repeated = "\n".join(["buy now, limited offer today"] * 10)
    assert step.filter(Document(text=repeated, id="b")) == (False, "repeated_lines")
    symbols = "words here " + " ".join(["#@!%&*<>|" * 3] * 40)
    assert step.filter(Document(text=symbols, id="c")) == (False, "low_alpha_prose")
    assert step.filter(Document(text=MATH_EN, id="d")) is True


def test_blocklist_domains_and_prefixes(tmp_path):
    listing = tmp_path / "block.txt"
    listing.write_text("# spam\nspam.example\nhttps://ok.example/ads/\n")
    step = UrlBlocklistFilter(str(listing))

    def doc(url):
        return Document(text="x", id=url, metadata={"url": url})

    assert step.filter(doc("https://www.spam.example/a")) == (False, "blocklisted_url")
    assert step.filter(doc("https://ok.example/ads/1")) == (False, "blocklisted_url")
    assert step.filter(doc("https://ok.example/math")) is True
    assert UrlBlocklistFilter(None).filter(doc("https://spam.example/")) is True
