"""Evaluate any policy (a code agent, an LLM agent, anything implementing `environments.core.runtime.Agent`).

`evaluate_policy(env_id, make_policy, seat, counterparts, scenarios, ...)` plays the policy against each
counterpart on every scenario, all episodes concurrently through `environments.core.runtime.run_episodes` (so
an LLM policy's calls batch in the engine), and summarises the policy's seat:

| metric | definition |
| --- | --- |
| `mean_reward` | mean normalised reward of the policy's seat over all episodes, with a confidence interval (below) |
| `agreement_rate` | share of episodes that ended in an agreement |
| `pareto_optimal_rate` | share of agreements whose deal is Pareto-optimal, over agreements where the environment defines it (NaN when none) |
| `invalid_action_rate` | invalid actions of the policy's seat per policy turn, pooled over episodes: invalid / (accepted + invalid), where a turn is one answer to a turn request and timeouts count as invalid (NaN when the policy never acted) |
| `leakage_rate` | share of episodes in which the policy's seat revealed any of its private facts |

Seats: `seat` names the policy's seat; with `seat=None` in a two-seat environment the policy alternates,
scenario i being played from seat i % 2 (so half the scenarios from each side, and every counterpart
meets the same scenario from the same side: comparisons between counterparts are paired). Every other
seat gets the counterpart (`make_counterpart(name, seed)`, by default `agents.socialrl.code_agents.make_code_agent`).
A fresh policy and fresh counterparts are made for every episode.

Confidence interval (`ci_method`): "t" (default) is the Student-t interval mean +- t_{1-a/2, n-1} s/sqrt(n);
"normal" uses the normal quantile; "bootstrap" is the percentile bootstrap of the mean (2000 resamples,
seeded). All three treat episodes as independent draws: episodes sharing a scenario across counterparts
are correlated, so the interval is somewhat optimistic when counterparts are pooled. With n < 2 the
interval is (NaN, NaN). Rewards are bounded in [0, 1] and often bimodal (0 without a deal); the t
interval is the usual approximation, the bootstrap makes no normality assumption.

Held-out scenarios (`held_out_scenarios`): the scenario *content* (every field but the id) is hashed
with the environment id, and the lowest `HELD_OUT_FRACTION` of the hash range is the held-out partition.
Held-out scenarios are drawn from their own random stream (`"<env_id>:heldout:<seed>"`, where
`sample_scenarios` uses `"<env_id>:<seed>"`), keeping only held-out contents, and get ids
`heldout:<hash>`. A generator's scenario space can be small (measured: 200 draws of `dnd-v0` and
`craigslist-v0` share 35% and 23% of contents with 1000 training draws), so a different seed alone
does not make a held-out set: training must draw from `training_scenarios` (the `sample_scenarios`
stream with held-out contents skipped), or filter with `is_held_out`, for the guarantee to hold.
An environment that defines its own held-out split (a classmethod `sample_held_out_scenario(rng)`,
e.g. Red-Black's held-out frames, whose training sampler never draws them) is sampled through it, and
no hash partition is applied. Loaded real data (e.g. a dataset's dev split) can be passed as
`scenarios` directly.

Results go to the tables through `summary_rows` (table `evaluations`, schema `EVALUATIONS_COLUMNS`) and
`models.records.rows_for` for the episodes; `store_evaluation` writes both.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import math
import random
import statistics
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from agents.socialrl.code_agents import make_code_agent
from environments.core.base import Scenario
from environments.core.registry import env_class, make, sample_scenarios, seats
from environments.core.runtime import Agent, EpisodeResult, EpisodeSpec, run_episodes
from models.records import EVALUATIONS_COLUMNS, TABLES, rows_for
from models.storage import TableStore

DEFAULT_COUNTERPARTS: tuple[str, ...] = ("boulware", "conceder", "reciprocal")
"""Code agents a policy meets by default (agents.socialrl.code_agents)."""
HELD_OUT_FRACTION = 0.2
"""Share of each environment's scenario-content hash range reserved for evaluation."""
CI_METHODS = ("t", "normal", "bootstrap")
HELD_OUT_HOOK = "sample_held_out_scenario"
"""Optional classmethod `(rng) -> Scenario` of an environment with its own held-out split."""

# The schema lives with the others in models/records.py; kept importable from here.
EVALUATION_TABLES: dict[str, dict[str, str]] = TABLES
"""All record tables, `evaluations` included (the default TableStore schema)."""


# ------------------------------------------------------------------------------------------ scenarios
def scenario_key(env_id: str, scenario: Scenario) -> str:
    """sha256 of the environment id and the scenario's content (every field but `scenario_id`)."""
    content = dataclasses.asdict(scenario)
    content.pop("scenario_id", None)
    text = json.dumps({"env_id": env_id, "scenario": content}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def is_held_out(env_id: str, scenario: Scenario, fraction: float = HELD_OUT_FRACTION) -> bool:
    """Whether the scenario's content lies in the held-out partition of `env_id`."""
    return int(scenario_key(env_id, scenario)[:15], 16) / 16**15 < fraction


def _draw(env_id: str, n: int, stream: str, keep: Callable[[Scenario], bool]) -> list[Scenario]:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    cls = env_class(env_id)
    rng = random.Random(stream)
    out: list[Scenario] = []
    budget = 1000 + 100 * n
    while len(out) < n:
        if budget == 0:
            raise RuntimeError(f"{env_id}: could not draw {n} scenarios from stream {stream!r} (got {len(out)})")
        budget -= 1
        scenario = cls.sample_scenario(rng)
        if keep(scenario):
            out.append(scenario)
    return out


def _own_split(env_id: str) -> Callable[[random.Random], Scenario] | None:
    """The environment's own held-out sampler (`sample_held_out_scenario(rng)` classmethod), if it has one."""
    sampler = getattr(env_class(env_id), HELD_OUT_HOOK, None)
    return sampler if callable(sampler) else None


def held_out_scenarios(env_id: str, n: int, seed: int = 0) -> list[Scenario]:
    """`n` generated evaluation scenarios of the held-out partition (deterministic in env_id, n, seed);
    ids are `heldout:<content hash prefix>`. See the module docstring for the guarantee; a small scenario
    space can give repeated contents. An environment with its own held-out split (a classmethod
    `sample_held_out_scenario(rng)`, e.g. held-out frames) is sampled through it instead."""
    own = _own_split(env_id)
    if own is not None:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        rng = random.Random(f"{env_id}:heldout:{seed}")
        drawn = [own(rng) for _ in range(n)]
    else:
        drawn = _draw(env_id, n, f"{env_id}:heldout:{seed}", lambda s: is_held_out(env_id, s))
    return [dataclasses.replace(s, scenario_id=f"heldout:{scenario_key(env_id, s)[:16]}") for s in drawn]


def training_scenarios(env_id: str, n: int, seed: int) -> list[Scenario]:
    """The `sample_scenarios(env_id, ., seed)` stream with held-out contents skipped: `n` training scenarios
    that never coincide with any held-out scenario (the plain stream for an environment with its own split)."""
    if _own_split(env_id) is not None:
        return sample_scenarios(env_id, n, seed)
    return _draw(env_id, n, f"{env_id}:{seed}", lambda s: not is_held_out(env_id, s))


# ---------------------------------------------------------------------------------------- statistics
def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t distribution (exact for df 1 and 2; Newton on a Simpson-integrated CDF
    otherwise, accurate to ~1e-8; the normal quantile for df > 1e6)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p}")
    if df <= 0:
        raise ValueError(f"df must be > 0, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        a = 2.0 * p - 1.0
        return a * math.sqrt(2.0 / (1.0 - a * a))
    z = statistics.NormalDist().inv_cdf(p)
    if df > 1e6:
        return z
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def pdf(x: np.ndarray | float) -> np.ndarray | float:
        return np.exp(log_c - (df + 1) / 2 * np.log1p(np.square(x) / df))

    def cdf(x: float) -> float:  # x >= 0
        grid = np.linspace(0.0, x, 4097)
        values = pdf(grid)
        h = x / 4096
        return 0.5 + h / 3 * (values[0] + values[-1] + 4 * values[1:-1:2].sum() + 2 * values[2:-1:2].sum())

    # Start from the Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5), then refine.
    x = z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    for _ in range(20):
        step = (cdf(x) - p) / float(pdf(x))
        x -= step
        if abs(step) < 1e-10:
            break
    return float(x)


def confidence_interval(
    values: Sequence[float], confidence: float = 0.95, method: str = "t", n_boot: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Two-sided interval for the mean of `values` (see the module docstring); (NaN, NaN) when n < 2."""
    if method not in CI_METHODS:
        raise ValueError(f"unknown ci method {method!r}; use one of {CI_METHODS}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    data = np.asarray(values, dtype=float)
    n = len(data)
    if n < 2:
        return (math.nan, math.nan)
    mean = float(data.mean())
    alpha = 1.0 - confidence
    if method == "bootstrap":
        rng = np.random.default_rng(seed)
        means = data[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)
        low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
        return (float(low), float(high))
    sem = float(data.std(ddof=1)) / math.sqrt(n)
    q = t_quantile(1 - alpha / 2, n - 1) if method == "t" else statistics.NormalDist().inv_cdf(1 - alpha / 2)
    return (mean - q * sem, mean + q * sem)


# ------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class EvaluationSummary:
    """Summary of the policy's seat over a set of episodes (definitions in the module docstring)."""

    n: int
    """Number of episodes."""
    mean_reward: float
    """Mean normalised reward of the policy's seat (NaN when n = 0)."""
    ci_low: float
    """Lower end of the confidence interval of the mean reward (NaN when n < 2)."""
    ci_high: float
    """Upper end of the confidence interval of the mean reward (NaN when n < 2)."""
    ci_method: str
    """"t", "normal" or "bootstrap"."""
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

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
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


def policy_episode(result: EpisodeResult, seat: str, counterpart: str) -> PolicyEpisode:
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
    )


def summarise(
    episodes: Sequence[PolicyEpisode], confidence: float = 0.95, ci_method: str = "t", seed: int = 0
) -> EvaluationSummary:
    """The summary of a set of policy episodes."""
    n = len(episodes)
    rewards = [e.reward for e in episodes]
    low, high = confidence_interval(rewards, confidence, ci_method, seed=seed)
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
    )


@dataclass(frozen=True, eq=False)
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


# ---------------------------------------------------------------------------------------- evaluation
async def evaluate_policy_async(
    env_id: str,
    make_policy: Callable[[], Agent],
    seat: str | None = None,
    counterparts: Sequence[str] = DEFAULT_COUNTERPARTS,
    scenarios: Sequence[Scenario] | int = 32,
    seed: int = 0,
    concurrency: int = 32,
    turn_timeout: float | None = 60.0,
    *,
    make_counterpart: Callable[[str, int], Agent] = make_code_agent,
    ci_method: str = "t",
    confidence: float = 0.95,
    env_config: Mapping[str, Any] | None = None,
    episode_prefix: str | None = None,
) -> EvaluationResult:
    """`evaluate_policy` for callers already inside an event loop."""
    if not counterparts:
        raise ValueError("counterparts must not be empty")
    if ci_method not in CI_METHODS:
        raise ValueError(f"unknown ci method {ci_method!r}; use one of {CI_METHODS}")
    env_config = dict(env_config or {})
    if isinstance(scenarios, int):
        source = f"heldout(n={scenarios}, seed={seed})"
        scenario_list = held_out_scenarios(env_id, scenarios, seed)
    else:
        scenario_list = list(scenarios)
        source = f"given(n={len(scenario_list)})"
    if not scenario_list:
        raise ValueError("no scenarios to evaluate on")
    prefix = episode_prefix or f"eval:{env_id}:{uuid.uuid4().hex[:12]}"

    plan: list[tuple[Scenario, int, str, tuple[str, ...]]] = []
    for index, scenario in enumerate(scenario_list):
        episode_seed = seed * 1_000_003 + index
        seat_ids = seats(env_id, scenario, episode_seed, **env_config)
        if seat is not None:
            if seat not in seat_ids:
                raise ValueError(f"{env_id}: no seat {seat!r} in scenario {scenario.scenario_id}; seats: {seat_ids}")
            policy_seat = seat
        elif len(seat_ids) == 2:
            policy_seat = seat_ids[index % 2]
        else:
            raise ValueError(f"{env_id} has {len(seat_ids)} seats {seat_ids}; name the policy's seat")
        plan.append((scenario, episode_seed, policy_seat, seat_ids))

    specs: list[EpisodeSpec] = []
    labels: list[tuple[str, str]] = []
    for name in counterparts:
        for index, (scenario, episode_seed, policy_seat, scenario_seats) in enumerate(plan):

            def build(
                name: str = name,
                episode_seed: int = episode_seed,
                policy_seat: str = policy_seat,
                seat_ids=scenario_seats,
            ) -> dict[str, Agent]:
                agents: dict[str, Agent] = {policy_seat: make_policy()}
                for k, other in enumerate(s for s in seat_ids if s != policy_seat):
                    agents[other] = make_counterpart(name, episode_seed + 7919 * (k + 1))
                return agents

            specs.append(
                EpisodeSpec(
                    make_env=lambda: make(env_id, **env_config),
                    make_agents=build,
                    scenario=scenario,
                    seed=episode_seed,
                    episode_id=f"{prefix}:{name}:{index}:{policy_seat}",
                )
            )
            labels.append((name, policy_seat))

    results = await run_episodes(specs, concurrency=concurrency, turn_timeout=turn_timeout)
    views = [policy_episode(r, s, c) for r, (c, s) in zip(results, labels, strict=True)]
    first = results[0]
    return EvaluationResult(
        env_id=env_id,
        policy=first.agent_names.get(labels[0][1], ""),
        seat=seat if seat is not None else "alternating",
        counterparts=tuple(counterparts),
        scenario_source=source,
        seed=seed,
        episodes=results,
        policy_episodes=views,
        summary=summarise(views, confidence, ci_method, seed),
        by_counterpart=_breakdown(views, counterparts, confidence, ci_method, seed),
    )


def evaluate_policy(
    env_id: str,
    make_policy: Callable[[], Agent],
    seat: str | None = None,
    counterparts: Sequence[str] = DEFAULT_COUNTERPARTS,
    scenarios: Sequence[Scenario] | int = 32,
    seed: int = 0,
    concurrency: int = 32,
    turn_timeout: float | None = 60.0,
    *,
    make_counterpart: Callable[[str, int], Agent] = make_code_agent,
    ci_method: str = "t",
    confidence: float = 0.95,
    env_config: Mapping[str, Any] | None = None,
    episode_prefix: str | None = None,
) -> EvaluationResult:
    """Play `make_policy()` in `seat` (None: alternate seats of a two-seat environment) against each
    counterpart on every scenario (an int n means `held_out_scenarios(env_id, n, seed)`), `concurrency`
    episodes at once, and summarise.

    `make_counterpart(name, seed)` builds the other seats' agents; `ci_method` is "t", "normal" or
    "bootstrap" at level `confidence`; `env_config` goes to the environment's constructor; episode ids are
    "<episode_prefix>:<counterpart>:<index>:<seat>" (default prefix: a fresh random one, so that ids stay
    unique in the episode tables). Runs its own event loop; use `evaluate_policy_async` inside one."""
    return asyncio.run(
        evaluate_policy_async(
            env_id,
            make_policy,
            seat,
            counterparts,
            scenarios,
            seed,
            concurrency,
            turn_timeout,
            make_counterpart=make_counterpart,
            ci_method=ci_method,
            confidence=confidence,
            env_config=env_config,
            episode_prefix=episode_prefix,
        )
    )


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
