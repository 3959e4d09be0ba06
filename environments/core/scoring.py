"""Scoring helpers: outcome enumeration, Pareto frontier, envy-freeness, Nash bargaining, normalisation.

Outcomes are hashable (tuples); utilities are given as one function per party. Everything is exact
enumeration, which is cheap for the domains here (DnD <= 5^3 splits, CaSiNo 4^3, Job Interview 2240).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

OutcomeT = TypeVar("OutcomeT", bound=Hashable)


def enumerate_allocations(counts: Sequence[int]) -> list[tuple[int, ...]]:
    """Every split of item counts: tuples giving how many of each item the first party gets."""
    return list(itertools.product(*(range(c + 1) for c in counts)))


def complement(allocation: Sequence[int], counts: Sequence[int]) -> tuple[int, ...]:
    """What the other party gets."""
    return tuple(c - a for a, c in zip(allocation, counts, strict=True))


def points(allocation: Sequence[int], values: Sequence[int | float]) -> float:
    """Additive value of an allocation."""
    return float(sum(a * v for a, v in zip(allocation, values, strict=True)))


def pareto_frontier(outcomes: Iterable[OutcomeT], utilities: Sequence[Callable[[OutcomeT], float]]) -> list[OutcomeT]:
    """Outcomes no other outcome weakly improves for all parties and strictly for one."""
    scored = [(o, tuple(u(o) for u in utilities)) for o in outcomes]
    frontier = []
    for o, s in scored:
        dominated = any(
            all(x >= y for x, y in zip(t, s, strict=True)) and any(x > y for x, y in zip(t, s, strict=True))
            for _, t in scored
        )
        if not dominated:
            frontier.append(o)
    return frontier


def is_pareto_optimal(
    outcome: OutcomeT, outcomes: Iterable[OutcomeT], utilities: Sequence[Callable[[OutcomeT], float]]
) -> bool:
    s = tuple(u(outcome) for u in utilities)
    for other in outcomes:
        t = tuple(u(other) for u in utilities)
        if all(x >= y for x, y in zip(t, s, strict=True)) and any(x > y for x, y in zip(t, s, strict=True)):
            return False
    return True


def is_envy_free(
    allocation: Sequence[int], counts: Sequence[int], values_a: Sequence[float], values_b: Sequence[float]
) -> bool:
    """Neither party values the other's bundle more than its own (item-division domains)."""
    other = complement(allocation, counts)
    return points(allocation, values_a) >= points(other, values_a) and points(other, values_b) >= points(
        allocation, values_b
    )


def nash_bargaining_point(
    outcomes: Iterable[OutcomeT],
    utilities: Sequence[Callable[[OutcomeT], float]],
    disagreement: Sequence[float] | None = None,
) -> OutcomeT:
    """The outcome maximising the product of gains over the disagreement point.

    Only outcomes that give every party at least its disagreement utility count; ties are broken by
    the larger sum of utilities, then by enumeration order, so the result is deterministic."""
    outcomes = list(outcomes)
    if not outcomes:
        raise ValueError("nash_bargaining_point needs at least one outcome")
    d = list(disagreement) if disagreement is not None else [0.0] * len(utilities)
    best, best_key = None, None
    for o in outcomes:
        us = [u(o) for u in utilities]
        gains = [u - di for u, di in zip(us, d, strict=True)]
        if any(g < 0 for g in gains):
            continue
        product = 1.0
        for g in gains:
            product *= g
        key = (product, sum(us))
        if best_key is None or key > best_key:
            best, best_key = o, key
    if best is None:
        raise ValueError("no outcome is individually rational for all parties")
    return best


def normalise(value: float, reference: float, floor: float = 0.0) -> float:
    """(value - floor) / (reference - floor), clipped to [0, 1]; 0 when the reference is not above floor."""
    if reference <= floor:
        return 1.0 if value >= reference and reference > 0 else 0.0
    return min(1.0, max(0.0, (value - floor) / (reference - floor)))
