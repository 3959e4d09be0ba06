"""Two seats taking turns, shared by the bargaining environments that alternate (Craigslist,
Marketplace, Job Interview, Calendar).

A mixin placed before `Environment` in the bases. The environment keeps `self._turn` (turns taken),
`self._ending` and a `scenario.max_turns`, and implements `_turn_for(agent_id)`, the turn request.
"""

from __future__ import annotations

from typing import Any

from environments.core.events import Event


class AlternatingTurns:
    """Turn passing, the turn limit and the forfeit rule of a two-seat alternating negotiation."""

    # Provided by the environment (the mixin precedes Environment in the bases, so it must not define
    # _finish or _turn_for itself): _turn, _ending, agent_ids, scenario, _finish(), _turn_for().
    _turn: int
    _ending: str
    agent_ids: tuple[str, ...]
    scenario: Any

    def _other(self, agent_id: str) -> str:
        first, second = self.agent_ids
        return second if agent_id == first else first

    def _next_turn(self, to: str, events: list[Event]) -> list[Event]:
        """After a turn: end the episode at `max_turns` (no deal), else ask `to` to act."""
        if self._turn >= self.scenario.max_turns:
            return self._finish(events)
        return [*events, self._turn_for(to)]

    def _on_retries_exhausted(self, agent_id: str) -> list[Event]:
        # Rule: the turn is forfeited and passes to the other side (it still counts as a turn).
        self._turn += 1
        if self._turn >= self.scenario.max_turns:
            self._ending = "max_turns"
            return self._finish()
        return [self._turn_for(self._other(agent_id))]
