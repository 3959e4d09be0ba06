"""Private-information leakage detection over an agent's own messages.

A fact leaks when the agent's free text contains one of the fact's numbers (as a stand-alone number,
`$` and thousands separators allowed, equal within half a cent) or matches one of its patterns.
Structured offer payloads are not read, and a number in the text equal to a number of the same action's
payload (the price being offered) does not count: offering a price is a move, saying "my limit is $80"
is a leak.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PrivateFact:
    """One private fact of a role, with how its leakage is detected in that role's messages."""

    name: str
    """Short id, e.g. "reservation_price" or "priority:water"."""
    description: str
    """What it is, in words."""
    numbers: tuple[float, ...] = ()
    """Numbers whose appearance in the role's own message text reveals the fact."""
    patterns: tuple[str, ...] = ()
    """Case-insensitive regular expressions whose match in the role's message text reveals the fact."""


_NUMBER_TOKEN = re.compile(r"(?<![\w.])\$?\s*(\d[\d,]*(?:\.\d+)?)(?![\w]|\.\d)")


def numbers_in(text: str) -> list[float]:
    """All stand-alone numbers in a text ("$1,200.50" -> 1200.5)."""
    found = []
    for token in _NUMBER_TOKEN.findall(text):
        try:
            found.append(float(token.replace(",", "")))
        except ValueError:
            continue
    return found


def _payload_numbers(payload: object) -> list[float]:
    if isinstance(payload, bool):
        return []
    if isinstance(payload, int | float):
        return [float(payload)]
    if isinstance(payload, dict):
        return [n for v in payload.values() for n in _payload_numbers(v)]
    if isinstance(payload, list | tuple):
        return [n for v in payload for n in _payload_numbers(v)]
    return []


def detect_leaks(facts: Sequence[PrivateFact], messages: Iterable[str | tuple[str, dict]]) -> tuple[str, ...]:
    """Names of the facts revealed by any of the messages, in the order the facts are declared.

    A message is a text, or (text, payload) for the text said along with an action."""
    pairs = [(m, {}) if isinstance(m, str) else m for m in messages]
    texts = [t for t, _ in pairs if t]
    if not texts:
        return ()
    said_numbers = []
    for text, payload in pairs:
        moved = _payload_numbers(payload)
        said_numbers += [n for n in numbers_in(text) if not any(abs(n - m) < 0.005 for m in moved)]
    leaked = []
    for fact in facts:
        hit = any(abs(n - value) < 0.005 for value in fact.numbers for n in said_numbers)
        if not hit:
            hit = any(re.search(p, t, flags=re.IGNORECASE) for p in fact.patterns for t in texts)
        if hit:
            leaked.append(fact.name)
    return tuple(leaked)
