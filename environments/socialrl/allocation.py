"""Shared pieces of the multi-item allocation environments (Deal or No Deal, CaSiNo).

Both environments divide a pool of indivisible items between two parties with additive private values.
This module holds what they share:

* an allocation is a tuple of counts in the environment's item order, always *from one party's side*
  (what that party gets); a payload writes it as `{"mine": {"book": 1, "hat": 2, "ball": 0}}`;
* `parse_counts` reads "book=1 hat=2 ball=0", "1 book, 2 hats and 0 balls", "books: 1, hats: 2, balls: 0"
  or "1 2 0" into counts; every count is read whole (the shared number reader of
  environments/core/grammar.py) or the text is refused with the reason: `-1 books`, `1e308`, `5-`, `-2pm`,
  `-14:00 books` and `$-5` are never read as other counts, nor skipped;
* `bare_command` / `args_command` build command patterns for `environments.core.grammar.find_last_command`
  that accept a command word in capitals anywhere ("... ACCEPT") or in any case when it opens its own
  line ("accept", "Propose: book=1 ..."), so that "I can't accept that" stays a message;
* `reference_agreement`: the per-party reference points the rewards are normalised by (the best own
  points among Pareto-optimal envy-free allocations, else the Nash bargaining allocation);
* `ItemDealSpace`: the `DealSpace` code agents use in both environments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from environments.core.events import Action, Notification
from environments.core.grammar import NumberError, number_token, read_number, show, squeeze
from environments.core.quoting import quote
from environments.core.scoring import (
    complement,
    enumerate_allocations,
    is_envy_free,
    is_pareto_optimal,
    nash_bargaining_point,
    pareto_frontier,
    points,
)
from environments.socialrl.bargaining import Deal, DealSpace

Allocation = tuple[int, ...]

NUMBER_WORDS = {
    "zero": 0,
    "no": 0,
    "none": 0,
    "one": 1,
    "a": 1,
    "an": 1,
    "single": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_WORDS = "|".join(sorted(NUMBER_WORDS, key=len, reverse=True))
_COUNTERPART = re.compile(r"\b(?:you|your|yours|u|they|them|their|the\s+rest|partner|opponent)\b", re.IGNORECASE)
# Grammars match normalised text (environments/core/grammar.py): whitespace runs are one character, so the
# optional single spaces below cannot backtrack over a run. Negation ("I can't ACCEPT") is the shared rule
# that find_last_command applies to every match.
_LINE_PREFIX = r"^(?:[-+•] ?)?(?:(?:action|command|move|decision|final answer) ?[:=-] ?)?"
_ARGS_SEPARATOR = r" ?(?:[:=]|-(?![0-9]))? ?"
"""Between a command word and its arguments: a colon, `=` or a dash used as a separator; a dash right
before a digit is the first count's minus sign (`PROPOSE -1 1 1` is a negative count, not 1 1 1)."""
MAX_COUNT_DIGITS = 4
"""A count written with more digits than this is out of range (no pool holds 10,000 items)."""
_CURRENCY = "$\u20ac\u00a3"
_COUNT = rf"[~\u2248]?[-+\u2212]?[{_CURRENCY}]?[-+\u2212]?{number_token(spaces=False)}"
"""A count token: the whole number-like run (a space separates counts, so it is not part of one), with the
signs, currency symbol and "about" sign written before it, so that `$-5`, `--5` or `~2` is read (and
refused) whole."""
_COUNT_START = rf"(?<![\w.,:/'\u2019%+\u2212\u2010-\u2015~\u2248{_CURRENCY}-])"
"""A count never starts inside a number-like run (`14:00 books` holds no count of 0 books)."""
_POSITIONAL_CHUNK = re.compile(r"[^\s;]+")
_WRAPPING = "()[]{}<>\"'`\u201c\u201d"
_THOUSANDS = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+")
_HAS_DIGIT = re.compile(r"\d")
"""A token holding a digit is a count to read (whole or refused), whatever it starts with (`$-5`, `~2`)."""
_WORD_OR_JOINER = re.compile(r"[^\W\d_]{2,}[.,:!?]*|[-+&/|=>\u00b7\u2022\u2010-\u2015]+")
"""Tokens between bare counts that are not counts: a word of two letters or more, or a joiner."""


# ------------------------------------------------------------------------------------------ grammar
def bare_command(upper: str, lower: str, anywhere: str | None = None) -> str:
    """A command without arguments: `upper` (a regex in capitals) matches case-sensitively anywhere;
    `lower` matches in any case when it fills its own line (optionally after a bullet or "Action:",
    followed only by `.` or `!`); `anywhere` (for distinctive tokens such as "Accept-Deal") matches in
    any case anywhere."""
    pattern = rf"(?-i:\b(?:{upper})\b)|(?m:{_LINE_PREFIX}(?:{lower}) ?[.!]* ?$)"
    if anywhere:
        pattern += rf"|\b(?:{anywhere})\b"
    return pattern


def args_command(upper: str, lower: str, anywhere: str | None = None) -> str:
    """A command with arguments up to the end of its line: `upper` case-sensitively anywhere, `lower`
    in any case at the start of a line, `anywhere` in any case anywhere. The arguments are the named
    group `args` (or `args2`, `args3`); read them with `command_args`."""
    pattern = (
        rf"(?-i:\b(?:{upper})\b){_ARGS_SEPARATOR}(?P<args>[^\n]*)"
        rf"|(?m:{_LINE_PREFIX}(?:{lower})\b{_ARGS_SEPARATOR}(?P<args2>[^\n]*))"
    )
    if anywhere:
        pattern += rf"|\b(?:{anywhere})\b{_ARGS_SEPARATOR}(?P<args3>[^\n]*)"
    return pattern


def command_args(groups: Mapping[str, str]) -> str:
    """The argument text of a match of an `args_command` pattern."""
    return groups.get("args") or groups.get("args2") or groups.get("args3") or ""


def natural_allocation_pattern() -> str:
    """First-person statements of one's own share ("I get ...", "I'll take ...", "give me ...")."""
    return (
        r"\b(?:I(?:'ll| will| would| could| can)? (?:get|take|keep|have)|give me|for me)\b"
        r" ?:? ?(?P<args>[^\n.?!;]*)"
    )


def _read_count(token: str, what: str = "a count") -> int | str:
    """One count token read whole (environments/core/grammar.py's `read_number`): a whole number from 0 to
    `MAX_COUNT_DIGITS` digits, written without a currency symbol, else the reason it is not one."""
    if any(c in token for c in _CURRENCY):
        return f"{what} is a number of items, not an amount of money: {show(token)}"
    count = read_number(token, what=what, integer=True)
    if isinstance(count, NumberError):
        return count.message
    if count < 0:
        return f"{what} cannot be negative, got {show(token)}"
    if count >= 10**MAX_COUNT_DIGITS:
        return f"{what} is out of range: {show(token)}"
    return count


def _word_count(token: str, count: int) -> int | None:
    token = token.lower().strip()
    if token.startswith("all"):
        return count
    return NUMBER_WORDS.get(token)


def _positional_counts(text: str) -> list[str]:
    """The number-like tokens of text written as bare counts ("1 2 0", "1, 2, 0", "1,2,0", "(1 2 0)"), in
    order: spaces, semicolons and commas separate counts, except that a run shaped like a thousands number
    ("1,000") stays one token. Each token that holds a digit is kept whole, whatever it starts with (`5-`,
    `-2pm`, `1e308`, `$-5`, `--5`, `~2` stay as written), so that reading it either succeeds or says why.
    Words ("1 and 2 and 0") and joiners (`-`, `&`, `/`, `|`) are left out; any other token standing between
    two counts (`x`, `?`, `n/a` in `1 x 1 1`) is a count written without digits, kept so that it is refused
    rather than skipped."""
    parts: list[str] = []
    for chunk in _POSITIONAL_CHUNK.findall(text):
        chunk = chunk.strip(_WRAPPING)
        pieces = [chunk] if _THOUSANDS.fullmatch(chunk.rstrip(".,:!?")) else chunk.split(",")
        parts += [p for p in (piece.strip(_WRAPPING) for piece in pieces) if p]
    numbered = [i for i, p in enumerate(parts) if _HAS_DIGIT.search(p)]
    if not numbered:
        return []
    first, last = numbered[0], numbered[-1]
    return [
        p
        for i, p in enumerate(parts)
        if _HAS_DIGIT.search(p) or (first < i < last and not _WORD_OR_JOINER.fullmatch(p))
    ]


def parse_counts(text: str, names: Mapping[str, str], counts: Sequence[int]) -> Allocation | str:
    """Counts for every item from text, or an error message.

    `names` maps each item (in the environment's order) to a regex of its names ("books?"); `counts`
    gives the pool (used for "all the hats"). Accepted forms, tried in this order: `item=N`/`item: N`,
    `N item` ("2 hats", "two hats", "a book", "no balls", "all the hats"), `item N`, and finally bare
    positional numbers in item order ("1 2 0"). Text after the first mention of the counterpart
    ("..., you get the rest") is ignored. Every count is read whole (`_read_count`): a count that is not a
    whole number (`1e308`, `5-`, `-2pm`, `-14:00`, `2.5`, `~2`), a negative one (`-5`), one with a currency
    symbol (`$-5`), one of more than `MAX_COUNT_DIGITS` digits, and between bare counts a placeholder without
    digits (`1 x 1 1`) is an error, never skipped or cut short. Counts are not checked against the pool
    here. Linear in the length of `text`."""
    items = list(names)
    text = squeeze(text)
    cut = _COUNTERPART.search(text)
    if cut is not None and cut.start() > 0:
        text = text[: cut.start()]
    elif cut is not None:
        return "write your own share (what you get), not the other side's"
    any_item = "|".join(f"(?:{names[i]})" for i in items)
    # A count after `item=` or `item ` is the whole run up to the next space, letters included (`book=2pm`).
    value = rf"(?P<n>{_COUNT}\w*|(?:{_WORDS})(?![\w-]))"
    forms = [
        rf"\b(?P<item>{any_item}) ?[=:] ?{value}",
        rf"{_COUNT_START}(?P<n>{_COUNT}|{_WORDS}|all(?: of)?(?: the)?(?: [0-9]+)?) ?(?:x ?)?"
        rf"(?:(?:packages?|packs?|units?|pieces?|of|the|extra|more) )*(?P<item>{any_item})\b",
        rf"\b(?P<item>{any_item}) {value}",
    ]
    for form in forms:
        found: dict[str, int] = {}
        for match in re.finditer(form, text, flags=re.IGNORECASE):
            item = next(i for i in items if re.fullmatch(names[i], match["item"], flags=re.IGNORECASE))
            n_text = match["n"]
            if n_text.lower().startswith("all") and n_text[-1:].isdigit():
                n_text = n_text.rsplit(" ", 1)[-1]  # "all 3 hats"
            if _HAS_DIGIT.search(n_text):
                n: int | str | None = _read_count(n_text, f"the count of {item}")
                if isinstance(n, str):
                    return n
            else:
                n = _word_count(n_text, counts[items.index(item)])
            if n is None:
                continue
            if item in found and found[item] != n:
                return f"conflicting counts for {item}: {found[item]} and {n}"
            found[item] = n
        if found:
            missing = [i for i in items if i not in found]
            if missing:
                return f"give a count for every item; missing: {', '.join(missing)}"
            return tuple(found[i] for i in items)
    tokens = _positional_counts(text)
    # One more token than items is enough to tell a wrong count apart; reading thousands would not be.
    money = next((t for t in tokens[: len(items) + 1] if any(c in t for c in _CURRENCY)), None)
    if money is not None:
        return f"a count is a number of items, not an amount of money: {show(money)}"
    values = [read_number(token, what="a count", integer=True) for token in tokens[: len(items) + 1]]
    unreadable = next((v for v in values if isinstance(v, NumberError)), None)
    if unreadable is not None:
        return unreadable.message
    numbers = [int(v) for v in values if not isinstance(v, NumberError)]
    if any(n < 0 for n in numbers):
        return f"counts cannot be negative, got {show(' '.join(tokens[: len(items) + 1]), 60)}"
    if any(n >= 10**MAX_COUNT_DIGITS for n in numbers):
        return f"a count is out of range: {show(' '.join(tokens[: len(items) + 1]), 60)}"
    if tokens and len(tokens) == len(items):
        return tuple(numbers)
    example = " ".join(f"{i}=1" for i in items)
    if tokens:
        return f"{len(tokens)} counts for {len(items)} items; write e.g. {example}"
    return f"no item counts found; write e.g. {example}"


# ------------------------------------------------------------------------------------------ payloads
def to_payload(items: Sequence[str], allocation: Sequence[int]) -> dict[str, Any]:
    """`{"mine": {item: count}}` for an allocation from the speaker's side."""
    return {"mine": {i: int(n) for i, n in zip(items, allocation, strict=True)}}


def from_payload(items: Sequence[str], payload: Mapping[str, Any] | None) -> Allocation | None:
    """The allocation a payload states (from the speaker's side), or None when it is not one."""
    if not isinstance(payload, Mapping):
        return None
    mine = payload.get("mine")
    if not isinstance(mine, Mapping) or set(mine) != set(items):
        return None
    values = [mine[i] for i in items]
    if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        return None
    return tuple(values)


def check_payload(items: Sequence[str], counts: Sequence[int], payload: Mapping[str, Any]) -> str | None:
    """Why a `{"mine": ...}` payload is not a valid allocation of the pool, or None."""
    mine = payload.get("mine") if isinstance(payload, Mapping) else None
    if not isinstance(mine, Mapping):
        return 'the payload needs "mine": {' + ", ".join(f'"{i}": n' for i in items) + "}"
    unknown = sorted(set(mine) - set(items))
    if unknown:
        return f"unknown items {unknown}; the items are {', '.join(items)}"
    missing = [i for i in items if i not in mine]
    if missing:
        return f"give a count for every item; missing: {', '.join(missing)}"
    for item, count in zip(items, counts, strict=True):
        n = mine[item]
        if isinstance(n, bool) or not isinstance(n, int):
            return f"the count of {item} must be a whole number, got {quote(n)}"
        if not 0 <= n <= count:
            return f"you cannot get {n} {item}: the pool holds {count}"
    return None


def describe_allocation(items: Sequence[str], allocation: Sequence[int], plural: Mapping[str, str]) -> str:
    """ "1 book, 2 hats and 0 balls"."""
    parts = [f"{n} {item if n == 1 else plural.get(item, item)}" for item, n in zip(items, allocation, strict=True)]
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]


# ------------------------------------------------------------------------------------------ reference
@dataclass(frozen=True)
class Reference:
    """The reference agreement a scenario's rewards are calibrated on."""

    points: tuple[float, float]
    """Reference own points of party A and party B."""
    basis: str
    """"pareto_envy_free" (best own points among Pareto-optimal envy-free allocations) or "nash"."""
    allocations: tuple[Allocation, ...]
    """The Pareto-optimal envy-free allocations (party A's side), or the Nash allocation alone."""


@lru_cache(maxsize=4096)
def _reference(
    counts: Allocation, values_a: tuple[float, ...], values_b: tuple[float, ...], disagreement: tuple[float, float]
) -> Reference:
    allocations = enumerate_allocations(counts)

    def util_a(x: Allocation) -> float:
        return points(x, values_a)

    def util_b(x: Allocation) -> float:
        return points(complement(x, counts), values_b)

    frontier = pareto_frontier(allocations, [util_a, util_b])
    fair = [x for x in frontier if is_envy_free(x, counts, values_a, values_b)]
    if fair:
        return Reference((max(util_a(x) for x in fair), max(util_b(x) for x in fair)), "pareto_envy_free", tuple(fair))
    nash = nash_bargaining_point(allocations, [util_a, util_b], disagreement)
    return Reference((util_a(nash), util_b(nash)), "nash", (nash,))


def reference_agreement(
    counts: Sequence[int],
    values_a: Sequence[float],
    values_b: Sequence[float],
    disagreement: Sequence[float] = (0.0, 0.0),
) -> Reference:
    """Reference points of both parties over every allocation of the pool.

    Among the Pareto-optimal allocations that are envy-free (each party values its own bundle at least as
    much as the other's), party A's reference is the most A gets in any of them and party B's the most B
    gets (possibly from different allocations). When no Pareto-optimal allocation is envy-free, both take
    their points in the Nash bargaining allocation over `disagreement`."""
    return _reference(
        tuple(int(c) for c in counts),
        tuple(float(v) for v in values_a),
        tuple(float(v) for v in values_b),
        (float(disagreement[0]), float(disagreement[1])),
    )


def deal_quality(
    allocation: Sequence[int], counts: Sequence[int], values_a: Sequence[float], values_b: Sequence[float]
) -> tuple[bool, bool]:
    """(Pareto-optimal, envy-free) of an allocation given from party A's side."""
    allocations = enumerate_allocations(counts)
    utilities = [lambda x: points(x, values_a), lambda x: points(complement(x, counts), values_b)]
    return (
        is_pareto_optimal(tuple(allocation), allocations, utilities),
        is_envy_free(allocation, counts, values_a, values_b),
    )


# ---------------------------------------------------------------------------------------- deal space
class ItemDealSpace(DealSpace):
    """One party's view of an item-division problem, for code agents.

    A deal is this party's own share (a tuple of counts in item order). Utility is own points divided by
    the points of the whole pool (so taking everything is 1); the walk-away is `walk_away_points` on the
    same scale. Payloads from the counterpart state the counterpart's share, so `deal_from_payload`
    returns its complement."""

    def __init__(
        self,
        items: Sequence[str],
        counts: Sequence[int],
        values: Sequence[float],
        *,
        walk_away_points: float = 0.0,
        propose_kind: str = "propose",
        accept_kind: str = "accept",
        quit_kind: str | None = None,
        select_kind: str | None = None,
        plural: Mapping[str, str] | None = None,
        private_text: str = "",
    ) -> None:
        self.items, self.counts, self.values = tuple(items), tuple(int(c) for c in counts), tuple(values)
        self.total = points(self.counts, self.values)
        if self.total <= 0:
            raise ValueError("the pool must be worth something to this party")
        self.walk_away_points = float(walk_away_points)
        self.propose_kind, self.accept_kind = propose_kind, accept_kind
        self.quit_kind, self.select_kind = quit_kind, select_kind
        self.plural = dict(plural) if plural is not None else {i: i + "s" for i in self.items}
        self.private_text = private_text
        self._deals = tuple(enumerate_allocations(self.counts))

    def deals(self) -> Sequence[Deal]:
        return self._deals

    def utility(self, deal: Deal) -> float:
        return points(deal, self.values) / self.total  # type: ignore[arg-type]

    def walk_away_utility(self) -> float:
        return self.walk_away_points / self.total

    def deal_from_payload(self, payload: Mapping[str, Any] | None) -> Deal | None:
        theirs = from_payload(self.items, payload)
        if theirs is None or any(not 0 <= n <= c for n, c in zip(theirs, self.counts, strict=True)):
            return None
        return complement(theirs, self.counts)

    def offer(self, agent_id: str, deal: Deal, text: str) -> Action:
        return Action(agent_id, self.propose_kind, text, to_payload(self.items, deal))  # type: ignore[arg-type]

    def accept(self, agent_id: str, deal: Deal, text: str) -> Action:
        # Echo the accepted split (own side) so that restating it is not mistaken for a leak.
        return Action(agent_id, self.accept_kind, text, to_payload(self.items, deal))  # type: ignore[arg-type]

    def walk_away(self, agent_id: str, text: str) -> Action | None:
        return Action(agent_id, self.quit_kind, text) if self.quit_kind else None

    def special_turn(self, agent_id: str, request: Notification, agreed: Deal | None) -> Action | None:
        # DnD's final selection: state the agreed split from this side (no agreement known: no deal).
        if self.select_kind is None or self.select_kind not in request.allowed:
            return None
        if agreed is None:
            if self.quit_kind and self.quit_kind in request.allowed:
                return Action(agent_id, self.quit_kind, "We did not agree.")
            return Action(agent_id, self.select_kind, "", to_payload(self.items, (0,) * len(self.items)))
        return Action(agent_id, self.select_kind, "", to_payload(self.items, agreed))  # type: ignore[arg-type]

    def describe(self, deal: Deal) -> str:
        theirs = complement(deal, self.counts)  # type: ignore[arg-type]
        return (
            f"I get {describe_allocation(self.items, deal, self.plural)}; "  # type: ignore[arg-type]
            f"you get {describe_allocation(self.items, theirs, self.plural)}"
        )

    def reveal_private(self) -> str:
        return self.private_text
