"""Stage 1 of SocialRL as plain functions (the Dagster assets call these): scenarios, teacher traces,
SFT warm-starts, PPO specialists, their paired evaluation, registry documentation.

Each function takes explicit inputs (profile, directories, running services, a tracker) and returns a
frozen dataclass, so it runs the same from a test, a script or an asset.

| function | returns |
| --- | --- |
| `split_scenarios` | `ScenarioSplit`: a domain's training and held-out scenario ids (disjoint by content) and their table rows |
| `teacher_traces` | the strategic code teacher's episodes in every seat, rendered as the LLM agent's chat |
| `warmstart` | `WarmStart`: LoRA SFT on the filtered traces, as an MLflow run with per-step metrics and a loss plot |
| `train_specialist` | `Specialist`: PPO from the warm-start, an MLflow run with per-iteration metrics and learning-curve plots, registered as `candidate` |
| `evaluate_specialist` | `SpecialistEvaluation`: base, SFT and PPO on the same held-out episodes, paired differences, behaviour, transcripts |
"""

from __future__ import annotations

import json
import logging
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agents.llm_agent import LLMAgent, LLMAgentConfig
from agents.socialrl.teacher import make_teacher
from agents.traces import Trace, collect_traces, filter_traces
from environments import Scenario
from environments.core.runtime import Agent
from environments.socialrl.craigslist import BUYER, opening_offer, opens_below_target
from models import plots
from models.evaluation.policy import EvaluationPlan, EvaluationResult, EvaluationSummary, evaluate_policy
from models.evaluation.policy import paired_difference as paired
from models.evaluation.scenarios import held_out_scenarios, training_scenarios
from models.evaluation.stats import Estimate, mean_estimate
from models.evaluation.transcripts import representative_transcripts, transcripts_html, transcripts_markdown
from models.profiles import Profile
from models.serving.engine import EngineClient
from models.tracking import ModelCard, Tracker
from models.training.config import PPOResult, Services, SFTResult, learning_seat
from models.training.sft import run_sft

log = logging.getLogger("socialrl.evaluation")

POLICY_LABELS = ("base", "sft", "ppo")
"""The policies a specialist evaluation compares, in order."""
PAIRS = (("ppo", "sft"), ("sft", "base"), ("ppo", "base"))
"""Paired differences reported: ppo_minus_sft, sft_minus_base, ppo_minus_base."""


def registered_name(env_id: str) -> str:
    """The MLflow registry name of a domain's specialist, e.g. socialrl-craigslist-specialist."""
    return f"socialrl-{env_id.removesuffix('-v0')}-specialist"


def specialist_seat(env_id: str, profile: Profile) -> str:
    """The seat a domain's specialist is trained and evaluated in (PPO's learning seat)."""
    return learning_seat(profile.ppo_for(env_id))


# ------------------------------------------------------------------------------------------ scenarios
@dataclass(frozen=True)
class ScenarioSplit:
    """A domain's training and held-out scenarios (disjoint by content, models/evaluation/scenarios.py)."""

    env_id: str
    run_id: str
    source: str
    """"generated" or "dataset" (the profile's setting; a domain without data falls back to generated)."""
    train_ids: tuple[str, ...]
    heldout_ids: tuple[str, ...]
    rows: tuple[Mapping[str, Any], ...] = field(repr=False, default=())
    """Rows of the `scenarios` table."""


def domain_scenarios(env_id: str, profile: Profile, seed: int = 0) -> dict[str, list[Scenario]]:
    """Training and held-out scenarios of a domain (disjoint by content)."""
    return {
        "train": training_scenarios(env_id, profile.train_scenarios, seed, profile.scenario_source),
        "heldout": held_out_scenarios(env_id, profile.heldout_scenarios, seed, profile.scenario_source),
    }


def split_scenarios(env_id: str, profile: Profile, run_id: str, seed: int = 0) -> ScenarioSplit:
    split = domain_scenarios(env_id, profile, seed)
    rows = tuple(
        {
            "env_id": env_id,
            "scenario_id": s.scenario_id,
            "split": name,
            "scenario": json.dumps(s.to_dict(), default=str),
            "run_id": run_id,
        }
        for name, scenarios in split.items()
        for s in scenarios
    )
    return ScenarioSplit(
        env_id,
        run_id,
        profile.scenario_source,
        tuple(s.scenario_id for s in split["train"]),
        tuple(s.scenario_id for s in split["heldout"]),
        rows,
    )


# ------------------------------------------------------------------------------------- teacher traces
def teacher_traces(env_id: str, profile: Profile, seed: int = 0, run_tag: str = "traces") -> list[Trace]:
    """The strategic code teacher in every seat against the profile's counterparts, traced as chat."""
    scenarios = training_scenarios(env_id, profile.teacher_episodes, seed, profile.scenario_source)
    return collect_traces(env_id, scenarios, make_teacher, profile.eval_counterparts, seed=seed, run_tag=run_tag)


def trace_summary(traces: Sequence[Trace]) -> dict[str, float]:
    """Mean teacher reward with a bootstrap interval (clustered by scenario), agreement and leak rates."""
    if not traces:
        return {"n": 0}
    estimate = mean_estimate([t.reward for t in traces], [t.scenario_id for t in traces], (0.0, 1.0))
    return {
        "n": len(traces),
        "mean_reward": estimate.mean,
        "ci_low": estimate.ci_low,
        "ci_high": estimate.ci_high,
        "agreement_rate": sum(t.agreement for t in traces) / len(traces),
        "leak_rate": sum(bool(t.leaked) for t in traces) / len(traces),
    }


# ---------------------------------------------------------------------------------------- warm-start
@dataclass(frozen=True)
class WarmStart:
    """A domain's SFT warm-start, or why it has none."""

    env_id: str
    adapter_dir: str | None
    """The trained adapter; None when the profile does not warm-start this domain."""
    mlflow_run_id: str | None = None
    sft: SFTResult | None = None
    traces_used: int = 0
    """Teacher episodes kept by the filter (90% train, 10% held out for the loss)."""
    skipped: str = ""
    """Why there is no warm-start (empty when there is one)."""


def warmstart(
    env_id: str,
    traces: Sequence[Trace],
    profile: Profile,
    base_model_dir: Path,
    output: Path,
    tracker: Tracker | None = None,
    run_tags: Mapping[str, str] | None = None,
) -> WarmStart:
    """LoRA SFT on the filtered traces (90/10 train/held-out split); logged as an MLflow run with the loss
    per step, the held-out loss before and after, and a loss-curve plot."""
    if env_id not in profile.sft_domains:
        return WarmStart(env_id, None, skipped=f"{env_id} is not warm-started in profile {profile.name}")
    kept = filter_traces(traces, profile.trace_min_reward)
    if len(kept) < 2:
        raise ValueError(
            f"{env_id}: only {len(kept)} usable traces after filtering (min reward {profile.trace_min_reward})"
        )
    cut = max(1, len(kept) // 10)
    held_out, train = kept[:cut], kept[cut:]
    conversations, eval_conversations = [t.messages for t in train], [t.messages for t in held_out]
    if tracker is None:
        result = run_sft(base_model_dir, conversations, output, profile.sft, eval_conversations)
        return WarmStart(env_id, str(result.adapter_dir), None, result, len(kept))
    params = {"sft": asdict(profile.sft), "profile": profile.name, "env_id": env_id, "traces": len(kept)}
    with tracker.start_run(f"sft-{env_id}", params=params, tags=run_tags) as run:
        result = run_sft(
            base_model_dir,
            conversations,
            output,
            profile.sft,
            eval_conversations,
            on_step=lambda m: run.log_metrics(int(m["step"]), {f"sft/{k}": v for k, v in m.items() if k != "step"}),
        )
        summary = {
            "train_loss": result.train_loss,
            "eval_loss_before": result.eval_loss_before,
            "eval_loss_after": result.eval_loss_after,
            "examples": result.examples,
            "tokens_per_s": result.tokens_per_second,
            "wall_seconds": result.wall_seconds,
        }
        run.log_metrics(result.steps, {k: float(v) for k, v in summary.items() if v is not None})
        if result.loss_curve:
            steps = list(range(1, len(result.loss_curve) + 1))
            png = plots.line_with_band([plots.Series("train loss", steps, result.loss_curve)], "SFT", "step", "loss")
            run.log_file("sft_loss.png", png, "plots")
        run.log_artifact_dir(result.adapter_dir, "adapter")
        run_id = run.run_id
    return WarmStart(env_id, str(result.adapter_dir), run_id, result, len(kept))


# ---------------------------------------------------------------------------------------- specialist
@dataclass(frozen=True)
class CurvePoint:
    """One PPO iteration: the rollouts' reward with its bootstrap interval, and the learner's diagnostics."""

    iteration: int
    reward_mean: float
    reward_ci_low: float
    reward_ci_high: float
    episodes: int
    agreement_rate: float
    actor_trained: bool
    kl: float
    value_loss: float
    entropy: float
    policy_loss: float
    time_rollout_s: float
    time_train_s: float
    time_sync_s: float
    rollout_tokens_per_s: float
    update_tokens_per_s: float

    @classmethod
    def from_history(cls, m: Mapping[str, Any]) -> CurvePoint:
        names = [f.name for f in cls.__dataclass_fields__.values()]
        return cls(**{n: (m.get(n, math.nan) if n != "actor_trained" else bool(m.get(n, True))) for n in names})

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Specialist:
    """A trained PPO specialist and where it is registered."""

    env_id: str
    seat: str
    adapter_dir: str
    run_name: str
    served_name: str
    init_adapter_dir: str | None
    """The warm-start PPO started from (and the KL reference), None when it started from the base model."""
    curve: tuple[CurvePoint, ...]
    mlflow_run_id: str | None = None
    model_name: str = ""
    model_version: int | None = None
    resumed_from: int | None = None


def learning_curve_plots(curve: Sequence[CurvePoint], title: str) -> tuple[bytes, bytes]:
    """The reward per iteration with its interval, and the learner's diagnostics, as two PNGs."""
    xs = [p.iteration for p in curve]
    reward = plots.line_with_band(
        [
            plots.Series(
                "rollout reward",
                xs,
                [p.reward_mean for p in curve],
                [p.reward_ci_low for p in curve],
                [p.reward_ci_high for p in curve],
            )
        ],
        f"{title}: reward per PPO iteration (95% CI)",
        "iteration",
        "mean reward",
        (0.0, 1.0),
    )
    diagnostics = plots.multi_line(
        {
            "KL to the warm-start": plots.Series("kl", xs, [p.kl for p in curve]),
            "value loss": plots.Series("value loss", xs, [p.value_loss for p in curve]),
            "entropy": plots.Series("entropy", xs, [p.entropy for p in curve]),
            "agreement rate": plots.Series("agreement", xs, [p.agreement_rate for p in curve]),
        },
        f"{title}: PPO diagnostics",
        "iteration",
    )
    return reward, diagnostics


def train_specialist(
    env_id: str,
    profile: Profile,
    base_model_dir: Path,
    critic_model_dir: Path,
    services: Services,
    output: Path,
    init_adapter: Path | None,
    tracker: Tracker | None = None,
    run_tags: Mapping[str, str] | None = None,
) -> Specialist:
    """PPO from the warm-start (or from scratch); with a tracker: an MLflow run with per-iteration metrics
    and learning-curve plots, the adapter registered as a `candidate` version."""
    from models.training.ppo import train_ppo  # loads torch: only when training runs

    config = profile.ppo_for(env_id)
    seat = specialist_seat(env_id, profile)

    def done(result: PPOResult, **registry: Any) -> Specialist:
        curve = tuple(CurvePoint.from_history(m) for m in result.history)
        return Specialist(
            env_id,
            seat,
            str(result.adapter_dir),
            config.run_name,
            result.served_name,
            str(init_adapter) if init_adapter else None,
            curve,
            resumed_from=result.resumed_from,
            **registry,
        )

    if tracker is None:
        return done(train_ppo(config, base_model_dir, services, output, critic_model_dir, init_adapter))
    with tracker.start_run(
        f"ppo-{env_id}", params={"ppo": asdict(config), "profile": profile.name}, tags=run_tags
    ) as run:
        result = train_ppo(
            config,
            base_model_dir,
            services,
            output,
            critic_model_dir,
            init_adapter,
            on_iteration=lambda m: run.log_metrics(
                int(m["iteration"]),
                {
                    f"ppo/{k}": float(v)
                    for k, v in m.items()
                    if isinstance(v, int | float) and k != "iteration" and math.isfinite(float(v))
                },
            ),
        )
        specialist = done(result)
        reward_png, diagnostics_png = learning_curve_plots(specialist.curve, env_id)
        run.log_file("learning_curve.png", reward_png, "plots")
        run.log_file("ppo_diagnostics.png", diagnostics_png, "plots")
        run.log_artifact_dir(result.adapter_dir, "adapter")
        run_id = run.run_id
    name = registered_name(env_id)
    version = tracker.register_adapter(run_id, "adapter", name)
    return done(result, mlflow_run_id=run_id, model_name=name, model_version=version)


# ---------------------------------------------------------------------------------------- evaluation
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
    in `seat` (None: the specialist's seat, the one PPO trains, so base, SFT and PPO compare like for like).
    The same arguments give the same episodes (models/evaluation/policy.py), so two models evaluated with
    them are paired."""
    if scenarios is None:
        scenarios = held_out_scenarios(env_id, profile.heldout_scenarios, seed, profile.scenario_source)

    def make_policy(policy_seed: int) -> Agent:
        return llm_policy(base_url, model, profile, seed=policy_seed, api_key=api_key)

    plan = EvaluationPlan(
        env_id,
        tuple(scenarios),
        seat=seat or specialist_seat(env_id, profile),
        counterparts=profile.eval_counterparts,
        seed=seed,
        concurrency=profile.eval_concurrency,
        # The agent bounds its own calls; a shorter turn timeout turned slow answers on a busy CPU engine into
        # invalid actions (measured: 47% of the SFT policy's turns at 32 episodes in flight and 60 s).
        turn_timeout=make_policy(0).config.turn_budget_s,
    )
    return evaluate_policy(plan, make_policy)


def behaviour_metrics(result: EvaluationResult) -> dict[str, float]:
    """Behaviour beyond reward, over the policy's episodes: mean turns, and for Craigslist (the SocialRL
    paper's anchoring measure, 3% of untrained buyers -> 78% trained) the share of buyer episodes whose
    first buyer offer is below the buyer's target, the share with any buyer offer, and the median first
    offer / target."""
    metrics = {"mean_rounds": result.summary.mean_rounds}
    if result.env_id != "craigslist-v0":
        return metrics
    buyer = [e for e, p in zip(result.episodes, result.policy_episodes, strict=True) if p.seat == BUYER]
    if not buyer:
        return metrics
    ratios = [
        price / e.scenario.buyer_target for e in buyer if (price := opening_offer(e.transcript, BUYER)) is not None
    ]
    return {
        **metrics,
        "below_target_opening_rate": sum(opens_below_target(e.scenario, e.transcript) for e in buyer) / len(buyer),
        "buyer_offer_rate": len(ratios) / len(buyer),
        "median_opening_over_target": statistics.median(ratios) if ratios else math.nan,
    }


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


@dataclass(frozen=True)
class PolicyEvaluation:
    """One policy's held-out evaluation."""

    label: str
    """base, sft or ppo."""
    model: str
    """The name the engine served it under."""
    summary: EvaluationSummary
    behaviour: Mapping[str, float]


@dataclass(frozen=True)
class SpecialistEvaluation:
    """Base, SFT warm-start and PPO specialist on the same held-out episodes of a domain."""

    env_id: str
    seat: str
    run_id: str
    scenario_source: str
    policies: Mapping[str, PolicyEvaluation]
    """By label, in POLICY_LABELS order (sft absent without a warm-start)."""
    paired: Mapping[str, Estimate]
    """"ppo_minus_sft", "sft_minus_base", "ppo_minus_base": mean per-episode reward difference on the same
    episodes, with a scenario-clustered bootstrap 95% interval."""
    specialist: Specialist
    transcripts_markdown: str = field(default="", repr=False)
    """Best, median and worst episode of each policy, for the asset's metadata."""
    transcripts_html: str = field(default="", repr=False)
    """The same as a standalone page (an MLflow artifact)."""

    def report(self) -> dict[str, Any]:
        """The numbers a report needs, JSON-safe (None where a value is undefined)."""

        def clean(value: Any) -> Any:
            return None if isinstance(value, float) and not math.isfinite(value) else value

        return {
            "env_id": self.env_id,
            "seat": self.seat,
            "scenario_source": self.scenario_source,
            "policies": {
                label: {
                    **{k: clean(v) for k, v in p.summary.as_dict().items()},
                    **{k: clean(v) for k, v in p.behaviour.items()},
                }
                for label, p in self.policies.items()
            },
            "paired": {name: estimate.as_dict() for name, estimate in self.paired.items()},
            "learning_curve": [point.as_dict() for point in self.specialist.curve],
            "model": f"{self.specialist.model_name} v{self.specialist.model_version}",
        }


def evaluation_plot(evaluation: SpecialistEvaluation) -> bytes:
    """Mean reward per policy with its interval, as bars."""
    labels = list(evaluation.policies)
    bars = {
        label: [
            (p.summary.mean_reward, p.summary.ci_low, p.summary.ci_high) if name == label else None for name in labels
        ]
        for label, p in evaluation.policies.items()
    }
    return plots.grouped_bars(labels, bars, f"{evaluation.env_id}: held-out reward (95% CI)", "mean reward", (0, 1))


def evaluate_specialist(
    env_id: str,
    profile: Profile,
    proxy_base_url: str,
    served: Mapping[str, str],
    specialist: Specialist,
    run_id: str,
    store_result: Callable[[EvaluationResult, str], None] | None = None,
    api_key: str | None = None,
) -> SpecialistEvaluation:
    """Evaluate each served model (label -> served name, e.g. {"base": "base", "sft": ..., "ppo": ...}) on the
    same held-out episodes in the specialist's seat; pair them; pick representative transcripts.
    `store_result(result, label)` is called for each evaluation (to write the tables); `api_key` is the
    proxy's token."""
    results: dict[str, EvaluationResult] = {}
    policies: dict[str, PolicyEvaluation] = {}
    labels = [name for name in POLICY_LABELS if name in served]
    for position, label in enumerate(labels, 1):
        started = time.perf_counter()
        result = evaluate_model(env_id, profile, proxy_base_url, served[label], seat=specialist.seat, api_key=api_key)
        summary = result.summary
        log.info(
            "eval %s %s (%d/%d)  %d episodes  reward %.3f [%.3f, %.3f]  agree %.2f  invalid %.2f  %.0fs",
            env_id,
            label,
            position,
            len(labels),
            summary.n,
            summary.mean_reward,
            summary.ci_low,
            summary.ci_high,
            summary.agreement_rate,
            summary.invalid_action_rate,
            time.perf_counter() - started,
        )
        if store_result is not None:
            store_result(result, label)
        results[label] = result
        policies[label] = PolicyEvaluation(label, served[label], result.summary, behaviour_metrics(result))
    pairs = {f"{a}_minus_{b}": paired(results[a], results[b]) for a, b in PAIRS if a in results and b in results}
    shown = [t for label in results for t in representative_transcripts(results[label], label)]
    return SpecialistEvaluation(
        env_id,
        specialist.seat,
        run_id,
        profile.scenario_source,
        policies,
        pairs,
        specialist,
        transcripts_markdown(shown) if shown else "",
        transcripts_html(shown) if shown else "",
    )


def document_specialist(
    tracker: Tracker, evaluation: SpecialistEvaluation, profile: Profile, warm: WarmStart, git: str = ""
) -> None:
    """The registry version's description and model card (what it trained on, its paired result vs the
    warm-start), and the evaluation metrics on its training run."""
    s = evaluation.specialist
    if s.model_version is None or not s.model_name:
        return
    ppo = evaluation.policies["ppo"].summary
    parent = "sft" if "sft" in evaluation.policies else "base"
    versus = evaluation.paired.get(f"ppo_minus_{parent}")
    config = profile.ppo_for(evaluation.env_id)
    card = ModelCard(
        name=s.model_name,
        base_model=profile.base_model,
        domain=evaluation.env_id,
        profile=profile.name,
        training=(
            f"PPO, {config.iterations} iterations x {config.episodes_per_iteration} episodes in seat {s.seat}, "
            f"from {'the SFT warm-start' if warm.adapter_dir else 'the base model'}"
        ),
        training_data=(
            f"{warm.traces_used} teacher traces (reward >= {profile.trace_min_reward}) for SFT; PPO rollouts on "
            f"{profile.scenario_source} training scenarios against {', '.join(config.counterparts)}"
        ),
        evaluation={k: v for k, v in ppo.as_dict().items() if isinstance(v, int | float) and math.isfinite(v)},
        evaluation_suite=(
            f"{profile.heldout_scenarios} held-out {profile.scenario_source} scenarios x "
            f"{', '.join(profile.eval_counterparts)}, seat {s.seat}"
        ),
        parent="SFT warm-start" if parent == "sft" else "base model",
        versus_parent=versus.as_dict() if versus is not None else None,
        seat=s.seat,
        git_commit=git,
        run_id=s.mlflow_run_id or "",
    )
    tracker.document_version(s.model_name, s.model_version, card)
    if s.mlflow_run_id:
        tracker.log_run_metrics(
            s.mlflow_run_id,
            {
                **{f"eval/{label}_mean_reward": p.summary.mean_reward for label, p in evaluation.policies.items()},
                **{f"eval/{name}": e.mean for name, e in evaluation.paired.items()},
            },
        )
