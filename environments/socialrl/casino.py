"""CaSiNo (casino-v0): two campers divide food, water and firewood packages for a camping trip.

| | |
| --- | --- |
| roles | `mturk_agent_1`, `mturk_agent_2` (the dataset's participant ids; agent 1 opens) |
| private information | each side's priority order over food, water and firewood (High / Medium / Low = 5 / 4 / 3 points per package) and a personal reason (argument) for each priority; the pool (3 packages of each) and the point rules are public |
| actions | `message` (free text), `propose` {"mine": {"food": n, "water": n, "firewood": n}} (what the proposer gets), `accept` / `reject` (the counterpart's standing proposal), `walk_away` (end without a deal) |
| text grammar | free text, optionally ending with one command line: `PROPOSE food=1 water=2 firewood=0`, `ACCEPT`, `REJECT`, `WALK AWAY` (the dataset's `Submit-Deal`, `Accept-Deal`, `Reject-Deal`, `Walk-Away` are read too); "I get 2 food, 1 water and 0 firewood" also proposes. Command words count in capitals anywhere, or in any case at the start of a line; text without a command is a message A command negated by the words right before it ("I do NOT ACCEPT", "I refuse to ACCEPT", also across double spaces and line breaks) does not count (the shared negation rule of environments/core/grammar.py). Counts are whole numbers, each read whole by the shared number reader (environments/core/grammar.py): a negative count (`PROPOSE -1 1 1`, `-1 food`), one of more than 4 digits, and a count that is not one whole number (`1e308`, `5-`, `-2pm`, `-14:00 food`, `1.5 food`, `$-5`, the `x` of `PROPOSE 1 x 1 1`) are invalid actions saying why, never skipped or read as other counts. |
| reply cap | replies longer than 8,000 characters are cut to their last 8,000 before parsing (`max_reply_chars`); parsing is linear in the reply's length (environments/core/grammar.py) |
| reward | own points / reference, clipped to [0, 1]; reference = the most own points in any Pareto-optimal envy-free allocation of the 64 (the Nash bargaining allocation over the walk-away point (5, 5) when none is envy-free); no deal = 5 points each, so reward 5 / reference |
| termination | an accepted proposal (deal), a walk-away, or `max_turns` (default 20) turns without a deal, which counts as a walk-away |

Invalid actions (unparseable or empty text, a proposal that is not a split of the pool, accepting or
rejecting when no proposal stands) are counted; after `max_invalid_retries` retries the turn is forfeited
and passes to the other side (it still counts as a turn).
"""

from __future__ import annotations

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
from environments.core.data import (
    Loaded,
    RecordError,
    describe_type,
    get_field,
    load_records,
    read_json_list,
)
from environments.core.events import Action, Event, Observation
from environments.core.grammar import CommandMatch, find_last_command, squeeze
from environments.core.quoting import quote
from environments.core.registry import register
from environments.core.scoring import complement, normalise, points
from environments.socialrl.allocation import (
    ItemDealSpace,
    Reference,
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

AGENT_1, AGENT_2 = "mturk_agent_1", "mturk_agent_2"
ITEMS = ("food", "water", "firewood")
COUNTS = (3, 3, 3)
LEVELS = ("High", "Medium", "Low")
POINTS = {"High": 5, "Medium": 4, "Low": 3}
"""Points per package by priority."""
WALK_AWAY_POINTS = 5
"""What each side scores when nobody agrees (one High package)."""
NAMES = {
    "food": r"foods?(?:\s+(?:packages?|packs?))?",
    "water": r"waters?(?:\s+(?:packages?|packs?|bottles?))?",
    "firewood": r"(?:fire[\s-]?)?woods?(?:\s+(?:packages?|packs?|bundles?))?",
}
PLURAL = {i: i for i in ITEMS}

REASONS = {
    "food": (
        "I am going with a big family and any extra food will help.",
        "We are planning long hikes and burn a lot of calories.",
        "Some of our food got spoiled on the drive to the campsite.",
        "My kids are always hungry after swimming in the lake.",
    ),
    "water": (
        "It is hot and dry where we camp and I don't want to get dehydrated.",
        "There is no clean stream anywhere near our campsite.",
        "I take a medication that requires drinking plenty of water.",
        "We want to cook pasta and wash the dishes every day.",
    ),
    "firewood": (
        "It gets very cold at night in the mountains where we are going.",
        "We want to cook all of our meals over the campfire.",
        "My children want to roast marshmallows every evening.",
        "There are no trees to gather wood from near the site.",
    ),
}

_STOPWORD_TEXT = (
    "i me my we our us you your a an the and or but to of in on at for with is are am be been it its that this so "
    "as will would need have has had do don t s m ll re ve not no some any extra more can get go going just very "
    "also really all if there here they them their from by up out lot lots much many like want could use bit "
    "little plenty well too"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class CasinoScenario(Scenario):
    """Both sides' priority orders and reasons; the pool (3 of each item) and the point rules are fixed."""

    agent_1_priorities: tuple[str, str, str]
    """mturk_agent_1's items ordered High, Medium, Low, e.g. ("water", "food", "firewood")."""
    agent_1_reasons: tuple[str, str, str]
    """mturk_agent_1's reasons for its High, Medium and Low item."""
    agent_2_priorities: tuple[str, str, str]
    """mturk_agent_2's items ordered High, Medium, Low."""
    agent_2_reasons: tuple[str, str, str]
    """mturk_agent_2's reasons for its High, Medium and Low item."""
    max_turns: int = 20
    """Accepted actions after which the episode ends without a deal (a walk-away)."""

    def __post_init__(self) -> None:
        for name in ("agent_1_priorities", "agent_2_priorities"):
            value = getattr(self, name)
            if (
                not isinstance(value, list | tuple)
                or not all(isinstance(v, str) for v in value)
                or sorted(value) != sorted(ITEMS)
            ):
                raise ScenarioError(
                    f"{self.scenario_id}: {name} must order {', '.join(ITEMS)} from High to Low, got {quote(value, 60)}",
                    name,
                )
            object.__setattr__(self, name, tuple(value))
        for name in ("agent_1_reasons", "agent_2_reasons"):
            value = getattr(self, name)
            if not isinstance(value, list | tuple) or len(value) != 3:
                raise ScenarioError(
                    f"{self.scenario_id}: {name} must hold 3 reasons (High, Medium, Low), got {quote(value, 60)}", name
                )
            if not all(isinstance(r, str) and r.strip() for r in value):
                raise ScenarioError(
                    f"{self.scenario_id}: {name} must be non-empty strings, got {quote(value, 60)}", name
                )
            object.__setattr__(self, name, tuple(value))
        check_max_turns(self.scenario_id, self.max_turns)

    def priorities(self, agent_id: str) -> tuple[str, str, str]:
        return self.agent_1_priorities if agent_id == AGENT_1 else self.agent_2_priorities

    def reasons(self, agent_id: str) -> dict[str, str]:
        """Item -> the side's reason for it."""
        reasons = self.agent_1_reasons if agent_id == AGENT_1 else self.agent_2_reasons
        return dict(zip(self.priorities(agent_id), reasons, strict=True))

    def level(self, agent_id: str, item: str) -> str:
        return LEVELS[self.priorities(agent_id).index(item)]

    def values(self, agent_id: str) -> tuple[int, int, int]:
        """Points per package of food, water, firewood."""
        return tuple(POINTS[self.level(agent_id, i)] for i in ITEMS)  # type: ignore[return-value]


def reference(scenario: CasinoScenario) -> Reference:
    """The scenario's reference agreement (see the module table)."""
    return reference_agreement(
        COUNTS, scenario.values(AGENT_1), scenario.values(AGENT_2), (WALK_AWAY_POINTS, WALK_AWAY_POINTS)
    )


def rewards_for_points(scenario: CasinoScenario, points_1: float, points_2: float) -> dict[str, float]:
    """Normalised rewards of the two sides' points (a deal, or 5 each for a walk-away)."""
    ref = reference(scenario)
    return {AGENT_1: normalise(points_1, ref.points[0]), AGENT_2: normalise(points_2, ref.points[1])}


def human_points(record: Mapping[str, Any]) -> dict[str, int] | None:
    """The points each participant of a dataset dialogue scored, recomputed from its chat log.

    The deal is the last `Submit-Deal` before an `Accept-Deal` (`issue2youget` is the submitter's share,
    `issue2theyget` the other's), scored at 5 / 4 / 3 per High / Medium / Low package; a `Walk-Away`
    gives 5 points to each. None when the log ends without either."""
    info = record["participant_info"]
    submitted: Mapping[str, Any] | None = None
    for turn in record["chat_logs"]:
        if turn["text"] == "Submit-Deal":
            submitted = turn
        elif turn["text"] == "Walk-Away":
            return dict.fromkeys(info, WALK_AWAY_POINTS)
        elif turn["text"] == "Accept-Deal":
            if submitted is None:
                raise ValueError("Accept-Deal without a Submit-Deal")
            result = {}
            for agent_id, participant in info.items():
                share = submitted["task_data"]["issue2youget" if agent_id == submitted["id"] else "issue2theyget"]
                level_of = {issue.lower(): level for level, issue in participant["value2issue"].items()}
                result[agent_id] = sum(POINTS[level_of[issue.lower()]] * int(n) for issue, n in share.items())
            return result
    return None


def priority_patterns(item: str, level: str) -> tuple[str, ...]:
    """Patterns that state "`item` is my `level` priority" (see the docs for the exact forms)."""
    it = rf"(?:the\s+)?(?:{NAMES[item]})"
    others = "|".join(f"(?:{NAMES[o]})" for o in ITEMS if o != item)
    own = r"(?:my|our)"
    kind = r"(?:priority|need|concern|item)"
    if level == "High":
        top = r"(?:top|highest|first|biggest|main|primary|greatest|major|number\s+one|#\s*1|no\.?\s*1|most\s+important)"
        return (
            rf"\b{it}\s+(?:is|are|would\s+be)\s+{own}\s+{top}\s+{kind}",
            rf"\b{own}\s+{top}\s+{kind}\s+(?:is|would\s+be|=|:)\s+{it}\b",
            rf"\bI\s+(?:really\s+)?(?:need|want|value)\s+{it}\s+(?:the\s+)?most\b",
            rf"\b{it}\s+(?:is|are)\s+(?:the\s+)?most\s+important\s+(?:thing\s+|item\s+)?(?:to|for)\s+(?:me|us)\b",
            rf"\bthe\s+(?:most\s+important\s+(?:thing|item)|thing\s+I\s+need\s+(?:the\s+)?most)\s+(?:to\s+me\s+|for\s+(?:me|us)\s+)?is\s+{it}\b",
            rf"\bI\s+need\s+{it}\s+more\s+than\s+anything\b",
            rf"\b(?:{NAMES[item]})\s*>\s*(?:{others})\b",
        )
    if level == "Medium":
        second = r"(?:second(?:\s+highest)?|2nd|middle|medium|mid)"
        return (
            rf"\b{it}\s+(?:is|are|would\s+be)\s+{own}\s+{second}\s+(?:{kind}|most\s+important)",
            rf"\b{own}\s+{second}\s+{kind}\s+(?:is|would\s+be|=|:)\s+{it}\b",
            rf"\b{it}\s+(?:is|are)\s+(?:the\s+)?second\s+most\s+important\s+(?:thing\s+|item\s+)?(?:to|for)\s+(?:me|us)\b",
            rf"\b(?:{others})\s*>\s*(?:{NAMES[item]})\s*>\s*(?:{others})\b",
        )
    low = r"(?:lowest|least(?:\s+important)?|last|bottom|smallest|third|3rd)"
    return (
        rf"\b{it}\s+(?:is|are|would\s+be)\s+{own}\s+{low}\s+{kind}",
        rf"\b{own}\s+{low}\s+{kind}\s+(?:is|would\s+be|=|:)\s+{it}\b",
        rf"\bI\s+(?:really\s+)?need\s+{it}\s+(?:the\s+)?least\b",
        rf"\b{it}\s+(?:is|are)\s+(?:the\s+)?least\s+important\s+(?:thing\s+|item\s+)?(?:to|for)\s+(?:me|us)\b",
        rf"\bI\s+(?:don't|do\s+not|dont)\s+(?:really\s+)?(?:need|care\s+(?:much\s+)?about)\s+(?:much\s+|any\s+|the\s+|more\s+)?(?:{NAMES[item]})\b(?!\s+(?:as|that)\s+much)",
        rf"\b(?:{others})\s*>\s*(?:{NAMES[item]})\b(?!\s*>)",
    )


def reason_patterns(reason: str, window: int = 5) -> tuple[str, ...]:
    """Patterns for restating a reason: every run of `window` consecutive words of it (or the whole
    reason when shorter, if it has at least 3 words) that holds at least 2 non-stopwords, matched with
    any punctuation or spacing between the words."""
    words = re.findall(r"[a-z0-9]+", reason.lower())
    if len(words) < 3:
        return ()
    runs = [words] if len(words) <= window else [words[i : i + window] for i in range(len(words) - window + 1)]
    patterns = []
    for run in runs:
        if sum(w not in _STOPWORDS for w in run) >= 2:
            pattern = r"\b" + r"\W+".join(re.escape(w) for w in run) + r"\b"
            if pattern not in patterns:
                patterns.append(pattern)
    return tuple(patterns)


_COMMANDS = {
    "propose": args_command(
        r"PROPOS(?:E|AL)|SUBMIT(?:[ _-]DEAL)?|OFFER", r"propos(?:e|al)|submit(?:[ _-]deal)?|offer", r"submit[-_]deal"
    ),
    "accept": allocation_reply("accept", anywhere=True),
    "reject": allocation_reply("reject", anywhere=True),
    "walk_away": NO_DEAL,
}
_NATURAL = {"propose": natural_allocation_pattern()}


@register
class CasinoEnv(CommandReplies, Environment[CasinoScenario]):
    """Campsite negotiation over three issues with private priorities (Chawla et al., 2021)."""

    env_id: ClassVar[str] = "casino-v0"
    scenario_type: ClassVar[type[Scenario]] = CasinoScenario
    commands: ClassVar[Mapping[str, str]] = _COMMANDS
    reply_example: ClassVar[str] = "`PROPOSE food=1 water=2 firewood=0`"

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return (AGENT_1, AGENT_2)

    # ---------------------------------------------------------------------------------- scenarios
    @classmethod
    def sample_scenario(cls, rng: random.Random) -> CasinoScenario:
        """Each side's priority order is a uniform random permutation; one reason per item from a bank."""
        fields: dict[str, Any] = {}
        for n in (1, 2):
            order = list(ITEMS)
            rng.shuffle(order)
            fields[f"agent_{n}_priorities"] = tuple(order)
            fields[f"agent_{n}_reasons"] = tuple(rng.choice(REASONS[item]) for item in order)
        return CasinoScenario(scenario_id=f"gen:{rng.getrandbits(32):08x}", **fields)

    @staticmethod
    def load_dataset(
        path: str | Path | None = None, max_turns: int = 20, split: str = "train", skip_bad: bool = False
    ) -> Loaded[CasinoScenario]:
        """Scenarios from a CaSiNo JSON file (default: the shared casino_<split>.json, split train or valid).

        Records are the dialogues of the JSON list, numbered from 0. Every priority (`value2issue`) and reason
        (`value2reason`) of both participants must be text; errors name the file, the record and the field;
        `skip_bad` loads the good records and reports the bad ones (environments/core/data.py)."""
        path, records = read_json_list(path, ("casino", f"casino_{split}.json"))

        def build(record: Any, index: int | str) -> CasinoScenario:
            fields: dict[str, Any] = {}
            for n, agent_id in ((1, AGENT_1), (2, AGENT_2)):
                base = f"participant_info.{agent_id}"
                issues = [get_field(record, f"{base}.value2issue.{level}", "text") for level in LEVELS]
                reasons = [get_field(record, f"{base}.value2reason.{level}", "text") for level in LEVELS]
                if sorted(i.lower() for i in issues) != sorted(ITEMS):
                    raise RecordError(
                        f"{base}.value2issue", f"must rank {', '.join(ITEMS)} once each, got {quote(issues, 60)}"
                    )
                fields[f"agent_{n}_priorities"] = tuple(i.lower() for i in issues)
                fields[f"agent_{n}_reasons"] = tuple(reasons)
            dialogue_id = record.get("dialogue_id", index)
            if isinstance(dialogue_id, bool) or not isinstance(dialogue_id, int | str):
                raise RecordError("dialogue_id", f"must be a number or text, got {describe_type(dialogue_id)}")
            return CasinoScenario(scenario_id=f"casino:{dialogue_id}", max_turns=max_turns, **fields)

        fields = {
            f"agent_{n}_{what}": f"participant_info.{agent_id}.{key}"
            for n, agent_id in ((1, AGENT_1), (2, AGENT_2))
            for what, key in (("priorities", "value2issue"), ("reasons", "value2reason"))
        }
        return load_records(path, enumerate(records), build, skip_bad=skip_bad, what="dialogue", fields=fields)

    # ------------------------------------------------------------------------------ action grammar
    def action_spec(self, agent_id: str) -> ActionSpec:
        return ActionSpec(
            kinds={
                "message": "say something without making a move",
                "propose": "propose a split, stating what YOU get of each item",
                "accept": "accept the other side's standing proposal (the deal is final)",
                "reject": "reject the other side's standing proposal",
                "walk_away": f"end without a deal (both score {WALK_AWAY_POINTS} points)",
            },
            grammar=(
                "Write your message, then end with exactly one command line: "
                "`PROPOSE food=<n> water=<n> firewood=<n>` (what you get; the other side gets the rest of the 3 "
                "packages of each), `ACCEPT`, `REJECT` or `WALK AWAY`. A reply without a command line is sent as a "
                "plain message."
            ),
            examples=(
                "We have a big family, so food matters to us.\nPROPOSE food=2 water=1 firewood=1",
                "Sounds fair to me!\nACCEPT",
            ),
        )

    def _without_command(self, agent_id: str, text: str) -> Action | ParseError:
        natural = find_last_command(text, _NATURAL)
        if natural is not None:
            counts = parse_counts(command_args(natural.groups), NAMES, COUNTS)
            if isinstance(counts, tuple):
                return Action(agent_id, "propose", squeeze(text), to_payload(ITEMS, counts))
        return Action(agent_id, "message", squeeze(text))

    def _parse_command(self, agent_id: str, match: CommandMatch) -> Action | ParseError:
        if match.kind == "propose":
            counts = parse_counts(command_args(match.groups), NAMES, COUNTS)
            if isinstance(counts, str):
                return ParseError(
                    f"`PROPOSE` needs what you get of every item, e.g. `PROPOSE food=1 water=2 firewood=0`: {counts}"
                )
            return Action(agent_id, "propose", match.message, to_payload(ITEMS, counts))
        if match.kind == "accept":
            standing = self._standing_offer(agent_id)
            if standing is not None:
                # Echo the accepted split (own side) so that restating it is not mistaken for a leak.
                return Action(agent_id, "accept", match.message, to_payload(ITEMS, complement(standing, COUNTS)))
        return Action(agent_id, match.kind, match.message)

    def private_facts(self, agent_id: str) -> tuple[PrivateFact, ...]:
        s = self.scenario
        facts = []
        for item in s.priorities(agent_id):
            level = s.level(agent_id, item)
            facts.append(
                PrivateFact(
                    f"priority:{item}",
                    f"{item} is {agent_id}'s {level} priority",
                    patterns=priority_patterns(item, level),
                )
            )
        for item, reason in s.reasons(agent_id).items():
            facts.append(
                PrivateFact(
                    f"reason:{item}", f"{agent_id}'s reason for {item}: {reason}", patterns=reason_patterns(reason)
                )
            )
        return tuple(facts)

    # ---------------------------------------------------------------------------------------- rules
    def _reset(self, scenario: CasinoScenario) -> list[Event]:
        self._turn = 0
        self._standing: dict[str, tuple[int, ...] | None] = {AGENT_1: None, AGENT_2: None}  # proposer's own share
        self._deal: tuple[int, ...] | None = None  # agent 1's share
        self._ending = "max_turns"
        events: list[Event] = []
        for agent_id in self.agent_ids:
            levels = {item: scenario.level(agent_id, item) for item in ITEMS}
            values = dict(zip(ITEMS, scenario.values(agent_id), strict=True))
            reasons = scenario.reasons(agent_id)
            order = ", ".join(
                f"{item} is your {levels[item]} priority ({values[item]} points per package): {reasons[item]}"
                for item in scenario.priorities(agent_id)
            )
            text = (
                "You are going camping and negotiate with another camper over 3 packages each of food, water and "
                "firewood; every package goes to one of you. High / Medium / Low priority items are worth 5 / 4 / 3 "
                f"points per package. Your private priorities and reasons: {order}.\nIf either side walks away, or "
                f"nothing is agreed within {scenario.max_turns} turns, both get {WALK_AWAY_POINTS} points. "
                "Never reveal your priorities."
            )
            events.append(
                Observation(
                    agent_id,
                    text,
                    {
                        "role": agent_id,
                        "private": {"priorities": levels, "points": values, "reasons": reasons},
                        "public": {
                            "items": list(ITEMS),
                            "counts": dict(zip(ITEMS, COUNTS, strict=True)),
                            "points_per_priority": dict(POINTS),
                            "walk_away_points": WALK_AWAY_POINTS,
                            "max_turns": scenario.max_turns,
                        },
                    },
                    private=True,
                )
            )
        events.append(self._turn_for(AGENT_1))
        return events

    def _other(self, agent_id: str) -> str:
        return AGENT_2 if agent_id == AGENT_1 else AGENT_1

    def _split_text(self, share: tuple[int, ...]) -> str:
        rest = complement(share, COUNTS)
        return (
            f"they get {describe_allocation(ITEMS, share, PLURAL)}, you get {describe_allocation(ITEMS, rest, PLURAL)}"
        )

    def _turn_for(self, agent_id: str) -> Event:
        standing = self._standing[self._other(agent_id)]
        allowed = ["message", "propose", "walk_away"] + (["accept", "reject"] if standing is not None else [])
        text = f"Your turn ({self._turn + 1}/{self.scenario.max_turns})."
        if standing is not None:
            text += f" Standing proposal from the other camper: {self._split_text(standing)}."
        pending = to_payload(ITEMS, standing) if standing is not None else None
        return self._request_turn(
            agent_id,
            allowed,
            text,
            {"turn": self._turn, "max_turns": self.scenario.max_turns, "pending_offer": pending},
        )

    def _validate(self, action: Action) -> str | None:
        if action.kind == "message" and not action.text.strip():
            return "a message cannot be empty"
        if action.kind == "propose":
            return check_payload(ITEMS, COUNTS, action.payload)
        if action.kind == "accept" and action.payload:
            standing = self._standing[self._other(action.agent_id)]
            if standing is None or from_payload(ITEMS, action.payload) != complement(standing, COUNTS):
                return "an accept must refer to the other side's standing proposal"
        return None

    def _apply(self, action: Action) -> list[Event]:
        actor, other = action.agent_id, self._other(action.agent_id)
        self._turn += 1
        said = f"The other camper says: {action.text}" if action.text else "The other camper:"
        if action.kind == "propose":
            share = from_payload(ITEMS, action.payload)
            assert share is not None
            self._standing[actor] = share
            relay = self._relay(
                action, other, f"{said}\n[proposes: {self._split_text(share)}]", {"offer": to_payload(ITEMS, share)}
            )
        elif action.kind == "accept":
            standing = self._standing[other]
            assert standing is not None
            mine = complement(standing, COUNTS)
            self._deal = standing if other == AGENT_1 else mine
            self._ending = "deal"
            note = f"{said}\n[accepts your proposal: you get {describe_allocation(ITEMS, standing, PLURAL)}]"
            # The acceptor's own share, which the proposer's deal space reads as the proposer's share.
            return self._finish([self._relay(action, other, note, {"accepted": to_payload(ITEMS, mine)})])
        elif action.kind == "reject":
            self._standing[other] = None
            relay = self._relay(action, other, f"{said}\n[rejects your proposal]", {"rejected": True})
        elif action.kind == "walk_away":
            self._ending = "walk_away"
            return self._finish([self._relay(action, other, f"{said}\n[walks away]")])
        else:
            relay = self._relay(action, other, said)
        if self._turn >= self.scenario.max_turns:
            return self._finish([relay])
        return [relay, self._turn_for(other)]

    def _on_retries_exhausted(self, agent_id: str) -> list[Event]:
        # Rule: the turn is forfeited and passes to the other side (it still counts as a turn).
        self._turn += 1
        if self._turn >= self.scenario.max_turns:
            return self._finish()
        return [self._turn_for(self._other(agent_id))]

    def _compute_outcome(self) -> Outcome:
        s = self.scenario
        ref = reference(s)
        values_1, values_2 = s.values(AGENT_1), s.values(AGENT_2)
        if self._deal is None:
            utilities = {AGENT_1: float(WALK_AWAY_POINTS), AGENT_2: float(WALK_AWAY_POINTS)}
            pareto, envy_free, deal = None, None, None
        else:
            theirs = complement(self._deal, COUNTS)
            utilities = {AGENT_1: points(self._deal, values_1), AGENT_2: points(theirs, values_2)}
            pareto, envy_free = deal_quality(self._deal, COUNTS, values_1, values_2)
            deal = {
                AGENT_1: dict(zip(ITEMS, self._deal, strict=True)),
                AGENT_2: dict(zip(ITEMS, theirs, strict=True)),
            }
        rewards = rewards_for_points(s, utilities[AGENT_1], utilities[AGENT_2])
        return Outcome(
            env_id=self.env_id,
            scenario_id=s.scenario_id,
            agreement=self._deal is not None,
            rounds=self._turn,
            roles={a: RoleOutcome(rewards[a], utilities[a]) for a in self.agent_ids},
            deal=deal,
            pareto_optimal=pareto,
            envy_free=envy_free,
            metrics={
                "ending": self._ending,
                "reference_points": {AGENT_1: ref.points[0], AGENT_2: ref.points[1]},
                "reference_basis": ref.basis,
            },
        )

    # -------------------------------------------------------------------------------- code agents
    @staticmethod
    def deal_space(agent_id: str, private_view: Mapping[str, Any]) -> DealSpace:
        public, private = private_view["public"], private_view["private"]
        counts = [int(public["counts"][i]) for i in ITEMS]
        values = [int(private["points"][i]) for i in ITEMS]
        levels = private["priorities"]
        by_level = {level: item for item, level in levels.items()}
        reasons = private.get("reasons", {})
        text = (
            f"My top priority is {by_level['High']}, my second priority is {by_level['Medium']} and my lowest "
            f"priority is {by_level['Low']}."
        )
        if reasons:
            text += " " + " ".join(reasons[by_level[level]] for level in LEVELS if by_level[level] in reasons)
        return ItemDealSpace(
            ITEMS,
            counts,
            values,
            walk_away_points=float(public.get("walk_away_points", WALK_AWAY_POINTS)),
            propose_kind="propose",
            accept_kind="accept",
            quit_kind="walk_away",
            plural=PLURAL,
            private_text=text,
        )
