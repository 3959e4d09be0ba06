"""The environment contract, checked once for every registered environment id (environments/core/base.py).

Each environment's own test file checks its rules (rewards by hand, its grammar, its loader, its leaks); the
checks every environment must pass live here, parametrised over `list_env_ids()`, so that a new environment
is checked by registering it:

* registration: `make(env_id)` builds the registered class, whose module opens with a rules table;
* scenario sampling is deterministic by seed, and another seed draws other scenarios;
* reset: the episode is running, every turn request goes to a seat and allows only the seat's action kinds,
  and `awaiting` says the same;
* invalid actions: an action of an unknown kind, or out of turn, is refused and counted without changing the
  state; retries run out and the episode goes on (or ends) without raising;
* whole episodes with scripted players: the episode ends, every seat has an outcome, every reward read
  before the base class's clamp (`unclamped_reward`) lies in [0, 1], no more rounds than `max_turns`, no
  invalid action from a valid player, Pareto-optimality is judged for deals only (always, in SocialRL), and
  no deal pays 0 where the module's rules table says so;
* seeded determinism: the same seed plays the same episodes (outcome and transcript), another seed others;
* SocialRL environments: every ordered pair of code agents plays every environment within those bounds.
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
from typing import Any

import pytest

from agents.socialrl.code_agents import CODE_AGENTS, make_code_agent
from environments import SOCIALRL_ENV_IDS, YOAO_ENV_IDS, env_class, list_env_ids, make, sample_scenarios, seats
from environments.core.base import Outcome
from environments.core.events import RAW_TEXT, Action, Notification, NotificationKind
from environments.core.runtime import Agent, EpisodeResult, run_episode
from tests.adversarial import code_agents

ENV_IDS = list_env_ids()
CODE_AGENT_NAMES = list(CODE_AGENTS)
NO_DEAL_PAYS_ZERO = ("dnd-v0", "craigslist-v0", "marketplace-v0")
"""Environments whose rules table says that an episode without agreement rewards every seat 0."""


class SeededWriter:
    """A Keyword player whose reply depends on its seed (so that seeds can be told apart)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    async def reset(self, *args: Any) -> None:
        pass

    async def observe(self, event: Any) -> None:
        pass

    async def act(self, request: Notification) -> Action:
        return Action(request.to, RAW_TEXT, " ".join(self.rng.choice(("yes", "no")) for _ in range(8)))


def players(env_id: str, seat_ids: tuple[str, ...], seed: int, names: tuple[str, str] = ("reciprocal", "random")):
    """Scripted players that act validly: code agents `names` in a SocialRL environment, the YOAO code agents
    (tests/adversarial.py) in Red-Black and Sugarscape, a seeded writer in Keyword."""
    if env_id in SOCIALRL_ENV_IDS:
        return {s: make_code_agent(n, seed + 50 * k) for k, (s, n) in enumerate(zip(seat_ids, names, strict=True))}
    if env_id.startswith("keyword"):
        return {s: SeededWriter(seed + k) for k, s in enumerate(seat_ids)}
    return code_agents(env_id, seat_ids, seed)


def play(env_id: str, seed: int, n: int = 4, names: tuple[str, str] = ("reciprocal", "random")) -> list[EpisodeResult]:
    results = []
    for i, scenario in enumerate(sample_scenarios(env_id, n, seed)):
        agents: dict[str, Agent] = players(env_id, seats(env_id, scenario, seed + i), seed + i, names)
        results.append(asyncio.run(run_episode(make(env_id), agents, scenario, seed + i, episode_id=f"e{i}")))
    return results


def check_outcome(result: EpisodeResult, seat_ids: tuple[str, ...]) -> None:
    """The bounds every finished episode with valid players keeps."""
    outcome: Outcome = result.outcome
    assert outcome.env_id == result.env_id and outcome.scenario_id == result.scenario.scenario_id
    assert set(outcome.roles) == set(seat_ids)
    assert isinstance(outcome.agreement, bool)
    max_turns = getattr(result.scenario, "max_turns", None)
    if max_turns is not None:
        assert outcome.rounds <= max_turns
    for seat, role in outcome.roles.items():
        raw = role.unclamped_reward
        # The formula's own value, before the base class's clamp, so that this check can fail.
        assert raw is not None and math.isfinite(raw) and 0.0 <= raw <= 1.0, (seat, raw)
        assert role.invalid_actions == 0, (seat, role.invalid_actions)
    # Pareto-optimality is judged for a deal only; a SocialRL deal is always judged (Calendar's agreement to
    # decline books no meeting, so it has no deal to judge), the other environments may leave it undefined.
    if not outcome.agreement:
        assert outcome.pareto_optimal is None
    elif outcome.deal is not None:
        assert outcome.pareto_optimal in ((True, False) if result.env_id in SOCIALRL_ENV_IDS else (True, False, None))
    if not outcome.agreement and result.env_id in NO_DEAL_PAYS_ZERO:
        assert all(role.unclamped_reward == 0.0 for role in outcome.roles.values())


def fingerprint(results: list[EpisodeResult]) -> list[tuple]:
    return [(r.outcome, r.transcript) for r in results]


# ---------------------------------------------------------------------------------------- registration
def test_every_paper_environment_is_registered() -> None:
    assert set(SOCIALRL_ENV_IDS) | set(YOAO_ENV_IDS) <= set(ENV_IDS)
    with pytest.raises(KeyError, match="unknown environment 'nope-v0'"):
        make("nope-v0")


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_make_builds_the_registered_class_whose_module_opens_with_a_rules_table(env_id: str) -> None:
    env = make(env_id)
    assert type(env) is env_class(env_id) and env.env_id == env_id
    doc = sys.modules[type(env).__module__].__doc__ or ""
    for row in ("| roles |", "| actions |", "| reward |", "| termination |"):
        assert row in doc, f"{env_id}: the module's rules table has no {row!r} row"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_scenario_sampling_is_deterministic_by_seed(env_id: str) -> None:
    first = sample_scenarios(env_id, 5, seed=3)
    assert all(isinstance(s, env_class(env_id).scenario_type) for s in first)
    assert first == sample_scenarios(env_id, 5, seed=3)
    assert [s.to_dict() for s in first] == [s.to_dict() for s in sample_scenarios(env_id, 5, seed=3)]
    assert [s.to_dict() for s in first] != [s.to_dict() for s in sample_scenarios(env_id, 5, seed=4)]


# ------------------------------------------------------------------------------------------ reset, step
def turn_requests(events: list) -> list[Notification]:
    return [e for e in events if isinstance(e, Notification) and e.kind == NotificationKind.TURN]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_asks_seats_to_act_with_their_own_action_kinds(env_id: str) -> None:
    env = make(env_id)
    events = env.reset(sample_scenarios(env_id, 1, seed=0)[0], seed=0)
    assert not env.done and env.transcript == ()
    assert env.invalid_counts == dict.fromkeys(env.agent_ids, 0)
    requests = turn_requests(events)
    assert requests, "reset must ask someone to act"
    assert {r.to: r.allowed for r in requests} == env.awaiting
    for request in requests:
        assert request.to in env.agent_ids
        assert set(request.allowed) <= set(env.action_spec(request.to).kinds), (request.to, request.allowed)
    with pytest.raises(RuntimeError, match="not finished"):
        env.outcome()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_invalid_actions_are_refused_counted_and_retries_run_out_without_raising(env_id: str) -> None:
    env = make(env_id, max_invalid_retries=1)
    requests = turn_requests(env.reset(sample_scenarios(env_id, 1, seed=0)[0], seed=0))
    seat, awaiting = requests[0].to, env.awaiting

    idle = [s for s in env.agent_ids if s not in awaiting]
    if idle:  # acting out of turn is refused and counted, and changes nothing else
        events = env.step(Action(idle[0], "no-such-move", "hello"))
        assert [e.kind for e in events] == [NotificationKind.INVALID_ACTION]
        assert "not your turn" in events[0].text and env.invalid_counts[idle[0]] == 1
        assert env.awaiting == awaiting

    events = env.step(Action(seat, "no-such-move", "hello"))
    assert events[0].kind == NotificationKind.INVALID_ACTION and events[0].to == seat
    assert events[0].data["retries_left"] == 1 and "'no-such-move' is not allowed" in events[0].data["reason"]
    assert events[-1] == requests[0]  # asked again, the same request
    assert env.invalid_counts[seat] == 1 and env.transcript == () and env.awaiting == awaiting

    events = env.step(Action(seat, "no-such-move", "hello"))  # the last retry: the environment's rule applies
    assert events[0].kind == NotificationKind.INVALID_ACTION and events[0].data["retries_left"] == 0
    assert env.invalid_counts[seat] == 2 and env.transcript == ()
    assert env.done or env.awaiting, "after exhausted retries someone must be asked to act, or the episode ends"
    if env.done:
        assert env.outcome().roles[seat].invalid_actions == 2


# ------------------------------------------------------------------------------------------- episodes
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_episodes_of_valid_players_end_within_the_contract(env_id: str) -> None:
    for result in play(env_id, seed=5):
        check_outcome(result, tuple(result.outcome.roles))
        assert result.transcript and all(t.agent_id in result.outcome.roles for t in result.transcript)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_determinism_by_seed(env_id: str) -> None:
    assert fingerprint(play(env_id, seed=11)) == fingerprint(play(env_id, seed=11))
    assert fingerprint(play(env_id, seed=11)) != fingerprint(play(env_id, seed=12))


@pytest.mark.parametrize("env_id", SOCIALRL_ENV_IDS)
def test_code_agents_differ_by_seed_on_the_same_scenarios(env_id: str) -> None:
    scenario = sample_scenarios(env_id, 1, seed=0)[0]
    seat_ids = seats(env_id, scenario)

    def transcripts(seed: int) -> tuple:
        return tuple(
            asyncio.run(
                run_episode(make(env_id), players(env_id, seat_ids, s, ("random", "random")), scenario, s)
            ).transcript
            for s in range(seed, seed + 4)
        )

    assert transcripts(11) == transcripts(11)
    assert transcripts(11) != transcripts(12)


@pytest.mark.parametrize("first", CODE_AGENT_NAMES)
@pytest.mark.parametrize("env_id", SOCIALRL_ENV_IDS)
def test_every_pair_of_code_agents_plays_within_the_contract(env_id: str, first: str) -> None:
    for second in CODE_AGENT_NAMES:
        for names in ((first, second), (second, first)):
            for result in play(env_id, seed=3, n=2, names=names):
                check_outcome(result, seats(env_id, result.scenario))
