"""The Theory-of-Mind study: does reasoning INFER -> ACT -> ANTICIPATE help, and which skill matters?

Per domain, five arms play the same held-out scenarios, in the same seat, against the same counterparts,
with the same seeds (one `EvaluationPlan`), so every comparison is paired:

| arm | model | prompt |
| --- | --- | --- |
| `base` | the base model | the LLM agent's plain prompt |
| `base_tom_prompt` | the base model | the ToM scaffold (INFER / ACT / ANTICIPATE; only ACT reaches the environment) |
| `sft_act` | LoRA SFT on the code teacher's traces, ACT text only (today's warm-start) | plain |
| `sft_act_tom_prompt` | the same `sft_act` student | the ToM scaffold |
| `sft_tom` | LoRA SFT on the same traces with the teacher's INFER and ANTICIPATE kept (ToM distillation) | scaffold |

`sft_act_tom_prompt` tests the scaffold prompt where the score can fall: at cpu scale the base scores 0, so
`base_tom_prompt - base` cannot show a prompt that hurts, while the warm-start scores above 0.

Both students train on the same episodes with the same settings (`Profile.tom.sft`, resolved so that each
makes `Profile.tom.passes` passes over its own data); only the trace format differs (models/socialrl/
teachers.py `sft_traces`). Equal passes, not equal steps: the scaffolded traces are longer, so at equal
steps `sft_act` would see its data more often (24 steps were ~2.5 passes against ~1.5); at equal passes
`sft_tom` takes more steps and trains on more tokens, both recorded per student (`Student`). Every arm gets
the same reply budget (`Profile.tom.max_new_tokens`).

Skills are scored automatically from the environment's ground truth (models/socialrl/tom_skills.py:
INFER, ANTICIPATE, the per-turn probe).

Skill-outcome correlation: per episode of the scaffolded arms (`base_tom_prompt`, `sft_act_tom_prompt`, `sft_tom`,
pooled), the mean skill score over its scored turns against the episode's reward, Pearson r with a bootstrap
interval resampling scenarios (`models.evaluation.stats.correlation_estimate`), computed only from at least
`MIN_CORRELATION_EPISODES` (30) scored episodes: below that r is not computed (null, with its n) and the
report says "n = X < 30: not reported as a finding".

Copying: per scaffolded arm and skill, the share of written INFER / ANTICIPATE parts that copy the
scaffold's instruction text (`tom_skills.copies_instructions`), so that parts that carry no content are
counted, not scored as unreadable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agents.llm_agent import LLMAgent, LLMAgentConfig
from agents.traces import Trace, filter_traces
from environments.core.runtime import Agent
from models.evaluation.policy import EvaluationPlan, EvaluationResult, evaluate_policy_async, paired_difference
from models.evaluation.scenarios import held_out_scenarios
from models.evaluation.stats import Estimate, correlation_estimate, mean_estimate
from models.profiles import Profile
from models.socialrl import stage1
from models.socialrl.teachers import TeacherConfig, sft_traces, teacher_traces
from models.socialrl.tom_skills import EpisodeSkills, TurnProbe, copies_instructions, episode_skills
from models.tracking import Tracker
from models.training.config import SFTResult

log = logging.getLogger("socialrl.tom")

ARMS: dict[str, tuple[str, bool]] = {
    "base": ("base", False),
    "base_tom_prompt": ("base", True),
    "sft_act": ("sft_act", False),
    "sft_act_tom_prompt": ("sft_act", True),
    "sft_tom": ("sft_tom", True),
}
"""Arm -> (which model: the base or a student, whether prompted with the scaffold)."""
SCAFFOLDED_ARMS = tuple(arm for arm, (_, tom) in ARMS.items() if tom)
STUDENT_FORMATS = {"sft_act": "act", "sft_tom": "tom"}
"""Student arm -> the SFT trace format it is trained on."""
SKILLS = ("infer", "anticipate")
MIN_CORRELATION_EPISODES = 30
"""Fewest scored episodes a skill-outcome correlation is computed from (fewer: not reported as a finding)."""


# ========================================================================================= the study
def study_plan(env_id: str, profile: Profile, seed: int = 0) -> EvaluationPlan:
    """The one plan every arm of a domain plays (held-out scenarios, the specialist's seat, the counterparts)."""
    return EvaluationPlan(
        env_id,
        tuple(held_out_scenarios(env_id, profile.tom.heldout_scenarios, seed)),
        seat=stage1.specialist_seat(env_id, profile),
        counterparts=profile.eval_counterparts,
        seed=seed,
        concurrency=16,
    )


@dataclass(frozen=True, eq=False)
class ArmRun:
    """One arm's evaluation and the skill scores of its episodes (None for unscaffolded arms)."""

    arm: str
    model: str
    tom: bool
    result: EvaluationResult
    skills: tuple[EpisodeSkills | None, ...]
    """Aligned with `result.policy_episodes`."""


def llm_arm_agent(
    profile: Profile, base_url: str, arm: str, model: str, api_key: str | None = None
) -> Callable[[int], Agent]:
    """The LLM agent of an arm: the served `model`, plain or scaffolded as the arm says."""
    tom = ARMS[arm][1]

    def make_agent(policy_seed: int) -> Agent:
        return LLMAgent(
            LLMAgentConfig(
                base_url=base_url,
                model=model,
                api_key_env=None,
                api_key=api_key,
                temperature=0.7,
                max_tokens=profile.tom.max_new_tokens,
                seed=policy_seed,
                fail_on_request_error=False,
                tom=tom,
                name=f"{arm}({model})",
            )
        )

    return make_agent


async def play_arm_async(
    env_id: str, profile: Profile, arm: str, model: str, tom: bool, make_agent: Callable[[int], Agent], seed: int = 0
) -> ArmRun:
    """`play_arm` inside a running event loop."""
    probes: list[TurnProbe] = []

    def make_policy(policy_seed: int) -> Agent:
        probe = TurnProbe(make_agent(policy_seed))
        probes.append(probe)
        return probe

    plan = dataclasses.replace(study_plan(env_id, profile, seed), episode_prefix=f"tom:{arm}:{env_id}:{seed}")
    # The arms play at once for minutes on CPU: one line per ended episode is their progress.
    result = await evaluate_policy_async(plan, make_policy, progress=log)
    by_episode = {p.episode_id: p for p in probes}
    skills = tuple(
        episode_skills(env_id, episode, view.seat, view.counterpart, by_episode[episode.episode_id]) if tom else None
        for episode, view in zip(result.episodes, result.policy_episodes, strict=True)
    )
    log.info("%s %s: mean reward %.3f over %d episodes", env_id, arm, result.summary.mean_reward, result.summary.n)
    return ArmRun(arm, model, tom, result, skills)


def play_arm(
    env_id: str, profile: Profile, arm: str, model: str, tom: bool, make_agent: Callable[[int], Agent], seed: int = 0
) -> ArmRun:
    """Any policy (`make_agent(seed)`) as one arm on the study plan; skills scored when `tom`."""
    return asyncio.run(play_arm_async(env_id, profile, arm, model, tom, make_agent, seed))


@dataclass(frozen=True)
class SkillSummary:
    """One scaffolded arm's skills."""

    infer: Estimate
    """Mean per-episode INFER score (episodes with a scored INFER), bootstrap CI by scenario."""
    anticipate: Estimate
    """Mean per-episode ANTICIPATE score."""
    well_formed_rate: float
    """Share of accepted replies with INFER, ACT and ANTICIPATE."""
    infer_coverage: float
    """Share of accepted replies whose INFER could be scored."""
    anticipate_coverage: float
    """Share of accepted replies whose ANTICIPATE could be scored."""
    instruction_copy: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Skill -> (parts that copy the scaffold's instructions, parts written), over every probed reply."""

    def instruction_copy_rate(self, skill: str) -> float:
        """Share of the written `skill` parts that copy the scaffold's instructions (NaN: none written)."""
        copied, written = self.instruction_copy.get(skill, (0, 0))
        return copied / written if written else math.nan


@dataclass(frozen=True)
class ToMDomainResult:
    """The study's numbers for one domain."""

    env_id: str
    seat: str
    episodes: int
    """Episodes per arm (held-out scenarios x counterparts)."""
    arms: dict[str, Estimate]
    """Arm -> mean reward with its bootstrap CI (clipped to [0, 1])."""
    agreement: dict[str, float]
    invalid_action_rate: dict[str, float]
    differences: dict[str, Estimate]
    """Paired reward differences ("sft_tom - sft_act", "base_tom_prompt - base", ...), scenario-clustered CIs."""
    skills: dict[str, SkillSummary]
    """Scaffolded arm -> its skill scores."""
    correlation: dict[str, Estimate]
    """Skill -> Pearson r of the per-episode skill with the reward (scaffolded arms pooled)."""
    correlation_by_arm: dict[str, dict[str, Estimate]]
    """Scaffolded arm -> skill -> r within that arm alone."""
    students: dict[str, Student] = field(default_factory=dict)
    """`sft_act` and `sft_tom` as trained (passes, steps, tokens); empty when the arms were not trained here."""

    @property
    def clusters(self) -> int:
        """Held-out scenarios the paired differences' bootstraps resample (the fewest any has; every arm is in one,
        and a pair needs both arms on the same episodes)."""
        return min((d.clusters for d in self.differences.values()), default=0)

    def result_file_entry(self) -> dict[str, Any]:
        """This domain's entry of benchmarks/results/tom_<profile>.json (the keys the checks read)."""
        entry: dict[str, Any] = {arm: self.arms[arm].as_dict() for arm in ARMS}
        entry["clusters"] = self.clusters
        entry["skill_outcome_correlation"] = {skill: correlation_dict(self.correlation[skill]) for skill in SKILLS}
        return entry

    def markdown(self) -> str:
        """Every number of the domain as tables (arms with their skills, paired differences, skill-reward
        correlations): what `tom_analysis` shows and run_tom prints."""

        def interval(e: Estimate, digits: int = 3, sign: str = "") -> str:
            return e.text(f"{sign}.{digits}f")

        lines = [
            f"{self.env_id} (seat {self.seat}, {self.episodes} episodes per arm over {self.clusters} scenario clusters)",
            "",
            "| arm | n | mean reward [95% CI] | agreement | invalid/turn | INFER [95% CI] | ANTICIPATE [95% CI] "
            "| well-formed | scored INFER / ANTICIPATE | copied INFER / ANTICIPATE |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for arm, estimate in self.arms.items():
            invalid = self.invalid_action_rate[arm]
            skills = self.skills.get(arm)
            scaffold = ["-"] * 5
            if skills is not None:
                scaffold = [
                    f"{interval(skills.infer)} n={skills.infer.n}" if skills.infer.n else "-",
                    f"{interval(skills.anticipate)} n={skills.anticipate.n}" if skills.anticipate.n else "-",
                    f"{skills.well_formed_rate:.2f}",
                    f"{skills.infer_coverage:.2f} / {skills.anticipate_coverage:.2f}",
                    " / ".join(_copy_cell(skills, skill) for skill in SKILLS),
                ]
            lines.append(
                f"| {arm} | {estimate.n} | {interval(estimate)} | {self.agreement[arm]:.2f} | "
                f"{'-' if invalid is None else f'{invalid:.3f}'} | " + " | ".join(scaffold) + " |"
            )
        lines += ["", "| paired difference | mean [95% CI] | n |", "|---|---|---|"]
        lines += [f"| {name} | {interval(d, sign='+')} | {d.n} |" for name, d in self.differences.items()]
        lines += ["", "| skill vs reward | r [95% CI] | n |", "|---|---|---|"]
        lines += [
            f"| r({skill}, reward) | {correlation_note(c) or interval(c, sign='+')} | {c.n} |"
            for skill, c in self.correlation.items()
        ]
        if self.students:
            lines += ["", "| student | passes | steps | tokens (all passes) | tokens / pass | examples | loss |"]
            lines += ["|---|---|---|---|---|---|---|"]
            lines += [
                f"| {arm} | {s.passes:.2f} | {s.steps} | {s.train_tokens:,} | {s.pass_tokens:,} | {s.examples} "
                f"| {s.train_loss:.3f} |"
                for arm, s in self.students.items()
            ]
        return "\n".join(lines)

    def details(self) -> dict[str, Any]:
        """Everything else (paired differences, skill scores, rates), JSON-safe."""
        return {
            "seat": self.seat,
            "episodes_per_arm": self.episodes,
            "agreement": self.agreement,
            "invalid_action_rate": self.invalid_action_rate,
            "paired_differences": {k: v.as_dict() for k, v in self.differences.items()},
            "skills": {
                arm: {
                    "infer": s.infer.as_dict(),
                    "anticipate": s.anticipate.as_dict(),
                    "well_formed_rate": _finite(s.well_formed_rate),
                    "infer_coverage": _finite(s.infer_coverage),
                    "anticipate_coverage": _finite(s.anticipate_coverage),
                    "parts_written": {skill: s.instruction_copy.get(skill, (0, 0))[1] for skill in SKILLS},
                }
                for arm, s in self.skills.items()
            },
            "instruction_copy_rate": {
                arm: {skill: _finite(s.instruction_copy_rate(skill)) for skill in SKILLS}
                for arm, s in self.skills.items()
            },
            "skill_outcome_correlation_note": {skill: correlation_note(c) for skill, c in self.correlation.items()},
            "correlation_by_arm": {
                arm: {skill: {**correlation_dict(e), "note": correlation_note(e)} for skill, e in by.items()}
                for arm, by in self.correlation_by_arm.items()
            },
            "students": {arm: s.training() for arm, s in self.students.items()},
        }


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _copy_cell(skills: SkillSummary, skill: str) -> str:
    copied, written = skills.instruction_copy.get(skill, (0, 0))
    return f"{copied / written:.2f} ({copied}/{written})" if written else "-"


def correlation_note(estimate: Estimate, min_episodes: int = MIN_CORRELATION_EPISODES) -> str | None:
    """Why a correlation is not a finding ("n = X < 30: ..."), or None when it rests on enough episodes."""
    if estimate.n < min_episodes:
        return f"n = {estimate.n} < {min_episodes}: not reported as a finding"
    return None


def correlation_dict(estimate: Estimate) -> dict[str, Any]:
    """{r, ci_low, ci_high, n} of a correlation estimate (JSON-safe)."""
    values = estimate.as_dict()
    return {"r": values["mean"], "ci_low": values["ci_low"], "ci_high": values["ci_high"], "n": values["n"]}


DIFFERENCES = (
    ("base_tom_prompt", "base"),
    ("sft_act_tom_prompt", "sft_act"),
    ("sft_act", "base"),
    ("sft_tom", "base"),
    ("sft_tom", "sft_act"),
    ("sft_tom", "sft_act_tom_prompt"),
)
"""The paired comparisons reported: the scaffold prompt alone (on the base and on the warm-start), each student,
ToM distillation vs standard SFT, and ToM distillation vs prompting the standard student with the scaffold."""


def skill_correlation(
    runs: Sequence[ArmRun], skill: str, seed: int = 0, min_episodes: int = MIN_CORRELATION_EPISODES
) -> Estimate:
    """Pearson r of a per-episode skill with the episode reward over `runs` (episodes with that skill scored),
    with a bootstrap interval resampling scenarios; NaN (with its n) from fewer than `min_episodes`."""
    xs, ys, clusters = [], [], []
    for run in runs:
        for view, skills in zip(run.result.policy_episodes, run.skills, strict=True):
            value = getattr(skills, skill) if skills is not None else None
            if value is not None:
                xs.append(value)
                ys.append(view.reward)
                clusters.append(view.scenario_index)
    if len(xs) < min_episodes:  # no headline from a handful of episodes
        return Estimate(math.nan, math.nan, math.nan, len(xs), len(set(clusters)))
    return correlation_estimate(xs, ys, clusters, seed=seed)


def analyse(
    env_id: str, runs: Mapping[str, ArmRun], seed: int = 0, students: Mapping[str, Student] | None = None
) -> ToMDomainResult:
    """Arm means, paired differences, skill scores, instruction copying and skill-outcome correlations of one
    domain (`students`: how the two students were trained, carried into the report)."""
    missing = set(ARMS) - set(runs)
    if missing:
        raise ValueError(f"{env_id}: arms missing from the study: {sorted(missing)}")
    skills: dict[str, SkillSummary] = {}
    for arm in SCAFFOLDED_ARMS:
        run = runs[arm]
        scored = [(v, s) for v, s in zip(run.result.policy_episodes, run.skills, strict=True) if s is not None]
        replies = sum(s.replies for _, s in scored)

        def estimate(skill: str, scored=scored) -> Estimate:
            pairs = [(getattr(s, skill), v.scenario_index) for v, s in scored if getattr(s, skill) is not None]
            return mean_estimate([p[0] for p in pairs], [p[1] for p in pairs], (0.0, 1.0), seed=seed)

        skills[arm] = SkillSummary(
            infer=estimate("infer"),
            anticipate=estimate("anticipate"),
            well_formed_rate=sum(s.well_formed for _, s in scored) / replies if replies else math.nan,
            infer_coverage=sum(s.infer_scored for _, s in scored) / replies if replies else math.nan,
            anticipate_coverage=sum(s.anticipate_scored for _, s in scored) / replies if replies else math.nan,
            instruction_copy={
                "infer": (sum(s.infer_copied for _, s in scored), sum(s.infer_written for _, s in scored)),
                "anticipate": (
                    sum(s.anticipate_copied for _, s in scored),
                    sum(s.anticipate_written for _, s in scored),
                ),
            },
        )
    scaffolded = [runs[arm] for arm in SCAFFOLDED_ARMS]
    any_run = runs["base"]
    return ToMDomainResult(
        env_id=env_id,
        seat=any_run.result.seat,
        episodes=any_run.result.summary.n,
        arms={arm: runs[arm].result.summary.reward for arm in ARMS},
        agreement={arm: runs[arm].result.summary.agreement_rate for arm in ARMS},
        invalid_action_rate={arm: _finite(runs[arm].result.summary.invalid_action_rate) for arm in ARMS},
        differences={
            f"{a} - {b}": paired_difference(runs[a].result, runs[b].result, seed=seed) for a, b in DIFFERENCES
        },
        skills=skills,
        correlation={skill: skill_correlation(scaffolded, skill, seed) for skill in SKILLS},
        correlation_by_arm={
            arm: {skill: skill_correlation([runs[arm]], skill, seed) for skill in SKILLS} for arm in SCAFFOLDED_ARMS
        },
        students=dict(students or {}),
    )


# ========================================================================================== students
@dataclass(frozen=True, kw_only=True)
class Student:
    """One trained student of the study."""

    arm: str
    """`sft_act` or `sft_tom`."""
    trace_format: str
    """`act` or `tom`."""
    adapter_dir: str
    train_loss: float
    eval_loss_before: float | None
    eval_loss_after: float | None
    examples: int
    steps: int
    wall_seconds: float
    mlflow_run_id: str | None = None
    train_tokens: int = 0
    """Tokens fed over all passes."""
    pass_tokens: int = 0
    """Tokens of one pass over its training examples."""

    @property
    def passes(self) -> float:
        """Passes made over its own training data, measured (tokens fed / tokens of one pass)."""
        return self.train_tokens / self.pass_tokens if self.pass_tokens else math.nan

    def training(self) -> dict[str, Any]:
        """How it was trained (JSON-safe): what the students share (passes) and what then differs."""
        return {
            "trace_format": self.trace_format,
            "passes": _finite(self.passes),
            "steps": self.steps,
            "train_tokens": self.train_tokens,
            "pass_tokens": self.pass_tokens,
            "examples": self.examples,
            "train_loss": _finite(self.train_loss),
            "wall_seconds": round(self.wall_seconds, 1),
        }


def train_students(
    env_id: str,
    traces: Sequence[Trace],
    profile: Profile,
    base_model_dir: Path,
    output: Path,
    tracker: Tracker | None = None,
    sft: Callable[..., SFTResult] | None = None,
) -> dict[str, Student]:
    """The two students: LoRA SFT on the same filtered traces, ACT-only and full scaffold (`Profile.tom.sft`,
    default the warm-start's settings, resolved to `Profile.tom.passes` passes each: equal passes, so the
    longer scaffolded traces take more steps and tokens).
    The first `sft_eval_conversations` kept traces are held out to measure the SFT loss."""
    if sft is None:
        from models.training.sft import run_sft as sft  # loads torch: only when training runs
    kept = filter_traces(traces, profile.trace_min_reward)
    cut = min(profile.tom.sft_eval_conversations, max(0, len(kept) - 1))
    if len(kept) - cut < 1:
        raise ValueError(f"{env_id}: no usable traces for the ToM students (min reward {profile.trace_min_reward})")
    held_out, train = kept[:cut], kept[cut:]
    settings = profile.tom.resolved(profile).sft
    students: dict[str, Student] = {}
    for arm, fmt in STUDENT_FORMATS.items():
        train_chats = [t.messages for t in sft_traces(train, fmt)]
        eval_chats = [t.messages for t in sft_traces(held_out, fmt)]
        out = output / arm
        params = {"sft": asdict(settings), "profile": profile.name, "env_id": env_id, "trace_format": fmt}
        if tracker is None:
            result, run_id = sft(base_model_dir, train_chats, out, settings, eval_chats), None
        else:
            with tracker.start_run(f"tom-{arm}-{env_id}", params=params) as run:
                result = sft(base_model_dir, train_chats, out, settings, eval_chats)
                run.log_metrics(
                    result.steps,
                    train_loss=result.train_loss,
                    examples=result.examples,
                    wall_seconds=result.wall_seconds,
                    train_tokens=result.train_tokens,
                    pass_tokens=result.pass_tokens,
                )
                run.log_artifact_dir(result.adapter_dir, "adapter")
                run_id = run.run_id
        students[arm] = Student(
            arm=arm, trace_format=fmt, adapter_dir=str(result.adapter_dir), train_loss=result.train_loss, eval_loss_before=result.eval_loss_before, eval_loss_after=result.eval_loss_after,
            examples=result.examples, steps=result.steps, wall_seconds=result.wall_seconds, mlflow_run_id=run_id, train_tokens=result.train_tokens, pass_tokens=result.pass_tokens,
        )  # fmt: skip
        log.info("%s %s: %d examples, %d steps, %.2f passes, %d tokens, loss %.3f, %.0f s", env_id, arm,
                 result.examples, result.steps, students[arm].passes, result.train_tokens, result.train_loss,
                 result.wall_seconds)  # fmt: skip
    return students


def run_arms(
    env_id: str,
    profile: Profile,
    base_url: str,
    models: Mapping[str, str],
    seed: int = 0,
    api_key: str | None = None,
) -> dict[str, ArmRun]:
    """All arms (`ARMS`), played at once (their calls batch in the engine); `models` maps "base", "sft_act" and
    "sft_tom" to served model names; `api_key` is the token of the server at `base_url`."""

    async def play() -> list[ArmRun]:
        return await asyncio.gather(
            *(
                play_arm_async(
                    env_id,
                    profile,
                    arm,
                    models[which],
                    tom,
                    llm_arm_agent(profile, base_url, arm, models[which], api_key),
                    seed,
                )
                for arm, (which, tom) in ARMS.items()
            )
        )

    return {run.arm: run for run in asyncio.run(play())}


def result_file(results: Sequence[ToMDomainResult]) -> dict[str, Any]:
    """benchmarks/results/tom_<profile>.json: `clusters` (the fewest scenario clusters behind any arm of any
    domain), then per domain the arms, its `clusters` and the skill-outcome correlations."""
    return {"clusters": min(r.clusters for r in results), **{r.env_id: r.result_file_entry() for r in results}}


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path


# ====================================================================================== asset outputs
@dataclass(frozen=True)
class ReasoningVariety:
    """How much the teacher's INFER / ANTICIPATE vary, and whether any copies the scaffold's instructions: a
    student that imitates text repeated across scenarios, or the instructions, learns no content."""

    records: int
    """Teacher decisions with reasoning."""
    distinct_share: dict[str, float]
    """Part -> distinct texts / records."""
    instruction_copy_rate: dict[str, float]
    """Part -> share that copies the scaffold's instructions (`tom_skills.copies_instructions`)."""


def reasoning_variety(traces: Sequence[Trace]) -> ReasoningVariety:
    """`ReasoningVariety` of the teachers' reasoning records in `traces`."""
    records = [r for t in traces for r in t.reasoning if isinstance(r, dict) and r.get("act")]
    texts = {skill: [str(r.get(skill) or "") for r in records] for skill in SKILLS}
    n = len(records)
    return ReasoningVariety(
        n,
        {skill: len(set(v)) / n if n else math.nan for skill, v in texts.items()},
        {skill: sum(map(copies_instructions, v)) / n if n else math.nan for skill, v in texts.items()},
    )


@dataclass(frozen=True)
class StudyTraces:
    """The teacher traces of one domain's study (rows of `traces` under `run_id`)."""

    env_id: str
    run_id: str
    episodes: int
    failed: int
    mean_reward: float
    reasoning: ReasoningVariety | None = None


@dataclass(frozen=True)
class StudyStudents:
    """The two students of one domain's study."""

    env_id: str
    traces_run_id: str
    students: dict[str, Student]
    """`sft_act` and `sft_tom`."""


def study_traces(env_id: str, profile: Profile, seed: int = 0, run_tag: str = "tom-traces") -> list[Trace]:
    """The code teacher's traces for the study: `Profile.tom.teacher_episodes` training scenarios, every seat."""
    collection = teacher_traces(
        env_id, profile, TeacherConfig(), seed=seed, run_tag=run_tag, episodes=profile.tom.teacher_episodes
    )
    return list(collection.traces)
