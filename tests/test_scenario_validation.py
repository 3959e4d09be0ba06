"""Values that reach the rules are validated at construction. Wrong types give a clear ScenarioError
naming the field (not a TypeError later, not silent acceptance); non-finite prices, reservations and stocks are
rejected; Sugarscape stocks have a documented upper bound (10**13 ran out of memory)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from environments import sample_scenarios
from environments.core.base import ScenarioError
from environments.yoao.sugarscape import MAX_STOCK, SugarscapeConfig, TraderState, TradeScenario
from environments.yoao.sugarscape_core import AgentInit, SugarscapeWorld

INF, NAN = float("inf"), float("nan")


def _with(env_id: str, **changes: Any) -> Any:
    scenario = sample_scenarios(env_id, 1, seed=0)[0]
    return dataclasses.replace(scenario, **changes)


@pytest.mark.parametrize(
    ("env_id", "changes", "field"),
    [
        ("dnd-v0", {"max_turns": "20"}, "max_turns"),
        ("dnd-v0", {"max_turns": 2.5}, "max_turns"),
        ("dnd-v0", {"max_turns": True}, "max_turns"),
        ("casino-v0", {"max_turns": "20"}, "max_turns"),
        ("craigslist-v0", {"max_turns": "20"}, "max_turns"),
        ("craigslist-v0", {"max_turns": 2.5}, "max_turns"),
        ("craigslist-v0", {"listing_price": "265"}, "listing_price"),
        ("craigslist-v0", {"listing_price": INF}, "listing_price"),
        ("craigslist-v0", {"listing_price": NAN}, "listing_price"),
        ("craigslist-v0", {"buyer_target": NAN}, "buyer_target"),
        ("craigslist-v0", {"buyer_target": True}, "buyer_target"),
        ("craigslist-v0", {"description": "Red and fast"}, "description"),
        ("marketplace-v0", {"max_turns": 2.5}, "max_turns"),
        ("marketplace-v0", {"listed_price": INF}, "listed_price"),
        ("marketplace-v0", {"buyer_reservation": INF}, "buyer_reservation"),
        ("marketplace-v0", {"seller_reservation": NAN}, "seller_reservation"),
        ("marketplace-v0", {"seller_reservation": "10"}, "seller_reservation"),
        ("job-interview-v0", {"max_turns": "20"}, "max_turns"),
        ("calendar-v0", {"max_turns": 2.5}, "max_turns"),
        ("calendar-v0", {"adversarial": "no"}, "adversarial"),
        ("calendar-v0", {"day_start": True}, "day_start"),
        ("red-black-v0", {"rounds": 2.5}, "rounds"),
        ("keyword-v0", {"target_count": "8"}, "target_count"),
    ],
)
def test_wrong_types_and_non_finite_values_are_rejected_naming_the_field(
    env_id: str, changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ScenarioError, match=field):
        _with(env_id, **changes)


def test_job_interview_weights_and_values_must_be_numbers_not_text() -> None:
    scenario = sample_scenarios("job-interview-v0", 1, seed=0)[0]
    weights = {role: dict(w) for role, w in scenario.weights.items()}
    weights["recruiter"]["salary"] = str(weights["recruiter"]["salary"])
    with pytest.raises(ScenarioError, match="recruiter weight of salary must be a number"):
        dataclasses.replace(scenario, weights=weights)
    values = {role: dict(v) for role, v in scenario.values.items()}
    values["candidate"]["position"] = (0.0, NAN, 1.0, 0.5)
    with pytest.raises(ScenarioError, match="candidate value for position"):
        dataclasses.replace(scenario, values=values)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sugar": 10**13}, "sugar must be a whole number in"),
        ({"spice": MAX_STOCK + 1}, "spice must be a whole number in"),
        ({"sugar": 5.5}, "sugar must be a whole number"),
        ({"sugar": "5"}, "sugar must be a whole number"),
        ({"metabolism_sugar": 0}, "metabolism_sugar"),
        ({"leaning": NAN}, "leaning"),
        ({"leaning": True}, "leaning"),
    ],
)
def test_trader_states_are_bounded_and_typed(kwargs: dict[str, Any], message: str) -> None:
    values = {"sugar": 5, "spice": 5, "metabolism_sugar": 1, "metabolism_spice": 1} | kwargs
    with pytest.raises(ScenarioError, match=message):
        TraderState(**values)


def test_the_largest_allowed_stocks_still_run_an_encounter_within_memory() -> None:
    """At MAX_STOCK the best-deal search behind the reward runs (10**13 raised MemoryError)."""
    from environments.core.events import RAW_TEXT, Action
    from environments.yoao.sugarscape import TRADER_A, TRADER_B, TradeEncounter

    env = TradeEncounter()
    env.reset(TradeScenario("big", TraderState(MAX_STOCK, 1, 1, 1), TraderState(1, MAX_STOCK, 1, 1)), seed=0)
    script = [(TRADER_A, "hi"), (TRADER_B, "hi"), (TRADER_A, "so"), (TRADER_B, "so")]
    script += [(TRADER_A, "INTENT: NO TRADE"), (TRADER_B, "INTENT: NO TRADE")]
    script += [(TRADER_A, "REFLECT: 0"), (TRADER_B, "REFLECT: 0")]
    for seat, text in script:
        env.step(Action(seat, RAW_TEXT, text))
    outcome = env.outcome()
    assert outcome.metrics["ending"] == "declined"
    assert outcome.metrics["welfare"][TRADER_A]["best"] > outcome.metrics["welfare"][TRADER_A]["before"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_agents": 100.5}, "n_agents must be an integer"),
        ({"max_ticks": 2.5}, "max_ticks must be an integer"),
        ({"width": "20"}, "width must be an integer"),
        ({"torus": "yes"}, "torus must be True or False"),
        ({"sugar_endowment": (5, 10**13)}, "exceeds the bound"),
        ({"sugar_endowment": (5.5, 25)}, "pair \\(low, high\\) of integers"),
        ({"sugar_endowment": "5-25"}, "pair \\(low, high\\) of integers"),
        ({"max_ticks": 10**9}, "max_ticks must lie in"),
    ],
)
def test_sugarscape_config_is_typed_and_bounded(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        SugarscapeConfig(**kwargs)


def test_hand_placed_agents_are_typed_and_bounded() -> None:
    with pytest.raises(ScenarioError, match=r"AgentInit\.sugar"):
        AgentInit(row=0, col=0, sugar=10**13)
    with pytest.raises(ScenarioError, match=r"AgentInit\.row"):
        AgentInit(row=0.5, col=0)
    world = SugarscapeWorld(SugarscapeConfig(n_agents=1), agents=[AgentInit(row=1, col=1, sugar=MAX_STOCK)])
    world.step()  # the movement's table of logarithms grows to the stock without running out of memory
    assert world.alive == 1
