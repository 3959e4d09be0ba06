"""Scripted Red-Black opponents, the mute wrapper and an "untrained teammate" code agent.

Every scripted strategy is data: a frozen `StrategySpec` (base behaviour, exploitation timing, recovery,
reaction to the other team, noise, round overrides) read by one decision function, `StrategySpec.choose`.
A scripted team plays as one seat set: give every seat of the team a `StrategyAgent` built from the same
spec and seed (`make_strategy_team`); members see the same round results and draw from identically seeded
generators, so they always state and vote the same choice.

Intended vote sequences over the default 10 rounds (B = BLACK, R = RED; "opp" = the other team's choice in
the previous round):

| strategy | sequence | how |
| --- | --- | --- |
| always_defect | R R R R R R R R R R | base defect |
| early_exploiter_no_recovery | B R R R R R R R R R | defects from round 2 on and never returns |
| defect_critical | B B B B R B B R B R | defects exactly in the multiplied rounds 5, 8, 10 |
| critical_exploiter | B B B B R R R R R R | cooperates until the first x3 round, then defects for good |
| late_betrayer | B B B B B B R R R R | defects from round 7 and never returns |
| mid_exploiter | B B B B R R B B B B | defects in rounds 5-6, then cooperates again at once |
| early_exploiter | B R R R B B B B B B | defects in rounds 2-4, then cooperates again at once |
| tit_for_tat | B, then opp | cooperates first, then copies the other team's previous choice |
| mostly_cooperate | B, each round flipped to R with probability 0.2 | seeded noise |
| always_cooperate | B B B B B B B B B B | base cooperate |
| mid_exploiter_conditional | B B B B R R, then opp | after the mid window, copies the other team |
| late_betrayer_recovery | B B B B B B R R R B | defects in rounds 7-9, cooperates in round 10 |
| alternating | B R B R B R B R B R | cycles BLACK, RED |
| forgiver | B, then R only after two consecutive opp R | tit-for-two-tats |

The first ten are the paper's opponents (`PAPER_OPPONENTS`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from environments.core.base import ActionSpec
from environments.core.events import Action, Event, Notification, Observation
from environments.core.runtime import Agent, describe_agent
from environments.yoao.red_black import BLACK, CHOICES, RED, VOTE, other_team, team_of


class Base(StrEnum):
    """What a strategy does outside its exploitation window."""

    COOPERATE = "cooperate"
    DEFECT = "defect"


class Exploitation(StrEnum):
    """When a cooperative strategy defects on purpose."""

    NONE = "none"
    EARLY = "early"  # rounds 2-4
    MID = "mid"  # rounds 5-6
    LATE = "late"  # rounds 7-9
    CRITICAL = "critical"  # the multiplied rounds 5, 8, 10


EXPLOITATION_ROUNDS: dict[Exploitation, tuple[int, ...]] = {
    Exploitation.NONE: (),
    Exploitation.EARLY: (2, 3, 4),
    Exploitation.MID: (5, 6),
    Exploitation.LATE: (7, 8, 9),
    Exploitation.CRITICAL: (5, 8, 10),
}


class Recovery(StrEnum):
    """What a strategy does in rounds after its exploitation started that are not exploitation rounds."""

    NONE = "none"  # keeps defecting
    QUICK = "quick"  # back to the base behaviour at once
    GRADUAL = "gradual"  # base, then one more RED two rounds after the last exploitation round, then base
    CONDITIONAL = "conditional"  # copies the other team's previous choice


class Response(StrEnum):
    """How a strategy reacts to the other team (replaces the schedule when not NONE)."""

    NONE = "none"
    MIRROR = "mirror"  # tit for tat: round 1 base, then the other team's previous choice
    FORGIVE = "forgive"  # tit for two tats: RED only after two consecutive RED choices of the other team


def _flip(choice: str) -> str:
    return RED if choice == BLACK else BLACK


@dataclass(frozen=True)
class StrategySpec:
    """A scripted Red-Black strategy, declared as data."""

    name: str
    """Registry key."""
    description: str
    """Intended behaviour in words (vote sequence)."""
    base: Base = Base.COOPERATE
    """Default behaviour: cooperate (BLACK) or defect (RED)."""
    exploitation: Exploitation = Exploitation.NONE
    """Rounds in which the strategy defects on purpose."""
    recovery: Recovery = Recovery.NONE
    """Behaviour after exploitation has started, outside the exploitation rounds."""
    response: Response = Response.NONE
    """Reaction to the other team's previous choices; overrides base, exploitation and recovery."""
    cycle: tuple[str, ...] = ()
    """When not empty, the base choice of round r is cycle[(r - 1) % len(cycle)] instead of `base`."""
    noise: float = 0.0
    """Probability that the scheduled choice of a round is flipped (drawn from the seeded generator)."""
    overrides: tuple[tuple[int, str], ...] = ()
    """(round, choice) pairs that fix the choice of a round, before noise."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.noise <= 1.0:
            raise ValueError(f"strategy {self.name}: noise must be in [0, 1], got {self.noise}")
        bad = [c for c in (*self.cycle, *(c for _, c in self.overrides)) if c not in CHOICES]
        if bad:
            raise ValueError(f"strategy {self.name}: choices must be BLACK or RED, got {bad}")
        if any(r < 1 for r, _ in self.overrides):
            raise ValueError(f"strategy {self.name}: override rounds start at 1")

    def base_choice(self, round_: int) -> str:
        if self.cycle:
            return self.cycle[(round_ - 1) % len(self.cycle)]
        return BLACK if self.base == Base.COOPERATE else RED

    def scheduled(self, round_: int, opponent: Sequence[str]) -> str:
        """The choice of round `round_` before noise, given the other team's choices in earlier rounds."""
        fixed = dict(self.overrides)
        if round_ in fixed:
            return fixed[round_]
        if self.response == Response.MIRROR:
            return opponent[-1] if opponent else self.base_choice(round_)
        if self.response == Response.FORGIVE:
            return RED if len(opponent) >= 2 and opponent[-1] == opponent[-2] == RED else BLACK
        window = EXPLOITATION_ROUNDS[self.exploitation]
        if round_ in window:
            return RED
        earlier = [w for w in window if w < round_]
        if not earlier:
            return self.base_choice(round_)
        if self.recovery == Recovery.NONE:
            return RED
        if self.recovery == Recovery.GRADUAL and round_ - max(earlier) == 2:
            return RED
        if self.recovery == Recovery.CONDITIONAL and opponent:
            return opponent[-1]
        return self.base_choice(round_)

    def choose(self, round_: int, opponent: Sequence[str], rng: random.Random) -> str:
        """The choice of a round; draws from `rng` once per call when the strategy is noisy."""
        choice = self.scheduled(round_, opponent)
        if self.noise > 0 and rng.random() < self.noise:
            return _flip(choice)
        return choice


def _spec(name: str, description: str, **kwargs: Any) -> StrategySpec:
    return StrategySpec(name=name, description=description, **kwargs)


_E, _R = Exploitation, Recovery
STRATEGIES: dict[str, StrategySpec] = {
    s.name: s
    for s in (
        _spec("always_defect", "R every round", base=Base.DEFECT),
        _spec("early_exploiter_no_recovery", "B, then R from round 2 on", exploitation=_E.EARLY),
        _spec("defect_critical", "R in rounds 5, 8, 10; B otherwise", exploitation=_E.CRITICAL, recovery=_R.QUICK),
        _spec("critical_exploiter", "B in rounds 1-4, R from round 5 on", exploitation=_E.CRITICAL),
        _spec("late_betrayer", "B in rounds 1-6, R from round 7 on", exploitation=_E.LATE),
        _spec("mid_exploiter", "R in rounds 5-6; B otherwise", exploitation=_E.MID, recovery=_R.QUICK),
        _spec("early_exploiter", "R in rounds 2-4; B otherwise", exploitation=_E.EARLY, recovery=_R.QUICK),
        _spec("tit_for_tat", "B, then the other team's previous choice", response=Response.MIRROR),
        _spec("mostly_cooperate", "B, flipped to R with probability 0.2 each round", noise=0.2),
        _spec("always_cooperate", "B every round"),
        _spec(
            "mid_exploiter_conditional",
            "R in rounds 5-6, B before, then the other team's previous choice",
            exploitation=_E.MID,
            recovery=_R.CONDITIONAL,
        ),
        _spec("late_betrayer_recovery", "R in rounds 7-9; B otherwise", exploitation=_E.LATE, recovery=_R.QUICK),
        _spec("alternating", "B in odd rounds, R in even rounds", cycle=(BLACK, RED)),
        _spec("forgiver", "B; R only after the other team chose R twice in a row", response=Response.FORGIVE),
    )
}
"""Every scripted strategy by name."""

PAPER_OPPONENTS: tuple[str, ...] = (
    "always_defect",
    "early_exploiter_no_recovery",
    "defect_critical",
    "critical_exploiter",
    "late_betrayer",
    "mid_exploiter",
    "early_exploiter",
    "tit_for_tat",
    "mostly_cooperate",
    "always_cooperate",
)
"""The ten opponents of the YOAO paper."""


def get_strategy(name: str) -> StrategySpec:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise KeyError(f"unknown red-black strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}") from None


def strategy_rng(seed: int, spec: StrategySpec, team: str) -> random.Random:
    """The generator every member of a scripted team uses (same seed, strategy and team -> same draws)."""
    return random.Random(f"red-black:{seed}:{spec.name}:{team}")


def planned_sequence(
    strategy: str | StrategySpec, opponent: Sequence[str], seed: int = 0, team: str = "A"
) -> list[str]:
    """The choices a strategy makes against a fixed sequence of opponent choices (one per round)."""
    spec = get_strategy(strategy) if isinstance(strategy, str) else strategy
    rng = strategy_rng(seed, spec, team)
    return [spec.choose(r, list(opponent[: r - 1]), rng) for r in range(1, len(opponent) + 1)]


def _labels_from(event: Event) -> dict[str, str] | None:
    """BLACK/RED -> the frame's words, from an intro observation."""
    frame = event.data.get("frame") if isinstance(event, Observation) else None
    if not isinstance(frame, Mapping) or event.data.get("event") != "intro":
        return None
    return {BLACK: frame["cooperate"]["label"], RED: frame["defect"]["label"]}


# ------------------------------------------------------------------------------------ scripted agent
class StrategyAgent:
    """A seat of a scripted team: states and votes its strategy's choice for the round."""

    def __init__(self, spec: StrategySpec, seed: int = 0) -> None:
        self.spec = spec
        self.seed = seed
        self.agent_id = ""
        self._labels = {BLACK: BLACK, RED: RED}
        self._opponent: dict[int, str] = {}
        self._plan: dict[int, str] = {}
        self._rng = random.Random(0)

    def describe(self) -> str:
        return f"StrategyAgent({self.spec.name}, seed={self.seed})"

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id = agent_id
        self._labels = {BLACK: BLACK, RED: RED}
        self._opponent, self._plan = {}, {}
        self._rng = strategy_rng(self.seed, self.spec, team_of(agent_id))

    async def observe(self, event: Event) -> None:
        labels = _labels_from(event)
        if labels:
            self._labels = labels
        if isinstance(event, Observation) and event.data.get("event") == "round_result":
            self._opponent[event.data["round"]] = event.data["choices"][other_team(team_of(self.agent_id))]

    def choice_for(self, round_: int) -> str:
        """The choice of a round, planned once (in round order) so opinion and vote agree."""
        for r in range(len(self._plan) + 1, round_ + 1):
            history = [self._opponent[k] for k in range(1, r) if k in self._opponent]
            self._plan[r] = self.spec.choose(r, history, self._rng)
        return self._plan[round_]

    async def act(self, request: Notification) -> Action:
        choice = self.choice_for(int(request.data.get("round", 1)))
        word = self._labels[choice]
        if VOTE in request.allowed:
            return Action(self.agent_id, VOTE, f"VOTE: {word}", {"choice": choice})
        return Action(self.agent_id, "opinion", f"I vote {word}.", {"choice": choice})


def make_strategy_team(name: str, seats: Sequence[str], seed: int = 0) -> dict[str, StrategyAgent]:
    """One scripted team: every seat plays the same strategy with the same seed, so all vote alike."""
    spec = get_strategy(name)
    return {seat: StrategyAgent(spec, seed) for seat in seats}


# ---------------------------------------------------------------------------------------- mute wrapper
class MuteWrapper:
    """Wraps any agent: it still reasons and votes, but every opinion it broadcasts is replaced by the frame's
    mute sentence ("I vote BLACK." in the frame's words). A choice to stay silent (`pass`) is kept."""

    def __init__(self, inner: Agent, sentence: str | None = None) -> None:
        self.inner = inner
        self.sentence_override = sentence
        self.sentence = sentence or "I vote BLACK."
        self.agent_id = ""

    def describe(self) -> str:
        return f"MuteWrapper({describe_agent(self.inner)})"

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id = agent_id
        self.sentence = self.sentence_override or "I vote BLACK."
        await self.inner.reset(agent_id, env_id, spec, episode_id)

    async def observe(self, event: Event) -> None:
        if self.sentence_override is None and isinstance(event, Observation) and event.data.get("event") == "intro":
            self.sentence = str(event.data.get("frame", {}).get("mute_sentence") or self.sentence)
        await self.inner.observe(event)

    async def act(self, request: Notification) -> Action:
        action = await self.inner.act(request)
        if VOTE in request.allowed or "opinion" not in request.allowed or action.kind == "pass":
            return action
        return Action(self.agent_id, "opinion", self.sentence, {"choice": BLACK})


# ----------------------------------------------------------------------------------- untrained teammate
class MajorityFollower:
    """An "untrained teammate" that follows the team discussion.

    Stance of a round: `first_choice` in round 1; later, when `reciprocal`, the other team's previous choice
    (a conditional cooperator), otherwise `first_choice` again. It states its stance in the first discussion
    step; in later steps it states the current majority. It votes the majority of the latest choices its
    teammates stated this round plus its own stance (ties -> its stance), then flips that vote with
    probability `noise` (seeded per seat, so runs are reproducible)."""

    def __init__(self, first_choice: str = RED, reciprocal: bool = True, noise: float = 0.1, seed: int = 0) -> None:
        if first_choice not in CHOICES:
            raise ValueError(f"first_choice must be BLACK or RED, got {first_choice!r}")
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be in [0, 1], got {noise}")
        self.first_choice, self.reciprocal, self.noise, self.seed = first_choice, reciprocal, noise, seed
        self.agent_id = ""
        self._labels = {BLACK: BLACK, RED: RED}
        self._last_opponent: str | None = None
        self._heard: dict[int, dict[str, str]] = {}
        self._rng = random.Random(0)

    def describe(self) -> str:
        return (
            f"MajorityFollower(first_choice={self.first_choice}, reciprocal={self.reciprocal}, "
            f"noise={self.noise}, seed={self.seed})"
        )

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id = agent_id
        self._labels = {BLACK: BLACK, RED: RED}
        self._last_opponent, self._heard = None, {}
        self._rng = random.Random(f"red-black-follower:{self.seed}:{agent_id}")

    async def observe(self, event: Event) -> None:
        labels = _labels_from(event)
        if labels:
            self._labels = labels
        if not isinstance(event, Observation):
            return
        if event.data.get("event") == "round_result":
            self._last_opponent = event.data["choices"][other_team(team_of(self.agent_id))]
        elif event.data.get("event") == "opinion" and event.data.get("choice") in CHOICES:
            self._heard.setdefault(event.data["round"], {})[event.data["speaker"]] = event.data["choice"]

    def stance(self) -> str:
        if self.reciprocal and self._last_opponent is not None:
            return self._last_opponent
        return self.first_choice

    def majority(self, round_: int) -> str:
        """Majority of the teammates' latest stated choices this round plus the own stance; ties -> stance."""
        own = self.stance()
        choices = [*self._heard.get(round_, {}).values(), own]
        red, black = choices.count(RED), choices.count(BLACK)
        return own if red == black else (RED if red > black else BLACK)

    async def act(self, request: Notification) -> Action:
        round_ = int(request.data.get("round", 1))
        if VOTE in request.allowed:
            choice = self.majority(round_)
            if self.noise > 0 and self._rng.random() < self.noise:
                choice = _flip(choice)
            return Action(self.agent_id, VOTE, f"VOTE: {self._labels[choice]}", {"choice": choice})
        first_step = int(request.data.get("discussion_round", 1)) == 1
        choice = self.stance() if first_step else self.majority(round_)
        return Action(self.agent_id, "opinion", f"I vote {self._labels[choice]}.", {"choice": choice})
