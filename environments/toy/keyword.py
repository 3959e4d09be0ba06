"""Keyword (keyword-v0, keyword-two-turn-v0): toy tasks for checking that a learner learns.

| | |
| --- | --- |
| roles | `writer` |
| private information | none |
| actions | `write` (any text; raw text is always a valid `write`) |
| reward | min(1, occurrences of the scenario's target string (case-insensitive) in the text of the rewarded turn / target_count) |
| termination | after `turns` writes (or after the retries of an empty reply run out; an unwritten turn counts as empty) |
| reply cap | replies longer than 8,000 characters are cut to their last 8,000 before parsing (`max_reply_chars`) |

`keyword-v0` is one turn. `keyword-two-turn-v0` asks for two replies and rewards only the first: the
second reply is unrewarded noise that lies between the deciding choice and the terminal reward, which is
what credit assignment in multi-turn PPO must see through (models/training/config.py PPOHyper.lam/credit).

Used to check that a learner learns: with the engine's sampling restricted to a few tokens (vLLM's
`allowed_token_ids`, e.g. " yes" and " no"), even a tiny random-weight model writes the target in about
half of its tokens by chance, so a policy-gradient learner has a dense signal from the first iteration.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from environments.core.base import (
    ActionSpec,
    Environment,
    Outcome,
    ParseError,
    PrivateFact,
    RoleOutcome,
    Scenario,
    ScenarioError,
)
from environments.core.events import Action, Event, Observation
from environments.core.grammar import cap_reply
from environments.core.quoting import quote
from environments.core.registry import register

WRITER = "writer"


@dataclass(frozen=True)
class KeywordScenario(Scenario):
    """What to write about and which string is rewarded."""

    target: str = "no"
    """The rewarded string ("no": a tiny random model restricted to " yes" / " no" prefers " yes")."""
    target_count: int = 8
    """Occurrences that earn the full reward."""
    topic: str = "the sea"
    """What the writer is asked to write about."""
    turns: int = 1
    """Replies the writer gives."""
    rewarded_turn: int = 0
    """Index of the only reply that is rewarded."""

    def __post_init__(self) -> None:
        if not self.target:
            raise ScenarioError(f"{self.scenario_id}: target must not be empty")
        if not isinstance(self.target, str):
            raise ScenarioError(f"{self.scenario_id}: target must be a string, got {quote(self.target)}")
        if isinstance(self.target_count, bool) or not isinstance(self.target_count, int) or self.target_count < 1:
            raise ScenarioError(f"{self.scenario_id}: target_count must be >= 1, got {self.target_count}")
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (self.turns, self.rewarded_turn)):
            raise ScenarioError(f"{self.scenario_id}: turns and rewarded_turn must be integers")
        if self.turns < 1 or not 0 <= self.rewarded_turn < self.turns:
            raise ScenarioError(f"{self.scenario_id}: need turns >= 1 and 0 <= rewarded_turn < turns")


def keyword_reward(text: str, target: str, target_count: int) -> float:
    return min(1.0, text.lower().count(target.lower()) / target_count)


_TOPICS = ("the sea", "a market", "winter", "a bicycle", "trees", "a letter", "the moon", "bread")


@register
class KeywordEnv(Environment[KeywordScenario]):
    """One reply, rewarded by how often it contains the target string."""

    env_id: ClassVar[str] = "keyword-v0"
    scenario_type: ClassVar[type[Scenario]] = KeywordScenario

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return (WRITER,)

    @classmethod
    def sample_scenario(cls, rng: random.Random) -> KeywordScenario:
        return KeywordScenario(scenario_id=f"gen:{rng.getrandbits(32):08x}", topic=rng.choice(_TOPICS))

    def action_spec(self, agent_id: str) -> ActionSpec:
        return ActionSpec({"write": "write a short text"}, "Write a few sentences.", ("The sea is deep.",))

    def parse(self, agent_id: str, text: str) -> Action | ParseError:
        text = cap_reply(text, self.max_reply_chars)
        if not text.strip():
            return ParseError("empty reply; write a few words")
        return Action(agent_id, "write", text.strip())

    def private_facts(self, agent_id: str) -> tuple[PrivateFact, ...]:
        return ()

    def _reset(self, scenario: KeywordScenario) -> list[Event]:
        self._texts: list[str] = []
        return [
            Observation(
                WRITER,
                f"Write a few sentences about {scenario.topic}.",
                {"role": WRITER, "private": {}, "public": {}},
                private=True,
            ),
            self._ask(),
        ]

    def _ask(self) -> Event:
        turn, total = len(self._texts), self.scenario.turns
        meta = {"turn": turn, "max_turns": total, "pending_offer": None}
        return self._request_turn(WRITER, ["write"], f"Your turn ({turn + 1}/{total}).", meta)

    @property
    def _text(self) -> str:
        """The rewarded reply (empty until it is written)."""
        index = self.scenario.rewarded_turn
        return self._texts[index] if index < len(self._texts) else ""

    def _validate(self, action: Action) -> str | None:
        return None if action.text.strip() else "empty text"

    def _apply(self, action: Action) -> list[Event]:
        self._texts.append(action.text)
        if len(self._texts) < self.scenario.turns:
            return [self._ask()]
        return self._finish()

    def _on_retries_exhausted(self, agent_id: str) -> list[Event]:
        return self._finish()

    def _compute_outcome(self) -> Outcome:
        s = self.scenario
        reward = keyword_reward(self._text, s.target, s.target_count)
        count = self._text.lower().count(s.target.lower())
        return Outcome(
            env_id=self.env_id,
            scenario_id=s.scenario_id,
            agreement=bool(self._text),
            rounds=len(self._texts),
            roles={WRITER: RoleOutcome(reward, float(count))},
            metrics={"occurrences": count, "length": len(self._text)},
        )


@register
class KeywordTwoTurnEnv(KeywordEnv):
    """Two replies, only the first rewarded (see the module docstring)."""

    env_id: ClassVar[str] = "keyword-two-turn-v0"

    @classmethod
    def sample_scenario(cls, rng: random.Random) -> KeywordScenario:
        return KeywordScenario(
            scenario_id=f"gen:{rng.getrandbits(32):08x}", topic=rng.choice(_TOPICS), turns=2, rewarded_turn=0
        )
