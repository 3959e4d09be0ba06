"""Held-out evaluation of stage 1: one plan per domain, every policy on it, reduced to comparable records.

A domain's plan (`evaluation_plan`) is its held-out scenarios against the fixed counterparts in the learning
seat; every policy played on it (the served models: base, warm-start, specialist; the code policies: the
teacher, the trivial baselines of agents/socialrl/baselines.py and, in a price domain's buyer seat, the
incentive audit's best fixed rule) is paired with every other episode by
episode (models/evaluation/policy.py). A `PolicyResult` keeps a policy's summary and its per-episode
records (models/socialrl/episode_metrics.py), which is all a paired comparison needs, so an evaluation made
by one asset can be compared with one made by another.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agents.llm_agent import LLMAgent, LLMAgentConfig
from agents.socialrl.baselines import BASELINES, make_baseline
from agents.socialrl.counterparts import LLMCounterpart, counterpart_factory
from agents.socialrl.teacher import make_teacher
from environments import Scenario
from environments.core.runtime import Agent
from models.display import interval_text
from models.evaluation.policy import (
    EvaluationPlan,
    EvaluationResult,
    EvaluationSummary,
    PlanIdentity,
    evaluate_policy,
)
from models.evaluation.scenarios import held_out_scenarios
from models.evaluation.stats import Estimate
from models.profiles import Profile
from models.socialrl.episode_metrics import EpisodeRecord, episode_records, summary
from models.socialrl.incentives import plays_price_buyer, search_fixed_rule
from models.socialrl.stage1.common import specialist_seat

log = logging.getLogger("socialrl.evaluation")

BEST_FIXED_RULE = "best_fixed_rule"
"""The label of the incentive audit's best fixed rule (models/socialrl/incentives.py `search_fixed_rule`): hold
max(target, f x listing), f searched on the plan itself. Played where it is defined: a price domain's buyer."""
CODE_POLICIES = ("teacher", *BASELINES, BEST_FIXED_RULE)
"""The code policies every plan also plays: the strategic teacher, the trivial baselines and, in a price
domain's buyer seat, the best fixed rule."""
RULES = (*BASELINES, BEST_FIXED_RULE)
"""The rules a trained policy must beat (`best_baseline` picks among them)."""


def llm_policy(
    base_url: str, model: str, profile: Profile, seed: int = 0, tom: bool = False, api_key: str | None = None
) -> LLMAgent:
    """An LLM agent serving `model` (the base model or an adapter name) through `base_url` (`api_key`: its
    bearer token, e.g. the proxy's per-run token)."""
    return LLMAgent(
        LLMAgentConfig(
            base_url=base_url,
            model=model,
            api_key_env=None,
            api_key=api_key,
            temperature=profile.eval_temperature,
            max_tokens=profile.max_new_tokens,
            seed=seed,
            fail_on_request_error=False,
            tom=tom,
        )
    )


def evaluation_plan(
    env_id: str,
    profile: Profile,
    seed: int = 0,
    scenarios: Sequence[Scenario] | None = None,
    seat: str | None = None,
) -> EvaluationPlan:
    """The held-out plan of a domain: `scenarios` (default: the profile's `heldout_scenarios` held-out ones)
    against the fixed counterparts, in `seat` (None: the specialist's seat, the one PPO trains, so every
    policy compares like for like). Every policy evaluated with one plan is paired episode by episode
    (models/evaluation/policy.py)."""
    if scenarios is None:
        scenarios = held_out_scenarios(env_id, profile.heldout_scenarios, seed, profile.scenario_source)
    return EvaluationPlan(
        env_id,
        tuple(scenarios),
        seat=seat or specialist_seat(env_id, profile),
        counterparts=profile.eval_counterparts,
        seed=seed,
        concurrency=profile.eval_concurrency,
        # The agent bounds its own calls; a shorter turn timeout turned slow answers on a busy CPU engine into
        # invalid actions (measured: 47% of the SFT policy's turns at 32 episodes in flight and 60 s).
        turn_timeout=llm_policy("http://plan.invalid/v1", "plan", profile).config.turn_budget_s,
    )


def heldout_plan_identity(env_id: str, profile: Profile) -> PlanIdentity:
    """The identity of the domain's held-out plan under `profile` (what `evaluate_specialist` records on the
    specialist's registry version, and what stage 2 looks specialists up by)."""
    return evaluation_plan(env_id, profile).identity(profile.scenario_source)


def base_plan(plan: EvaluationPlan, profile: Profile) -> EvaluationPlan:
    """The part of `plan` the base model plays: its first `profile.base_heldout_scenarios` scenarios (all when
    0). A prefix of the plan has the same episodes, seeds included, so the base pairs with the others there."""
    keep = profile.base_heldout_scenarios
    if not keep or keep >= len(plan.scenario_list()):
        return plan
    return dataclasses.replace(plan, scenarios=tuple(plan.scenario_list()[:keep]))


def evaluate_model(
    env_id: str,
    profile: Profile,
    base_url: str,
    model: str,
    seed: int = 0,
    scenarios: Sequence[Scenario] | None = None,
    seat: str | None = None,
    api_key: str | None = None,
    plan: EvaluationPlan | None = None,
) -> EvaluationResult:
    """A served model (base or adapter) on `plan` (default: `evaluation_plan(env_id, profile, seed, scenarios,
    seat)`). The same plan gives the same episodes, so two models evaluated with it are paired."""
    plan = plan or evaluation_plan(env_id, profile, seed, scenarios, seat)

    def make_policy(policy_seed: int) -> Agent:
        return llm_policy(base_url, model, profile, seed=policy_seed, api_key=api_key)

    # An `llm` counterpart in the plan is the engine's base model through the same endpoint.
    llm = LLMCounterpart(
        base_url=base_url,
        model=profile.ppo.counterpart_model,
        api_key=api_key,
        temperature=profile.eval_temperature,
        max_tokens=profile.max_new_tokens,
    )
    # One line per ended episode: an evaluation is minutes on CPU ("evaluating", not "eval": the finished line).
    return evaluate_policy(
        plan, make_policy, counterpart_factory(llm), progress=log, progress_label=f"evaluating {model} on {env_id}"
    )


# ------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class PolicyResult:
    """One policy on a plan, reduced to what reports and paired comparisons read."""

    label: str
    """base, sft, ppo, teacher, or a baseline's name."""
    model: str
    """The name the engine served it under, or the code policy's description."""
    kind: str
    """"model" (served by the engine) or "code"."""
    summary: EvaluationSummary
    metrics: Mapping[str, Estimate]
    """Every per-episode metric summarised (models/socialrl/episode_metrics.py)."""
    records: tuple[EpisodeRecord, ...] = field(repr=False, default=())
    """One record per episode, in plan order."""
    seconds: float = math.nan
    """Wall time of the evaluation."""

    @classmethod
    def from_result(cls, label: str, model: str, kind: str, result: EvaluationResult, seconds: float) -> PolicyResult:
        records = episode_records(result)
        return cls(label, model, kind, result.summary, summary(records), records, seconds)

    def line(self) -> str:
        """One console line: what a person watching the run wants to see."""
        s, metrics = self.summary, self.metrics
        command = metrics.get("command_rate")
        return (
            f"{self.label}: {s.n} episodes  reward {interval_text(s.mean_reward, s.ci_low, s.ci_high)}  "
            f"agree {s.agreement_rate:.2f}  invalid {s.invalid_action_rate:.2f}/turn  "
            f"command rate {command.mean if command else math.nan:.2f}  {self.seconds:.0f}s"
        ).replace("nan", "-")


StoreResult = Callable[[EvaluationResult, str], None]
"""Writes an evaluation's episodes and summary to the tables under a label."""


def evaluate_served(
    label: str,
    plan: EvaluationPlan,
    profile: Profile,
    base_url: str,
    model: str,
    api_key: str | None = None,
    store_result: StoreResult | None = None,
) -> tuple[PolicyResult, EvaluationResult]:
    """A served model on `plan`, logged as one line, stored when `store_result` is given."""
    started = time.perf_counter()
    result = evaluate_model(plan.env_id, profile, base_url, model, api_key=api_key, plan=plan)
    policy = PolicyResult.from_result(label, model, "model", result, time.perf_counter() - started)
    log.info("eval %s %s", plan.env_id, policy.line())
    if store_result is not None:
        store_result(result, label)
    return policy, result


def code_policy(label: str) -> Callable[[int], Agent]:
    """The factory of a code policy by label: the teacher or a baseline."""
    if label == "teacher":
        return make_teacher
    return lambda seed: make_baseline(label, seed)


def evaluate_code_policies(
    plan: EvaluationPlan, labels: Sequence[str] = CODE_POLICIES, store_result: StoreResult | None = None
) -> dict[str, tuple[PolicyResult, EvaluationResult]]:
    """The teacher, the trivial baselines and the best fixed rule (where `plays_price_buyer`) on `plan` (code: no
    engine, seconds)."""
    out = {}
    for label in labels:
        started = time.perf_counter()
        if label == BEST_FIXED_RULE:
            if not plays_price_buyer(plan):
                continue
            fraction, searched = search_fixed_rule(plan)
            result = searched[fraction]
            name = f"hold max(target, {fraction:g} x listing)"
        else:
            result = evaluate_policy(plan, code_policy(label))
            name = result.policy
        policy = PolicyResult.from_result(label, name, "code", result, time.perf_counter() - started)
        log.info("eval %s %s", plan.env_id, policy.line())
        if store_result is not None:
            store_result(result, label)
        out[label] = (policy, result)
    return out


def best_baseline(policies: Mapping[str, PolicyResult]) -> str | None:
    """The rule (a trivial baseline or the best fixed rule) with the highest mean reward on the plan (None
    without one)."""
    baselines = [p for p in policies.values() if p.label in RULES]
    return max(baselines, key=lambda p: p.summary.mean_reward).label if baselines else None
