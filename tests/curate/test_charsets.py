"""Charset labels are read as browsers read them (WHATWG Encoding Standard): `gb2312` is GBK, `shift_jis` is
windows-31j, `euc-kr` is windows-949, `iso-8859-1` is windows-1252; a declared charset with a little damage is that
charset with the bad bytes replaced, not cp1252 mojibake or a dropped page."""

from __future__ import annotations

import pytest

from curate.readers import decode_html


def test_labels_map_to_the_encodings_browsers_use():
    from curate.readers import whatwg_encoding

    assert whatwg_encoding(" GB2312 ") == ("gbk", "gb18030")
    assert whatwg_encoding("x-sjis") == whatwg_encoding("Shift_JIS") == ("shift_jis", "cp932")
    assert whatwg_encoding("ks_c_5601-1987") == ("euc-kr", "cp949")
    assert whatwg_encoding("latin1") == whatwg_encoding("US-ASCII") == ("windows-1252", "cp1252")
    assert whatwg_encoding("cp936") == ("gbk", "gb18030")  # not a WHATWG label; Python's name for GBK
    # unknown to browsers, or decoded to nothing by them: ignored, never a Python-only codec
    assert whatwg_encoding("utf-7") is None and whatwg_encoding("iso-2022-kr") is None
    assert whatwg_encoding("no-such-charset") is None


def test_shift_jis_page_with_cp932_characters_is_not_mojibake():
    page = '<meta charset="shift_jis"><p>①二次方程式の解の公式</p>'
    assert decode_html(page.encode("cp932"), None) == (page, "shift_jis")


def test_gb2312_page_with_a_gbk_name_keeps_the_name():
    page = (
        '<meta http-equiv="Content-Type" content="text/html; charset=gb2312"><p>Professor 張偉 proved it.</p>'
    )
    text, charset = decode_html(page.encode("gbk"), None)
    assert (text, charset) == (page, "gbk")


def test_euc_kr_page_with_windows_949_syllables():
    page = "<p>똠방각하 수학 문제</p>"  # 똠: in windows-949 (UHC), not in EUC-KR proper
    assert decode_html(page.encode("cp949"), "euc-kr") == (page, "euc-kr")


def test_iso_8859_1_is_read_as_windows_1252():
    text, charset = decode_html("<p>Giro d’Italia, café</p>".encode("cp1252"), "iso-8859-1")
    assert (text, charset) == ("<p>Giro d’Italia, café</p>", "windows-1252")


def test_a_declared_charset_with_a_broken_character_is_kept_with_it_replaced():
    body = (
        '<meta charset="gbk"><p>一元二次方程的求根公式'.encode("gbk")
        + b"\xff"
        + "：判别式。</p>".encode("gbk")
    )
    text, charset = decode_html(body, None)
    assert charset == "gbk-replace" and text is not None
    assert text.count("\ufffd") == 1 and "一元二次方程的求根公式" in text and "判别式" in text


def test_a_declared_charset_that_fails_badly_is_not_forced():
    body = b'<meta charset="shift_jis"><p>' + bytes(range(0x80, 0x100)) * 4
    assert decode_html(body, None)[1] != "shift_jis-replace"


def test_utf8_bytes_labelled_gb2312_are_utf8():
    # gb18030 decodes UTF-8 Chinese without an error, into mojibake: valid UTF-8 wins over the label
    page = '<meta charset="gb2312"><p>一元二次方程的求根公式</p>'
    assert decode_html(page.encode(), None) == (page, "utf-8")


def test_real_gb2312_page_with_gbk_characters_is_read(shared_data):
    """096355.com declares gb2312 in its <meta> and holds GBK characters: it was dropped as undecodable."""
    from warcio.archiveiterator import ArchiveIterator

    url = "http://096355.com/video/11073.html?11073-0-2"
    with open(shared_data / "warc" / "resiliparse" / "warcfile.warc.gz", "rb") as stream:
        body = next(
            r.content_stream().read()
            for r in ArchiveIterator(stream)
            if r.rec_type == "response" and r.rec_headers.get_header("WARC-Target-URI") == url
        )
    text, charset = decode_html(body, None)
    assert charset == "gbk" and text is not None and "\ufffd" not in text
    assert sum("\u4e00" <= ch <= "\u9fff" for ch in text) > 100


@pytest.mark.parametrize(
    ("url", "charset"),
    [
        ("http://01spb.ru/company/", "windows-1251"),
        ("http://0755krk.com/76104/list_4_1.html", "gbk"),
        ("http://06.live-radsport.ch/tippspiel/stats_140_petzi.html", "windows-1252"),
    ],
)
def test_real_pages_in_other_charsets_still_decode(shared_data, url, charset):
    from warcio.archiveiterator import ArchiveIterator

    from curate.readers import _CHARSET_HEADER

    with open(shared_data / "warc" / "resiliparse" / "warcfile.warc.gz", "rb") as stream:
        for record in ArchiveIterator(stream):
            if record.rec_type == "response" and record.rec_headers.get_header("WARC-Target-URI") == url:
                declared = _CHARSET_HEADER.search(record.http_headers.get_header("Content-Type") or "")
                text, got = decode_html(
                    record.content_stream().read(), declared.group(1) if declared else None
                )
                assert got == charset and text is not None and "\ufffd" not in text
                return
    raise AssertionError(f"{url} not found")


@pytest.mark.parametrize(
    "declared, meta",
    [
        (None, ""),
        ("windows-1252", ""),
        (None, '<meta charset="iso-8859-1">'),
        ("gb2312", '<meta charset="gbk">'),
    ],
)
def test_a_utf8_bom_wins_over_the_labels_and_is_not_text(declared, meta):
    """A page whose bytes start with a UTF-8 byte order mark is UTF-8, whatever its header or <meta> says, as in
    browsers (WHATWG: BOM sniffing first). The BOM stayed in the text (U+FEFF first), and where the rest was not
    strict UTF-8 (one bad byte) the page was read in the declared charset: `ï»¿` and mojibake."""
    page = f"{meta}<p>Soit x ∈ ℝ, café</p>"
    body = b"\xef\xbb\xbf" + page.encode("utf-8")
    assert decode_html(body, declared) == (page, "utf-8")
    text, charset = decode_html(body + b"<p>\xff</p>", declared)  # one stray byte: replaced, still UTF-8
    assert (text, charset) == (page + "<p>\ufffd</p>", "utf-8-replace")
