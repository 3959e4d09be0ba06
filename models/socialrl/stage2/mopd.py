"""The MOPD student: every domain's specialist distilled into one student (models/training/mopd.py), its
held-out evaluation and the share of the specialists' advantage it recovered."""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from models.evaluation.stats import Estimate, ratio_estimate
from models.plots import Series, line_with_band
from models.profiles import Profile
from models.socialrl import stage1
from models.socialrl.stage2.plans import evaluate_policies, probe_rewards, registered_adapters, serve
from models.socialrl.stage2.scores import (
    BASE,
    DOMAINS_TAG,
    MOPD,
    MOPD_MODEL,
    PolicyScores,
    sft_policy,
    short,
    specialist_policy,
)
from models.socialrl.stage2.transfer import TransferMatrix
from models.tracking import TrackedRun, Tracker
from models.training.config import Services
from models.training.mopd_config import CurriculumDecision, uniform_fallbacks

log = logging.getLogger("socialrl.stage2")


FLOORS = ("base", "warmstart")
"""What a recovered share is measured over: the base model, or each domain's own SFT warm-start (where the base
scores 0 everywhere, the warm-start is the floor a student can be told apart from)."""


def domain_share(
    student: PolicyScores, base: PolicyScores, specialist: PolicyScores, min_advantage: float
) -> float | None:
    """One domain's ratio (student - floor) / (specialist - floor), each a paired mean difference on one plan
    (`base`: the floor's scores, the base model's or the warm-start's); None where the specialist does not beat
    the floor by more than `min_advantage`. Shown per domain only: a small advantage makes the ratio swing, so
    the reported share is `recovered_share`'s ratio of sums."""
    advantage = specialist.minus(base).mean
    if not advantage > min_advantage:
        return None
    return student.minus(base).mean / advantage


@dataclass(frozen=True)
class RecoveredShare:
    """The share of the specialists' held-out advantage the student recovered: sum over domains and paired
    episodes of (student - floor) over the sum of (specialist - floor), with a scenario-cluster bootstrap CI; the
    floor is the base model, or each domain's warm-start (`recovered_share`'s `floor`)."""

    estimate: Estimate
    """mean = the ratio of sums (NaN when undefined); n paired episodes; clusters = scenarios resampled."""
    advantage: float
    """Summed specialist - floor over every domain's paired episodes (the denominator)."""
    reason: str | None
    """Why the share is undefined (None when it is defined)."""
    per_domain: dict[str, float | None]
    """Domain -> its own ratio (`domain_share`), for reading only."""

    @property
    def mean(self) -> float | None:
        return None if self.reason is not None else self.estimate.mean

    def as_dict(self) -> dict[str, Any]:
        """{mean, ci_low, ci_high, n, clusters, reason} (JSON-safe; None where undefined)."""
        values = self.estimate.as_dict() if self.reason is None else dict.fromkeys(("mean", "ci_low", "ci_high"))
        return {**values, "n": self.estimate.n, "clusters": self.estimate.clusters, "reason": self.reason}

    def text(self) -> str:
        if self.reason is not None:
            return f"undefined ({self.reason})"
        return self.estimate.text(".1%")


def recovered_share(
    students: Sequence[PolicyScores],
    matrix: TransferMatrix,
    min_advantage: float = 0.0,
    confidence: float = 0.95,
    floor: str = "base",
) -> RecoveredShare:
    """The student's recovered share (`RecoveredShare`) on the domains of `students`, paired episode by
    episode with the floor and each domain's specialist of `matrix`. Defined whenever the specialists' summed
    advantage over the floor is > 0; `min_advantage` only decides which per-domain ratios are shown.
    `floor`: "base" (the base model on every domain), or "warmstart" (each domain's own SFT warm-start, on the
    domains whose warm-start the matrix evaluated there; the others are left out)."""
    if floor not in FLOORS:
        raise ValueError(f"floor must be one of {FLOORS}, got {floor!r}")
    if floor == "warmstart":
        evaluated = {(s.policy, s.env_id) for s in matrix.scores}
        students = [s for s in students if (sft_policy(s.env_id), s.env_id) in evaluated]
        if not students:
            undefined = Estimate(math.nan, math.nan, math.nan, 0, 0)
            return RecoveredShare(undefined, 0.0, "no domain's warm-start was evaluated on its own plan", {})
    numerators, denominators, clusters = [], [], []
    per_domain = {}
    for student in students:
        base = matrix.scores_of(BASE if floor == "base" else sft_policy(student.env_id), student.env_id)
        specialist = matrix.scores_of(specialist_policy(student.env_id), student.env_id)
        b = dict(zip(base.keys, base.rewards, strict=True))
        p = dict(zip(specialist.keys, specialist.rewards, strict=True))
        if not set(student.keys) == set(b) == set(p):
            raise ValueError(f"{student.env_id}: student, {floor} and specialist did not play the same episodes")
        per_domain[student.env_id] = domain_share(student, base, specialist, min_advantage)
        for key, cluster, reward in zip(student.keys, student.clusters, student.rewards, strict=True):
            numerators.append(reward - b[key])
            denominators.append(p[key] - b[key])
            clusters.append(cluster)
    advantage = math.fsum(denominators)
    if not advantage > 0:
        over = "the base" if floor == "base" else "their warm-starts"
        reason = f"the specialists' summed advantage over {over} is {advantage:+.4f}: nothing to recover"
        undefined = Estimate(math.nan, math.nan, math.nan, len(numerators), len(set(clusters)))
        return RecoveredShare(undefined, advantage, reason, per_domain)
    return RecoveredShare(ratio_estimate(numerators, denominators, clusters, confidence), advantage, None, per_domain)


FRESH_START = "fresh LoRA (no warm-start)"
"""`MOPDStudentResult.student_init` of a student that started as a new LoRA on the base model (also every
result stored before the start was recorded: they all did)."""


@dataclass(frozen=True)
class StudentStart:
    """Where the MOPD student's LoRA starts (`student_start`)."""

    adapter: Path | None
    """The warm-start adapter to continue; None: a fresh LoRA on the base model."""
    domain: str | None
    """The domain whose warm-start it is."""

    @property
    def description(self) -> str:
        return FRESH_START if self.domain is None else f"SFT warm-start of {self.domain}"


def student_start(domains: Sequence[str], warm_starts: Mapping[str, Path | None]) -> StudentStart:
    """The student starts from the SFT warm-start of the first of `domains` (the stage-2 order) that has one,
    else as a fresh LoRA. Why: the bare base follows no action format, so a fresh student's episodes fail
    before any teacher advantage can show, its probe equals the base's and the teachers score tokens far from
    their own support; a warm-start plays the format, and each teacher is its domain's warm-start continued by
    PPO. Stage 1 trains no warm-start on the union of the domains (it would be the natural start for a
    multi-domain student, at the cost of one more SFT run); among the per-domain ones, a profile lists first
    the domain whose warm-start it knows best (cpu: Craigslist's, measured by `make run`). The paper, as this
    project summarises it, names no student checkpoint (docs/stage2.md)."""
    for domain in domains:
        adapter = warm_starts.get(domain)
        if adapter is not None:
            return StudentStart(adapter, domain)
    return StudentStart(None, None)


@dataclass(frozen=True, kw_only=True)
class MOPDStudentResult:
    """What the `mopd_student` asset produced."""

    domains: tuple[str, ...]
    adapter_dir: Path
    steps: int
    history: tuple[dict[str, Any], ...]
    targets: dict[str, tuple[float, float]]
    """Domain -> (teacher, base) validation-probe reward."""
    gap_curve: tuple[tuple[int, dict[str, float | None]], ...]
    """(step, domain -> gap) at every curriculum estimate, and after the last step."""
    scores: tuple[PolicyScores, ...]
    """The student on every domain's held-out plan."""
    recovered: dict[str, float | None]
    """Per-domain ratios (student - base) / (specialist - base) on the held-out plan (None: undefined there);
    for reading only, the reported share is `share`."""
    model_name: str | None
    model_version: int | None
    mlflow_run_id: str | None
    gap_png: bytes
    resumed_from: int | None
    wall_s: float
    share: RecoveredShare | None = None
    """The recovered share (ratio of summed advantages, cluster-bootstrap CI); None in results stored before
    it existed (`share_of` recomputes it)."""
    student_init: str = FRESH_START
    """What the student's LoRA started from (`StudentStart.description`)."""
    curriculum: tuple[CurriculumDecision, ...] = ()
    """Every decision of the gap-closed curriculum: gaps, probabilities, whether it fell back to uniform."""

    @property
    def uniform_fallbacks(self) -> int:
        """Curriculum decisions that fell back to uniform sampling (no teacher above the base on the probe)."""
        return uniform_fallbacks(self.curriculum)

    def curriculum_json(self) -> list[dict[str, Any]]:
        """Every curriculum decision as {step, gaps, probabilities, student, fell_back}."""
        return [d.as_dict() for d in self.curriculum]

    def curriculum_markdown(self) -> str:
        """One row per curriculum decision: the step, each domain's gap and probability, whether it fell back."""
        if not self.curriculum:
            return "No curriculum decision recorded."
        lines = ["| step | " + " | ".join(f"gap {short(d)} | p {short(d)}" for d in self.domains) + " | fell back |"]
        lines.append("|---" * (2 * len(self.domains) + 2) + "|")
        for c in self.curriculum:
            cells = []
            for d in self.domains:
                gap = c.gaps.get(d)
                cells += ["undefined" if gap is None else f"{gap:.2f}", f"{c.probabilities.get(d, math.nan):.2f}"]
            lines.append(f"| {c.step} | " + " | ".join(cells) + f" | {'yes' if c.fell_back else 'no'} |")
        return "\n".join(lines)

    def share_of(self, matrix: TransferMatrix) -> RecoveredShare:
        """`share`, or for an older stored result the same computed from its held-out scores and `matrix`."""
        return self.share if self.share is not None else recovered_share(self.scores, matrix)

    def summary(self) -> str:
        """Steps and recovered share, and the per-domain ratios, in one line."""
        ratios = ", ".join(f"{d} {'undefined' if v is None else f'{v:.1%}'}" for d, v in self.recovered.items())
        share = "not recorded" if self.share is None else self.share.text()
        fallbacks = f"{self.uniform_fallbacks} of {len(self.curriculum)} curriculum decisions fell back to uniform"
        return (
            f"MOPD: {self.steps} steps from {self.student_init}, recovered share {share} (per-domain ratios: "
            f"{ratios}); {fallbacks}"
        )

    def markdown(self, matrix: TransferMatrix) -> str:
        """Per domain the ratio and the held-out means of the student, the base and the specialist (from
        `matrix`, the transfer matrix the student was distilled from), then the recovered share."""
        lines = ["| domain | per-domain ratio | student | base | specialist |", "|---|---|---|---|---|"]
        for s in self.scores:
            share = self.recovered[s.env_id]
            lines.append(
                f"| {s.env_id} | {'undefined' if share is None else f'{share:.1%}'} | {s.mean:.3f} | "
                f"{matrix.scores_of(BASE, s.env_id).mean:.3f} | "
                f"{matrix.scores_of(specialist_policy(s.env_id), s.env_id).mean:.3f} |"
            )
        return "\n".join(lines) + (
            f"\n\nRecovered share {self.share_of(matrix).text()}: the student's summed held-out advantage over "
            "the base over the specialists' (every domain's paired episodes; 95% CI resampling scenarios; the "
            "paper: 92.6% in 60 steps). The per-domain ratio is undefined where the specialist does not beat "
            "the base."
        )


def gap_series(curve: Sequence[tuple[int, Mapping[str, float | None]]], domains: Sequence[str]) -> list[Series]:
    """One gap curve per domain over the MOPD steps; a domain whose gap is never defined (its specialist does
    not beat the base on the probe) says so in its label instead of leaving an unexplained empty line."""
    series = []
    for domain in domains:
        gaps = [g.get(domain) for _, g in curve]
        label = short(domain)
        if all(g is None or not math.isfinite(g) for g in gaps):
            label += " (undefined: specialist not above base on the probe)"
        series.append(Series(label, [step for step, _ in curve], [math.nan if g is None else g for g in gaps]))
    return series


def gap_curve_png(curve: Sequence[tuple[int, Mapping[str, float | None]]], domains: Sequence[str]) -> bytes:
    return line_with_band(
        gap_series(curve, domains),
        "MOPD: teacher advantage not yet absorbed, (teacher - student) / (teacher - base), validation probe",
        "step",
        "gap",
    )


def train_mopd_student(
    matrix: TransferMatrix,
    profile: Profile,
    base_model_dir: Path,
    services: Services,
    output: Path,
    tracker: Tracker | None,
    base_model: str,
    run_id: str = "mopd",
) -> MOPDStudentResult:
    """Multi-teacher on-policy distillation of every domain's specialist into one student
    (models/training/mopd.py), its held-out evaluation and recovered share; registered as `socialrl-mopd`."""
    from models.training.mopd import train_mopd

    start = time.perf_counter()
    s2 = profile.stage2.resolved(profile)  # the MOPD temperature: the rollouts' unless the profile sets one
    domains = matrix.domains
    if tracker is None:
        raise ValueError("MOPD needs the registry: its teachers are the registered specialists")
    teachers, seats, targets, warm_starts = _teachers(tracker, domains, profile, services, base_model)
    init = student_start(domains, warm_starts)
    log.info("MOPD student starts from %s (%s)", init.description, init.adapter or "a new adapter on the base")
    config = replace(
        s2.mopd,
        run_name=f"mopd-{uuid.uuid4().hex[:6]}",
        max_sequence_tokens=min(s2.mopd.max_sequence_tokens, profile.engine.max_model_len - 1),
    )
    probe = _student_probe(profile, services, domains)
    params = {"profile": profile.name, "domains": ",".join(domains), "mopd": config, "init": init.description}
    with tracker.start_run("mopd", params=params) as run:
        result = train_mopd(
            config,
            base_model_dir,
            services,
            output,
            teachers,
            seats,
            targets,
            probe,
            init_adapter=init.adapter,
            min_advantage=s2.min_advantage,
            on_step=_step_logger(run),
        )
        final_probe = probe(result.served_name)
        curve = _gap_curve(result.history, domains, targets, final_probe, config.curriculum_every, s2.min_advantage)
        scores = _heldout(profile, services, domains, result.served_name, run_id)
        share = recovered_share(scores, matrix, s2.min_advantage)
        recovered = {d: share.per_domain[d] for d in domains}
        png = gap_curve_png(curve, domains)
        _log_student(run, len(result.history), scores, recovered, share, png, result.adapter_dir)
        run.log_metrics(len(result.history), {"curriculum_uniform_fallbacks": uniform_fallbacks(result.curriculum)})
        mlflow_run_id = run.run_id
    version = tracker.register_adapter(mlflow_run_id, "adapter", MOPD_MODEL, tags={DOMAINS_TAG: ",".join(domains)})
    return MOPDStudentResult(
        domains=tuple(domains),
        adapter_dir=result.adapter_dir,
        steps=len(result.history),
        history=tuple(result.history),
        targets=targets,
        gap_curve=tuple(curve),
        scores=scores,
        recovered=recovered,
        model_name=MOPD_MODEL,
        model_version=version,
        mlflow_run_id=mlflow_run_id,
        gap_png=png,
        resumed_from=result.resumed_from,
        wall_s=time.perf_counter() - start,
        share=share,
        student_init=init.description,
        curriculum=result.curriculum,
    )


def _student_probe(profile: Profile, services: Services, domains: Sequence[str]) -> Callable[[str], dict[str, float]]:
    """Served student name -> domain -> its mean validation-probe reward."""

    def probe(served: str) -> dict[str, float]:
        return probe_rewards(
            profile, services.proxy_base_url, {"student": served}, domains, api_key=services.proxy_api_key
        )["student"]

    return probe


def _teachers(
    tracker: Tracker, domains: Sequence[str], profile: Profile, services: Services, base_model: str
) -> tuple[dict[str, str], dict[str, str], dict[str, tuple[float, float]], dict[str, Path | None]]:
    """Every domain's registered specialist served as its teacher, the student's seat per domain, the
    curriculum's targets (domain -> (teacher, base) validation-probe reward), and each domain's SFT warm-start
    (None where it has none)."""
    adapters = registered_adapters(tracker, domains, profile.name)
    teachers = {
        d: serve(services.engine, f"teacher-{short(d)}", a.specialist_path, f"{d} teacher") for d, a in adapters.items()
    }
    seats = {d: stage1.specialist_seat(d, profile) for d in domains}
    labels = {BASE: base_model, **{f"teacher:{d}": teachers[d] for d in domains}}
    pairs = [(BASE, d) for d in domains] + [(f"teacher:{d}", d) for d in domains]
    probes = probe_rewards(profile, services.proxy_base_url, labels, domains, pairs, services.proxy_api_key)
    targets = {d: (probes[f"teacher:{d}"][d], probes[BASE][d]) for d in domains}
    log.info(
        "MOPD probe targets (teacher, base): %s", {short(d): tuple(round(v, 3) for v in t) for d, t in targets.items()}
    )
    return teachers, seats, targets, {d: a.sft_path for d, a in adapters.items()}


def _step_logger(run: TrackedRun) -> Callable[[dict[str, Any]], None]:
    """MOPD's per-step metrics on the MLflow run: the finite numbers, "/" in names made "_"."""

    def on_step(metrics: dict[str, Any]) -> None:
        run.log_metrics(
            int(metrics["step"]),
            {
                k.replace("/", "_"): float(v)
                for k, v in metrics.items()
                if isinstance(v, int | float) and not isinstance(v, bool) and k != "step" and math.isfinite(v)
            },
        )

    return on_step


def _gap_curve(
    history: Sequence[Mapping[str, Any]],
    domains: Sequence[str],
    targets: Mapping[str, tuple[float, float]],
    final_probe: Mapping[str, float],
    curriculum_every: int,
    min_advantage: float,
) -> list[tuple[int, dict[str, float | None]]]:
    """(step, domain -> gap) at every curriculum estimate, and after the last step from `final_probe`."""
    from models.training.mopd import curriculum_gaps

    teacher_targets = {d: targets[d][0] for d in domains}
    base_targets = {d: targets[d][1] for d in domains}
    curve = [
        (int(m["step"]), {d: m.get(f"gap/{d}") for d in domains})
        for m in history
        if int(m["step"]) % curriculum_every == 0
    ]
    curve.append((len(history), curriculum_gaps(teacher_targets, base_targets, final_probe, min_advantage)))
    return curve


def _heldout(
    profile: Profile, services: Services, domains: Sequence[str], served: str, run_id: str
) -> tuple[PolicyScores, ...]:
    """The student on every domain's held-out plan (stored), labelled `mopd`."""
    return tuple(
        replace(s, policy=MOPD)
        for s in evaluate_policies(
            profile,
            services.proxy_base_url,
            {MOPD: served},
            domains,
            services.store,
            run_id,
            api_key=services.proxy_api_key,
        )
    )


def _log_student(
    run: TrackedRun,
    steps: int,
    scores: Sequence[PolicyScores],
    recovered: Mapping[str, float | None],
    share: RecoveredShare,
    png: bytes,
    adapter_dir: Path,
) -> None:
    """The held-out means, per-domain ratios and recovered share, the gap plot and the adapter on the MLflow run."""
    run.log_metrics(
        steps,
        {
            **{f"heldout_{short(s.env_id)}": s.mean for s in scores},
            **{f"recovered_{short(d)}": v for d, v in recovered.items() if v is not None},
            **{f"recovered_share_{k}": v for k, v in share.as_dict().items() if isinstance(v, float)},
        },
    )
    run.log_file("mopd_gaps.png", png, "plots")
    run.log_artifact_dir(adapter_dir, "adapter")
