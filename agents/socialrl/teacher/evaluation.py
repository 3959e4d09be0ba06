"""Paired evaluation of the teacher against the code-agent baselines.

Every candidate (the teacher, `boulware`, `conceder`) plays the same episodes: the same seeded scenarios,
in the same seat, against the same counterparts (the five code agents of agents.socialrl.code_agents, with the same
seeds), in every seat of every environment. Because the episodes are paired, the difference between two
candidates is measured on identical situations; the summary gives each candidate's mean reward with a
95% confidence interval, the agreement rate, the leak rate (episodes in which the candidate's own messages
revealed one of its private facts) and the invalid-action rate.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agents.socialrl.code_agents import CODE_AGENTS, make_code_agent
from agents.socialrl.teacher.agent import TEACHER_NAME, make_teacher
from environments import SOCIALRL_ENV_IDS, make, sample_scenarios
from environments.core.runtime import Agent, EpisodeResult, EpisodeSpec, run_episodes

CANDIDATES = (TEACHER_NAME, "boulware", "conceder")
COUNTERPARTS = tuple(CODE_AGENTS)


def make_candidate(name: str, seed: int) -> Agent:
    return make_teacher(seed) if name == TEACHER_NAME else make_code_agent(name, seed=seed)


@dataclass(frozen=True, kw_only=True)
class PairedEpisode:
    """One episode of the paired design and its result for the candidate's seat."""

    env_id: str
    candidate: str
    seat: str
    counterpart: str
    scenario_index: int
    reward: float
    agreement: bool
    leaked: tuple[str, ...]
    invalid_actions: int
    result: EpisodeResult


def paired_specs(
    env_id: str, candidate: str, n_scenarios: int, seed: int, counterparts: Sequence[str] = COUNTERPARTS
) -> list[tuple[str, str, int, EpisodeSpec]]:
    """(seat, counterpart, scenario index, spec) for one candidate in one environment."""
    scenarios = sample_scenarios(env_id, n_scenarios, seed)
    out = []
    for index, scenario in enumerate(scenarios):
        episode_seed = seed * 1_000_003 + index
        probe = make(env_id)
        probe.reset(scenario, episode_seed)
        seats = probe.agent_ids
        for position, seat in enumerate(seats):
            other = seats[1 - position]
            for counterpart in counterparts:

                def build(seat=seat, other=other, counterpart=counterpart, s=episode_seed) -> dict[str, Agent]:
                    return {
                        seat: make_candidate(candidate, 7 * s + 1),
                        other: make_code_agent(counterpart, seed=7 * s + 2),
                    }

                spec = EpisodeSpec(
                    make_env=lambda env_id=env_id: make(env_id),
                    make_agents=build,
                    scenario=scenario,
                    seed=episode_seed,
                    episode_id=f"{env_id}:{candidate}@{seat}:{counterpart}:{index}:{seed}",
                )
                out.append((seat, counterpart, index, spec))
    return out


def run_paired(
    env_ids: Sequence[str] = SOCIALRL_ENV_IDS,
    candidates: Sequence[str] = CANDIDATES,
    n_scenarios: int = 40,
    seed: int = 0,
    concurrency: int = 64,
    progress: Callable[[str], None] | None = None,
) -> list[PairedEpisode]:
    """Play the paired design; one list of episodes over all environments and candidates."""
    episodes: list[PairedEpisode] = []
    for env_id in env_ids:
        for candidate in candidates:
            specs = paired_specs(env_id, candidate, n_scenarios, seed)
            results = asyncio.run(run_episodes([s for *_, s in specs], concurrency=concurrency, turn_timeout=None))
            for (seat, counterpart, index, _), result in zip(specs, results, strict=True):
                role = result.outcome.roles[seat]
                episodes.append(
                    PairedEpisode(
                        env_id=env_id,
                        candidate=candidate,
                        seat=seat,
                        counterpart=counterpart,
                        scenario_index=index,
                        reward=role.reward,
                        agreement=result.outcome.agreement,
                        leaked=role.leaked,
                        invalid_actions=role.invalid_actions,
                        result=result,
                    )
                )
            if progress is not None:
                progress(f"{env_id} {candidate}: {len(specs)} episodes")
    return episodes


def mean_ci(values: Sequence[float], z: float = 1.96) -> tuple[float, float, float]:
    """(mean, low, high): the normal-approximation 95% confidence interval of the mean."""
    n = len(values)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    mean = statistics.fmean(values)
    if n < 2:
        return mean, mean, mean
    half = z * statistics.stdev(values) / math.sqrt(n)
    return mean, mean - half, mean + half


def summarise(episodes: Sequence[PairedEpisode]) -> dict[str, Any]:
    """Per environment and candidate: mean reward with 95% CI, agreement, leak and invalid rates; and
    the paired difference teacher - baseline with its 95% CI."""
    table: dict[str, Any] = {}
    envs = sorted(
        {e.env_id for e in episodes}, key=lambda x: SOCIALRL_ENV_IDS.index(x) if x in SOCIALRL_ENV_IDS else 99
    )
    for env_id in envs:
        rows = [e for e in episodes if e.env_id == env_id]
        per: dict[str, Any] = {}
        keyed: dict[str, dict[tuple[str, str, int], float]] = {}
        for candidate in sorted(
            {e.candidate for e in rows}, key=lambda c: CANDIDATES.index(c) if c in CANDIDATES else 99
        ):
            mine = [e for e in rows if e.candidate == candidate]
            mean, low, high = mean_ci([e.reward for e in mine])
            per[candidate] = {
                "episodes": len(mine),
                "mean_reward": mean,
                "ci95": [low, high],
                "agreement_rate": statistics.fmean(e.agreement for e in mine),
                "leak_rate": statistics.fmean(bool(e.leaked) for e in mine),
                "invalid_actions_per_episode": statistics.fmean(e.invalid_actions for e in mine),
                "by_seat": {
                    seat: statistics.fmean(e.reward for e in mine if e.seat == seat)
                    for seat in sorted({e.seat for e in mine})
                },
                "by_counterpart": {
                    c: statistics.fmean(e.reward for e in mine if e.counterpart == c) for c in COUNTERPARTS
                },
            }
            keyed[candidate] = {(e.seat, e.counterpart, e.scenario_index): e.reward for e in mine}
        differences = {}
        if TEACHER_NAME in keyed:
            for baseline in keyed:
                if baseline == TEACHER_NAME:
                    continue
                common = sorted(set(keyed[TEACHER_NAME]) & set(keyed[baseline]))
                diffs = [keyed[TEACHER_NAME][k] - keyed[baseline][k] for k in common]
                mean, low, high = mean_ci(diffs)
                differences[f"{TEACHER_NAME}-{baseline}"] = {"mean": mean, "ci95": [low, high], "pairs": len(diffs)}
        table[env_id] = {"candidates": per, "paired_differences": differences}
    return table
