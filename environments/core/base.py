"""The environment contract: a deterministic state machine driven by actions.

`reset(scenario, seed) -> events`, `step(action) -> events`, `outcome()`. The base class owns the parts
every environment shares so that each environment module only writes its rules:

* turn bookkeeping: which agents are being asked to act and with which action kinds;
* parsing of raw model text through the environment's grammar (`parse`), which never raises;
* invalid actions: counted per agent, answered with an INVALID_ACTION notification and a repeated turn
  request, and after `max_invalid_retries` consecutive failures the environment's own rule applies
  (`_on_retries_exhausted`, e.g. forfeit the turn or end without a deal);
* timeouts, which count as a failed attempt;
* the transcript of accepted actions, used for leakage detection and episode records;
* the record of every attempt (`attempts`): each answer a seat gave, accepted or refused, with the kind it
  parsed to or the reason it was refused, so that a transcript can show what an "invalid actions 3" was.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, ClassVar, Generic, TypeVar

from environments.core.events import RAW_TEXT, Action, Event, Notification, NotificationKind, Observation
from environments.core.grammar import MAX_REPLY_CHARS
from environments.core.leakage import PrivateFact, detect_leaks  # PrivateFact lives beside its detector
from environments.core.quoting import clip, quote


class ScenarioError(ValueError):
    """A scenario's parameters are out of range or inconsistent. `field` names the scenario field at fault
    (for a check of two fields, the one the message is about), so that a loader can name the field of its file
    that holds it (`load_records(..., fields=...)`, environments/core/data.py); the message is clipped to a
    bounded length (environments/core/quoting.py)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(clip(message))
        self.field = field


def check_max_turns(scenario_id: str, value: object, minimum: int = 2) -> None:
    """Raise ScenarioError unless `value` is an int (not a bool, not text) of at least `minimum`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScenarioError(
            f"{scenario_id}: max_turns must be an integer >= {minimum}, got {quote(value)}", "max_turns"
        )


@dataclass(frozen=True)
class Scenario:
    """Base of every environment's scenario; subclasses add typed fields and validate them."""

    scenario_id: str
    """Stable id: "<source>:<index>" for loaded data, "gen:<seed>" for generated scenarios."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ParseError:
    """Why a piece of model text could not be turned into an action (never raised, returned)."""

    message: str
    """Human- and model-readable explanation, used in the retry prompt."""


@dataclass(frozen=True)
class ActionSpec:
    """What one role may do, for prompts and for validation."""

    kinds: dict[str, str]
    """Action kind -> one-line description."""
    grammar: str
    """Instructions for language models: how to write each action as text."""
    examples: tuple[str, ...] = ()
    """Example texts that parse to valid actions."""


@dataclass(frozen=True)
class RoleOutcome:
    """The result of an episode for one role."""

    reward: float
    """Normalised reward in [0, 1] (the environment documents the formula)."""
    utility: float
    """Raw utility in the environment's own units (points, dollars, preference)."""
    invalid_actions: int = 0
    """Number of rejected actions (malformed text, wrong kind, bad payload, timeouts)."""
    leaked: tuple[str, ...] = ()
    """Names of the role's private facts found in its own messages."""
    unclamped_reward: float | None = None
    """The environment's own reward before the base class's safety clamp to [0, 1] (`Environment._finish`).
    Every environment's formula stays in [0, 1] by itself, so this equals `reward`; tests and the fuzz test
    check that on this value, because an assertion on the clamped `reward` could never fail."""


@dataclass(frozen=True)
class Outcome:
    """The result of a finished episode."""

    env_id: str
    scenario_id: str
    agreement: bool
    """True when a deal (or, where the rules say so, a correct decline) was reached."""
    rounds: int
    """Length of the episode in the environment's own unit (turns of a negotiation, rounds of a game)."""
    roles: dict[str, RoleOutcome]
    """Per-role results keyed by agent id."""
    deal: dict[str, Any] | None = None
    """The agreed terms, if any."""
    pareto_optimal: bool | None = None
    """Whether the deal is Pareto-optimal (None where undefined, e.g. no deal)."""
    envy_free: bool | None = None
    """Whether no party prefers the other's share (None where undefined)."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """Environment-specific extras (ending reason, reference utilities, ...)."""


@dataclass(frozen=True)
class TranscriptEntry:
    """One accepted action, in order."""

    index: int
    agent_id: str
    kind: str
    text: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Attempt:
    """One answer of a seat, in the order the environment received it: accepted (it became the transcript
    entry `turn_index`) or refused (with `reason`). A timeout is a refused attempt without text."""

    index: int
    """Position among the episode's attempts (0, 1, ...)."""
    agent_id: str
    text: str
    """What the seat sent: the raw model or person text of a RAW_TEXT action, else the action's own text."""
    kind: str = ""
    """The action kind it parsed to ("" when the text did not parse, or for a timeout)."""
    payload: dict[str, Any] = field(default_factory=dict)
    """The parsed action's structured arguments (empty when it did not parse)."""
    accepted: bool = False
    reason: str = ""
    """Why it was refused (the parser's or the rules' message, "timeout", "it is not your turn"); "" when accepted."""
    turn_index: int | None = None
    """The transcript entry an accepted attempt became; None when refused."""
    request: int | None = None
    """Which turn request it answered (numbered per episode from 0; a refused attempt and its retries share
    it); None for an attempt out of turn."""


S = TypeVar("S", bound=Scenario)


def _json_safe(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return value


class Environment(ABC, Generic[S]):
    """Base class of every environment. Subclasses set `env_id` and `agent_ids` and implement the
    abstract hooks; they call `_request_turn` to ask agents to act and `_finish` to end the episode."""

    env_id: ClassVar[str]
    """Versioned id, e.g. "dnd-v0"."""
    scenario_type: ClassVar[type[Scenario]]
    """The environment's scenario dataclass."""
    max_reply_chars: int = MAX_REPLY_CHARS
    """Reply cap: `parse` cuts longer raw text to its last `max_reply_chars` characters before reading it
    (environments/core/grammar.py); each module's table states its cap."""

    def __init__(self, max_invalid_retries: int = 2) -> None:
        if max_invalid_retries < 0:
            raise ValueError(f"max_invalid_retries must be >= 0, got {max_invalid_retries}")
        self.max_invalid_retries = max_invalid_retries
        self._scenario: S | None = None
        self._done = True

    # ----------------------------------------------------------------- to implement per environment
    @property
    @abstractmethod
    def agent_ids(self) -> tuple[str, ...]:
        """Seats of the current episode (valid after reset)."""

    @classmethod
    @abstractmethod
    def sample_scenario(cls, rng: random.Random) -> S:
        """Draw a scenario from the procedural generator."""

    @abstractmethod
    def action_spec(self, agent_id: str) -> ActionSpec:
        """Action kinds and text grammar of a seat."""

    @abstractmethod
    def parse(self, agent_id: str, text: str) -> Action | ParseError:
        """Turn model text into an action. Must never raise."""

    @abstractmethod
    def private_facts(self, agent_id: str) -> tuple[PrivateFact, ...]:
        """The seat's private facts for leakage detection."""

    @abstractmethod
    def _reset(self, scenario: S) -> list[Event]:
        """Set up the episode; return the opening observations and the first turn requests."""

    @abstractmethod
    def _validate(self, action: Action) -> str | None:
        """Return why a well-kinded action is invalid now (bad payload, illegal move), or None."""

    @abstractmethod
    def _apply(self, action: Action) -> list[Event]:
        """Apply a valid action; return the resulting events."""

    @abstractmethod
    def _on_retries_exhausted(self, agent_id: str) -> list[Event]:
        """The environment's rule when an agent keeps failing (forfeit the turn, end without deal)."""

    @abstractmethod
    def _compute_outcome(self) -> Outcome:
        """Outcome of the finished episode (leakage and invalid counts are filled in by the base)."""

    # ----------------------------------------------------------------------------- public interface
    @property
    def scenario(self) -> S:
        if self._scenario is None:
            raise RuntimeError(f"{self.env_id}: call reset() first")
        return self._scenario

    @property
    def done(self) -> bool:
        return self._done

    @property
    def awaiting(self) -> dict[str, tuple[str, ...]]:
        """Agents currently asked to act, with their allowed action kinds."""
        return dict(self._awaiting)

    @property
    def transcript(self) -> tuple[TranscriptEntry, ...]:
        return tuple(self._transcript)

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        """Every answer of every seat so far, accepted or refused, in order (see `Attempt`)."""
        return tuple(self._attempts)

    @property
    def invalid_counts(self) -> dict[str, int]:
        return dict(self._invalid_counts)

    def reset(self, scenario: S, seed: int = 0) -> list[Event]:
        if not isinstance(scenario, self.scenario_type):
            raise TypeError(f"{self.env_id} expects a {self.scenario_type.__name__}, got {type(scenario).__name__}")
        self._scenario = scenario
        self.rng = random.Random(seed)
        self._done = False
        self._awaiting: dict[str, tuple[str, ...]] = {}
        self._last_request: dict[str, Notification] = {}
        self._transcript: list[TranscriptEntry] = []
        self._attempts: list[Attempt] = []
        self._requests = 0
        self._request_number: dict[str, int] = {}
        self._outcome: Outcome | None = None
        events = self._reset(scenario)
        self._invalid_counts = dict.fromkeys(self.agent_ids, 0)
        self._consecutive_failures = dict.fromkeys(self.agent_ids, 0)
        return events

    def step(self, action: Action) -> list[Event]:
        agent_id = action.agent_id
        sent = action
        if self._done:
            if agent_id in self._invalid_counts:
                self._record_attempt(sent, None, "the episode is over")
            return [self._invalid_note(agent_id, "the episode is over", retries_left=0)]
        if agent_id not in self._awaiting:
            if agent_id in self._invalid_counts:
                self._invalid_counts[agent_id] += 1
                self._record_attempt(sent, None, "it is not your turn")
            return [self._invalid_note(agent_id, "it is not your turn", retries_left=0)]
        if action.kind == RAW_TEXT:
            parsed = self.parse(agent_id, action.text)
            if isinstance(parsed, ParseError):
                return self._refuse(sent, None, parsed.message)
            action = parsed
        allowed = self._awaiting[agent_id]
        if action.kind not in allowed:
            reason = f"action '{action.kind}' is not allowed now; allowed: {', '.join(allowed)}"
            return self._refuse(sent, action, reason)
        reason = self._validate(action)
        if reason is not None:
            return self._refuse(sent, action, reason)
        self._consecutive_failures[agent_id] = 0
        self._record_attempt(sent, action, None, turn_index=len(self._transcript))
        del self._awaiting[agent_id]
        self._transcript.append(
            TranscriptEntry(len(self._transcript), agent_id, action.kind, action.text, dict(action.payload))
        )
        return self._apply(action)

    def timeout(self, agent_id: str) -> list[Event]:
        """The runtime's report that `agent_id` did not answer its turn request in time."""
        if self._done or agent_id not in self._awaiting:
            return []
        note = Notification(agent_id, NotificationKind.TIMEOUT, "You did not act in time.")
        return [note, *self._refuse(Action(agent_id, RAW_TEXT, ""), None, "timeout")]

    def outcome(self) -> Outcome:
        if not self._done or self._outcome is None:
            raise RuntimeError(f"{self.env_id}: the episode is not finished")
        return self._outcome

    def messages_of(self, agent_id: str) -> list[tuple[str, dict[str, Any]]]:
        """(free text, payload) of the agent's accepted actions, in order (what leakage detection reads)."""
        return [(e.text, e.payload) for e in self._transcript if e.agent_id == agent_id and e.text]

    # ------------------------------------------------------------------------- helpers for subclasses
    def _request_turn(
        self, agent_id: str, allowed: Sequence[str], text: str, data: dict[str, Any] | None = None
    ) -> Notification:
        note = Notification(agent_id, NotificationKind.TURN, text, tuple(allowed), dict(data or {}))
        self._awaiting[agent_id] = tuple(allowed)
        self._last_request[agent_id] = note
        self._request_number[agent_id] = self._requests
        self._requests += 1
        return note

    def _cancel_turn(self, agent_id: str) -> None:
        self._awaiting.pop(agent_id, None)

    def _relay(self, action: Action, to: str, text: str, data: dict[str, Any] | None = None) -> Observation:
        """An observation telling `to` what `action.agent_id` did."""
        return Observation(to, text, dict(data or {}), sender=action.agent_id)

    def _finish(self, extra_events: Sequence[Event] = ()) -> list[Event]:
        """End the episode: compute the outcome and notify every agent of its reward."""
        self._done = True
        self._awaiting.clear()
        base = self._compute_outcome()
        roles = {}
        for agent_id, role_outcome in base.roles.items():
            leaked = detect_leaks(self.private_facts(agent_id), self.messages_of(agent_id))
            raw = float(role_outcome.reward)
            roles[agent_id] = RoleOutcome(
                reward=min(1.0, max(0.0, raw)) if raw == raw else 0.0,  # NaN: 0 (and flagged by unclamped_reward)
                utility=float(role_outcome.utility),
                invalid_actions=self._invalid_counts.get(agent_id, 0),
                leaked=leaked,
                unclamped_reward=raw,
            )
        self._outcome = Outcome(
            env_id=base.env_id,
            scenario_id=base.scenario_id,
            agreement=base.agreement,
            rounds=base.rounds,
            roles=roles,
            deal={k: _json_safe(v) for k, v in base.deal.items()} if base.deal is not None else None,
            pareto_optimal=base.pareto_optimal,
            envy_free=base.envy_free,
            metrics=dict(base.metrics),
        )
        events: list[Event] = list(extra_events)
        for agent_id in self.agent_ids:
            r = roles.get(agent_id)
            reward = r.reward if r else None
            text = "The episode is over." + (f" Your reward: {reward:.3f}." if reward is not None else "")
            events.append(
                Notification(
                    agent_id,
                    NotificationKind.EPISODE_END,
                    text,
                    data={"reward": reward, "agreement": self._outcome.agreement},
                )
            )
        return events

    def _invalid_note(self, agent_id: str, reason: str, retries_left: int) -> Notification:
        return Notification(
            agent_id,
            NotificationKind.INVALID_ACTION,
            f"Invalid action: {reason}." + (f" Try again ({retries_left} retries left)." if retries_left else ""),
            data={"reason": reason, "retries_left": retries_left},
        )

    def _record_attempt(
        self, sent: Action, parsed: Action | None, reason: str | None, turn_index: int | None = None
    ) -> None:
        """Keep one answer in `attempts`: `parsed` is what the text parsed to (None when it did not), `reason`
        why it was refused (None: accepted, as transcript entry `turn_index`)."""
        agent_id = sent.agent_id
        raw = sent.kind == RAW_TEXT
        self._attempts.append(
            Attempt(
                index=len(self._attempts),
                agent_id=agent_id,
                text=sent.text,
                kind=parsed.kind if parsed is not None else ("" if raw else sent.kind),
                payload=dict(parsed.payload) if parsed is not None else ({} if raw else dict(sent.payload)),
                accepted=reason is None,
                reason=reason or "",
                turn_index=turn_index,
                request=self._request_number.get(agent_id) if agent_id in self._awaiting else None,
            )
        )

    def _refuse(self, sent: Action, parsed: Action | None, reason: str) -> list[Event]:
        """Record a refused answer, then apply the invalid-action rule (`_reject`)."""
        self._record_attempt(sent, parsed, reason)
        return self._reject(sent.agent_id, reason)

    def _reject(self, agent_id: str, reason: str) -> list[Event]:
        self._invalid_counts[agent_id] += 1
        self._consecutive_failures[agent_id] += 1
        retries_left = self.max_invalid_retries - self._consecutive_failures[agent_id] + 1
        if retries_left <= 0:
            self._consecutive_failures[agent_id] = 0
            self._cancel_turn(agent_id)
            return [self._invalid_note(agent_id, reason, 0), *self._on_retries_exhausted(agent_id)]
        again = self._last_request[agent_id]
        return [self._invalid_note(agent_id, reason, retries_left), again]
