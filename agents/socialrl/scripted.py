"""Scripted price buyers: code policies that differ in one behaviour, for the incentive audit and fixed rules.

An environment pays for a behaviour only if two policies that differ in that behaviour alone score
differently on the same episodes (models/socialrl/incentives.py pairs them). `ScriptedBuyer` plays the buyer
seat of Craigslist or Marketplace from a `BuyerScript`:

| knob | behaviour |
| --- | --- |
| `opening` | "anchor": open at `anchor_share` x target (x the hold price for an oracle), then concede linearly to the hold price over `concede_turns` offers; "hold": open at the hold price |
| `hold` | the hold price: "midpoint" = target + `hold_share` x (reservation - target); "listing" = max(target, `hold_share` x listing) (the fixed rule); "oracle" = the counterpart's reservation (the script is told it: the audit's headroom) |
| `states_limit` | every message starts with "My target is $T and my maximum is $R." |
| `reject_words` | when a seller offer stands, the counter-offer starts with "That's too high for me." |
| `final` | "none"; "once": "This is my final offer: $h." the first time it reaches its hold price (then it holds); "every": "This is my final offer." in every message |
| `final_when` | for "once": "always"; "inside_reservation" / "beyond_reservation": only when the hold price lies inside / beyond the counterpart's reservation (the script is told it, as the oracle is), so that a credible commitment and a bluff are measured apart |

Prices are whole dollars (cents under $20). The buyer accepts a standing offer at or below the price it would
offer next, and on its last turn any standing offer below its reservation. Target: the seat's private
`target_price` (Craigslist), else 0.8 x its reservation (Marketplace gives only a reservation). Reservation:
the buyer's private `reservation_price` (Marketplace), else the listing (a Craigslist buyer never pays more).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agents.socialrl.code_agents import CodeAgent
from environments.core.events import Action, Event, Notification, Observation

OPENINGS = ("anchor", "hold")
HOLDS = ("midpoint", "listing", "oracle")
FINALS = ("none", "once", "every")
FINAL_WHENS = ("always", "inside_reservation", "beyond_reservation")


@dataclass(frozen=True, kw_only=True)
class BuyerScript:
    """What a scripted buyer does (see the module table)."""

    opening: str = "anchor"
    """"anchor" (below target, then concede) or "hold" (open at the hold price)."""
    hold: str = "midpoint"
    """How the hold price is set: "midpoint", "listing" or "oracle"."""
    hold_share: float = 0.5
    """The share used by the hold rule ("midpoint": of the way from target to reservation; "listing": of the listing)."""
    anchor_share: float = 0.8
    """The anchored opening as a share of the target."""
    concede_turns: int = 4
    """Offers over which an anchored opening concedes to the hold price."""
    states_limit: bool = False
    """Whether every message states the target and the maximum."""
    reject_words: bool = False
    """Whether a counter-offer to a standing seller offer starts with rejection words."""
    final: str = "none"
    """"none", "once" or "every" (see the module table)."""
    final_when: str = "always"
    """For `final="once"`: "always", or only when the hold price lies "inside_reservation" / "beyond_reservation"
    of the counterpart (a credible commitment / a bluff)."""

    def __post_init__(self) -> None:
        if self.opening not in OPENINGS or self.hold not in HOLDS or self.final not in FINALS:
            raise ValueError(f"opening in {OPENINGS}, hold in {HOLDS}, final in {FINALS}; got {self}")
        if self.final_when not in FINAL_WHENS or (self.final_when != "always" and self.final != "once"):
            raise ValueError(f"final_when in {FINAL_WHENS}, and other than 'always' only with final='once'; got {self}")
        if not 0.0 <= self.hold_share <= 1.5 or not 0.0 < self.anchor_share <= 1.0:
            raise ValueError(f"hold_share must lie in [0, 1.5] and anchor_share in (0, 1], got {self}")
        if self.concede_turns < 1:
            raise ValueError(f"concede_turns must be >= 1, got {self.concede_turns}")


def view_key(view: Mapping[str, Any]) -> tuple[Any, ...]:
    """What identifies a scenario from the buyer's private view (for the oracle's reservation lookup)."""
    public, private = view.get("public", {}), view.get("private", {})
    return (
        public.get("title") or public.get("product"),
        public.get("listing_price") or public.get("listed_price"),
        private.get("target_price"),
        private.get("reservation_price"),
    )


def _dollars(price: float, listing: float) -> float:
    step = 1.0 if listing >= 20 else 0.01
    return round(math.ceil(price / step - 1e-9) * step, 2)


class ScriptedBuyer(CodeAgent):
    """A price buyer that follows a `BuyerScript` (see the module table)."""

    def __init__(
        self, script: BuyerScript, seed: int = 0, reservations: Mapping[tuple[Any, ...], float] | None = None
    ) -> None:
        super().__init__(seed)
        self.script = script
        self.reservations = reservations
        """For an oracle script, or one whose final offer depends on the counterpart's reservation: that
        reservation by `view_key` of the buyer's private view."""
        self.name = "scripted"
        self.plan: tuple[float, float, float, float, float] | None = None
        """(opening, hold, target, reservation, listing) once the private view arrived."""
        self.said_final = False
        self.may_say_final = script.final != "none"
        """Whether this episode's script may call an offer final (`final_when` decides it once the plan is known)."""

    def describe(self) -> str:
        return f"scripted({self.script})"

    async def observe(self, event: Event) -> None:
        await super().observe(event)
        if isinstance(event, Observation) and event.private and "role" in event.data:
            self.plan = self._plan(event.data)

    def _plan(self, view: dict[str, Any]) -> tuple[float, float, float, float, float]:
        public, private = view.get("public", {}), view.get("private", {})
        listing = float(public.get("listing_price") or public.get("listed_price"))
        reservation = float(private.get("reservation_price", listing))
        target = float(private.get("target_price", 0.8 * reservation))
        s = self.script
        if s.hold == "oracle":
            hold = self._counterpart_reservation(view)
        elif s.hold == "listing":
            hold = max(target, s.hold_share * listing)
        else:
            hold = target + s.hold_share * (reservation - target)
        hold = _dollars(min(hold, reservation), listing)
        # An oracle anchors below the reservation it was told; the others below their target.
        anchor = s.anchor_share * (hold if s.hold == "oracle" else target)
        opening = hold if s.opening == "hold" else _dollars(min(hold, anchor), listing)
        if s.final_when != "always":
            inside = hold >= self._counterpart_reservation(view) - 1e-9
            self.may_say_final = inside == (s.final_when == "inside_reservation")
        return opening, hold, target, reservation, listing

    def _counterpart_reservation(self, view: Mapping[str, Any]) -> float:
        if self.reservations is None or view_key(view) not in self.reservations:
            raise ValueError(f"script {self.script} needs the counterpart's reservation of this scenario")
        return self.reservations[view_key(view)]

    def decide(self, request: Notification) -> Action:
        assert self.space is not None and self.plan is not None
        opening, hold, target, reservation, listing = self.plan
        s = self.script
        step = min(1.0, len(self.my_offers) / s.concede_turns)
        price = hold if s.opening == "hold" else _dollars(opening + (hold - opening) * step, listing)
        pending = self.pending(request)
        if pending is not None:
            q = float(pending)
            if q <= price + 1e-9 or (self.is_last_turn(request) and q < reservation - 1e-9):
                accept = self.space.accept(self.agent_id, q, "Deal, thank you!")
                if accept.kind in request.allowed:
                    self.agreed = q
                    return accept
        words = []
        if s.states_limit:
            words.append(f"My target is ${target:g} and my maximum is ${reservation:g}.")
        if s.reject_words and pending is not None:
            words.append("That's too high for me.")
        if s.final == "every":
            words.append(f"This is my final offer: ${price:g}.")
        elif s.final == "once" and self.may_say_final and price >= hold - 1e-9 and not self.said_final:
            self.said_final = True
            words.append(f"This is my final offer: ${price:g}.")
        else:
            words.append(f"I can offer ${price:g}.")
        self.my_offers.append(price)
        offer = self.space.offer(self.agent_id, price, " ".join(words))
        return self.allowed_or(request, offer, None)
