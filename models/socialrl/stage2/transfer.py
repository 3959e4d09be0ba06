"""The transfer matrix: every registered specialist (and SFT warm-start) against the base model on every
domain's held-out plan, cell by cell (see the package docstring), and every specialist against each recipient's
own warm-start on the same episodes (`TransferMatrix.versus_warmstart`)."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from models.evaluation.stats import Estimate
from models.plots import heatmap
from models.profiles import Profile
from models.socialrl import stage1
from models.socialrl.stage2.plans import evaluate_policies, registered_adapters, serve
from models.socialrl.stage2.scores import BASE, PolicyScores, sft_policy, short, specialist_policy
from models.tracking import Tracker
from models.training.config import Services

log = logging.getLogger("socialrl.stage2")


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

    def versus_warmstart(self) -> dict[str, dict[str, Estimate]]:
        """donor -> recipient -> paired difference, on the recipient's held-out plan, between the donor's
        specialist and the recipient's own SFT warm-start (recipients whose warm-start was evaluated). Where the
        base scores 0 on every episode (a format it cannot follow), a cell against the base only repeats the
        donor's mean; against the warm-start the same episodes show whether a donor helps or hurts a policy that
        already plays the domain."""
        evaluated = {(s.policy, s.env_id) for s in self.scores}
        warm = {r for r in self.domains if (sft_policy(r), r) in evaluated}
        return {
            donor: {
                r: self.scores_of(specialist_policy(donor), r).minus(self.scores_of(sft_policy(r), r))
                for r in self.domains
                if r in warm
            }
            for donor in self.donors("specialist")
        }

    def versus_warmstart_json(self) -> dict[str, dict[str, dict[str, Any]]]:
        """`versus_warmstart` as donor -> recipient -> {mean, ci_low, ci_high, n} (the result file's
        `transfer_matrix_vs_warmstart`)."""
        return {d: {r: e.as_dict() for r, e in row.items()} for d, row in self.versus_warmstart().items()}

    def markdown_vs_warmstart(self) -> str:
        """`versus_warmstart` as a table (rows donors' specialists, columns recipients; "-" where the recipient
        has no evaluated warm-start)."""
        lines = self._table_head()
        for donor, row in self.versus_warmstart().items():
            texts = [f"{row[r].text('+.3f')} n={row[r].n}" if r in row else "-" for r in self.domains]
            lines.append(f"| {donor} | " + " | ".join(texts) + " |")
        return "\n".join(lines)

    def clusters_per_cell(self) -> int:
        """Scenario clusters behind a cell (the bootstrap's resampling units): the recipient plan's scenarios,
        the same for every cell when every domain's plan has one size (check `transfer_matrix_complete`);
        otherwise the smallest."""
        return min((c.difference.clusters for c in self.cells), default=0)

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
            f"{short(c.donor)} -> {short(c.recipient)} {c.difference.text('+.3f')}"
            for c in self.cells
            if c.kind == "specialist" and c.donor != c.recipient and c.difference.excludes_zero()
        ]
        return (
            f"Positive donors (mean transfer to the other domains > 0): {names(positive)}.  \n"
            f"Negative donors (< 0): {names(negative)}.  \n"
            f"Cross-domain cells whose 95% CI excludes 0: {'; '.join(significant) or 'none'}."
        )

    def _table_head(self) -> list[str]:
        """The header rows of the matrix's tables: donors down, recipients across."""
        return ["| donor | " + " | ".join(self.domains) + " |", "|---|" + "---|" * len(self.domains)]

    def markdown(self) -> str:
        """The matrix as a table (rows donors, SFT warm-starts marked, columns recipients; each cell the paired
        difference donor - base with its 95% CI and episode count): what the asset shows and run_stage2 prints."""
        lines = self._table_head()
        for kind in self.kinds():
            for donor in self.donors(kind):
                cells = []
                for recipient in self.domains:
                    try:
                        e = self.cell(donor, recipient, kind).difference
                    except KeyError:
                        cells.append("-")
                        continue
                    cells.append(f"{e.text('+.3f')} n={e.n}")
                lines.append(f"| {donor}{'' if kind == 'specialist' else ' (SFT)'} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

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
                row_notes.append(e.text("+.2f", separator="\n"))
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


@dataclass(frozen=True, kw_only=True)
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
    specialists_source: tuple[stage1.SpecialistSource, ...] = ()
    """Per domain, the registry version used and where it came from ("stage1 registry": `make run`'s, on the
    profile's held-out plan; "trained by stage 2": run_stage2's own); empty in results stored before it."""

    def sources_json(self) -> dict[str, dict[str, Any]]:
        """domain -> {model, version, source, plan} (the result file's `specialists_source`)."""
        return {s.env_id: s.as_json() for s in self.specialists_source}


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
    adapters = registered_adapters(tracker, domains, profile)  # fails first, naming a missing domain
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
    params = {
        "profile": profile.name,
        "domains": ",".join(domains),
        "stage2": dataclasses.asdict(profile.stage2),
        "specialists": {d: a.specialist for d, a in adapters.items()},
    }
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
        matrix=matrix,
        specialists={d: a.specialist for d, a in adapters.items()},
        sft_domains=tuple(d for d, a in adapters.items() if a.sft_path is not None),
        heatmap_png=png,
        mlflow_run_id=mlflow_run_id,
        wall_s=time.perf_counter() - start,
        specialists_source=tuple(a.source for a in adapters.values() if a.source is not None),
    )
