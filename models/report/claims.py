"""A paper's claims, what this project measured for each, and the one rule that turns the two into a verdict.

The verdict rule (`decide`), in this order:

| verdict | when |
| --- | --- |
| not measured | the stage that measures the claim is not materialised on the instance, its stored output could not be read, or the key the claim reads is absent (the reason says which) |
| not shown | the stage gives no interval for the quantity (e.g. a rate reported without a CI, or two independent estimates without an interval of their difference), or the quantity is undefined |
| not shown | the interval rests on fewer than `MIN_CLUSTERS` clusters (the report says so next to it, and what the interval alone would have said), or its cluster count is not recorded |
| not shown | the 95% interval includes the null value |
| reproduced | the interval excludes the null on the side the paper claims |
| opposite | the interval excludes the null on the other side |

Then `stale`: a measured row (any verdict but not measured) whose result comes from another environment version
than the current code's (`agents.env_version.env_version()`, passed in by the caller), or from a result file that
records none, is *stale*; its reason keeps what the rule alone said. Results of different environment versions
are never compared.

Why at least 8 clusters: every interval of this project is a bootstrap that resamples clusters (scenarios,
games, worlds; models/evaluation/stats.py); with a handful of clusters the bootstrap distribution takes a few
distinct values and its percentile interval is too narrow, so an interval on fewer than 8 clusters is shown,
flagged, and never counted as evidence either way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from models.display import interval_text

MIN_CLUSTERS = 8
"""The fewest clusters an interval must rest on to count as evidence (module docstring)."""
HIGHER, LOWER = "higher", "lower"
DIRECTIONS = (HIGHER, LOWER)
REPRODUCED, OPPOSITE, NOT_SHOWN, NOT_MEASURED = "reproduced", "opposite", "not shown", "not measured"
STALE = "stale"
VERDICTS = (REPRODUCED, OPPOSITE, NOT_SHOWN, NOT_MEASURED, STALE)
NOT_STATED = "not stated here"
"""The paper's value where neither ../shared nor docs/ quote it (never invented)."""


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One claim of a paper and where this project's value for it comes from."""

    paper: str
    """"SocialRL" or "YOAO"."""
    claim_id: str
    text: str
    """The claim in words (and what this project measures for it)."""
    paper_value: str
    """The paper's published value as text, or NOT_STATED."""
    paper_source: str
    """Where that value is quoted from (NOT_STATED when the value is)."""
    direction: str
    """HIGHER or LOWER: the side of `null` the paper claims this project's quantity lies on."""
    asset: str
    """The asset whose result provides this project's value."""
    key: str
    """The key of that result (its path in the stored output)."""
    null: float = 0.0
    """The value of no effect."""

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"{self.claim_id}: direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if not self.paper_value or not self.paper_source:
            raise ValueError(f"{self.claim_id}: say the paper's value and its source, or {NOT_STATED!r}")


@dataclass(frozen=True)
class Interval:
    """An estimate with its 95% interval, sample size and the clusters its bootstrap resampled."""

    mean: float
    low: float
    high: float
    n: int
    clusters: int | None = None
    """None: not recorded (0 in an `Estimate` means the interval was not a cluster bootstrap)."""

    @classmethod
    def of(cls, estimate: Any) -> Interval | None:
        """From a models.evaluation.stats `Estimate` (or its dict: mean, ci_low, ci_high, n, clusters); None
        for None."""
        if estimate is None:
            return None
        get = estimate.get if isinstance(estimate, Mapping) else lambda k, d=None: getattr(estimate, k, d)
        clusters = get("clusters", None)

        def number(key: str) -> float:
            value = get(key, None)
            return math.nan if value is None else float(value)

        return cls(number("mean"), number("ci_low"), number("ci_high"), int(get("n", 0) or 0), clusters or None)

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def few_clusters(self) -> bool:
        """True when the interval rests on fewer than MIN_CLUSTERS clusters (or an unknown number)."""
        return self.clusters is None or self.clusters < MIN_CLUSTERS

    def text(self, digits: int = 3) -> str:
        """'mean [low, high]' (signed when the interval crosses 0)."""
        if not math.isfinite(self.mean):
            return "undefined"
        sign = "+" if self.low < 0 < self.high or self.mean < 0 else ""
        text = interval_text(self.mean, self.low, self.high, f"{sign}.{digits}f")
        return text if self.has_interval else f"{text} (no interval)"

    def cluster_text(self) -> str:
        """The clusters behind the interval, flagged when fewer than MIN_CLUSTERS."""
        if self.clusters is None:
            return "clusters not recorded"
        flag = f" (< {MIN_CLUSTERS} clusters)" if self.clusters < MIN_CLUSTERS else ""
        return f"{self.clusters} clusters{flag}"


@dataclass(frozen=True)
class Verdict:
    kind: str
    """One of VERDICTS."""
    reason: str

    def __post_init__(self) -> None:
        if self.kind not in VERDICTS:
            raise ValueError(f"a verdict is one of {VERDICTS}, not {self.kind!r}")


def _side(interval: Interval, null: float) -> str | None:
    """HIGHER when the interval lies above `null`, LOWER below it, None when it includes it."""
    if interval.low > null:
        return HIGHER
    if interval.high < null:
        return LOWER
    return None


def decide(direction: str, null: float, interval: Interval | None, missing: str = "", no_interval: str = "") -> Verdict:
    """The verdict rule of the module docstring. `missing`: why nothing was measured (non-empty: not
    measured); `no_interval`: why there is no interval (used when `interval` has none)."""
    if missing:
        return Verdict(NOT_MEASURED, missing)
    if interval is None or not math.isfinite(interval.mean):
        return Verdict(NOT_SHOWN, no_interval or "the quantity is undefined on these episodes")
    if not interval.has_interval:
        return Verdict(NOT_SHOWN, no_interval or "the stage gives no interval for it")
    side = _side(interval, null)
    said = {None: "includes the null", direction: "excludes the null on the paper's side"}.get(
        side, "excludes the null on the other side"
    )
    if interval.few_clusters:
        count = "an unrecorded number of" if interval.clusters is None else f"{interval.clusters}"
        return Verdict(
            NOT_SHOWN, f"the interval rests on {count} clusters (< {MIN_CLUSTERS}); alone it {said} ({null:g})"
        )
    if side is None:
        return Verdict(NOT_SHOWN, f"the 95% interval includes the null ({null:g})")
    where = {HIGHER: "above", LOWER: "below"}
    if side == direction:
        return Verdict(REPRODUCED, f"the 95% interval lies {where[side]} the null ({null:g}), as the paper claims")
    return Verdict(
        OPPOSITE, f"the 95% interval lies {where[side]} the null ({null:g}); the paper claims {where[direction]}"
    )


def stale(verdict: Verdict, measured_on: str | None, current: str) -> Verdict:
    """`verdict`, or STALE when it was measured on another environment version than `current` (module
    docstring). `measured_on` None: the result file records no version. A not-measured verdict stays."""
    if verdict.kind == NOT_MEASURED or measured_on == current:
        return verdict
    where = (
        f"measured on environment version {measured_on}, not the current {current}"
        if measured_on is not None
        else f"its result file records no environment version, so it cannot be matched to the current {current}"
    )
    return Verdict(STALE, f"{where}; by the rule alone: {verdict.kind} ({verdict.reason})")
