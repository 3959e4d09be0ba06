"""CaSiNo: rules, rewards by hand, parser, leakage, loader (with the human outcome points), determinism, code agents."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agents.socialrl.code_agents import make_code_agent
from environments import make, sample_scenarios
from environments.core.base import ParseError, ScenarioError
from environments.core.data import DataFileError, dataset_path
from environments.core.events import RAW_TEXT, Action, NotificationKind, Observation
from environments.core.leakage import detect_leaks
from environments.core.runtime import run_episode
from environments.socialrl.casino import (
    CasinoEnv,
    CasinoScenario,
    human_points,
    reason_patterns,
    reference,
    rewards_for_points,
)

A1, A2 = "mturk_agent_1", "mturk_agent_2"
# Agent 1: water High (5), food Medium (4), firewood Low (3). Agent 2: food High (5), firewood Medium (4), water Low (3).
SCENARIO = CasinoScenario(
    "t",
    agent_1_priorities=("water", "food", "firewood"),
    agent_1_reasons=(
        "It is hot and dry where we camp and I don't want to get dehydrated.",
        "I am going with a big family and any extra food will help.",
        "My children want to roast marshmallows every evening.",
    ),
    agent_2_priorities=("food", "firewood", "water"),
    agent_2_reasons=(
        "We burn a lot of calories on long hikes.",
        "The nights are freezing up there.",
        "We have a filter.",
    ),
    max_turns=6,
)


def _mine(food: int, water: int, firewood: int) -> dict:
    return {"mine": {"food": food, "water": water, "firewood": firewood}}


def test_reference_agreement_by_hand() -> None:
    # Agent 1's share (f, w, x): u1 = 4f + 5w + 3x, u2 = 5(3-f) + 3(3-w) + 4(3-x). Envy-free = both >= 18 (half of the
    # 36 each side's pool is worth). The envy-free splits no other split dominates:
    #   (0,3,1): u1 = 15 + 3 = 18, u2 = 15 + 8 = 23      (0,3,2): u1 = 15 + 6 = 21, u2 = 15 + 4 = 19
    #   (1,3,0): u1 = 4 + 15 = 19, u2 = 10 + 12 = 22     (1,3,1): u1 = 4 + 15 + 3 = 22, u2 = 10 + 8 = 18
    # (e.g. the envy-free (2,2,0) = 18/20 is dominated by (0,3,1) = 18/23). References: agent 1 22, agent 2 23.
    ref = reference(SCENARIO)
    assert ref.basis == "pareto_envy_free"
    assert set(ref.allocations) == {(0, 3, 1), (0, 3, 2), (1, 3, 0), (1, 3, 1)}
    assert ref.points == (22.0, 23.0)
    assert rewards_for_points(SCENARIO, 19, 22) == {A1: pytest.approx(19 / 22), A2: pytest.approx(22 / 23)}
    assert rewards_for_points(SCENARIO, 5, 5) == {A1: pytest.approx(5 / 22), A2: pytest.approx(5 / 23)}  # walk-away
    assert rewards_for_points(SCENARIO, 30, 9)[A1] == 1.0  # clipped
    # The figures docs/environments.md prints: the deal (1, 3, 1) scores 22 / 18 points, a walk-away 5 / 5.
    deal = rewards_for_points(SCENARIO, 22, 18)
    assert deal[A1] == 1.0 and round(deal[A2], 3) == 0.783
    walk_away = rewards_for_points(SCENARIO, 5, 5)
    assert (round(walk_away[A1], 3), round(walk_away[A2], 3)) == (0.227, 0.217)


def test_identical_priorities_reference_is_an_even_split() -> None:
    # Same values: every split is Pareto-optimal (the points always sum to 36), envy-free only at 18 each,
    # e.g. (3, 0, 1) = 15 + 3 = 18. So both references are 18.
    same = CasinoScenario(
        "s", ("food", "water", "firewood"), ("a b c",) * 3, ("food", "water", "firewood"), ("d e f",) * 3
    )
    assert reference(same).points == (18.0, 18.0)
    assert (3, 0, 1) in reference(same).allocations


def test_a_deal_through_raw_text() -> None:
    env = CasinoEnv()
    events = env.reset(SCENARIO, seed=1)
    private = next(e for e in events if isinstance(e, Observation) and e.to == A1)
    assert private.data["private"]["points"] == {"food": 4, "water": 5, "firewood": 3}
    env.step(Action(A1, RAW_TEXT, "We need water badly.\n**PROPOSE: food=1, water=3, firewood=1**"))
    events = env.step(Action(A2, RAW_TEXT, "Sounds fair!\nAccept"))
    assert env.done
    relay = next(e for e in events if isinstance(e, Observation) and e.to == A1)
    assert relay.data["accepted"] == _mine(2, 0, 2)  # agent 2's share
    outcome = env.outcome()
    assert outcome.agreement and outcome.deal == {A1: _mine(1, 3, 1)["mine"], A2: _mine(2, 0, 2)["mine"]}
    assert outcome.roles[A1].utility == 22.0 and outcome.roles[A2].utility == 18.0
    assert outcome.roles[A1].reward == 1.0 and outcome.roles[A2].reward == pytest.approx(18 / 23)
    assert outcome.pareto_optimal is True and outcome.envy_free is True


def test_reject_clears_the_standing_proposal_and_walk_away_gives_five_each() -> None:
    env = CasinoEnv()
    env.reset(SCENARIO)
    events = env.step(Action(A1, "propose", "", _mine(3, 3, 3)))
    assert events[-1].data["pending_offer"] == _mine(3, 3, 3) and "reject" in events[-1].allowed
    events = env.step(Action(A2, RAW_TEXT, "No way.\nREJECT"))
    assert next(e for e in events if isinstance(e, Observation)).data == {"rejected": True}
    events = env.step(Action(A1, "message", "ok"))
    assert "accept" not in events[-1].allowed and events[-1].data["pending_offer"] is None
    env.step(Action(A2, RAW_TEXT, "Walk-Away"))
    outcome = env.outcome()
    assert not outcome.agreement and outcome.metrics["ending"] == "walk_away"
    assert outcome.roles[A1].utility == 5.0 and outcome.roles[A2].utility == 5.0
    assert outcome.roles[A1].reward == pytest.approx(5 / 22) and outcome.roles[A2].reward == pytest.approx(5 / 23)
    assert outcome.pareto_optimal is None and outcome.envy_free is None


def test_max_turns_counts_as_a_walk_away() -> None:
    env = CasinoEnv()
    env.reset(SCENARIO)
    for turn in range(6):
        env.step(Action(A1 if turn % 2 == 0 else A2, "message", "hm"))
    assert env.done
    outcome = env.outcome()
    assert outcome.metrics["ending"] == "max_turns" and outcome.roles[A2].utility == 5.0


def test_parser_good_sloppy_and_malformed() -> None:
    env = CasinoEnv()
    env.reset(SCENARIO)
    assert env.parse(A1, "PROPOSE food=2 water=1 firewood=0").payload == _mine(2, 1, 0)
    assert env.parse(A1, "Submit-Deal: 3 packages of water, 2 food packages and no firewood").payload == _mine(2, 3, 0)
    assert env.parse(A1, "propose: Food: 1, Water: 2, Firewood: 3.").payload == _mine(1, 2, 3)
    assert env.parse(A1, "I get 2 food, 1 water and 0 wood, you get the rest").payload == _mine(2, 1, 0)
    assert env.parse(A1, "I'll take 3 water").kind == "message"  # not a full split
    assert env.parse(A1, "I can't accept that, sorry").kind == "message"
    assert env.parse(A1, "I need firewood for the cold nights").kind == "message"
    assert env.parse(A1, "WALK AWAY").kind == "walk_away"
    assert env.parse(A1, "no deal.").kind == "walk_away"
    assert isinstance(env.parse(A1, "PROPOSE food=2 water=1"), ParseError)
    assert isinstance(env.parse(A1, "PROPOSE water=1 food=2 firewood=0 water=2"), ParseError)
    assert isinstance(env.parse(A1, "PROPOSE something nice"), ParseError)
    assert isinstance(env.parse(A1, ""), ParseError)
    env.step(Action(A1, "propose", "", _mine(1, 3, 1)))
    accept = env.parse(A2, "ok then. Accept-Deal")
    assert accept.kind == "accept" and accept.payload == _mine(2, 0, 2)
    assert env.parse(A2, "- reject").kind == "reject"


def test_invalid_actions_are_counted_retried_then_the_turn_is_forfeited() -> None:
    env = CasinoEnv(max_invalid_retries=1)
    env.reset(SCENARIO)
    events = env.step(Action(A1, "reject", ""))  # nothing to reject
    assert events[0].kind == NotificationKind.INVALID_ACTION and events[1].to == A1
    events = env.step(Action(A1, "propose", "", _mine(4, 0, 0)))
    assert events[0].kind == NotificationKind.INVALID_ACTION and "pool holds 3" in events[0].data["reason"]
    assert events[-1].to == A2 and events[-1].kind == NotificationKind.TURN
    events = env.step(Action(A2, "accept", "", _mine(0, 0, 0)))  # no standing proposal from agent 1
    assert events[0].kind == NotificationKind.INVALID_ACTION
    assert env.invalid_counts == {A1: 2, A2: 1}
    env.step(Action(A2, "walk_away", ""))
    assert env.outcome().roles[A1].invalid_actions == 2


def test_leakage_of_priorities_and_reasons() -> None:
    env = CasinoEnv()
    env.reset(SCENARIO)
    facts = env.private_facts(A1)  # water High, food Medium, firewood Low
    positives = {
        "priority:water": [
            "Water is my top priority.",
            "My highest priority is water",
            "I need water the most",
            "water > food",
        ],
        "priority:food": ["food is my second priority", "My second priority would be the food"],
        "priority:firewood": [
            "firewood is my lowest priority",
            "I don't really need firewood",
            "I need the firewood least",
        ],
        "reason:water": ["it's hot and dry where we camp, so"],
        "reason:food": ["we are going with a BIG family!"],
        "reason:firewood": ["the kids want to roast marshmallows every evening"],
    }
    for name, texts in positives.items():
        for text in texts:
            assert name in detect_leaks(facts, [text]), text
    negatives = [
        "Food is my top priority.",  # a bluff: food is agent 1's Medium item
        "I don't need firewood as much as you",  # comparative, not a disclosure of Low
        "What is your top priority?",
        "I'd like 2 water and 1 food; you get the rest",
        "We are going camping with friends this weekend",
        "I want to make sure we both have a great trip",
    ]
    for text in negatives:
        assert detect_leaks(facts, [text]) == (), text


def test_reason_patterns_need_content_words() -> None:
    assert reason_patterns("ok") == ()
    assert reason_patterns("I am going to the lake") == ()  # at most one content word ("lake") in any run
    patterns = reason_patterns("It is hot and dry")
    assert patterns and all(p.startswith(r"\b") for p in patterns)


def test_leakage_is_reported_in_the_outcome() -> None:
    env = CasinoEnv()
    env.reset(SCENARIO)
    env.step(
        Action(
            A1,
            RAW_TEXT,
            "Water is my top priority since it is hot and dry where we camp.\nPROPOSE food=1 water=3 firewood=1",
        )
    )
    env.step(Action(A2, RAW_TEXT, "Hmm, what would you say to that?"))
    env.step(Action(A1, "walk_away", "bye"))
    assert env.outcome().roles[A1].leaked == ("priority:water", "reason:water")
    assert env.outcome().roles[A2].leaked == ()


def test_scenario_validation() -> None:
    reasons = ("a b c", "d e f", "g h i")
    with pytest.raises(ScenarioError, match="agent_1_priorities"):
        CasinoScenario("x", ("food", "food", "water"), reasons, ("food", "water", "firewood"), reasons)
    with pytest.raises(ScenarioError, match="agent_2_priorities"):
        CasinoScenario("x", ("food", "water", "firewood"), reasons, ("food", "water", "fish"), reasons)
    with pytest.raises(ScenarioError, match="3 reasons"):
        CasinoScenario("x", ("food", "water", "firewood"), ("a",), ("food", "water", "firewood"), reasons)
    with pytest.raises(ScenarioError, match="non-empty"):
        CasinoScenario("x", ("food", "water", "firewood"), ("a", "", "c"), ("food", "water", "firewood"), reasons)
    with pytest.raises(ScenarioError, match="max_turns"):
        CasinoScenario("x", ("food", "water", "firewood"), reasons, ("food", "water", "firewood"), reasons, max_turns=0)


def _records(split: str) -> list[dict]:
    path = dataset_path("casino", f"casino_{split}.json")
    if path is None:
        pytest.skip("shared data not present")
    return json.loads(path.read_text())


def test_loader_reads_every_dialogue_of_the_real_data() -> None:
    train, valid = _records("train"), _records("valid")
    scenarios = CasinoEnv.load_dataset()
    assert len(scenarios) == len(train) == 900
    assert len(CasinoEnv.load_dataset(split="valid")) == len(valid) == 30
    first = scenarios[0]  # dialogue 938: agent 1 High Firewood, Medium Food, Low Water
    assert first.scenario_id == "casino:938" and first.agent_1_priorities == ("firewood", "food", "water")
    assert first.reasons(A2)["water"] == "i have health issues that necessitates this"


def test_recomputed_human_points_match_the_dataset() -> None:
    records = _records("train") + _records("valid")
    matches = mismatches = 0
    for record in records:
        recomputed = human_points(record)
        recorded = {a: p["outcomes"]["points_scored"] for a, p in record["participant_info"].items()}
        if recomputed == recorded:
            matches += 1
        else:
            mismatches += 1
    assert (matches, mismatches) == (930, 0)  # every dialogue ends in an Accept-Deal (906) or a Walk-Away (24)


def test_human_points_of_a_walk_away_and_a_deal() -> None:
    info = {
        A1: {"value2issue": {"High": "Water", "Medium": "Food", "Low": "Firewood"}},
        A2: {"value2issue": {"High": "Food", "Medium": "Firewood", "Low": "Water"}},
    }
    submit = {
        "text": "Submit-Deal",
        "id": A2,
        "task_data": {
            "issue2youget": {"Food": "2", "Water": "0", "Firewood": "2"},
            "issue2theyget": {"Food": "1", "Water": "3", "Firewood": "1"},
        },
    }
    deal = {"participant_info": info, "chat_logs": [submit, {"text": "Accept-Deal", "id": A1, "task_data": {}}]}
    assert human_points(deal) == {A1: 22, A2: 18}
    walk = {"participant_info": info, "chat_logs": [submit, {"text": "Walk-Away", "id": A1, "task_data": {}}]}
    assert human_points(walk) == {A1: 5, A2: 5}


def test_loader_names_file_and_record_of_a_broken_dialogue(tmp_path: Path) -> None:
    def participant(order: list[str]) -> dict:
        return {
            "value2issue": dict(zip(("High", "Medium", "Low"), order, strict=True)),
            "value2reason": {"High": "r one two", "Medium": "r three four", "Low": "r five six"},
        }

    good = {
        "dialogue_id": 1,
        "participant_info": {
            A1: participant(["Food", "Water", "Firewood"]),
            A2: participant(["Water", "Food", "Firewood"]),
        },
    }
    broken = {
        "dialogue_id": 2,
        "participant_info": {
            A1: participant(["Food", "Food", "Firewood"]),
            A2: participant(["Water", "Food", "Firewood"]),
        },
    }
    missing = {"dialogue_id": 3, "participant_info": {A1: participant(["Food", "Water", "Firewood"])}}
    path = tmp_path / "casino_train.json"
    path.write_text(json.dumps([good, broken]))
    with pytest.raises(
        DataFileError, match=r"casino_train.json, record 1, field 'participant_info.mturk_agent_1.value2issue'"
    ):
        CasinoEnv.load_dataset(path)
    path.write_text(json.dumps([good, good, missing]))
    with pytest.raises(DataFileError, match=r"record 2, field 'participant_info.mturk_agent_2': is missing"):
        CasinoEnv.load_dataset(path)
    path.write_text("[{oops")
    with pytest.raises(DataFileError, match="cannot read JSON"):
        CasinoEnv.load_dataset(path)
    assert [s.scenario_id for s in CasinoEnv.load_dataset(_write(tmp_path, [good]))] == ["casino:1"]


def _write(tmp_path: Path, records: list) -> Path:
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(records))
    return path


def _play(first: str, second: str, seed: int, n: int = 6) -> list[tuple]:
    out = []
    for i, scenario in enumerate(sample_scenarios("casino-v0", n, seed)):
        agents = {A1: make_code_agent(first, seed + i), A2: make_code_agent(second, seed + 50 + i)}
        result = asyncio.run(run_episode(make("casino-v0"), agents, scenario, seed + i, episode_id=f"e{i}"))
        o = result.outcome
        out.append(
            (
                o.agreement,
                o.deal,
                o.roles[A1].unclamped_reward,  # the formula's own value: a range check on it can fail
                o.roles[A2].unclamped_reward,
                [t.payload for t in result.transcript],
            )
        )
    return out


def test_boulware_and_conceder_mostly_agree() -> None:
    results = _play("boulware", "conceder", 3, n=20) + _play("conceder", "boulware", 4, n=20)
    assert sum(r[0] for r in results) >= 0.8 * len(results)


def test_the_accommodating_agent_leaks_and_the_boulware_agent_does_not() -> None:
    scenario = sample_scenarios("casino-v0", 1, 9)[0]
    agents = {A1: make_code_agent("accommodating", 1), A2: make_code_agent("boulware", 2)}
    result = asyncio.run(run_episode(make("casino-v0"), agents, scenario, 0, episode_id="leak"))
    high = scenario.agent_1_priorities[0]
    assert f"priority:{high}" in result.outcome.roles[A1].leaked
    assert result.outcome.roles[A2].leaked == ()
