"""The logic of three stage-2 asset checks, as plain functions (assets/stage2.py calls them, tests call them
without Dagster). Each recomputes what its asset chose by a route written apart from the asset's own code,
so that it fails when the choice or its bookkeeping is wrong, not only when the asset contradicts itself.

| check | recomputes | catches | cannot catch |
| --- | --- | --- | --- |
| `check_transfer_matrix` | every cell from the per-episode rewards the matrix keeps (`TransferMatrix.scores`): the donor's and the base's mean on the recipient's plan and their per-episode difference, summed here episode by episode | a missing specialist cell; cells over different numbers of episodes; a donor and a base that did not play the same episodes; a cell whose mean, donor mean or base mean is not what its episodes give (a cell taken against another domain's base, a swapped donor) | a wrong per-episode reward (nothing replays the episodes) or a bootstrap interval computed wrongly |
| `check_cascade_order` | every order's score from the transfer matrix's specialist cells (`brute_force_order_scores`), not from `CascadeOrder`'s scores | a chosen order that is not a permutation of the domains or not among the best-scoring orders; a recorded score that differs from the cells or belongs to another order; a wrong count of orders scored; a matrix whose cells give every order the same score (every cell equal, say): then no order is "the best" and the check says "not decidable" | a wrong transfer matrix (both read the same cells) or a wrong ordering rule (both implement `ORDER_RULE`); scores that differ by less than the cells' uncertainty (the metadata counts the cells whose interval excludes 0) |
| `check_kept_checkpoints` | each candidate's mean over the domains seen so far from its per-domain probe rewards, and the best of them | a stage that kept a checkpoint that is not the best (ties allowed), or one that is not a candidate; a candidate probed on other domains than those seen so far; a recorded `mean_seen` that is not the mean of its probe rewards; a stage not evaluated on every domain, or stages missing or out of order | a wrong probe reward (nothing re-probes the kept adapter: its held-out evaluation is on other scenarios, so it cannot be compared with the probe), a checkpoint PPO saved but never probed (the candidates are the checkpoints found), or a kept adapter copied from another checkpoint than the one named |
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from models.socialrl.stage2.cascade import CascadeOrder, CascadeResult
from models.socialrl.stage2.scores import BASE, PolicyScores, sft_policy, specialist_policy
from models.socialrl.stage2.transfer import TransferMatrix

TOLERANCE = 1e-9
"""Scores summed in another order differ by rounding only."""


@dataclass(frozen=True)
class CheckOutcome:
    """Whether a check passed, why not, and what the asset check shows."""

    passed: bool
    problems: tuple[str, ...]
    metadata: dict[str, Any] = field(default_factory=dict)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * (1.0 + abs(a) + abs(b))


def brute_force_order_scores(matrix: TransferMatrix, adjacency_weight: float) -> dict[tuple[str, ...], float]:
    """Every order of the matrix's domains and its score, from the specialist cells: each off-diagonal cell
    (donor, recipient) adds its mean when the donor is trained after the recipient, and each pair of domains
    trained back to back adds `adjacency_weight` x max(0, the smaller of its two cells); a NaN cell counts 0
    (`ORDER_RULE`, written here cell by cell rather than position by position as `order_score` does)."""
    transfer: dict[tuple[str, str], float] = {}
    for c in matrix.cells:
        if c.kind == "specialist" and c.donor != c.recipient:
            transfer[(c.donor, c.recipient)] = c.difference.mean if math.isfinite(c.difference.mean) else 0.0
    pairs = [(a, b) for a in matrix.domains for b in matrix.domains if a != b]
    missing = [p for p in pairs if p not in transfer]
    if missing:
        raise ValueError(f"the transfer matrix has no specialist cell for {missing}")
    scores = {}
    for order in itertools.permutations(sorted(matrix.domains)):
        position = {d: i for i, d in enumerate(order)}
        backward = sum(v for (donor, recipient), v in transfer.items() if position[donor] > position[recipient])
        mutual = sum(
            max(0.0, min(v, transfer[(b, a)])) for (a, b), v in transfer.items() if position[b] == position[a] + 1
        )
        scores[order] = backward + adjacency_weight * mutual
    return scores


def check_transfer_matrix(matrix: TransferMatrix) -> CheckOutcome:
    """Every specialist donor has a cell on every domain, every cell is over the same number of episodes (more
    than 0), and every cell is what its episodes give: the donor and the base played the same episodes of the
    recipient's plan, and the cell's mean, donor mean and base mean equal the per-episode sums recomputed here
    from `matrix.scores`."""
    expected = {(d, r) for d in matrix.domains for r in matrix.domains}
    have = {(c.donor, c.recipient) for c in matrix.cells if c.kind == "specialist"}
    sizes = sorted({c.difference.n for c in matrix.cells})
    problems = []
    if have != expected:
        problems.append(f"no specialist cell for {sorted(expected - have)}")
    if len(sizes) != 1 or sizes[0] <= 0:
        problems.append(f"cells over {sizes} episodes: every cell must pair the same number, more than 0")
    scores = {(sc.policy, sc.env_id): sc for sc in matrix.scores}
    labels = {"specialist": specialist_policy, "sft": sft_policy}
    unpaired, wrong = [], []
    for c in matrix.cells:
        name = f"{c.kind} {c.donor} -> {c.recipient}"
        donor, base = scores.get((labels[c.kind](c.donor), c.recipient)), scores.get((BASE, c.recipient))
        if donor is None or base is None:
            unpaired.append(name)
            problems.append(f"{name}: no {'donor' if donor is None else 'base'} evaluation on {c.recipient}")
            continue
        found = _cell_problems(c.difference.mean, c.difference.n, c.donor_mean, c.base_mean, donor, base)
        if found == ["unpaired"]:
            unpaired.append(name)
            problems.append(f"{name}: the donor and the base did not play the same episodes")
        elif found:
            wrong.append(name)
            problems += [f"{name}: {p}" for p in found]
    metadata = {
        "missing_cells": len(expected - have),
        "episodes_per_cell": sizes,
        "unpaired_cells": len(unpaired),
        "cells_not_recomputed": len(wrong),
    }
    return CheckOutcome(not problems, tuple(problems), metadata)


def _cell_problems(
    mean: float, n: int, donor_mean: float, base_mean: float, donor: PolicyScores, base: PolicyScores
) -> list[str]:
    """One cell against its two evaluations: ["unpaired"] when they played different episodes, else what differs."""
    donor_by, base_by = (
        dict(zip(donor.keys, donor.rewards, strict=True)),
        dict(zip(base.keys, base.rewards, strict=True)),
    )
    if set(donor_by) != set(base_by):
        return ["unpaired"]
    keys = sorted(donor_by)
    recomputed = {
        "mean": math.fsum(donor_by[k] - base_by[k] for k in keys) / len(keys) if keys else math.nan,
        "donor mean": math.fsum(donor_by[k] for k in keys) / len(keys) if keys else math.nan,
        "base mean": math.fsum(base_by[k] for k in keys) / len(keys) if keys else math.nan,
    }
    recorded = {"mean": mean, "donor mean": donor_mean, "base mean": base_mean}
    problems = [
        f"{what} {recorded[what]:+.6f}, its episodes give {value:+.6f}"
        for what, value in recomputed.items()
        if not (math.isfinite(recorded[what]) and math.isfinite(value) and _close(recorded[what], value))
    ]
    if n != len(keys):
        problems.append(f"n = {n}, the two played {len(keys)} episodes")
    return problems


def check_cascade_order(order: CascadeOrder, matrix: TransferMatrix) -> CheckOutcome:
    """The chosen order is a permutation of the matrix's domains whose brute-force score is the brute-force
    maximum (ties allowed), its recorded score equals the recomputed one, and every order was scored; the
    orders are re-scored with the adjacency weight the asset recorded (not the profile's current one). When
    every order scores the same (every cell equal, say), the matrix cannot tell orders apart: not decidable,
    and the check fails rather than bless whichever order came first."""
    scores = brute_force_order_scores(matrix, order.adjacency_weight)
    best, worst = max(scores.values()), min(scores.values())
    best_orders = sorted(o for o, s in scores.items() if _close(s, best))
    decidable = not _close(best, worst)
    chosen = tuple(order.order)
    problems = []
    if not decidable:
        problems.append(
            f"not decidable: all {len(scores)} orders score {best:+.6f} from the transfer matrix, so it cannot "
            "tell them apart (the chosen order is arbitrary)"
        )
    recomputed: float | None
    if sorted(chosen) != sorted(matrix.domains) or len(set(chosen)) != len(chosen):
        problems.append(f"the chosen order {list(chosen)} is not a permutation of {list(matrix.domains)}")
        recomputed = None
    else:
        recomputed = scores[chosen]
        if not _close(recomputed, best):
            problems.append(
                f"the chosen order scores {recomputed:+.6f} from the matrix; the best, {' -> '.join(best_orders[0])}, "
                f"scores {best:+.6f}"
            )
        if not _close(order.chosen.score, recomputed):
            problems.append(f"recorded score {order.chosen.score:+.6f}, recomputed from the matrix {recomputed:+.6f}")
    if tuple(order.chosen.order) != chosen:
        problems.append(f"the chosen score is of {list(order.chosen.order)}, the chosen order is {list(chosen)}")
    if order.orders_scored != len(scores):
        problems.append(f"{order.orders_scored} orders scored, {len(scores)} exist")
    metadata = {
        "decidable": decidable,
        "recomputed_score": recomputed,
        "best_score": best,
        "worst_score": worst,
        "best_orders": [list(o) for o in best_orders],
        "orders": len(scores),
        "cross_cells_excluding_zero": sum(
            1
            for c in matrix.cells
            if c.kind == "specialist" and c.donor != c.recipient and c.difference.excludes_zero()
        ),
    }
    return CheckOutcome(not problems, tuple(problems), metadata)


def _stage_problems(
    index: int,
    candidates: Mapping[str, Mapping[str, float]],
    recorded: Mapping[str, float],
    chosen: str,
    seen: tuple[str, ...],
) -> list[str]:
    """One stage's checkpoint choice against its candidates' per-domain probe rewards (see the module table)."""
    problems = []
    means = {}
    for name, probe in candidates.items():
        if set(probe) != set(seen):
            problems.append(f"stage {index}: {name} probed on {sorted(probe)}, seen so far {sorted(seen)}")
            continue
        means[name] = math.fsum(probe[d] for d in seen) / len(seen)
        if not _close(means[name], recorded[name]):
            problems.append(f"stage {index}: {name} records mean {recorded[name]:.6f}, its probe {means[name]:.6f}")
    if chosen not in candidates:
        problems.append(f"stage {index}: kept {chosen}, not one of its candidates {sorted(candidates)}")
    elif chosen in means:
        best_name = max(means, key=lambda n: means[n])
        if means[chosen] < means[best_name] and not _close(means[chosen], means[best_name]):
            problems.append(
                f"stage {index}: kept {chosen} (mean {means[chosen]:.4f} over {len(seen)} seen domains), "
                f"{best_name} has {means[best_name]:.4f}"
            )
    return problems


def check_kept_checkpoints(result: CascadeResult) -> CheckOutcome:
    """Every stage kept the candidate with the best mean probe reward over the domains seen so far (ties
    allowed), recomputed from the per-domain probe rewards each candidate recorded at evaluation time; every
    stage's kept adapter was evaluated on every domain; the stages are the order's."""
    order = tuple(result.order)
    problems: list[str] = []
    not_best, incomplete = [], []
    if [(s.index, s.domain) for s in result.stages] != list(enumerate(order)):
        problems.append(f"stages {[(s.index, s.domain) for s in result.stages]} do not follow the order {list(order)}")
    for stage in result.stages:
        candidates = {c.checkpoint: c.probe for c in stage.candidates}
        recorded = {c.checkpoint: c.mean_seen for c in stage.candidates}
        found = _stage_problems(stage.index, candidates, recorded, stage.chosen, order[: stage.index + 1])
        if found:
            not_best.append(stage.index)
            problems += found
        if sorted(s.env_id for s in stage.heldout) != sorted(order):
            incomplete.append(stage.index)
            problems.append(f"stage {stage.index}: held-out evaluation on {sorted(s.env_id for s in stage.heldout)}")
    metadata = {"stages_not_best": not_best, "stages_incomplete": incomplete}
    return CheckOutcome(not problems, tuple(problems), metadata)
