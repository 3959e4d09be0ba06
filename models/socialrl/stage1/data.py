"""Stage 1's data: a domain's training and held-out scenarios, and the teacher's traces in the learning seat,
with what makes a set of traces usable for a warm-start (`trace_usability`, the `traces_are_usable` check)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.socialrl.teacher import make_teacher
from agents.traces import Trace, collect_traces, filter_traces
from environments import Scenario
from models.evaluation.scenarios import held_out_scenarios, training_scenarios
from models.evaluation.stats import mean_estimate
from models.profiles import Profile
from models.socialrl.imitation import MIN_COMMAND_RATE
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


MIN_SFT_TRACES = 2
"""The fewest traces a warm-start trains on: one held out for the loss, at least one to train on."""
MAX_REFUSED_SHARE = round(1.0 - MIN_COMMAND_RATE, 9)
"""Most of the teacher's replies the environment may refuse: a warm-start must end `MIN_COMMAND_RATE` of its
replies in a valid command (the imitation check), which a teacher refused more often does not show it."""
REFUSAL_NOTICE = "Invalid action:"
"""How the environment's notice of a refused reply opens (environments/core/base.py `_invalid_note`): the user
turn after a refused reply starts with it."""


@dataclass(frozen=True, kw_only=True)
class TraceUsability:
    """Whether a teacher's traces can teach a warm-start its seat: every trace has a reply, the warm-start's
    filter keeps enough of them, the environment accepted the teacher's replies (the format the student learns)
    and the kept traces earn a reward (something worth imitating)."""

    traces: int
    """Traces of the run."""
    silent: int
    """Traces without an assistant turn."""
    kept: int
    """Traces the warm-start's filter keeps (`agents.traces.filter_traces`: reward at least `min_reward`, no
    leak, an assistant turn)."""
    min_reward: float
    """The filter's reward floor (`Profile.trace_min_reward`)."""
    replies: int
    """The teacher's replies, over all traces."""
    refused: int
    """Replies the environment refused (the next user turn opens with `REFUSAL_NOTICE`)."""
    kept_mean_reward: float
    """Mean reward of the kept traces (NaN when none is kept)."""

    @property
    def refused_share(self) -> float:
        """Refused replies / replies (NaN without replies)."""
        return self.refused / self.replies if self.replies else math.nan

    def problems(self) -> tuple[str, ...]:
        """What makes the traces unusable, in words (empty when they are usable)."""
        problems = []
        if self.traces == 0:
            problems.append("no traces")
        if self.silent:
            problems.append(f"{self.silent} of {self.traces} traces have no reply")
        if self.kept < MIN_SFT_TRACES:
            problems.append(
                f"the warm-start's filter (reward >= {self.min_reward}, no leak) keeps {self.kept} traces, "
                f"fewer than {MIN_SFT_TRACES}"
            )
        share = self.refused_share
        if not share <= MAX_REFUSED_SHARE:  # NaN (no reply) fails too
            problems.append(
                f"the environment refused {self.refused} of {self.replies} teacher replies "
                f"(more than {MAX_REFUSED_SHARE:.0%}): the traces do not show the action format"
            )
        if not self.kept_mean_reward > 0:
            problems.append(f"the kept traces earn a mean reward of {self.kept_mean_reward:.3f}: nothing to imitate")
        return tuple(problems)

    @property
    def passed(self) -> bool:
        return not self.problems()


def refused_replies(trace: Trace) -> tuple[int, int]:
    """(replies, refused replies) of one trace, read from its chat: a reply is refused when the user turn after
    it opens with the environment's invalid-action notice."""
    messages = trace.messages
    replies = refused = 0
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        replies += 1
        after = messages[i + 1] if i + 1 < len(messages) else None
        if after is not None and after["role"] == "user" and after["content"].lstrip().startswith(REFUSAL_NOTICE):
            refused += 1
    return replies, refused


def trace_usability(traces: Sequence[Trace], min_reward: float) -> TraceUsability:
    """The module's usability verdict of one run's traces, with the warm-start's filter at `min_reward`."""
    kept = filter_traces(traces, min_reward)
    counts = [refused_replies(t) for t in traces]
    return TraceUsability(
        traces=len(traces),
        silent=sum(1 for t in traces if not any(m["role"] == "assistant" for m in t.messages)),
        kept=len(kept),
        min_reward=min_reward,
        replies=sum(r for r, _ in counts),
        refused=sum(x for _, x in counts),
        kept_mean_reward=math.fsum(t.reward for t in kept) / len(kept) if kept else math.nan,
    )
