"""The async runtime: partial observability, timeouts, invalid-action retries, concurrent episodes."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from environments.core.base import (
    ActionSpec,
    Environment,
    Outcome,
    ParseError,
    PrivateFact,
    RoleOutcome,
    Scenario,
)
from environments.core.events import RAW_TEXT, Action, Event, Notification, NotificationKind, Observation
from environments.core.runtime import EpisodeSpec, run_episode, run_episodes


@dataclass(frozen=True)
class GuessScenario(Scenario):
    secret: int


class GuessEnv(Environment[GuessScenario]):
    """A test game: 'keeper' privately knows a secret number, 'guesser' gets 3 turns to say it.
    Both are asked at once in the first turn (simultaneous moves), then only the guesser."""

    env_id: ClassVar[str] = "guess-v0"
    scenario_type: ClassVar[type[Scenario]] = GuessScenario

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return ("keeper", "guesser")

    @classmethod
    def sample_scenario(cls, rng: random.Random) -> GuessScenario:
        return GuessScenario("gen", rng.randint(0, 9))

    def action_spec(self, agent_id: str) -> ActionSpec:
        return ActionSpec({"guess": "say a digit", "hint": "say anything"}, "GUESS <digit>")

    def parse(self, agent_id: str, text: str) -> Action | ParseError:
        text = text.strip()
        if agent_id == "keeper":
            return Action(agent_id, "hint", text)
        if text.startswith("GUESS ") and text[6:].isdigit():
            return Action(agent_id, "guess", text, {"value": int(text[6:])})
        return ParseError("write GUESS <digit>")

    def private_facts(self, agent_id: str) -> tuple[PrivateFact, ...]:
        return (PrivateFact("secret", "the secret", numbers=(self.scenario.secret,)),) if agent_id == "keeper" else ()

    def _reset(self, scenario: GuessScenario) -> list[Event]:
        self.turns, self.won = 0, False
        return [
            Observation("keeper", f"The secret is {scenario.secret}", {"secret": scenario.secret}, private=True),
            Observation("guesser", "Guess the secret digit."),
            self._request_turn("keeper", ["hint"], "Say something", {"turn": 0, "max_turns": 3}),
            self._request_turn("guesser", ["guess"], "Guess", {"turn": 0, "max_turns": 3}),
        ]

    def _validate(self, action: Action) -> str | None:
        if action.kind == "guess" and not 0 <= action.payload.get("value", -1) <= 9:
            return "a digit please"
        return None

    def _apply(self, action: Action) -> list[Event]:
        if action.kind == "hint":
            return [Observation("guesser", f"keeper says: {action.text}", sender="keeper")]
        return self._after_guess(action.payload["value"] == self.scenario.secret)

    def _after_guess(self, correct: bool) -> list[Event]:
        self.turns += 1
        self.won = correct
        if correct or self.turns >= 3:
            self._cancel_turn("keeper")
            return self._finish()
        return [self._request_turn("guesser", ["guess"], "Guess again", {"turn": self.turns, "max_turns": 3})]

    def _on_retries_exhausted(self, agent_id: str) -> list[Event]:
        return self._after_guess(False) if agent_id == "guesser" else []

    def _compute_outcome(self) -> Outcome:
        reward = 1.0 if self.won else 0.0
        return Outcome(
            self.env_id,
            self.scenario.scenario_id,
            self.won,
            self.turns,
            {"guesser": RoleOutcome(reward, reward), "keeper": RoleOutcome(0.0, 0.0)},
        )


class ScriptedAgent:
    """Plays a fixed list of texts (as RAW_TEXT) and remembers everything it was shown."""

    def __init__(self, texts: list[str], delay: float = 0.0, tracker: dict[str, int] | None = None) -> None:
        self.texts, self.delay, self.tracker = list(texts), delay, tracker
        self.seen: list[Event] = []

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id = agent_id

    async def observe(self, event: Event) -> None:
        self.seen.append(event)

    async def act(self, request: Notification) -> Action:
        if self.tracker is not None:
            self.tracker["now"] += 1
            self.tracker["max"] = max(self.tracker["max"], self.tracker["now"])
        try:
            await asyncio.sleep(self.delay)
        finally:
            if self.tracker is not None:
                self.tracker["now"] -= 1
        return Action(self.agent_id, RAW_TEXT, self.texts.pop(0) if self.texts else "")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_each_agent_sees_only_its_own_events() -> None:
    keeper = ScriptedAgent(["I will not tell you"])
    guesser = ScriptedAgent(["GUESS 1", "GUESS 2", "GUESS 3"])
    result = run(
        run_episode(GuessEnv(), {"keeper": keeper, "guesser": guesser}, GuessScenario("s", 7), keep_inboxes=True)
    )
    assert all(e.to == "guesser" for e in guesser.seen)
    assert all(e.to == "keeper" for e in keeper.seen)
    assert not any("secret is 7" in getattr(e, "text", "") for e in guesser.seen)
    assert any("I will not tell you" in e.text for e in guesser.seen if isinstance(e, Observation))
    assert [e for e in result.inboxes["guesser"]] == guesser.seen
    assert result.outcome.roles["guesser"].reward == 0.0
    assert result.outcome.rounds == 3  # three guesses
    assert len(result.transcript) == 4  # one hint + three guesses


def test_correct_guess_wins_and_leak_is_detected() -> None:
    keeper = ScriptedAgent(["psst, it is 4"])
    guesser = ScriptedAgent(["GUESS 4"], delay=0.01)
    result = run(run_episode(GuessEnv(), {"keeper": keeper, "guesser": guesser}, GuessScenario("s", 4)))
    assert result.outcome.agreement
    assert result.outcome.roles["guesser"].reward == 1.0
    assert result.outcome.roles["keeper"].leaked == ("secret",)


def test_malformed_text_is_counted_retried_and_then_the_rule_applies() -> None:
    env = GuessEnv(max_invalid_retries=1)
    keeper = ScriptedAgent(["hi"])
    guesser = ScriptedAgent(["banana", "GUESS x", "GUESS 5", "", "", "GUESS 3"])
    result = run(run_episode(env, {"keeper": keeper, "guesser": guesser}, GuessScenario("s", 3)))
    invalid = [e for e in guesser.seen if isinstance(e, Notification) and e.kind == NotificationKind.INVALID_ACTION]
    # banana (retry), GUESS x (exhausted -> forfeits guess 1), GUESS 5 (guess 2), "" (retry), "" (forfeit 3)
    assert len(invalid) == 4
    assert [n.data["retries_left"] for n in invalid] == [1, 0, 1, 0]
    assert result.outcome.roles["guesser"].invalid_actions == 4
    assert not result.outcome.agreement


def test_every_attempt_is_recorded_with_its_parse_or_the_reason_it_was_refused() -> None:
    env = GuessEnv(max_invalid_retries=1)
    keeper = ScriptedAgent(["hi"])
    guesser = ScriptedAgent(["banana", "GUESS x", "GUESS 12", "GUESS 5", "", "", "GUESS 3"])
    result = run(run_episode(env, {"keeper": keeper, "guesser": guesser}, GuessScenario("s", 3)))
    rows = [(a.agent_id, a.text, a.accepted, a.kind, a.reason, a.turn_index) for a in result.attempts]
    # The four refusals the outcome counts, each with the parser's or the rules' reason, in order.
    assert [r for r in rows if r[0] == "guesser"] == [
        ("guesser", "banana", False, "", "write GUESS <digit>", None),
        ("guesser", "GUESS x", False, "", "write GUESS <digit>", None),  # exhausted: guess 1 forfeited
        ("guesser", "GUESS 12", False, "guess", "a digit please", None),  # parsed, but against the rules
        ("guesser", "GUESS 5", True, "guess", "", 1),
        ("guesser", "", False, "", "write GUESS <digit>", None),
        ("guesser", "", False, "", "write GUESS <digit>", None),
    ]
    assert ("keeper", "hi", True, "hint", "", 0) in rows
    assert sum(not a.accepted for a in result.attempts) == result.outcome.roles["guesser"].invalid_actions == 5
    assert [a.index for a in result.attempts] == list(range(len(result.attempts)))
    accepted = [a for a in result.attempts if a.accepted]
    assert [(a.turn_index, a.agent_id, a.kind) for a in accepted] == [
        (t.index, t.agent_id, t.kind) for t in result.transcript
    ]
    # A refusal and its retry answer the same turn request; the next request has another number.
    banana, x, twelve, five = [a for a in result.attempts if a.agent_id == "guesser"][:4]
    assert banana.request == x.request != twelve.request == five.request


def test_a_timeout_and_a_move_out_of_turn_are_refused_attempts() -> None:
    slow = ScriptedAgent(["GUESS 1"], delay=5.0)
    result = run(
        run_episode(
            GuessEnv(max_invalid_retries=0), {"keeper": ScriptedAgent(["hi"]), "guesser": slow},
            GuessScenario("s", 1), turn_timeout=0.02,
        )
    )  # fmt: skip
    assert [(a.text, a.reason) for a in result.attempts if a.agent_id == "guesser"] == [("", "timeout")] * 3
    env = GuessEnv()
    env.reset(GuessScenario("s", 2))
    env.step(Action("keeper", "hint", "hello"))
    env.step(Action("keeper", "hint", "again"))
    assert [(a.text, a.kind, a.accepted, a.reason, a.request) for a in env.attempts] == [
        ("hello", "hint", True, "", 0),
        ("again", "hint", False, "it is not your turn", None),
    ]


def test_timeout_counts_as_a_failed_attempt() -> None:
    keeper = ScriptedAgent(["hi"])
    slow = ScriptedAgent(["GUESS 1"] * 10, delay=5.0)
    result = run(
        run_episode(
            GuessEnv(max_invalid_retries=0),
            {"keeper": keeper, "guesser": slow},
            GuessScenario("s", 1),
            turn_timeout=0.02,
        )
    )
    assert result.timeouts["guesser"] == 3
    assert result.outcome.roles["guesser"].invalid_actions == 3
    assert any(isinstance(e, Notification) and e.kind == NotificationKind.TIMEOUT for e in slow.seen)
    assert result.outcome.roles["guesser"].reward == 0.0


def test_acting_out_of_turn_is_rejected_without_changing_state() -> None:
    env = GuessEnv()
    env.reset(GuessScenario("s", 2))
    env.step(Action("keeper", "hint", "hello"))
    events = env.step(Action("keeper", "hint", "again"))
    assert len(events) == 1 and events[0].kind == NotificationKind.INVALID_ACTION
    assert env.invalid_counts["keeper"] == 1
    assert len(env.transcript) == 1


def test_many_episodes_run_concurrently_and_in_order() -> None:
    tracker = {"now": 0, "max": 0}
    specs = [
        EpisodeSpec(
            make_env=GuessEnv,
            make_agents=lambda i=i: {
                "keeper": ScriptedAgent(["..."], delay=0.01, tracker=tracker),
                "guesser": ScriptedAgent([f"GUESS {i % 10}"] * 3, delay=0.01, tracker=tracker),
            },
            scenario=GuessScenario(f"s{i}", i % 10),
            seed=i,
            episode_id=f"e{i}",
        )
        for i in range(12)
    ]
    results = run(run_episodes(specs, concurrency=8))
    assert [r.episode_id for r in results] == [f"e{i}" for i in range(12)]
    assert all(r.outcome.agreement for r in results)
    assert tracker["max"] > 2  # several episodes' agents were waiting at once


def test_missing_agent_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no agent for seats"):
        run(run_episode(GuessEnv(), {"keeper": ScriptedAgent([])}, GuessScenario("s", 1)))


def test_reset_rejects_a_foreign_scenario() -> None:
    @dataclass(frozen=True)
    class Other(Scenario):
        pass

    with pytest.raises(TypeError, match="expects a GuessScenario"):
        GuessEnv().reset(Other("x"))  # type: ignore[arg-type]
