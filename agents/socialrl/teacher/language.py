"""Small language helpers: phrase choice, list joining, money formatting and the leak guard.

The leak guard is the last line of defence behind the templates: before a message leaves, it is checked
against the seat's own private facts (the environment's own detectors where they are public functions,
numbers otherwise) and replaced by a neutral sentence when anything matches. Offers and acceptances are
moves, not statements, so the numbers of the action itself are exempt, exactly as in
environments/core/leakage.py.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Sequence

from environments.core.leakage import numbers_in


def pick(rng: random.Random, options: Sequence[str]) -> str:
    return options[rng.randrange(len(options))]


def join_words(parts: Sequence[str]) -> str:
    parts = [p for p in parts if p]
    if not parts:
        return ""
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def clip_words(text: str, words: int) -> str:
    """The first `words` words of `text` (with "..." when cut), so that a quoted title or description line
    keeps a reply inside the rollouts' token budget (a student copying the teacher would be cut off)."""
    parts = text.split()
    return " ".join(parts) if len(parts) <= words else " ".join(parts[:words]) + "..."


def money(price: float) -> str:
    """$150, $12.5 -> "$12.50", $1234 (no thousands separator, so the text is one token)."""
    if abs(price - round(price)) < 1e-9:
        return f"${round(price)}"
    return f"${price:.2f}"


def nice_step(scale: float, points: int = 150) -> float:
    """A round price step giving roughly `points` steps over `scale` (1, 2 or 5 times a power of ten)."""
    raw = max(scale / points, 0.01)
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * power + 1e-12:
            return round(m * power, 10)
    return round(10 * power, 10)


def leaks(text: str, patterns: Iterable[str] = (), numbers: Iterable[float] = (), exempt: Iterable[float] = ()) -> bool:
    """True when `text` matches one of the patterns, or names one of the private numbers (other than the
    numbers of the action itself)."""
    exempt = list(exempt)
    for n in numbers_in(text):
        if any(abs(n - m) < 0.005 for m in exempt):
            continue
        if any(abs(n - v) < 0.005 for v in numbers):
            return True
    return any(re.search(p, text, flags=re.IGNORECASE) for p in patterns)
