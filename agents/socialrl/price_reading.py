"""What a price counterpart reads in its partner's words: stated limits, rejections, final offers, prices.

The listening counterparts (agents/socialrl/price_counterpart.py) answer what is said as well as what is
offered, so the reading must not be fooled by phrasing and must not be slow on hostile text:

| reading | what counts |
| --- | --- |
| `stated_limits` | a price the speaker presents as its own limit or target, however it is phrased: "my budget/max/maximum/limit/target/ceiling/top price/minimum/reservation/bottom line/floor is $X", "I can go up to / pay up to / afford / spend up to / go as low as $X", "the most I can pay is $X", "the least I can take is $X", "I can't go above/over/below $X", "$X is my max/limit/budget/target/minimum" |
| `is_rejection` | words that turn down the standing offer: "too high/much/low/expensive/steep", "more than I hoped", "far from", "can't/won't accept", "can't do that", "not acceptable", "no deal", "I reject", "no way", "I'll pass" (not when negated: "that's not too high") |
| `says_final` | a commitment: "final offer/price", "last offer" (not "your final offer?"), "take it or leave it", "the best I can do", "won't/can't go any higher/lower" (not when negated: "this is not my final offer") |
| `mentioned_price` | the last price written in the text (`$450`, `450 dollars`, `450`), read whole by the shared number reader or ignored |

Text is cut to its last `MAX_REPLY_CHARS` characters and normalised as the action grammars do
(environments/core/grammar.py), so every pattern below starts with a literal or a word boundary, its
whitespace matches one character, and a read costs time linear in the text (tests/test_price_reading.py
runs the grammar fuzz cases through it).
"""

from __future__ import annotations

import re

from environments.core.grammar import NUMBER, NumberError, cap_reply, negated_before, normalise_text, read_number
from environments.socialrl.price_offers import MAX_PRICE

_PRICE = rf"(?P<price>{NUMBER})"
_LIMIT_NOUN = (
    r"(?:absolute |total |real )?(?:target|budget|max(?:imum)?|limit|ceiling|top price|top dollar|min(?:imum)?"
    r"|reservation(?: price)?|bottom[- ]?line|lowest price|floor)"
)
_FILL = r"(?: price)?(?: is| of| would be| will be| was|:| =)?(?: about| around| only| just| really)? ?"
_LIMIT_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"\bmy {_LIMIT_NOUN}{_FILL}{_PRICE}",
        rf"\bi (?:can|could) (?:only )?(?:go|pay|spend|stretch|afford|do)(?: up to| as high as| as much as| at most"
        rf"| as low as| down to| no more than| no less than)? ?{_PRICE}(?= ?(?:max|tops|at most|at the most))",
        rf"\bi (?:can|could) (?:only )?(?:go|pay|spend|stretch)(?: up to| as high as| as much as| at most| as low as"
        rf"| down to| no more than| no less than) ?{_PRICE}",
        rf"\bi (?:can|could) (?:only )?afford(?: up to| at most)? ?{_PRICE}",
        rf"\bthe (?:most|max(?:imum)?|highest|least|lowest) (?:i|we) (?:can|could|will|would) (?:pay|do|spend|offer"
        rf"|afford|take|accept|go)(?: for it| for this)? (?:is|would be) ?{_PRICE}",
        rf"\b(?:i|we) (?:can't|cannot|can not|won't|will not) (?:go|pay|spend|sell|do)(?: anything)? (?:above|over"
        rf"|beyond|more than|higher than|below|under|less than|lower than) ?{_PRICE}",
    )
)
# "$80 is my max": the phrase is found first and the price read from the few characters before it, so that a
# long run of number-like text is never re-scanned from each of its positions.
_LIMIT_AFTER = re.compile(
    r" (?:is|would be) (?:my|our) (?:absolute )?(?:max(?:imum)?|limit|budget|target|ceiling|top|min(?:imum)?"
    r"|floor|bottom[- ]?line|reservation)\b",
    re.IGNORECASE,
)
_PRICE_BEFORE = re.compile(rf"(?:^|(?<=[\s(]))(?P<price>{NUMBER})$")
_BEFORE_CHARS = 40
_REJECTION = re.compile(
    r"\b(?:too (?:high|much|low|expensive|steep|pricey|rich)|more than i (?:hoped|wanted|can|expected)"
    r"|far from|(?:can't|cannot|won't|will not|can not) (?:accept|agree to|do that|go that)|not acceptable"
    r"|no deal|i reject|no way|i'll pass|i will pass|not interested at that)",
    re.IGNORECASE,
)
_FINAL = re.compile(
    r"\b(?<!your )(?<!ur )(?:final (?:offer|price)|last offer)|\b(?:take it or leave it|(?:the )?best (?:i|we) can do"
    r"|(?:won't|will not|can't|cannot|can not) go any (?:higher|lower|further))",
    re.IGNORECASE,
)
_MENTION = re.compile(rf"(?<![\w.]){_PRICE}", re.IGNORECASE)


def _text(text: object) -> str:
    return normalise_text(cap_reply(text if isinstance(text, str) else ""))


def _price(token: str) -> float | None:
    value = read_number(token, what="a price", above=0, maximum=MAX_PRICE)
    return None if isinstance(value, NumberError) else float(value)


def stated_limits(text: object) -> list[float]:
    """Every price the text presents as the speaker's own limit or target, in order of appearance."""
    said = _text(text)
    found: list[tuple[int, float]] = []
    for pattern in _LIMIT_PATTERNS:
        for match in pattern.finditer(said):
            value = _price(match.group("price"))
            if value is not None and not negated_before(said, match.start()):
                found.append((match.start("price"), value))
    for match in _LIMIT_AFTER.finditer(said):
        start = max(0, match.start() - _BEFORE_CHARS)
        window = said[start : match.start()]
        before = _PRICE_BEFORE.search(window)
        # A price cut by the window's edge is not the speaker's price.
        cut = before is not None and before.start() == 0 and start > 0 and not said[start - 1].isspace()
        value = _price(before.group("price")) if before and not cut else None
        if value is not None:
            found.append((match.start() - len(window) + before.start("price"), value))
    return [value for _, value in sorted(set(found))]


_DETERMINERS = ("my", "our", "a", "the", "this", "that")
"""Words allowed between a negation and the phrase it negates ("not my final offer")."""


def _unnegated(pattern: re.Pattern[str], text: object) -> bool:
    said = _text(text)
    return any(not negated_before(said, m.start(), _DETERMINERS) for m in pattern.finditer(said))


def is_rejection(text: object) -> bool:
    """Whether the words turn down the standing offer."""
    return _unnegated(_REJECTION, text)


def says_final(text: object) -> bool:
    """Whether the words commit to a final offer."""
    return _unnegated(_FINAL, text)


def mentioned_price(text: object) -> float | None:
    """The last readable price in the text, or None."""
    said = _text(text)
    last = None
    for match in _MENTION.finditer(said):
        value = _price(match.group("price"))
        if value is not None:
            last = value
    return last
