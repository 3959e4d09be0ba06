"""Code agents for the SocialRL bargaining environments: the training counterparts and tournament baselines.

All of them work in every SocialRL environment through the environment's `DealSpace` (see
environments/socialrl/bargaining.py), built from the agent's own private observation only.

In the price domains (Craigslist, Marketplace) `boulware`, `conceder` and `reciprocal` are listening
counterparts: they read what the partner says as well as what it offers, with the scenario's hidden
reservation and parameters drawn per episode (agents/socialrl/price_counterpart.py). Elsewhere:

| agent | behaviour |
| --- | --- |
| `boulware` | time-dependent concession, tough: target utility 1 - (1 - floor) * t^(1/e) with e = 0.2 |
| `conceder` | the same curve with e = 3: concedes early |
| `reciprocal` | tit-for-tat in utility: concedes as much as the counterpart conceded in its last offer |
| `accommodating` | states its private facts openly, concedes fast, accepts anything above its walk-away |
| `random` | a random valid action each turn (offers drawn from the deal space) |

t = turn / max_turns from the TURN notification. Every agent accepts a standing offer worth at least what
it would offer next, and on its last turn accepts anything above its walk-away utility.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from agents.socialrl.price_counterpart import LISTENING_TYPES, ListeningConfig, PriceListener
from environments.core.base import ActionSpec
from environments.core.events import Action, Event, Notification, Observation
from environments.core.registry import env_class
from environments.socialrl.bargaining import Deal, DealSpace, PriceDealSpace


@dataclass(frozen=True)
class ConcessionConfig:
    """Parameters of a concession-based code agent."""

    exponent: float = 1.0
    """Concession exponent e of target(t) = 1 - (1 - floor) * t^(1/e): e < 1 Boulware, e > 1 conceder."""
    floor: float = 0.0
    """Lowest own utility (on the deal space's [worst, best] = [0, 1] scale) the agent ever offers."""
    reveal_private: bool = False
    """Whether the agent states its private facts in its first message (the accommodating agent)."""
    reciprocal: bool = False
    """Concede by the counterpart's last concession instead of by the clock (tit-for-tat)."""
    min_reciprocal_step: float = 0.02
    """Smallest concession of the reciprocal agent per turn, so that deadlocks still move."""

    def __post_init__(self) -> None:
        if self.exponent <= 0:
            raise ValueError(f"exponent must be > 0, got {self.exponent}")
        if not 0.0 <= self.floor <= 1.0:
            raise ValueError(f"floor must lie in [0, 1], got {self.floor}")
        if not 0.0 <= self.min_reciprocal_step <= 1.0:
            raise ValueError(f"min_reciprocal_step must lie in [0, 1], got {self.min_reciprocal_step}")


class CodeAgent:
    """Base of the code agents: keeps the deal space, the standing offer and the counterpart's offers."""

    name = "code"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.episodes_played = 0
        self.rng = random.Random(seed)
        self.space: DealSpace | None = None
        self.agent_id = ""
        self.env_id = ""
        self.their_offers: list[Deal] = []
        self.my_offers: list[Deal] = []
        self.agreed: Deal | None = None
        self.spoke = False

    def describe(self) -> str:
        return f"{self.name}(seed={self.seed})"

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id, self.env_id = agent_id, env_id
        # Seeded by the agent's seed and how many episodes it has played (not by the episode id, which
        # may be random), so that a seed reproduces the same play.
        self.rng = random.Random(f"{self.seed}:{self.episodes_played}")
        self.episodes_played += 1
        self.space, self.their_offers, self.my_offers, self.agreed, self.spoke = None, [], [], None, False

    async def observe(self, event: Event) -> None:
        if isinstance(event, Observation):
            if event.private and "role" in event.data:
                self.space = env_class(self.env_id).deal_space(self.agent_id, event.data)
            elif self.space is not None and event.data.get("offer") is not None:
                deal = self.space.deal_from_payload(event.data["offer"])
                if deal is not None:
                    self.their_offers.append(deal)
            if self.space is not None and event.data.get("accepted") is not None:
                self.agreed = self.space.deal_from_payload(event.data["accepted"])

    async def act(self, request: Notification) -> Action:
        if self.space is None:
            raise RuntimeError(f"{self.describe()}: no private observation received before the first turn")
        special = self.space.special_turn(self.agent_id, request, self.agreed or self._last_agreed())
        if special is not None:
            return special
        return self.decide(request)

    def _last_agreed(self) -> Deal | None:
        return self.their_offers[-1] if self.their_offers else None

    def decide(self, request: Notification) -> Action:
        raise NotImplementedError

    # ---------------------------------------------------------------------------------- helpers
    @staticmethod
    def clock(request: Notification) -> float:
        turn = int(request.data.get("turn", 0))
        max_turns = max(1, int(request.data.get("max_turns", 1)))
        return min(1.0, turn / max_turns)

    @staticmethod
    def is_last_turn(request: Notification) -> bool:
        return int(request.data.get("turn", 0)) >= int(request.data.get("max_turns", 1)) - 2

    def pending(self, request: Notification) -> Deal | None:
        assert self.space is not None
        return self.space.deal_from_payload(request.data.get("pending_offer"))

    def deal_near(self, target: float) -> Deal:
        """The deal whose utility is the smallest one >= target (ties broken by the seeded rng)."""
        assert self.space is not None
        scored = [(self.space.utility(d), d) for d in self.space.deals()]
        above = [s for s in scored if s[0] >= target - 1e-9]
        if not above:
            best = max(u for u, _ in scored)
            return self.rng.choice([d for u, d in scored if u == best])
        lowest = min(u for u, _ in above)
        return self.rng.choice([d for u, d in above if abs(u - lowest) < 1e-9])

    def offer_text(self, deal: Deal, first: bool) -> str:
        assert self.space is not None
        what = self.space.describe(deal)
        if first:
            return f"Hello! Here is what I have in mind: {what}."
        return self.rng.choice(
            [
                f"I can move a little: {what}.",
                f"How about this: {what}?",
                f"Let's meet here: {what}.",
                f"My proposal: {what}.",
            ]
        )

    def allowed_or(self, request: Notification, action: Action, fallback: Action | None) -> Action:
        if action.kind in request.allowed:
            return action
        if fallback is not None and fallback.kind in request.allowed:
            return fallback
        assert self.space is not None
        kind = self.space.message_kind if self.space.message_kind in request.allowed else request.allowed[0]
        return Action(self.agent_id, kind, "Let me think about it.")


class ConcessionAgent(CodeAgent):
    """Time-dependent or reciprocal concession (Boulware, conceder, reciprocal, accommodating)."""

    def __init__(
        self, config: ConcessionConfig, name: str, seed: int = 0, listening: ListeningConfig | None = None
    ) -> None:
        super().__init__(seed)
        self.config = config
        self.name = name
        self._target = 1.0
        self.listening = listening
        """How it listens in a price domain (None: it plays the concession curve there too)."""
        self.listener: PriceListener | None = None

    def describe(self) -> str:
        c = self.config
        if self.listener is not None:
            return f"{self.name}(listening, e={self.listener.exponent:.2f}, seed={self.seed})"
        return f"{self.name}(e={c.exponent:g}, floor={c.floor:g}, seed={self.seed})"

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        await super().reset(agent_id, env_id, spec, episode_id)
        self.listener = None

    async def observe(self, event: Event) -> None:
        await super().observe(event)
        if not isinstance(event, Observation):
            return
        if event.private and "role" in event.data:
            if self.listening is not None and isinstance(self.space, PriceDealSpace):
                self.listener = PriceListener(self.listening, self.space, self.agent_id, self.rng)
        elif self.listener is not None and "move" in event.data:
            self.listener.hear(event.data)

    def target(self, request: Notification) -> float:
        """Own utility the agent aims for at this turn."""
        c = self.config
        if not c.reciprocal:
            return 1.0 - (1.0 - c.floor) * self.clock(request) ** (1.0 / c.exponent)
        assert self.space is not None
        if len(self.their_offers) >= 2:
            conceded = self.space.utility(self.their_offers[-1]) - self.space.utility(self.their_offers[-2])
            step = max(c.min_reciprocal_step, conceded)
        else:
            step = c.min_reciprocal_step if self.my_offers else 0.0
        self._target = max(c.floor, self._target - step)
        return self._target

    def decide(self, request: Notification) -> Action:
        assert self.space is not None
        if self.listener is not None:
            pending = self.pending(request)
            return self.listener.decide(request, None if pending is None else float(pending))
        space = self.space
        target = self.target(request)
        pending = self.pending(request)
        walk_away = space.walk_away_utility()
        if pending is not None:
            value = space.utility(pending)
            acceptable = value >= target or (self.is_last_turn(request) and value >= max(walk_away, self.config.floor))
            if self.config.reveal_private and value >= walk_away:
                acceptable = True
            if acceptable:
                text = f"That works for me: {space.describe(pending)}."
                if self.config.reveal_private and not self.spoke:
                    text = f"{space.reveal_private()} {text}"
                accept = space.accept(self.agent_id, pending, text)
                if accept.kind in request.allowed:
                    self.agreed = pending
                    return accept
        deal = self.deal_near(target)
        text = self.offer_text(deal, first=not self.my_offers)
        if self.config.reveal_private and not self.spoke:
            text = f"{space.reveal_private()} {text}"
        self.spoke = True
        self.my_offers.append(deal)
        offer = space.offer(self.agent_id, deal, text)
        return self.allowed_or(request, offer, space.walk_away(self.agent_id, "I don't think we can agree."))


class RandomAgent(CodeAgent):
    """A random valid action each turn: offers from the deal space, accepts with probability 0.3."""

    name = "random"

    def decide(self, request: Notification) -> Action:
        assert self.space is not None
        pending = self.pending(request)
        if pending is not None and self.rng.random() < 0.3:
            accept = self.space.accept(self.agent_id, pending, "Fine, deal.")
            if accept.kind in request.allowed:
                self.agreed = pending
                return accept
        message_kind = self.space.message_kind
        if message_kind in request.allowed and self.rng.random() < 0.15:
            return Action(self.agent_id, message_kind, self.rng.choice(["Hmm.", "Tell me more.", "Interesting."]))
        deal = self.rng.choice(list(self.space.deals()))
        self.my_offers.append(deal)
        offer = self.space.offer(self.agent_id, deal, self.offer_text(deal, first=not self.my_offers))
        return self.allowed_or(request, offer, None)


CODE_AGENTS: dict[str, dict[str, Any]] = {
    "boulware": {"config": ConcessionConfig(exponent=0.2, floor=0.1)},
    "conceder": {"config": ConcessionConfig(exponent=3.0, floor=0.0)},
    "reciprocal": {"config": ConcessionConfig(reciprocal=True, floor=0.1)},
    "accommodating": {"config": ConcessionConfig(exponent=5.0, floor=0.0, reveal_private=True)},
    "random": {},
}


def make_code_agent(
    name: str, seed: int = 0, *, listening: ListeningConfig | None = None, **overrides: Any
) -> CodeAgent:
    """A code agent by name (see the module table); `overrides` replace ConcessionConfig fields, `listening`
    the type's listening parameters in the price domains (default `LISTENING_TYPES[name]`)."""
    if name == "random":
        return RandomAgent(seed)
    if name not in CODE_AGENTS:
        raise KeyError(f"unknown code agent {name!r}; known: {', '.join(CODE_AGENTS)}")
    base: ConcessionConfig = CODE_AGENTS[name]["config"]
    config = ConcessionConfig(**{**base.__dict__, **overrides})
    return ConcessionAgent(config, name, seed, listening or LISTENING_TYPES.get(name))
