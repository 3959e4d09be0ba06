"""A specialist in the MLflow registry: what its held-out evaluation records on its version, the one rule that
decides whether it becomes `champion`, and which registered version stage 2 builds on.

Every evaluated version carries its plan (`socialrl.eval_plan`: `EvaluationPlan.identity` of the domain's
held-out plan, with the plan in words) and its per-episode rewards (an artifact of its run), next to
`eval.mean_reward`. The champion rule (`champion_comparison`, called by the blocking check `beats_champion`
and by `specialist_champion`) is the registry's (models/tracking/champion.py: the same plan, decided by the
paired difference, or refused) plus two cases of its own:

- **Bars before any champion.** The candidate must first beat, on its own plan's episodes, the policy it
  started from (the warm-start; the base model in a domain without one) and the best trivial rule
  (`best_baseline`, the rule with the highest mean reward on the plan): the paired difference candidate - that
  policy (`SpecialistEvaluation.paired`, scenario-clustered) must be above 0, the registry's own paired test.
  Without them the first candidate of a fresh registry would be promoted with nothing to beat, however it
  played (below a fixed rule, say). `promotion_bars` measures them;
  `Profile.champion_bars` requires them (every profile but smoke, whose random-weight model beats no rule).
- **Stage-2 specialists.** A specialist trained by `run_stage2` (`socialrl.trained_by = stage2`) never becomes
  champion. Its plan is the stage-2-sized one (the cpu profile: 12 episodes against `make run`'s 96), so a
  champion it held would refuse every later `make run` candidate as "another plan", and the leaderboard's
  champion row would be a stage-2 placeholder.

Stage 2 (`select_specialist`) takes, per domain, the version `make run` trained and evaluated on the profile's
held-out plan: the champion when it is one (on one plan, the version the paired rule kept), else the newest
such version (every later one lost to the champion or was refused, so the newest is the champion's best
challenger); failing that, the newest version `run_stage2` trained and evaluated on its own plan (or on
`make run`'s); else none, and `run_stage2` trains it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from models.evaluation.policy import EvaluationResult
from models.evaluation.stats import Estimate
from models.profiles import Profile
from models.socialrl.stage1.common import STAGE1, STAGE2, TRAINED_BY_TAG, registered_name
from models.socialrl.stage1.evaluation import heldout_plan_identity
from models.socialrl.stage1.report import SpecialistEvaluation
from models.tracking import (
    CHAMPION,
    PLAN_TAG,
    PLAN_TEXT_TAG,
    ChampionComparison,
    EpisodeRewards,
    Measurement,
    RegisteredVersion,
    Tracker,
)

METRIC = "mean_reward"
"""The promotion value: the specialist's mean held-out reward."""
FROM_STAGE1 = "stage1 registry"
"""`SpecialistSource.source` of a version `make run` trained."""
FROM_STAGE2 = "trained by stage 2"
"""`SpecialistSource.source` of a version `run_stage2` trained."""


def _key(pair_key: tuple[Any, ...]) -> str:
    return "|".join(str(part) for part in pair_key)


def heldout_measurement(evaluation: SpecialistEvaluation) -> Measurement | None:
    """Where the specialist's promotion value was measured: its plan and its per-episode rewards (None for an
    evaluation stored before plans were recorded)."""
    identity = evaluation.plan_identity
    if identity is None:
        return None
    records = evaluation.policies["ppo"].records
    episodes = EpisodeRewards(
        {_key(r.key): float(r.metrics["reward"]) for r in records}, {_key(r.key): str(r.cluster) for r in records}
    )
    return Measurement(identity.key, identity.text, episodes if records else None)


def result_measurement(env_id: str, profile: Profile, result: EvaluationResult) -> Measurement:
    """The same for a version evaluated afresh on the domain's held-out plan (`evaluate_model(env_id, profile)`,
    seed 0), e.g. by the `evaluate_model_version` op, which refreshes the promotion value."""
    identity = heldout_plan_identity(env_id, profile)
    views = result.policy_episodes
    episodes = EpisodeRewards(
        {_key(e.pair_key): float(e.reward) for e in views}, {_key(e.pair_key): str(e.scenario_index) for e in views}
    )
    return Measurement(identity.key, identity.text, episodes if views else None)


def record_heldout(tracker: Tracker, evaluation: SpecialistEvaluation) -> None:
    """The specialist's held-out mean reward on its version, with its plan and per-episode rewards."""
    s = evaluation.specialist
    value = evaluation.policies["ppo"].summary.mean_reward
    tracker.record_evaluation(s.model_name, s.model_version, {METRIC: value}, heldout_measurement(evaluation))


WARM_START = "warm-start"
"""`PromotionBar.role` of the policy the candidate started from (the warm-start, else the base model)."""
BEST_RULE = "best rule"
"""`PromotionBar.role` of the trivial baseline with the highest mean reward on the plan."""


@dataclass(frozen=True, kw_only=True)
class PromotionBar:
    """A policy the candidate must beat on its own plan's episodes before it is compared with any champion."""

    role: str
    """Why it is a bar: `WARM_START` or `BEST_RULE`."""
    policy: str | None
    """The policy's label in the evaluation ("sft", "base", a rule's name); None when the plan has none."""
    difference: Estimate | None
    """Candidate - that policy, paired on the episodes both played (`SpecialistEvaluation.paired`); None when
    the evaluation holds no such pair."""

    @property
    def beaten(self) -> bool:
        """The paired difference is above 0 (a missing or undefined difference is not)."""
        d = self.difference
        return d is not None and d.n > 0 and math.isfinite(d.mean) and d.mean > 0

    def text(self) -> str:
        """The bar in words, e.g. "warm-start sft: ppo - sft = +0.105 [0.001, 0.197] over 96 episodes"."""
        if self.policy is None or self.difference is None:
            return f"{self.role}: not on the plan"
        return (
            f"{self.role} {self.policy}: ppo - {self.policy} = {self.difference.text('+.3f')} "
            f"over {self.difference.n} episodes"
        )


def promotion_bars(evaluation: SpecialistEvaluation) -> tuple[PromotionBar, ...]:
    """The candidate against the policy it started from and against the best rule, paired on its plan."""
    start = "sft" if "sft" in evaluation.policies else "base"
    rule = evaluation.best_baseline
    return (
        PromotionBar(
            role=WARM_START,
            policy=start if start in evaluation.policies else None,
            difference=evaluation.paired.get(f"ppo_minus_{start}"),
        ),
        PromotionBar(role=BEST_RULE, policy=rule, difference=evaluation.paired.get("ppo_minus_best_baseline")),
    )


def _below_bars(evaluation: SpecialistEvaluation) -> str | None:
    """Why the candidate is refused before any champion (None: it beats every bar)."""
    missed = [bar for bar in promotion_bars(evaluation) if not bar.beaten]
    if not missed:
        return None
    s = evaluation.specialist
    return (
        f"v{s.model_version} does not beat " + "; ".join(bar.text() for bar in missed) + " (a candidate must beat "
        "its warm-start and the best rule on its own plan, paired, before it is compared with any champion)"
    )


def champion_comparison(tracker: Tracker, evaluation: SpecialistEvaluation, bars: bool = True) -> ChampionComparison:
    """The one champion rule for specialists (module docstring), without changing anything; `bars`: the
    promotion bars are required (`Profile.champion_bars`)."""
    s = evaluation.specialist
    value = evaluation.policies["ppo"].summary.mean_reward
    comparison = tracker.compare_with_champion(
        s.model_name, s.model_version, METRIC, value, measured=heldout_measurement(evaluation)
    )
    if s.trained_by == STAGE2:
        return dataclasses.replace(
            comparison,
            wins=False,
            basis="trained by stage 2",
            reason=f"v{s.model_version} was trained by run_stage2 at its smaller size: stage-2 specialists are "
            "never champion (the alias is make run's)",
        )
    below = _below_bars(evaluation) if bars else None
    if below is None:
        return comparison
    return dataclasses.replace(comparison, wins=False, basis="below a bar", reason=below)


def promote_specialist(tracker: Tracker, evaluation: SpecialistEvaluation, bars: bool = True) -> bool:
    """Move alias `champion` to the evaluated specialist when `champion_comparison` says it wins; True when it
    is the champion afterwards. `promote_if_better` applies the registry's rule itself, so only the cases of
    this module are decided here (comparing first would read the champion's evaluation twice)."""
    s = evaluation.specialist
    if s.trained_by == STAGE2 or (bars and _below_bars(evaluation) is not None):
        return False
    value = evaluation.policies["ppo"].summary.mean_reward
    return tracker.promote_if_better(
        s.model_name, s.model_version, METRIC, value, measured=heldout_measurement(evaluation)
    )


@dataclass(frozen=True)
class SpecialistSource:
    """The registered specialist stage 2 uses for a domain, and where it came from."""

    env_id: str
    model_name: str
    version: int
    source: str
    """`FROM_STAGE1` ("stage1 registry") or `FROM_STAGE2` ("trained by stage 2")."""
    plan: str
    """The plan its registry evaluation was measured on, in words."""
    aliases: tuple[str, ...] = ()

    def reference(self) -> str:
        return f"{self.model_name} v{self.version} ({', '.join(self.aliases) or 'no alias'}; {self.source})"

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model_name, "version": self.version, "source": self.source, "plan": self.plan}


def choose_version(
    versions: list[RegisteredVersion], stage1_plan: str, stage2_plan: str
) -> tuple[RegisteredVersion, str] | None:
    """The version stage 2 builds on and its source (module docstring), from a model's versions and the keys of
    the profile's held-out plan (`make run`'s) and of the stage-2-sized one."""

    def on(plan: str, trained_by: str) -> list[RegisteredVersion]:
        return [v for v in versions if v.tags.get(PLAN_TAG) == plan and v.tags.get(TRAINED_BY_TAG) == trained_by]

    stage1 = on(stage1_plan, STAGE1)
    if stage1:
        champion = [v for v in stage1 if CHAMPION in v.aliases]
        return (champion or [max(stage1, key=lambda v: v.version)])[0], FROM_STAGE1
    # run_stage2's own: on its plan, or on make run's when a later evaluation (`evaluate_model_version`) re-measured it.
    stage2 = on(stage2_plan, STAGE2) + on(stage1_plan, STAGE2)
    return (max(stage2, key=lambda v: v.version), FROM_STAGE2) if stage2 else None


def select_specialist(tracker: Tracker, env_id: str, profile: Profile) -> SpecialistSource | None:
    """The registered specialist stage 2 uses for the domain under `profile` (`make run`'s profile, not the
    stage-2-sized one), None when the registry has none on either plan."""
    name = registered_name(env_id)
    versions = [v for v in tracker.versions(name) if v.tags.get(PLAN_TAG)]
    if not versions:  # nothing evaluated: no plan to compute (a dataset plan reads its data)
        return None
    stage1_plan = heldout_plan_identity(env_id, profile).key
    stage2_plan = heldout_plan_identity(env_id, profile.for_stage2_specialists()).key
    chosen = choose_version(versions, stage1_plan, stage2_plan)
    if chosen is None:
        return None
    version, source = chosen
    return SpecialistSource(env_id, name, version.version, source, version.tags.get(PLAN_TEXT_TAG, ""), version.aliases)
