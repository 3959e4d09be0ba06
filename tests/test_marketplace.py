"""Marketplace (marketplace-v0): rules, rewards, grammar, leakage, the SRBench loader, code agents."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agents.socialrl.code_agents import make_code_agent
from environments import make, sample_scenarios
from environments.core.base import ParseError, ScenarioError
from environments.core.data import DataFileError, dataset_path
from environments.core.events import RAW_TEXT, Action, Notification, NotificationKind, Observation
from environments.core.runtime import run_episode
from environments.socialrl.marketplace import (
    BUYER,
    DATA_DIR,
    DATASET_FILES,
    SELLER,
    MarketplaceEnv,
    MarketplaceScenario,
    rewards_for_price,
)

CODE_AGENTS = ("boulware", "conceder", "reciprocal", "accommodating", "random")


def scenario(**overrides) -> MarketplaceScenario:
    fields = {
        "scenario_id": "test:0",
        "product": "Desk lamp",
        "listed_price": 100.0,
        "buyer_reservation": 80.0,
        "seller_reservation": 60.0,
    }
    return MarketplaceScenario(**{**fields, **overrides})


def turns(events) -> list[Notification]:
    return [e for e in events if isinstance(e, Notification) and e.kind == NotificationKind.TURN]


def kinds(events) -> list[str]:
    return [e.kind for e in events if isinstance(e, Notification)]


def play(env, *actions):
    events = []
    for action in actions:
        events = env.step(action)
    return events


# ---------------------------------------------------------------------------------------- rewards
@pytest.mark.parametrize(
    ("price", "buyer", "seller"),
    [(70.0, 0.5, 0.5), (65.0, 0.75, 0.25), (75.0, 0.25, 0.75), (85.0, 0.0, 1.0), (55.0, 1.0, 0.0), (60.0, 1.0, 0.0)],
)
def test_rewards_at_given_prices(price, buyer, seller):
    rewards = rewards_for_price(scenario(), price)
    assert rewards[BUYER] == pytest.approx(buyer)
    assert rewards[SELLER] == pytest.approx(seller)


def test_deal_by_accepting_an_offer():
    env = MarketplaceEnv()
    events = env.reset(scenario())
    assert env.awaiting == {BUYER: ("send_message", "make_offer", "end")}
    first_turn = turns(events)[0]
    assert first_turn.data == {"turn": 0, "max_turns": 20, "pending_offer": None}
    events = env.step(Action(BUYER, "make_offer", "How about this?", {"price": 65.0}))
    relay = next(e for e in events if isinstance(e, Observation))
    assert (
        relay.to == SELLER
        and relay.sender == BUYER
        and relay.data == {"offer": {"price": 65.0}, "said": "How about this?", "move": "make_offer"}
    )
    turn = turns(events)[0]
    assert turn.to == SELLER and turn.data["pending_offer"] == {"price": 65.0} and "accept_offer" in turn.allowed
    events = env.step(Action(SELLER, "accept_offer", "Deal."))
    accepted = next(e for e in events if isinstance(e, Observation))
    assert accepted.to == BUYER and accepted.data == {
        "accepted": {"price": 65.0},
        "said": "Deal.",
        "move": "accept_offer",
    }
    assert env.done and kinds(events).count(NotificationKind.EPISODE_END) == 2
    outcome = env.outcome()
    assert outcome.agreement and outcome.deal == {"price": 65.0}
    assert outcome.roles[BUYER].reward == pytest.approx(0.75) and outcome.roles[SELLER].reward == pytest.approx(0.25)
    assert outcome.roles[BUYER].utility == pytest.approx(15.0) and outcome.roles[SELLER].utility == pytest.approx(5.0)
    assert outcome.pareto_optimal is True and outcome.metrics["ending"] == "deal" and outcome.metrics["in_zone"]


def test_deal_above_buyer_reservation_gives_the_buyer_zero_and_negative_utility():
    env = MarketplaceEnv()
    env.reset(scenario())
    play(env, Action(BUYER, "send_message", "Hi"), Action(SELLER, "make_offer", "", {"price": 90.0}))
    env.step(Action(BUYER, "accept_offer", ""))
    outcome = env.outcome()
    assert outcome.roles[BUYER].reward == 0.0 and outcome.roles[BUYER].utility == pytest.approx(-10.0)
    assert outcome.roles[SELLER].reward == 1.0 and not outcome.metrics["in_zone"]


def test_end_and_max_turns_give_no_deal():
    env = MarketplaceEnv()
    env.reset(scenario())
    env.step(Action(BUYER, "end", "Too expensive."))
    outcome = env.outcome()
    assert not outcome.agreement and outcome.deal is None and outcome.metrics["ending"] == "ended"
    assert {r.reward for r in outcome.roles.values()} == {0.0}

    env = MarketplaceEnv()
    env.reset(scenario(max_turns=4))
    for turn in range(4):
        env.step(Action(BUYER if turn % 2 == 0 else SELLER, "make_offer", "", {"price": 70.0 + turn}))
    assert env.done
    outcome = env.outcome()
    assert not outcome.agreement and outcome.metrics["ending"] == "max_turns" and outcome.rounds == 4
    assert outcome.roles[BUYER].reward == 0.0 and outcome.roles[SELLER].reward == 0.0


def test_reject_clears_the_standing_offer():
    env = MarketplaceEnv()
    env.reset(scenario())
    events = play(env, Action(BUYER, "make_offer", "", {"price": 50.0}), Action(SELLER, "reject", "No."))
    assert turns(events)[0].data["pending_offer"] is None
    assert env.awaiting[BUYER] == ("send_message", "make_offer", "end")
    assert next(e for e in events if isinstance(e, Observation)).data == {
        "rejected": True,
        "said": "No.",
        "move": "reject",
    }


# ----------------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"seller_reservation": 80.0}, "zone of agreement"),
        ({"seller_reservation": 90.0}, "zone of agreement"),
        ({"listed_price": 0.0}, "listed_price"),
        ({"listed_price": 50.0}, "below listed_price"),
        ({"seller_reservation": -5.0}, "seller_reservation must be more than 0"),
        ({"max_turns": 1}, "max_turns"),
        ({"product": "  "}, "product"),
        ({"adversary": "auditor", "adversary_instructions": "x"}, "adversary"),
        ({"adversary": SELLER}, "adversary_instructions"),
    ],
)
def test_out_of_range_scenarios_are_rejected(overrides, message):
    with pytest.raises(ScenarioError, match=message):
        scenario(**overrides)


def test_generated_scenarios_have_a_zone_of_agreement():
    for s in sample_scenarios("marketplace-v0", 200, seed=3):
        assert 0 < s.seller_reservation < s.buyer_reservation <= s.listed_price
        assert s.scenario_id.startswith("gen:") and len(s.scenario_id) == 12


# --------------------------------------------------------------------------------------- grammar
@pytest.fixture
def env_with_offer() -> MarketplaceEnv:
    env = MarketplaceEnv()
    env.reset(scenario())
    env.step(Action(BUYER, "make_offer", "", {"price": 62.0}))
    return env


@pytest.mark.parametrize(
    ("text", "kind", "payload", "message"),
    [
        ("I can do a bit more.\nOFFER $75", "make_offer", {"price": 75.0}, "I can do a bit more."),
        ("**OFFER:** $1,200.50", "make_offer", {"price": 1200.5}, ""),
        ("Let me propose\nmake_offer(price=70)", "make_offer", {"price": 70.0}, "Let me propose"),
        ("offer: 68", "make_offer", {"price": 68.0}, ""),
        ("MAKE_OFFER 66", "make_offer", {"price": 66.0}, ""),
        ("OFFER $90\nsorry, actually OFFER $85", "make_offer", {"price": 85.0}, "OFFER $90\nsorry, actually"),
        ("Fine by me.\nACCEPT", "accept_offer", {"price": 62.0}, "Fine by me."),
        ("I accept.", "accept_offer", {"price": 62.0}, ""),
        ("accept_offer", "accept_offer", {"price": 62.0}, ""),
        ("Too low.\nREJECT", "reject", {}, "Too low."),
        ("I'm out.\nEND", "end", {}, "I'm out."),
        ("QUIT", "end", {}, ""),
        ("I cannot accept that, it is too low.", "send_message", {}, "I cannot accept that, it is too low."),
        ("In the end, quality matters.", "send_message", {}, "In the end, quality matters."),
    ],
)
def test_parser_reads_good_and_sloppy_text(env_with_offer, text, kind, payload, message):
    action = env_with_offer.parse(SELLER, text)
    assert isinstance(action, Action), action
    assert (action.kind, action.payload, action.text) == (kind, payload, message)


@pytest.mark.parametrize("text", ["", "   \n", "OFFER", "Here is my OFFER: a fair one"])
def test_parser_reports_malformed_text(env_with_offer, text):
    assert isinstance(env_with_offer.parse(SELLER, text), ParseError)


def test_invalid_actions_are_counted_retried_then_the_turn_is_forfeited():
    env = MarketplaceEnv(max_invalid_retries=2)
    env.reset(scenario())
    for retries_left in (2, 1):
        events = env.step(Action(BUYER, RAW_TEXT, "OFFER"))
        note = events[0]
        assert note.kind == NotificationKind.INVALID_ACTION and note.data["retries_left"] == retries_left
        assert turns(events)[0].to == BUYER  # the same turn again
    events = env.step(Action(BUYER, RAW_TEXT, "OFFER"))
    assert events[0].kind == NotificationKind.INVALID_ACTION and events[0].data["retries_left"] == 0
    assert [t.to for t in turns(events)] == [SELLER]  # forfeited: the seller moves
    assert turns(events)[0].data["turn"] == 1  # and the forfeited turn counts
    assert env.invalid_counts == {BUYER: 3, SELLER: 0}
    # Wrong kind (nothing to accept), bad payload and a mismatched accepted price are invalid too.
    assert env.step(Action(SELLER, "accept_offer", ""))[0].kind == NotificationKind.INVALID_ACTION
    assert env.step(Action(SELLER, "make_offer", "", {"price": -3}))[0].kind == NotificationKind.INVALID_ACTION
    env.step(Action(SELLER, "make_offer", "", {"price": 95.0}))
    events = env.step(Action(BUYER, "accept_offer", "", {"price": 70.0}))
    assert events[0].kind == NotificationKind.INVALID_ACTION and "standing offer is $95" in events[0].text
    env.step(Action(BUYER, "end", ""))
    outcome = env.outcome()
    assert outcome.roles[BUYER].invalid_actions == 4 and outcome.roles[SELLER].invalid_actions == 2


def test_forfeits_can_run_out_the_clock():
    env = MarketplaceEnv(max_invalid_retries=0)
    env.reset(scenario(max_turns=2))
    env.step(Action(BUYER, RAW_TEXT, ""))
    env.step(Action(SELLER, RAW_TEXT, ""))
    assert env.done and env.outcome().metrics["ending"] == "max_turns"


# --------------------------------------------------------------------------------------- leakage
def leaks_after(*steps: tuple[str, str]) -> dict[str, tuple[str, ...]]:
    env = MarketplaceEnv()
    env.reset(scenario())
    for agent, text in steps:
        if not env.done:
            action = env.parse(agent, text)
            assert isinstance(action, Action), action
            env.step(action)
    if not env.done:
        env.step(Action(next(iter(env.awaiting)), "end", ""))
    return {role: outcome.leaked for role, outcome in env.outcome().roles.items()}


@pytest.mark.parametrize(
    "text",
    ["I can't go above $80, sorry.", "That's more than my budget.", "My maximum is firm.", "80 is my limit"],
)
def test_buyer_leaks_are_detected(text):
    assert leaks_after((BUYER, text)) == {BUYER: ("reservation_price",), SELLER: ()}


def test_seller_leaks_are_detected():
    assert leaks_after((BUYER, "Hi"), (SELLER, "I really can't go below 60."))[SELLER] == ("reservation_price",)
    assert leaks_after((BUYER, "Hi"), (SELLER, "My bottom line is fixed."))[SELLER] == ("reservation_price",)


@pytest.mark.parametrize(
    "steps",
    [
        [(BUYER, "Would you take $70? It's a fair price.\nOFFER $70")],  # the offered price is a move
        [(BUYER, "Hello! Is it still available?"), (SELLER, "Yes, it is. Listed at $100.")],
        [(BUYER, "Hi"), (SELLER, "OFFER $80"), (BUYER, "OK, $80 it is.\nACCEPT")],  # restating accepted terms
        [(BUYER, "My offer stands.\nOFFER $70")],
    ],
)
def test_non_leaks_are_not_flagged(steps):
    assert leaks_after(*steps) == {BUYER: (), SELLER: ()}


# ---------------------------------------------------------------------------------------- loader
requires_data = pytest.mark.skipif(dataset_path(DATA_DIR) is None, reason="shared SRBench data is absent")


@requires_data
@pytest.mark.parametrize(
    ("name", "count"), [("small.yaml", 25), ("medium.yaml", 75), ("small-whimsical-privacy.yaml", 25)]
)
def test_loader_loads_every_record(name, count):
    import yaml

    path = dataset_path(DATA_DIR, name)
    tasks = yaml.safe_load(Path(path).read_text())["tasks"]
    scenarios = MarketplaceEnv.load_dataset(path)
    assert len(scenarios) == len(tasks) == count
    assert len({s.scenario_id for s in scenarios}) == count
    for task, s in zip(tasks, scenarios, strict=True):
        assert s.scenario_id == f"srbench-marketplace-{Path(name).stem}:{task['id']}"
        assert s.listed_price == task["product"]["listed_price"] and s.product == task["product"]["name"]
        assert s.buyer_reservation == task["buyer"]["reservation_price"]
        assert s.seller_reservation == task["seller"]["reservation_price"]
        assert s.description and s.buyer_brief and s.seller_brief
        if "whimsical-privacy" in name:
            assert s.adversary == SELLER and s.principal == BUYER
            assert s.adversary_goal == "privacy" and s.adversary_strategy == "whimsical"
            assert s.adversary_instructions == task["seller"]["malicious_prompt"]
        else:
            assert s.adversary is None and s.principal is None


@requires_data
def test_default_loader_path_is_small_yaml():
    assert [s.scenario_id for s in MarketplaceEnv.load_dataset()] == [
        f"srbench-marketplace-small:{i}" for i in range(25)
    ]
    assert set(DATASET_FILES) <= {p.name for p in dataset_path(DATA_DIR).iterdir()}


@requires_data
def test_adversary_gets_its_instructions_and_the_principal_does_not():
    s = MarketplaceEnv.load_dataset(dataset_path(DATA_DIR, "small-whimsical-privacy.yaml"))[0]
    env = MarketplaceEnv()
    private = {e.to: e for e in env.reset(s) if isinstance(e, Observation)}
    assert "adversarial_instructions" in private[SELLER].data["private"]
    assert s.adversary_instructions.strip() in private[SELLER].text
    assert "adversarial_instructions" not in private[BUYER].data["private"]
    assert "security researcher" not in private[BUYER].text
    assert private[BUYER].data["private"] == {"reservation_price": s.buyer_reservation}
    env.step(Action(BUYER, "end", ""))
    assert env.outcome().metrics["adversary"] == SELLER and env.outcome().metrics["principal"] == BUYER


GOOD_TASK = """
- id: 0
  product: {name: Pens, listed_price: 14.0}
  seller: {reservation_price: 11.0, instruction_message: "Sell.", is_malicious: false}
  buyer: {reservation_price: 13.0, instruction_message: "Buy.", is_malicious: false}
"""


@pytest.mark.parametrize(
    ("content", "record", "reason"),
    [
        ("tasks:" + GOOD_TASK + "- id: 1\n  product: {name: Pens, listed_price: 14.0}\n", 1, "buyer"),
        (
            "tasks:"
            + GOOD_TASK
            + GOOD_TASK.replace("id: 0", "id: 1")
            + GOOD_TASK.replace("id: 0", "id: 2").replace("13.0", "9.0"),
            2,
            "zone of agreement",
        ),
        ("tasks:" + GOOD_TASK.replace("14.0", "cheap"), 0, "listed_price"),
        ("tasks:\n- just a string\n", 0, "mapping"),
        ("tasks: [\n", None, "cannot read YAML"),
        ("items: []\n", None, "tasks"),
    ],
)
def test_broken_yaml_raises_data_file_error_naming_file_and_record(tmp_path, content, record, reason):
    path = tmp_path / "broken.yaml"
    path.write_text(content)
    with pytest.raises(DataFileError) as info:
        MarketplaceEnv.load_dataset(path)
    assert info.value.path == path and info.value.record == record
    assert str(path) in str(info.value) and reason in str(info.value)
    if record is not None:
        assert f"record {record}" in str(info.value)


def test_missing_file_raises_data_file_error(tmp_path):
    with pytest.raises(DataFileError, match=r"nope\.yaml"):
        MarketplaceEnv.load_dataset(tmp_path / "nope.yaml")


def test_good_tmp_yaml_loads(tmp_path):
    path = tmp_path / "mini.yaml"
    path.write_text("tasks:" + GOOD_TASK)
    [s] = MarketplaceEnv.load_dataset(path, max_turns=8)
    assert (s.scenario_id, s.listed_price, s.buyer_reservation, s.seller_reservation, s.max_turns) == (
        "srbench-marketplace-mini:0",
        14.0,
        13.0,
        11.0,
        8,
    )


# ----------------------------------------------------------------------------------- code agents
def run(env_id: str, names: tuple[str, str], s, seed: int, episode_id: str = "ep"):
    agents = {BUYER: make_code_agent(names[0], seed=seed), SELLER: make_code_agent(names[1], seed=seed + 1)}
    return asyncio.run(run_episode(make(env_id), agents, s, seed=seed, episode_id=episode_id))


def test_deal_space_of_each_side():
    env = MarketplaceEnv()
    private = {e.to: e.data for e in env.reset(scenario()) if isinstance(e, Observation)}
    buyer = MarketplaceEnv.deal_space(BUYER, private[BUYER])
    seller = MarketplaceEnv.deal_space(SELLER, private[SELLER])
    assert buyer.utility(80.0) == pytest.approx(0.0) and buyer.utility(buyer.deals()[0]) == pytest.approx(1.0)
    assert max(buyer.deals()) == 80.0 and min(buyer.deals()) == 48.0  # min(100 * 0.5, 80 * 0.6)
    assert seller.utility(100.0) == pytest.approx(1.0) and seller.utility(60.0) == pytest.approx(0.0)
    assert buyer.offer(BUYER, 70.0, "x") == Action(BUYER, "make_offer", "x", {"price": 70.0})
    assert seller.accept(SELLER, 70.0, "ok") == Action(SELLER, "accept_offer", "ok", {"price": 70.0})
    assert seller.walk_away(SELLER, "bye").kind == "end"
    assert "$60" in seller.reveal_private()


def test_boulware_vs_conceder_mostly_agrees():
    scenarios = sample_scenarios("marketplace-v0", 20, seed=7)
    results = [run("marketplace-v0", ("boulware", "conceder"), s, seed=i).outcome for i, s in enumerate(scenarios)]
    # Most end in a deal: each side commits to its last answerable offer, which the other takes when it lies
    # inside its reservation (agents/socialrl/price_counterpart.py); the rest run out of turns.
    assert sum(o.agreement for o in results) > len(results) / 2
    # The tough side gets the better end of the bargain.
    assert sum(o.roles[BUYER].reward for o in results) > sum(o.roles[SELLER].reward for o in results)


def test_accommodating_agent_leaks_its_reservation_price():
    s = sample_scenarios("marketplace-v0", 1, seed=2)[0]
    outcome = run("marketplace-v0", ("accommodating", "boulware"), s, seed=0).outcome
    assert outcome.roles[BUYER].leaked == ("reservation_price",)
    assert outcome.roles[SELLER].leaked == ()


@requires_data
def test_code_agents_play_loaded_scenarios():
    scenarios = MarketplaceEnv.load_dataset(dataset_path(DATA_DIR, "small-whimsical-privacy.yaml"))[:5]
    outcomes = [run("marketplace-v0", ("conceder", "boulware"), s, seed=i).outcome for i, s in enumerate(scenarios)]
    # The adversarial tasks leave narrow zones (e.g. 11 to 13): most still end in a deal inside them.
    assert sum(o.agreement for o in outcomes) > len(outcomes) / 2
    for o in outcomes:
        assert not o.agreement or 0.0 <= o.roles[SELLER].unclamped_reward <= 1.0
