"""Data tables -> Markdown rows, written into the DOM as lines separated by <br> so both engines keep them.

Tables with merged cells (rowspan/colspan > 1) are kept as minimal HTML (cell text, rowspan/colspan only) on
one line, since Markdown cannot express merged cells (the convention of llm-webkit / MinerU-HTML gold). Only
tables that hold data are rewritten: a table with block content in its cells (paragraphs, lists, nested
tables, headings) is a layout table, and flattening it into one row per line would wreck its paragraphs.
"""

from __future__ import annotations

_BLOCK_SELECTOR = "table, p, ul, ol, h1, h2, h3, h4, h5, h6, blockquote, pre, div > div"
MAX_CELL_CHARS = 20_000


def _cell_text(cell) -> str:
    text = " ".join((cell.text or "").split())
    return text.replace("|", "\\|")[:MAX_CELL_CHARS]


def _children(node):
    child = node.first_element_child
    while child is not None:
        yield child
        child = child.next_element_sibling


def table_rows(table) -> list[list[str]]:
    """Cell texts per row of a table (walks children: collections of big tables are slow to iterate)."""
    rows = []
    for section in _children(table):
        trs = _children(section) if section.tag in ("tbody", "thead", "tfoot") else (section,)
        for tr in trs:
            if tr.tag != "tr":
                continue
            cells = [_cell_text(c) for c in _children(tr) if c.tag in ("td", "th")]
            if cells:
                rows.append(cells)
    return rows


def _span(cell, name: str) -> str:
    value = (cell.getattr(name) or "").strip()
    return f' {name}="{value}"' if value.isdigit() and value != "1" else ""


def to_html(table) -> str:
    """One-line minimal HTML of a table with merged cells: rows, cells, their text and spans."""
    out = ["<table>"]
    for section in _children(table):
        trs = _children(section) if section.tag in ("tbody", "thead", "tfoot") else (section,)
        for tr in trs:
            if tr.tag != "tr":
                continue
            out.append("<tr>")
            for c in _children(tr):
                if c.tag in ("td", "th"):
                    text = " ".join((c.text or "").split())[:MAX_CELL_CHARS]
                    text = text.replace("<", "&lt;").replace(">", "&gt;")
                    out.append(f"<{c.tag}{_span(c, 'rowspan')}{_span(c, 'colspan')}>{text}</{c.tag}>")
            out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _has_merged_cells(table) -> bool:
    for cell in table.query_selector_all("td[rowspan], td[colspan], th[rowspan], th[colspan]").values():
        if _span(cell, "rowspan") or _span(cell, "colspan"):
            return True
    return False


def to_markdown(rows: list[list[str]]) -> list[str]:
    """Markdown table lines: header row, separator, body rows (padded to the widest row)."""
    width = max(len(r) for r in rows)
    padded = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(padded[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(r) + " |" for r in padded[1:]]
    return lines


def _is_layout(table) -> bool:
    return table.query_selector(_BLOCK_SELECTOR) is not None


def _caption(table) -> str:
    for child in _children(table):
        if child.tag == "caption":
            return " ".join((child.text or "").split())[:MAX_CELL_CHARS]
    return ""


def rewrite_tables(tree, body) -> None:
    """Replace each data table by a <div> of Markdown lines (its `<caption>`, if any, the line above them)."""
    for table in body.query_selector_all("table").values():
        if table.parent is None or _is_layout(table):
            continue
        caption = _caption(table)
        if _has_merged_cells(table):
            if not caption:
                table.parent.replace_child(tree.create_text_node(to_html(table)), table)
                continue
            lines = [caption, to_html(table)]
        else:
            rows = table_rows(table)
            if not rows or all(not any(r) for r in rows):
                continue
            lines = ([caption] if caption else []) + to_markdown(rows)
        div = tree.create_element("div")
        for i, line in enumerate(lines):
            if i:
                div.append_child(tree.create_element("br"))
            div.append_child(tree.create_text_node(line))
        table.parent.replace_child(div, table)
