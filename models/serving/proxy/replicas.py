"""Which engine replica a call goes to: least outstanding requests over the replicas in rotation.

The proxy fronts one or more upstreams (engine replicas serving the same models). Each call goes to the
replica with the fewest calls in flight among those in rotation, ties broken round-robin (so sequential
calls alternate), unless `ProxyConfig.routes` pins its model to one upstream. A replica is taken out of
rotation when a call to it fails in transport or its /health fails, and comes back when a later health
probe succeeds (the proxy's background task, every `ProxyConfig.health_interval_s`). When no replica is
in rotation, the ones out of it are tried anyway: a call is never refused without being tried.

The state is plain data touched only from the proxy's event loop (one thread), so it needs no lock. Written
here rather than taken from a load-balancer library because the proxy must also record which replica
answered each call, and retry a call on another replica inside the same request; the policy is ~40 lines.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

log = logging.getLogger("socialrl.proxy")


@dataclass
class ReplicaState:
    """One upstream's counters (mutable: owned by `Replicas`)."""

    url: str
    in_flight: int = 0
    healthy: bool = True
    calls: int = 0
    failures: int = 0


class Replicas:
    """In-flight counts and health of the upstreams, and the choice of the next one."""

    def __init__(self, urls: Iterable[str]) -> None:
        self.states = {url: ReplicaState(url) for url in urls}
        if not self.states:
            raise ValueError("at least one upstream is needed")
        self._order = list(self.states)
        self._turn = 0

    def choose(self, exclude: Iterable[str] = ()) -> str | None:
        """The replica for the next try: fewest in flight among the healthy ones not in `exclude` (ties go
        round-robin); when none is healthy, the same over the unhealthy ones not in `exclude`; None when every
        replica is excluded."""
        excluded = set(exclude)
        start = self._turn % len(self._order)
        rotated = self._order[start:] + self._order[:start]
        candidates = [u for u in rotated if u not in excluded]
        healthy = [u for u in candidates if self.states[u].healthy]
        pool = healthy or candidates
        if not pool:
            return None
        self._turn += 1
        return min(pool, key=lambda u: self.states[u].in_flight)  # min keeps the first of equals: round-robin

    @contextmanager
    def outstanding(self, url: str) -> Iterator[None]:
        """Count a call to `url` as in flight while the block runs."""
        state = self.states[url]
        state.in_flight += 1
        state.calls += 1
        try:
            yield
        finally:
            state.in_flight -= 1

    def mark_down(self, url: str, reason: str) -> None:
        state = self.states[url]
        state.failures += 1
        if state.healthy:
            log.warning("replica %s is out of rotation: %s", url, reason)
        state.healthy = False

    def mark_up(self, url: str) -> None:
        state = self.states[url]
        if not state.healthy:
            log.warning("replica %s is back in rotation", url)
        state.healthy = True

    def snapshot(self) -> dict[str, dict[str, int | bool]]:
        """Per replica: healthy, in_flight, calls (tries sent), failures (times taken out or failed)."""
        return {
            u: {"healthy": s.healthy, "in_flight": s.in_flight, "calls": s.calls, "failures": s.failures}
            for u, s in self.states.items()
        }
