"""Statistics for comparing policies: interval estimates of means, paired differences and correlations.

| function | what it estimates | interval |
| --- | --- | --- |
| `mean_estimate(values, clusters, bounds)` | a policy's mean reward | percentile bootstrap of the mean, resampling *clusters* (scenarios), clipped to `bounds` (e.g. [0, 1]) |
| `paired_difference(a, b, clusters)` | mean of per-episode differences a - b over episodes both played | the same cluster bootstrap over the differences |
| `correlation_estimate(x, y, clusters)` | Pearson r (e.g. a skill score against reward) | the same cluster bootstrap of r |
| `ratio_estimate(numerators, denominators, clusters)` | a ratio of sums, sum(num) / sum(den) (e.g. the share of an advantage recovered) | the same cluster bootstrap of the ratio |
| `confidence_interval(values, method, bounds)` | a plain mean | Student t or normal (clipped to `bounds`), or the unclustered percentile bootstrap |

Why clusters: the episodes of one scenario (one per counterpart, or one per seat) share the scenario's
difficulty, so they are not independent draws; resampling whole scenarios keeps that correlation in the
interval (Field & Welsh 2007, "Bootstrapping clustered data"). With every episode its own cluster the
cluster bootstrap is the ordinary bootstrap. Why paired: two policies that played the same scenarios,
counterparts and seeds differ by less noise than two independent samples, so the interval of the mean
difference is narrower than the two marginal intervals suggest; comparing overlapping marginal intervals
throws that away.

All bootstraps are percentile intervals over `n_boot` resamples drawn from a seeded numpy generator, so
the same inputs give the same interval. An interval needs at least two clusters; with fewer it is
(NaN, NaN). `Estimate.as_dict()` writes NaN as None, so reports are valid JSON.

Clipping to `bounds`: a percentile-bootstrap mean is an average of the data, so it never leaves the data's
range; there the clip only guards values outside `bounds`. A t or normal interval is mean +- q x sem and
leaves [0, 1] for a mean near 0 or 1 with few episodes; there the clip is what keeps it a reward range.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.display import interval_text

CI_METHODS = ("t", "normal", "bootstrap")
DEFAULT_BOOTSTRAP = 2000
"""Resamples per interval (percentile intervals at 95% are stable to ~0.005 of the reward range)."""


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval and sample size."""

    mean: float
    """The estimate (a mean, a mean difference or a correlation); NaN without data."""
    ci_low: float
    """Lower end of the interval (NaN when it cannot be computed)."""
    ci_high: float
    """Upper end of the interval (NaN when it cannot be computed)."""
    n: int
    """Observations (episodes, or pairs of episodes) behind the estimate."""
    clusters: int = 0
    """Independent units resampled (scenarios); 0 when the interval is not a cluster bootstrap."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe: NaN becomes None."""
        return {
            "mean": _finite_or_none(self.mean),
            "ci_low": _finite_or_none(self.ci_low),
            "ci_high": _finite_or_none(self.ci_high),
            "n": self.n,
        }

    def text(self, spec: str = ".3f", separator: str = " ") -> str:
        """`mean [low, high]` for reports (`models.display.interval_text`)."""
        return interval_text(self.mean, self.ci_low, self.ci_high, spec, separator)

    def excludes_zero(self) -> bool:
        """Whether the interval lies entirely above or entirely below 0."""
        return bool(self.ci_low > 0 or self.ci_high < 0)


def _finite_or_none(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


# ------------------------------------------------------------------------------------------ bootstrap
def _cluster_index(clusters: Sequence[Hashable] | None, n: int) -> np.ndarray:
    if clusters is None:
        return np.arange(n)
    if len(clusters) != n:
        raise ValueError(f"{len(clusters)} cluster labels for {n} values")
    labels: dict[Hashable, int] = {}
    return np.array([labels.setdefault(c, len(labels)) for c in clusters], dtype=np.int64)


def _resampled_clusters(index: np.ndarray, n_boot: int, seed: int) -> tuple[np.ndarray, int]:
    """Counts of how often each cluster is drawn in each resample: (n_boot, n_clusters)."""
    n_clusters = int(index.max()) + 1 if len(index) else 0
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_clusters, size=(n_boot, n_clusters))
    counts = np.zeros((n_boot, n_clusters), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(n_boot), n_clusters), draws.ravel()), 1)
    return counts, n_clusters


def mean_estimate(
    values: Sequence[float],
    clusters: Sequence[Hashable] | None = None,
    bounds: tuple[float, float] | None = None,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> Estimate:
    """Mean of `values` with a cluster-bootstrap interval (see the module docstring), clipped to `bounds`."""
    _check_confidence(confidence)
    data = np.asarray(values, dtype=float)
    n = len(data)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    if not np.isfinite(data).all():
        raise ValueError("values must be finite")
    index = _cluster_index(clusters, n)
    mean = float(data.mean())
    counts, n_clusters = _resampled_clusters(index, n_boot, seed)
    if n_clusters < 2:
        return Estimate(mean, math.nan, math.nan, n, n_clusters)
    sums = np.bincount(index, weights=data, minlength=n_clusters)
    sizes = np.bincount(index, minlength=n_clusters).astype(float)
    means = (counts @ sums) / (counts @ sizes)
    alpha = 1.0 - confidence
    low, high = (float(x) for x in np.quantile(means, [alpha / 2, 1 - alpha / 2]))
    if bounds is not None:
        low, high = max(bounds[0], low), min(bounds[1], high)
    return Estimate(mean, low, high, n, n_clusters)


def paired_difference(
    a: Mapping[Hashable, float],
    b: Mapping[Hashable, float],
    clusters: Mapping[Hashable, Hashable] | None = None,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> Estimate:
    """Mean of a[k] - b[k] over the keys both have (an episode key such as (scenario, counterpart, seat,
    seed)), with the cluster bootstrap over `clusters[k]` (default: every pair its own cluster). Keys that
    only one side has are an error: a paired comparison needs both policies on the same episodes."""
    only_a, only_b = set(a) - set(b), set(b) - set(a)
    if only_a or only_b:
        raise ValueError(
            f"not paired: {len(only_a)} episodes only in the first, {len(only_b)} only in the second "
            f"(e.g. {sorted(map(str, only_a | only_b))[:3]})"
        )
    keys = sorted(a, key=str)
    diffs = [a[k] - b[k] for k in keys]
    labels = [clusters[k] for k in keys] if clusters is not None else None
    return mean_estimate(diffs, labels, None, confidence, n_boot, seed)


def correlation_estimate(
    x: Sequence[float],
    y: Sequence[float],
    clusters: Sequence[Hashable] | None = None,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> Estimate:
    """Pearson correlation of x and y with a cluster-bootstrap interval (resamples in which either side
    is constant are left out); NaN when either side is constant in the data."""
    _check_confidence(confidence)
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xs) != len(ys):
        raise ValueError(f"x has {len(xs)} values, y has {len(ys)}")
    n = len(xs)
    if n < 3 or xs.std() == 0 or ys.std() == 0:
        return Estimate(math.nan, math.nan, math.nan, n)
    r = float(np.corrcoef(xs, ys)[0, 1])
    index = _cluster_index(clusters, n)
    counts, n_clusters = _resampled_clusters(index, n_boot, seed)
    if n_clusters < 3:
        return Estimate(r, math.nan, math.nan, n, n_clusters)
    weights = counts[:, index].astype(float)  # (n_boot, n): how often each observation is drawn
    total = weights.sum(axis=1, keepdims=True)
    mx = (weights * xs).sum(axis=1, keepdims=True) / total
    my = (weights * ys).sum(axis=1, keepdims=True) / total
    cov = (weights * (xs - mx) * (ys - my)).sum(axis=1)
    vx = (weights * (xs - mx) ** 2).sum(axis=1)
    vy = (weights * (ys - my) ** 2).sum(axis=1)
    valid = (vx > 0) & (vy > 0)
    rs = cov[valid] / np.sqrt(vx[valid] * vy[valid])
    if len(rs) < n_boot // 2:
        return Estimate(r, math.nan, math.nan, n, n_clusters)
    alpha = 1.0 - confidence
    low, high = (float(v) for v in np.quantile(rs, [alpha / 2, 1 - alpha / 2]))
    return Estimate(r, low, high, n, n_clusters)


def ratio_estimate(
    numerators: Sequence[float],
    denominators: Sequence[float],
    clusters: Sequence[Hashable] | None = None,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> Estimate:
    """sum(numerators) / sum(denominators) with a cluster-bootstrap interval (the ratio of the resampled
    sums). NaN when the denominators sum to 0. A resample whose denominator sum is 0 or of the other sign
    is left out (its ratio means something else); with more than half left out the denominator is not told
    apart from 0 and the interval is (NaN, NaN)."""
    _check_confidence(confidence)
    num, den = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    if len(num) != len(den):
        raise ValueError(f"{len(num)} numerators, {len(den)} denominators")
    if not (np.isfinite(num).all() and np.isfinite(den).all()):
        raise ValueError("numerators and denominators must be finite")
    n = len(num)
    total = float(den.sum())
    if n == 0 or total == 0.0:
        return Estimate(math.nan, math.nan, math.nan, n)
    index = _cluster_index(clusters, n)
    counts, n_clusters = _resampled_clusters(index, n_boot, seed)
    ratio = float(num.sum()) / total
    if n_clusters < 2:
        return Estimate(ratio, math.nan, math.nan, n, n_clusters)
    boot_num = counts @ np.bincount(index, weights=num, minlength=n_clusters)
    boot_den = counts @ np.bincount(index, weights=den, minlength=n_clusters)
    same_sign = np.sign(boot_den) == np.sign(total)
    if same_sign.sum() < n_boot / 2:
        return Estimate(ratio, math.nan, math.nan, n, n_clusters)
    alpha = 1.0 - confidence
    ratios = boot_num[same_sign] / boot_den[same_sign]
    low, high = (float(v) for v in np.quantile(ratios, [alpha / 2, 1 - alpha / 2]))
    return Estimate(ratio, low, high, n, n_clusters)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")


# ------------------------------------------------------------------------------------ classic intervals
def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t distribution (exact for df 1 and 2; Newton on a Simpson-integrated CDF
    otherwise, accurate to ~1e-8; the normal quantile for df > 1e6)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p}")
    if df <= 0:
        raise ValueError(f"df must be > 0, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        a = 2.0 * p - 1.0
        return a * math.sqrt(2.0 / (1.0 - a * a))
    z = statistics.NormalDist().inv_cdf(p)
    if df > 1e6:
        return z
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def pdf(x: np.ndarray | float) -> np.ndarray | float:
        return np.exp(log_c - (df + 1) / 2 * np.log1p(np.square(x) / df))

    def cdf(x: float) -> float:  # x >= 0
        grid = np.linspace(0.0, x, 4097)
        values = pdf(grid)
        h = x / 4096
        return 0.5 + h / 3 * (values[0] + values[-1] + 4 * values[1:-1:2].sum() + 2 * values[2:-1:2].sum())

    # Start from the Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5), then refine.
    x = z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    for _ in range(20):
        step = (cdf(x) - p) / float(pdf(x))
        x -= step
        if abs(step) < 1e-10:
            break
    return float(x)


def confidence_interval(
    values: Sequence[float],
    confidence: float = 0.95,
    method: str = "t",
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float]:
    """Two-sided interval for the mean of independent `values`: "t" (Student), "normal", or "bootstrap"
    (percentile, unclustered), clipped to `bounds`; (NaN, NaN) when n < 2."""
    if method not in CI_METHODS:
        raise ValueError(f"unknown ci method {method!r}; use one of {CI_METHODS}")
    _check_confidence(confidence)
    data = np.asarray(values, dtype=float)
    n = len(data)
    if n < 2:
        return (math.nan, math.nan)
    if method == "bootstrap":
        estimate = mean_estimate(data, None, bounds, confidence, n_boot, seed)
        return (estimate.ci_low, estimate.ci_high)
    mean = float(data.mean())
    alpha = 1.0 - confidence
    sem = float(data.std(ddof=1)) / math.sqrt(n)
    q = t_quantile(1 - alpha / 2, n - 1) if method == "t" else statistics.NormalDist().inv_cdf(1 - alpha / 2)
    low, high = mean - q * sem, mean + q * sem
    if bounds is not None:  # mean +- q x sem leaves a bounded range near its ends
        low, high = max(bounds[0], low), min(bounds[1], high)
    return (low, high)
