"""Round-robin tournament of code agents over the SocialRL environments.

Every ordered pair of code agents (seat 1 x seat 2) plays the same seeded scenarios in every
environment; all episodes run concurrently in one event loop. Results are `EpisodeResult`s, turned
into table rows by models.records.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agents.socialrl.code_agents import CODE_AGENTS, make_code_agent
from environments import SOCIALRL_ENV_IDS, Scenario, make, sample_scenarios, seats
from environments.core.runtime import Agent, EpisodeResult, EpisodeSpec, run_episodes


@dataclass(frozen=True)
class TournamentConfig:
    """What the tournament plays."""

    env_ids: tuple[str, ...] = SOCIALRL_ENV_IDS
    """Environments to play."""
    agents: tuple[str, ...] = tuple(CODE_AGENTS)
    """Code agent names (agents.socialrl.code_agents.CODE_AGENTS); every ordered pair plays."""
    scenarios_per_pairing: int = 4
    """Scenarios each ordered pair of agents plays per environment."""
    seed: int = 0
    """Seeds the scenarios and the agents."""
    concurrency: int = 64
    """Episodes in flight at once."""

    def __post_init__(self) -> None:
        if not self.env_ids:
            raise ValueError("env_ids must not be empty")
        unknown = [a for a in self.agents if a not in CODE_AGENTS]
        if unknown:
            raise ValueError(f"unknown code agents {unknown}; known: {list(CODE_AGENTS)}")
        if self.scenarios_per_pairing < 1:
            raise ValueError(f"scenarios_per_pairing must be >= 1, got {self.scenarios_per_pairing}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")


def tournament_specs(config: TournamentConfig) -> list[EpisodeSpec]:
    """The episodes of a tournament, deterministic in the config."""
    specs = []
    for env_id in config.env_ids:
        scenarios = sample_scenarios(env_id, config.scenarios_per_pairing, config.seed)
        for first in config.agents:
            for second in config.agents:
                for index, scenario in enumerate(scenarios):
                    seed = config.seed * 1_000_003 + index
                    specs.append(
                        EpisodeSpec(
                            make_env=lambda env_id=env_id: make(env_id),
                            make_agents=_seat_agents(env_id, scenario, (first, second), seed),
                            scenario=scenario,
                            seed=seed,
                            episode_id=f"{env_id}:{first}:{second}:{index}:{config.seed}",
                        )
                    )
    return specs


def _seat_agents(env_id: str, scenario: Scenario, names: Sequence[str], seed: int) -> Callable[[], dict[str, Agent]]:
    def build() -> dict[str, Agent]:
        return {
            seat: make_code_agent(name, seed=seed + 7919 * i)
            for i, (seat, name) in enumerate(zip(seats(env_id, scenario, seed), names, strict=True))
        }

    return build


def run_tournament(config: TournamentConfig) -> list[EpisodeResult]:
    return asyncio.run(run_episodes(tournament_specs(config), concurrency=config.concurrency))
