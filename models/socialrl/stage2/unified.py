"""The unified evaluation: base, SFT, each specialist on its own domain, cascade and MOPD on the same held-out
episodes, per domain and on average, with paired differences to the base and to the best trivial code
baseline (a rule such as "accept the first offer", played on the same episodes); promotes the unified
policies."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from models.evaluation.stats import Estimate
from models.plots import grouped_bars
from models.socialrl.stage2.scores import (
    BASE,
    BASELINE_PREFIX,
    CASCADE,
    CASCADE_MODEL,
    MOPD,
    MOPD_MODEL,
    PolicyScores,
    pooled,
    sft_policy,
    short,
    specialist_policy,
)
from models.socialrl.stage2.transfer import TransferMatrix
from models.storage import TableStore
from models.tracking import Tracker

UNIFIED_POLICIES = ("base", "sft", "specialist", CASCADE, MOPD)
"""The served policies of the unified table: the base model, each domain's SFT warm-start and specialist on
its own domain, the cascade policy and the MOPD student (the code baselines' rows follow them)."""
TRAINED_POLICIES = ("sft", "specialist", CASCADE, MOPD)
"""The rows compared with the best trivial baseline."""
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
    vs_best_baseline: Estimate | None = None
    """Trained policies: paired difference to the best trivial baseline on the same episodes (None otherwise)."""
    best_baseline: str = ""
    """That baseline: the one with the highest mean on these episodes (on a domain's plan, or pooled over the
    policy's domains for the mean row), so the comparison favours the rule."""


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

    def baselines(self) -> list[str]:
        """The code baselines' policy labels, in row order."""
        return list(dict.fromkeys(r.policy for r in self.rows if r.policy.startswith(BASELINE_PREFIX)))

    def vs_best_baseline_json(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Trained policy -> domain (and "mean") -> the paired difference to the best baseline {mean, ci_low,
        ci_high, n, baseline}."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for r in self.rows:
            if r.vs_best_baseline is not None:
                out.setdefault(r.policy, {})[r.env_id] = {**r.vs_best_baseline.as_dict(), "baseline": r.best_baseline}
        return out

    def markdown(self) -> str:
        columns = [*self.domains, MEAN]
        lines = [
            "| policy | " + " | ".join(short(c) for c in columns) + " |",
            "|---|" + "---|" * len(columns),
        ]
        for policy in (*UNIFIED_POLICIES, *self.baselines()):
            cells = []
            for column in columns:
                try:
                    r = self.row(policy, column)
                except KeyError:
                    cells.append("-")
                    continue
                e, d = r.estimate, r.vs_base
                diff = "" if policy == "base" else f"<br>Δ {d.text('+.3f')}"
                if r.vs_best_baseline is not None:
                    rule = r.best_baseline.removeprefix(BASELINE_PREFIX)
                    diff += f"<br>Δ {rule} {r.vs_best_baseline.text('+.3f')}"
                cells.append(f"{e.text()}{diff}")
            lines.append(f"| {policy} | " + " | ".join(cells) + " |")
        n = next((r.estimate.n for r in self.rows if r.env_id != MEAN), 0)
        lines.append(
            f"\nMean reward [95% bootstrap CI by scenario], n = {n} held-out episodes per domain; Δ = paired "
            "difference to the base model on the same episodes; Δ <rule> = paired difference to the best trivial "
            "baseline there (chosen on these episodes)."
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
                "best_baseline": r.best_baseline or None,
                "vs_best_baseline_mean": r.vs_best_baseline.mean if r.vs_best_baseline else None,
                "vs_best_baseline_ci_low": r.vs_best_baseline.ci_low if r.vs_best_baseline else None,
                "vs_best_baseline_ci_high": r.vs_best_baseline.ci_high if r.vs_best_baseline else None,
                "created_at": now,
            }
            for r in self.rows
        ]


def unified_policies(
    matrix: TransferMatrix,
    cascade: Sequence[PolicyScores],
    mopd: Sequence[PolicyScores],
    baselines: Sequence[PolicyScores] = (),
) -> dict[str, list[PolicyScores]]:
    """Policy -> its held-out scores per domain (SFT and specialists each on their own domain; each code
    baseline on every domain)."""
    domains = matrix.domains
    policies = {
        "base": [matrix.scores_of(BASE, d) for d in domains],
        "sft": [s for d in domains for s in matrix.scores if s.policy == sft_policy(d) and s.env_id == d],
        "specialist": [matrix.scores_of(specialist_policy(d), d) for d in domains],
        CASCADE: list(cascade),
        MOPD: list(mopd),
    }
    for s in baselines:
        if not s.policy.startswith(BASELINE_PREFIX):
            raise ValueError(f"{s.policy}: a baseline's label starts with {BASELINE_PREFIX!r}")
        policies.setdefault(s.policy, []).append(s)
    for policy, scores in policies.items():
        if policy != "sft" and sorted(s.env_id for s in scores) != sorted(domains):
            raise ValueError(f"{policy}: evaluated on {sorted(s.env_id for s in scores)}, expected {sorted(domains)}")
    return policies


def _best(candidates: Sequence[PolicyScores]) -> PolicyScores | None:
    """The baseline with the highest mean (the first listed on a tie), None without one."""
    return max(candidates, key=lambda s: s.mean) if candidates else None


def unified_evaluation(
    matrix: TransferMatrix,
    cascade: Sequence[PolicyScores],
    mopd: Sequence[PolicyScores],
    baselines: Sequence[PolicyScores],
    registered: Mapping[str, int | None],
    store: TableStore | None,
    tracker: Tracker | None,
    run_id: str,
) -> UnifiedEvaluation:
    """One table and one bar chart over the same held-out episodes: base, SFT, each specialist on its own
    domain, cascade, MOPD and the trivial code `baselines` (`evaluate_baselines`), per domain and on average,
    each with its CI and its paired difference to the base; the trained policies also with their paired
    difference to the best baseline. `registered` (model name -> version) are moved to `champion` when their
    mean beats the champion's."""
    policies = unified_policies(matrix, cascade, mopd, baselines)
    base = {s.env_id: s for s in policies["base"]}
    rules = [p for p in policies if p.startswith(BASELINE_PREFIX)]
    rows = []
    for policy, scores in policies.items():
        if not scores:
            continue
        trained = policy in TRAINED_POLICIES and bool(rules)
        for s in sorted(scores, key=lambda s: matrix.domains.index(s.env_id)):
            row = UnifiedRow(policy, s.env_id, s.model, s.estimate(), s.minus(base[s.env_id]))
            best = _best([r for p in rules for r in policies[p] if r.env_id == s.env_id]) if trained else None
            if best is not None:
                row = replace(row, vs_best_baseline=s.minus(best), best_baseline=best.policy)
            rows.append(row)
        mine = pooled(scores)
        theirs = pooled([base[s.env_id] for s in scores])
        row = UnifiedRow(policy, MEAN, mine.model, mine.estimate(), mine.minus(theirs))
        if trained:
            domains = {s.env_id for s in scores}
            pooled_rules = [pooled([r for r in policies[p] if r.env_id in domains]) for p in rules]
            best = _best(pooled_rules)
            if best is not None:
                row = replace(row, vs_best_baseline=mine.minus(best), best_baseline=best.policy)
        rows.append(row)
    groups = [*matrix.domains, MEAN]
    bars = {}
    for policy in (*UNIFIED_POLICIES, *rules):
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
