"""Async runtime: runs episodes between an environment and agents through per-agent inboxes.

Each agent sees only the events addressed to it (its inbox), is asked to act by TURN notifications,
and must answer within `turn_timeout` seconds or the environment's timeout rule applies. Several agents
may be asked at once (simultaneous moves); their answers are applied in the order they arrive, which
the environments are written to be indifferent to. Many episodes run concurrently in one event loop,
so the LLM calls of different episodes reach the inference engine together and batch there.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from environments.core.base import ActionSpec, Attempt, Environment, Outcome, Scenario, TranscriptEntry
from environments.core.events import Action, Event, Notification, NotificationKind


@runtime_checkable
class Agent(Protocol):
    """What every agent implements: code agents, LLM agents and a human at a terminal alike."""

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        """Start of an episode: the agent's seat, the environment, what it may do."""

    async def observe(self, event: Event) -> None:
        """An event addressed to this agent (observations and every notification, TURN included)."""

    async def act(self, request: Notification) -> Action:
        """Answer a TURN request with an action of one of `request.allowed` kinds."""


@dataclass(frozen=True)
class EpisodeResult:
    """A finished episode: who played, what happened, how it ended."""

    episode_id: str
    env_id: str
    scenario: Scenario
    seed: int
    agent_names: dict[str, str]
    """Seat -> agent description (class and parameters)."""
    outcome: Outcome
    transcript: tuple[TranscriptEntry, ...]
    timeouts: dict[str, int]
    wall_seconds: float
    inboxes: dict[str, tuple[Event, ...]] = field(default_factory=dict)
    """Every event delivered to each seat, in order (kept only when requested)."""
    attempts: tuple[Attempt, ...] = ()
    """Every answer of every seat, accepted or refused with the reason, in order (`Environment.attempts`)."""


def describe_agent(agent: object) -> str:
    describe = getattr(agent, "describe", None)
    return describe() if callable(describe) else type(agent).__name__


async def run_episode(
    env: Environment,
    agents: Mapping[str, Agent],
    scenario: Scenario,
    seed: int = 0,
    turn_timeout: float | None = 60.0,
    episode_id: str | None = None,
    keep_inboxes: bool = False,
    max_steps: int = 10_000,
) -> EpisodeResult:
    """Run one episode to its end and return the result."""
    episode_id = episode_id or uuid.uuid4().hex[:16]
    start = time.perf_counter()
    events = env.reset(scenario, seed)
    missing = set(env.agent_ids) - set(agents)
    if missing:
        raise ValueError(f"{env.env_id}: no agent for seats {sorted(missing)}")
    for agent_id in env.agent_ids:
        await agents[agent_id].reset(agent_id, env.env_id, env.action_spec(agent_id), episode_id)

    inboxes: dict[str, list[Event]] = {a: [] for a in env.agent_ids}
    pending: dict[str, asyncio.Task[Action]] = {}
    timeouts = dict.fromkeys(env.agent_ids, 0)

    async def act_with_timeout(agent_id: str, request: Notification) -> Action:
        coro = agents[agent_id].act(request)
        if turn_timeout is None:
            return await coro
        return await asyncio.wait_for(coro, turn_timeout)

    async def deliver(batch: Sequence[Event]) -> None:
        for event in batch:
            if event.to not in inboxes:
                raise ValueError(f"{env.env_id} addressed an event to unknown seat {event.to!r}")
            inboxes[event.to].append(event)
            await agents[event.to].observe(event)
            if isinstance(event, Notification) and event.kind == NotificationKind.TURN:
                old = pending.pop(event.to, None)
                if old is not None:
                    old.cancel()
                pending[event.to] = asyncio.create_task(act_with_timeout(event.to, event))

    try:
        await deliver(events)
        steps = 0
        while not env.done:
            if not pending:
                raise RuntimeError(f"{env.env_id}: episode stalled, nobody is asked to act")
            steps += 1
            if steps > max_steps:
                raise RuntimeError(f"{env.env_id}: more than {max_steps} steps")
            done, _ = await asyncio.wait(pending.values(), return_when=asyncio.FIRST_COMPLETED)
            # Apply finished answers in seat order so a batch of simultaneous answers is deterministic.
            finished = sorted((a for a, t in pending.items() if t in done))
            for agent_id in finished:
                task = pending.pop(agent_id)
                try:
                    action = task.result()
                except TimeoutError:
                    timeouts[agent_id] += 1
                    await deliver(env.timeout(agent_id))
                    continue
                if action.agent_id != agent_id:
                    action = Action(agent_id, action.kind, action.text, dict(action.payload))
                await deliver(env.step(action))
                if env.done:
                    break
    finally:
        for task in pending.values():
            task.cancel()
        if pending:
            await asyncio.gather(*pending.values(), return_exceptions=True)

    return EpisodeResult(
        episode_id=episode_id,
        env_id=env.env_id,
        scenario=scenario,
        seed=seed,
        agent_names={a: describe_agent(agents[a]) for a in env.agent_ids},
        outcome=env.outcome(),
        transcript=env.transcript,
        timeouts=timeouts,
        wall_seconds=time.perf_counter() - start,
        inboxes={a: tuple(v) for a, v in inboxes.items()} if keep_inboxes else {},
        attempts=env.attempts,
    )


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: a fresh environment, fresh agents, a scenario and a seed."""

    make_env: Callable[[], Environment]
    make_agents: Callable[[], Mapping[str, Agent]]
    scenario: Scenario
    seed: int
    episode_id: str | None = None


def progress_logger(
    log: logging.Logger, label: str, total: int, noun: str = "episode", id_prefix: str | None = None
) -> Callable[[int, EpisodeResult], None]:
    """An `on_result` callback for `run_episodes`: one INFO line per ended episode, with the count, its id
    (less the `<id_prefix>:` prefix, default the label) and the seconds since the callback was made. Batches of
    LLM episodes run for minutes on CPU; these lines are their progress."""
    start = time.perf_counter()
    strip = f"{label if id_prefix is None else id_prefix}:"

    def line(ended: int, result: EpisodeResult) -> None:
        log.info(
            "%s: %s %d/%d ended (%s), %.0f s", label, noun, ended, total, result.episode_id.removeprefix(strip),
            time.perf_counter() - start,
        )  # fmt: skip

    return line


async def run_episodes(
    specs: Sequence[EpisodeSpec],
    concurrency: int = 32,
    turn_timeout: float | None = 60.0,
    on_result: Callable[[int, EpisodeResult], None] | None = None,
) -> list[EpisodeResult]:
    """Run many episodes concurrently (at most `concurrency` at once); results in input order. `on_result`,
    if given, is called as each episode ends with the number ended so far and its result (progress lines)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)
    ended = 0

    async def one(spec: EpisodeSpec) -> EpisodeResult:
        nonlocal ended
        async with gate:
            result = await run_episode(
                spec.make_env(),
                spec.make_agents(),
                spec.scenario,
                spec.seed,
                turn_timeout=turn_timeout,
                episode_id=spec.episode_id,
            )
        ended += 1
        if on_result is not None:
            on_result(ended, result)
        return result

    return list(await asyncio.gather(*(one(s) for s in specs)))
