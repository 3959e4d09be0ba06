"""Stage 2 of SocialRL as plain functions (the Dagster assets in assets/stage2.py call these): the transfer
matrix, the cascade order, the transfer-aware cascade policy, the MOPD student and the unified evaluation.

Every policy is evaluated with one plan per domain (the stage-2 held-out scenarios, counterparts and seeds,
`evaluation_profile`), so any two policies are paired episode by episode; their per-episode rewards are
kept as `PolicyScores`, and every difference is `models.evaluation.stats.paired_difference` (mean of the
per-episode differences, bootstrap CI resampling scenarios).

| quantity | definition |
| --- | --- |
| transfer cell (donor, recipient) | paired difference, on the recipient's held-out plan, donor's specialist (or SFT warm-start) minus the base model |
| donor effect | mean of a specialist donor's cells on the *other* domains; > 0 a positive donor, < 0 a negative (destructive) one |
| cascade-order score | see `order_score`: backward transfer of every later stage onto every earlier domain, plus `adjacency_weight` x the mutual benefit of consecutive domains |
| cascade checkpoint rule | after each stage, the checkpoint (of that stage's PPO) with the best mean validation-probe reward over the domains seen so far (the paper's rule) |
| MOPD gap of domain d | (teacher_d - student_d) / (teacher_d - base_d) on the validation probe (models/training/mopd.py) |
| recovered share of domain d | (student_d - base_d) / (specialist_d - base_d) on the held-out plan, each a paired difference vs the base; undefined where the specialist does not beat the base by more than `min_advantage` |

The validation probe (`probe_rewards`) plays a few scenarios of the *training* split (never held out) against
`probe_counterparts`; it picks cascade checkpoints and steers the MOPD curriculum, so no held-out episode
informs training. Held-out evaluations only report.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agents.traces import filter_traces
from environments import Scenario
from models.evaluation.policy import EvaluationResult, store_evaluation
from models.evaluation.scenarios import training_scenarios
from models.evaluation.stats import Estimate, mean_estimate, paired_difference
from models.plots import Series, grouped_bars, heatmap, line_with_band
from models.profiles import Profile
from models.serving.engine import EngineClient, EngineError
from models.socialrl import stage1
from models.storage import TableStore
from models.tracking import RegistryError, Tracker
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
BASE = "base"
CASCADE = "cascade"
MOPD = "mopd"
CASCADE_MODEL = "socialrl-cascade"
"""Registry name of the cascade policy."""
MOPD_MODEL = "socialrl-mopd"
"""Registry name of the MOPD student."""
DOMAINS_TAG = "socialrl.domains"
"""Model-version tag: the comma-separated domains a multi-domain policy was trained and evaluated on."""
REWARD_BOUNDS = (0.0, 1.0)


class MissingSpecialistError(LookupError):
    """A stage-2 domain has no registered specialist."""


def specialist_policy(env_id: str) -> str:
    return f"specialist:{env_id}"


def sft_policy(env_id: str) -> str:
    return f"sft:{env_id}"


def short(env_id: str) -> str:
    return env_id.removesuffix("-v0")


# ------------------------------------------------------------------------------------------ scores
@dataclass(frozen=True)
class PolicyScores:
    """One policy's per-episode rewards on one domain's evaluation plan: the data behind every cell, bar and
    interval of stage 2. Two PolicyScores of one plan share their keys (the episodes' pair keys)."""

    policy: str
    """"base", "specialist:<env>", "sft:<env>", "cascade", "mopd" (or "<policy>@<stage>" for curves)."""
    env_id: str
    """The domain evaluated ("*" for several domains pooled)."""
    model: str
    """The served model or adapter name."""
    keys: tuple[str, ...]
    """Pair key of each episode (scenario index, scenario id, counterpart, seat, seed)."""
    clusters: tuple[str, ...]
    """Bootstrap cluster of each episode (the scenario)."""
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
            tuple(f"{result.env_id}|{e.scenario_index}" for e in episodes),
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


# ------------------------------------------------------------------------------------- evaluation plans
def evaluation_profile(profile: Profile) -> Profile:
    """The profile as every stage-2 held-out evaluation sees it (stage-2 scenario count and counterparts)."""
    s = profile.stage2
    return replace(
        profile,
        heldout_scenarios=s.heldout_scenarios or profile.heldout_scenarios,
        eval_counterparts=s.eval_counterparts or profile.eval_counterparts,
    )


def probe_scenarios(env_id: str, profile: Profile) -> list[Scenario]:
    """The validation probe's scenarios of a domain: from the training split, never held out."""
    return training_scenarios(env_id, profile.stage2.probe_scenarios, profile.stage2.probe_seed)


def _parallel(jobs: Sequence[Callable[[], Any]], workers: int) -> list[Any]:
    """Run evaluation jobs in threads (each runs its own event loop), so several policies' and domains'
    episodes reach the engine together and batch there."""
    if len(jobs) <= 1 or workers <= 1:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: job(), jobs))


def evaluate_policies(
    profile: Profile,
    base_url: str,
    policies: Mapping[str, str],
    domains: Sequence[str],
    store: TableStore | None = None,
    run_id: str = "stage2",
    pairs: Iterable[tuple[str, str]] | None = None,
    api_key: str | None = None,
) -> list[PolicyScores]:
    """Every policy (label -> served model name) on every domain's held-out plan (or only the given
    (label, domain) pairs); the evaluations go to the `evaluations` and episode tables when `store` is given.
    `api_key` is the proxy's token."""
    plan_profile = evaluation_profile(profile)
    wanted = list(pairs) if pairs is not None else [(p, d) for p in policies for d in domains]

    def job(label: str, domain: str) -> Callable[[], PolicyScores]:
        def run() -> PolicyScores:
            start = time.perf_counter()
            model = policies[label]
            result = stage1.evaluate_model(
                domain, plan_profile, base_url, model, seed=profile.stage2.eval_seed, api_key=api_key
            )
            if store is not None:
                store_evaluation(store, result, f"stage2:{label}@{domain}", f"{run_id}:{label}@{domain}")
            scores = PolicyScores.from_result(label, model, result)
            log.info(
                "held-out %s on %s: mean %.3f over %d episodes (%.0f s)",
                label,
                domain,
                scores.mean,
                len(scores.rewards),
                time.perf_counter() - start,
            )
            return scores

        return run

    return _parallel([job(p, d) for p, d in wanted], profile.stage2.parallel_evaluations)


def probe_rewards(
    profile: Profile,
    base_url: str,
    models: Mapping[str, str],
    domains: Sequence[str],
    pairs: Iterable[tuple[str, str]] | None = None,
    api_key: str | None = None,
) -> dict[str, dict[str, float]]:
    """Mean validation-probe reward of every model (label -> served name) on every domain (or only the given
    (label, domain) pairs): label -> domain -> mean. `api_key` is the proxy's token."""
    probe = replace(profile, eval_counterparts=profile.stage2.probe_counterparts)
    wanted = list(pairs) if pairs is not None else [(label, d) for label in models for d in domains]

    def job(label: str, domain: str) -> Callable[[], tuple[str, str, float]]:
        def run() -> tuple[str, str, float]:
            result = stage1.evaluate_model(
                domain,
                probe,
                base_url,
                models[label],
                seed=profile.stage2.probe_seed,
                scenarios=probe_scenarios(domain, profile),
                api_key=api_key,
            )
            return label, domain, float(result.summary.mean_reward)

        return run

    out: dict[str, dict[str, float]] = {label: {} for label in models}
    for label, domain, mean in _parallel([job(label, d) for label, d in wanted], profile.stage2.parallel_evaluations):
        out[label][domain] = mean
    return out


# ------------------------------------------------------------------------------------ registered models
@dataclass(frozen=True)
class DomainAdapters:
    """A domain's registered specialist and its SFT warm-start (when one was trained)."""

    env_id: str
    specialist: str
    """Registry reference, e.g. "socialrl-dnd-specialist v3 (champion)"."""
    specialist_path: Path
    sft_path: Path | None
    """The newest finished `sft-<domain>` MLflow run's adapter with this profile, if any."""


def registered_adapters(tracker: Tracker, domains: Sequence[str], profile_name: str) -> dict[str, DomainAdapters]:
    """Each domain's specialist (alias champion, else candidate) and SFT warm-start; a domain without a
    registered specialist raises MissingSpecialistError naming it (before anything else runs)."""
    out: dict[str, DomainAdapters] = {}
    missing = []
    for env_id in domains:
        name = stage1.registered_name(env_id)
        local = None
        for alias in ("champion", "candidate"):
            try:
                local = tracker.lookup(name, alias=alias)
                break
            except RegistryError:
                continue
        if local is None:
            missing.append(env_id)
            continue
        sft = tracker.latest_run_artifact(f"sft-{env_id}", "adapter", {"profile": profile_name, "env_id": env_id})
        out[env_id] = DomainAdapters(
            env_id, f"{name} v{local.version} ({', '.join(local.aliases) or 'no alias'})", local.path, sft
        )
    if missing:
        raise MissingSpecialistError(
            "no registered specialist for "
            + ", ".join(f"{d} ({stage1.registered_name(d)})" for d in missing)
            + ": run stage 1 for "
            + ",".join(missing)
            + " first (make run DOMAINS=...)"
        )
    return out


def serve(engine: EngineClient, name: str, path: Path, what: str) -> str:
    """Load an adapter into the engine under `name`; a refusal names `what` (e.g. the domain's teacher)."""
    try:
        return stage1.serve_adapter(engine, name, path).name
    except EngineError as exc:
        raise EngineError(f"{what}: the engine cannot load the adapter at {path}: {exc}") from exc


# -------------------------------------------------------------------------------------- transfer matrix
@dataclass(frozen=True)
class TransferCell:
    """Paired difference, on the recipient's held-out plan, between the donor's policy and the base model."""

    donor: str
    """The donor domain."""
    kind: str
    """"specialist" or "sft" (the donor's SFT warm-start)."""
    recipient: str
    difference: Estimate
    """Mean per-episode reward difference donor - base, bootstrap CI by scenario, n episodes."""
    donor_mean: float
    base_mean: float


@dataclass(frozen=True)
class TransferMatrix:
    """The measured transfer between domains (see the module docstring)."""

    domains: tuple[str, ...]
    cells: tuple[TransferCell, ...]
    scores: tuple[PolicyScores, ...]
    """Every evaluation behind the cells (base, specialists and SFT warm-starts on every domain)."""

    def cell(self, donor: str, recipient: str, kind: str = "specialist") -> TransferCell:
        for c in self.cells:
            if (c.donor, c.recipient, c.kind) == (donor, recipient, kind):
                return c
        raise KeyError(f"no {kind} cell ({donor}, {recipient})")

    def kinds(self) -> tuple[str, ...]:
        return tuple(k for k in ("specialist", "sft") if any(c.kind == k for c in self.cells))

    def donors(self, kind: str = "specialist") -> tuple[str, ...]:
        return tuple(d for d in self.domains if any(c.donor == d and c.kind == kind for c in self.cells))

    def means(self, kind: str = "specialist") -> dict[str, dict[str, float]]:
        """donor -> recipient -> mean paired difference."""
        return {d: {r: self.cell(d, r, kind).difference.mean for r in self.domains} for d in self.donors(kind)}

    def as_json(self, kind: str = "specialist") -> dict[str, dict[str, dict[str, Any]]]:
        """donor -> recipient -> {mean, ci_low, ci_high, n} (JSON-safe)."""
        return {d: {r: self.cell(d, r, kind).difference.as_dict() for r in self.domains} for d in self.donors(kind)}

    def scores_of(self, policy: str, env_id: str) -> PolicyScores:
        for s in self.scores:
            if (s.policy, s.env_id) == (policy, env_id):
                return s
        raise KeyError(f"no evaluation of {policy} on {env_id}")

    def donor_effects(self) -> dict[str, float]:
        """Each specialist donor's mean transfer to the other domains (NaN cells skipped)."""
        effects = {}
        for donor, row in self.means().items():
            others = [v for r, v in row.items() if r != donor and math.isfinite(v)]
            effects[donor] = sum(others) / len(others) if others else math.nan
        return effects

    def describe_donors(self) -> str:
        """The positive and negative donors and the cells whose interval excludes 0, as text."""
        effects = self.donor_effects()
        positive = sorted((d for d, v in effects.items() if v > 0), key=lambda d: -effects[d])
        negative = sorted((d for d, v in effects.items() if v < 0), key=lambda d: effects[d])

        def names(domains: list[str]) -> str:
            return ", ".join(f"{short(d)} ({effects[d]:+.3f})" for d in domains) or "none"

        significant = [
            f"{short(c.donor)} -> {short(c.recipient)} {c.difference.mean:+.3f} "
            f"[{c.difference.ci_low:+.3f}, {c.difference.ci_high:+.3f}]"
            for c in self.cells
            if c.kind == "specialist" and c.donor != c.recipient and c.difference.excludes_zero()
        ]
        return (
            f"Positive donors (mean transfer to the other domains > 0): {names(positive)}.  \n"
            f"Negative donors (< 0): {names(negative)}.  \n"
            f"Cross-domain cells whose 95% CI excludes 0: {'; '.join(significant) or 'none'}."
        )

    def rows(self, run_id: str) -> list[dict[str, Any]]:
        """Rows of table `transfer_matrix`."""
        now = datetime.now(UTC).replace(tzinfo=None)
        return [
            {
                "run_id": run_id,
                "donor": c.donor,
                "donor_kind": c.kind,
                "recipient": c.recipient,
                "mean": c.difference.mean,
                "ci_low": c.difference.ci_low,
                "ci_high": c.difference.ci_high,
                "n": c.difference.n,
                "clusters": c.difference.clusters,
                "donor_mean": c.donor_mean,
                "base_mean": c.base_mean,
                "created_at": now,
            }
            for c in self.cells
        ]


def build_transfer_matrix(scores: Sequence[PolicyScores], domains: Sequence[str]) -> TransferMatrix:
    """Cells from evaluations: every specialist (required) and SFT warm-start (where evaluated) minus the base,
    paired on each recipient's plan."""
    index = {(s.policy, s.env_id): s for s in scores}
    missing_base = [d for d in domains if (BASE, d) not in index]
    if missing_base:
        raise ValueError(f"no base-model evaluation on {missing_base}")
    cells = []
    for kind, label in (("specialist", specialist_policy), ("sft", sft_policy)):
        for donor in domains:
            have = [r for r in domains if (label(donor), r) in index]
            if kind == "specialist" and len(have) < len(domains):
                raise ValueError(f"specialist of {donor} not evaluated on {sorted(set(domains) - set(have))}")
            for recipient in have:
                donor_scores, base = index[(label(donor), recipient)], index[(BASE, recipient)]
                cells.append(
                    TransferCell(donor, kind, recipient, donor_scores.minus(base), donor_scores.mean, base.mean)
                )
    return TransferMatrix(tuple(domains), tuple(cells), tuple(scores))


def transfer_heatmap(matrix: TransferMatrix) -> bytes:
    rows, values, notes = [], [], []
    for kind in matrix.kinds():
        for donor in matrix.donors(kind):
            rows.append(short(donor) if kind == "specialist" else f"{short(donor)} (SFT)")
            row_values, row_notes = [], []
            for recipient in matrix.domains:
                try:
                    e = matrix.cell(donor, recipient, kind).difference
                except KeyError:
                    row_values.append(None)
                    row_notes.append("")
                    continue
                row_values.append(e.mean)
                ci = "" if math.isnan(e.ci_low) else f"\n[{e.ci_low:+.2f}, {e.ci_high:+.2f}]"
                row_notes.append(f"{e.mean:+.2f}{ci}")
            values.append(row_values)
            notes.append(row_notes)
    return heatmap(
        values,
        rows,
        [short(d) for d in matrix.domains],
        "Transfer: donor policy - base, paired on the recipient's held-out episodes",
        "recipient domain",
        "donor",
        notes,
    )


@dataclass(frozen=True)
class TransferMatrixResult:
    """What the `transfer_matrix` asset produced."""

    matrix: TransferMatrix
    specialists: dict[str, str]
    """Domain -> the registered specialist used."""
    sft_domains: tuple[str, ...]
    """Domains whose SFT warm-start was found and evaluated."""
    heatmap_png: bytes
    mlflow_run_id: str | None
    wall_s: float


def compute_transfer_matrix(
    profile: Profile,
    domains: Sequence[str],
    services: Services,
    tracker: Tracker,
    base_model: str,
    run_id: str,
) -> TransferMatrixResult:
    """Every registered specialist and SFT warm-start, and the base model, on every domain's held-out plan;
    cells, heatmap (MLflow artifact) and the `transfer_matrix` table rows."""
    start = time.perf_counter()
    adapters = registered_adapters(tracker, domains, profile.name)  # fails first, naming a missing domain
    policies = {BASE: base_model}
    for env_id, a in adapters.items():
        policies[specialist_policy(env_id)] = serve(
            services.engine, f"s2-{short(env_id)}-specialist", a.specialist_path, f"{env_id} specialist"
        )
        if a.sft_path is not None:
            policies[sft_policy(env_id)] = serve(
                services.engine, f"s2-{short(env_id)}-sft", a.sft_path, f"{env_id} SFT warm-start"
            )
    log.info("transfer matrix: %d policies x %d domains", len(policies), len(domains))
    scores = evaluate_policies(
        profile, services.proxy_base_url, policies, domains, services.store, run_id, api_key=services.proxy_api_key
    )
    matrix = build_transfer_matrix(scores, domains)
    png = transfer_heatmap(matrix)
    services.store.append("transfer_matrix", matrix.rows(run_id))
    params = {"profile": profile.name, "domains": ",".join(domains), "stage2": dataclasses.asdict(profile.stage2)}
    with tracker.start_run("transfer-matrix", params=params) as run:
        run.log_metrics(
            0,
            {
                f"transfer/{short(c.donor)}{'' if c.kind == 'specialist' else '-sft'}/{short(c.recipient)}": c.difference.mean
                for c in matrix.cells
                if math.isfinite(c.difference.mean)
            },
        )
        run.log_file("transfer_matrix.png", png, "plots")
        run.log_file("transfer_matrix.json", json.dumps(matrix.as_json(), indent=1), "tables")
        mlflow_run_id = run.run_id
    return TransferMatrixResult(
        matrix,
        {d: a.specialist for d, a in adapters.items()},
        tuple(d for d, a in adapters.items() if a.sft_path is not None),
        png,
        mlflow_run_id,
        time.perf_counter() - start,
    )


# ---------------------------------------------------------------------------------------- cascade order
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


@dataclass(frozen=True)
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
    rule: str = ORDER_RULE


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
        best.order,
        best,
        order_score(start, transfer, adjacency_weight),
        order_score(start[::-1], transfer, adjacency_weight),
        tuple(ranked),
        len(scored),
    )


# ---------------------------------------------------------------------------------------- cascade policy
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


@dataclass(frozen=True)
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
            data["index"],
            data["domain"],
            data["init_adapter"],
            data["sft_adapter"],
            tuple(data["ppo_rewards"]),
            tuple(
                CandidateScore(c["checkpoint"], Path(c["adapter"]), dict(c["probe"]), float(c["mean_seen"]))
                for c in data["candidates"]
            ),
            data["chosen"],
            Path(data["adapter"]),
            tuple(PolicyScores.from_dict(s) for s in data["heldout"]),
            float(data["wall_s"]),
        )


@dataclass(frozen=True)
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
    from models.training.ppo import train_ppo  # loads torch: only when training runs
    from models.training.sft import run_sft

    start_all = time.perf_counter()
    s2 = profile.stage2
    output.mkdir(parents=True, exist_ok=True)
    attempt = uuid.uuid4().hex[:6]  # distinct episode/adapter names per attempt (a resumed stage re-runs one)
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
            stages.append(stage)
            previous = stage.adapter
            resumed += 1
            log.info("cascade stage %d (%s): finished by an earlier attempt, kept", index, domain)
            continue
        stage_start = time.perf_counter()
        stage_dir.mkdir(parents=True, exist_ok=True)
        init = previous
        sft_adapter = None
        warm_started = index == 0 and init is not None  # the first domain's own stage-1 SFT warm-start
        if domain in profile.sft_domains and s2.cascade_sft_steps > 0 and not warm_started:
            sft_dir = stage_dir / "sft"
            if not (sft_dir / "adapter" / "adapter_config.json").is_file():
                traces = filter_traces(stage1.teacher_traces(domain, profile), profile.trace_min_reward)
                if not traces:
                    raise ValueError(f"{domain}: no teacher traces above reward {profile.trace_min_reward} to mix in")
                run_sft(
                    base_model_dir,
                    [t.messages for t in traces],
                    sft_dir,
                    replace(profile.sft, max_steps=s2.cascade_sft_steps),
                    init_adapter_dir=init,
                )
            sft_adapter = sft_dir / "adapter"
            init = sft_adapter
        base_config = profile.ppo_for(domain)
        config = replace(
            base_config,
            run_name=f"cascade-{attempt}-s{index}",
            iterations=s2.cascade_ppo_iterations,
            episodes_per_iteration=s2.cascade_episodes_per_iteration or base_config.episodes_per_iteration,
            keep_checkpoints=max(1, s2.cascade_ppo_iterations // s2.cascade_checkpoint_every),
            checkpoint_every=s2.cascade_checkpoint_every,
            critic_warmup_iterations=min(base_config.critic_warmup_iterations, s2.cascade_ppo_iterations - 1),
        )
        result: PPOResult = train_ppo(config, base_model_dir, services, stage_dir / "ppo", critic_model_dir, init)
        if result.served_name in services.engine.models():  # its checkpoints are served below under their names
            services.engine.unload_adapter(result.served_name)
        seen = list(order[: index + 1])
        checkpoints = ppo_checkpoints(stage_dir / "ppo")
        served = {
            name: serve(services.engine, f"cascade-{attempt}-s{index}-{name}", path, f"cascade stage {index}")
            for name, path in checkpoints
        }
        probes = probe_rewards(profile, services.proxy_base_url, served, seen, api_key=services.proxy_api_key)
        candidates = score_candidates(checkpoints, probes, seen)
        chosen = best_checkpoint(candidates)
        keep = stage_dir / "chosen"
        if keep.exists():
            shutil.rmtree(keep)
        shutil.copytree(chosen.adapter, keep)
        for name in served.values():
            if name != served[chosen.checkpoint]:
                services.engine.unload_adapter(name)
        heldout = evaluate_policies(
            profile,
            services.proxy_base_url,
            {f"{CASCADE}@stage{index}": served[chosen.checkpoint]},
            order,
            services.store,
            f"{run_id}:stage{index}",
            api_key=services.proxy_api_key,
        )
        services.engine.unload_adapter(served[chosen.checkpoint])
        stage = CascadeStage(
            index,
            domain,
            str(init) if init else None,
            str(sft_adapter) if sft_adapter else None,
            tuple(float(m["reward_mean"]) for m in result.history),
            candidates,
            chosen.checkpoint,
            keep,
            tuple(heldout),
            time.perf_counter() - stage_start,
        )
        _atomic_json(record, stage.to_json())
        stages.append(stage)
        previous = keep
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
    final = output / "adapter"
    if final.exists():
        shutil.rmtree(final)
    shutil.copytree(stages[-1].adapter, final)
    scores = tuple(replace(s, policy=CASCADE) for s in stages[-1].heldout)
    png = cascade_curve_png(order, stages)
    name = version = mlflow_run_id = None
    if tracker is not None:
        params = {"profile": profile.name, "order": ",".join(order), "stage2": dataclasses.asdict(s2)}
        with tracker.start_run("cascade", params=params) as run:
            for stage in stages:
                run.log_metrics(
                    stage.index,
                    {
                        **{f"heldout/{short(s.env_id)}": s.mean for s in stage.heldout},
                        "heldout/mean": pooled(stage.heldout).mean,
                        "probe/best_mean_seen": max(c.mean_seen for c in stage.candidates),
                    },
                )
            run.log_file("cascade_curve.png", png, "plots")
            run.log_file("stages.json", json.dumps([s.to_json() for s in stages], indent=1, default=str), "tables")
            run.log_artifact_dir(final, "adapter")
            mlflow_run_id = run.run_id
        name = CASCADE_MODEL
        version = tracker.register_adapter(mlflow_run_id, "adapter", name, tags={DOMAINS_TAG: ",".join(order)})
    return CascadeResult(
        tuple(order),
        tuple(stages),
        final,
        scores,
        name,
        version,
        mlflow_run_id,
        png,
        resumed,
        time.perf_counter() - start_all,
    )


# ------------------------------------------------------------------------------------------- MOPD student
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
    from models.training.mopd import curriculum_gaps, train_mopd

    start = time.perf_counter()
    s2 = profile.stage2
    domains = matrix.domains
    if tracker is None:
        raise ValueError("MOPD needs the registry: its teachers are the registered specialists")
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

        def on_step(metrics: dict[str, Any]) -> None:
            run.log_metrics(
                int(metrics["step"]),
                {
                    k.replace("/", "_"): float(v)
                    for k, v in metrics.items()
                    if isinstance(v, int | float) and not isinstance(v, bool) and k != "step" and math.isfinite(v)
                },
            )

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
            on_step=on_step,
        )
        served_final = result.served_name
        final_probe = probe(served_final)
        teacher_targets = {d: targets[d][0] for d in domains}
        base_targets = {d: targets[d][1] for d in domains}
        curve = [
            (int(m["step"]), {d: m.get(f"gap/{d}") for d in domains})
            for m in result.history
            if int(m["step"]) % config.curriculum_every == 0
        ]
        curve.append(
            (len(result.history), curriculum_gaps(teacher_targets, base_targets, final_probe, s2.min_advantage))
        )
        scores = tuple(
            replace(s, policy=MOPD)
            for s in evaluate_policies(
                profile,
                services.proxy_base_url,
                {MOPD: served_final},
                domains,
                services.store,
                run_id,
                api_key=services.proxy_api_key,
            )
        )
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
        run.log_metrics(
            len(result.history),
            {
                **{f"heldout_{short(s.env_id)}": s.mean for s in scores},
                **{f"recovered_{short(d)}": v for d, v in recovered.items() if v is not None},
                **({"recovered_mean": share} if share is not None else {}),
            },
        )
        run.log_file("mopd_gaps.png", png, "plots")
        run.log_artifact_dir(result.adapter_dir, "adapter")
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


# ------------------------------------------------------------------------------------- unified evaluation
UNIFIED_POLICIES = ("base", "sft", "specialist", CASCADE, MOPD)
"""Rows of the unified table: the base model, each domain's SFT warm-start and specialist on its own domain,
the cascade policy and the MOPD student."""
MEAN = "mean"


@dataclass(frozen=True)
class UnifiedRow:
    """One policy on one domain (or the mean over its domains), with the paired difference to the base."""

    policy: str
    env_id: str
    """A domain, or "mean" (all of the policy's domains pooled; equal plan sizes make it the mean of means)."""
    models: str
    estimate: Estimate
    """Mean reward with its scenario-clustered bootstrap CI."""
    vs_base: Estimate
    """Paired difference to the base model on the same episodes."""


@dataclass(frozen=True)
class UnifiedEvaluation:
    """What the `unified_evaluation` asset produced."""

    domains: tuple[str, ...]
    rows: tuple[UnifiedRow, ...]
    bars_png: bytes
    promoted: dict[str, bool]
    """Registered model -> whether it is the champion after this evaluation."""
    mlflow_run_id: str | None

    def row(self, policy: str, env_id: str) -> UnifiedRow:
        for r in self.rows:
            if (r.policy, r.env_id) == (policy, env_id):
                return r
        raise KeyError(f"no unified row ({policy}, {env_id})")

    def as_json(self) -> dict[str, dict[str, dict[str, Any]]]:
        """policy -> domain (and "mean") -> {mean, ci_low, ci_high, n}."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for r in self.rows:
            out.setdefault(r.policy, {})[r.env_id] = r.estimate.as_dict()
        return out

    def markdown(self) -> str:
        columns = [*self.domains, MEAN]
        lines = [
            "| policy | " + " | ".join(short(c) for c in columns) + " |",
            "|---|" + "---|" * len(columns),
        ]
        for policy in UNIFIED_POLICIES:
            cells = []
            for column in columns:
                try:
                    r = self.row(policy, column)
                except KeyError:
                    cells.append("-")
                    continue
                e, d = r.estimate, r.vs_base
                diff = "" if policy == "base" else f"<br>Δ {d.mean:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}]"
                cells.append(f"{e.mean:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}]{diff}")
            lines.append(f"| {policy} | " + " | ".join(cells) + " |")
        n = next((r.estimate.n for r in self.rows if r.env_id != MEAN), 0)
        lines.append(
            f"\nMean reward [95% bootstrap CI by scenario], n = {n} held-out episodes per domain; Δ = paired "
            "difference to the base model on the same episodes."
        )
        return "\n".join(lines)

    def table_rows(self, run_id: str) -> list[dict[str, Any]]:
        """Rows of table `unified_evaluation`."""
        now = datetime.now(UTC).replace(tzinfo=None)
        return [
            {
                "run_id": run_id,
                "policy": r.policy,
                "env_id": r.env_id,
                "models": r.models,
                "mean": r.estimate.mean,
                "ci_low": r.estimate.ci_low,
                "ci_high": r.estimate.ci_high,
                "n": r.estimate.n,
                "diff_mean": r.vs_base.mean,
                "diff_ci_low": r.vs_base.ci_low,
                "diff_ci_high": r.vs_base.ci_high,
                "created_at": now,
            }
            for r in self.rows
        ]


def unified_policies(
    matrix: TransferMatrix, cascade: Sequence[PolicyScores], mopd: Sequence[PolicyScores]
) -> dict[str, list[PolicyScores]]:
    """Policy -> its held-out scores per domain (SFT and specialists each on their own domain)."""
    domains = matrix.domains
    policies = {
        "base": [matrix.scores_of(BASE, d) for d in domains],
        "sft": [s for d in domains for s in matrix.scores if s.policy == sft_policy(d) and s.env_id == d],
        "specialist": [matrix.scores_of(specialist_policy(d), d) for d in domains],
        CASCADE: list(cascade),
        MOPD: list(mopd),
    }
    for policy, scores in policies.items():
        if policy != "sft" and sorted(s.env_id for s in scores) != sorted(domains):
            raise ValueError(f"{policy}: evaluated on {sorted(s.env_id for s in scores)}, expected {sorted(domains)}")
    return policies


def unified_evaluation(
    matrix: TransferMatrix,
    cascade: Sequence[PolicyScores],
    mopd: Sequence[PolicyScores],
    registered: Mapping[str, int | None],
    store: TableStore | None,
    tracker: Tracker | None,
    run_id: str,
) -> UnifiedEvaluation:
    """One table and one bar chart over the same held-out episodes: base, SFT, each specialist on its own
    domain, cascade and MOPD, per domain and on average, each with its CI and its paired difference to the
    base. `registered` (model name -> version) are moved to `champion` when their mean beats the champion's."""
    policies = unified_policies(matrix, cascade, mopd)
    base = {s.env_id: s for s in policies["base"]}
    rows = []
    for policy, scores in policies.items():
        if not scores:
            continue
        for s in sorted(scores, key=lambda s: matrix.domains.index(s.env_id)):
            rows.append(UnifiedRow(policy, s.env_id, s.model, s.estimate(), s.minus(base[s.env_id])))
        mine = pooled(scores)
        theirs = pooled([base[s.env_id] for s in scores])
        rows.append(UnifiedRow(policy, MEAN, mine.model, mine.estimate(), mine.minus(theirs)))
    groups = [*matrix.domains, MEAN]
    bars = {}
    for policy in UNIFIED_POLICIES:
        values: list[tuple[float, float, float] | None] = []
        for group in groups:
            found = [r for r in rows if (r.policy, r.env_id) == (policy, group)]
            values.append(
                (found[0].estimate.mean, found[0].estimate.ci_low, found[0].estimate.ci_high) if found else None
            )
        if any(v is not None for v in values):
            bars[policy] = values
    png = grouped_bars(
        [short(g) for g in groups], bars, "Held-out mean reward per domain (95% CI)", "mean reward", (0.0, 1.0)
    )
    result = UnifiedEvaluation(tuple(matrix.domains), tuple(rows), png, {}, None)
    promoted: dict[str, bool] = {}
    mlflow_run_id = None
    if store is not None:
        store.append("unified_evaluation", result.table_rows(run_id))
    if tracker is not None:
        label_of = {CASCADE_MODEL: CASCADE, MOPD_MODEL: MOPD}
        for name, version in registered.items():
            if version is None:
                continue
            policy = label_of[name]
            tracker.record_evaluation(
                name, version, {f"mean_reward_{short(r.env_id)}": r.estimate.mean for r in rows if r.policy == policy}
            )
            promoted[name] = tracker.promote_if_better(
                name, version, "mean_reward", result.row(policy, MEAN).estimate.mean
            )
        with tracker.start_run("unified-evaluation", params={"domains": ",".join(matrix.domains)}) as run:
            run.log_metrics(
                0,
                {f"{r.policy}/{short(r.env_id)}": r.estimate.mean for r in rows if math.isfinite(r.estimate.mean)},
            )
            run.log_file("unified_evaluation.png", png, "plots")
            run.log_file("unified_evaluation.md", result.markdown(), "tables")
            mlflow_run_id = run.run_id
    return replace(result, promoted=promoted, mlflow_run_id=mlflow_run_id)
