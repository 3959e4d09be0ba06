"""Stage 1's data: a domain's training and held-out scenarios, and the teacher's traces in the learning seat."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.socialrl.teacher import make_teacher
from agents.traces import Trace, collect_traces
from environments import Scenario
from models.evaluation.scenarios import held_out_scenarios, training_scenarios
from models.evaluation.stats import mean_estimate
from models.profiles import Profile
from models.socialrl.stage1.common import specialist_seat


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
def teacher_traces(
    env_id: str,
    profile: Profile,
    seed: int = 0,
    run_tag: str = "traces",
    traced_seats: Sequence[str] | None = None,
) -> list[Trace]:
    """The strategic code teacher on `profile.teacher_episodes` training scenarios against the profile's
    counterparts, in `traced_seats` (default: the learning seat, the one PPO trains and evaluation plays),
    traced as chat."""
    traced_seats = traced_seats or (specialist_seat(env_id, profile),)
    scenarios = training_scenarios(env_id, profile.teacher_episodes, seed, profile.scenario_source)
    return collect_traces(
        env_id,
        scenarios,
        make_teacher,
        profile.eval_counterparts,
        seed=seed,
        run_tag=run_tag,
        traced_seats=traced_seats,
    )


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
