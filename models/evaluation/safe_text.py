"""Unusual text made safe to show in a transcript (models/evaluation/transcripts.py): cleaned, cut with a note
of what was cut, and escaped for markdown (Dagster's metadata panel) or HTML (a standalone page).

| function | what it does |
| --- | --- |
| `clean_text(text, max_chars, max_lines)` | line separators unified, control characters as `\\uXXXX`, bidirectional overrides dropped, cut at the end (or, `longest_first`, on the longest lines) |
| `escape_markdown(text)` | backslash-escapes the punctuation markdown gives a meaning to |
| `md_text(...)` / `html_text(...)` | cleaned, cut and escaped for markdown / HTML |
| `uncut(text)` | a `max_chars` that never cuts `text` |
"""

from __future__ import annotations

import html
import re
from typing import Any

MAX_CHARS = 800
"""Default: most characters of one text (a turn, a private observation) shown before it is cut."""
MAX_LINES = 30
"""Default: most lines of one text shown before it is cut."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_BIDI = re.compile(r"[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
# The ASCII punctuation CommonMark/GFM give a meaning to (emphasis, code, links, images, HTML, entities,
# headings, lists, tables, block quotes, strikethrough, math; ":" and "." so that no bare URL is linkified);
# letters, digits and ,;?'"/%@ stay as typed.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|&~=^$:])")
_BLANK_RUNS = re.compile(r"\n{3,}")


def clean_text(
    text: Any, max_chars: int = MAX_CHARS, max_lines: int = MAX_LINES, *, longest_first: bool = False
) -> str:
    """`text` made safe to show: line separators unified, control characters as `\\uXXXX`, bidirectional
    overrides dropped, cut to `max_chars` characters and `max_lines` lines with a note of what was cut.
    `longest_first`: the character cut shortens the longest lines (a long public description) instead of the end,
    so the short lines after them (where an opening briefing states the private target) stay whole."""
    if max_chars < 1 or max_lines < 1:
        raise ValueError("max_chars and max_lines must be >= 1")
    text = "" if text is None else str(text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n")
    text = _BIDI.sub("", text)
    text = _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    text = _BLANK_RUNS.sub("\n\n", text)  # a wall of empty lines shows as one
    cut = []
    if len(text) > max_chars and longest_first:
        text = _cut_longest_lines(text, max_chars)
    elif len(text) > max_chars:
        cut.append(f"{len(text) - max_chars} more characters")
        text = text[:max_chars]
    lines = text.split("\n")
    if len(lines) > max_lines:
        cut.append(f"{len(lines) - max_lines} more lines")
        text = "\n".join(lines[:max_lines])
    return text + (f" … [cut: {', '.join(cut)}]" if cut else "")


def _cut_longest_lines(text: str, max_chars: int) -> str:
    """`text` within `max_chars` (its newlines included) by cutting every line longer than the largest width
    that fits to that width, each with its own note of what was cut; shorter lines stay whole."""
    lines = text.split("\n")
    budget = max_chars - (len(lines) - 1)
    low, high = 0, max(len(line) for line in lines)
    while low < high:  # the widest cap whose capped lines fit the budget
        mid = (low + high + 1) // 2
        if sum(min(len(line), mid) for line in lines) <= budget:
            low = mid
        else:
            high = mid - 1
    return "\n".join(
        line if len(line) <= low else f"{line[:low]} … [cut: {len(line) - low} more characters]" for line in lines
    )


def escape_markdown(text: str) -> str:
    """Backslash-escape the ASCII punctuation that markdown gives a meaning to (CommonMark allows escaping
    any ASCII punctuation), so no markup, link, image, table, heading, list or HTML in `text` takes effect."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_text(text: Any, max_chars: int = MAX_CHARS, max_lines: int = MAX_LINES, *, longest_first: bool = False) -> str:
    """Clean, cut and escaped text on one markdown line or several hard-broken ones (leading spaces
    dropped, so no line turns into a code block)."""
    lines = clean_text(text, max_chars, max_lines, longest_first=longest_first).split("\n")
    return "  \n".join(escape_markdown(line.strip()) for line in lines)


def uncut(text: str) -> int:
    """A `max_chars` that never cuts `text` (private values are never cut), even where cleaning lengthens it
    (a control character shows as six characters)."""
    return 6 * len(text) + 1


def html_text(text: Any, max_chars: int = MAX_CHARS, max_lines: int = MAX_LINES, *, longest_first: bool = False) -> str:
    """Clean, cut and HTML-escaped text (quotes too, so it is safe inside an attribute)."""
    return html.escape(clean_text(text, max_chars, max_lines, longest_first=longest_first), quote=True)
