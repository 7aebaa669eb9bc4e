"""Page bytes to text, charset labels read as browsers read them (WHATWG Encoding Standard): the web reader's
`decode_html` (`curate.readers` imports it from here, with `whatwg_encoding`)."""

from __future__ import annotations

import codecs
import re

_CHARSET_META = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_\-:.]+)""", re.I)
_CHARSET_HEADER = re.compile(r"charset\s*=\s*[\"']?([A-Za-z0-9_\-:.]+)", re.I)

# The WHATWG Encoding Standard's encodings (https://encoding.spec.whatwg.org/#names-and-labels): name, the Python
# codec that decodes it as browsers do, and its labels. Browsers read `gb2312` as GBK (whose decoder is gb18030's),
# `shift_jis` as windows-31j (cp932), `euc-kr` as windows-949 (cp949), `iso-8859-1` / `ascii` as windows-1252.
# Not here, so ignored as browsers ignore them: unknown labels, `replacement` (iso-2022-kr, hz-gb-2312...),
# x-user-defined and UTF-16 as a label: a UTF-16 body has NUL bytes and is dropped as binary_body before it is
# decoded, unless it starts with a UTF-16 byte order mark (`utf16_bom`), which browsers read before any label.
# UTF-32 is no web encoding (browsers do not read it): dropped as binary_body, its BOM (FF FE 00 00) too.
_WHATWG_ENCODINGS: tuple[tuple[str, str, str], ...] = (
    ("utf-8", "utf-8", "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8"),
    ("ibm866", "cp866", "866 cp866 csibm866 ibm866"),
    (
        "iso-8859-2",
        "iso8859-2",
        "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2",
    ),
    (
        "iso-8859-3",
        "iso8859-3",
        "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3",
    ),
    (
        "iso-8859-4",
        "iso8859-4",
        "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4",
    ),
    (
        "iso-8859-5",
        "iso8859-5",
        "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 iso_8859-5:1988",
    ),
    (
        "iso-8859-6",
        "iso8859-6",
        "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 iso-8859-6-e iso-8859-6-i "
        "iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987",
    ),
    (
        "iso-8859-7",
        "iso8859-7",
        "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 iso88597 iso_8859-7 "
        "iso_8859-7:1987 sun_eu_greek",
    ),
    (
        "iso-8859-8",
        "iso8859-8",
        "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 iso88598 iso_8859-8 "
        "iso_8859-8:1988 visual",
    ),
    ("iso-8859-8-i", "iso8859-8", "csiso88598i iso-8859-8-i logical"),
    ("iso-8859-10", "iso8859-10", "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6"),
    ("iso-8859-13", "iso8859-13", "iso-8859-13 iso8859-13 iso885913"),
    ("iso-8859-14", "iso8859-14", "iso-8859-14 iso8859-14 iso885914"),
    ("iso-8859-15", "iso8859-15", "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9"),
    ("iso-8859-16", "iso8859-16", "iso-8859-16"),
    ("koi8-r", "koi8-r", "cskoi8r koi koi8 koi8-r koi8_r"),
    ("koi8-u", "koi8-u", "koi8-ru koi8-u"),
    ("macintosh", "mac-roman", "csmacintosh mac macintosh x-mac-roman"),
    ("windows-874", "cp874", "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874"),
    ("windows-1250", "cp1250", "cp1250 windows-1250 x-cp1250"),
    ("windows-1251", "cp1251", "cp1251 windows-1251 x-cp1251"),
    (
        "windows-1252",
        "cp1252",
        "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 iso88591 iso_8859-1 "
        "iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252",
    ),
    ("windows-1253", "cp1253", "cp1253 windows-1253 x-cp1253"),
    (
        "windows-1254",
        "cp1254",
        "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 iso_8859-9:1989 l5 latin5 "
        "windows-1254 x-cp1254",
    ),
    ("windows-1255", "cp1255", "cp1255 windows-1255 x-cp1255"),
    ("windows-1256", "cp1256", "cp1256 windows-1256 x-cp1256"),
    ("windows-1257", "cp1257", "cp1257 windows-1257 x-cp1257"),
    ("windows-1258", "cp1258", "cp1258 windows-1258 x-cp1258"),
    ("x-mac-cyrillic", "mac-cyrillic", "x-mac-cyrillic x-mac-ukrainian"),
    ("gbk", "gb18030", "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk"),
    ("gb18030", "gb18030", "gb18030"),
    ("big5", "big5hkscs", "big5 big5-hkscs cn-big5 csbig5 x-x-big5"),
    ("euc-jp", "euc_jp", "cseucpkdfmtjapanese euc-jp x-euc-jp"),
    ("iso-2022-jp", "iso2022_jp_ext", "csiso2022jp iso-2022-jp"),
    ("shift_jis", "cp932", "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis"),
    (
        "euc-kr",
        "cp949",
        "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 ksc5601 ksc_5601 windows-949",
    ),
)
_ENCODING_LABELS = {
    label: (name, codec) for name, codec, labels in _WHATWG_ENCODINGS for label in labels.split()
}


def whatwg_encoding(label: str) -> tuple[str, str] | None:
    """(WHATWG encoding name, Python codec) for a charset label, as browsers read it: `GB2312` -> ("gbk",
    "gb18030"), `x-sjis` -> ("shift_jis", "cp932"), `latin1` -> ("windows-1252", "cp1252"). A label that is not
    WHATWG's but that Python knows as one of these encodings (`cp936`, `euc_kr`) is read as that encoding; any
    other label is None (ignored, as browsers ignore it; never a Python-only codec such as utf-7)."""
    label = label.strip().lower()
    if label in _ENCODING_LABELS:
        return _ENCODING_LABELS[label]
    try:
        python_name = codecs.lookup(label).name
    except LookupError:
        return None
    return _ENCODING_LABELS.get(python_name) or _ENCODING_LABELS.get(python_name.replace("_", "-"))


_UTF16_BOMS = ((codecs.BOM_UTF16_LE, "utf-16le", "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16be", "utf-16-be"))


def utf16_bom(body: bytes) -> tuple[str, str] | None:
    """(WHATWG name, Python codec) where BODY starts with a UTF-16 byte order mark (FF FE little-endian, FE FF
    big-endian), as browsers sniff it (WHATWG `decode`); None otherwise, and for UTF-32LE's FF FE 00 00 (UTF-32 is
    no web encoding). Looks at the first 4 bytes only."""
    if body.startswith(codecs.BOM_UTF32_LE):
        return None
    return next(((name, codec) for bom, name, codec in _UTF16_BOMS if body.startswith(bom)), None)


def decode_html(body: bytes, declared: str | None) -> tuple[str | None, str | None]:
    """Decode page bytes, reading charset labels as browsers do (`whatwg_encoding`).

    1. Bytes that are valid UTF-8 and not pure ASCII are UTF-8, whatever the label says: legacy-encoded text is
       practically never valid UTF-8, while UTF-8 pages labelled `gb2312` are common (saved pages, templates), and
       gb18030 or cp932 would decode them without an error, into mojibake.
    2. The declared charset (HTTP header, then `<meta>`), strictly.
    3. A declared charset that fails strictly, with the bad bytes replaced, where they are few (at most 1 character
       in 100, or 8): a GBK page with one broken character is GBK, not cp1252 mojibake. Charset `<name>-replace`.
    4. UTF-8, then windows-1252 (cp1252), strictly; last, UTF-8 with the bad bytes replaced (`utf-8-replace`).

    Returns (text, charset), the charset the WHATWG name of the encoding that decoded the page (`gbk` for a page
    labelled `gb2312`, `windows-1252` for `iso-8859-1`), or (None, None) when nothing decodes the bytes without
    a flood of errors.
    A byte order mark first wins over all of these, as in browsers (WHATWG `decode`: BOM sniffing comes before any
    label), and is not part of the text: UTF-8's (EF BB BF), UTF-16's (FF FE: `utf-16le`, FE FF: `utf-16be`; a bad
    code unit replaced, `utf-16le-replace`, a flood of them undecodable).
    """
    if body.startswith(codecs.BOM_UTF8):
        return _decode_utf8(body[len(codecs.BOM_UTF8) :])
    if utf16 := utf16_bom(body):
        return _decode_utf16(body[2:], *utf16)
    if not body.isascii():
        try:
            return body.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            pass
    labels = [declared] if declared else []
    meta = _CHARSET_META.search(body[:4096])
    if meta:
        labels.append(meta.group(1).decode("ascii", "ignore"))
    encodings = list(dict.fromkeys(e for e in map(whatwg_encoding, labels) if e))
    for name, codec in encodings:
        try:
            return body.decode(codec), name
        except UnicodeDecodeError:
            continue
    for name, codec in encodings:
        text = body.decode(codec, errors="replace")
        if text.count("\ufffd") <= max(8, len(text) // 100):
            return text, f"{name}-replace"
    for name, codec in (("utf-8", "utf-8"), ("windows-1252", "cp1252")):
        try:
            return body.decode(codec), name
        except UnicodeDecodeError:
            continue
    return _decode_utf8(body)


def _decode_utf8(body: bytes) -> tuple[str | None, str | None]:
    """UTF-8, strictly; else with the bad bytes replaced (`utf-8-replace`); (None, None) for a flood of them."""
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    text = body.decode("utf-8", errors="replace")
    if text.count("\ufffd") > max(16, len(text) // 50):
        return None, None
    return text, "utf-8-replace"


_CONTROL = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")  # control characters no text holds (not \t \n \f \r)


def _decode_utf16(body: bytes, name: str, codec: str) -> tuple[str | None, str | None]:
    """BODY (after its BOM) in UTF-16, strictly; else with bad code units (a lone surrogate, an odd last byte)
    replaced (`NAME-replace`), as browsers replace them; (None, None) for a flood of them, or of control
    characters (binary bytes after an FF FE by chance decode to valid code units, NULs among them)."""
    try:
        text, charset = body.decode(codec), name
    except UnicodeDecodeError:
        text, charset = body.decode(codec, errors="replace"), f"{name}-replace"
    limit = max(16, len(text) // 50)
    if text.count("\ufffd") > limit or len(_CONTROL.findall(text)) > limit:
        return None, None
    return text, charset
