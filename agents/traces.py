"""Teacher traces: any agent's play rendered as the chat an LLM agent in the same seat would have seen.

`TracedAgent` wraps an agent (the strategic code teacher, or any other) and mirrors every event into an
`LLMAgent` used only as a renderer: the system prompt, the user turns and the wrapped agent's replies
come out exactly as the LLM agent would render them in a rollout, so SFT data and RL prompts share one
format (and one token prefix). The wrapped agent must answer with RAW_TEXT (the text a model should
learn to write); its structured reasoning, if it keeps any (`trace` list of INFER/ACT/ANTICIPATE
dicts), is carried along.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.llm_agent import LLMAgent, LLMAgentConfig
from agents.socialrl.code_agents import make_code_agent
from environments import make, seats
from environments.core.base import ActionSpec, Scenario
from environments.core.events import RAW_TEXT, Action, Event, Notification
from environments.core.runtime import Agent, EpisodeResult, EpisodeSpec, run_episodes

_RENDER_ONLY = LLMAgentConfig(base_url="http://render.invalid/v1", model="render-only", api_key_env=None)


class TracedAgent:
    """Plays as `inner`, records the conversation as an LLM agent would render it."""

    def __init__(self, inner: Agent, renderer_config: LLMAgentConfig = _RENDER_ONLY) -> None:
        self.inner = inner
        self.renderer = LLMAgent(renderer_config)

    def describe(self) -> str:
        describe = getattr(self.inner, "describe", None)
        return describe() if callable(describe) else type(self.inner).__name__

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        await self.inner.reset(agent_id, env_id, spec, episode_id)
        await self.renderer.reset(agent_id, env_id, spec, episode_id)

    async def observe(self, event: Event) -> None:
        await self.inner.observe(event)
        await self.renderer.observe(event)

    async def act(self, request: Notification) -> Action:
        self.renderer.begin_turn(request)
        action = await self.inner.act(request)
        if action.kind != RAW_TEXT:
            raise TypeError(f"{self.describe()} must answer with RAW_TEXT to be traced, got {action.kind!r}")
        self.renderer.record_reply(action.text)
        return action

    def messages(self) -> list[dict[str, str]]:
        """The conversation so far: system, then alternating user / assistant turns."""
        return self.renderer.transcript_messages()

    def reasoning(self) -> list[dict[str, Any]]:
        return list(getattr(self.inner, "trace", []))


@dataclass(frozen=True, kw_only=True)
class Trace:
    """One traced episode of one seat."""

    episode_id: str
    env_id: str
    seat: str
    agent: str
    counterpart: str
    scenario_id: str
    messages: list[dict[str, str]]
    reasoning: list[dict[str, Any]]
    reward: float
    agreement: bool
    leaked: tuple[str, ...]
    outcome: dict[str, Any] = field(default_factory=dict)
    unclamped_reward: float | None = None
    """The environment's reward before the base class's clamp to [0, 1] (what a range check can test)."""

    def row(self, run_id: str) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "run_id": run_id,
            "env_id": self.env_id,
            "seat": self.seat,
            "agent": self.agent,
            "counterpart": self.counterpart,
            "scenario_id": self.scenario_id,
            "messages": json.dumps(self.messages),
            "reasoning": json.dumps(self.reasoning, default=str),
            "reward": self.reward,
            "unclamped_reward": self.unclamped_reward,
            "agreement": self.agreement,
            "leaked": json.dumps(list(self.leaked)),
            "assistant_turns": sum(m["role"] == "assistant" for m in self.messages),
        }


def collect_traces(
    env_id: str,
    scenarios: Sequence[Scenario],
    make_teacher: Callable[[int], Agent],
    counterparts: Sequence[str] = ("boulware", "conceder", "reciprocal"),
    seed: int = 0,
    concurrency: int = 32,
    run_tag: str = "traces",
    traced_seats: Sequence[str] | None = None,
) -> list[Trace]:
    """Play the teacher in every seat (or only `traced_seats`) of every scenario against the counterparts
    (cycled by scenario and seat); trace it. An episode's seed and counterpart do not depend on which seats
    are traced."""
    seat_ids = seats(env_id, scenarios[0]) if scenarios else ()
    check_seats(env_id, seat_ids, traced_seats)
    jobs: list[tuple[EpisodeSpec, str, str, TracedAgent]] = []
    for index, scenario in enumerate(scenarios):
        for seat_index, seat in enumerate(seat_ids):
            if traced_seats is not None and seat not in traced_seats:
                continue
            counterpart = counterparts[(index + seat_index) % len(counterparts)]
            episode_seed = seed * 1_000_003 + index * 17 + seat_index
            traced = TracedAgent(make_teacher(episode_seed))
            agents = _agents_for(env_id, scenario, seat, traced, counterpart, episode_seed)
            spec = EpisodeSpec(
                make_env=lambda: make(env_id),
                make_agents=agents,
                scenario=scenario,
                seed=episode_seed,
                episode_id=f"{run_tag}:{env_id}:{index}:{seat}",
            )
            jobs.append((spec, seat, counterpart, traced))
    results: list[EpisodeResult] = asyncio.run(run_episodes([j[0] for j in jobs], concurrency=concurrency))
    traces = []
    for (_, seat, counterpart, traced), result in zip(jobs, results, strict=True):
        role = result.outcome.roles[seat]
        traces.append(
            Trace(
                episode_id=result.episode_id,
                env_id=env_id,
                seat=seat,
                agent=traced.describe(),
                counterpart=counterpart,
                scenario_id=result.outcome.scenario_id,
                messages=traced.messages(),
                reasoning=traced.reasoning(),
                reward=role.reward,
                unclamped_reward=role.unclamped_reward,
                agreement=result.outcome.agreement,
                leaked=role.leaked,
                outcome={"deal": result.outcome.deal, "rounds": result.outcome.rounds},
            )
        )
    return traces


def check_seats(env_id: str, seat_ids: Sequence[str], traced_seats: Sequence[str] | None) -> None:
    """Raise when `traced_seats` names a seat the environment does not have (or names none)."""
    if traced_seats is None:
        return
    unknown = [s for s in traced_seats if s not in seat_ids]
    if unknown or not traced_seats:
        raise ValueError(f"{env_id}: cannot trace seats {list(traced_seats)}; its seats are {list(seat_ids)}")


def _agents_for(
    env_id: str, scenario: Scenario, seat: str, traced: TracedAgent, counterpart: str, seed: int
) -> Callable[[], dict[str, Agent]]:
    def build() -> dict[str, Agent]:
        return {s: traced if s == seat else make_code_agent(counterpart, seed=seed) for s in seats(env_id, scenario)}

    return build


def filter_traces(traces: Sequence[Trace], min_reward: float = 0.0, drop_leaks: bool = True) -> list[Trace]:
    """Keep episodes at or above `min_reward` (and without leaks) that have at least one assistant turn."""
    return [
        t
        for t in traces
        if t.reward >= min_reward
        and not (drop_leaks and t.leaked)
        and any(m["role"] == "assistant" for m in t.messages)
    ]
