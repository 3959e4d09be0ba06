"""What the report reads: the latest materialisation of each stage's assets, with its stored output.

A `Snapshot` is built from a Dagster instance by resources/instance.py (`read_snapshot`) and from hand-made
values in the tests; the report itself never touches Dagster.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PROFILE_MARK = "+"
"""A profile tag such as "cpu+stage2-specialists" names its profile before this mark."""


@dataclass(frozen=True, kw_only=True)
class StageRead:
    """One asset (and partition) as the instance holds it: its latest materialisation and stored output."""

    asset: str
    partition: str | None = None
    run_id: str = ""
    """The Dagster run that materialised it."""
    timestamp: float = 0.0
    profile: str = ""
    """The run's profile tag (empty: the run was not launched by a command, e.g. from the UI)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    value: Any = field(default=None, repr=False)
    """The stored output (None when it could not be read: `error`)."""
    error: str = ""
    """Why the stored output could not be read (empty: it was)."""

    @property
    def name(self) -> str:
        """The asset with its partition, e.g. "specialist_eval[craigslist-v0]"."""
        return f"{self.asset}[{self.partition}]" if self.partition else self.asset

    @property
    def profile_name(self) -> str:
        """The profile of the run's tag ("cpu" for "cpu+stage2-specialists"); empty when untagged."""
        return self.profile.split(PROFILE_MARK)[0]

    @property
    def when(self) -> str:
        """The materialisation's UTC time."""
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.timestamp)) if self.timestamp else ""


@dataclass(frozen=True)
class Snapshot:
    """Every stage read from one instance at one time."""

    reads: tuple[StageRead, ...] = ()

    def of(self, asset: str) -> list[StageRead]:
        """The reads of `asset` (one per materialised partition), by partition."""
        return sorted((r for r in self.reads if r.asset == asset), key=lambda r: r.partition or "")

    def get(self, asset: str, partition: str | None = None) -> StageRead | None:
        return next((r for r in self.reads if r.asset == asset and r.partition == partition), None)

    def values(self, asset: str) -> list[StageRead]:
        """The reads of `asset` whose stored output was read."""
        return [r for r in self.of(asset) if r.value is not None]

    def why_absent(self, asset: str) -> str:
        """Why `asset` gives no value: not materialised, or its stored outputs could not be read."""
        reads = self.of(asset)
        if not reads:
            return f"`{asset}` is not materialised on this instance"
        errors = "; ".join(f"{r.name}: {r.error}" for r in reads if r.error)
        return errors or f"`{asset}` gives no value for this claim"
