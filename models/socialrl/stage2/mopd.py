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

from models.plots import Series, line_with_band
from models.profiles import Profile
from models.socialrl import stage1
from models.socialrl.stage2.plans import evaluate_policies, probe_rewards, registered_adapters, serve
from models.socialrl.stage2.scores import BASE, DOMAINS_TAG, MOPD, MOPD_MODEL, PolicyScores, short, specialist_policy
from models.socialrl.stage2.transfer import TransferMatrix
from models.tracking import TrackedRun, Tracker
from models.training.config import Services

log = logging.getLogger("socialrl.stage2")


def recovered_share(
    student: PolicyScores, base: PolicyScores, specialist: PolicyScores, min_advantage: float
) -> float | None:
    """(student - base) / (specialist - base), each a paired mean difference on one plan; None where the
    specialist does not beat the base by more than `min_advantage`."""
    advantage = specialist.minus(base).mean
    if not advantage > min_advantage:
        return None
    return student.minus(base).mean / advantage


def mean_share(shares: Mapping[str, float | None]) -> float | None:
    defined = [v for v in shares.values() if v is not None]
    return sum(defined) / len(defined) if defined else None


@dataclass(frozen=True)
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
    """Domain -> (student - base) / (specialist - base) on the held-out plan (None: undefined there)."""
    recovered_mean: float | None
    """Mean of the defined per-domain shares."""
    model_name: str | None
    model_version: int | None
    mlflow_run_id: str | None
    gap_png: bytes
    resumed_from: int | None
    wall_s: float

    def summary(self) -> str:
        """Steps and recovered shares, in one line."""
        shares = ", ".join(f"{d} {'undefined' if v is None else f'{v:.1%}'}" for d, v in self.recovered.items())
        mean = "undefined" if self.recovered_mean is None else f"{self.recovered_mean:.1%}"
        return f"MOPD: {self.steps} steps, recovered share {mean} ({shares})"

    def markdown(self, matrix: TransferMatrix) -> str:
        """Per domain the recovered share and the held-out means of the student, the base and the specialist
        (from `matrix`, the transfer matrix the student was distilled from)."""
        lines = ["| domain | recovered share | student | base | specialist |", "|---|---|---|---|---|"]
        for s in self.scores:
            share = self.recovered[s.env_id]
            lines.append(
                f"| {s.env_id} | {'undefined' if share is None else f'{share:.1%}'} | {s.mean:.3f} | "
                f"{matrix.scores_of(BASE, s.env_id).mean:.3f} | "
                f"{matrix.scores_of(specialist_policy(s.env_id), s.env_id).mean:.3f} |"
            )
        return "\n".join(lines) + (
            "\n\nShare of the specialists' held-out advantage over the base recovered by the student "
            "(the paper: 92.6% in 60 steps); undefined where the specialist does not beat the base."
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
    s2 = profile.stage2
    domains = matrix.domains
    if tracker is None:
        raise ValueError("MOPD needs the registry: its teachers are the registered specialists")
    teachers, seats, targets = _teachers(tracker, domains, profile, services, base_model)
    config = replace(
        s2.mopd,
        run_name=f"mopd-{uuid.uuid4().hex[:6]}",
        max_sequence_tokens=min(s2.mopd.max_sequence_tokens, profile.engine.max_model_len - 1),
    )

    def probe(served: str) -> dict[str, float]:
        return probe_rewards(
            profile, services.proxy_base_url, {"student": served}, domains, api_key=services.proxy_api_key
        )["student"]

    params = {"profile": profile.name, "domains": ",".join(domains), "mopd": config}
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
            min_advantage=s2.min_advantage,
            on_step=_step_logger(run),
        )
        final_probe = probe(result.served_name)
        curve = _gap_curve(result.history, domains, targets, final_probe, config.curriculum_every, s2.min_advantage)
        scores = _heldout(profile, services, domains, result.served_name, run_id)
        recovered = {
            d: recovered_share(
                next(s for s in scores if s.env_id == d),
                matrix.scores_of(BASE, d),
                matrix.scores_of(specialist_policy(d), d),
                s2.min_advantage,
            )
            for d in domains
        }
        share = mean_share(recovered)
        png = gap_curve_png(curve, domains)
        _log_student(run, len(result.history), scores, recovered, share, png, result.adapter_dir)
        mlflow_run_id = run.run_id
    version = tracker.register_adapter(mlflow_run_id, "adapter", MOPD_MODEL, tags={DOMAINS_TAG: ",".join(domains)})
    return MOPDStudentResult(
        tuple(domains),
        result.adapter_dir,
        len(result.history),
        tuple(result.history),
        targets,
        tuple(curve),
        scores,
        recovered,
        share,
        MOPD_MODEL,
        version,
        mlflow_run_id,
        png,
        result.resumed_from,
        time.perf_counter() - start,
    )


def _teachers(
    tracker: Tracker, domains: Sequence[str], profile: Profile, services: Services, base_model: str
) -> tuple[dict[str, str], dict[str, str], dict[str, tuple[float, float]]]:
    """Every domain's registered specialist served as its teacher, the student's seat per domain, and the
    curriculum's targets: domain -> (teacher, base) validation-probe reward."""
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
    return teachers, seats, targets


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
    share: float | None,
    png: bytes,
    adapter_dir: Path,
) -> None:
    """The held-out means and recovered shares, the gap plot and the adapter on the MLflow run."""
    run.log_metrics(
        steps,
        {
            **{f"heldout_{short(s.env_id)}": s.mean for s in scores},
            **{f"recovered_{short(d)}": v for d, v in recovered.items() if v is not None},
            **({"recovered_mean": share} if share is not None else {}),
        },
    )
    run.log_file("mopd_gaps.png", png, "plots")
    run.log_artifact_dir(adapter_dir, "adapter")
