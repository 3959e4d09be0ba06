"""Stage 1 of SocialRL as plain functions (the Dagster assets call these): scenarios, teacher traces,
SFT warm-starts, PPO specialists, evaluation, registry promotion.

Each function takes explicit inputs (profile, directories, running services) and returns plain values,
so it runs the same from a test, a script or an asset.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agents.llm_agent import LLMAgent, LLMAgentConfig
from agents.socialrl.teacher import make_teacher
from agents.traces import Trace, collect_traces, filter_traces
from environments import Scenario
from environments.core.runtime import Agent
from environments.socialrl.craigslist import BUYER, opening_offer, opens_below_target
from models.evaluation.policy import EvaluationPlan, EvaluationResult, evaluate_policy
from models.evaluation.scenarios import held_out_scenarios, training_scenarios
from models.evaluation.stats import confidence_interval
from models.profiles import Profile
from models.serving.engine import EngineClient
from models.tracking import Tracker
from models.training.config import PPOResult, Services, SFTResult, learning_seat
from models.training.sft import run_sft


def registered_name(env_id: str) -> str:
    """The MLflow registry name of a domain's specialist, e.g. socialrl-craigslist-specialist."""
    return f"socialrl-{env_id.removesuffix('-v0')}-specialist"


def specialist_seat(env_id: str, profile: Profile) -> str:
    """The seat a domain's specialist is trained and evaluated in (PPO's learning seat)."""
    return learning_seat(profile.ppo_for(env_id))


def behaviour_metrics(result: EvaluationResult) -> dict[str, float]:
    """Domain behaviour beyond reward, over the policy's episodes. Craigslist (the SocialRL paper's anchoring
    measure, 3% of untrained buyers -> 78% trained): the share of buyer episodes whose first buyer offer is
    below the buyer's target, the share with any buyer offer, and the median first offer / target."""
    if result.env_id != "craigslist-v0":
        return {}
    buyer = [e for e, p in zip(result.episodes, result.policy_episodes, strict=True) if p.seat == BUYER]
    if not buyer:
        return {}
    ratios = [
        price / e.scenario.buyer_target for e in buyer if (price := opening_offer(e.transcript, BUYER)) is not None
    ]
    return {
        "below_target_opening_rate": sum(opens_below_target(e.scenario, e.transcript) for e in buyer) / len(buyer),
        "buyer_offer_rate": len(ratios) / len(buyer),
        "median_opening_over_target": statistics.median(ratios) if ratios else math.nan,
    }


def domain_scenarios(env_id: str, profile: Profile, seed: int = 0) -> dict[str, list[Scenario]]:
    """Training and held-out scenarios of a domain (disjoint by content, see models/evaluation/policy.py)."""
    return {
        "train": training_scenarios(env_id, profile.train_scenarios, seed),
        "heldout": held_out_scenarios(env_id, profile.heldout_scenarios, seed),
    }


def scenario_rows(env_id: str, split: dict[str, list[Scenario]], run_id: str) -> list[dict[str, Any]]:
    return [
        {
            "env_id": env_id,
            "scenario_id": s.scenario_id,
            "split": name,
            "scenario": json.dumps(s.to_dict(), default=str),
            "run_id": run_id,
        }
        for name, scenarios in split.items()
        for s in scenarios
    ]


def teacher_traces(env_id: str, profile: Profile, seed: int = 0, run_tag: str = "traces") -> list[Trace]:
    """The strategic code teacher in every seat against the profile's counterparts, traced as chat."""
    scenarios = training_scenarios(env_id, profile.teacher_episodes, seed)
    return collect_traces(env_id, scenarios, make_teacher, profile.eval_counterparts, seed=seed, run_tag=run_tag)


def warmstart(
    env_id: str,
    traces: Sequence[Trace],
    profile: Profile,
    base_model_dir: Path,
    output: Path,
    tracker: Tracker | None = None,
) -> tuple[SFTResult, str | None]:
    """LoRA SFT on the filtered traces (90/10 train/held-out split); logged as an MLflow run."""
    kept = filter_traces(traces, profile.trace_min_reward)
    if len(kept) < 2:
        raise ValueError(
            f"{env_id}: only {len(kept)} usable traces after filtering (min reward {profile.trace_min_reward})"
        )
    cut = max(1, len(kept) // 10)
    held_out, train = kept[:cut], kept[cut:]
    run_id = None
    if tracker is None:
        return run_sft(
            base_model_dir, [t.messages for t in train], output, profile.sft, [t.messages for t in held_out]
        ), None
    with tracker.start_run(
        f"sft-{env_id}", params={"sft": asdict(profile.sft), "profile": profile.name, "env_id": env_id}
    ) as run:
        result = run_sft(
            base_model_dir, [t.messages for t in train], output, profile.sft, [t.messages for t in held_out]
        )
        run.log_metrics(
            result.steps,
            train_loss=result.train_loss,
            eval_loss_before=result.eval_loss_before or 0.0,
            eval_loss_after=result.eval_loss_after or 0.0,
            examples=result.examples,
            wall_seconds=result.wall_seconds,
        )
        run.log_artifact_dir(result.adapter_dir, "adapter")
        run_id = run.run_id
    return result, run_id


def train_specialist(
    env_id: str,
    profile: Profile,
    base_model_dir: Path,
    critic_model_dir: Path,
    services: Services,
    output: Path,
    init_adapter: Path | None,
    tracker: Tracker | None = None,
) -> tuple[PPOResult, str | None, int | None]:
    """PPO from the warm-start (or from scratch); registered as a `candidate` when a tracker is given."""
    from models.training.ppo import train_ppo  # loads torch: only when training runs

    config = profile.ppo_for(env_id)
    if tracker is None:
        return train_ppo(config, base_model_dir, services, output, critic_model_dir, init_adapter), None, None
    with tracker.start_run(f"ppo-{env_id}", params={"ppo": asdict(config), "profile": profile.name}) as run:
        result = train_ppo(
            config,
            base_model_dir,
            services,
            output,
            critic_model_dir,
            init_adapter,
            on_iteration=lambda m: run.log_metrics(
                int(m["iteration"]),
                **{k: float(v) for k, v in m.items() if isinstance(v, int | float) and k != "iteration"},
            ),
        )
        run.log_artifact_dir(result.adapter_dir, "adapter")
        run_id = run.run_id
    version = tracker.register_adapter(run_id, "adapter", registered_name(env_id))
    return result, run_id, version


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
            temperature=0.7,
            max_tokens=profile.max_new_tokens,
            seed=seed,
            fail_on_request_error=False,
            tom=tom,
        )
    )


def evaluate_model(
    env_id: str,
    profile: Profile,
    base_url: str,
    model: str,
    seed: int = 0,
    scenarios: Sequence[Scenario] | None = None,
    seat: str | None = None,
    api_key: str | None = None,
) -> EvaluationResult:
    """A served model (base or adapter) on the domain's held-out scenarios against the fixed counterparts,
    in `seat` (None: the specialist's seat, the one PPO trains, so base, SFT and PPO compare like for like)."""
    held_out = list(scenarios) if scenarios is not None else held_out_scenarios(env_id, profile.heldout_scenarios, seed)

    def make_policy(policy_seed: int) -> Agent:
        return llm_policy(base_url, model, profile, seed=policy_seed, api_key=api_key)

    plan = EvaluationPlan(
        env_id,
        tuple(held_out),
        seat=seat or specialist_seat(env_id, profile),
        counterparts=profile.eval_counterparts,
        seed=seed,
        concurrency=16,
    )
    return evaluate_policy(plan, make_policy)


@dataclass(frozen=True)
class ServedAdapter:
    """An adapter loaded into the engine for evaluation."""

    name: str
    path: Path


def serve_adapter(engine: EngineClient, name: str, path: Path) -> ServedAdapter:
    if name in engine.models():
        engine.unload_adapter(name)
    engine.load_adapter(name, path)
    return ServedAdapter(name, path)


def trace_summary(traces: Sequence[Trace]) -> dict[str, float]:
    """Mean teacher reward with the evaluations' 95% t interval, agreement and leak rates."""
    if not traces:
        return {"n": 0}
    rewards = [t.reward for t in traces]
    low, high = confidence_interval(rewards)
    return {
        "n": len(traces),
        "mean_reward": statistics.fmean(rewards),
        "ci_low": low,
        "ci_high": high,
        "agreement_rate": sum(t.agreement for t in traces) / len(traces),
        "leak_rate": sum(bool(t.leaked) for t in traces) / len(traces),
    }
