"""Evaluate any policy (a code agent, an LLM agent, anything implementing `environments.core.runtime.Agent`).

`evaluate_policy(plan, make_policy)` plays the policy against each of the plan's counterparts on every
scenario, all episodes concurrently through `environments.core.runtime.run_episodes` (so an LLM policy's
calls batch in the engine), and summarises the policy's seat:

| metric | definition |
| --- | --- |
| `mean_reward` | mean normalised reward of the policy's seat over all episodes, with a confidence interval (below) |
| `agreement_rate` | share of episodes that ended in an agreement |
| `pareto_optimal_rate` | share of agreements whose deal is Pareto-optimal, over agreements where the environment defines it (NaN when none) |
| `invalid_action_rate` | invalid actions of the policy's seat per policy turn, pooled over episodes: invalid / (accepted + invalid), where a turn is one answer to a turn request and timeouts count as invalid (NaN when the policy never acted) |
| `leakage_rate` | share of episodes in which the policy's seat revealed any of its private facts |
| `mean_rounds` | mean accepted actions per episode (both seats), i.e. how long negotiations run |

Pairing: an evaluation is fully determined by its plan (environment, scenarios, seat rule, counterparts,
seed): episode i of counterpart c has the same scenario, the same seat, the same counterpart seed and the
same policy sampling seed (`make_policy(episode_seed)`) whichever policy plays it. Two policies evaluated
with the same plan are therefore paired episode by episode, and `paired_difference(a, b)` reports the
mean of the per-episode reward differences with a scenario-clustered bootstrap interval
(models/evaluation/stats.py). That interval, not the overlap of two marginal intervals, is how policies
are compared.

Seats: `plan.seat` names the policy's seat; with `seat=None` in a two-seat environment the policy
alternates, scenario i being played from seat i % 2 (so half the scenarios from each side, and every
counterpart meets the same scenario from the same side). Every other seat gets the counterpart
(`make_counterpart(name, seed)`, by default `agents.socialrl.code_agents.make_code_agent`). A fresh policy
and fresh counterparts are made for every episode.

Confidence interval (`plan.ci_method`): "bootstrap" (default) is the percentile bootstrap of the mean
resampling scenarios (the episodes of one scenario across counterparts are correlated), clipped to [0, 1];
"t" is the Student-t interval and "normal" the normal one, both treating episodes as independent and both
clipped to [0, 1] (near 0 or 1 they would leave it).

Results go to the tables through `summary_rows` (table `evaluations`, schema `EVALUATIONS_COLUMNS`) and
`models.records.rows_for` for the episodes; `store_evaluation` writes both.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import math
import uuid
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from agents.socialrl.code_agents import make_code_agent
from environments.core.base import Scenario
from environments.core.registry import make, seats
from environments.core.runtime import Agent, EpisodeResult, EpisodeSpec, progress_logger, run_episodes
from models.evaluation.scenarios import held_out_scenarios
from models.evaluation.stats import CI_METHODS, Estimate, confidence_interval, mean_estimate
from models.evaluation.stats import paired_difference as _paired_difference
from models.records import EVALUATIONS_COLUMNS, TABLES, rows_for
from models.storage import TableStore

DEFAULT_COUNTERPARTS: tuple[str, ...] = ("boulware", "conceder", "reciprocal")
"""Code agents a policy meets by default (agents.socialrl.code_agents)."""
REWARD_BOUNDS = (0.0, 1.0)
"""Normalised rewards lie in [0, 1]; bootstrap intervals of a mean reward are clipped to it."""

# The schema lives with the others in models/records.py; kept importable from here.
EVALUATION_TABLES: dict[str, dict[str, str]] = TABLES
"""All record tables, `evaluations` included (the default TableStore schema)."""


# ------------------------------------------------------------------------------------------------ plan
@dataclass(frozen=True)
class EvaluationPlan:
    """Which episodes an evaluation plays; two policies evaluated with one plan are paired."""

    env_id: str
    """Environment id."""
    scenarios: tuple[Scenario, ...] | int = 32
    """The scenarios, or n for `held_out_scenarios(env_id, n, seed)`."""
    seat: str | None = None
    """The policy's seat; None alternates the seats of a two-seat environment by scenario."""
    counterparts: tuple[str, ...] = DEFAULT_COUNTERPARTS
    """Names passed to `make_counterpart` for the other seats; every scenario is played against each."""
    seed: int = 0
    """Seeds the held-out draw, the counterparts and the policy's sampling (`make_policy(episode_seed)`)."""
    concurrency: int = 32
    """Episodes in flight at once."""
    turn_timeout: float | None = 60.0
    """Seconds a seat may take per turn (None: no limit)."""
    ci_method: str = "bootstrap"
    """"bootstrap" (scenario-clustered, clipped to [0, 1]), "t" or "normal"."""
    confidence: float = 0.95
    """Confidence level of every interval."""
    env_config: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the environment's constructor."""
    episode_prefix: str | None = None
    """Episode ids are "<prefix>:<counterpart>:<index>:<seat>" (default: a fresh random prefix)."""

    def __post_init__(self) -> None:
        if not self.counterparts:
            raise ValueError("counterparts must not be empty")
        if self.ci_method not in CI_METHODS:
            raise ValueError(f"unknown ci method {self.ci_method!r}; use one of {CI_METHODS}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must lie in (0, 1), got {self.confidence}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if isinstance(self.scenarios, int):
            if self.scenarios < 1:
                raise ValueError("no scenarios to evaluate on")
        else:
            object.__setattr__(self, "scenarios", tuple(self.scenarios))
            if not self.scenarios:
                raise ValueError("no scenarios to evaluate on")
        object.__setattr__(self, "counterparts", tuple(self.counterparts))

    def scenario_list(self) -> list[Scenario]:
        if isinstance(self.scenarios, int):
            return held_out_scenarios(self.env_id, self.scenarios, self.seed)
        return list(self.scenarios)

    @property
    def scenario_source(self) -> str:
        if isinstance(self.scenarios, int):
            return f"heldout(n={self.scenarios}, seed={self.seed})"
        return f"given(n={len(self.scenarios)})"

    def identity(self, source: str = "") -> PlanIdentity:
        """What makes two evaluations paired, as a stable key: environment, seat, counterparts, seed, environment
        settings and every scenario's content in order (the episodes; concurrency and timeouts are left out).
        `source` (e.g. "dataset") only words the description: a dataset that fell back to the generator
        changes the contents, hence the key."""
        scenarios = self.scenario_list()
        content = json.dumps(
            {
                "env_id": self.env_id,
                "seat": self.seat,
                "counterparts": list(self.counterparts),
                "seed": self.seed,
                "env_config": dict(self.env_config),
                "scenarios": [s.to_dict() for s in scenarios],
            },
            sort_keys=True,
            default=str,
        )
        episodes = len(scenarios) * len(self.counterparts)
        text = (
            f"{self.env_id} seat {self.seat or 'alternating'}: {len(scenarios)} "
            f"{source + ' ' if source else ''}scenarios x {', '.join(self.counterparts)} = {episodes} episodes, "
            f"seed {self.seed}"
        )
        return PlanIdentity("plan-" + hashlib.sha256(content.encode()).hexdigest()[:16], text)


@dataclass(frozen=True)
class PlanIdentity:
    """An evaluation plan's identity (`EvaluationPlan.identity`): equal keys, the same episodes."""

    key: str
    """"plan-<16 hex>": a hash of everything that decides the episodes."""
    text: str
    """The plan in words, e.g. "craigslist-v0 seat buyer: 32 dataset scenarios x boulware, conceder, reciprocal
    = 96 episodes, seed 0"."""


# ------------------------------------------------------------------------------------------- results
@dataclass(frozen=True, kw_only=True)
class EvaluationSummary:
    """Summary of the policy's seat over a set of episodes (definitions in the module docstring)."""

    n: int
    """Number of episodes."""
    mean_reward: float
    """Mean normalised reward of the policy's seat (NaN when n = 0)."""
    ci_low: float
    """Lower end of the confidence interval of the mean reward (NaN when it cannot be computed)."""
    ci_high: float
    """Upper end of the confidence interval of the mean reward (NaN when it cannot be computed)."""
    ci_method: str
    """"bootstrap" (scenario-clustered), "t" or "normal"."""
    confidence: float
    """Confidence level of the interval, e.g. 0.95."""
    agreement_rate: float
    """Share of episodes ending in an agreement."""
    pareto_optimal_rate: float
    """Share of Pareto-optimal deals among agreements where defined (NaN when none)."""
    invalid_action_rate: float
    """Invalid actions per policy turn, pooled (NaN when the policy never acted)."""
    leakage_rate: float
    """Share of episodes in which the policy's seat leaked private information."""
    mean_rounds: float = math.nan
    """Mean accepted actions per episode (both seats)."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def reward(self) -> Estimate:
        return Estimate(self.mean_reward, self.ci_low, self.ci_high, self.n)


@dataclass(frozen=True, kw_only=True)
class PolicyEpisode:
    """The policy's view of one episode."""

    episode_id: str
    counterpart: str
    seat: str
    scenario_id: str
    seed: int
    reward: float
    utility: float
    agreement: bool
    pareto_optimal: bool | None
    invalid_actions: int
    policy_turns: int
    """Answers the policy gave to turn requests: accepted actions + invalid ones (timeouts included)."""
    leaked: tuple[str, ...]
    timeouts: int
    rounds: int
    scenario_index: int = 0
    """Position of the scenario in the plan (scenario ids can repeat when contents repeat)."""

    @property
    def pair_key(self) -> tuple[Hashable, ...]:
        """What identifies this episode across policies evaluated with the same plan."""
        return (self.scenario_index, self.scenario_id, self.counterpart, self.seat, self.seed)


def policy_episode(result: EpisodeResult, seat: str, counterpart: str, scenario_index: int = 0) -> PolicyEpisode:
    """Metrics of `seat` in one finished episode."""
    outcome = result.outcome
    role = outcome.roles[seat]
    accepted = sum(1 for entry in result.transcript if entry.agent_id == seat)
    return PolicyEpisode(
        episode_id=result.episode_id,
        counterpart=counterpart,
        seat=seat,
        scenario_id=outcome.scenario_id,
        seed=result.seed,
        reward=role.reward,
        utility=role.utility,
        agreement=outcome.agreement,
        pareto_optimal=outcome.pareto_optimal,
        invalid_actions=role.invalid_actions,
        policy_turns=accepted + role.invalid_actions,
        leaked=tuple(role.leaked),
        timeouts=result.timeouts.get(seat, 0),
        rounds=outcome.rounds,
        scenario_index=scenario_index,
    )


def summarise(
    episodes: Sequence[PolicyEpisode], confidence: float = 0.95, ci_method: str = "bootstrap", seed: int = 0
) -> EvaluationSummary:
    """The summary of a set of policy episodes."""
    n = len(episodes)
    rewards = [e.reward for e in episodes]
    if ci_method == "bootstrap":
        estimate = mean_estimate(rewards, [e.scenario_index for e in episodes], REWARD_BOUNDS, confidence, seed=seed)
        low, high = estimate.ci_low, estimate.ci_high
    else:
        low, high = confidence_interval(rewards, confidence, ci_method, seed=seed, bounds=REWARD_BOUNDS)
    pareto = [bool(e.pareto_optimal) for e in episodes if e.agreement and e.pareto_optimal is not None]
    turns = sum(e.policy_turns for e in episodes)
    return EvaluationSummary(
        n=n,
        mean_reward=float(np.mean(rewards)) if n else math.nan,
        ci_low=low,
        ci_high=high,
        ci_method=ci_method,
        confidence=confidence,
        agreement_rate=sum(e.agreement for e in episodes) / n if n else math.nan,
        pareto_optimal_rate=sum(pareto) / len(pareto) if pareto else math.nan,
        invalid_action_rate=sum(e.invalid_actions for e in episodes) / turns if turns else math.nan,
        leakage_rate=sum(bool(e.leaked) for e in episodes) / n if n else math.nan,
        mean_rounds=float(np.mean([e.rounds for e in episodes])) if n else math.nan,
    )


@dataclass(frozen=True, eq=False, kw_only=True)
class EvaluationResult:
    """Everything one evaluation produced."""

    env_id: str
    policy: str
    """The policy's own description (`describe()` or its class name)."""
    seat: str
    """The policy's seat, or "alternating"."""
    counterparts: tuple[str, ...]
    scenario_source: str
    """Where the scenarios came from, e.g. "heldout(n=32, seed=0)" or "given(n=200)"."""
    seed: int
    episodes: list[EpisodeResult]
    """Every episode, counterpart-major then scenario order."""
    policy_episodes: list[PolicyEpisode]
    """The policy's view of each episode, aligned with `episodes`."""
    summary: EvaluationSummary
    """All counterparts pooled."""
    by_counterpart: pd.DataFrame
    """One row per counterpart: counterpart plus the summary's fields."""

    def frame(self) -> pd.DataFrame:
        """One row per episode (the PolicyEpisode fields), for any other breakdown."""
        return pd.DataFrame([dataclasses.asdict(e) for e in self.policy_episodes])


def _breakdown(
    episodes: Sequence[PolicyEpisode], counterparts: Sequence[str], confidence: float, ci_method: str, seed: int
) -> pd.DataFrame:
    rows = []
    for name in counterparts:
        mine = [e for e in episodes if e.counterpart == name]
        rows.append({"counterpart": name, **summarise(mine, confidence, ci_method, seed).as_dict()})
    return pd.DataFrame(rows)


def paired_difference(a: EvaluationResult, b: EvaluationResult, confidence: float = 0.95, seed: int = 0) -> Estimate:
    """Mean per-episode reward difference a - b over the episodes of one plan, with a scenario-clustered
    bootstrap interval. Both results must come from the same plan (same environment and episodes)."""
    if a.env_id != b.env_id:
        raise ValueError(f"not paired: {a.env_id} vs {b.env_id}")
    rewards_a = {e.pair_key: e.reward for e in a.policy_episodes}
    rewards_b = {e.pair_key: e.reward for e in b.policy_episodes}
    clusters = {e.pair_key: e.scenario_index for e in a.policy_episodes}
    return _paired_difference(rewards_a, rewards_b, clusters, confidence, seed=seed)


# ---------------------------------------------------------------------------------------- evaluation
async def evaluate_policy_async(
    plan: EvaluationPlan,
    make_policy: Callable[[int], Agent],
    make_counterpart: Callable[[str, int], Agent] = make_code_agent,
    progress: logging.Logger | None = None,
    progress_label: str = "",
) -> EvaluationResult:
    """`evaluate_policy` for callers already inside an event loop. `progress`: a logger that gets one line per
    ended episode (`progress_logger`, headed `progress_label`, default the episode prefix), for callers whose
    console shows nothing else while episodes run."""
    scenario_list = plan.scenario_list()
    env_config = dict(plan.env_config)
    prefix = plan.episode_prefix or f"eval:{plan.env_id}:{uuid.uuid4().hex[:12]}"

    layout: list[tuple[Scenario, int, str, tuple[str, ...]]] = []
    for index, scenario in enumerate(scenario_list):
        episode_seed = plan.seed * 1_000_003 + index
        seat_ids = seats(plan.env_id, scenario, episode_seed, **env_config)
        if plan.seat is not None:
            if plan.seat not in seat_ids:
                raise ValueError(
                    f"{plan.env_id}: no seat {plan.seat!r} in scenario {scenario.scenario_id}; seats: {seat_ids}"
                )
            policy_seat = plan.seat
        elif len(seat_ids) == 2:
            policy_seat = seat_ids[index % 2]
        else:
            raise ValueError(f"{plan.env_id} has {len(seat_ids)} seats {seat_ids}; name the policy's seat")
        layout.append((scenario, episode_seed, policy_seat, seat_ids))

    specs: list[EpisodeSpec] = []
    labels: list[tuple[str, str, int]] = []
    for c, name in enumerate(plan.counterparts):
        for index, (scenario, episode_seed, policy_seat, scenario_seats) in enumerate(layout):

            def build(
                name: str = name,
                episode_seed: int = episode_seed,
                policy_seed: int = (episode_seed * 31 + c) % (2**31),
                policy_seat: str = policy_seat,
                seat_ids=scenario_seats,
            ) -> dict[str, Agent]:
                agents: dict[str, Agent] = {policy_seat: make_policy(policy_seed)}
                for k, other in enumerate(s for s in seat_ids if s != policy_seat):
                    agents[other] = make_counterpart(name, episode_seed + 7919 * (k + 1))
                return agents

            specs.append(
                EpisodeSpec(
                    make_env=lambda: make(plan.env_id, **env_config),
                    make_agents=build,
                    scenario=scenario,
                    seed=episode_seed,
                    episode_id=f"{prefix}:{name}:{index}:{policy_seat}",
                )
            )
            labels.append((name, policy_seat, index))

    label = progress_label or prefix
    on_result = progress_logger(progress, label, len(specs), id_prefix=prefix) if progress is not None else None
    results = await run_episodes(
        specs, concurrency=plan.concurrency, turn_timeout=plan.turn_timeout, on_result=on_result
    )
    views = [policy_episode(r, s, c, i) for r, (c, s, i) in zip(results, labels, strict=True)]
    return EvaluationResult(
        env_id=plan.env_id,
        policy=results[0].agent_names.get(labels[0][1], ""),
        seat=plan.seat if plan.seat is not None else "alternating",
        counterparts=plan.counterparts,
        scenario_source=plan.scenario_source,
        seed=plan.seed,
        episodes=results,
        policy_episodes=views,
        summary=summarise(views, plan.confidence, plan.ci_method, plan.seed),
        by_counterpart=_breakdown(views, plan.counterparts, plan.confidence, plan.ci_method, plan.seed),
    )


def evaluate_policy(
    plan: EvaluationPlan,
    make_policy: Callable[[int], Agent],
    make_counterpart: Callable[[str, int], Agent] = make_code_agent,
    progress: logging.Logger | None = None,
    progress_label: str = "",
) -> EvaluationResult:
    """Play `make_policy(seed)` as the plan says (see the module docstring) and summarise. Runs its own
    event loop; use `evaluate_policy_async` inside one. `progress`: a logger for one line per ended episode."""
    return asyncio.run(evaluate_policy_async(plan, make_policy, make_counterpart, progress, progress_label))


# -------------------------------------------------------------------------------------------- tables
def summary_rows(result: EvaluationResult, policy_name: str, run_id: str) -> list[dict[str, Any]]:
    """Rows of table `evaluations`: the pooled summary (counterpart "*") then one per counterpart."""
    now = datetime.now(UTC).replace(tzinfo=None)
    common = {
        "run_id": run_id,
        "policy_name": policy_name,
        "policy": result.policy,
        "env_id": result.env_id,
        "seat": result.seat,
        "scenarios": result.scenario_source,
        "seed": result.seed,
        "created_at": now,
    }
    rows = [{**common, "counterpart": "*", **result.summary.as_dict()}]
    for record in result.by_counterpart.to_dict("records"):
        rows.append({**common, **record})
    return [{col: row.get(col) for col in EVALUATIONS_COLUMNS} for row in rows]


def store_evaluation(store: TableStore, result: EvaluationResult, policy_name: str, run_id: str) -> None:
    """Append the evaluation's episodes (episodes, episode_roles, episode_turns) and its summary rows.
    The store needs the `evaluations` schema (the default TableStore schemas include it)."""
    if "evaluations" not in store.schemas:
        raise KeyError("the store has no 'evaluations' table; build it with the default schemas")
    store.append_all(rows_for(result.episodes, run_id))
    store.append("evaluations", summary_rows(result, policy_name, run_id))
