"""Adversarial replies and an episode driver shared by the grammar tests, the fuzz test and the parser benchmark.

`SHAPES` are the reply shapes that made the old grammars backtrack (a command word, a long run of
whitespace and one stray character; long numbers; repeated terms; ...), each a function of a length.
`parse_contexts(env_id)` drives a real episode with code agents and returns a copy of the environment at every
distinct phase (the set of allowed action kinds) with the seat asked to act there, so that a parser can be
probed in every phase (DnD's selection, Sugarscape's offer/execute/reflect, Red-Black's vote, ...).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from typing import Any

from environments import make, sample_scenarios
from environments.core.base import Environment, Scenario
from environments.core.events import RAW_TEXT, Action, Notification
from environments.core.runtime import Agent, run_episode

ENV_IDS = (
    "dnd-v0",
    "casino-v0",
    "craigslist-v0",
    "marketplace-v0",
    "job-interview-v0",
    "calendar-v0",
    "red-black-v0",
    "sugarscape-v0",
    "keyword-v0",
)


def _pad(word: str, fill: str) -> Callable[[int], str]:
    return lambda n: word + fill * n + "x"


_WORDS = (
    "accept",
    "ACCEPT",
    "OFFER",
    "offer",
    "PROPOSE",
    "propose",
    "REFLECT:",
    "INTENT:",
    "VOTE",
    "vote",
    "SELECT",
    "I get",
    "no deal",
    "walk away",
    "OFFER: GIVE 3",
    "PROPOSE book=1",
    "INFER:",
)
SHAPES: dict[str, Callable[[int], str]] = {
    **{f"{w}+spaces+x": _pad(w, " ") for w in _WORDS},
    "accept+tabs+x": _pad("accept", "\t"),
    "ACCEPT+newlines+x": _pad("ACCEPT", "\n"),
    "accept+!+x": _pad("accept", "!"),
    "OFFER $+digits+x": lambda n: "OFFER $" + "1" * n + "x",
    "OFFER+digit-commas": lambda n: "OFFER " + "1," * (n // 2),
    "PROPOSE+digits": lambda n: "PROPOSE " + "9" * n,
    "digits": lambda n: "9" * n,
    "PROPOSE+terms": lambda n: "PROPOSE " + "book=1 " * (n // 7),
    "PROPOSE+salary-terms": lambda n: "PROPOSE " + "salary=35, " * (n // 11),
    "PROPOSE+separators": lambda n: "PROPOSE " + ": " * (n // 2),
    "I get+counts": lambda n: "I get " + "1 hat, " * (n // 7),
    "not+ACCEPT": lambda n: "not " * (n // 4) + "ACCEPT",
    "ACCEPT repeated": lambda n: "ACCEPT " * (n // 7),
    "OFFER repeated": lambda n: "OFFER $5 " * (n // 9),
    "stars": lambda n: "*" * n,
    "stars+ACT": lambda n: "*" * n + "ACT: x",
    "letters": lambda n: "a" * n,
    "vote-words": lambda n: "vote for " * (n // 9) + "x",
    # Number-like runs a token takes whole (spaces, separators, dashes, letters between digits).
    "OFFER+spaced-digits": lambda n: "OFFER " + "1 " * (n // 2),
    "OFFER+separator-runs": lambda n: "OFFER 1" + ",.:'/" * (n // 5) + "x",
    "PROPOSE+dashed-counts": lambda n: "PROPOSE " + "1-" * (n // 2),
    "PROPOSE+counts": lambda n: "PROPOSE " + "1 " * (n // 2),
    "digits+letters": lambda n: "OFFER " + "1x" * (n // 2),
    "PROPOSE+time-runs": lambda n: "PROPOSE " + "14:00," * (n // 6),
}
"""Adversarial reply shapes by name, each a function of (roughly) the reply length."""


def code_agents(env_id: str, seats: tuple[str, ...], seed: int = 0) -> dict[str, Agent]:
    """One code agent per seat that plays the environment validly."""
    if env_id == "red-black-v0":
        from agents.yoao.red_black_strategies import make_strategy_team

        return make_strategy_team("tit_for_tat", seats, seed)
    if env_id == "sugarscape-v0":
        from agents.yoao.sugarscape_agents import MRSTrader

        return {s: MRSTrader() for s in seats}
    if env_id == "keyword-v0":
        return {s: _Writer() for s in seats}
    from agents.socialrl.code_agents import make_code_agent

    return {s: make_code_agent("conceder", seed=seed) for s in seats}


class _Writer:
    async def reset(self, *args: Any) -> None:
        pass

    async def observe(self, event: Any) -> None:
        pass

    async def act(self, request: Notification) -> Action:
        return Action(request.to, RAW_TEXT, "no no no no no no no no")


def probe_scenario(env_id: str, seed: int = 3) -> Scenario:
    """A scenario whose episode with code agents reaches every phase (Sugarscape: traders who want to trade)."""
    if env_id == "sugarscape-v0":
        from environments.yoao.sugarscape import TraderState, TradeScenario

        return TradeScenario("probe:0", TraderState(30, 2, 1, 1, "survivor"), TraderState(2, 30, 1, 1, "survivor"))
    return sample_scenarios(env_id, 1, seed=seed)[0]


class _Probe:
    """Wraps an agent: before it answers a turn, the environment is visited in that state."""

    def __init__(self, inner: Agent, env: Environment, visit: Callable[[Environment, str, tuple[str, ...]], None]):
        self.inner, self.env, self.visit = inner, env, visit

    async def reset(self, agent_id: str, env_id: str, spec: Any, episode_id: str) -> None:
        self.agent_id = agent_id
        await self.inner.reset(agent_id, env_id, spec, episode_id)

    async def observe(self, event: Any) -> None:
        await self.inner.observe(event)

    async def act(self, request: Notification) -> Action:
        self.visit(self.env, self.agent_id, tuple(request.allowed))
        return await self.inner.act(request)


def visit_turns(
    env_id: str, visit: Callable[[Environment, str, tuple[str, ...]], None], scenario: Scenario | None = None
) -> None:
    """Run one code-agent episode and call `visit(env, seat, allowed)` at every turn, before the seat answers."""
    scenario = scenario or probe_scenario(env_id)
    env = make(env_id)
    seats = tuple(_seats(env_id, scenario))
    agents: Mapping[str, Agent] = {s: _Probe(a, env, visit) for s, a in code_agents(env_id, seats).items()}
    asyncio.run(run_episode(env, agents, scenario, seed=0, turn_timeout=None))


def _seats(env_id: str, scenario: Scenario) -> tuple[str, ...]:
    env = make(env_id)
    env.reset(scenario, 0)
    return tuple(env.agent_ids)


def parse_contexts(env_id: str) -> list[tuple[Environment, str, tuple[str, ...]]]:
    """A copy of the environment at each distinct phase of a code-agent episode, with the seat asked there."""
    found: dict[tuple[str, ...], tuple[Environment, str, tuple[str, ...]]] = {}

    def visit(env: Environment, seat: str, allowed: tuple[str, ...]) -> None:
        if allowed not in found:
            found[allowed] = (copy.deepcopy(env), seat, allowed)

    visit_turns(env_id, visit)
    return list(found.values())
