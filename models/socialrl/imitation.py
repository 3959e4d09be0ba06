"""Has the warm-start learned its teacher? The warm-start and the teacher on the same held-out episodes.

A warm-start is done when it plays like its teacher, not when its loss is low: its replies end in a valid
command line, its openings sit where the teacher's do, and its reward is a large share of the teacher's on
the same episodes (paired, scenario-clustered). `imitation_report` compares the two evaluations of one plan
(models/evaluation/policy.py) with the per-episode metrics of models/socialrl/episode_metrics.py;
`ImitationReport.passed` is the asset check's rule (command rate at least `MIN_COMMAND_RATE` and reward
at least `MIN_REWARD_SHARE` of the teacher's on the same episodes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from models.evaluation.policy import EvaluationResult
from models.evaluation.stats import Estimate
from models.evaluation.transcripts import representative_transcripts, transcripts_markdown
from models.socialrl.episode_metrics import EpisodeRecord, episode_records, paired_metric, quantiles, summary

MIN_COMMAND_RATE = 0.9
"""The check's threshold: share of the warm-start's replies that end in a valid command line."""
MIN_REWARD_SHARE = 0.5
"""The check's second threshold: the warm-start's mean reward as a share of the teacher's on the same episodes."""


@dataclass(frozen=True)
class ImitationReport:
    """The warm-start and its teacher on the same held-out episodes of one domain."""

    env_id: str
    seat: str
    n: int
    """Episodes each played (the same ones)."""
    student: Mapping[str, Estimate]
    """The warm-start's metrics (episode_metrics.summary)."""
    teacher: Mapping[str, Estimate]
    """The teacher's metrics on the same episodes."""
    reward_minus_teacher: Estimate
    """Mean per-episode reward difference warm-start - teacher, scenario-clustered bootstrap."""
    opening_quantiles: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """"student" / "teacher" -> quantiles of the first offer over the target (Craigslist buyer)."""
    transcripts_markdown: str = field(default="", repr=False)
    """The warm-start's representative episodes (best, median, worst, most refused), as Dagster markdown."""

    @property
    def command_rate(self) -> float:
        return self.student["command_rate"].mean

    @property
    def reward_over_teacher(self) -> float:
        """The warm-start's mean reward as a share of the teacher's (NaN when the teacher scores 0)."""
        teacher = self.teacher["reward"].mean
        return self.student["reward"].mean / teacher if teacher > 0 else math.nan

    def passed(self, min_command_rate: float = MIN_COMMAND_RATE, min_reward_share: float = MIN_REWARD_SHARE) -> bool:
        """Format and outcome both: replies end in a valid command at `min_command_rate`, and the reward is at
        least `min_reward_share` of the teacher's on the same episodes (a teacher that scores 0 leaves nothing
        to compare with: not passed)."""
        share = self.reward_over_teacher
        return self.command_rate >= min_command_rate and math.isfinite(share) and share >= min_reward_share

    def as_json(self) -> dict[str, Any]:
        """The result file's `warmstart_imitation` block: the headline keys first (command rates, offer over target,
        reward against the teacher, the check and its thresholds), then every metric."""

        def mean(block: Mapping[str, Estimate], metric: str) -> float | None:
            value = block[metric].mean if metric in block else math.nan
            return value if math.isfinite(value) else None

        share = self.reward_over_teacher
        return {
            "command_rate": mean(self.student, "command_rate"),
            "teacher_command_rate": mean(self.teacher, "command_rate"),
            "offer_over_target_median": mean(self.student, "opening_over_target"),
            "teacher_offer_over_target_median": mean(self.teacher, "opening_over_target"),
            "reward_minus_teacher": self.reward_minus_teacher.as_dict(),
            "reward_over_teacher": share if math.isfinite(share) else None,
            "passed": self.passed(),
            "min_command_rate": MIN_COMMAND_RATE,
            "min_reward_share": MIN_REWARD_SHARE,
            "n": self.n,
            "seat": self.seat,
            "student": {k: v.as_dict() for k, v in self.student.items()},
            "teacher": {k: v.as_dict() for k, v in self.teacher.items()},
            "offer_over_target_quantiles": {k: dict(v) for k, v in self.opening_quantiles.items()},
        }

    def markdown(self) -> str:
        """The comparison as a table (Dagster metadata, the make-run report)."""

        def cell(e: Estimate | None) -> str:
            if e is None or not math.isfinite(e.mean):
                return "-"
            return e.text()

        rows = ["| metric | warm-start | teacher |", "|---|---|---|"]
        for metric in self.student:
            rows.append(f"| {metric} | {cell(self.student.get(metric))} | {cell(self.teacher.get(metric))} |")
        share = self.reward_over_teacher
        rows += [
            "",
            f"Paired reward difference warm-start - teacher: {cell(self.reward_minus_teacher)} "
            f"(n = {self.reward_minus_teacher.n}); reward share of the teacher: "
            f"{share:.2f}" + ("" if math.isfinite(share) else " (undefined)"),
            f"Check: command rate {self.command_rate:.3f} >= {MIN_COMMAND_RATE} and reward share {share:.2f} >= "
            f"{MIN_REWARD_SHARE}: {'passed' if self.passed() else 'FAILED'}",
        ]
        return "\n".join(rows)


def imitation_report(
    student: EvaluationResult,
    teacher: EvaluationResult,
    student_records: Sequence[EpisodeRecord] | None = None,
    teacher_records: Sequence[EpisodeRecord] | None = None,
) -> ImitationReport:
    """Compare the warm-start's and the teacher's evaluations of one plan (records recomputed when not given)."""
    if student.env_id != teacher.env_id or student.seat != teacher.seat:
        raise ValueError(f"not one plan: {student.env_id}/{student.seat} vs {teacher.env_id}/{teacher.seat}")
    mine = student_records if student_records is not None else episode_records(student)
    theirs = teacher_records if teacher_records is not None else episode_records(teacher)
    shown = representative_transcripts(student, "warm-start")
    return ImitationReport(
        env_id=student.env_id,
        seat=student.seat,
        n=len(mine),
        student=summary(mine),
        teacher=summary(theirs),
        reward_minus_teacher=paired_metric(mine, theirs, "reward"),
        opening_quantiles={
            "student": quantiles(mine, "opening_over_target"),
            "teacher": quantiles(theirs, "opening_over_target"),
        },
        transcripts_markdown=transcripts_markdown(shown) if shown else "",
    )
