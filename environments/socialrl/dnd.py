"""Deal or No Deal (dnd-v0): two parties divide books, hats and balls they value differently.

| | |
| --- | --- |
| roles | `alice`, `bob` (alice opens) |
| private information | each side's integer value per book, hat and ball (the whole pool is worth 10 points to each side); the item counts are public |
| actions | negotiation: `message` (free text), `propose` {"mine": {"book": n, "hat": n, "ball": n}} (what the proposer gets), `accept` (the counterpart's standing proposal), `no_deal` (end without a deal). Selection: `select` {"mine": {...}} (the split this side believes was agreed, its own share) or `no_deal` |
| text grammar | free text, optionally ending with one command line: `PROPOSE book=1 hat=2 ball=0`, `ACCEPT`, `NO DEAL`, `SELECT book=1 hat=2 ball=0`; "I get 1 book, 2 hats and 0 balls" also proposes. Command words count in capitals anywhere, or in any case at the start of a line; text without a command is a message A command negated by the words right before it ("I do NOT ACCEPT", "I refuse to ACCEPT", also across double spaces and line breaks) does not count (the shared negation rule of environments/core/grammar.py). Counts are whole numbers, each read whole by the shared number reader (environments/core/grammar.py): a negative count (`PROPOSE -1 1 1`, `-1 books`), one of more than 4 digits, and a count that is not one whole number (`1e308`, `5-`, `-2pm`, `-14:00 books`, `1.5 books`, `$-5`, the `x` of `PROPOSE 1 x 1 1`) are invalid actions saying why, never skipped or read as other counts. |
| reply cap | replies longer than 8,000 characters are cut to their last 8,000 before parsing (`max_reply_chars`); parsing is linear in the reply's length (environments/core/grammar.py) |
| reward | own points / reference, clipped to [0, 1]; reference = the most own points in any Pareto-optimal envy-free allocation (the Nash bargaining allocation when none is envy-free); mismatched selections or no deal = 0 for both |
| termination | both selections in (the deal stands only when they are complementary), or `no_deal` during the negotiation |

Phases. Up to `max_turns` (10) negotiation turns alternate, alice first. An `accept` (or `max_turns`
turns without one) opens the selection phase: both sides are asked at once, allowed `select` and
`no_deal`, and neither sees the other's selection. A `no_deal` during the negotiation ends the episode
at once without a deal.

Invalid actions (unparseable or empty text, a proposal that is not a split of the pool, accepting when
no proposal stands, a selection during the negotiation) are counted; after `max_invalid_retries` retries
the rule is: in the negotiation the turn is forfeited and passes to the other side (it still counts as a
turn); in the selection phase the side is taken to have selected `no_deal`.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from environments.core.base import (
    ActionSpec,
    Environment,
    Outcome,
    ParseError,
    PrivateFact,
    RoleOutcome,
    Scenario,
    ScenarioError,
    check_max_turns,
)
from environments.core.data import DataFileError, Loaded, RecordError, dataset_path, load_records, read_text_file
from environments.core.events import Action, Event, Observation
from environments.core.grammar import CommandMatch, find_last_command, squeeze
from environments.core.quoting import quote, show
from environments.core.registry import register
from environments.core.scoring import complement, normalise, points
from environments.socialrl.allocation import (
    ItemDealSpace,
    args_command,
    check_payload,
    command_args,
    deal_quality,
    describe_allocation,
    from_payload,
    natural_allocation_pattern,
    parse_counts,
    reference_agreement,
    to_payload,
)
from environments.socialrl.bargaining import DealSpace
from environments.socialrl.replies import NO_DEAL, CommandReplies, allocation_reply

ALICE, BOB = "alice", "bob"
ITEMS = ("book", "hat", "ball")
NAMES = {"book": r"books?", "hat": r"hats?", "ball": r"(?:basket)?balls?"}
PLURAL = {"book": "books", "hat": "hats", "ball": "balls"}
POOL_VALUE = 10
"""What the whole pool is worth to each side (sum of count x value)."""

_INPUT = re.compile(r"<input>(.*?)</input>")
_PARTNER_INPUT = re.compile(r"<partner_input>(.*?)</partner_input>")
_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_MAX_DIGITS = 6
"""Digits of a number in a data file's context line (counts are 1-4 and values 0-10; longer is corrupt)."""


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class DndScenario(Scenario):
    """Item counts (public) and both sides' private values, in the order book, hat, ball."""

    counts: tuple[int, int, int]
    """How many books, hats and balls are on the table (1-4 each, 5-7 in total)."""
    alice_values: tuple[int, int, int]
    """Alice's points per book, hat, ball; counts x values sums to 10."""
    bob_values: tuple[int, int, int]
    """Bob's points per book, hat, ball; counts x values sums to 10."""
    max_turns: int = 10
    """Negotiation turns (messages and proposals) before the selection phase starts anyway."""

    def __post_init__(self) -> None:
        sid = self.scenario_id
        for name in ("counts", "alice_values", "bob_values"):
            value = getattr(self, name)
            if not isinstance(value, list | tuple) or len(value) != 3 or not all(_is_int(v) for v in value):
                raise ScenarioError(f"{sid}: {name} must be 3 integers (book, hat, ball), got {quote(value)}", name)
            object.__setattr__(self, name, tuple(value))
        if not all(1 <= c <= 4 for c in self.counts):
            raise ScenarioError(f"{sid}: every item count must lie in 1..4, got {self.counts}", "counts")
        if not 5 <= sum(self.counts) <= 7:
            raise ScenarioError(f"{sid}: there must be 5-7 items in total, got {sum(self.counts)}", "counts")
        for role in (ALICE, BOB):
            values = self.values(role)
            if any(v < 0 for v in values):
                raise ScenarioError(f"{sid}: {role}'s values must be >= 0, got {values}", f"{role}_values")
            total = points(self.counts, values)
            if total != POOL_VALUE:
                raise ScenarioError(
                    f"{sid}: {role}'s values {values} make the pool worth {total:g}, not {POOL_VALUE}", f"{role}_values"
                )
        # The last two rules are about both sides' values together.
        unvalued = [i for i, a, b in zip(ITEMS, self.alice_values, self.bob_values, strict=True) if a == 0 and b == 0]
        if unvalued:
            raise ScenarioError(f"{sid}: every item must be valued by someone; nobody values {unvalued}", "values")
        if not any(a > 0 and b > 0 for a, b in zip(self.alice_values, self.bob_values, strict=True)):
            raise ScenarioError(f"{sid}: at least one item must be valued by both sides", "values")
        check_max_turns(sid, self.max_turns)

    def values(self, agent_id: str) -> tuple[int, int, int]:
        return self.alice_values if agent_id == ALICE else self.bob_values


def value_vectors(counts: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every non-negative integer value vector that makes the pool worth 10, in lexicographic order."""
    return [v for v in itertools.product(range(POOL_VALUE + 1), repeat=len(counts)) if points(counts, v) == POOL_VALUE]


def rewards_for_split(scenario: DndScenario, alice_share: tuple[int, ...]) -> dict[str, float]:
    """Normalised rewards of an agreed split given as alice's share (see the module table)."""
    ref = reference_agreement(scenario.counts, scenario.alice_values, scenario.bob_values)
    bob_share = complement(alice_share, scenario.counts)
    return {
        ALICE: normalise(points(alice_share, scenario.alice_values), ref.points[0]),
        BOB: normalise(points(bob_share, scenario.bob_values), ref.points[1]),
    }


def value_patterns(item: str, value: int) -> tuple[str, ...]:
    """Patterns that state "my value for `item` is `value`" (see the docs for the exact forms)."""
    item_re = NAMES[item]
    v = rf"(?:{value}|{_NUMBER_WORDS[value]})" if value <= 10 else str(value)
    any_item = "|".join(NAMES.values())
    pair = rf"(?:the\s+)?(?:{any_item})\s*(?:at|=)\s*\w+"
    patterns = [
        rf"\bI\s+value\s+(?:the\s+|each\s+|every\s+|a\s+|one\s+|my\s+)?{item_re}\s*(?:at|=|as)\s*{v}\b",
        # later in a list: "I value books at 1, hats at 3 and balls at 2"
        rf"\bI\s+value\s+{pair}(?:\s*,\s*(?:and\s+)?{pair})*\s*(?:,\s*)?(?:and\s+)?(?:the\s+)?{item_re}\s*(?:at|=)\s*{v}\b",
        rf"\b{item_re}\s+(?:are|is)\s+worth\s+{v}\s*(?:points?\b|pts?\b|each\b|apiece\b|(?:to|for)\s+me\b)",
        rf"\bmy\s+(?:value|points?|score)\s+(?:for|of|per)\s+(?:the\s+|each\s+|a\s+|one\s+)?{item_re}\s*(?:is|are|=)\s*{v}\b",
        rf"\b{item_re}\s*[=:]\s*{v}\s*(?:points?|pts?)\b",
        rf"\b(?:a|each|one|every)\s+{item_re}\s+(?:gives|is\s+worth|is|=)\s+(?:me\s+)?{v}\s*(?:points?|pts?)\b",
    ]
    if value == 0:
        patterns += [
            rf"\b{item_re}\s+(?:are|is)\s+(?:worthless|useless|worth\s+nothing|of\s+no\s+(?:use|value))\s+(?:to|for)\s+me\b",
            rf"\bI\s+(?:don't|do\s+not)\s+value\s+(?:the\s+|any\s+)?{item_re}\b",
        ]
    return tuple(patterns)


_COMMANDS = {
    "propose": args_command(r"PROPOS(?:E|AL)|OFFER", r"propos(?:e|al)|offer"),
    "select": args_command(r"SELECT(?:ION|ED)?", r"select(?:ion|ed)?|final split"),
    "accept": allocation_reply("accept"),
    "no_deal": NO_DEAL,
}
_NATURAL = {"propose": natural_allocation_pattern()}


@register
class DndEnv(CommandReplies, Environment[DndScenario]):
    """Multi-issue item division with a final blind selection (Lewis et al., 2017)."""

    env_id: ClassVar[str] = "dnd-v0"
    scenario_type: ClassVar[type[Scenario]] = DndScenario
    commands: ClassVar[Mapping[str, str]] = _COMMANDS
    reply_example: ClassVar[str] = "`PROPOSE book=1 hat=2 ball=0`"

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return (ALICE, BOB)

    # ---------------------------------------------------------------------------------- scenarios
    @classmethod
    def sample_scenario(cls, rng: random.Random) -> DndScenario:
        """Counts 1-4 each with 5-7 in total; each side's values drawn uniformly among the integer
        vectors worth 10, redrawn until every item is valued by someone and one item by both."""
        while True:
            counts = tuple(rng.randint(1, 4) for _ in ITEMS)
            if 5 <= sum(counts) <= 7:
                break
        vectors = value_vectors(counts)
        while True:
            a, b = rng.choice(vectors), rng.choice(vectors)
            if all(x > 0 or y > 0 for x, y in zip(a, b, strict=True)) and any(
                x > 0 and y > 0 for x, y in zip(a, b, strict=True)
            ):
                break
        return DndScenario(
            scenario_id=f"gen:{rng.getrandbits(32):08x}",
            counts=counts,  # type: ignore[arg-type]
            alice_values=a,  # type: ignore[arg-type]
            bob_values=b,  # type: ignore[arg-type]
        )

    @staticmethod
    def load_dataset(
        path: str | Path | None = None, max_turns: int = 10, skip_bad: bool = False
    ) -> Loaded[DndScenario]:
        """Scenarios from an end-to-end-negotiator file (default: the shared selfplay.txt).

        Two formats are read. Context files (selfplay.txt): pairs of lines `count value count value count
        value`, the first of a pair for alice, the second for bob; one scenario per pair. Dialogue files
        (train/val/test.txt): one dialogue per line with `<input> ... </input>` (the writer's side, played
        by alice) and `<partner_input> ... </partner_input>` (bob); one scenario per line (those files list
        each dialogue from both sides, so each dialogue gives two scenarios with the seats swapped).

        Records are numbered by their (first) line in the file, 1-based, blank lines counted; scenario ids
        are "dealornodeal-<file stem>:<line>". Errors name the file, the line and the field; `skip_bad`
        loads the good records and reports the bad ones (environments/core/data.py)."""
        path = Path(path) if path is not None else dataset_path("dealornodeal", "selfplay.txt")
        if path is None:
            raise DataFileError("dealornodeal/selfplay.txt", "the shared dataset is not present")
        lines = read_text_file(path).splitlines()
        numbered = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
        source = f"dealornodeal-{Path(path).stem}"
        records: list[tuple[int, tuple[str, str]]] = []  # (line number, (alice context, bob context))
        if any("<input>" in line for _, line in numbered):
            for number, line in numbered:
                mine = _INPUT.search(line)
                theirs = _PARTNER_INPUT.search(line)
                records.append((number, (mine.group(1) if mine else None, theirs.group(1) if theirs else None)))
        else:
            if len(numbered) % 2:
                raise DataFileError(
                    path,
                    "odd number of context lines (they come in pairs): the last line has no partner line",
                    record=numbered[-1][0],
                    field="partner_input",
                )
            records = [(numbered[i][0], (numbered[i][1], numbered[i + 1][1])) for i in range(0, len(numbered), 2)]

        def build(contexts: tuple[str | None, str | None], number: int | str) -> DndScenario:
            sides = []
            for field_name, context in zip(("input", "partner_input"), contexts, strict=True):
                if context is None:
                    raise RecordError(field_name, "missing: a dialogue line needs <input> and <partner_input>")
                tokens = context.split(maxsplit=6)  # bounded: a 20 MB line is not split into millions of tokens
                if len(tokens) != 6:
                    many = "more than 6" if len(tokens) > 6 else str(len(tokens))
                    raise RecordError(
                        field_name, f"expected 6 whole numbers (count value x 3), got {many}: {show(context, 60)}"
                    )
                bad = next((t for t in tokens if not (t.isascii() and t.isdigit() and len(t) <= _MAX_DIGITS)), None)
                if bad is not None:
                    raise RecordError(field_name, f"expected 6 whole numbers (count value x 3), got {show(bad)}")
                sides.append([int(t) for t in tokens])
            a, b = sides
            if a[0::2] != b[0::2]:
                raise RecordError("counts", f"the two sides disagree on the counts: {a[0::2]} vs {b[0::2]}")
            return DndScenario(
                scenario_id=f"{source}:{number}",
                counts=tuple(a[0::2]),  # type: ignore[arg-type]
                alice_values=tuple(a[1::2]),  # type: ignore[arg-type]
                bob_values=tuple(b[1::2]),  # type: ignore[arg-type]
                max_turns=max_turns,
            )

        # A context line is "count value count value count value": counts and alice's values on the input line,
        # bob's values on the partner line.
        fields = {
            "counts": "input.counts",
            "alice_values": "input.values",
            "bob_values": "partner_input.values",
            "values": "input.values and partner_input.values",
        }
        return load_records(path, records, build, skip_bad=skip_bad, what="scenario", fields=fields)

    # ------------------------------------------------------------------------------ action grammar
    def action_spec(self, agent_id: str) -> ActionSpec:
        return ActionSpec(
            kinds={
                "message": "say something without making a move",
                "propose": "propose a split, stating what YOU get of each item",
                "accept": "accept the other side's standing proposal (then both sides select)",
                "no_deal": "end without a deal (both score 0); in the selection phase: declare no agreement",
                "select": "selection phase only: state the agreed split, what YOU get of each item",
            },
            grammar=(
                "Write your message, then end with exactly one command line: `PROPOSE book=<n> hat=<n> ball=<n>` "
                "(what you get; the other side gets the rest), `ACCEPT` or `NO DEAL`. After a proposal is "
                "accepted (or the turns run out) both sides answer with `SELECT book=<n> hat=<n> ball=<n>`, the "
                "split they believe was agreed, again counting what YOU get; the deal only stands if the two "
                "selections add up to the whole pool. A reply without a command line is sent as a plain message."
            ),
            examples=(
                "I really need the books.\nPROPOSE book=2 hat=0 ball=1",
                "That is fair.\nACCEPT",
                "SELECT book=1 hat=2 ball=0",
            ),
        )

    def _selecting(self) -> bool:
        return getattr(self, "_phase", "negotiate") == "select"

    def _pool(self) -> tuple[int, ...]:
        return self._scenario.counts if self._scenario is not None else (4, 4, 4)

    def _without_command(self, agent_id: str, text: str) -> Action | ParseError:
        natural = find_last_command(text, _NATURAL)
        if natural is not None:
            counts = parse_counts(command_args(natural.groups), NAMES, self._pool())
            if isinstance(counts, tuple):
                kind = "select" if self._selecting() else "propose"
                return Action(agent_id, kind, squeeze(text), to_payload(ITEMS, counts))
        return Action(agent_id, "message", squeeze(text))

    def _parse_command(self, agent_id: str, match: CommandMatch) -> Action | ParseError:
        selecting, pool = self._selecting(), self._pool()
        if match.kind in ("propose", "select"):
            counts = parse_counts(command_args(match.groups), NAMES, pool)
            if isinstance(counts, str):
                word = match.kind.upper()
                return ParseError(
                    f"`{word}` needs what you get of every item, e.g. `{word} book=1 hat=2 ball=0`: {counts}"
                )
            # A stated split means the phase's move: a selection in the selection phase, else a proposal.
            kind = "select" if selecting else "propose"
            return Action(agent_id, kind, match.message, to_payload(ITEMS, counts))
        if match.kind == "accept":
            standing = self._standing_offer(agent_id)
            if standing is not None and not selecting:
                # Echo the accepted split (own side) so that restating it is not mistaken for a leak.
                return Action(agent_id, "accept", match.message, to_payload(ITEMS, complement(standing, pool)))
        return Action(agent_id, match.kind, match.message)

    def private_facts(self, agent_id: str) -> tuple[PrivateFact, ...]:
        values = self.scenario.values(agent_id)
        return tuple(
            PrivateFact(
                f"value:{item}", f"{agent_id}'s points per {item} ({value})", patterns=value_patterns(item, value)
            )
            for item, value in zip(ITEMS, values, strict=True)
        )

    # ---------------------------------------------------------------------------------------- rules
    def _reset(self, scenario: DndScenario) -> list[Event]:
        self._turn = 0
        self._phase = "negotiate"
        self._standing: dict[str, tuple[int, ...] | None] = {ALICE: None, BOB: None}  # proposer's own share
        self._accepted: tuple[int, ...] | None = None  # alice's share in the accepted proposal
        self._selections: dict[str, tuple[int, ...] | None] = {}
        self._ending = "max_turns"
        counts = dict(zip(ITEMS, scenario.counts, strict=True))
        pool = describe_allocation(ITEMS, scenario.counts, PLURAL)
        events: list[Event] = []
        for role in (ALICE, BOB):
            values = dict(zip(ITEMS, scenario.values(role), strict=True))
            worth = ", ".join(f"{PLURAL[i]} {v} each" for i, v in values.items())
            text = (
                f"You are {role}. On the table: {pool}. You and the other side split them; every item goes to "
                f"one of you.\nYour private points: {worth} (the whole pool is worth {POOL_VALUE} to you; the other "
                "side values the items differently and does not know your values). Never reveal your values.\n"
                f"Negotiate for up to {scenario.max_turns} turns, then both sides state the agreed split; "
                "if the two statements do not match, both score 0."
            )
            events.append(
                Observation(
                    role,
                    text,
                    {
                        "role": role,
                        "private": {"values": values},
                        "public": {"counts": dict(counts), "items": list(ITEMS), "max_turns": scenario.max_turns},
                    },
                    private=True,
                )
            )
        events.append(self._turn_for(ALICE))
        return events

    def _other(self, agent_id: str) -> str:
        return BOB if agent_id == ALICE else ALICE

    def _split_text(self, proposer: str, share: tuple[int, ...], to: str) -> str:
        rest = complement(share, self.scenario.counts)
        them, you = (describe_allocation(ITEMS, s, PLURAL) for s in (share, rest))
        return (
            f"{proposer} gets {them}, you get {you}" if proposer != to else f"you get {them}, the other side gets {you}"
        )

    def _turn_for(self, agent_id: str) -> Event:
        standing = self._standing[self._other(agent_id)]
        allowed = ["message", "propose", "no_deal"] + (["accept"] if standing is not None else [])
        text = f"Your turn ({self._turn + 1}/{self.scenario.max_turns})."
        if standing is not None:
            text += f" Standing proposal from {self._other(agent_id)}: {self._split_text(self._other(agent_id), standing, agent_id)}."
        pending = to_payload(ITEMS, standing) if standing is not None else None
        return self._request_turn(
            agent_id,
            allowed,
            text,
            {"turn": self._turn, "max_turns": self.scenario.max_turns, "pending_offer": pending},
        )

    def _start_selection(self, events: list[Event]) -> list[Event]:
        self._phase = "select"
        why = "A proposal was accepted." if self._accepted is not None else "The negotiation turns are over."
        for role in (ALICE, BOB):
            events.append(
                self._request_turn(
                    role,
                    ("select", "no_deal"),
                    f"{why} State the split you believe was agreed, counting what YOU get: "
                    "`SELECT book=<n> hat=<n> ball=<n>`, or `NO DEAL`. The deal only stands if both statements match.",
                    {
                        "turn": self._turn,
                        "max_turns": self.scenario.max_turns,
                        "pending_offer": None,
                        "phase": "select",
                        "proposal_accepted": self._accepted is not None,
                    },
                )
            )
        return events

    def _validate(self, action: Action) -> str | None:
        if action.kind == "message" and not action.text.strip():
            return "a message cannot be empty"
        if action.kind in ("propose", "select"):
            return check_payload(ITEMS, self.scenario.counts, action.payload)
        if action.kind == "accept" and action.payload:
            standing = self._standing[self._other(action.agent_id)]
            mine = from_payload(ITEMS, action.payload)
            if standing is None or mine != complement(standing, self.scenario.counts):
                return "an accept must refer to the other side's standing proposal"
        return None

    def _apply(self, action: Action) -> list[Event]:
        actor, other = action.agent_id, self._other(action.agent_id)
        if self._phase == "select":
            share = from_payload(ITEMS, action.payload) if action.kind == "select" else None
            self._selections[actor] = share
            if len(self._selections) == 2:
                return self._finish()
            return []
        self._turn += 1
        said = f"{actor} says: {action.text}" if action.text else f"{actor}:"
        if action.kind == "propose":
            share = from_payload(ITEMS, action.payload)
            assert share is not None
            self._standing[actor] = share
            note = f"{said}\n[proposes: {self._split_text(actor, share, other)}]"
            relay = self._relay(action, other, note, {"offer": to_payload(ITEMS, share)})
        elif action.kind == "accept":
            standing = self._standing[other]
            assert standing is not None
            self._accepted = standing if other == ALICE else complement(standing, self.scenario.counts)
            mine = complement(standing, self.scenario.counts)
            note = f"{said}\n[accepts your proposal: you get {describe_allocation(ITEMS, standing, PLURAL)}]"
            # The acceptor's own share, which the proposer's deal space reads as the proposer's share.
            return self._start_selection([self._relay(action, other, note, {"accepted": to_payload(ITEMS, mine)})])
        elif action.kind == "no_deal":
            self._ending = "no_deal"
            return self._finish([self._relay(action, other, f"{said}\n[ends the negotiation without a deal]")])
        else:
            relay = self._relay(action, other, said)
        if self._turn >= self.scenario.max_turns:
            return self._start_selection([relay])
        return [relay, self._turn_for(other)]

    def _on_retries_exhausted(self, agent_id: str) -> list[Event]:
        if self._phase == "select":
            # Rule: a side that cannot state a valid selection is taken to select no deal.
            self._selections[agent_id] = None
            return self._finish() if len(self._selections) == 2 else []
        # Rule: the negotiation turn is forfeited and passes to the other side (it still counts).
        self._turn += 1
        if self._turn >= self.scenario.max_turns:
            return self._start_selection([])
        return [self._turn_for(self._other(agent_id))]

    def _compute_outcome(self) -> Outcome:
        s = self.scenario
        ref = reference_agreement(s.counts, s.alice_values, s.bob_values)
        alice, bob = self._selections.get(ALICE), self._selections.get(BOB)
        deal: tuple[int, ...] | None = None
        if self._ending != "no_deal":
            if alice is None or bob is None:
                self._ending = "no_deal_selected"
            elif complement(alice, s.counts) != bob:
                self._ending = "mismatch"
            else:
                deal, self._ending = alice, "deal"
        if deal is None:
            rewards, utilities = {ALICE: 0.0, BOB: 0.0}, {ALICE: 0.0, BOB: 0.0}
            pareto, envy_free = None, None
        else:
            rewards = rewards_for_split(s, deal)
            bob_share = complement(deal, s.counts)
            utilities = {ALICE: points(deal, s.alice_values), BOB: points(bob_share, s.bob_values)}
            pareto, envy_free = deal_quality(deal, s.counts, s.alice_values, s.bob_values)
        return Outcome(
            env_id=self.env_id,
            scenario_id=s.scenario_id,
            agreement=deal is not None,
            rounds=self._turn,
            roles={r: RoleOutcome(rewards[r], utilities[r]) for r in (ALICE, BOB)},
            deal={
                ALICE: dict(zip(ITEMS, deal, strict=True)),
                BOB: dict(zip(ITEMS, complement(deal, s.counts), strict=True)),
            }
            if deal is not None
            else None,
            pareto_optimal=pareto,
            envy_free=envy_free,
            metrics={
                "ending": self._ending,
                "proposal_accepted": self._accepted is not None,
                "accepted_split": {
                    ALICE: dict(zip(ITEMS, self._accepted, strict=True)),
                    BOB: dict(zip(ITEMS, complement(self._accepted, s.counts), strict=True)),
                }
                if self._accepted is not None
                else None,
                "selections": {r: (list(v) if v is not None else None) for r, v in self._selections.items()},
                "reference_points": {ALICE: ref.points[0], BOB: ref.points[1]},
                "reference_basis": ref.basis,
            },
        )

    # -------------------------------------------------------------------------------- code agents
    @staticmethod
    def deal_space(agent_id: str, private_view: Mapping[str, Any]) -> DealSpace:
        counts = [int(private_view["public"]["counts"][i]) for i in ITEMS]
        values = [int(private_view["private"]["values"][i]) for i in ITEMS]
        stated = [f"{PLURAL[i]} at {v}" for i, v in zip(ITEMS, values, strict=True)]
        text = f"I value {', '.join(stated[:-1])} and {stated[-1]}."
        return ItemDealSpace(
            ITEMS,
            counts,
            values,
            propose_kind="propose",
            accept_kind="accept",
            quit_kind="no_deal",
            select_kind="select",
            plural=PLURAL,
            private_text=text,
        )
