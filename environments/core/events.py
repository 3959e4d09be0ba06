"""Event types exchanged between environments and agents.

Environments speak to agents only through these three frozen dataclasses. Every event is addressed to
exactly one agent (`to`); a broadcast is one event per recipient, which is what makes partial
observability a property of addressing instead of a convention. `text` is for language models and
humans; `data` carries the same content in structured form for code agents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class NotificationKind(StrEnum):
    """What a notification tells its recipient."""

    TURN = "turn"  # the recipient must act now; `allowed` names the action kinds
    DEAL = "deal"  # an agreement was reached
    INVALID_ACTION = "invalid_action"  # the last action was rejected; `data["reason"]` says why
    TIMEOUT = "timeout"  # the recipient did not act within the turn timeout
    EPISODE_END = "episode_end"  # the episode is over; no more turn requests follow


@dataclass(frozen=True)
class Observation:
    """Information addressed to one agent: private facts at reset, or what another agent said/did."""

    to: str
    """Recipient agent id."""
    text: str
    """Natural-language rendering for language models and humans."""
    data: dict[str, Any] = field(default_factory=dict)
    """Structured content for code agents (private values, the counterpart's offer, ...)."""
    sender: str | None = None
    """Agent id of the speaker when this relays another agent's action; None for environment facts."""
    private: bool = False
    """True for the recipient's own private information (values, reservation prices, secret events)."""


@dataclass(frozen=True)
class Notification:
    """A control message addressed to one agent (turn request, deal, invalid action, timeout, end)."""

    to: str
    """Recipient agent id."""
    kind: NotificationKind
    """What happened."""
    text: str = ""
    """Natural-language rendering."""
    allowed: tuple[str, ...] = ()
    """For TURN: the action kinds the recipient may take now."""
    data: dict[str, Any] = field(default_factory=dict)
    """Structured details (reason of an invalid action, retries left, final rewards, ...)."""


@dataclass(frozen=True)
class Action:
    """What an agent does. `kind` is one of the environment's action kinds, or RAW_TEXT to have the
    environment parse free model output with its own grammar."""

    agent_id: str
    """The acting agent."""
    kind: str
    """Action kind, e.g. "message", "offer", "accept"; RAW_TEXT for unparsed model output."""
    text: str = ""
    """Free text said along with the action (or the raw model output for RAW_TEXT)."""
    payload: dict[str, Any] = field(default_factory=dict)
    """Structured arguments, e.g. {"price": 120.0} or {"split": {"book": 1, ...}}."""


RAW_TEXT = "raw_text"
"""Action kind for unparsed text; the environment parses it and treats a parse failure as invalid."""

Event = Observation | Notification
