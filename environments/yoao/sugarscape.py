"""YOAO Sugarscape with negotiated trade (`sugarscape-v0`): two neighbouring agents negotiate one trade.

The registered environment is one *encounter*: the negotiation between two agents of a Sugarscape world
that stand on von Neumann neighbouring cells. The world around it (growback, movement, harvest,
metabolism, ageing, death; environments/yoao/sugarscape_core.py) is rule-based and vectorised, so only
encounters cost LLM calls; `run_simulation` runs a whole world, negotiating every meeting through this
environment when agents are given, by the built-in MRS rule otherwise.

| aspect | rule |
| --- | --- |
| roles | "trader_a" and "trader_b", two agents of the world (a is the one on the left / upper cell). |
| private information | Each trader's own sugar and spice stocks, its metabolisms (sugar and spice burnt per tick), its origin identity (altruist / exploiter / survivor) and identity leaning in [-1, 1]. Nothing about the counterpart is revealed by the environment; traders may share (or misstate) their holdings in small talk. Leakage: a trader's stock numbers, or its origin word, in its own messages. |
| actions | Small talk: `message` (free text; optional payload {"share": {"sugar", "spice", "metabolism_sugar", "metabolism_spice"}} for code agents). Intent: `intent` {"trade": bool}. Offers: `offer` {"give_resource": "sugar" or "spice", "give": X, "get": Y} = "I give X of give_resource for Y of the other resource", or `pass`. Execution: `accept` or `reject` the offer on the table. Reflection: `reflect` {"delta": d}, the shift of the trader's own identity leaning. Model text: any text is a message; `INTENT: TRADE` / `INTENT: NO TRADE`; `OFFER: GIVE 3 SUGAR FOR 5 SPICE`; `PASS`; `ACCEPT` / `REJECT`; `REFLECT: +0.1`. A command negated by the words right before it ("I do NOT ACCEPT", "I refuse to ACCEPT", also across double spaces and line breaks) does not count (the shared negation rule of environments/core/grammar.py). Amounts and deltas are read whole by the shared number reader (environments/core/grammar.py): `OFFER: GIVE -3 ...`, `GIVE 1e3 ...`, `GIVE 3 5 ...`, `REFLECT: 5e-2`, `REFLECT: 0.05/2` are invalid actions saying why; amounts are whole numbers in [0, 1,000,000] (`MAX_STOCK`), deltas lie in [-2, 2]. |
| reply cap | replies longer than 8,000 characters are cut to their last 8,000 before parsing (`max_reply_chars`); parsing is linear in the reply's length (environments/core/grammar.py) |
| protocol | Small talk, 2 rounds (a, b, a, b) -> intent (both at once; the encounter goes on only if both say trade) -> offers, 2 rounds (a, b, a, b); each offer replaces the one on the table -> execution (both at once, on the last offer made; both must accept) -> reflection (both at once). 14 actions at most. |
| execution | Resources move atomically, and only if after the exchange no stock is below 0 (otherwise: no trade, ending "infeasible"). |
| reward | W = sugar^(ms/(ms+mp)) * spice^(mp/(ms+mp)) (Cobb-Douglas welfare). W_best = the most welfare the trader could reach by any integer exchange that leaves the counterpart at least as well off as without trading (the best individually rational deal for it). reward = clip((W_after - W_before) / (W_best - W_before), 0, 1); when W_best = W_before (no exchange can help it without hurting the counterpart) reward = 1 if W_after >= W_before else 0. No trade gives 0 (or 1 in that degenerate case); a trade that lowers welfare gives 0. `utility` = W_after - W_before. |
| identity | Each trader's leaning after the encounter = clip(leaning + delta, -1, 1); labels: good-leaning > 0.3, bad-leaning < -0.3, else mixed. |
| termination | After the reflection; an encounter always ends (at most 14 accepted actions, each turn retried at most `max_invalid_retries` times). |

Invalid actions: malformed text, an offer of amounts that are not whole numbers >= 0 (or both 0), an
offer giving more than the offerer holds, a non-numeric reflection: rejected, counted, retried up to
`max_invalid_retries` times. Then the environment's rule applies: in small talk the trader stays silent;
its intent counts as NO TRADE; in the offer phase or at execution the encounter ends without a trade
(ending "forfeit" / the offer counts as rejected); its reflection is 0. Resources can never go negative.

*Reference trade.* `metrics["reference_trade"]` is what the Epstein-Axtell MRS rule (`mrs_trade`) would
exchange between the two true endowments; rule-based traders (agents/yoao/sugarscape_agents.py) that share
their holdings reach exactly that deal, so a world negotiated by them equals the built-in MRS path.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
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
)
from environments.core.events import Action, Event, Notification, NotificationKind, Observation
from environments.core.grammar import (
    NUMBER,
    NumberError,
    cap_reply,
    check_number,
    clean,
    find_last_command,
    negated_before,
    normalise_text,
    own_line,
    read_number,
    squeeze,
)
from environments.core.quoting import quote
from environments.core.registry import register
from environments.core.runtime import Agent, EpisodeSpec, run_episodes
from environments.yoao.sugarscape_core import (
    MAX_STOCK,
    OLD_AGE,
    ORIGIN_LEANING,
    ORIGINS,
    STARVATION,
    AgentInit,
    DeathRecord,
    SugarscapeConfig,
    SugarscapeWorld,
    TickReport,
    best_deal,
    clip_leaning,
    generate_sugar_map,
    gini,
    leaning_label,
    load_sugar_map,
    mrs,
    mrs_trade,
    unit_exchange,
    welfare,
)

__all__ = [
    "MAX_STOCK",
    "OLD_AGE",
    "ORIGINS",
    "ORIGIN_LEANING",
    "STARVATION",
    "AgentInit",
    "DeathRecord",
    "SimulationResult",
    "SugarscapeConfig",
    "SugarscapeWorld",
    "TickReport",
    "TradeEncounter",
    "TradeScenario",
    "TraderInfo",
    "TraderState",
    "best_deal",
    "clip_leaning",
    "generate_sugar_map",
    "gini",
    "leaning_label",
    "load_sugar_map",
    "mrs",
    "mrs_trade",
    "run_simulation",
    "run_simulation_async",
    "unit_exchange",
    "welfare",
]

TRADER_A = "trader_a"
TRADER_B = "trader_b"
SEATS = (TRADER_A, TRADER_B)
RESOURCES = ("sugar", "spice")
SHARE_KEYS = ("sugar", "spice", "metabolism_sugar", "metabolism_spice")
"""What a `message` payload may share about its sender."""
TALK, INTENT, OFFER, EXECUTE, REFLECT = "talk", "intent", "offer", "execute", "reflect"
SCHEDULE: tuple[tuple[str, tuple[str, ...], int], ...] = (
    (TALK, (TRADER_A,), 1),
    (TALK, (TRADER_B,), 1),
    (TALK, (TRADER_A,), 2),
    (TALK, (TRADER_B,), 2),
    (INTENT, SEATS, 1),
    (OFFER, (TRADER_A,), 1),
    (OFFER, (TRADER_B,), 1),
    (OFFER, (TRADER_A,), 2),
    (OFFER, (TRADER_B,), 2),
    (EXECUTE, SEATS, 1),
    (REFLECT, SEATS, 1),
)
"""The encounter's steps: (phase, seats asked at once, round)."""
PHASE_KINDS: dict[str, tuple[str, ...]] = {
    TALK: ("message",),
    INTENT: ("intent",),
    OFFER: ("offer", "pass"),
    EXECUTE: ("accept", "reject"),
    REFLECT: ("reflect",),
}
MAX_TURNS = sum(len(seats) for _, seats, _ in SCHEDULE)

_AMOUNT = NUMBER
"""An amount token: the shared lone-number token (environments/core/grammar.py), the whole number-like run
with its sign, so that the shared reader reads it whole or says why "-3", "1e3" or "3 5" is not an amount."""
_DELTA = NUMBER
MAX_DELTA = 2.0
"""Largest |delta| a reflection may state (leanings live in [-1, 1])."""
# Grammars match normalised text (environments/core/grammar.py): whitespace runs are one character, so the
# optional single spaces below cannot backtrack over a run; negated commands ("I will not ACCEPT") do not count.
_PATTERNS: dict[str, str] = {
    # Structured commands (a keyword followed by numbers) are read in any case; bare words count when
    # capitalised anywhere, or in lower case on a line of their own, so that prose such as "I would
    # accept that if..." stays a message (the project's grammar convention, environments/core/grammar.py).
    "offer": (
        rf"\boffer ?:? ?(?:i )?(?:give )?(?P<give>{_AMOUNT}) ?(?P<gres>sugar|spice) "
        rf"(?:for|in exchange for|to get|and get) (?P<get>{_AMOUNT}) ?(?P<getres>sugar|spice)"
    ),
    "pass": r"(?-i:\bPASS(?:ES)?\b)|" + own_line(r"(?:i )?pass"),
    "accept": r"(?-i:\bACCEPT(?:ED|S)?\b)|" + own_line(r"(?:i )?accept(?: (?:your|the|this) offer)?"),
    "reject": r"(?-i:\b(?:REJECT|DECLINE|REFUSE)(?:ED|S|D)?\b)|"
    + own_line(r"(?:i )?(?:reject|decline|refuse)(?: (?:your|the|this) offer)?"),
    "intent": r"\bintent ?:? ?(?P<value>no[ _-]?trade|trade|yes|no)\b",
    "reflect": rf"\breflect ?:? ?(?P<delta>{_DELTA})",
}
_BARE_INTENT = re.compile(r"(?P<value>no[ _-]?trade|trade|yes|no) ?[.!]?", re.IGNORECASE)
_SAY = re.compile(r"^(?:say|message) ?: ?", re.IGNORECASE)


# ------------------------------------------------------------------------------------------- scenario
def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class TraderState:
    """One trader's private state at the start of an encounter."""

    sugar: int
    spice: int
    metabolism_sugar: int
    metabolism_spice: int
    origin: str = "survivor"
    """Origin identity: altruist, exploiter or survivor."""
    leaning: float | None = None
    """Identity leaning in [-1, 1]; None: the origin's starting leaning (+0.8 / -0.8 / 0)."""

    def __post_init__(self) -> None:
        for name in ("sugar", "spice"):
            value = getattr(self, name)
            if not _is_int(value) or not 0 <= value <= MAX_STOCK:
                raise ScenarioError(
                    f"sugarscape: {name} must be a whole number in [0, {MAX_STOCK:,}], got {quote(value)}"
                )
        for name in ("metabolism_sugar", "metabolism_spice"):
            value = getattr(self, name)
            if not _is_int(value) or not 1 <= value <= MAX_STOCK:
                raise ScenarioError(
                    f"sugarscape: {name} must be a whole number in [1, {MAX_STOCK:,}], got {quote(value)}"
                )
        if not isinstance(self.origin, str) or self.origin not in ORIGINS:
            raise ScenarioError(f"sugarscape: origin must be one of {', '.join(ORIGINS)}, got {quote(self.origin)}")
        leaning = ORIGIN_LEANING[self.origin] if self.leaning is None else self.leaning
        if check_number(leaning, what="leaning", minimum=-1.0, maximum=1.0) is not None:
            raise ScenarioError(f"sugarscape: leaning must be a number in [-1, 1], got {quote(leaning)}")
        object.__setattr__(self, "leaning", float(leaning))

    @property
    def bundle(self) -> tuple[int, int, int, int]:
        """(sugar, spice, sugar metabolism, spice metabolism), the form `mrs_trade` and `best_deal` take."""
        return self.sugar, self.spice, self.metabolism_sugar, self.metabolism_spice

    @property
    def welfare(self) -> float:
        return welfare(*self.bundle)


@dataclass(frozen=True)
class TradeScenario(Scenario):
    """An encounter: both traders' private states."""

    trader_a: TraderState
    trader_b: TraderState
    tick: int = 0
    """World tick of the encounter (informational)."""

    def __post_init__(self) -> None:
        for name in SEATS:
            if not isinstance(getattr(self, name), TraderState):
                raise ScenarioError(f"sugarscape: {name} must be a TraderState")

    def trader(self, seat: str) -> TraderState:
        return self.trader_a if seat == TRADER_A else self.trader_b


@dataclass(frozen=True)
class Offer:
    """An offer on the table: `by` gives `give` of `give_resource` for `get` of the other resource."""

    by: str
    give_resource: str
    give: int
    get: int

    @property
    def get_resource(self) -> str:
        return "spice" if self.give_resource == "sugar" else "sugar"

    def transfer_a_to_b(self) -> tuple[int, int]:
        """(sugar, spice) moving from trader_a to trader_b (negative: from b to a)."""
        sugar, spice = (self.give, -self.get) if self.give_resource == "sugar" else (-self.get, self.give)
        return (sugar, spice) if self.by == TRADER_A else (-sugar, -spice)

    def view(self, seat: str) -> dict[str, Any]:
        """The offer from `seat`'s side, for code agents."""
        sugar, spice = self.transfer_a_to_b()
        sign = 1 if seat == TRADER_A else -1
        out = {"sugar": max(sign * sugar, 0), "spice": max(sign * spice, 0)}
        into = {"sugar": max(-sign * sugar, 0), "spice": max(-sign * spice, 0)}
        return {
            "by": self.by,
            "give_resource": self.give_resource,
            "give": self.give,
            "get": self.get,
            "you_give": out,
            "you_get": into,
        }

    def describe(self, seat: str) -> str:
        if self.by == seat:
            return f"you give {self.give} {self.give_resource} for {self.get} {self.get_resource}"
        return f"{self.by} gives you {self.give} {self.give_resource} for {self.get} {self.get_resource}"


def _gain_reward(before: float, after: float, best: float) -> float:
    """clip((after - before) / (best - before), 0, 1); 1/0 for no loss/a loss when no gain was possible."""
    room = best - before
    if room <= 1e-12 * max(1.0, abs(before)):
        return 1.0 if after >= before - 1e-12 * max(1.0, abs(before)) else 0.0
    return min(1.0, max(0.0, (after - before) / room))


def _other(seat: str) -> str:
    return TRADER_B if seat == TRADER_A else TRADER_A


# ---------------------------------------------------------------------------------------- environment
@register
class TradeEncounter(Environment[TradeScenario]):
    """One negotiated trade between two neighbouring Sugarscape agents (see the module docstring)."""

    env_id: ClassVar[str] = "sugarscape-v0"
    scenario_type: ClassVar[type[Scenario]] = TradeScenario

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return SEATS

    @classmethod
    def sample_scenario(cls, rng: random.Random) -> TradeScenario:
        """Two traders drawn like the world's agents (stocks 5-25, metabolisms 1-4, origin 20/60/20)."""

        def trader() -> TraderState:
            origin = rng.choices(ORIGINS, weights=(0.2, 0.6, 0.2))[0]
            return TraderState(rng.randint(5, 25), rng.randint(5, 25), rng.randint(1, 4), rng.randint(1, 4), origin)

        return TradeScenario(scenario_id=f"gen:{rng.getrandbits(32):08x}", trader_a=trader(), trader_b=trader())

    # ------------------------------------------------------------------------------------- spec, parse
    def action_spec(self, agent_id: str) -> ActionSpec:
        return ActionSpec(
            kinds={
                "message": "small talk: free text to the other trader",
                "intent": "whether you want to trade: payload {'trade': true/false}",
                "offer": "give X of one resource for Y of the other: {'give_resource', 'give', 'get'}",
                "pass": "make no offer this round (the offer on the table stays)",
                "accept": "accept the offer on the table",
                "reject": "reject the offer on the table",
                "reflect": "shift your identity leaning by delta: {'delta': d}",
            },
            grammar=(
                "Small talk: write anything; it is your message.\n"
                "Intent: end with INTENT: TRADE or INTENT: NO TRADE.\n"
                "Offers: end with OFFER: GIVE <x> SUGAR FOR <y> SPICE (or GIVE <x> SPICE FOR <y> SUGAR), "
                "whole numbers, or PASS.\n"
                "Execution: end with ACCEPT or REJECT.\n"
                "Reflection: end with REFLECT: <delta>, a number such as +0.1, -0.05 or 0."
            ),
            examples=(
                "Hello neighbour, the spice fields were kind to me this season.",
                "INTENT: TRADE",
                "OFFER: GIVE 3 SUGAR FOR 5 SPICE",
                "PASS",
                "ACCEPT",
                "REFLECT: +0.1",
            ),
        )

    def parse(self, agent_id: str, text: str) -> Action | ParseError:
        text = cap_reply(text, self.max_reply_chars)
        allowed = self.awaiting.get(agent_id) if not self.done else None  # done until the first reset
        allowed = allowed or tuple(k for kinds in PHASE_KINDS.values() for k in kinds)
        if "message" in allowed:
            message = _SAY.sub("", squeeze(text))
            if not message:
                return ParseError("say something: any non-empty text is a message")
            return Action(agent_id, "message", message)
        if "intent" in allowed:
            return self._parse_intent(agent_id, text)
        patterns = {k: _PATTERNS[k] for k in allowed if k in _PATTERNS}
        found = find_last_command(text, patterns)
        if found is None:
            if "offer" in allowed and re.search(r"\boffer\b", clean(text), re.IGNORECASE):
                return ParseError("could not read the offer; write OFFER: GIVE 3 SUGAR FOR 5 SPICE (whole numbers)")
            return ParseError(f"no command found; end with one of: {', '.join(k.upper() for k in allowed)}")
        if found.kind == "offer":
            return self._offer_action(agent_id, found.groups, found.message)
        if found.kind == "reflect":
            delta = read_number(
                found.groups["delta"], what="the reflection's delta", minimum=-MAX_DELTA, maximum=MAX_DELTA
            )
            if isinstance(delta, NumberError):
                return ParseError(f"REFLECT needs a number such as +0.1: {delta.message}")
            return Action(agent_id, "reflect", found.message, {"delta": delta})
        return Action(agent_id, found.kind, found.message)

    def _parse_intent(self, agent_id: str, text: str) -> Action | ParseError:
        found = find_last_command(text, {"intent": _PATTERNS["intent"]})
        value, message = (found.groups["value"], found.message) if found else (None, "")
        if value is None:
            body = normalise_text(text)
            last = body.rsplit("\n", 1)[-1]
            bare = _BARE_INTENT.fullmatch(last) if last else None
            if bare is None or negated_before(body, len(body) - len(last)):
                return ParseError("say whether you want to trade: end with INTENT: TRADE or INTENT: NO TRADE")
            value, message = bare.group("value"), body[: len(body) - len(last)].strip()
        wants = value.lower() in ("trade", "yes")
        return Action(agent_id, "intent", message, {"trade": wants})

    @staticmethod
    def _offer_action(agent_id: str, groups: Mapping[str, str], message: str) -> Action | ParseError:
        if groups["gres"].lower() == groups["getres"].lower():
            return ParseError("an offer exchanges sugar for spice or spice for sugar")
        amounts = []
        for name, what in (("give", "the amount you give"), ("get", "the amount you get")):
            number = read_number(groups[name], what=what, minimum=0, maximum=MAX_STOCK, integer=True)
            if isinstance(number, NumberError):
                return ParseError(f"offer amounts must be whole numbers >= 0: {number.message}")
            amounts.append(number)
        payload = {"give_resource": groups["gres"].lower(), "give": amounts[0], "get": amounts[1]}
        return Action(agent_id, "offer", message, payload)

    def private_facts(self, agent_id: str) -> tuple[PrivateFact, ...]:
        me = self.scenario.trader(agent_id)
        return (
            PrivateFact("sugar_stock", "how much sugar the trader holds", numbers=(float(me.sugar),)),
            PrivateFact("spice_stock", "how much spice the trader holds", numbers=(float(me.spice),)),
            PrivateFact("origin", "the trader's origin identity", patterns=(rf"\b{me.origin}",)),
        )

    # --------------------------------------------------------------------------------------- episode
    def _reset(self, scenario: TradeScenario) -> list[Event]:
        self._step = -1
        self._waiting: set[str] = set()
        self._intents: dict[str, bool] = {}
        self._table: Offer | None = None
        self._decisions: dict[str, bool] = {}
        self._deltas: dict[str, float] = dict.fromkeys(SEATS, 0.0)
        self._ending: str | None = None
        self._traded = False
        events: list[Event] = [self._opening(seat) for seat in SEATS]
        return events + self._advance()

    def _opening(self, seat: str) -> Observation:
        me = self.scenario.trader(seat)
        share = me.metabolism_sugar / (me.metabolism_sugar + me.metabolism_spice)
        text = (
            f"You are {seat}, an agent of Sugarscape, meeting your neighbour {_other(seat)}. You hold {me.sugar} "
            f"sugar and {me.spice} spice and burn {me.metabolism_sugar} sugar and {me.metabolism_spice} spice per "
            f"tick; you die if either runs out. Your welfare is sugar^{share:.2f} x spice^{1 - share:.2f} = "
            f"{me.welfare:.2f}. Your origin identity is {me.origin}; your identity leaning is {me.leaning:+.2f} "
            f"({leaning_label(me.leaning)}) on a scale from -1 (bad) to +1 (good). These facts are private. "
            "The encounter: two rounds of small talk, then both say whether you want to trade, then two rounds "
            "of offers (give some of one resource for some of the other; each offer replaces the one on the "
            "table), then both accept or reject the last offer, then both reflect on your identity leaning."
        )
        private = {
            "sugar": me.sugar,
            "spice": me.spice,
            "metabolism_sugar": me.metabolism_sugar,
            "metabolism_spice": me.metabolism_spice,
            "origin": me.origin,
            "leaning": me.leaning,
            "welfare": me.welfare,
        }
        schedule = [{"phase": p, "seats": list(seats), "round": r} for p, seats, r in SCHEDULE]
        public = {"counterpart": _other(seat), "max_turns": MAX_TURNS, "schedule": schedule}
        return Observation(seat, text, {"role": seat, "private": private, "public": public}, private=True)

    def _advance(self) -> list[Event]:
        """Start the next step that applies (offers and execution are skipped once the encounter failed)."""
        while True:
            self._step += 1
            phase, seats, round_ = SCHEDULE[self._step]
            if phase in (OFFER, EXECUTE) and self._ending is not None:
                continue
            if phase == EXECUTE and self._table is None:
                self._ending = "no_offer"
                continue
            break
        self._waiting = set(seats)
        return [
            self._request_turn(
                seat, PHASE_KINDS[phase], self._turn_text(seat, phase, round_), self._turn_data(seat, phase, round_)
            )
            for seat in seats
        ]

    def _turn_text(self, seat: str, phase: str, round_: int) -> str:
        other = _other(seat)
        table = f" On the table: {self._table.describe(seat)}." if self._table else " No offer is on the table."
        return {
            TALK: f"Small talk, round {round_} of 2: say something to {other}.",
            INTENT: f"Do you want to trade with {other}? End with INTENT: TRADE or INTENT: NO TRADE.",
            OFFER: f"Offers, round {round_} of 2.{table} Make an offer (OFFER: GIVE <x> SUGAR FOR <y> SPICE, or "
            "the other way round) or PASS.",
            EXECUTE: f"Execution:{table} Both must accept for the trade to happen. ACCEPT or REJECT.",
            REFLECT: f"Reflect on this encounter. Your identity leaning is {self.scenario.trader(seat).leaning:+.2f}; "
            "by how much do you shift it? End with REFLECT: <delta> (e.g. REFLECT: +0.1, REFLECT: 0).",
        }[phase]

    def _turn_data(self, seat: str, phase: str, round_: int) -> dict[str, Any]:
        view = self._table.view(seat) if self._table else None
        return {
            "phase": phase,
            "round": round_,
            "turn": len(self._transcript),
            "max_turns": MAX_TURNS,
            "offer_on_table": view,
            "pending_offer": view if view and self._table.by != seat else None,
            "traded": self._traded,
            "leaning": self.scenario.trader(seat).leaning,
        }

    @property
    def phase(self) -> str:
        return SCHEDULE[self._step][0]

    def _validate(self, action: Action) -> str | None:
        payload, kind = action.payload, action.kind
        if kind == "message":
            return self._validate_message(action)
        if kind == "intent" and not isinstance(payload.get("trade"), bool):
            return "intent needs payload {'trade': true or false}"
        if kind == "offer":
            return self._validate_offer(action)
        if kind == "reflect":
            reason = check_number(payload.get("delta"), what="reflect's delta", minimum=-MAX_DELTA, maximum=MAX_DELTA)
            if reason is not None:
                return f"reflect needs a finite number {{'delta': d}}: {reason}"
        return None

    @staticmethod
    def _validate_message(action: Action) -> str | None:
        if not action.text.strip():
            return "say something: the message is empty"
        share = action.payload.get("share")
        if share is None:
            return None
        if not isinstance(share, Mapping) or not set(share) <= set(SHARE_KEYS):
            return f"share must map some of {', '.join(SHARE_KEYS)} to whole numbers"
        if not all(_is_int(v) and 0 <= v <= MAX_STOCK for v in share.values()):
            return f"shared amounts must be whole numbers in [0, {MAX_STOCK:,}]"
        return None

    def _validate_offer(self, action: Action) -> str | None:
        payload = action.payload
        resource, give, get = payload.get("give_resource"), payload.get("give"), payload.get("get")
        if resource not in RESOURCES:
            return "give_resource must be 'sugar' or 'spice'"
        if not (_is_int(give) and _is_int(get)) or give < 0 or get < 0:
            return "offer amounts must be whole numbers >= 0"
        if max(give, get) > MAX_STOCK:
            return f"offer amounts must be at most {MAX_STOCK:,}"
        if give == 0 and get == 0:
            return "an offer of nothing for nothing is not an offer"
        held = getattr(self.scenario.trader(action.agent_id), resource)
        if give > held:
            return f"you hold only {held} {resource}"
        return None

    def _apply(self, action: Action) -> list[Event]:
        return self._handle(action.agent_id, action.kind, action.payload, action.text)

    def _handle(self, seat: str, kind: str, payload: Mapping[str, Any], text: str) -> list[Event]:
        other = _other(seat)
        events: list[Event] = []
        if kind == "message":
            data = {"kind": kind, "message": text, "share": dict(payload["share"]) if payload.get("share") else None}
            said = f"{seat} says: {text}" if text else f"{seat} stays silent."
            events.append(Observation(other, said, data, sender=seat))
        elif kind == "intent":
            self._intents[seat] = bool(payload["trade"])
        elif kind == "offer":
            self._table = Offer(seat, payload["give_resource"], int(payload["give"]), int(payload["get"]))
            msg = f" ({text})" if text else ""
            data = {"kind": kind, "offer": self._table.view(other), "message": text}
            events.append(Observation(other, f"{seat} offers: {self._table.describe(other)}.{msg}", data, sender=seat))
        elif kind == "pass":
            events.append(Observation(other, f"{seat} passes.", {"kind": kind, "message": text}, sender=seat))
        elif kind in ("accept", "reject"):
            self._decisions[seat] = kind == "accept"
        elif kind == "reflect":
            self._deltas[seat] = float(payload["delta"])
        self._waiting.discard(seat)
        return events + (self._end_step() if not self._waiting else [])

    def _end_step(self) -> list[Event]:
        phase = self.phase
        events: list[Event] = []
        if phase == INTENT:
            for seat in SEATS:
                wants = self._intents.get(seat, False)
                word = "wants to trade" if wants else "does not want to trade"
                events.append(
                    Observation(_other(seat), f"{seat} {word}.", {"kind": "intent", "trade": wants}, sender=seat)
                )
            if not all(self._intents.get(s, False) for s in SEATS):
                self._ending = "declined"
        elif phase == EXECUTE:
            events += self._execute()
        elif phase == REFLECT:
            return self._finish(events)
        return events + self._advance()

    def _execute(self) -> list[Event]:
        if not all(self._decisions.get(s, False) for s in SEATS):
            self._ending = self._ending or "rejected"
            return [
                Observation(s, "The offer was rejected: no trade.", {"kind": "execution", "traded": False})
                for s in SEATS
            ]
        sugar, spice = self._table.transfer_a_to_b()
        a, b = self.scenario.trader_a, self.scenario.trader_b
        if min(a.sugar - sugar, a.spice - spice, b.sugar + sugar, b.spice + spice) < 0:
            self._ending = "infeasible"
            text = "The offer cannot be executed (someone lacks the resources): no trade."
            return [Observation(s, text, {"kind": "execution", "traded": False}) for s in SEATS]
        self._traded = True
        self._ending = "traded"
        return [
            Notification(
                s,
                NotificationKind.DEAL,
                f"Trade done: {self._table.describe(s)}.",
                data={"deal": self._table.view(s), "traded": True},
            )
            for s in SEATS
        ]

    def _on_retries_exhausted(self, agent_id: str) -> list[Event]:
        phase = self.phase
        if phase == TALK:
            return self._handle(agent_id, "message", {}, "")
        if phase == INTENT:
            return self._handle(agent_id, "intent", {"trade": False}, "")
        if phase == OFFER:
            self._ending = self._ending or "forfeit"
            return self._handle(agent_id, "pass", {}, "")
        if phase == EXECUTE:
            return self._handle(agent_id, "reject", {}, "")
        return self._handle(agent_id, "reflect", {"delta": 0.0}, "")

    # --------------------------------------------------------------------------------------- outcome
    def _after(self) -> dict[str, TraderState]:
        a, b = self.scenario.trader_a, self.scenario.trader_b
        sugar, spice = self._table.transfer_a_to_b() if self._traded else (0, 0)
        leaning = {s: clip_leaning(self.scenario.trader(s).leaning + self._deltas[s]) for s in SEATS}
        return {
            TRADER_A: TraderState(
                a.sugar - sugar, a.spice - spice, a.metabolism_sugar, a.metabolism_spice, a.origin, leaning[TRADER_A]
            ),
            TRADER_B: TraderState(
                b.sugar + sugar, b.spice + spice, b.metabolism_sugar, b.metabolism_spice, b.origin, leaning[TRADER_B]
            ),
        }

    def _compute_outcome(self) -> Outcome:
        after = self._after()
        roles, welfare_info = {}, {}
        for seat in SEATS:
            me, other = self.scenario.trader(seat), self.scenario.trader(_other(seat))
            w0, w1 = me.welfare, after[seat].welfare
            best = best_deal(me.bundle, other.bundle)[2]
            roles[seat] = RoleOutcome(reward=_gain_reward(w0, w1, best), utility=w1 - w0)
            welfare_info[seat] = {"before": w0, "after": w1, "best": best}
        ref = mrs_trade(self.scenario.trader_a.bundle, self.scenario.trader_b.bundle)
        deal, pareto = None, None
        if self._traded:
            sugar, spice = self._table.transfer_a_to_b()
            t = self._table
            deal = {"offered_by": t.by, "give_resource": t.give_resource, "give": t.give, "get": t.get}
            deal |= {"sugar_a_to_b": sugar, "spice_a_to_b": spice}
            pareto = self._pareto(after)
        return Outcome(
            env_id=self.env_id,
            scenario_id=self.scenario.scenario_id,
            agreement=self._traded,
            rounds=len(self._transcript),
            roles=roles,
            deal=deal,
            pareto_optimal=pareto,
            metrics={
                "ending": self._ending or "traded",
                "intents": dict(self._intents),
                "decisions": dict(self._decisions),
                "welfare": welfare_info,
                "reference_trade": {"sugar_a_to_b": ref[0], "spice_a_to_b": ref[1]},
                "leaning_before": {s: self.scenario.trader(s).leaning for s in SEATS},
                "leaning_after": {s: after[s].leaning for s in SEATS},
                "leaning_delta": {s: after[s].leaning - self.scenario.trader(s).leaning for s in SEATS},
                "stocks_after": {s: {"sugar": after[s].sugar, "spice": after[s].spice} for s in SEATS},
            },
        )

    @staticmethod
    def _pareto(after: Mapping[str, TraderState]) -> bool:
        """No further integer exchange helps one trader without hurting the other."""
        a, b = after[TRADER_A], after[TRADER_B]
        tol = 1e-9
        return best_deal(a.bundle, b.bundle)[2] <= a.welfare * (1 + tol) and best_deal(b.bundle, a.bundle)[
            2
        ] <= b.welfare * (1 + tol)


# ----------------------------------------------------------------------------------------- simulation
@dataclass(frozen=True)
class TraderInfo:
    """Who sits in an encounter seat, for agent factories."""

    agent_id: int
    """The world's id of the agent."""
    origin: str
    leaning: float
    seat: str
    """"trader_a" or "trader_b"."""


TradeAgentFactory = Callable[[TraderInfo], Agent]
"""Makes the agent that negotiates for one world agent in one encounter."""


@dataclass(frozen=True)
class SimulationResult:
    """A finished Sugarscape run."""

    config: SugarscapeConfig
    metrics: dict[str, Any]
    """`SugarscapeWorld.metrics()`: trade success, survival, lifespans, wealth at death, identity, welfare."""
    deaths: tuple[DeathRecord, ...] = ()
    negotiated: bool = False
    """True when encounters were negotiated by agents, False for the built-in MRS rule."""
    episodes: int = 0
    """Encounter episodes run through the runtime."""
    reports: tuple[TickReport, ...] = field(default=(), repr=False)


def encounter_scenario(world: SugarscapeWorld, a: int, b: int) -> TradeScenario:
    """The encounter between live rows a and b of the world, with their current states."""

    def state(row: int) -> TraderState:
        s = world.agent_state(row)
        return TraderState(
            s["sugar"], s["spice"], s["metabolism_sugar"], s["metabolism_spice"], s["origin"], s["leaning"]
        )

    ids = int(world.ids[a]), int(world.ids[b])
    return TradeScenario(
        scenario_id=f"sugarscape:t{world.tick}:{ids[0]}-{ids[1]}", trader_a=state(a), trader_b=state(b), tick=world.tick
    )


def settle_encounter(world: SugarscapeWorld, a: int, b: int, outcome: Outcome) -> bool:
    """Apply a finished encounter to the world: the deal (re-checked, never below 0), the leanings, the counts."""
    traded = False
    if outcome.agreement and outcome.deal is not None:
        traded = world.apply_trade(a, b, int(outcome.deal["sugar_a_to_b"]), int(outcome.deal["spice_a_to_b"]))
    leaning = outcome.metrics.get("leaning_after", {})
    for row, seat in ((a, TRADER_A), (b, TRADER_B)):
        if seat in leaning:
            world.set_leaning(row, float(leaning[seat]))
    invalid = sum(r.invalid_actions for r in outcome.roles.values())
    world.record_encounter(a, b, traded, invalid)
    return traded


def _seat_agents(factory: TradeAgentFactory, infos: tuple[TraderInfo, TraderInfo]) -> dict[str, Agent]:
    return {info.seat: factory(info) for info in infos}


def _encounter_seed(config: SugarscapeConfig, tick: int, index: int) -> int:
    return (config.seed * 1_000_003 + tick * 10_007 + index) % (2**31)


async def _negotiate_tick(
    world: SugarscapeWorld,
    meetings: list[tuple[int, int]],
    factory: TradeAgentFactory,
    concurrency: int,
    turn_timeout: float | None,
    max_invalid_retries: int,
) -> int:
    episodes = 0
    for round_ in world.trade_rounds(meetings):
        specs = []
        for a, b in round_:
            scenario = encounter_scenario(world, a, b)
            infos = tuple(
                TraderInfo(int(world.ids[row]), t.origin, t.leaning, seat)
                for row, seat, t in ((a, TRADER_A, scenario.trader_a), (b, TRADER_B, scenario.trader_b))
            )
            specs.append(
                EpisodeSpec(
                    make_env=partial(TradeEncounter, max_invalid_retries),
                    make_agents=partial(_seat_agents, factory, infos),
                    scenario=scenario,
                    seed=_encounter_seed(world.config, world.tick, episodes + len(specs)),
                    episode_id=scenario.scenario_id,
                )
            )
        results = await run_episodes(specs, concurrency=concurrency, turn_timeout=turn_timeout)
        for (a, b), result in zip(round_, results, strict=True):
            settle_encounter(world, a, b, result.outcome)
        episodes += len(specs)
    return episodes


def _result(world: SugarscapeWorld, negotiated: bool, episodes: int, reports: list[TickReport]) -> SimulationResult:
    return SimulationResult(
        config=world.config,
        metrics=world.metrics(),
        deaths=tuple(world.deaths),
        negotiated=negotiated,
        episodes=episodes,
        reports=tuple(reports),
    )


async def run_simulation_async(
    config: SugarscapeConfig,
    trade_agents: TradeAgentFactory | None = None,
    *,
    concurrency: int = 32,
    turn_timeout: float | None = 60.0,
    max_invalid_retries: int = 2,
    world: SugarscapeWorld | None = None,
    keep_reports: bool = False,
    on_tick: Callable[[TickReport], None] | None = None,
) -> SimulationResult:
    """Run a world to the end. With `trade_agents` every meeting is negotiated as a `sugarscape-v0` episode
    (the meetings of a tick in rounds of disjoint pairs, each round concurrently); without, by the MRS rule.
    `on_tick`, if given, gets each negotiated tick's report as it ends (progress lines)."""
    world = world or SugarscapeWorld(config)
    if trade_agents is None:
        return _run_mrs(world, keep_reports)
    reports, episodes = [], 0
    while not world.finished:
        meetings = world.begin_tick()
        if meetings:
            episodes += await _negotiate_tick(
                world, meetings, trade_agents, concurrency, turn_timeout, max_invalid_retries
            )
        report = world.end_tick()
        if on_tick is not None:
            on_tick(report)
        if keep_reports:
            reports.append(report)
    return _result(world, True, episodes, reports)


def _run_mrs(world: SugarscapeWorld, keep_reports: bool) -> SimulationResult:
    reports = []
    while not world.finished:
        report = world.step()
        if keep_reports:
            reports.append(report)
    return _result(world, False, 0, reports)


def run_simulation(
    config: SugarscapeConfig,
    trade_agents: TradeAgentFactory | None = None,
    *,
    world: SugarscapeWorld | None = None,
    keep_reports: bool = False,
    **options: Any,
) -> SimulationResult:
    """Run a world to the end: by the MRS rule without `trade_agents` (no event loop involved), otherwise as
    `run_simulation_async` in a fresh event loop (`options`: concurrency, turn_timeout, max_invalid_retries,
    on_tick)."""
    if trade_agents is None:
        return _run_mrs(world or SugarscapeWorld(config), keep_reports)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        coro = run_simulation_async(config, trade_agents, world=world, keep_reports=keep_reports, **options)
        return asyncio.run(coro)
    raise RuntimeError("sugarscape: run_simulation() was called inside an event loop; await run_simulation_async()")
