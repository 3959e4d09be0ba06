"""What every stage-2 number is made of: one policy's per-episode rewards on one domain's evaluation plan
(`PolicyScores`), the policy labels, and the registry names of the two unified policies."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from models.evaluation.policy import EvaluationResult
from models.evaluation.stats import Estimate, mean_estimate, paired_difference
from models.tracking import DOMAINS_TAG  # noqa: F401  (re-exported: the stage-2 modules import it from here)

BASE = "base"
CASCADE = "cascade"
MOPD = "mopd"
CASCADE_MODEL = "socialrl-cascade"
"""Registry name of the cascade policy."""
MOPD_MODEL = "socialrl-mopd"
"""Registry name of the MOPD student."""
REWARD_BOUNDS = (0.0, 1.0)


def specialist_policy(env_id: str) -> str:
    return f"specialist:{env_id}"


def sft_policy(env_id: str) -> str:
    return f"sft:{env_id}"


BASELINE_PREFIX = "baseline:"


def baseline_policy(name: str) -> str:
    """The label of a trivial code baseline (agents/socialrl/baselines.py), e.g. "baseline:accept_first"."""
    return f"{BASELINE_PREFIX}{name}"


def short(env_id: str) -> str:
    return env_id.removesuffix("-v0")


@dataclass(frozen=True)
class PolicyScores:
    """One policy's per-episode rewards on one domain's evaluation plan: the data behind every cell, bar and
    interval of stage 2. Two PolicyScores of one plan share their keys (the episodes' pair keys)."""

    policy: str
    """"base", "specialist:<env>", "sft:<env>", "cascade", "mopd", "baseline:<rule>" (or "<policy>@<stage>" for
    curves)."""
    env_id: str
    """The domain evaluated ("*" for several domains pooled)."""
    model: str
    """The served model or adapter name."""
    keys: tuple[str, ...]
    """Pair key of each episode (scenario index, scenario id, counterpart, seat, seed)."""
    clusters: tuple[str, ...]
    """Bootstrap cluster of each episode: its scenario's content id, so a plan that draws one scenario twice
    (a dataset partition smaller than the plan cycles) counts it once."""
    rewards: tuple[float, ...]
    """Normalised reward of the policy's seat in each episode."""

    def __post_init__(self) -> None:
        if not len(self.keys) == len(self.clusters) == len(self.rewards):
            raise ValueError(f"{self.policy}@{self.env_id}: keys, clusters and rewards differ in length")
        if len(set(self.keys)) != len(self.keys):
            raise ValueError(f"{self.policy}@{self.env_id}: repeated episode keys")

    @classmethod
    def from_result(cls, policy: str, model: str, result: EvaluationResult) -> PolicyScores:
        episodes = result.policy_episodes
        return cls(
            policy,
            result.env_id,
            model,
            tuple("|".join(str(part) for part in e.pair_key) for e in episodes),
            tuple(f"{result.env_id}|{e.scenario_id}" for e in episodes),
            tuple(float(e.reward) for e in episodes),
        )

    @property
    def mean(self) -> float:
        return sum(self.rewards) / len(self.rewards) if self.rewards else math.nan

    def estimate(self, confidence: float = 0.95) -> Estimate:
        """Mean reward with the scenario-clustered bootstrap interval, clipped to [0, 1]."""
        return mean_estimate(self.rewards, self.clusters, REWARD_BOUNDS, confidence)

    def minus(self, other: PolicyScores, confidence: float = 0.95) -> Estimate:
        """Paired difference self - other over the same episodes (scenario-clustered bootstrap)."""
        return paired_difference(
            dict(zip(self.keys, self.rewards, strict=True)),
            dict(zip(other.keys, other.rewards, strict=True)),
            dict(zip(self.keys, self.clusters, strict=True)),
            confidence,
        )

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyScores:
        return cls(
            data["policy"],
            data["env_id"],
            data["model"],
            tuple(data["keys"]),
            tuple(data["clusters"]),
            tuple(float(r) for r in data["rewards"]),
        )


def pooled(scores: Sequence[PolicyScores], policy: str | None = None) -> PolicyScores:
    """Several domains' scores as one (keys prefixed by domain): its mean is the mean over the domains when
    every domain has the same number of episodes (one plan size), and its bootstrap resamples scenarios."""
    if not scores:
        raise ValueError("nothing to pool")
    return PolicyScores(
        policy or scores[0].policy,
        "*",
        ",".join(sorted({s.model for s in scores})),
        tuple(f"{s.env_id}|{k}" for s in scores for k in s.keys),
        tuple(c for s in scores for c in s.clusters),
        tuple(r for s in scores for r in s.rewards),
    )
