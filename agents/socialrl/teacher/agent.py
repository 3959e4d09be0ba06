"""The strategic code teacher: an `Agent` (environments.core.runtime) that negotiates in every SocialRL domain
and records an INFER -> ACT -> ANTICIPATE trace per turn.

Each turn it answers with `Action(agent_id, RAW_TEXT, act_text)`: a natural-language message followed by
the environment's command line, parsed by the environment's own grammar (so every act text is a valid
model target). `trace` holds one dict per decision:

    {"turn": 4, "infer": "They seem to value water most (p=0.62) ...",
     "act": "I can give you more food ...\nPROPOSE food=1 water=1 firewood=3",
     "anticipate": "They will probably accept (p~0.71).",
     "kind": "propose", "payload": {"mine": {...}}}

`kind`/`payload` are the action the text is meant to parse to (tests check it with `env.parse`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from agents.socialrl.teacher.base import Domain, Plan, TurnContext
from environments import SOCIALRL_ENV_IDS
from environments.core.base import ActionSpec
from environments.core.events import RAW_TEXT, Action, Event, Notification, NotificationKind, Observation
from environments.core.registry import env_class

TEACHER_NAME = "teacher"


def _domain_factory(env_id: str) -> Callable[..., Domain]:
    if env_id == "dnd-v0":
        from agents.socialrl.teacher.allocation import DndDomain

        return DndDomain
    if env_id == "casino-v0":
        from agents.socialrl.teacher.allocation import CasinoDomain

        return CasinoDomain
    if env_id in ("craigslist-v0", "marketplace-v0"):
        from agents.socialrl.teacher.price import PriceDomain

        return lambda *args: PriceDomain(env_id, *args)
    if env_id == "job-interview-v0":
        from agents.socialrl.teacher.contract import ContractDomain

        return ContractDomain
    if env_id == "calendar-v0":
        from agents.socialrl.teacher.calendar import CalendarDomain

        return CalendarDomain
    raise KeyError(f"the teacher does not play {env_id!r}")


SUPPORTED_ENV_IDS = SOCIALRL_ENV_IDS
"""The teacher plays every SocialRL domain."""


class StrategicTeacher:
    """Belief-based negotiator for the six SocialRL domains (see docs/teacher.md)."""

    name = TEACHER_NAME

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.episodes_played = 0
        self.rng = random.Random(seed)
        self.trace: list[dict[str, Any]] = []
        self.domain: Domain | None = None
        self.agent_id = ""
        self.env_id = ""
        self._reset_state()

    def describe(self) -> str:
        return f"{self.name}(seed={self.seed})"

    def _reset_state(self) -> None:
        self.trace = []
        self.domain = None
        self._unattributed: list[Any] = []
        self._standing: Any = None  # our offer the counterpart may accept
        self._invalid_streak = 0
        self._retries = 0
        self._last_plan: tuple[Plan, TurnContext] | None = None
        self.agreed: Any = None

    # ------------------------------------------------------------------------------------ Agent API
    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        if env_id not in SUPPORTED_ENV_IDS:
            raise KeyError(f"the teacher does not play {env_id!r}; it plays {', '.join(SUPPORTED_ENV_IDS)}")
        self.agent_id, self.env_id = agent_id, env_id
        # Seeded by the agent's seed and episode count (not the episode id, which may be random).
        self.rng = random.Random(f"teacher:{self.seed}:{self.episodes_played}")
        self.episodes_played += 1
        self._reset_state()

    async def observe(self, event: Event) -> None:
        if isinstance(event, Observation):
            self._observe(event)
        elif isinstance(event, Notification):
            if event.kind == NotificationKind.INVALID_ACTION:
                self._invalid_streak += 1
            elif event.kind == NotificationKind.TURN:
                self._attribute(event)

    async def act(self, request: Notification) -> Action:
        if self.domain is None:
            raise RuntimeError(f"{self.describe()}: no private observation received before the first turn")
        domain = self.domain
        if self._invalid_streak and self._last_plan is not None and self.trace:
            # The environment refused our last text: retry with its bare command line, then (after a
            # second refusal) with the structured action.
            self._invalid_streak = 0
            self._retries += 1
            last = self.trace[-1]
            lines = last["act"].strip().splitlines()
            if self._retries == 1:
                return Action(self.agent_id, RAW_TEXT, lines[-1])
            message = " ".join(lines[:-1]).strip() or "Here is my move."
            return Action(self.agent_id, last["kind"], message, dict(last["payload"]))
        self._invalid_streak = 0
        self._retries = 0
        pending = domain.space.deal_from_payload(request.data.get("pending_offer"))
        ctx = TurnContext(
            turn=int(request.data.get("turn", 0)),
            max_turns=max(1, int(request.data.get("max_turns", 1))),
            pending=pending,
            allowed=tuple(request.allowed),
            data=dict(request.data),
        )
        plan = domain.special(ctx) or domain.decide(ctx)
        plan = self._fit_allowed(plan, ctx)
        text, kind, payload = domain.render(plan, ctx)
        infer = domain.infer_text()
        anticipate = domain.anticipate_text(plan, ctx)
        self.trace.append(
            {
                "turn": ctx.turn,
                "infer": infer,
                "act": text,
                "anticipate": anticipate,
                "kind": kind,
                "payload": payload,
            }
        )
        if plan.kind == "offer":
            domain.my_offers.append(plan.deal)
            self._standing = plan.deal
        elif plan.kind == "accept":
            self.agreed = plan.deal
            if hasattr(domain, "agreed"):
                domain.agreed = plan.deal  # type: ignore[attr-defined]
        self._last_plan = (plan, ctx)
        return Action(self.agent_id, RAW_TEXT, text)

    # ------------------------------------------------------------------------------------- helpers
    def _observe(self, event: Observation) -> None:
        data = event.data
        if event.private and "role" in data:
            space = env_class(self.env_id).deal_space(self.agent_id, data)
            self.domain = _domain_factory(self.env_id)(self.agent_id, data, space, self.rng)
            return
        if self.domain is None or event.sender is None:
            return
        domain = self.domain
        said = _spoken_text(event.text)
        if said:
            domain.on_message(said)
        offer = data.get("offer")
        if offer is not None:
            deal = domain.space.deal_from_payload(offer)
            if deal is not None:
                self._unattributed.append(("offer", deal))
        if data.get("rejected"):
            self._unattributed.append(("rejected", self._standing))
        if data.get("accepted") is not None:
            deal = domain.space.deal_from_payload(data["accepted"])
            self.agreed = deal
            if hasattr(domain, "agreed"):
                domain.agreed = deal  # type: ignore[attr-defined]

    def _attribute(self, request: Notification) -> None:
        """Counterpart moves seen since our last turn happened at turn - 1 of this request."""
        if self.domain is None:
            self._unattributed.clear()
            return
        turn = int(request.data.get("turn", 0))
        max_turns = max(1, int(request.data.get("max_turns", 1)))
        their_turn = max(0, turn - 1)
        answered = False
        for what, deal in self._unattributed:
            if what == "offer":
                self.domain.on_offer(deal, their_turn, max_turns)
                if self._standing is not None and not answered:
                    self.domain.on_not_accepted(self._standing, their_turn, max_turns, rejected=False)
                    answered = True
            elif what == "rejected" and deal is not None and not answered:
                self.domain.on_not_accepted(deal, their_turn, max_turns, rejected=True)
                self._standing = None
                answered = True
        self._unattributed.clear()

    def _fit_allowed(self, plan: Plan, ctx: TurnContext) -> Plan:
        kinds = set(ctx.allowed)
        if plan.kind == "accept" and not ({"accept", "accept_offer"} & kinds):
            return Plan("offer", plan.alternative or plan.deal, "counter")
        if plan.kind == "walk" and not ({"quit", "end", "no_deal", "walk_away", "decline"} & kinds):
            last = self.domain.my_offers[-1] if self.domain and self.domain.my_offers else None
            if last is not None:
                return Plan("offer", last, "hold")
        return plan


def _spoken_text(text: str) -> str:
    """What the counterpart said, from a relay like "The seller says: ...\\n[offers $120]"."""
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("[")]
    body = "\n".join(lines)
    if " says: " in body:
        body = body.split(" says: ", 1)[1]
    return body.strip()


def make_teacher(seed: int = 0) -> StrategicTeacher:
    """The strategic code teacher (the default source of SFT traces)."""
    return StrategicTeacher(seed)
