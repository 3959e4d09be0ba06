"""Quoting a bad value in an error message: at most a short prefix, whatever the value's size.

Every error path that quotes input (a model's reply, a payload, a data file's field or line) quotes it with
`show` (as written) or `quote` (as a repr, quotes around text), so that no message grows with its input: a
20 MB line of a data file is reported as its first few characters and its length, not repeated. Text is
quoted as written (whitespace runs collapsed), anything else by a bounded `repr` (`reprlib`: long lists and
mappings are elided, never formatted whole). `clip` is the backstop for a whole message (the data-file and
scenario errors clip theirs), for messages that embed another library's error text.
"""

from __future__ import annotations

import reprlib

SHOW_CHARS = 24
"""Default length of a quoted value (longer values are cut and their length given)."""


class _BoundedRepr(reprlib.Repr):
    """reprlib's bounded repr, except that a huge int is described rather than formatted (formatting one costs
    time quadratic in its digits, and Python refuses past 4,300 digits)."""

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 256:
            return f"<an integer of about {int(x.bit_length() * 0.30103) + 1} digits>"
        return super().repr_int(x, level)


_REPR = _BoundedRepr()
_REPR.maxstring = 80
_REPR.maxother = 80
_REPR.maxlong = 40


def show(value: object, limit: int = SHOW_CHARS) -> str:
    """`value` for an error message, at most about `limit` characters: text as written (whitespace runs
    collapsed to one space), cut when longer to its start followed by its full length, e.g.
    `99999999999999...(400 chars)`; other values by a bounded repr (`[1, 2, 3, 4, 5, 6, ...]`), cut to `limit`.
    Time and memory do not grow with the value."""
    if not isinstance(value, str):
        text = _REPR.repr(value)
        return text if len(text) <= limit else f"{text[: max(1, limit - 3)]}..."
    head = " ".join(value[: limit + 1].split())  # only the start is ever formatted
    if len(value) <= limit and len(head) <= limit:
        return head
    return f"{head[: max(1, limit - 9)]}...({len(value)} chars)"


def quote(value: object, limit: int = SHOW_CHARS) -> str:
    """Like `show`, but text in quotes (`'abc'`), as `repr` would write it: for messages that quote a value of
    any type, where the quotes tell text from a number."""
    return repr(show(value, limit)) if isinstance(value, str) else show(value, limit)


MAX_MESSAGE_CHARS = 2_000
"""Longest error message `clip` lets through."""


def clip(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A whole error message cut to `limit` characters (line breaks kept), with its full length when cut."""
    return message if len(message) <= limit else f"{message[:limit]}...({len(message)} chars)"
