"""The registry's one promotion rule, as a plain function over what each version was evaluated on.

A version's evaluation is its stored value (`eval.<metric>`), the identity of the plan it was measured on
(tags `socialrl.eval_plan` and `socialrl.eval_plan_text`, from `EvaluationPlan.identity`) and, where kept,
its per-episode rewards (a JSON artifact of its training run, path in tag `socialrl.eval_episodes`).
`compare_versions(candidate, champion)` decides:

| case | decision | basis |
| --- | --- | --- |
| no champion | the candidate wins | "no champion" |
| the candidate is the champion | wins (its value is refreshed) | "already champion" |
| both plans recorded and different | refused | "different plans" |
| exactly one plan recorded | refused: nothing shows the episodes are the same | "plan unknown" |
| the champion has no stored value | the candidate wins (nothing to compare with) | "champion without value" |
| same plan, both episode sets kept | paired difference candidate - champion on the episodes both played decides (> 0 wins; its interval is reported, not required to exclude 0) | "paired" |
| same plan, an episode set missing | point means on that plan decide, stated | "means, same plan" |
| neither plan recorded | point means (callers that record no plan: the YOAO seed model, the cascade and MOPD student) | "means, plans not recorded" |

Point means of different plans never decide: those are different episodes (scenarios, counterparts, seats),
and a 12-episode mean beating a 96-episode one says nothing about which policy is better.
"""

from __future__ import annotations

import contextlib
import json
import math
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.evaluation.stats import Estimate, paired_difference
from models.tracking.runs import log_run_file

if TYPE_CHECKING:  # pragma: no cover
    from mlflow.tracking import MlflowClient

EVAL_TAG_PREFIX = "eval."
"""Model-version tags holding evaluation values: `eval.<metric>` -> the value as text."""
PLAN_TAG = "socialrl.eval_plan"
"""Model-version tag: the key of the plan its promotion value was measured on (`PlanIdentity.key`)."""
PLAN_TEXT_TAG = "socialrl.eval_plan_text"
"""Model-version tag: that plan in words (`PlanIdentity.text`)."""
EPISODES_TAG = "socialrl.eval_episodes"
"""Model-version tag: the run-relative artifact path of the per-episode rewards behind the value."""
EPISODES_ARTIFACT = "evaluation/heldout_episodes.json"
"""Where `Tracker.record_evaluation` puts those rewards in the version's training run."""


@dataclass(frozen=True)
class EpisodeRewards:
    """One policy's per-episode rewards on a plan, by episode pair key, with each episode's scenario cluster."""

    rewards: Mapping[str, float]
    clusters: Mapping[str, str]

    def to_json(self, plan: str = "") -> str:
        episodes = [{"key": k, "cluster": self.clusters.get(k, k), "reward": v} for k, v in self.rewards.items()]
        return json.dumps({"plan": plan, "episodes": episodes})

    @classmethod
    def from_json(cls, text: str) -> EpisodeRewards:
        episodes = json.loads(text)["episodes"]
        return cls(
            {str(e["key"]): float(e["reward"]) for e in episodes},
            {str(e["key"]): str(e["cluster"]) for e in episodes},
        )


@dataclass(frozen=True)
class Measurement:
    """Where a promotion value was measured: the plan (`PlanIdentity` of models/evaluation/policy.py) and,
    when kept, the per-episode rewards behind it."""

    plan: str
    """The plan's key."""
    plan_text: str = ""
    """The plan in words."""
    episodes: EpisodeRewards | None = None


@dataclass(frozen=True)
class EvaluatedVersion:
    """What the rule knows of one version."""

    version: int
    value: float | None
    """Its stored promotion value (None: never evaluated)."""
    plan: str = ""
    """The plan key ("" when not recorded)."""
    plan_text: str = ""
    episodes: EpisodeRewards | None = None
    """Its per-episode rewards on that plan, when kept."""

    @classmethod
    def of(cls, version: int, value: float | None, measured: Measurement | None) -> EvaluatedVersion:
        if measured is None:
            return cls(version, value)
        return cls(version, value, measured.plan, measured.plan_text, measured.episodes)

    def describe_plan(self) -> str:
        return f"{self.plan_text} [{self.plan}]" if self.plan_text else self.plan or "no recorded plan"


@dataclass(frozen=True, kw_only=True)
class ChampionComparison:
    """A candidate version against the current champion under the registry's one promotion rule."""

    wins: bool
    """The candidate is (or becomes) the champion."""
    candidate_value: float
    champion_version: int | None
    champion_value: float | None
    basis: str = ""
    """Which case of the rule decided (the module docstring's table)."""
    reason: str = ""
    """The decision in words, e.g. "different evaluation plans: ... vs ..."."""
    paired: Estimate | None = None
    """Candidate - champion on the episodes both played, when the rule paired them."""


def compare_versions(
    candidate: EvaluatedVersion, champion: EvaluatedVersion | None, higher_is_better: bool = True
) -> ChampionComparison:
    """The promotion rule (module docstring). Never changes anything."""
    value = float(candidate.value) if candidate.value is not None else math.nan

    def decide(wins: bool, basis: str, reason: str, paired: Estimate | None = None) -> ChampionComparison:
        version = champion.version if champion is not None else None
        best = champion.value if champion is not None else None
        return ChampionComparison(
            wins=wins,
            candidate_value=value,
            champion_version=version,
            champion_value=best,
            basis=basis,
            reason=reason,
            paired=paired,
        )

    if champion is None:
        return decide(True, "no champion", f"v{candidate.version}: no champion yet")
    if champion.version == candidate.version:
        return decide(True, "already champion", f"v{candidate.version} is the champion")
    if candidate.plan and champion.plan and candidate.plan != champion.plan:
        return decide(
            False,
            "different plans",
            f"different evaluation plans: {candidate.describe_plan()} vs {champion.describe_plan()} "
            f"(champion v{champion.version}); point means of different episodes are not compared",
        )
    if bool(candidate.plan) != bool(champion.plan):
        unknown = f"v{candidate.version}" if not candidate.plan else f"champion v{champion.version}"
        return decide(
            False,
            "plan unknown",
            f"{unknown} has no recorded evaluation plan, so the two cannot be shown to share episodes "
            f"(v{candidate.version}: {candidate.describe_plan()}; v{champion.version}: {champion.describe_plan()})",
        )
    if champion.value is None:
        return decide(True, "champion without value", f"champion v{champion.version} has no stored value")
    sign = 1.0 if higher_is_better else -1.0
    if candidate.plan and candidate.episodes is not None and champion.episodes is not None:
        paired = _paired(candidate.episodes, champion.episodes)
        if paired is not None:
            return decide(
                sign * paired.mean > 0,
                "paired",
                f"same plan {candidate.describe_plan()}: candidate - champion v{champion.version} = "
                f"{paired.text('+.4f')} over {paired.n} paired episodes",
                paired,
            )
    basis = "means, same plan" if candidate.plan else "means, plans not recorded"
    where = f"on the same plan {candidate.describe_plan()}" if candidate.plan else "(no plan recorded on either)"
    return decide(
        sign * (value - champion.value) > 0,
        basis,
        f"point means {where}: {value:.4f} vs champion v{champion.version} {champion.value:.4f}"
        + (" (episode rewards of one side not kept)" if candidate.plan else ""),
    )


def _paired(candidate: EpisodeRewards, champion: EpisodeRewards) -> Estimate | None:
    """Candidate - champion over the episodes both kept (None when they share none)."""
    common = set(candidate.rewards) & set(champion.rewards)
    if not common:
        return None
    return paired_difference(
        {k: candidate.rewards[k] for k in common},
        {k: champion.rewards[k] for k in common},
        {k: candidate.clusters.get(k, k) for k in common},
    )


def evaluation_tags(client: MlflowClient, run_id: str | None, measured: Measurement) -> dict[str, str]:
    """The version tags recording where a promotion value was measured; the episodes go to `run_id`'s artifacts
    (none without a run) and their path into the tags."""
    tags = {PLAN_TAG: measured.plan, PLAN_TEXT_TAG: measured.plan_text} if measured.plan else {}
    if run_id and measured.episodes is not None:
        folder, _, file = EPISODES_ARTIFACT.rpartition("/")
        log_run_file(client, run_id, file, measured.episodes.to_json(measured.plan), folder)
        tags[EPISODES_TAG] = EPISODES_ARTIFACT
    return tags


def read_evaluated(client: MlflowClient, mv: Any, metric: str, pair_with: EvaluatedVersion | None) -> EvaluatedVersion:
    """What the rule knows of a registered version (an MLflow ModelVersion or a RegisteredVersion): its stored
    `metric`, its plan and its per-episode rewards, read only when they can be paired with `pair_with`'s (the
    same plan, its episodes kept); None when not kept or unreadable."""
    tags = dict(mv.tags or {})
    stored = tags.get(f"{EVAL_TAG_PREFIX}{metric}")
    pairable = pair_with is not None and pair_with.episodes is not None and tags.get(PLAN_TAG) == pair_with.plan
    rewards = None
    if pairable and tags.get(EPISODES_TAG) and mv.run_id:
        with tempfile.TemporaryDirectory() as directory, contextlib.suppress(Exception):
            path = client.download_artifacts(mv.run_id, tags[EPISODES_TAG], directory)
            rewards = EpisodeRewards.from_json(Path(path).read_text())
    value = float(stored) if stored is not None else None
    return EvaluatedVersion(int(mv.version), value, tags.get(PLAN_TAG, ""), tags.get(PLAN_TEXT_TAG, ""), rewards)
