"""The rules of a single-price haggle, shared by Craigslist and Marketplace.

Both environments let two alternating sides talk, make price offers, accept or reject the counterpart's
standing offer and walk away. They differ in their action names, their command words, their rewards and
their scenarios; the moves themselves are the same and live here once, so that both read, check and apply
an offer identically:

* an offer's price (parsed from `OFFER $<price>` or given in a structured payload) must be a number (not a
  bool, not text), finite, more than 0 and at most `MAX_PRICE` (`check_offer_price`);
* each side has at most one standing offer; a new offer replaces the side's previous one;
* `accept` takes the counterpart's standing offer (allowed only while one stands); a payload price that
  differs from it is invalid; `reject` clears it;
* a message must not be empty; walking away ends the episode without a deal;
* every relayed move carries the mover's own words and move kind (`data["said"]`, `data["move"]`), which the
  listening counterparts read (agents/socialrl/price_counterpart.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from environments.core.alternating import AlternatingTurns
from environments.core.base import ParseError
from environments.core.events import Action, Event
from environments.core.grammar import CommandMatch, NumberError, check_number, read_number, squeeze
from environments.socialrl.replies import CommandReplies

MAX_PRICE = 1e9
"""Largest price an offer or a scenario may state (Craigslist's largest listing is $56,500)."""


def check_price(value: object, what: str) -> str | None:
    """Why `value` is not an acceptable price (a scenario's or an offer's), or None."""
    return check_number(value, what=what, above=0, maximum=MAX_PRICE)


def check_offer_price(value: object) -> str | None:
    """Why `value` is not an acceptable offer price, or None: the one check both environments apply."""
    return check_price(value, "an offer's price")


@dataclass(frozen=True)
class PriceMoves:
    """An environment's names for the moves of a price haggle, and how walking away is reported."""

    message: str
    """Action kind for plain talk."""
    offer: str
    """Action kind for a price offer (payload `{"price": float}`); also the command grammar's key."""
    accept: str
    """Action kind for accepting the counterpart's standing offer."""
    reject: str
    """Action kind for rejecting the counterpart's standing offer."""
    walk_away: str
    """Action kind for ending without a deal."""
    walk_away_ending: str
    """`Outcome.metrics["ending"]` after a walk-away."""
    walk_away_note: str
    """What the counterpart is told after the walk-away's text, e.g. "[quits]"."""

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"PriceMoves.{spec.name} must be a non-empty string, got {value!r}")
        kinds = (self.message, self.offer, self.accept, self.reject, self.walk_away)
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"PriceMoves action kinds must be distinct, got {kinds}")


class PriceHaggle(CommandReplies, AlternatingTurns):
    """Parsing, validation, application and turn requests of a single-price haggle between two seats.

    A mixin placed before `Environment` in the bases. The environment sets `moves` and `commands` (its
    command grammar for `find_last_command`, keyed by the `moves` kinds, the offer's price in the named
    group `price` or `price2`), calls `_start_haggle()` in `_reset` and reads `_deal_price`, `_turn` and
    `_ending` in `_compute_outcome`."""

    moves: ClassVar[PriceMoves]
    reply_example: ClassVar[str] = "`OFFER $120`"

    # Provided by Environment (the mixin precedes it in the bases).
    _request_turn: Any
    _relay: Any
    _finish: Any

    def _start_haggle(self) -> None:
        """The state of a fresh episode: no turns, no standing offers, no deal."""
        self._turn = 0
        self._standing: dict[str, float | None] = dict.fromkeys(self.agent_ids, None)  # offer made BY each side
        self._deal_price: float | None = None
        self._ending = "max_turns"

    def _without_command(self, agent_id: str, text: str) -> Action | ParseError:
        return Action(agent_id, self.moves.message, squeeze(text))

    def _parse_command(self, agent_id: str, match: CommandMatch) -> Action | ParseError:
        moves = self.moves
        if match.kind == moves.offer:
            token = match.groups.get("price") or match.groups.get("price2")
            if token is None:
                return ParseError("`OFFER` needs a price, e.g. `OFFER $120`")
            price = read_number(token, what="the price", above=0, maximum=MAX_PRICE)
            if isinstance(price, NumberError):
                return ParseError(f"`OFFER` needs a price, e.g. `OFFER $120`: {price.message}")
            return Action(agent_id, moves.offer, match.message, {"price": price})
        standing = self._standing_offer(agent_id)
        if match.kind == moves.accept and standing is not None:
            # Echo the accepted price so that restating it is not mistaken for a leak.
            return Action(agent_id, moves.accept, match.message, {"price": standing})
        return Action(agent_id, match.kind, match.message)

    def _turn_for(self, agent_id: str) -> Event:
        moves = self.moves
        standing = self._standing[self._other(agent_id)]
        allowed = [moves.message, moves.offer, moves.walk_away]
        if standing is not None:
            allowed += [moves.accept, moves.reject]
        text = f"Your turn ({self._turn + 1}/{self.scenario.max_turns})."
        if standing is not None:
            text += f" Standing offer from the {self._other(agent_id)}: ${standing:g}."
        pending = {"price": standing} if standing is not None else None
        return self._request_turn(
            agent_id,
            allowed,
            text,
            {"turn": self._turn, "max_turns": self.scenario.max_turns, "pending_offer": pending},
        )

    def _validate(self, action: Action) -> str | None:
        moves = self.moves
        if action.kind == moves.offer:
            return check_offer_price(action.payload.get("price"))
        if action.kind == moves.message and not action.text.strip():
            return "a message cannot be empty"
        if action.kind == moves.accept and "price" in action.payload:
            standing = self._standing[self._other(action.agent_id)]
            if action.payload["price"] != standing:
                return f"the standing offer is ${standing:g}, not ${action.payload['price']}"
        return None

    def _apply(self, action: Action) -> list[Event]:
        moves = self.moves
        actor, other = action.agent_id, self._other(action.agent_id)
        self._turn += 1
        said = f"The {actor} says: {action.text}" if action.text else f"The {actor}:"
        # What a code counterpart reads: the partner's own words and its move, beside the structured offer.
        heard = {"said": action.text, "move": action.kind}
        if action.kind == moves.offer:
            price = float(action.payload["price"])
            self._standing[actor] = price
            relay = self._relay(action, other, f"{said}\n[offers ${price:g}]", {**heard, "offer": {"price": price}})
        elif action.kind == moves.accept:
            self._deal_price = self._standing[other]
            self._ending = "deal"
            note = f"{said}\n[accepts ${self._deal_price:g}]"
            return self._finish([self._relay(action, other, note, {**heard, "accepted": {"price": self._deal_price}})])
        elif action.kind == moves.walk_away:
            self._ending = moves.walk_away_ending
            return self._finish([self._relay(action, other, f"{said}\n{moves.walk_away_note}", heard)])
        elif action.kind == moves.reject:
            self._standing[other] = None
            relay = self._relay(action, other, f"{said}\n[rejects your offer]", {**heard, "rejected": True})
        else:
            relay = self._relay(action, other, said, heard)
        return self._next_turn(other, [relay])
