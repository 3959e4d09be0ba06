"""A specialist's held-out evaluation: every policy of the domain's plan, paired, and rendered once.

`evaluate_specialist` plays the base model (on the first `base_heldout_scenarios` scenarios of the plan) and
the PPO specialist, and takes the warm-start, the teacher and the rules (the trivial baselines, and the best fixed
rule in a price domain's buyer seat) from the warm-start's imitation measurement, which played the same plan. `SpecialistEvaluation` renders itself: `report()` is the
JSON every consumer reads (Dagster metadata, `make run`'s report file, benchmarks/results/make_run_cpu.json),
`markdown()` the table every console and page shows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from models import plots
from models.display import fixed, interval_text
from models.evaluation.policy import PlanIdentity
from models.evaluation.stats import Estimate
from models.evaluation.transcripts import (
    Transcript,
    representative_transcripts,
    transcripts_html,
    transcripts_json,
    transcripts_markdown,
)
from models.profiles import Profile
from models.socialrl.episode_metrics import METRICS, paired_metric, paired_metrics
from models.socialrl.stage1.evaluation import (
    RULES,
    PolicyResult,
    StoreResult,
    base_plan,
    best_baseline,
    evaluate_served,
    evaluation_plan,
)
from models.socialrl.stage1.specialist import Specialist
from models.socialrl.stage1.warmstart import WarmStart, WarmStartImitation
from models.tracking import SUMMARY_PREFIX, ModelCard, Tracker

POLICY_ORDER = ("base", "sft", "ppo", "teacher", *RULES)
"""The policies of a domain's report, in display order."""
PAIRS = (("ppo", "sft"), ("sft", "base"), ("ppo", "base"))
"""Paired differences of reward and of every behaviour metric."""
TRANSCRIPT_POLICIES = ("sft", "ppo", "teacher")
"""The policies whose representative episodes `make run` writes (`SpecialistEvaluation.representative_episodes`);
the base's, which follows no format, stay on the asset page (`transcripts_markdown`)."""


def _fmt(value: float | None, digits: int = 3) -> str:
    return fixed(value, f".{digits}f")


@dataclass(frozen=True, kw_only=True)
class SpecialistEvaluation:
    """Every policy of a domain on its held-out plan: base, warm-start, specialist, teacher, baselines."""

    env_id: str
    seat: str
    run_id: str
    scenario_source: str
    policies: Mapping[str, PolicyResult]
    """By label, in POLICY_ORDER (sft absent without a warm-start)."""
    paired: Mapping[str, Estimate]
    """Reward differences on the same episodes, scenario-clustered bootstrap 95% intervals: `ppo_minus_sft`,
    `sft_minus_base` and `ppo_minus_base` (on the base's part of the plan), `ppo_minus_best_baseline`,
    `ppo_minus_teacher`."""
    behaviour_paired: Mapping[str, Mapping[str, Estimate]]
    """metric -> pair name (PAIRS) -> the paired difference of that metric (episodes where both define it)."""
    best_baseline: str | None
    """The trivial baseline with the highest mean reward on the plan."""
    imitation: Mapping[str, Any]
    """The warm-start's imitation report (ImitationReport.as_json), empty without a warm-start."""
    specialist: Specialist
    plan: str = ""
    """The plan in words."""
    transcripts_markdown: str = field(default="", repr=False)
    """Best, median, worst and most-refused episode of the base and the specialist, for the asset's metadata."""
    transcripts_html: str = field(default="", repr=False)
    """The same as a standalone page (an MLflow artifact)."""
    plan_identity: PlanIdentity | None = None
    """The plan's identity (`EvaluationPlan.identity`): recorded on the registry version, it is what the champion
    rule compares (models/socialrl/stage1/registry.py); None in evaluations stored before it existed."""
    transcripts: tuple[Transcript, ...] = field(default=(), repr=False)
    """The representative episodes (best, median, worst, most refused) of base, sft, ppo and teacher, in
    POLICY_ORDER (`Transcript.policy` is the label; the warm-start's and the teacher's from the imitation
    measurement); `representative_episodes()` renders them; empty in evaluations stored before they were kept."""

    def report(self) -> dict[str, Any]:
        """The numbers every consumer reads, JSON-safe (None where a value is undefined)."""

        def clean(value: Any) -> Any:
            return None if isinstance(value, float) and not math.isfinite(value) else value

        return {
            "env_id": self.env_id,
            "seat": self.seat,
            "scenario_source": self.scenario_source,
            "plan": self.plan,
            "policies": {
                label: {
                    "kind": p.kind,
                    "model": p.model,
                    **{k: clean(v) for k, v in p.summary.as_dict().items()},
                    "metrics": {name: e.as_dict() for name, e in p.metrics.items()},
                    "eval_seconds": clean(round(p.seconds, 1)),
                }
                for label, p in self.policies.items()
            },
            "paired": {name: estimate.as_dict() for name, estimate in self.paired.items()},
            "behaviour_paired": {
                metric: {pair: e.as_dict() for pair, e in pairs.items()}
                for metric, pairs in self.behaviour_paired.items()
            },
            "baselines": {label: p.summary.reward.as_dict() for label, p in self.policies.items() if label in RULES},
            "best_baseline": self.best_baseline,
            "warmstart_imitation": dict(self.imitation),
            "learning_curve": [point.as_dict() for point in self.specialist.curve],
            "model": f"{self.specialist.model_name} v{self.specialist.model_version}",
        }

    def markdown(self) -> str:
        """Policies, paired differences (reward and behaviour), imitation and the learning curve, as markdown
        tables (`report_markdown` of `report()`)."""
        return report_markdown(self.report())

    def representative_episodes(self) -> dict[str, list[dict[str, Any]]]:
        """What the warm-start, the specialist and the teacher said (`TRANSCRIPT_POLICIES`): policy -> its best,
        median, worst (and most refused) episode as JSON (models/evaluation/transcripts.py `transcripts_json`:
        labels, ids, counterpart, reward, agreement, the page's markdown); the asset's `representative_episodes`
        metadata."""
        return transcripts_json(t for t in self.transcripts if t.policy in TRANSCRIPT_POLICIES)


def _cell(e: Mapping[str, Any] | None) -> str:
    """An estimate of a report (Estimate.as_dict) as 'mean [low, high]'."""
    if not e or e.get("mean") is None:
        return "-"
    return interval_text(e["mean"], e.get("ci_low"), e.get("ci_high"))


def report_markdown(report: Mapping[str, Any]) -> str:
    """A domain's `SpecialistEvaluation.report()` (as stored in Dagster metadata, the make-run report file and
    benchmarks/results/make_run_cpu.json) as markdown: every policy with every behaviour metric, the paired
    reward differences, the paired difference of every behaviour metric, the warm-start's imitation of its
    teacher, and the PPO learning curve. The console, the asset page and docs/stage1.md render through here."""
    policies = report["policies"]
    metrics = [m for m in METRICS if m != "reward" and any(m in p["metrics"] for p in policies.values())]
    order = [p for p in POLICY_ORDER if p in policies] + [p for p in policies if p not in POLICY_ORDER]
    lines = [
        f"{report['env_id']} (seat {report['seat']}; {report['plan']}): {report['model']}",
        "",
        "| policy | n | mean reward [95% CI] | " + " | ".join(metrics) + " |",
        "|---|---|---|" + "---|" * len(metrics),
    ]
    for label in order:
        p = policies[label]
        cells = [_fmt((p["metrics"].get(m) or {}).get("mean"), 2) for m in metrics]
        lines.append(f"| {label} | {p['n']} | {_cell(p['metrics'].get('reward'))} | " + " | ".join(cells) + " |")
    lines += ["", "| paired reward difference (same episodes) | mean [95% CI] | n |", "|---|---|---|"]
    for name, e in report["paired"].items():
        best = f" (best baseline: {report['best_baseline']})" if name == "ppo_minus_best_baseline" else ""
        lines.append(f"| {name}{best} | {_cell(e)} | {e['n']} |")
    behaviour = report.get("behaviour_paired") or {}
    if behaviour:
        pairs = [f"{a}_minus_{b}" for a, b in PAIRS]
        lines += ["", "| behaviour, paired | " + " | ".join(pairs) + " |", "|---|" + "---|" * len(pairs)]
        for metric, by_pair in behaviour.items():
            cells = [f"{_cell(by_pair.get(p))} (n={by_pair[p]['n']})" if p in by_pair else "-" for p in pairs]
            lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    imitation = report.get("warmstart_imitation") or {}
    if imitation:
        verdict = "passed" if imitation.get("passed") else "failed"
        # Runs before the reward-share rule recorded the command-rate threshold only.
        share_rule = (
            f" and reward / teacher >= {imitation['min_reward_share']}" if "min_reward_share" in imitation else ""
        )
        lines += [
            "",
            f"Warm-start imitation on the same {imitation.get('n')} episodes: command rate "
            f"{_fmt(imitation.get('command_rate'))} (teacher {_fmt(imitation.get('teacher_command_rate'))}; "
            f"check >= {imitation.get('min_command_rate')}{share_rule}: {verdict}), median opening / target "
            f"{_fmt(imitation.get('offer_over_target_median'))} (teacher "
            f"{_fmt(imitation.get('teacher_offer_over_target_median'))}), reward - teacher "
            f"{_cell(imitation.get('reward_minus_teacher'))}, reward / teacher "
            f"{_fmt(imitation.get('reward_over_teacher'))}.",
        ]
    curve = report.get("learning_curve") or []
    if curve:
        lines += [
            "",
            "| PPO iteration | reward [95% CI] | agree | invalid/ep | KL | entropy | rollout s | train s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for it in curve:
            reward = {"mean": it["reward_mean"], "ci_low": it["reward_ci_low"], "ci_high": it["reward_ci_high"]}
            lines.append(
                f"| {it['iteration'] + 1} | {_cell(reward)} | {_fmt(it['agreement_rate'], 2)} | "
                f"{_fmt(it['invalid_actions_per_episode'], 2)} | {_fmt(it['kl'], 4)} | {_fmt(it.get('entropy'), 2)} | "
                f"{_fmt(it['time_rollout_s'], 0)} | {_fmt(it['time_train_s'], 0)} |"
            )
    return "\n".join(lines)


def evaluation_plot(evaluation: SpecialistEvaluation) -> bytes:
    """Mean reward per policy with its interval (the axis fitted to the data), beside the paired reward
    differences with theirs (models/plots.py `policy_comparison`)."""
    return plots.policy_comparison(
        {
            label: (p.summary.mean_reward, p.summary.ci_low, p.summary.ci_high)
            for label, p in evaluation.policies.items()
        },
        {name: (e.mean, e.ci_low, e.ci_high) for name, e in evaluation.paired.items()},
        f"{evaluation.env_id}: held-out reward (95% CI)",
        "mean reward",
        "paired reward difference (same episodes)",
    )


def evaluate_specialist(
    env_id: str,
    profile: Profile,
    proxy_base_url: str,
    served: Mapping[str, str],
    specialist: Specialist,
    run_id: str,
    imitation: WarmStartImitation | None = None,
    store_result: StoreResult | None = None,
    api_key: str | None = None,
) -> SpecialistEvaluation:
    """The base (`served["base"]`, on its part of the plan) and the specialist (`served["ppo"]`) on the domain's
    held-out plan; the warm-start, teacher and baselines from `imitation` (the same plan), else evaluated here
    (the teacher and baselines always; the warm-start when `served` names one). `store_result(result, label)`
    writes each new evaluation to the tables; `api_key` is the proxy's token."""
    from models.socialrl.stage1.evaluation import evaluate_code_policies

    plan = evaluation_plan(env_id, profile)
    results = {}
    policies: dict[str, PolicyResult] = {}
    base, results["base"] = evaluate_served(
        "base", base_plan(plan, profile), profile, proxy_base_url, served["base"], api_key, store_result
    )
    policies["base"] = base
    if imitation is not None:
        policies["sft"] = imitation.sft
    elif "sft" in served:
        policies["sft"], results["sft"] = evaluate_served(
            "sft", plan, profile, proxy_base_url, served["sft"], api_key, store_result
        )
    policies["ppo"], results["ppo"] = evaluate_served(
        "ppo", plan, profile, proxy_base_url, served["ppo"], api_key, store_result
    )
    if imitation is not None:
        policies["teacher"] = imitation.teacher
        policies.update(imitation.baselines)
        warm_and_teacher = imitation.transcripts
    else:
        code = evaluate_code_policies(plan, store_result=store_result)
        policies.update({k: p for k, (p, _) in code.items()})
        warm_and_teacher = tuple(representative_transcripts(code["teacher"][1], "teacher"))
    policies = {label: policies[label] for label in POLICY_ORDER if label in policies}
    paired, behaviour = compare(policies)
    shown = [t for label, result in results.items() for t in representative_transcripts(result, label)]
    order = {label: i for i, label in enumerate(POLICY_ORDER)}
    every = sorted([*shown, *warm_and_teacher], key=lambda t: order.get(t.policy, len(order)))
    return SpecialistEvaluation(
        env_id=env_id,
        seat=specialist.seat,
        run_id=run_id,
        scenario_source=profile.scenario_source,
        policies=policies,
        paired=paired,
        behaviour_paired=behaviour,
        best_baseline=best_baseline(policies),
        imitation=imitation.report.as_json() if imitation is not None else {},
        specialist=specialist,
        plan=f"{len(plan.scenario_list())} held-out {profile.scenario_source} scenarios x {', '.join(plan.counterparts)}"
        f" (base: the first {len(base_plan(plan, profile).scenario_list())}), seat {plan.seat}, seed {plan.seed}",
        transcripts_markdown=transcripts_markdown(shown) if shown else "",
        transcripts_html=transcripts_html(shown) if shown else "",
        plan_identity=plan.identity(profile.scenario_source),
        transcripts=tuple(every),
    )


def compare(policies: Mapping[str, PolicyResult]) -> tuple[dict[str, Estimate], dict[str, dict[str, Estimate]]]:
    """Paired reward differences (PAIRS, then the specialist against the best baseline and the teacher) and
    paired differences of every behaviour metric for PAIRS. A pair with the base compares the base's part of
    the plan (`common`)."""
    paired: dict[str, Estimate] = {}
    behaviour: dict[str, dict[str, Estimate]] = {}
    for a, b in PAIRS:
        if a not in policies or b not in policies:
            continue
        name, common = f"{a}_minus_{b}", "base" in (a, b)
        paired[name] = paired_metric(policies[a].records, policies[b].records, "reward", common=common)
        for metric, estimate in paired_metrics(policies[a].records, policies[b].records, common=common).items():
            if metric != "reward":
                behaviour.setdefault(metric, {})[name] = estimate
    best = best_baseline(policies)
    if "ppo" in policies:
        for name, other in (("ppo_minus_best_baseline", best), ("ppo_minus_teacher", "teacher")):
            if other in policies:
                paired[name] = paired_metric(policies["ppo"].records, policies[other].records, "reward")
    return paired, behaviour


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
        evaluation_suite=evaluation.plan,
        parent="SFT warm-start" if parent == "sft" else "base model",
        versus_parent=versus.as_dict() if versus is not None else None,
        seat=s.seat,
        git_commit=git,
        run_id=s.mlflow_run_id or "",
    )
    tracker.document_version(s.model_name, s.model_version, card)
    if s.mlflow_run_id:
        tracker.log_run_metrics(  # after the PPO curves on the run page (SUMMARY_PREFIX)
            s.mlflow_run_id,
            {
                **{f"{label}_mean_reward": p.summary.mean_reward for label, p in evaluation.policies.items()},
                **{name: e.mean for name, e in evaluation.paired.items() if math.isfinite(e.mean)},
            },
            prefix=SUMMARY_PREFIX,
        )
