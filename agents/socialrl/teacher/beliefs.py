"""Belief machinery shared by the teacher's opponent models: a discrete posterior over counterpart types
and vectorised reference points (the rewards are calibrated on them, so the teacher needs them per type).

Everything here is plain numpy over small hypothesis sets (6 priority orders, a few dozen DnD value
vectors, a few thousand price-curve hypotheses, a few hundred contract-preference particles).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

LOG_FLOOR = -50.0
"""Per-observation log-likelihoods are clipped below at this value, so that one surprising observation
never zeroes a hypothesis out for good (the posterior stays recoverable)."""


def softmax_logits(values: np.ndarray, beta: float, axis: int = -1) -> np.ndarray:
    """log softmax(beta * values) along `axis`."""
    z = beta * values
    z = z - z.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def sigmoid(x: np.ndarray | float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -60.0, 60.0)))


class Posterior:
    """A normalised posterior over `n` hypotheses, kept in log space."""

    def __init__(self, log_prior: np.ndarray) -> None:
        self.log_prior = np.asarray(log_prior, dtype=float).copy()
        self.log_post = self.log_prior - _logsumexp(self.log_prior)
        self.updates = 0

    @classmethod
    def uniform(cls, n: int) -> Posterior:
        return cls(np.zeros(n))

    def __len__(self) -> int:
        return len(self.log_post)

    @property
    def p(self) -> np.ndarray:
        return np.exp(self.log_post)

    def update(self, log_likelihood: np.ndarray) -> None:
        """Multiply in a likelihood (one value per hypothesis, in log space)."""
        ll = np.maximum(np.asarray(log_likelihood, dtype=float), LOG_FLOOR)
        post = self.log_post + ll
        self.log_post = post - _logsumexp(post)
        self.updates += 1

    def entropy(self) -> float:
        p = self.p
        return float(-(p[p > 0] * np.log(p[p > 0])).sum())

    def top(self, k: int = 1) -> list[tuple[int, float]]:
        order = np.argsort(-self.log_post, kind="stable")[:k]
        return [(int(i), float(np.exp(self.log_post[i]))) for i in order]


def _logsumexp(x: np.ndarray) -> float:
    m = float(np.max(x))
    return m + float(np.log(np.exp(x - m).sum()))


def mixture_log(likelihood: np.ndarray, epsilon: float) -> np.ndarray:
    """log((1 - eps) * likelihood + eps): robustness against counterparts that act at random."""
    return np.log((1.0 - epsilon) * np.asarray(likelihood, dtype=float) + epsilon)


# ------------------------------------------------------------------------------- allocation references
def allocations(counts: Sequence[int]) -> np.ndarray:
    """Every split of the pool as an (N, items) array of the first party's counts, in enumeration order
    (the same order as environments.core.scoring.enumerate_allocations)."""
    return np.array(list(itertools.product(*(range(int(c) + 1) for c in counts))), dtype=float)


def allocation_reference_points(
    counts: Sequence[int],
    values_a: Sequence[float],
    values_b: Sequence[float],
    disagreement: tuple[float, float] = (0.0, 0.0),
    shares: np.ndarray | None = None,
) -> tuple[float, float]:
    """Reference points (party A, party B) of an item division, exactly as
    environments.socialrl.allocation.reference_agreement defines them (the best own points among Pareto-optimal
    envy-free allocations, else the Nash bargaining allocation over `disagreement`), vectorised."""
    counts_arr = np.asarray(counts, dtype=float)
    x = allocations(counts) if shares is None else shares
    va, vb = np.asarray(values_a, dtype=float), np.asarray(values_b, dtype=float)
    ua = x @ va
    ub = (counts_arr - x) @ vb
    ge = (ua[None, :] >= ua[:, None]) & (ub[None, :] >= ub[:, None])
    gt = (ua[None, :] > ua[:, None]) | (ub[None, :] > ub[:, None])
    dominated = (ge & gt).any(axis=1)
    frontier = ~dominated
    envy_free = (ua >= (counts_arr - x) @ va) & (ub >= x @ vb)
    fair = frontier & envy_free
    if fair.any():
        return float(ua[fair].max()), float(ub[fair].max())
    ga, gb = ua - disagreement[0], ub - disagreement[1]
    valid = (ga >= 0) & (gb >= 0)
    if not valid.any():
        raise ValueError("no allocation is individually rational")
    product = np.where(valid, ga * gb, -np.inf)
    best = product.max()
    tied = valid & (product == best)
    total = np.where(tied, ua + ub, -np.inf)
    index = int(np.argmax(total))  # the first maximum in enumeration order, like nash_bargaining_point
    return float(ua[index]), float(ub[index])


def nash_reference_utilities(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """My utility at the Nash bargaining point (disagreement 0) for each row of `theirs` (H, D), with
    my utilities `mine` (D,); ties broken by the larger sum, then by the first deal."""
    product = theirs * mine[None, :]
    best = product.max(axis=1, keepdims=True)
    total = np.where(product >= best - 1e-12, theirs + mine[None, :], -np.inf)
    index = np.argmax(total, axis=1)
    return mine[index]
