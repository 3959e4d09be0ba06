"""Listening price counterparts: code sellers and buyers that answer what their partner says, not only the clock.

In the price domains (Craigslist, Marketplace) the `boulware`, `conceder` and `reciprocal` counterparts of
agents/socialrl/code_agents.py play through a `PriceListener`: the counterpart's reservation is the scenario's
(its private view), its parameters are drawn per episode from its type's ranges (`LISTENING_TYPES`), and it
reads every partner move with agents/socialrl/price_reading.py. The CoCoA authors' rule-based seller (He et al.,
2018, a price tracker and coarse dialogue acts: init-price, counter, insist, agree, disagree, inform) was the
model; each behaviour below is one parameter of `ListeningConfig`, tested on its own (tests/test_price_counterpart.py).

Prices are handled in the counterpart's own frame: "up" is better for it (a seller's price, a buyer's price
negated), so one rule serves both seats. S is its opening (its best price: the listing for a seller), r its
reservation, f0 = r + slack x (S - r) the final price it plans to concede to, f its planned final after the
partner's opening.

| behaviour | parameter(s) | rule |
| --- | --- | --- |
| clock concession | `exponent` (range) | aspiration a = S - (S - f) x min(1, progress), progress >= (turn / (max_turns - 1))^(1 / e): f at the last turn |
| information | `information` | a price the partner states as its limit or target (`stated_limits`) becomes a floor: the counterpart never settles on the wrong side of it |
| anchoring | `anchor_weight`, `insult_ratio`, `insult_walk` | the partner's first offer x0 pulls the planned final towards r: f = f0 - w x clip((f0 - x0) / (f0 - insult), 0, 1) x (f0 - r), where insult = r x insult_ratio (a seller; r / insult_ratio a buyer); an opening beyond the insult line pulls nothing and ends the talk with probability `insult_walk` |
| concession answered | `reciprocity` | relative tit-for-tat: progress grows by reciprocity x the share of the opening gap (S - x0) the partner's concessions have closed |
| rejection with a counter | `rejection_step` | each standing offer of the counterpart that the partner turns down (a REJECT, or rejection words) while naming a counter-price adds `rejection_step` to progress; a rejection without a counter adds nothing |
| commitment | `credibility`, `bluff_walk` | the partner's first "final offer" made after it has conceded at least once, at a price the counterpart can take (inside its reservation and floor) is accepted with probability `credibility`, decided once per price (repeating the phrase re-rolls nothing); one beyond its reservation ends the talk with probability `bluff_walk`; once the partner has called an offer final and then moved, no "final" of its partner is believed again |
| patience | `patience_grace`, `patience_rate` | every partner turn without a concession (no better offer) is a stall; after `patience_grace` consecutive stalls the counterpart walks away with probability `patience_rate` x (stalls - grace) per turn |
| its own commitment | - | its last offer the partner can still answer (turn >= max_turns - 3) is called "This is my final offer" |
| acceptance | - | accepts a standing offer at least as good as its aspiration (which reaches its planned final f by its deadline, never r): only a credible final offer takes it below f, down to its reservation; it never accepts beyond its reservation or floor |

A counterpart sees the partner's private facts only through what the partner says.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from agents.socialrl.price_reading import is_rejection, mentioned_price, says_final, stated_limits
from environments.core.events import Action, Notification
from environments.socialrl.bargaining import PriceDealSpace


@dataclass(frozen=True, kw_only=True)
class ListeningConfig:
    """One counterpart type: fixed parameters and the ranges its per-episode parameters are drawn from."""

    exponent: tuple[float, float]
    """Range of the clock-concession exponent e (e < 1 Boulware, e > 1 conceder), drawn per episode."""
    slack: tuple[float, float]
    """Range of the planned final's share of the way from the reservation to the opening, drawn per episode."""
    reciprocity: float
    """Progress per unit of the partner's concession, relative to the counterpart's own planned concession."""
    rejection_step: float
    """Progress added by each of its offers the partner rejects with a counter-price."""
    anchor_weight: float
    """Largest share of (f0 - r) a credible low opening of the partner removes from the planned final."""
    insult_ratio: float
    """An opening beyond reservation x this (a seller; reservation / this for a buyer) is an insult."""
    insult_walk: float
    """Probability of walking away at an insulting opening."""
    credibility: float
    """Probability of accepting the partner's first "final offer" inside the reservation."""
    bluff_walk: float
    """Probability of walking away at a "final offer" beyond the reservation."""
    patience_grace: int
    """Consecutive partner turns without a concession before walking away becomes possible."""
    patience_rate: float
    """Walk-away probability per stalled partner turn beyond the grace."""
    information: bool = True
    """Whether a limit the partner states becomes the counterpart's floor."""

    def __post_init__(self) -> None:
        for name in ("exponent", "slack"):
            low, high = getattr(self, name)
            if not 0.0 < low <= high:
                raise ValueError(f"{name} must be a range 0 < low <= high, got {(low, high)}")
        if self.slack[1] > 1.0:
            raise ValueError(f"slack must lie in (0, 1], got {self.slack}")
        for name in ("anchor_weight", "insult_walk", "credibility", "bluff_walk", "patience_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {getattr(self, name)}")
        if self.reciprocity < 0 or self.rejection_step < 0:
            raise ValueError("reciprocity and rejection_step must be >= 0")
        if not 0.0 < self.insult_ratio < 1.0:
            raise ValueError(f"insult_ratio must lie in (0, 1), got {self.insult_ratio}")
        if self.patience_grace < 0:
            raise ValueError(f"patience_grace must be >= 0, got {self.patience_grace}")


LISTENING_TYPES: dict[str, ListeningConfig] = {
    # Tough: concedes late, anchors and arguments move it least, loses patience with a partner who stalls.
    "boulware": ListeningConfig(
        exponent=(0.15, 0.4),
        slack=(0.35, 0.65),
        reciprocity=0.3,
        rejection_step=0.1,
        anchor_weight=0.4,
        insult_ratio=0.5,
        insult_walk=0.5,
        credibility=0.6,
        bluff_walk=0.15,
        patience_grace=3,
        patience_rate=0.1,
    ),
    # Soft: concedes early by the clock, believes commitments most.
    "conceder": ListeningConfig(
        exponent=(1.5, 3.0),
        slack=(0.1, 0.35),
        reciprocity=0.3,
        rejection_step=0.08,
        anchor_weight=0.5,
        insult_ratio=0.45,
        insult_walk=0.3,
        credibility=0.8,
        bluff_walk=0.1,
        patience_grace=3,
        patience_rate=0.08,
    ),
    # Tit-for-tat: slow clock, answers the partner's concessions and rejections.
    "reciprocal": ListeningConfig(
        exponent=(0.3, 0.6),
        slack=(0.2, 0.5),
        reciprocity=0.8,
        rejection_step=0.15,
        anchor_weight=0.3,
        insult_ratio=0.5,
        insult_walk=0.4,
        credibility=0.6,
        bluff_walk=0.15,
        patience_grace=2,
        patience_rate=0.1,
    ),
}
"""The listening types; names shared with the multi-issue concession agents (agents/socialrl/code_agents.py)."""


REJECT_MOVE = "reject"
"""The action kind of rejecting the standing offer in both price domains (environments/socialrl/)."""


class PriceListener:
    """One episode of a listening counterpart over a price deal space (see the module table)."""

    def __init__(self, config: ListeningConfig, space: PriceDealSpace, agent_id: str, rng: random.Random) -> None:
        self.config, self.space, self.agent_id, self.rng = config, space, agent_id, rng
        # One stream per kind of decision, so that a behaviour that triggers one decision (a "final offer")
        # leaves the draws of the others (patience) as they were: paired episodes stay paired.
        self.walk_rng, self.final_rng, self.patience_rng = (random.Random(rng.getrandbits(64)) for _ in range(3))
        self.sign = 1.0 if space.best > space.worst else -1.0
        """+1 when a higher price is better for this counterpart (a seller), -1 otherwise."""
        self.opening = self.sign * space.best
        self.reservation = self.sign * space.worst
        self.exponent = rng.uniform(*config.exponent)
        self.planned = self.reservation + rng.uniform(*config.slack) * (self.opening - self.reservation)
        self.final = self.planned
        self.floor = self.reservation
        self.partner_offers: list[float] = []
        self.partner_conceded = 0.0
        self.rejections = 0
        self.stalls = 0
        self.walk_now = False
        self.my_offers: list[float] = []
        self.rejected_offer_index = -1
        self.partner_final: float | None = None
        self.finals_broken = False
        self.final_decided: set[float] = set()
        self.accept_final = False
        self.said_final = False
        """Whether it has called one of its own offers final (once, at its last answerable offer)."""

    # ------------------------------------------------------------------------------------------- reading
    def frame(self, price: float) -> float:
        return self.sign * price

    def insult_line(self) -> float:
        r = abs(self.reservation)
        return self.sign * (r * self.config.insult_ratio if self.sign > 0 else r / self.config.insult_ratio)

    def hear(self, data: dict[str, Any]) -> None:
        """One partner move relayed to the counterpart (`data`: the relay's said/move/offer fields)."""
        said = str(data.get("said") or "")
        move = str(data.get("move") or "")
        offer = data.get("offer") or {}
        price = offer.get("price") if isinstance(offer, dict) else None
        offered = self.frame(float(price)) if isinstance(price, int | float) and not isinstance(price, bool) else None
        if self.config.information:
            for limit in stated_limits(said):
                # The partner says it can pay (a buyer) / take (a seller) this much: never settle worse.
                self.floor = max(self.floor, min(self.frame(limit), self.opening))
        counter = offered if offered is not None else _frame_or_none(self, mentioned_price(said))
        standing_mine = bool(self.my_offers) and self.rejected_offer_index < len(self.my_offers) - 1
        if standing_mine and counter is not None and (move == REJECT_MOVE or is_rejection(said)):
            self.rejections += 1
            self.rejected_offer_index = len(self.my_offers) - 1
        if offered is not None:
            if not self.partner_offers:
                self._anchor(offered)
                self.stalls = 0
            elif offered > self.partner_offers[-1] + 1e-9:
                self.partner_conceded += offered - self.partner_offers[-1]
                self.stalls = 0
            else:
                self.stalls += 1
            if self.partner_final is not None and abs(offered - self.partner_final) > 1e-9:
                self.finals_broken = True  # called an offer final, then moved
            self.partner_offers.append(offered)
        else:
            self.stalls += 1
        if says_final(said) and not self.finals_broken:
            final = offered if offered is not None else (self.partner_offers[-1] if self.partner_offers else counter)
            if final is not None:
                if self.partner_final is not None and abs(final - self.partner_final) > 1e-9:
                    self.finals_broken = True
                else:
                    self.partner_final = final
                    # Judged only once the partner has conceded: an opening called final shows nothing (and
                    # moving after it breaks the partner's word like any other final).
                    if self.partner_conceded > 0:
                        self._judge_final(final)

    def _anchor(self, opening: float) -> None:
        insult = self.insult_line()
        if opening < insult:
            if self.walk_rng.random() < self.config.insult_walk:
                self.walk_now = True
            return
        span = self.planned - insult
        pull = 0.0 if span <= 0 else min(1.0, max(0.0, (self.planned - opening) / span))
        self.final = self.planned - self.config.anchor_weight * pull * (self.planned - self.reservation)

    def _judge_final(self, final: float) -> None:
        key = round(final, 6)
        if key in self.final_decided:
            return
        self.final_decided.add(key)
        draw = self.final_rng.random()
        if final >= self.floor - 1e-9:
            self.accept_final = draw < self.config.credibility
        elif draw < self.config.bluff_walk:
            self.walk_now = True

    # ------------------------------------------------------------------------------------------ deciding
    def aspiration(self, request: Notification) -> float:
        turn = int(request.data.get("turn", 0))
        max_turns = max(1, int(request.data.get("max_turns", 1)))
        span = self.opening - self.final
        # The clock reaches 1 at the last turn (max_turns - 1), where the aspiration meets the planned final.
        progress = min(1.0, turn / max(1, max_turns - 1)) ** (1.0 / self.exponent)
        if self.partner_offers and self.opening - self.partner_offers[0] > 1e-9:
            # Relative tit-for-tat: the share of the opening gap the partner has closed.
            progress += self.config.reciprocity * self.partner_conceded / (self.opening - self.partner_offers[0])
        progress += self.config.rejection_step * self.rejections
        return max(self.floor, self.opening - span * min(1.0, progress))

    def decide(self, request: Notification, pending: float | None) -> Action:
        space, me = self.space, self.agent_id
        walk = space.walk_away(me, "I don't think we can agree. Goodbye.")
        if self.walk_now and walk is not None and walk.kind in request.allowed:
            return walk
        aspiration = self.aspiration(request)
        if pending is not None:
            value = self.frame(pending)
            final_now = self.accept_final and self.partner_final is not None and abs(value - self.partner_final) < 1e-9
            if value >= aspiration - 1e-9 or (final_now and value >= self.floor - 1e-9):
                accept = space.accept(me, pending, f"Alright, {space.describe(pending)} works. Deal.")
                if accept.kind in request.allowed:
                    return accept
            self.accept_final = False
        if self._loses_patience() and walk is not None and walk.kind in request.allowed:
            return walk
        price = self._snap(aspiration)
        if self.my_offers:
            price = min(price, self.my_offers[-1])  # never take back a concession
        first = not self.my_offers
        self.my_offers.append(price)
        text = self._offer_text(self.sign * price, first, pending is not None)
        turn, max_turns = int(request.data.get("turn", 0)), int(request.data.get("max_turns", 1))
        if not self.said_final and not first and turn >= max_turns - 3:
            # Its last offer the partner can still answer: it commits to it, as it would have its partner do.
            self.said_final = True
            text = f"This is my final offer: {space.describe(self.sign * price)}."
        offer = space.offer(me, self.sign * price, text)
        if offer.kind in request.allowed:
            return offer
        return Action(me, space.message_kind, "Let me think about it.")

    def _loses_patience(self) -> bool:
        """Whether it walks away from a partner that has stalled beyond the grace (one draw per stalled turn)."""
        beyond = self.stalls - self.config.patience_grace
        return beyond > 0 and self.patience_rng.random() < self.config.patience_rate * beyond

    def _snap(self, value: float) -> float:
        """A price people write: whole dollars (cents under $20), never beyond the floor."""
        step = 1.0 if abs(self.opening) >= 20 else 0.01
        snapped = math.ceil(value / step - 1e-9) * step
        return round(max(snapped, self.floor), 2)

    def _offer_text(self, price: float, first: bool, answering: bool) -> str:
        what = self.space.describe(price)
        if first:
            return f"Hello! I'm asking {what}."
        lead = self.rng.choice(["That doesn't work for me. ", "I can't do that. ", ""]) if answering else ""
        return lead + self.rng.choice(
            [f"I can come to {what}.", f"How about {what}?", f"My price is {what}.", f"Let's say {what}."]
        )


def _frame_or_none(listener: PriceListener, price: float | None) -> float | None:
    return None if price is None else listener.frame(price)
