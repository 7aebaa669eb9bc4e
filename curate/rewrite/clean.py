"""Normalisation of a model's answer before validation: what is chatter, markup or thinking is taken off.

Instruct models wrap their answer even when the prompt says not to: a one-line preamble ("Sure! Here is the
refined text:"), a closing paragraph ("Let me know if ..."), a ```markdown fence around the whole answer, the
prompt's `<<<` / `>>>` markers echoed; reasoning models served without a reasoning parser (Qwen3, R1-distill)
put their thinking into the content, as `<think>...</think>` or, where the chat template opened `<think>` in the
prompt, as everything before a lone `</think>`. All of it was kept verbatim in the branches (or, for `qa`, made
the row `wrong_format`). `clean_output` moves the thinking into `reasoning` and strips the rest, by conservative
patterns that only match chatter (never a line holding mathematics), and names what it removed, so that the row
says it (`cleaned`).
"""

from __future__ import annotations

import re

# What `clean_output` may name, in the order it is applied.
STEPS = ("think", "fence", "delimiters", "preamble", "signoff")

_THINK_OPEN = re.compile(r"^\s*<think>", re.I)
_THINK_CLOSE = re.compile(r"</think>", re.I)
# A fence around the whole answer: its language, if any, is one that holds prose (a ```python block is code).
_FENCE = re.compile(r"^```[ \t]*(?:markdown|md|text|txt|plaintext|latex|tex)?[ \t]*\n(?P<body>.*)\n[ \t]*```\s*$",
                    re.I | re.S)  # fmt: skip
_FENCE_LINE = re.compile(r"^[ \t]*```", re.M)
_RULE = re.compile(r"^[ \t]*(?:-{3,}|\*{3,}|_{3,})[ \t]*$")
# The first line of an answer that announces it: "Sure! Here is ...:", "Here's a cleaned-up version ...:",
# "Certainly. Below is the rewritten text:". Taken off only when it ends in a colon or a rule follows it.
_OPENER = re.compile(
    r"^(?:(?P<yes>(?:sure|certainly|of course|absolutely)[!.,])|okay\b|ok\b|alright\b|here(?:'s|’s|\s+is|\s+are)\b|"
    r"below\s+is\b)",
    re.I,
)
# What any other opener ("Here is ...", "Okay, ...") must be about to be taken for a preamble: the rewriting itself
# ("Here is the refined text:", "Here's a cleaned-up version:"). Content nouns alone are not enough: "Here is the
# solution:" or "Here are the main results:" may open a page's own content, and stay.
_ABOUT_ANSWER = re.compile(
    r"\b(?:version|rewrit\w*|refined|cleaned|improved|revised|reformatted|requested|"
    r"(?:your|my) (?:evaluation|assessment|score|answer|response))\b",
    re.I,
)
# "Sure! " / "Certainly! " before the answer's first sentence: the interjection only, the sentence stays.
_INTERJECTION = re.compile(r"^(?:sure|certainly|of course|absolutely)!\s+(?=\S)", re.I)
# A closing paragraph addressed to the one who asked for the rewrite, not a page's own closing words ("Feel free
# to try the exercises below", "If you have any questions about the proof, ask in the forum" stay).
_SIGNOFF = re.compile(
    r"^(?:(?:please )?let me know if\b|i hope (?:this|that|it) helps\b|hope (?:this|that|it) helps\b|"
    r"feel free to (?:ask|let me know|reach out)\b|is there anything else\b|happy to help\b|"
    r"i'?d be happy to\b|i would be happy to\b|if you(?:'d| would) like me to\b|"
    r"if you have any (?:other |more |further )?questions(?: or [^,.]*)?, (?:feel free|please|let me know|"
    r"don't hesitate|do not hesitate)\b)",
    re.I,
)
_MATHY = re.compile(r"[$\\=^_{}]")  # a paragraph with any of these is not taken for chatter
_PARAGRAPHS = re.compile(r"\n[ \t]*\n")


def split_thinking(text: str, reasoning: str) -> tuple[str, str, bool]:
    """(answer, reasoning, moved): a leading `<think>...</think>` block, or everything before a lone `</think>`
    (a chat template that opened `<think>` in the prompt), moved from the answer into the reasoning. An unclosed
    leading `<think>` is all reasoning: the answer is then empty."""
    inner: str | None = None
    opened = _THINK_OPEN.match(text)
    if opened:
        body = text[opened.end() :]
        close = _THINK_CLOSE.search(body)
        inner, text = (body[: close.start()], body[close.end() :]) if close else (body, "")
    else:
        close = _THINK_CLOSE.search(text)
        if close and "<think>" not in text[: close.start()].lower():
            inner, text = text[: close.start()], text[close.end() :]
    if inner is None:
        return text, reasoning, False
    inner = inner.strip()
    reasoning = "\n\n".join(part for part in (reasoning.strip(), inner) if part)
    return text.strip(), reasoning, True


def _strip_fence(text: str) -> str | None:
    m = _FENCE.match(text)
    if not m or _FENCE_LINE.search(m.group("body")):  # another fence inside: not one block around the answer
        return None
    return m.group("body").strip()


def _strip_delimiters(text: str) -> str | None:
    lines = text.split("\n")
    start = 1 if lines and lines[0].strip() == "<<<" else 0
    end = len(lines) - 1 if len(lines) > start and lines[-1].strip() == ">>>" else len(lines)
    if start == 0 and end == len(lines):
        return None
    return "\n".join(lines[start:end]).strip()


def _strip_preamble(text: str) -> str | None:
    first, _, rest = text.partition("\n")
    line = first.strip()
    opener = _OPENER.match(line)
    about = opener and (opener.group("yes") or _ABOUT_ANSWER.search(line))
    if about and len(line) <= 200 and not _MATHY.search(line):
        following = rest.lstrip("\n").split("\n", 1)
        rule_next = bool(following[0].strip()) and bool(_RULE.match(following[0]))
        if line.rstrip("*").endswith(":") or rule_next:
            rest = rest.strip()
            if rule_next:
                rest = rest.split("\n", 1)[1].strip() if "\n" in rest else ""
            return rest
    m = _INTERJECTION.match(text)
    if m and not _MATHY.search(line):
        return text[m.end() :].strip()
    return None


def _strip_signoff(text: str) -> str | None:
    parts = _PARAGRAPHS.split(text)
    if len(parts) < 2:
        return None
    last = parts[-1].strip()
    if not _SIGNOFF.match(last) or len(last) > 300 or _MATHY.search(last):
        return None
    kept = parts[:-1]
    while kept and _RULE.match(kept[-1].strip() or "x"):  # a rule that set the sign-off apart
        kept.pop()
    return "\n\n".join(kept).strip()


def clean_output(text: str, reasoning: str = "") -> tuple[str, str, list[str]]:
    """(answer, reasoning, cleaned): the answer with thinking moved into the reasoning and chatter stripped;
    `cleaned` names each kind of thing removed (`STEPS`), in that order, empty when the answer was left as is."""
    text, reasoning = text.strip(), reasoning.strip()
    done: set[str] = set()
    text, reasoning, moved = split_thinking(text, reasoning)
    if moved:
        done.add("think")
    strippers = (("fence", _strip_fence), ("delimiters", _strip_delimiters), ("preamble", _strip_preamble),
                 ("signoff", _strip_signoff))  # fmt: skip
    for _ in range(4):  # "Here is ...:" then a fence; a fence holding the prompt's markers ...
        changed = False
        for name, strip in strippers:
            if name in ("preamble", "signoff") and name in done:
                continue  # one line before and one paragraph after at most: the next may be the answer's own
            out = strip(text) if text else None
            if out is not None and out != text:
                text, changed = out, True
                done.add(name)
        if not changed:
            break
    return text, reasoning, [step for step in STEPS if step in done]
