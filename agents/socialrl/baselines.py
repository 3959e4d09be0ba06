"""Trivial code policies a trained negotiator must beat, played on the same evaluation plan as the models.

A reward that a one-line rule reaches is not evidence of strategy: every trained policy is compared, paired
on the same held-out episodes, with these rules (models/socialrl/stage1.py, `evaluate_baselines`).

| baseline | behaviour |
| --- | --- |
| `accept_first` | accepts the counterpart's first standing offer; until one stands it asks for one (a message) |
| `hold_target` | offers its principal's target every turn and accepts a standing offer at least as good |
| `split_difference` | opens at its best deal, then offers the midpoint (in its own utility) between its last offer and the counterpart's standing offer; accepts a standing offer at least as good as that midpoint |

The target of `hold_target` is the principal's private target price where the seat has one (the Craigslist
buyer's `target_price`), else the deal halfway in utility between the seat's best deal and its walk-away.
All three work in every SocialRL environment through the environment's `DealSpace`
(environments/socialrl/bargaining.py), like the counterparts in agents/socialrl/code_agents.py.
"""

from __future__ import annotations

from collections.abc import Callable

from agents.socialrl.code_agents import CodeAgent
from environments.core.events import Action, Event, Notification, Observation
from environments.socialrl.bargaining import Deal


class AcceptFirst(CodeAgent):
    """Accept the first standing offer; ask for one until then."""

    name = "accept_first"

    def decide(self, request: Notification) -> Action:
        assert self.space is not None
        pending = self.pending(request)
        if pending is not None:
            accept = self.space.accept(self.agent_id, pending, "Deal, thank you!")
            if accept.kind in request.allowed:
                self.agreed = pending
                return accept
        kind = self.space.message_kind if self.space.message_kind in request.allowed else request.allowed[0]
        return Action(self.agent_id, kind, "Hi! What would you offer me?")


class HoldTarget(CodeAgent):
    """Offer the principal's target every turn; accept anything at least as good."""

    name = "hold_target"

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.target_price: float | None = None

    async def observe(self, event: Event) -> None:
        if isinstance(event, Observation) and event.private and "role" in event.data:
            price = event.data.get("private", {}).get("target_price")
            self.target_price = float(price) if isinstance(price, int | float) else None
        await super().observe(event)

    def target(self) -> Deal:
        assert self.space is not None
        if self.target_price is not None:
            return self.target_price
        walk_away = self.space.walk_away_utility()
        return self.deal_near(walk_away + (1.0 - walk_away) / 2)

    def decide(self, request: Notification) -> Action:
        assert self.space is not None
        target = self.target()
        pending = self.pending(request)
        if pending is not None and self.space.utility(pending) >= self.space.utility(target) - 1e-9:
            accept = self.space.accept(self.agent_id, pending, "Deal, thank you!")
            if accept.kind in request.allowed:
                self.agreed = pending
                return accept
        self.my_offers.append(target)
        offer = self.space.offer(self.agent_id, target, f"My offer stands: {self.space.describe(target)}.")
        return self.allowed_or(request, offer, None)


class SplitDifference(CodeAgent):
    """Open at the best deal, then meet the counterpart halfway each turn."""

    name = "split_difference"

    def decide(self, request: Notification) -> Action:
        assert self.space is not None
        space = self.space
        pending = self.pending(request)
        if not self.my_offers:
            proposal = self.deal_near(1.0)
        elif pending is None:
            proposal = self.my_offers[-1]
        else:
            proposal = self.deal_near((space.utility(self.my_offers[-1]) + space.utility(pending)) / 2)
        if pending is not None and space.utility(pending) >= space.utility(proposal) - 1e-9:
            accept = space.accept(self.agent_id, pending, "Deal, thank you!")
            if accept.kind in request.allowed:
                self.agreed = pending
                return accept
        self.my_offers.append(proposal)
        offer = space.offer(self.agent_id, proposal, f"Let's meet halfway: {space.describe(proposal)}.")
        return self.allowed_or(request, offer, None)


BASELINES: dict[str, Callable[[int], CodeAgent]] = {
    "accept_first": AcceptFirst,
    "hold_target": HoldTarget,
    "split_difference": SplitDifference,
}
"""Baseline name -> factory taking the episode seed."""


def make_baseline(name: str, seed: int = 0) -> CodeAgent:
    """A baseline policy by name (see the module table)."""
    if name not in BASELINES:
        raise KeyError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")
    return BASELINES[name](seed)
