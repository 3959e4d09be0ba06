"""A leaderboard for any OpenAI-compatible endpoint: every SocialRL domain and the Red-Black game.

`evaluate_endpoint(endpoint, profile)` plays the model behind `endpoint.base_url` (a remote API, a local
vLLM server, the rollout proxy) as an `LLMAgent` against the fixed code counterparts and returns one
`LeaderboardRow`:

| part | how it is played | what the row reports |
| --- | --- | --- |
| six SocialRL domains | `Profile.leaderboard.heldout_scenarios` held-out scenarios per domain, each against every evaluation counterpart (`Profile.eval_counterparts`), in the specialist's seat (one `EvaluationPlan` per domain, so two endpoints are paired episode by episode) | per domain: mean reward with a bootstrap CI by scenario, agreement, leak and invalid-action rates; over the domains: the mean of the domain means, and agreement, leak and invalid-action rates pooled over episodes |
| Red-Black | the held-out frames (trade_war, gpu_contention), the model in every seat of team A, a scripted opponent team (`Profile.leaderboard.red_black_opponents`) as team B, in the paper's sequential discussion order (`rotating`: one teammate at a time, each hearing those before it) | collective welfare (sum of both teams' scores, at most 150 with full cooperation), the model team's reward, decided cooperation (rounds BLACK won a strict majority of the team's counted votes) and abstention (votes that ended as abstentions per vote turn), each with a bootstrap CI by game (a game = a frame's scenario against one opponent); the cooperation rate (ties and all-abstention rounds count as BLACK, the game's rule) |

A failing endpoint does not stop the evaluation: every call is retried on transport errors, timeouts,
408, 429 and 5xx (`request_retries`, exponential back-off); a call that still fails becomes an empty
reply, which the environment counts as an invalid action (its rules then forfeit the turn). The row
counts the calls and the failed calls. Malformed text is an invalid action the same way.

Registered models (`models:/name@champion`) and other local references are evaluated the same way,
served by the project's engine (the Dagster asset loads them into the `engine` resource's vLLM; the
command line starts one with models/serving/local.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from agents.llm_agent import LLMAgent, LLMAgentConfig
from agents.yoao.red_black_strategies import make_strategy_team
from environments import SOCIALRL_ENV_IDS, make
from environments.core.runtime import Agent, EpisodeResult, EpisodeSpec, progress_logger, run_episodes
from environments.yoao.red_black import BLACK, RED, ROTATING, RedBlackScenario, list_frames
from models.evaluation.policy import EvaluationPlan, EvaluationResult, evaluate_policy_async
from models.evaluation.scenarios import held_out_scenarios
from models.evaluation.stats import Estimate, mean_estimate
from models.profiles import Profile
from models.training.config import learning_seat

logger = logging.getLogger("socialrl.leaderboard")

RED_BLACK = "red-black-v0"


@dataclass(frozen=True)
class Endpoint:
    """One model to put on the leaderboard."""

    name: str
    """The row's label (e.g. "smollm2-base", "gpt-4.1")."""
    model: str
    """The model name to request at `base_url` (or, for a local endpoint, a model reference)."""
    base_url: str = ""
    """OpenAI base URL; empty = served locally by the project's engine."""
    api_key: str = field(default="", repr=False, compare=False)
    """The key's value (resolved at the edge from an environment variable; never logged)."""

    def __post_init__(self) -> None:
        if not self.name or not self.model:
            raise ValueError("an endpoint needs a name and a model")
        if self.base_url and not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {self.base_url!r}")

    @property
    def local(self) -> bool:
        return not self.base_url


@dataclass(frozen=True)
class DomainScore:
    """One SocialRL domain of a row."""

    env_id: str
    seat: str
    reward: Estimate
    agreement_rate: float
    leak_rate: float
    invalid_action_rate: float

    def as_dict(self) -> dict[str, Any]:
        return {"seat": self.seat, **self.reward.as_dict(), **_finite_dict(
            agreement_rate=self.agreement_rate, leak_rate=self.leak_rate, invalid_action_rate=self.invalid_action_rate
        )}  # fmt: skip


@dataclass(frozen=True)
class RedBlackScore:
    """The Red-Black part of a row."""

    welfare: Estimate
    """Collective welfare per game (both teams' scores; 150 = full mutual cooperation), CI by game."""
    cooperation_rate: float
    """Share of rounds in which the model's team chose BLACK."""
    team_reward: Estimate
    """The model team's normalised reward."""
    invalid_votes: int
    games: int
    decided_cooperation: Estimate = field(default_factory=lambda: Estimate(math.nan, math.nan, math.nan, 0))
    """Share of rounds in which BLACK won a strict majority of the model team's counted votes (cooperation not
    carried by ties or abstentions), CI by game."""
    abstention: Estimate = field(default_factory=lambda: Estimate(math.nan, math.nan, math.nan, 0))
    """The model team's votes that ended as abstentions, per vote turn, CI by game."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "welfare": self.welfare.as_dict(),
            "team_reward": self.team_reward.as_dict(),
            "decided_cooperation": self.decided_cooperation.as_dict(),
            "abstention": self.abstention.as_dict(),
            **_finite_dict(cooperation_rate=self.cooperation_rate),
            "invalid_votes": self.invalid_votes,
            "games": self.games,
        }


@dataclass(frozen=True)
class LeaderboardRow:
    """One endpoint's results (module table)."""

    endpoint: str
    model: str
    base_url: str
    """"local" for a model served by the project's engine."""
    profile: str
    domains: dict[str, DomainScore]
    mean_reward: float
    """Mean of the domain means."""
    agreement_rate: float
    leak_rate: float
    invalid_action_rate: float
    red_black: RedBlackScore | None
    calls: int
    """HTTP calls made (retries included)."""
    failed_calls: int
    """Calls that failed (each retried while retries were left; the last failure becomes an empty reply)."""
    wall_seconds: float
    evaluated_at: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe row of benchmarks/results/leaderboard.json."""
        return {
            "endpoint": self.endpoint,
            "model": self.model,
            "base_url": self.base_url,
            "profile": self.profile,
            **_finite_dict(
                mean_reward=self.mean_reward,
                agreement_rate=self.agreement_rate,
                leak_rate=self.leak_rate,
                invalid_action_rate=self.invalid_action_rate,
            ),
            "domains": {env: d.as_dict() for env, d in self.domains.items()},
            "red_black": self.red_black.as_dict() if self.red_black else None,
            "calls": self.calls,
            "failed_calls": self.failed_calls,
            "wall_seconds": round(self.wall_seconds, 1),
            "evaluated_at": self.evaluated_at,
        }


def _finite_dict(**values: float) -> dict[str, float | None]:
    return {k: (float(v) if v is not None and math.isfinite(v) else None) for k, v in values.items()}


@dataclass
class _Calls:
    agents: list[LLMAgent] = field(default_factory=list)

    def count(self) -> tuple[int, int]:
        return (sum(a.metrics["calls"] for a in self.agents), sum(a.metrics["request_errors"] for a in self.agents))


def agent_config(
    base_url: str, model: str, profile: Profile, seed: int, api_key: str | None = None, name: str | None = None
) -> LLMAgentConfig:
    """How the leaderboard prompts and calls a model (plain prompt, failures become empty replies)."""
    lb = profile.leaderboard
    return LLMAgentConfig(
        base_url=base_url,
        model=model,
        api_key_env=None,
        api_key=api_key or None,
        temperature=0.7,
        max_tokens=lb.max_new_tokens,
        seed=seed,
        request_retries=lb.request_retries,
        retry_backoff_s=lb.retry_backoff_s,
        request_timeout_s=lb.request_timeout_s,
        fail_on_request_error=False,
        name=name,
    )


def _turn_timeout(profile: Profile) -> float:
    """A turn may take every try of its call plus the back-off between them (LLMAgentConfig.turn_budget_s)."""
    return agent_config("http://endpoint", "model", profile, seed=0).turn_budget_s


def domain_plan(env_id: str, profile: Profile, seed: int = 0) -> EvaluationPlan:
    """The plan every endpoint plays in a SocialRL domain (held-out scenarios, the specialist's seat)."""
    return EvaluationPlan(
        env_id,
        tuple(held_out_scenarios(env_id, profile.leaderboard.heldout_scenarios, seed)),
        seat=learning_seat(profile.ppo_for(env_id)),
        counterparts=profile.eval_counterparts,
        seed=seed,
        concurrency=profile.leaderboard.concurrency,
        turn_timeout=_turn_timeout(profile),
        episode_prefix=None,
    )


def red_black_scenarios(profile: Profile, seed: int = 0) -> list[RedBlackScenario]:
    """The held-out-frame games: `red_black_games` per opponent, frames taken in turn, the paper's sequential
    discussion order."""
    frames = list_frames("heldout")
    games = profile.leaderboard.red_black_games
    return [
        RedBlackScenario(scenario_id=f"heldout:{frames[i % len(frames)]}:{seed}:{i}", frame=frames[i % len(frames)],
                         team_size=profile.leaderboard.red_black_team_size, discussion_order=ROTATING)
        for i in range(games)
    ]  # fmt: skip


async def play_red_black(
    base_url: str, model: str, profile: Profile, seed: int = 0, api_key: str | None = None, calls: _Calls | None = None
) -> tuple[RedBlackScore, list[EpisodeResult]]:
    """The model in every seat of team A against each scripted opponent team on the held-out frames."""
    calls = calls if calls is not None else _Calls()
    specs = []
    scenarios = red_black_scenarios(profile, seed)
    for o, opponent in enumerate(profile.leaderboard.red_black_opponents):
        for g, scenario in enumerate(scenarios):
            game_seed = seed * 1_000_003 + o * 101 + g

            def build(scenario=scenario, opponent=opponent, game_seed=game_seed) -> dict[str, Agent]:
                agents: dict[str, Agent] = {}
                for k, seat in enumerate(scenario.seats("A")):
                    agent = LLMAgent(agent_config(base_url, model, profile, game_seed * 31 + k, api_key))
                    calls.agents.append(agent)
                    agents[seat] = agent
                agents.update(make_strategy_team(opponent, scenario.seats("B"), seed=game_seed))
                return agents

            specs.append(
                EpisodeSpec(
                    make_env=lambda: make(RED_BLACK),
                    make_agents=build,
                    scenario=scenario,
                    seed=game_seed,
                    episode_id=f"leaderboard:{model}:{RED_BLACK}:{opponent}:{g}",
                )
            )
    results = await run_episodes(
        specs,
        concurrency=profile.leaderboard.concurrency,
        turn_timeout=_turn_timeout(profile),
        on_result=progress_logger(logger, f"leaderboard:{model}:{RED_BLACK}", len(specs), noun="game"),
    )
    welfare = [float(r.outcome.metrics["welfare"]) for r in results]
    games = [r.episode_id for r in results]  # a game: one scenario against one opponent team
    rewards = [r.outcome.roles["A0"].reward for r in results]
    rates = [red_black_game_rates(r) for r in results]
    score = RedBlackScore(
        welfare=mean_estimate(welfare, games, seed=seed),
        cooperation_rate=float(np.mean([r.outcome.metrics["cooperation_rate_A"] for r in results])),
        team_reward=mean_estimate(rewards, games, (0.0, 1.0), seed=seed),
        invalid_votes=int(sum(_count(r.outcome.metrics.get("invalid_votes")) for r in results)),
        games=len(results),
        decided_cooperation=mean_estimate([d for d, _ in rates], games, (0.0, 1.0), seed=seed),
        abstention=mean_estimate([a for _, a in rates], games, (0.0, 1.0), seed=seed),
    )
    return score, results


def red_black_game_rates(result: EpisodeResult) -> tuple[float, float]:
    """(decided cooperation, abstention) of team A in one game: the share of rounds in which BLACK won a strict
    majority of its counted votes, and its votes that ended as abstentions per vote turn."""
    m = result.outcome.metrics
    log = m["round_log"]
    decided = sum(e["tallies"]["A"][BLACK] > e["tallies"]["A"][RED] for e in log) / len(log) if log else 0.0
    votes = [v for seat, vs in m["vote_histories"].items() if seat.startswith("A") for v in vs]
    return decided, (sum(v is None for v in votes) / len(votes) if votes else 0.0)


def _count(value: Any) -> int:
    if isinstance(value, dict):
        return sum(int(v) for v in value.values())
    return int(value or 0)


@dataclass(frozen=True, eq=False)
class EndpointEvaluation:
    """A row and the evaluations behind it (for the tables)."""

    row: LeaderboardRow
    domains: dict[str, EvaluationResult]
    red_black: list[EpisodeResult]


def evaluate_endpoint(
    endpoint: Endpoint,
    profile: Profile,
    base_url: str | None = None,
    model: str | None = None,
    seed: int = 0,
    domains: Sequence[str] = SOCIALRL_ENV_IDS,
    red_black: bool = True,
) -> EndpointEvaluation:
    """Play the endpoint in every domain and in Red-Black (module table). `base_url`/`model` override where
    the calls go (a local model served by the engine, or the rollout proxy in front of it)."""
    url = base_url or endpoint.base_url
    served = model or endpoint.model
    if not url:
        raise ValueError(f"{endpoint.name}: a local endpoint needs the URL it is served at")
    start = time.perf_counter()
    calls = _Calls()

    def make_policy(policy_seed: int) -> Agent:
        agent = LLMAgent(agent_config(url, served, profile, policy_seed, endpoint.api_key, f"llm({endpoint.name})"))
        calls.agents.append(agent)
        return agent

    async def play_all() -> tuple[list[EvaluationResult], tuple[RedBlackScore, list[EpisodeResult]] | None]:
        # All domains (and Red-Black) in one event loop, so the engine batches calls across them.
        plans = [
            dataclasses.replace(
                domain_plan(env_id, profile, seed), episode_prefix=f"leaderboard:{endpoint.name}:{env_id}"
            )
            for env_id in domains
        ]
        games = play_red_black(url, served, profile, seed, endpoint.api_key or None, calls) if red_black else None
        done = await asyncio.gather(
            *(evaluate_policy_async(p, make_policy, progress=logger) for p in plans), *([games] if games else [])
        )
        return list(done[: len(plans)]), (done[-1] if games else None)

    evaluations, red = asyncio.run(play_all())
    results = dict(zip(domains, evaluations, strict=True))
    score, games = red if red is not None else (None, [])
    scores = {
        env_id: DomainScore(
            env_id,
            r.seat,
            r.summary.reward,
            r.summary.agreement_rate,
            r.summary.leakage_rate,
            r.summary.invalid_action_rate,
        )
        for env_id, r in results.items()
    }
    views = [v for r in results.values() for v in r.policy_episodes]
    turns = sum(v.policy_turns for v in views)
    n_calls, failed = calls.count()
    row = LeaderboardRow(
        endpoint=endpoint.name,
        model=endpoint.model,
        base_url=endpoint.base_url or "local",
        profile=profile.name,
        domains=scores,
        mean_reward=float(np.mean([s.reward.mean for s in scores.values()])) if scores else math.nan,
        agreement_rate=float(np.mean([v.agreement for v in views])) if views else math.nan,
        leak_rate=float(np.mean([bool(v.leaked) for v in views])) if views else math.nan,
        invalid_action_rate=sum(v.invalid_actions for v in views) / turns if turns else math.nan,
        red_black=score,
        calls=n_calls,
        failed_calls=failed,
        wall_seconds=time.perf_counter() - start,
        evaluated_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    return EndpointEvaluation(row, results, games)


def merge_rows(existing: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The leaderboard file's rows with `new` replacing rows of the same endpoint and profile, best mean first."""
    keys = {(r["endpoint"], r["profile"]) for r in new}
    kept = [r for r in existing if (r.get("endpoint"), r.get("profile")) not in keys]
    rows = [*kept, *new]
    return sorted(rows, key=lambda r: -(r.get("mean_reward") if r.get("mean_reward") is not None else -math.inf))


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a markdown table (mean reward per domain with its CI, pooled rates, Red-Black welfare)."""
    if not rows:
        return "(no rows)"
    envs = [e for e in SOCIALRL_ENV_IDS if any(e in r["domains"] for r in rows)]

    def cell(d: dict[str, Any] | None) -> str:
        if not d or d.get("mean") is None:
            return "-"
        low, high = d.get("ci_low"), d.get("ci_high")
        interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
        return f"{d['mean']:.3f}{interval}"

    def num(v: float | None, fmt: str = ".3f") -> str:
        return "-" if v is None else format(v, fmt)

    head = ["endpoint", "mean", *[e.removesuffix("-v0") for e in envs], "agree", "leak", "invalid", "red-black welfare"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        rb = r.get("red_black") or {}
        lines.append(
            "| " + " | ".join([
                r["endpoint"], num(r.get("mean_reward")), *[cell(r["domains"].get(e)) for e in envs],
                num(r.get("agreement_rate"), ".2f"), num(r.get("leak_rate"), ".2f"),
                num(r.get("invalid_action_rate"), ".2f"), cell(rb.get("welfare")) if rb else "-",
            ]) + " |"
        )  # fmt: skip
    return "\n".join(lines)


@dataclass(frozen=True)
class Leaderboard:
    """The rows of one leaderboard run (best mean reward first) and the endpoints left out."""

    rows: tuple[LeaderboardRow, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    """Endpoint -> why it was not evaluated."""

    def as_rows(self) -> list[dict[str, Any]]:
        return merge_rows([], [r.as_dict() for r in self.rows])
