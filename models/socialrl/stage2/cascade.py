"""Transfer-aware cascade RL: the cascade order chosen from the transfer matrix (`ORDER_RULE`), then PPO
through that order, each stage keeping its checkpoint with the best validation-probe reward over the domains
seen so far."""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agents.traces import filter_traces
from models.plots import Series, line_with_band
from models.profiles import Profile
from models.socialrl import stage1
from models.socialrl.stage2.plans import evaluate_policies, probe_rewards, serve
from models.socialrl.stage2.scores import CASCADE, CASCADE_MODEL, DOMAINS_TAG, PolicyScores, pooled, short
from models.tracking import Tracker
from models.training.config import PPOResult, Services

log = logging.getLogger("socialrl.stage2")

PAPER_ORDER: tuple[str, ...] = (
    "calendar-v0",
    "casino-v0",
    "dnd-v0",
    "craigslist-v0",
    "marketplace-v0",
    "job-interview-v0",
)
"""The SocialRL paper's cascade order: Calendar -> CaSiNo -> DnD -> Craigslist -> Marketplace -> Job Interview."""


ORDER_RULE = (
    "score(order) = sum over every later stage k and earlier domain j of T[k -> j] (training on a later domain "
    "moves an earlier domain's reward by its transfer: destructive donors therefore go early, where their "
    "damage falls on domains still to be trained) + adjacency_weight x sum over consecutive pairs (a, b) of "
    "max(0, min(T[a -> b], T[b -> a])) (mutually beneficial pairs are trained back to back). T = mean paired "
    "difference of the transfer matrix (specialist donors; NaN counts 0; the diagonal is unused). Every order "
    "is scored; ties go to the order closest to the paper's (first in lexicographic order of paper positions)."
)


@dataclass(frozen=True)
class OrderScore:
    """An order and its score's two terms."""

    order: tuple[str, ...]
    score: float
    backward: float
    """Sum of the transfer of every later domain onto every earlier one."""
    adjacency: float
    """Sum of the mutual benefit of consecutive domains (before weighting)."""


def order_score(
    order: Sequence[str], transfer: Mapping[str, Mapping[str, float]], adjacency_weight: float
) -> OrderScore:
    """The cascade-order score (`ORDER_RULE`)."""

    def t(donor: str, recipient: str) -> float:
        value = transfer[donor][recipient]
        return value if math.isfinite(value) else 0.0

    backward = sum(t(order[k], order[j]) for k in range(len(order)) for j in range(k))
    adjacency = sum(max(0.0, min(t(a, b), t(b, a))) for a, b in itertools.pairwise(order))
    return OrderScore(tuple(order), backward + adjacency_weight * adjacency, backward, adjacency)


@dataclass(frozen=True, kw_only=True)
class CascadeOrder:
    """The chosen cascade order and the scores it is compared with."""

    order: tuple[str, ...]
    chosen: OrderScore
    paper: OrderScore
    """The paper's order restricted to these domains."""
    reverse: OrderScore
    """The paper's order reversed."""
    top: tuple[OrderScore, ...]
    """The best few orders."""
    orders_scored: int
    adjacency_weight: float
    """The weight of the neighbours' mutual benefit the orders were scored with (the check re-scores with it)."""
    rule: str = ORDER_RULE

    def summary(self) -> str:
        """The chosen order and how it compares, in one line."""
        return (
            f"Cascade order: {' -> '.join(self.order)} (score {self.chosen.score:+.4f}; paper's "
            f"{self.paper.score:+.4f}, reversed {self.reverse.score:+.4f}; {self.orders_scored} orders scored)"
        )

    def markdown(self) -> str:
        """The chosen order, the paper's and its reverse with the terms of their scores, as a table."""

        def line(s: OrderScore, label: str) -> str:
            order = " -> ".join(short(d) for d in s.order)
            return f"| {order} | {s.score:+.4f} | {s.backward:+.4f} | {s.adjacency:+.4f} | {label}"

        return "\n".join(
            [
                "| order | score | backward transfer | mutual benefit of neighbours |",
                "|---|---|---|---|",
                line(self.chosen, "chosen"),
                line(self.paper, "paper"),
                line(self.reverse, "paper reversed"),
            ]
        )


def paper_order(domains: Sequence[str]) -> tuple[str, ...]:
    return tuple(d for d in PAPER_ORDER if d in domains)


def choose_cascade_order(
    transfer: Mapping[str, Mapping[str, float]], domains: Sequence[str], adjacency_weight: float = 1.0, keep: int = 5
) -> CascadeOrder:
    """Score all n! orders of `domains` exhaustively (720 for six) and keep the best (`ORDER_RULE`)."""
    missing = [d for d in domains if d not in transfer or any(r not in transfer[d] for r in domains)]
    if missing:
        raise ValueError(f"the transfer matrix has no complete row for {missing}")
    start = paper_order(domains) + tuple(d for d in domains if d not in PAPER_ORDER)
    scored = [order_score(o, transfer, adjacency_weight) for o in itertools.permutations(start)]
    best = max(scored, key=lambda s: s.score)  # max keeps the first of equal scores: closest to the paper
    ranked = sorted(scored, key=lambda s: -s.score)[:keep]
    return CascadeOrder(
        order=best.order,
        chosen=best,
        paper=order_score(start, transfer, adjacency_weight),
        reverse=order_score(start[::-1], transfer, adjacency_weight),
        top=tuple(ranked),
        orders_scored=len(scored),
        adjacency_weight=adjacency_weight,
    )


@dataclass(frozen=True)
class CandidateScore:
    """A checkpoint of a cascade stage and its validation-probe rewards on the domains seen so far."""

    checkpoint: str
    adapter: Path
    probe: dict[str, float]
    mean_seen: float


def score_candidates(
    checkpoints: Sequence[tuple[str, Path]], probes: Mapping[str, Mapping[str, float]], seen: Sequence[str]
) -> tuple[CandidateScore, ...]:
    """Each checkpoint (name, adapter) with its mean probe reward over the domains seen so far."""
    return tuple(
        CandidateScore(name, path, {d: probes[name][d] for d in seen}, sum(probes[name][d] for d in seen) / len(seen))
        for name, path in checkpoints
    )


def best_checkpoint(candidates: Sequence[CandidateScore]) -> CandidateScore:
    """The candidate with the best mean probe reward over the domains seen so far (ties: the later one)."""
    if not candidates:
        raise ValueError("no checkpoints to choose from")
    return max(reversed(candidates), key=lambda c: c.mean_seen)


@dataclass(frozen=True, kw_only=True)
class CascadeStage:
    """One finished stage of the cascade."""

    index: int
    domain: str
    init_adapter: str | None
    """What the stage started from (the previous stage's chosen adapter, an SFT warm-start, or None)."""
    sft_adapter: str | None
    """The SFT adapter trained on this domain's traces before PPO, when the domain needs one."""
    ppo_rewards: tuple[float, ...]
    """Mean rollout reward per PPO iteration."""
    candidates: tuple[CandidateScore, ...]
    chosen: str
    adapter: Path
    """The chosen checkpoint's adapter (the next stage starts from it)."""
    heldout: tuple[PolicyScores, ...]
    """The chosen adapter on every domain's held-out plan (the forgetting/transfer curve)."""
    wall_s: float

    def to_json(self) -> dict[str, Any]:
        data = {
            "index": self.index,
            "domain": self.domain,
            "init_adapter": self.init_adapter,
            "sft_adapter": self.sft_adapter,
            "ppo_rewards": list(self.ppo_rewards),
            "candidates": [
                {"checkpoint": c.checkpoint, "adapter": str(c.adapter), "probe": c.probe, "mean_seen": c.mean_seen}
                for c in self.candidates
            ],
            "chosen": self.chosen,
            "adapter": str(self.adapter),
            "heldout": [s.as_dict() for s in self.heldout],
            "wall_s": self.wall_s,
        }
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CascadeStage:
        return cls(
            index=data["index"],
            domain=data["domain"],
            init_adapter=data["init_adapter"],
            sft_adapter=data["sft_adapter"],
            ppo_rewards=tuple(data["ppo_rewards"]),
            candidates=tuple(
                CandidateScore(c["checkpoint"], Path(c["adapter"]), dict(c["probe"]), float(c["mean_seen"]))
                for c in data["candidates"]
            ),
            chosen=data["chosen"],
            adapter=Path(data["adapter"]),
            heldout=tuple(PolicyScores.from_dict(s) for s in data["heldout"]),
            wall_s=float(data["wall_s"]),
        )


@dataclass(frozen=True, kw_only=True)
class CascadeResult:
    """What the `cascade_policy` asset produced."""

    order: tuple[str, ...]
    stages: tuple[CascadeStage, ...]
    adapter_dir: Path
    scores: tuple[PolicyScores, ...]
    """The final policy on every domain's held-out plan (the last stage's curve point)."""
    model_name: str | None
    model_version: int | None
    mlflow_run_id: str | None
    curve_png: bytes
    resumed_stages: int
    """Stages finished by an earlier attempt and not trained again."""
    wall_s: float

    def curve(self) -> dict[str, list[float]]:
        """Domain -> held-out mean after each stage."""
        return {d: [next(s.mean for s in st.heldout if s.env_id == d) for st in self.stages] for d in self.order}

    def markdown(self) -> str:
        """Every domain's held-out mean after each stage, the checkpoint each stage kept and its wall time."""
        lines = [
            "| after stage | " + " | ".join(short(d) for d in self.order) + " | kept checkpoint | wall s |",
            "|---|" + "---|" * (len(self.order) + 2),
        ]
        for stage in self.stages:
            means = {s.env_id: s.mean for s in stage.heldout}
            lines.append(
                f"| {stage.index + 1} ({stage.domain}) | "
                + " | ".join(f"{means[d]:.3f}" for d in self.order)
                + f" | {stage.chosen} | {stage.wall_s:.0f} |"
            )
        return "\n".join(lines)


def cascade_curve_png(order: Sequence[str], stages: Sequence[CascadeStage]) -> bytes:
    series = []
    for domain in order:
        xs, ys, lows, highs = [], [], [], []
        for stage in stages:
            e = next(s for s in stage.heldout if s.env_id == domain).estimate()
            xs.append(stage.index + 1)
            ys.append(e.mean)
            lows.append(e.ci_low)
            highs.append(e.ci_high)
        series.append(Series(short(domain), xs, ys, lows, highs))
    return line_with_band(
        series,
        "Cascade: held-out reward per domain after each stage (" + " -> ".join(short(d) for d in order) + ")",
        "stage",
        "mean reward (95% CI)",
        (0.0, 1.0),
    )


def _atomic_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


def ppo_checkpoints(ppo_dir: Path) -> list[tuple[str, Path]]:
    """(name, adapter dir) of every checkpoint a PPO run left, oldest first."""
    return [
        (p.name, p / "adapter")
        for p in sorted((ppo_dir / "checkpoints").glob("it*"))
        if (p / "state.json").is_file() and (p / "adapter" / "adapter_config.json").is_file()
    ]


@dataclass(frozen=True, kw_only=True)
class _CascadeRun:
    """What every stage of one cascade attempt shares."""

    order: tuple[str, ...]
    profile: Profile
    base_model_dir: Path
    critic_model_dir: Path
    services: Services
    attempt: str
    """Distinct episode and adapter names per attempt (a resumed stage re-runs one)."""
    run_id: str


def train_cascade(
    order: Sequence[str],
    profile: Profile,
    base_model_dir: Path,
    critic_model_dir: Path,
    services: Services,
    output: Path,
    tracker: Tracker | None,
    first_init: Path | None = None,
    run_id: str = "cascade",
) -> CascadeResult:
    """Transfer-aware cascade RL: PPO through `order`, each stage from the previous stage's chosen adapter
    (`first_init` for the first; by default the first domain's stage-1 SFT warm-start when it has one). A
    domain of `profile.sft_domains` gets `cascade_sft_steps` SFT steps on its teacher traces before its PPO
    (the first domain only when it has no warm-start).
    After a stage's PPO, every checkpoint it kept is probed on the domains seen so far and the best mean is
    kept; that adapter is evaluated on every domain's held-out plan. A stage that finished (stage.json) is not
    trained again and an unfinished one resumes from its PPO checkpoints, so re-executing a failed run
    continues where it stopped. Registered as `socialrl-cascade` (alias candidate) when a tracker is given."""
    start_all = time.perf_counter()
    output.mkdir(parents=True, exist_ok=True)
    run = _CascadeRun(
        order=tuple(order),
        profile=profile,
        base_model_dir=base_model_dir,
        critic_model_dir=critic_model_dir,
        services=services,
        attempt=uuid.uuid4().hex[:6],
        run_id=run_id,
    )
    stages: list[CascadeStage] = []
    resumed = 0
    if first_init is None and tracker is not None and order[0] in profile.sft_domains:
        first_init = tracker.latest_run_artifact(
            f"sft-{order[0]}", "adapter", {"profile": profile.name, "env_id": order[0]}
        )
    previous: Path | None = first_init
    for index, domain in enumerate(order):
        stage_dir = output / f"stage{index}-{short(domain)}"
        record = stage_dir / "stage.json"
        if record.is_file():
            stage = CascadeStage.from_json(json.loads(record.read_text()))
            resumed += 1
            log.info("cascade stage %d (%s): finished by an earlier attempt, kept", index, domain)
        else:
            stage = _train_stage(run, index, domain, stage_dir, previous)
        stages.append(stage)
        previous = stage.adapter
    final = output / "adapter"
    if final.exists():
        shutil.rmtree(final)
    shutil.copytree(stages[-1].adapter, final)
    scores = tuple(replace(s, policy=CASCADE) for s in stages[-1].heldout)
    png = cascade_curve_png(order, stages)
    name = version = mlflow_run_id = None
    if tracker is not None:
        mlflow_run_id, version = _register_cascade(tracker, run, stages, png, final)
        name = CASCADE_MODEL
    return CascadeResult(
        order=tuple(order),
        stages=tuple(stages),
        adapter_dir=final,
        scores=scores,
        model_name=name,
        model_version=version,
        mlflow_run_id=mlflow_run_id,
        curve_png=png,
        resumed_stages=resumed,
        wall_s=time.perf_counter() - start_all,
    )


def _train_stage(run: _CascadeRun, index: int, domain: str, stage_dir: Path, previous: Path | None) -> CascadeStage:
    """One stage: SFT where the domain needs it, PPO, the best checkpoint over the domains seen so far, and its
    held-out curve point; recorded in `stage.json` so that a re-executed run keeps it."""
    stage_start = time.perf_counter()
    stage_dir.mkdir(parents=True, exist_ok=True)
    init, sft_adapter = _stage_sft(run, index, domain, stage_dir, previous)
    result = _stage_ppo(run, index, domain, stage_dir, init)
    seen = list(run.order[: index + 1])
    candidates, chosen, keep, served = _keep_best_checkpoint(run, index, stage_dir, seen)
    heldout = evaluate_policies(
        run.profile,
        run.services.proxy_base_url,
        {f"{CASCADE}@stage{index}": served},
        run.order,
        run.services.store,
        f"{run.run_id}:stage{index}",
        api_key=run.services.proxy_api_key,
    )
    run.services.engine.unload_adapter(served)
    stage = CascadeStage(
        index=index,
        domain=domain,
        init_adapter=str(init) if init else None,
        sft_adapter=str(sft_adapter) if sft_adapter else None,
        ppo_rewards=tuple(float(m["reward_mean"]) for m in result.history),
        candidates=candidates,
        chosen=chosen.checkpoint,
        adapter=keep,
        heldout=tuple(heldout),
        wall_s=time.perf_counter() - stage_start,
    )
    _atomic_json(stage_dir / "stage.json", stage.to_json())
    log.info(
        "cascade stage %d (%s): kept %s (probe mean over %d seen domains %.3f); held-out %s (%.0f s)",
        index,
        domain,
        chosen.checkpoint,
        len(seen),
        chosen.mean_seen,
        {short(s.env_id): round(s.mean, 3) for s in heldout},
        stage.wall_s,
    )
    return stage


def _stage_sft(
    run: _CascadeRun, index: int, domain: str, stage_dir: Path, init: Path | None
) -> tuple[Path | None, Path | None]:
    """A domain of `profile.sft_domains` first gets `cascade_sft_steps` SFT steps on its teacher traces, from
    `init`; the first domain skips them when it starts from its own stage-1 warm-start. Returns (what PPO
    starts from, the SFT adapter or None)."""
    from models.training.sft import run_sft  # loads torch: only when training runs

    profile, s2 = run.profile, run.profile.stage2
    warm_started = index == 0 and init is not None
    if domain not in profile.sft_domains or s2.cascade_sft_steps <= 0 or warm_started:
        return init, None
    sft_dir = stage_dir / "sft"
    if not (sft_dir / "adapter" / "adapter_config.json").is_file():
        traces = filter_traces(stage1.teacher_traces(domain, profile), profile.trace_min_reward)
        if not traces:
            raise ValueError(f"{domain}: no teacher traces above reward {profile.trace_min_reward} to mix in")
        run_sft(
            run.base_model_dir,
            [t.messages for t in traces],
            sft_dir,
            replace(profile.sft, max_steps=s2.cascade_sft_steps),
            init_adapter_dir=init,
        )
    return sft_dir / "adapter", sft_dir / "adapter"


def _stage_ppo(run: _CascadeRun, index: int, domain: str, stage_dir: Path, init: Path | None) -> PPOResult:
    """The stage's PPO (the profile's PPO for the domain, sized by the stage-2 settings), checkpointing every
    `cascade_checkpoint_every` iterations; its last served version is unloaded (its checkpoints are served
    under their own names next)."""
    from models.training.ppo import train_ppo  # loads torch: only when training runs

    s2 = run.profile.stage2.resolved(run.profile)
    base_config = run.profile.ppo_for(domain)
    config = replace(
        base_config,
        run_name=f"cascade-{run.attempt}-s{index}",
        iterations=s2.cascade_ppo_iterations,
        episodes_per_iteration=s2.cascade_episodes_per_iteration,
        keep_checkpoints=max(1, s2.cascade_ppo_iterations // s2.cascade_checkpoint_every),
        checkpoint_every=s2.cascade_checkpoint_every,
        critic_warmup_iterations=min(base_config.critic_warmup_iterations, s2.cascade_ppo_iterations - 1),
    )
    result: PPOResult = train_ppo(
        config, run.base_model_dir, run.services, stage_dir / "ppo", run.critic_model_dir, init
    )
    if result.served_name in run.services.engine.models():
        run.services.engine.unload_adapter(result.served_name)
    return result


def _keep_best_checkpoint(
    run: _CascadeRun, index: int, stage_dir: Path, seen: Sequence[str]
) -> tuple[tuple[CandidateScore, ...], CandidateScore, Path, str]:
    """Every checkpoint the stage's PPO kept, probed on the domains seen so far; the best is copied to
    `chosen/` and stays served, the others are unloaded. Returns (candidates, the chosen one, its copy, its
    served name)."""
    engine = run.services.engine
    checkpoints = ppo_checkpoints(stage_dir / "ppo")
    served = {
        name: serve(engine, f"cascade-{run.attempt}-s{index}-{name}", path, f"cascade stage {index}")
        for name, path in checkpoints
    }
    probes = probe_rewards(run.profile, run.services.proxy_base_url, served, seen, api_key=run.services.proxy_api_key)
    candidates = score_candidates(checkpoints, probes, seen)
    chosen = best_checkpoint(candidates)
    keep = stage_dir / "chosen"
    if keep.exists():
        shutil.rmtree(keep)
    shutil.copytree(chosen.adapter, keep)
    for name in served.values():
        if name != served[chosen.checkpoint]:
            engine.unload_adapter(name)
    return candidates, chosen, keep, served[chosen.checkpoint]


def _register_cascade(
    tracker: Tracker, run: _CascadeRun, stages: Sequence[CascadeStage], png: bytes, final: Path
) -> tuple[str, int]:
    """One MLflow run with the per-stage held-out curve, then `socialrl-cascade` registered from its adapter;
    returns (MLflow run id, version)."""
    params = {
        "profile": run.profile.name,
        "order": ",".join(run.order),
        "stage2": dataclasses.asdict(run.profile.stage2),
    }
    with tracker.start_run("cascade", params=params) as mlflow_run:
        for stage in stages:
            mlflow_run.log_metrics(
                stage.index,
                {
                    **{f"heldout/{short(s.env_id)}": s.mean for s in stage.heldout},
                    "heldout/mean": pooled(stage.heldout).mean,
                    "probe/best_mean_seen": max(c.mean_seen for c in stage.candidates),
                },
            )
        mlflow_run.log_file("cascade_curve.png", png, "plots")
        mlflow_run.log_file("stages.json", json.dumps([s.to_json() for s in stages], indent=1, default=str), "tables")
        mlflow_run.log_artifact_dir(final, "adapter")
        mlflow_run_id = mlflow_run.run_id
    version = tracker.register_adapter(mlflow_run_id, "adapter", CASCADE_MODEL, tags={DOMAINS_TAG: ",".join(run.order)})
    return mlflow_run_id, version
