"""Ordered lists whose numbering does not start at 1 (`<ol start=N>`, `<li value=N>`, `<ol reversed>`).

resiliparse's `list_bullets` numbers every `<ol>` from 1 and trafilatura writes `- ` for every item, so a list
that continues after a paragraph ("2. ... 3. ...") would read as a new list. Such lists get their numbers written
out as text: for resiliparse the `<ol>` becomes a `<div>` of one `<div>` per item (a `<li>` left in place would get
its own bullet or number too); for trafilatura the number goes at the start of the item, which it keeps.
"""

from __future__ import annotations


def _int_attr(node, name: str) -> int | None:
    value = (node.getattr(name) or "").strip()
    try:
        return int(value)
    except ValueError:
        return None


def _needs_numbers(ol, items: list) -> bool:
    start = _int_attr(ol, "start")
    return (
        (start is not None and start != 1)
        or ol.hasattr("reversed")
        or any(_int_attr(li, "value") is not None for li in items)
    )


def _numbers(ol, items: list) -> list[int]:
    step = -1 if ol.hasattr("reversed") else 1
    n = _int_attr(ol, "start")
    if n is None:
        n = len(items) if step < 0 else 1
    out = []
    for li in items:
        value = _int_attr(li, "value")
        n = value if value is not None else n
        out.append(n)
        n += step
    return out


def number_lists(tree, body, as_divs: bool) -> None:
    """Write the numbers of lists not numbered 1, 2, 3 ... into their items (see the module docstring)."""
    for ol in body.query_selector_all("ol[start], ol[reversed], ol li[value]").values():
        if ol.tag == "li":  # an item with a value: its list (matched once per such item, so seen once)
            ol = ol.parent
            if ol is None or ol.tag != "ol" or ol.hasattr("data-mathmix-numbered"):
                continue
        elif ol.hasattr("data-mathmix-numbered"):
            continue
        ol.setattr("data-mathmix-numbered", "1")
        items = [child for child in ol.child_nodes if child.tag == "li"]
        if not items or not _needs_numbers(ol, items):
            continue
        numbers = _numbers(ol, items)
        if not as_divs:
            for li, n in zip(items, numbers, strict=True):
                first = li.first_child
                label = tree.create_text_node(f"{n}. ")
                if first is None:
                    li.append_child(label)
                else:
                    li.insert_before(label, first)
            continue
        parent = ol.parent
        if parent is None:
            continue
        block = tree.create_element("div")
        for li, n in zip(items, numbers, strict=True):
            item = tree.create_element("div")
            item.append_child(tree.create_text_node(f"{n}. "))
            for child in list(li.child_nodes):
                item.append_child(child)
            block.append_child(item)
        parent.replace_child(block, ol)
