"""A role's view of a bargaining problem, for code agents.

Every SocialRL environment provides `deal_space(agent_id, private_view)` that turns the structured
private observation an agent receives at reset (`Observation.data`) into a `DealSpace`: the deals the
agent could propose, its own utility for each, and how to turn a decision into the environment's
action. Built only from the agent's own information, so a code agent using it cheats no more than an
LLM agent reading the same observation.

Conventions every SocialRL environment follows so that generic code agents work everywhere:

* the private observation at reset has `data = {"role": ..., "private": {...}, "public": {...}}`;
* every TURN notification has `data["turn"]` (accepted actions so far), `data["max_turns"]`, and
  `data["pending_offer"]`: the payload of the counterpart's standing offer this agent may accept, or
  None;
* an observation relaying the counterpart's offer carries the offer payload in `data["offer"]`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from environments.core.events import Action, Notification

Deal = Hashable


class DealSpace(ABC):
    """One role's bargaining problem."""

    message_kind: str = "message"
    """The environment's action kind for plain talk."""

    @abstractmethod
    def deals(self) -> Sequence[Deal]:
        """Every deal the role could propose (a finite grid for continuous prices)."""

    @abstractmethod
    def utility(self, deal: Deal) -> float:
        """Own utility of a deal, scaled so the best deal is 1 (may be < 0 below the walk-away)."""

    def walk_away_utility(self) -> float:
        """Own utility of ending without a deal on the same scale."""
        return 0.0

    @abstractmethod
    def deal_from_payload(self, payload: Mapping[str, Any] | None) -> Deal | None:
        """The deal an offer payload (from the counterpart) describes, from this role's side."""

    @abstractmethod
    def offer(self, agent_id: str, deal: Deal, text: str) -> Action:
        """Propose `deal`."""

    @abstractmethod
    def accept(self, agent_id: str, deal: Deal, text: str) -> Action:
        """Accept the counterpart's standing offer `deal`."""

    def walk_away(self, agent_id: str, text: str) -> Action | None:
        """End without a deal, where the environment allows it (None otherwise)."""
        return None

    def special_turn(self, agent_id: str, request: Notification, agreed: Deal | None) -> Action | None:
        """Answer turns outside the offer/accept loop (e.g. DnD's final selection); None if not one."""
        return None

    @abstractmethod
    def describe(self, deal: Deal) -> str:
        """The deal in words, from this role's side."""

    @abstractmethod
    def reveal_private(self) -> str:
        """A sentence stating the role's private facts (what an accommodating agent says)."""


class PriceDealSpace(DealSpace):
    """A price negotiation from one side: a grid of prices from the side's best to its worst price.

    Utility is linear in price: 1 at `best`, 0 at `worst` (either may be the larger number)."""

    def __init__(
        self,
        best: float,
        worst: float,
        offer_kind: str = "offer",
        accept_kind: str = "accept",
        quit_kind: str | None = "quit",
        private_text: str = "",
        steps: int = 40,
        message_kind: str = "message",
    ) -> None:
        if best == worst:
            raise ValueError("best and worst prices must differ")
        self.best, self.worst = best, worst
        self.message_kind = message_kind
        self.offer_kind, self.accept_kind, self.quit_kind = offer_kind, accept_kind, quit_kind
        self.private_text = private_text
        self._grid = tuple(round(best + (worst - best) * i / steps, 2) for i in range(steps + 1))

    def deals(self) -> Sequence[Deal]:
        return self._grid

    def utility(self, deal: Deal) -> float:
        return (float(deal) - self.worst) / (self.best - self.worst)

    def deal_from_payload(self, payload: Mapping[str, Any] | None) -> Deal | None:
        if not payload or not isinstance(payload.get("price"), int | float):
            return None
        return float(payload["price"])

    def offer(self, agent_id: str, deal: Deal, text: str) -> Action:
        return Action(agent_id, self.offer_kind, text, {"price": float(deal)})

    def accept(self, agent_id: str, deal: Deal, text: str) -> Action:
        return Action(agent_id, self.accept_kind, text, {"price": float(deal)})

    def walk_away(self, agent_id: str, text: str) -> Action | None:
        return Action(agent_id, self.quit_kind, text) if self.quit_kind else None

    def describe(self, deal: Deal) -> str:
        return f"${float(deal):g}"

    def reveal_private(self) -> str:
        return self.private_text or "I have nothing to hide: the listing price is my target."
