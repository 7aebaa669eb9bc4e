"""Language ID scores text written without spaces: a Chinese or Japanese page is not labelled by its few English
lines (or `und` when it has none), and formula-heavy English is still scored on its prose."""

from __future__ import annotations

import pytest
from datatrove.data import Document

from curate.lid import LidModel, MathLanguageFilter, prose_lines

# A Chinese page on the quadratic formula, MathJax \(..\) inline, with one English sentence: only that sentence had
# 4+ space-separated words, so the page was scored on it and kept as English (en 0.97).
QUADRATIC_ZH = (
    "一元二次方程的求根公式\n"
    "对于方程 \\(ax^2+bx+c=0\\)，其中 \\(a\\neq 0\\)，它的两个根是\n"
    "\\[x=\\frac{-b\\pm\\sqrt{b^2-4ac}}{2a}\\]\n"
    "判别式 \\(\\Delta=b^2-4ac\\) 决定了根的个数：当 \\(\\Delta>0\\) 时有两个不相等的实数根。\n"
    "The quadratic formula gives both roots of any quadratic equation.\n"
)
QUADRATIC_JA = (
    "二次方程式の解の公式\n"
    "方程式 \\(ax^2+bx+c=0\\) の解は、判別式 \\(D=b^2-4ac\\) を使って求めることができます。\n"
    "\\(D>0\\) のとき、異なる二つの実数解をもちます。\n"
    "Proof of the quadratic formula by completing the square.\n"
)
QUADRATIC_TH = (
    "สมการกำลังสอง $ax^2+bx+c=0$ มีรากสองราก\nThe quadratic formula gives both roots of the equation.\n"
)


def test_unspaced_scripts_count_characters_as_words():
    from curate.lid import word_count

    assert word_count("the sum of two squares") == 5
    assert word_count("二次方程式") == 5 and word_count("第1章") == 3
    assert word_count("Copyright 2017 数学") == 4
    assert "判别式" in prose_lines(QUADRATIC_ZH) and "它的两个根是" in prose_lines(QUADRATIC_ZH)


@pytest.mark.parametrize(("text", "lang"), [(QUADRATIC_ZH, "zh"), (QUADRATIC_JA, "ja"), (QUADRATIC_TH, "th")])
def test_a_math_page_in_an_unspaced_script_with_one_english_line_is_not_english(text, lang):
    step = MathLanguageFilter()
    doc = Document(text=text, id=lang)
    assert step.filter(doc) == (False, "language")
    assert doc.metadata["lang"] == lang and doc.metadata["lang_score"] >= 0.65


def _warc_page_text(path, url: str) -> str:
    from warcio.archiveiterator import ArchiveIterator

    from curate.extract import extract_strict
    from curate.readers import decode_html

    with open(path, "rb") as stream:
        for record in ArchiveIterator(stream):
            if record.rec_type == "response" and record.rec_headers.get_header("WARC-Target-URI") == url:
                html, _ = decode_html(record.content_stream().read(), None)
                assert html is not None
                return extract_strict(html, url=url)
    raise AssertionError(f"{url} not in {path}")


@pytest.mark.parametrize(
    "url",
    [
        # its one scored line was "Copyright 2017-2023 ... All Rights Reserved.": en 0.758
        "http://041696.com/15477/list_6_4.html",
        # 6,389 characters of Chinese and no line of 4+ space-separated words: und 0.0
        "http://044545.com/topic/20200207/015849.html",
        "http://05925.net/index.php/vod/type/id/53.html",
    ],
)
def test_real_chinese_pages_are_labelled_chinese(shared_data, url):
    text = _warc_page_text(shared_data / "warc" / "resiliparse" / "warcfile.warc.gz", url)
    lang, score = LidModel().predict(text)
    assert lang == "zh" and score >= 0.65, (lang, score)


def test_english_math_pages_are_still_english(shared_data):
    """All 42 shared math pages are English and kept by the language filter at its default threshold."""
    from curate.extract import extract_strict
    from curate.readers import decode_html

    pages = sorted((shared_data / "html" / "math").glob("*.html"))
    assert len(pages) == 42
    model = LidModel()
    labels = {}
    for page in pages:
        html, _ = decode_html(page.read_bytes(), None)
        assert html is not None, page.name
        labels[page.name] = model.predict(extract_strict(html))
    assert all(lang == "en" and score >= 0.65 for lang, score in labels.values()), labels
