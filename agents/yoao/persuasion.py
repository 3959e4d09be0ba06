"""A model of persuasion for the untrained Red-Black teammates: what an argument says, read for the reasons it
grounds in the game, weighed against the listener's own leaning.

At cpu scale the untrained YOAO teammates are small models shaped by code tutors (`FormatTutor`,
agents/yoao/red_black_teacher.py); the `persuadable` tutor is this model, and the incentive audit
(models/yoao/incentives.py) plays it in every untrained seat. Three parts, each a plain function:

| part | what | where |
| --- | --- | --- |
| reading | the kinds of grounded reason a statement gives (`REASON_KINDS`, cues below), each kind once: repeating a reason or padding the text adds nothing; text between double quotes (a teammate quoted) and the frame's two choice words are not read; a claim about the past counts only when there was a past round | `read_argument` |
| weight | a statement's pull toward the choice it states: `vote_weight` for stating a choice at all, plus `reason_weight` per grounded reason kind | `Persuasion.weight` |
| decision | log-odds of the cooperative choice = the listener's prior as log-odds + the weights of the statements it heard for BLACK - those for RED, a statement heard `age` rounds ago counted `memory ** age` (default: this round's only); the listener chooses BLACK when its draw for the round (uniform in [0, 1)) falls below that probability | `Persuasion.p_black`, `Persuasion.decide` |

Reason kinds and their cues (lower-cased words and phrases of the text; `+3`, `-6` and `x3` are tokens):

| kind | what it grounds the argument in | cues |
| --- | --- | --- |
| `payoff` | the payoff table and the points at stake | point(s), payoff(s), payout, score(s), multiplier, multiplied; a signed number (`+6`, `-3`); a multiplier (`x3`) |
| `repeated` | the game's repeated rounds: what the next rounds hold, reciprocity, trust, spirals | next round(s), rounds ahead, rounds left, more rounds, later/coming rounds, whole game, rest of the game, every/each round, final round, long run, long term, future, trust, reciprocate, reciprocity, reputation, spiral, retaliate, retaliation, remaining |
| `history` | what the other team (or the game) did before: counted only after round 1 | last round, previous round(s), past rounds, so far, last time, chose, defected, cooperated, betrayed, exploited, retaliated, reciprocated, earlier |
| `welfare` | the group's welfare: both teams together | together, collective(ly), combined, everyone, everybody, welfare, mutual(ly), shared, joint(ly), both sides/teams/nations/parties, two sides, each other, common good, all of us, whole group |

The reading is linear in the text (one tokenising pass, then a set look-up per word and per phrase of up to
four words) and never raises on a string: empty, huge, binary-looking or non-English text reads as no reason.
It is a lexicon, not an understanding: a reason is recognised by its words, whichever way it is meant; every
reason found counts for the choice the statement states; a claim about what the other team did is not checked
against the record (only that there was a round before).

The tutors' own statements (`REASON_SENTENCES`, `FILLER_SENTENCES`) are written for this reading: each reason
sentence gives exactly the one kind it is filed under (tested), and no filler sentence gives any.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from environments.yoao.red_black import BLACK, CHOICES, RED

PAYOFF, REPEATED, HISTORY, WELFARE = "payoff", "repeated", "history", "welfare"
REASON_KINDS = (PAYOFF, REPEATED, HISTORY, WELFARE)
"""The kinds of reason grounded in the game (module docstring)."""

_CUES: dict[str, tuple[str, ...]] = {
    PAYOFF: ("point", "points", "payoff", "payoffs", "payout", "score", "scores", "multiplier", "multiplied"),
    REPEATED: (
        "next round", "next rounds", "rounds ahead", "rounds left", "more rounds", "later rounds", "coming rounds",
        "whole game", "rest of the game", "every round", "each round", "final round", "long run", "long term",
        "future", "trust", "reciprocate", "reciprocity", "reputation", "spiral", "retaliate", "retaliation",
        "remaining",
    ),
    HISTORY: (
        "last round", "previous round", "previous rounds", "past rounds", "so far", "last time", "chose", "defected",
        "cooperated", "betrayed", "exploited", "retaliated", "reciprocated", "earlier",
    ),
    WELFARE: (
        "together", "collective", "collectively", "combined", "everyone", "everybody", "welfare", "mutual",
        "mutually", "shared", "joint", "jointly", "both sides", "both teams", "both nations", "both parties",
        "two sides", "each other", "common good", "all of us", "whole group",
    ),
}  # fmt: skip
_PHRASES: dict[tuple[str, ...], str] = {tuple(cue.split()): kind for kind, cues in _CUES.items() for cue in cues}
_LONGEST = max(len(p) for p in _PHRASES)
_TOKEN = re.compile(r"x\d+\b|(?<![a-z0-9])[+-]\d+|\d+|[a-z]+")
_SIGNED_OR_MULTIPLIER = re.compile(r"[+-]\d+|x\d+")
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”")


@dataclass(frozen=True, kw_only=True)
class Reading:
    """What a statement argues, as the reading sees it."""

    reasons: frozenset[str]
    """The grounded reason kinds found (a subset of `REASON_KINDS`), each counted once."""
    words: int
    """Words read (outside quotes, the choice words left out): the length, which the weight ignores."""

    def __post_init__(self) -> None:
        unknown = set(self.reasons) - set(REASON_KINDS)
        if unknown:
            raise ValueError(f"unknown reason kinds {sorted(unknown)}; known: {', '.join(REASON_KINDS)}")
        if self.words < 0:
            raise ValueError(f"words must be >= 0, got {self.words}")


NO_REASON = Reading(reasons=frozenset(), words=0)


def read_argument(text: str, *, ignore: Collection[str] = (), has_history: bool = True) -> Reading:
    """The grounded reasons `text` gives (module docstring): quoted text is dropped, `ignore` (the frame's
    choice words, any case) is not read, and `history` counts only when `has_history` (the statement was made
    after round 1). Linear in the text; any string reads, a non-string is an error."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    skip = {w.lower() for w in ignore}
    tokens = [t for t in _TOKEN.findall(_QUOTED.sub(" ", text).lower()) if t not in skip]
    found: set[str] = set()
    for i, token in enumerate(tokens):
        if _SIGNED_OR_MULTIPLIER.fullmatch(token):
            found.add(PAYOFF)
        for n in range(1, _LONGEST + 1):
            kind = _PHRASES.get(tuple(tokens[i : i + n])) if i + n <= len(tokens) else None
            if kind is not None:
                found.add(kind)
    if not has_history:
        found.discard(HISTORY)
    return Reading(reasons=frozenset(found), words=len(tokens))


@dataclass(frozen=True, kw_only=True)
class Heard:
    """One statement a listener heard: the choice it stated and what it argued."""

    choice: str
    """BLACK or RED, as the game read the statement."""
    reading: Reading
    """Its grounded reasons (`read_argument`)."""
    age: int = 0
    """Rounds since it was said (0: this round)."""

    def __post_init__(self) -> None:
        if self.choice not in CHOICES:
            raise ValueError(f"choice must be one of {CHOICES}, got {self.choice!r}")
        if self.age < 0:
            raise ValueError(f"age must be >= 0, got {self.age}")


def _logit(p: float) -> float:
    q = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(q / (1 - q))


@dataclass(frozen=True, kw_only=True)
class Persuasion:
    """How much a listener is moved: its prior against the weighed statements it heard (module docstring).
    The defaults and why they are what they are: docs/yoao.md, "A model of persuasion". With them, P(BLACK)
    of a listener of each persuadable prior after hearing one statement this round (tested):

    | heard | prior 0.15 | prior 0.3 | prior 0.45 |
    | --- | --- | --- | --- |
    | nothing | 0.15 | 0.3 | 0.45 |
    | "I vote BLACK." (or long text without a reason) | 0.18 | 0.35 | 0.51 |
    | BLACK with one grounded reason | 0.38 | 0.6 | 0.74 |
    | BLACK with two | 0.63 | 0.8 | 0.89 |
    | BLACK with three | 0.82 | 0.92 | 0.95 |
    | BLACK with two, and RED with two | 0.15 | 0.3 | 0.45 |
    | RED with two | 0.02 | 0.04 | 0.08 |
    """

    vote_weight: float = 0.25
    """Log-odds a statement adds toward its stated choice for stating it at all: a bare "I vote BLACK." moves a
    listener of prior 0.3 to about 0.35."""
    reason_weight: float = 1.0
    """Log-odds added per grounded reason kind the statement gives (each kind once): one reason counts as four
    bare votes."""
    memory: float = 0.0
    """A statement heard `age` rounds ago counts `memory ** age` of its weight (0, the default: only this round's
    discussion, the past entering through what speakers say of it, `history` reasons; 1: every round alike)."""

    def __post_init__(self) -> None:
        for name in ("vote_weight", "reason_weight"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be finite and >= 0, got {value}")
        if not 0.0 <= self.memory <= 1.0:
            raise ValueError(f"memory must lie in [0, 1], got {self.memory}")

    def weight(self, reading: Reading) -> float:
        """A statement's pull toward the choice it states (log-odds)."""
        return self.vote_weight + self.reason_weight * len(reading.reasons)

    def log_odds(self, prior: float, heard: Iterable[Heard]) -> float:
        """log P(BLACK) / P(RED): the prior's log-odds plus the discounted weights of what was heard, for BLACK
        positive and for RED negative."""
        if not 0.0 <= prior <= 1.0:
            raise ValueError(f"prior must lie in [0, 1], got {prior}")
        total = _logit(prior)
        for h in heard:
            pull = self.weight(h.reading) * self.memory**h.age
            total += pull if h.choice == BLACK else -pull
        return total

    def p_black(self, prior: float, heard: Iterable[Heard] = ()) -> float:
        """The probability of choosing BLACK after hearing `heard` (the prior itself when nothing was heard)."""
        z = self.log_odds(prior, heard)
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def decide(self, prior: float, heard: Iterable[Heard], draw: float) -> str:
        """BLACK when `draw` (uniform in [0, 1), one per listener and round) falls below `p_black`, else RED: the
        same draw in two games gives the same choice wherever what was heard weighs the same (paired arms)."""
        if not 0.0 <= draw <= 1.0:
            raise ValueError(f"draw must lie in [0, 1], got {draw}")
        return BLACK if draw < self.p_black(prior, heard) else RED


# --------------------------------------------------------------------------------- the tutors' sentences
REASON_SENTENCES: dict[str, dict[str, tuple[str, ...]]] = {
    BLACK: {
        PAYOFF: (
            "If {them} and we both go {coop}, we score +3 this round instead of -3.",
            "A round where {them} and we both go {coop} is worth 3 points to us; {defect} against {defect} costs us 3 points.",
        ),
        REPEATED: (
            "There are more rounds to play, and going {coop} now makes it easier for {them} to go {coop} in the next round.",
            "What we do now sets up the rounds ahead: {them} is likely to answer in kind in the next round.",
        ),
        HISTORY: (
            "{them} went {coop} last round, so they are ready to work with us.",
            "Last round {them} kept to {coop}, and I see no sign they have changed.",
        ),
        WELFARE: (
            "{coop} is the outcome where both sides come out ahead together.",
            "Going {coop} makes the game better for everyone at the table, {them} included.",
        ),
    },
    RED: {
        PAYOFF: (
            "If {them} goes {coop} and we go {defect}, we get +6 points while they lose 6.",
            "If we go {coop} and {them} goes {defect}, we lose 6 points; {defect} keeps us from that loss.",
        ),
        REPEATED: (
            "Nothing we do now will change how {them} plays in the next round.",
            "Going {coop} now buys us nothing in the rounds ahead; {them} will look after itself.",
        ),
        HISTORY: (
            "{them} went {defect} last round, and they will not hold back now.",
            "Last round {them} went for {defect}; I do not expect them to change.",
        ),
    },
}  # fmt: skip
"""Grounded reasons a tutor may give, by the choice they support and their kind (one kind per sentence). A
`history` reason is only given when it is true: for BLACK after the other team chose BLACK in the last round,
for RED after it chose RED. RED has no `welfare` reason: the group's welfare is largest when both cooperate."""

FILLER_SENTENCES = (
    "I have thought about this carefully, and I want to say plainly where I stand before we settle it.",
    "There is a lot to weigh here, and I would rather speak my mind than leave anyone guessing about my view.",
    "I know we each see this a little differently, so let me put my own view on the table for the team.",
    "It is worth a moment of thought, since how we talk this through says something about how we work as a group.",
    "I have listened closely to what has been said, and I feel settled about where I come down on this.",
    "Let me lay out my view in plain words, since a clear view helps a discussion like this one.",
)
"""Sentences that are long but give no reason (length without content: the audit's `long` seed, and some of the
tutors' own statements, so the warm-up data shows that length alone moves nobody)."""


def available_reasons(choice: str, other_last: str | None) -> tuple[str, ...]:
    """The reason kinds a speaker can truthfully give for `choice`, given the other team's choice in the last
    round (None in round 1): `history` only when that choice was the same as `choice`."""
    kinds = tuple(k for k in REASON_KINDS if k in REASON_SENTENCES[choice] and k != HISTORY)
    return (*kinds, HISTORY) if other_last == choice else kinds
