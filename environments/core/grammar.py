"""Tolerant parsing helpers shared by the environments' action grammars.

Every grammar has the same shape: the model writes free text and ends with one command line such as
`OFFER $120`, `ACCEPT` or `PROPOSE book=1 hat=2 ball=0`. Capitalised commands count anywhere in the text, lower-case ones only on a line of their own
(`own_line`), so that prose such as "would you accept my offer?" stays a message. The parser takes the
*last* command found
(models often restate earlier offers), tolerates markdown emphasis, bullets, quotes, `$` and thousands
separators, and returns the remaining text as the message said along with the action.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DECORATION = re.compile(r"[*_`>#]+")
NUMBER = r"[-+]?\$?\s*\d[\d,]*(?:\.\d+)?"


def clean(text: str) -> str:
    """Strip markdown decoration so `**OFFER:** $1,200` reads as `OFFER: $1,200`."""
    return _DECORATION.sub("", text or "")


def own_line(words: str) -> str:
    """A pattern for `words` in any case forming a whole line (optionally after `Action:`, before a full
    stop). Lower-case commands only count on a line of their own, so prose such as "I can't accept
    that" stays a message; capitalised commands (`ACCEPT`) count anywhere."""
    return rf"(?m:^[ \t]*(?:(?:action|command|decision)[ \t]*:[ \t]*)?(?:{words})[ \t]*[.!]?[ \t]*$)"


def to_number(token: str) -> float | None:
    """Parse "$1,200.50" -> 1200.5; None when it is not a number."""
    try:
        return float(token.replace("$", "").replace(",", "").strip())
    except ValueError:
        return None


@dataclass(frozen=True)
class CommandMatch:
    """The last command found in a text."""

    kind: str
    """The grammar's name for the command."""
    groups: dict[str, str]
    """Named groups of the matching pattern."""
    message: str
    """The text with the command removed (what the agent 'said')."""


def find_last_command(text: str, patterns: dict[str, str]) -> CommandMatch | None:
    """Find the command that ends latest in `text`.

    `patterns` maps a command kind to a regular expression (case-insensitive, matched against the
    de-decorated text). Among all matches of all patterns the one starting last wins; on a tie the
    longer match wins (so `OFFER 5` beats a bare `OFFER`)."""
    body = clean(text)
    best: tuple[int, int, str, re.Match[str]] | None = None
    for kind, pattern in patterns.items():
        for match in re.finditer(pattern, body, flags=re.IGNORECASE):
            key = (match.start(), match.end() - match.start())
            if best is None or key > (best[0], best[1]):
                best = (key[0], key[1], kind, match)
    if best is None:
        return None
    _, _, kind, match = best
    message = (body[: match.start()] + body[match.end() :]).strip()
    message = re.sub(r"\s+\n", "\n", message).strip(" \n:-")
    groups = {k: v for k, v in match.groupdict().items() if v is not None}
    return CommandMatch(kind, groups, message)
