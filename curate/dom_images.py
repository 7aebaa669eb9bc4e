"""Formula images -> LaTeX: TeX from the alt text, else from the image URL (latex.php, mimetex/mathtex, codecogs).

An image counts as a formula when its URL is a known TeX renderer or its class says latex/tex; its alt text is
used when it looks like TeX (renderers put the source there), else the TeX is decoded from the URL query; an
image with neither (a prose alt on an `equation`-class figure) is left alone.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit

_RENDERER_URL = re.compile(
    r"latex\.php|mimetex|mathtex|codecogs\.com/|/cgi-bin/[^?]*tex|chart\.apis?\.google(?:apis)?\.com/chart\?[^\"]*cht=tx"
    r"|latex\.artofproblemsolving\.com|/latex\?|render/math\?math=|math\.now\.sh|i\.upmath\.me/|/forkosh\.com/",
    re.I,
)
_FORMULA_CLASS = re.compile(r"(?:^|[\s_-])(?:latex|tex|math|formula|equation)(?:$|[\s_-])", re.I)
_CODECOGS_OPTS = re.compile(
    r"^(?:\s*\\(?:dpi\{\d+\}|bg_\w+|bg\{\w+\}|fn_\w+|inline|large|Large|LARGE|small|tiny|normal)(?![A-Za-z]))+"
)
_KEY_VALUE = re.compile(r"^[A-Za-z_]{1,16}=")
# Alt text that can only be TeX (a command or a braced script): the image is a formula whatever its URL.
_TEX_ALT = re.compile(r"\\[A-Za-z]{2,}|[_^]\{")
# A run of three words once TeX commands are taken out: a caption, not a formula (`\text{for all } x` is kept).
_TEX_CMD = re.compile(r"\\[A-Za-z]+\*?(?:\{[^{}]{0,200}\})?")
_PROSE_ALT = re.compile(r"(?<![A-Za-z])[A-Za-z]{3,}[,:;.]?\s+[A-Za-z]{2,}[,:;.]?\s+[A-Za-z]{2,}")
_HTML_TAG = re.compile(r"<[^<>]{0,200}>")
_GENERIC_ALT = {
    "",
    "image",
    "formula",
    "equation",
    "latex",
    "tex",
    "math",
    "img",
    "[tex]",
    "mathematical expression",
}
_WRAPPERS = (
    ("$$", "$$"),
    ("\\[", "\\]"),
    ("\\(", "\\)"),
    ("$", "$"),
    ("[tex]", "[/tex]"),
    ("[math]", "[/math]"),
)


# A superset of what image_tex accepts, matched in C so ordinary images never become Python objects.
_CANDIDATES = ", ".join(
    [
        f'img[{attr}*="{word}" i]'
        for attr in ("src", "data-src", "data-lazy-src")
        for word in ("tex", "math", "codecogs", "cht=tx", "forkosh")
    ]
    + [f'img[class*="{word}" i]' for word in ("tex", "math", "formula", "equation")]
    + ['img[alt*="\\\\"]', 'img[alt*="_{"]', 'img[alt*="^{"]', 'img[title*="\\\\"]']
)


def clean_tex(tex: str) -> tuple[str, bool]:
    """Strip HTML line breaks, renderer options and $/\\[ delimiters; returns (tex, display)."""
    tex = _HTML_TAG.sub(" ", tex).strip()
    display = False
    for left, right in _WRAPPERS:
        if len(tex) > len(left) + len(right) and tex.startswith(left) and tex.endswith(right):
            display = left in ("$$", "\\[")
            tex = tex[len(left) : -len(right)].strip()
            break
    tex = _CODECOGS_OPTS.sub("", tex).strip()
    if tex.startswith("\\displaystyle"):
        display = True
    return tex, display


def tex_from_url(src: str) -> str:
    """TeX carried by a formula-image URL ('' when none)."""
    parts = urlsplit(src)
    query = parts.query
    if not query:
        return ""
    params = parse_qs(query, keep_blank_values=True)
    for key in ("latex", "chl", "math", "tex", "formula", "eq"):
        if key in params and params[key][0]:
            return params[key][0]
    if _KEY_VALUE.match(query):
        return ""
    # codecogs / mimetex style: the whole query is the TeX; codecogs writes spaces as &space; and + as &plus;
    return unquote(query.replace("&space;", " ").replace("&plus;", "+"))


def _looks_like_tex(alt: str) -> bool:
    """Alt text that can be the formula: not generic, not a file name, not prose ("Figure 3: loss curve")."""
    return (
        alt.strip().lower() not in _GENERIC_ALT
        and not alt.lower().endswith((".png", ".gif", ".jpg", ".svg"))
        and _PROSE_ALT.search(_TEX_CMD.sub(" ", alt)) is None
    )


def image_tex(node) -> tuple[str, bool] | None:
    """(TeX, display) for a formula image, None for other images."""
    src = node.getattr("src") or node.getattr("data-src") or node.getattr("data-lazy-src") or ""
    classes = node.class_name or ""
    alt = node.getattr("alt") or node.getattr("title") or ""
    is_formula = (
        _RENDERER_URL.search(src) is not None
        or _FORMULA_CLASS.search(classes) is not None
        or _TEX_ALT.search(alt) is not None
    )
    if not is_formula:
        return None
    tex = alt if _looks_like_tex(alt) else tex_from_url(src)
    if not tex.strip():
        return None
    tex, display = clean_tex(tex)
    return tex, display or "display" in classes


def rewrite_images(tree, body, wrap_math, replace_node) -> None:
    """Replace formula images by sentinel-wrapped TeX."""
    for node in body.query_selector_all(_CANDIDATES).values():
        found = image_tex(node)
        if found is None:
            continue
        tex, display = found
        if tex:
            replace_node(tree, node, wrap_math(tex, display))
