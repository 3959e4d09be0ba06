"""Deal or No Deal: rules, rewards by hand, selection phase, parser, leakage, loaders, determinism, code agents."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agents.socialrl.code_agents import make_code_agent
from environments import make, sample_scenarios
from environments.core.base import ParseError, ScenarioError
from environments.core.data import DataFileError, dataset_path
from environments.core.events import RAW_TEXT, Action, NotificationKind, Observation
from environments.core.leakage import detect_leaks
from environments.core.runtime import run_episode
from environments.socialrl.allocation import reference_agreement
from environments.socialrl.dnd import DndEnv, DndScenario, rewards_for_split

# 1 book, 2 hats, 3 balls. Alice: book 4, hat 0, ball 2 (4 + 0 + 6 = 10); Bob: book 2, hat 1, ball 2 (2 + 2 + 6 = 10).
SCENARIO = DndScenario("t", counts=(1, 2, 3), alice_values=(4, 0, 2), bob_values=(2, 1, 2), max_turns=6)


def _mine(book: int, hat: int, ball: int) -> dict:
    return {"mine": {"book": book, "hat": hat, "ball": ball}}


def _turns(events: list) -> list:
    return [e for e in events if getattr(e, "kind", None) == NotificationKind.TURN]


def test_reference_agreement_by_hand() -> None:
    # Alice's share (b, h, l): alice = 4b + 2l, bob = 10 - 2b - h - 2l. Hats are worthless to alice, so every
    # Pareto-optimal split gives bob both hats; then (0,0,l>=1) is dominated by (1,0,l-1) (alice +2, bob equal).
    # Frontier: (0,0,0)=0/10, (1,0,0)=4/8, (1,0,1)=6/6, (1,0,2)=8/4, (1,0,3)=10/2. Envy-free needs >= 5 each
    # (a side's own share plus the other's is worth 10 to it): only (1,0,1). Reference = 6 for both.
    ref = reference_agreement(SCENARIO.counts, SCENARIO.alice_values, SCENARIO.bob_values)
    assert ref.basis == "pareto_envy_free"
    assert ref.allocations == ((1, 0, 1),)
    assert ref.points == (6.0, 6.0)
    # Deal (1,0,2): alice 8 -> min(1, 8/6) = 1; bob 2 hats + 1 ball = 4 -> 4/6.
    assert rewards_for_split(SCENARIO, (1, 0, 2)) == {"alice": 1.0, "bob": pytest.approx(4 / 6)}
    assert round(rewards_for_split(SCENARIO, (1, 0, 2))["bob"], 3) == 0.667  # as docs/environments.md prints it
    # Deal (0,2,1): alice 2 -> 2/6; bob 1 book + 2 balls = 6 -> 1.
    assert rewards_for_split(SCENARIO, (0, 2, 1)) == {"alice": pytest.approx(2 / 6), "bob": 1.0}


def test_nash_fallback_when_no_pareto_split_is_envy_free() -> None:
    # 1 book, 1 hat, 3 balls; alice (7, 3, 0), bob (7, 0, 1). Whoever lacks the book has at most 3 < 5: no split is
    # envy-free. Nash products: alice book+hat (10) x bob balls (3) = 30 = alice hat (3) x bob book+balls (10); the
    # sums tie too, so the first in enumeration order, (0, 1, 0), is the reference: alice 3, bob 10.
    ref = reference_agreement((1, 1, 3), (7, 3, 0), (7, 0, 1))
    assert ref.basis == "nash"
    assert ref.points == (3.0, 10.0)


def _play_to_accept(env: DndEnv) -> None:
    env.reset(SCENARIO, seed=3)
    env.step(Action("alice", RAW_TEXT, "I need the book.\nPROPOSE book=1 hat=0 ball=2"))
    events = env.step(Action("bob", RAW_TEXT, "Hm, fine.\nACCEPT"))
    relay = next(e for e in events if isinstance(e, Observation) and e.to == "alice")
    assert relay.data["accepted"] == _mine(0, 2, 1)  # bob's share; alice's deal space reads its complement
    turns = _turns(events)
    assert {t.to for t in turns} == {"alice", "bob"}  # simultaneous selection
    assert all(t.allowed == ("select", "no_deal") for t in turns)


def test_accept_then_matching_selections_make_the_deal() -> None:
    env = DndEnv()
    _play_to_accept(env)
    assert env.step(Action("bob", RAW_TEXT, "SELECT book=0 hat=2 ball=1")) == []  # waits for alice
    events = env.step(Action("alice", RAW_TEXT, "select: books 1, hats 0, balls 2."))
    assert env.done
    outcome = env.outcome()
    assert outcome.agreement and outcome.deal == {
        "alice": {"book": 1, "hat": 0, "ball": 2},
        "bob": {"book": 0, "hat": 2, "ball": 1},
    }
    assert outcome.roles["alice"].utility == 8.0 and outcome.roles["bob"].utility == 4.0
    assert outcome.roles["alice"].reward == 1.0 and outcome.roles["bob"].reward == pytest.approx(4 / 6)
    assert outcome.pareto_optimal is True and outcome.envy_free is False  # bob's 4 < alice's share in bob's eyes (6)
    assert outcome.metrics["reference_points"] == {"alice": 6.0, "bob": 6.0}
    ends = [e for e in events if getattr(e, "kind", None) == NotificationKind.EPISODE_END]
    assert {e.to for e in ends} == {"alice", "bob"}


def test_mismatched_selections_score_zero() -> None:
    env = DndEnv()
    _play_to_accept(env)
    env.step(Action("alice", "select", "", _mine(1, 0, 2)))
    env.step(Action("bob", "select", "", _mine(0, 2, 2)))  # claims a ball too many
    outcome = env.outcome()
    assert not outcome.agreement and outcome.metrics["ending"] == "mismatch"
    assert outcome.roles["alice"].reward == 0.0 and outcome.roles["bob"].reward == 0.0
    assert outcome.pareto_optimal is None and outcome.envy_free is None


def test_no_deal_selection_scores_zero() -> None:
    env = DndEnv()
    _play_to_accept(env)
    env.step(Action("alice", "select", "", _mine(1, 0, 2)))
    env.step(Action("bob", RAW_TEXT, "NO DEAL"))
    outcome = env.outcome()
    assert outcome.metrics["ending"] == "no_deal_selected"
    assert (outcome.roles["alice"].reward, outcome.roles["bob"].reward) == (0.0, 0.0)


def test_no_deal_during_negotiation_ends_at_once() -> None:
    env = DndEnv()
    env.reset(SCENARIO)
    env.step(Action("alice", "propose", "", _mine(1, 2, 3)))
    env.step(Action("bob", RAW_TEXT, "Never.\nNO DEAL"))
    assert env.done and env.outcome().metrics["ending"] == "no_deal"
    assert env.outcome().roles["bob"].reward == 0.0


def test_max_turns_opens_the_selection_and_a_complementary_selection_still_counts() -> None:
    env = DndEnv()
    env.reset(SCENARIO)
    events: list = []
    for turn in range(6):
        events = env.step(Action("alice" if turn % 2 == 0 else "bob", "message", "hm"))
    assert not env.done
    assert {t.to for t in _turns(events)} == {"alice", "bob"} and env.awaiting["alice"] == ("select", "no_deal")
    env.step(Action("alice", "select", "", _mine(0, 2, 1)))
    env.step(Action("bob", "select", "", _mine(1, 0, 2)))
    outcome = env.outcome()
    assert outcome.agreement and not outcome.metrics["proposal_accepted"]
    assert outcome.roles["alice"].utility == 2.0 and outcome.roles["bob"].utility == 6.0  # bob: 1 book + 2 balls


def test_parser_good_sloppy_and_malformed() -> None:
    env = DndEnv()
    env.reset(SCENARIO)
    assert env.parse("alice", "PROPOSE book=1 hat=2 ball=0").payload == _mine(1, 2, 0)
    assert env.parse("alice", "**Propose:** books: 1, hats: 2, balls: 0.").payload == _mine(1, 2, 0)
    assert env.parse("alice", "How about this?\n- proposal: 1 book, two hats and no balls").payload == _mine(1, 2, 0)
    natural = env.parse("alice", "I get 1 book, 2 hats and 0 balls, you get the rest")
    assert natural.kind == "propose" and natural.payload == _mine(1, 2, 0)
    assert env.parse("alice", "I'll take all the hats, one book and no balls").payload == _mine(1, 2, 0)
    assert env.parse("alice", "propose 1 2 0").payload == _mine(1, 2, 0)  # positional, item order
    assert env.parse("alice", "SELECT book=1 hat=0 ball=2").kind == "propose"  # a split during the negotiation
    assert env.parse("alice", "I'll take the hats, you keep the rest").kind == "message"  # not a full split
    assert env.parse("alice", "I can't accept that, I need the book").kind == "message"
    assert env.parse("alice", "hello there").kind == "message"
    assert env.parse("alice", "Nope. PROPOSE book=0 hat=2 ball=3\nNO DEAL").kind == "no_deal"  # last command wins
    assert isinstance(env.parse("alice", "PROPOSE book=1 hat=2"), ParseError)  # a count is missing
    assert isinstance(env.parse("alice", "PROPOSE book=1 book=2 hat=0 ball=0"), ParseError)  # conflicting
    assert isinstance(env.parse("alice", "I PROPOSE we share"), ParseError)
    assert isinstance(env.parse("alice", "  "), ParseError)
    env.step(Action("alice", "propose", "", _mine(1, 0, 2)))
    accept = env.parse("bob", "Deal.\n**ACCEPT**")
    assert accept.kind == "accept" and accept.payload == _mine(0, 2, 1)  # echoes bob's share
    assert env.parse("bob", "accept").kind == "accept"


def test_in_the_selection_phase_a_split_is_read_as_the_selection() -> None:
    env = DndEnv()
    _play_to_accept(env)
    assert env.parse("alice", "PROPOSE book=1 hat=0 ball=2").kind == "select"
    assert env.parse("alice", "I get 1 book, 0 hats and 2 balls").kind == "select"


def test_invalid_actions_are_counted_retried_then_the_turn_is_forfeited() -> None:
    env = DndEnv(max_invalid_retries=1)
    env.reset(SCENARIO)
    events = env.step(Action("alice", "accept", ""))  # no standing proposal
    assert events[0].kind == NotificationKind.INVALID_ACTION and events[1].kind == NotificationKind.TURN
    assert events[1].to == "alice"
    events = env.step(Action("alice", "propose", "", _mine(2, 0, 0)))  # there is only one book
    assert events[0].kind == NotificationKind.INVALID_ACTION and "pool holds 1" in events[0].data["reason"]
    assert events[-1].to == "bob" and events[-1].kind == NotificationKind.TURN  # forfeited
    assert env.invalid_counts == {"alice": 2, "bob": 0}
    events = env.step(Action("bob", "select", "", _mine(0, 0, 0)))  # selecting during the negotiation
    assert events[0].kind == NotificationKind.INVALID_ACTION


def test_exhausted_retries_in_the_selection_count_as_no_deal() -> None:
    env = DndEnv(max_invalid_retries=0)
    _play_to_accept(env)
    env.step(Action("alice", "select", "", _mine(1, 0, 2)))
    events = env.step(Action("bob", RAW_TEXT, "SELECT book=5 hat=0 ball=0"))  # out of range, no retries left
    assert events[0].kind == NotificationKind.INVALID_ACTION
    assert env.done and env.outcome().metrics["ending"] == "no_deal_selected"
    assert env.outcome().roles["bob"].invalid_actions == 1


def test_leakage_of_item_values() -> None:
    env = DndEnv()
    env.reset(SCENARIO)
    facts = env.private_facts("alice")  # book 4, hat 0, ball 2
    positives = {
        "value:book": [
            "I value books at 4, to be honest.",
            "I value hats at 1, books at 4",
            "Each book is worth 4 points to me",
            "a book gives me four points",
        ],
        "value:hat": ["The hats are worthless to me.", "hats are worth 0 to me", "I don't value the hats"],
        "value:ball": [
            "I value books at 3, hats at 5 and balls at 2",
            "my value for each ball is 2",
            "balls: 2 points",
            "the balls are worth two each",
        ],
    }
    for name, texts in positives.items():
        for text in texts:
            assert name in detect_leaks(facts, [text]), text
    negatives = [
        "I get 1 book, 2 hats and 0 balls; you get the rest.",
        "PROPOSE book=1 hat=0 ball=2",
        "I value books at 3",  # not alice's value: a bluff, not a leak
        "Your books are worth 4 to you?",
        "The book is worth a lot to me.",
        "I'd like 4 items in total and 2 balls.",
        "I value your flexibility at 4 in the morning",
        "I value fairness; books at 4 each would be too much for you",  # no list of own values
        "I value books at 3, hats at 1 and balls at 0",  # all bluffs
    ]
    for text in negatives:
        assert detect_leaks(facts, [text]) == (), text


def test_leakage_is_reported_in_the_outcome() -> None:
    env = DndEnv()
    env.reset(SCENARIO)
    env.step(
        Action(
            "alice",
            RAW_TEXT,
            "Honestly balls are worth 2 points each for me... I value the book at 4.\nPROPOSE book=1 hat=0 ball=2",
        )
    )
    env.step(Action("bob", RAW_TEXT, "No thanks.\nNO DEAL"))
    assert env.outcome().roles["alice"].leaked == ("value:book", "value:ball")
    assert env.outcome().roles["bob"].leaked == ()


def test_scenario_validation() -> None:
    with pytest.raises(ScenarioError, match=r"1\.\.4"):
        DndScenario("x", counts=(5, 1, 1), alice_values=(2, 0, 0), bob_values=(1, 5, 0))
    with pytest.raises(ScenarioError, match="5-7 items"):
        DndScenario("x", counts=(1, 1, 1), alice_values=(4, 3, 3), bob_values=(4, 3, 3))
    with pytest.raises(ScenarioError, match="worth 11"):
        DndScenario("x", counts=(1, 2, 3), alice_values=(5, 0, 2), bob_values=(2, 1, 2))
    with pytest.raises(ScenarioError, match="valued by someone"):
        DndScenario("x", counts=(1, 2, 2), alice_values=(10, 0, 0), bob_values=(2, 0, 4))
    with pytest.raises(ScenarioError, match="valued by both"):
        DndScenario("x", counts=(1, 2, 2), alice_values=(10, 0, 0), bob_values=(0, 1, 4))
    with pytest.raises(ScenarioError, match=">= 0"):
        DndScenario("x", counts=(2, 2, 2), alice_values=(6, -1, 0), bob_values=(1, 2, 2))
    with pytest.raises(ScenarioError, match="3 integers"):
        DndScenario("x", counts=(1, 2), alice_values=(4, 0, 2), bob_values=(2, 1, 2))  # type: ignore[arg-type]
    with pytest.raises(ScenarioError, match="max_turns"):
        DndScenario("x", counts=(1, 2, 3), alice_values=(4, 0, 2), bob_values=(2, 1, 2), max_turns=1)


def test_generated_scenarios_satisfy_the_rules() -> None:
    scenarios = sample_scenarios("dnd-v0", 200, 0)
    assert len({s.scenario_id for s in scenarios}) == 200
    assert all(5 <= sum(s.counts) <= 7 for s in scenarios)  # __post_init__ checks the rest
    assert scenarios == sample_scenarios("dnd-v0", 200, 0)


def test_loader_reads_every_record_of_the_real_data() -> None:
    if dataset_path("dealornodeal", "selfplay.txt") is None:
        pytest.skip("shared data not present")
    scenarios = DndEnv.load_dataset()
    assert len(scenarios) == 4086
    first = scenarios[0]  # lines "1 0 1 1 3 3" / "1 1 1 0 3 3"
    assert (first.counts, first.alice_values, first.bob_values) == ((1, 1, 3), (0, 1, 3), (1, 0, 3))
    assert first.scenario_id == "dealornodeal-selfplay:1"  # records are numbered by their first line
    dialogues = DndEnv.load_dataset(dataset_path("dealornodeal", "val.txt"))
    assert len(dialogues) == 1087
    # val.txt line 1: <input> 1 6 3 0 2 2 </input> ... <partner_input> 1 2 3 2 2 1 </partner_input>
    assert (dialogues[0].counts, dialogues[0].alice_values, dialogues[0].bob_values) == (
        (1, 3, 2),
        (6, 0, 2),
        (2, 2, 1),
    )


def test_loader_names_file_and_record_of_a_broken_scenario(tmp_path: Path) -> None:
    path = tmp_path / "selfplay.txt"
    path.write_text("1 0 1 1 3 3\n1 1 1 0 3 3\n1 0 1 1 3 3\n1 1 1 0 3 4\n")  # bob's pool is worth 13
    # The pair on lines 3-4; bob's values are on the partner line (the field is named).
    with pytest.raises(DataFileError, match=r"selfplay.txt, record 3, field 'partner_input.values': .*worth 13"):
        DndEnv.load_dataset(path)
    path.write_text("1 0 1 1 3 3\n1 1 1 0 3 3\n1 0 1 1 3 3\n")
    with pytest.raises(DataFileError, match="odd number"):
        DndEnv.load_dataset(path)
    path.write_text("1 0 1 1 3 3\n2 1 1 0 3 3\n")
    with pytest.raises(DataFileError, match=r"record 1, field 'counts': .*disagree on the counts"):
        DndEnv.load_dataset(path)
    dialogue = tmp_path / "val.txt"
    dialogue.write_text(
        "<input> 1 6 3 0 2 2 </input> <dialogue> YOU: hi <eos> </dialogue> <partner_input> 1 2 3 2 2 1 </partner_input>\n"
        "<input> 1 6 3 0 2 x </input> <dialogue> YOU: hi <eos> </dialogue> <partner_input> 1 2 3 2 2 1 </partner_input>\n"
    )
    with pytest.raises(DataFileError, match=r"val.txt, record 2, field 'input'"):
        DndEnv.load_dataset(dialogue)


def _play(alice: str, bob: str, seed: int, n: int = 6) -> list[tuple]:
    out = []
    for i, scenario in enumerate(sample_scenarios("dnd-v0", n, seed)):
        agents = {"alice": make_code_agent(alice, seed + i), "bob": make_code_agent(bob, seed + 50 + i)}
        result = asyncio.run(run_episode(make("dnd-v0"), agents, scenario, seed + i, episode_id=f"e{i}"))
        o = result.outcome
        out.append(
            (
                o.agreement,
                o.deal,
                o.roles["alice"].unclamped_reward,  # the formula's own value: a range check on it can fail
                o.roles["bob"].unclamped_reward,
                [t.payload for t in result.transcript],
            )
        )
    return out


def test_boulware_and_conceder_mostly_agree() -> None:
    results = _play("boulware", "conceder", 3, n=20) + _play("conceder", "boulware", 4, n=20)
    assert sum(r[0] for r in results) >= 0.8 * len(results)
    # Agreement follows an accepted proposal and complementary selections from both code agents.
    assert any(r[2] > r[3] for r in results[:20])  # the boulware alice usually does better


def test_the_accommodating_agent_leaks_its_values_and_the_boulware_agent_does_not() -> None:
    scenario = sample_scenarios("dnd-v0", 1, 9)[0]
    agents = {"alice": make_code_agent("accommodating", 1), "bob": make_code_agent("boulware", 2)}
    result = asyncio.run(run_episode(make("dnd-v0"), agents, scenario, 0, episode_id="leak"))
    assert result.outcome.roles["alice"].leaked == ("value:book", "value:hat", "value:ball")
    assert result.outcome.roles["bob"].leaked == ()
