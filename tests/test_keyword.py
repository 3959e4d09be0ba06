"""The keyword toy task's reward by hand."""

from __future__ import annotations

import pytest

from environments import make
from environments.core.base import ScenarioError
from environments.core.events import RAW_TEXT, Action
from environments.toy.keyword import KeywordScenario, keyword_reward


def test_reward_counts_the_target_case_insensitively_and_caps_at_one() -> None:
    assert keyword_reward("EeE", "e", 6) == 0.5
    assert keyword_reward("eeeeeeeeee", "e", 8) == 1.0
    assert keyword_reward("xyz", "e", 8) == 0.0


def test_one_write_ends_the_episode_with_its_reward() -> None:
    env = make("keyword-v0")
    env.reset(KeywordScenario("k", target="a", target_count=4, topic="bread"))
    env.step(Action("writer", RAW_TEXT, "banana"))
    outcome = env.outcome()
    assert outcome.roles["writer"].reward == 0.75 and outcome.metrics["occurrences"] == 3


def test_empty_replies_exhaust_retries_with_reward_zero() -> None:
    env = make("keyword-v0", max_invalid_retries=1)
    env.reset(KeywordScenario("k", target="e"))
    env.step(Action("writer", RAW_TEXT, ""))
    env.step(Action("writer", RAW_TEXT, "  "))
    assert env.done and env.outcome().roles["writer"].reward == 0.0
    assert env.outcome().roles["writer"].invalid_actions == 2


def test_scenario_is_checked() -> None:
    with pytest.raises(ScenarioError, match="target_count"):
        KeywordScenario("k", target_count=0)
