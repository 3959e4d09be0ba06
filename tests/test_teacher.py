"""The strategic code teacher (agents/teacher): beliefs, valid act texts, no leakage, strength, determinism."""

from __future__ import annotations

import asyncio
import random
import statistics
from functools import cache

import numpy as np
import pytest

from agents.socialrl.code_agents import make_code_agent
from agents.socialrl.teacher import SUPPORTED_ENV_IDS, TEACHER_NAME, StrategicTeacher, make_teacher
from agents.socialrl.teacher.beliefs import allocation_reference_points
from agents.socialrl.teacher.evaluation import run_paired, summarise
from environments import SOCIALRL_ENV_IDS, make, sample_scenarios
from environments.core.base import ParseError
from environments.core.events import RAW_TEXT, Notification, NotificationKind, Observation
from environments.core.registry import env_class
from environments.socialrl.allocation import reference_agreement, to_payload


# ------------------------------------------------------------------------------------------ helpers
def private_view(env_id: str, seat: str, index: int = 0, seed: int = 0) -> dict:
    env = make(env_id)
    scenario = sample_scenarios(env_id, index + 1, seed)[index]
    events = env.reset(scenario, 0)
    return next(e.data for e in events if isinstance(e, Observation) and e.private and e.to == seat)


def domain_for(env_id: str, seat: str, view: dict):
    from agents.socialrl.teacher.agent import _domain_factory

    space = env_class(env_id).deal_space(seat, view)
    return _domain_factory(env_id)(seat, view, space, random.Random(0))


async def drive(env_id: str, scenario, seed: int, teacher_seat: str, counterpart: str, teacher_seed: int = 3):
    """Play one episode by hand, checking before every teacher action that the environment's parser turns
    the act text into exactly the action recorded in the trace. Returns (outcome, teacher, checked)."""
    env = make(env_id)
    queue = list(env.reset(scenario, seed))
    other = next(a for a in env.agent_ids if a != teacher_seat)
    teacher = make_teacher(teacher_seed)
    agents = {teacher_seat: teacher, other: make_code_agent(counterpart, seed=seed + 11)}
    for seat in env.agent_ids:
        await agents[seat].reset(seat, env_id, env.action_spec(seat), "test")
    checked = 0
    for _ in range(500):
        requests = []
        for event in queue:
            await agents[event.to].observe(event)
            if isinstance(event, Notification) and event.kind == NotificationKind.TURN:
                requests.append(event)
        queue = []
        if env.done:
            break
        for request in requests:
            if env.done or request.to not in env.awaiting:
                continue
            action = await agents[request.to].act(request)
            if request.to == teacher_seat:
                assert action.kind == RAW_TEXT
                entry = teacher.trace[-1]
                assert entry["act"] == action.text
                parsed = env.parse(teacher_seat, action.text)
                assert not isinstance(parsed, ParseError), f"{env_id}: {action.text!r} -> {parsed}"
                assert parsed.kind == entry["kind"], f"{env_id}: {action.text!r} parsed as {parsed.kind}"
                assert parsed.payload == entry["payload"], f"{env_id}: {action.text!r} -> {parsed.payload}"
                checked += 1
            queue += env.step(action)
    assert env.done
    return env.outcome(), teacher, checked


@cache
def small_tournament():
    """The fixed seeded paired tournament the strength and leakage tests read (run once)."""
    per_env = {env_id: 3 for env_id in SOCIALRL_ENV_IDS}
    # Cheap episodes in the noisier domains: more scenarios there.
    per_env.update({"craigslist-v0": 6, "marketplace-v0": 6, "calendar-v0": 12})
    episodes = []
    for env_id, n in per_env.items():
        episodes += run_paired(env_ids=(env_id,), n_scenarios=n, seed=11)
    return episodes


# --------------------------------------------------------------------------------------- interface
def test_name_and_factory() -> None:
    agent = make_teacher(5)
    assert isinstance(agent, StrategicTeacher) and agent.seed == 5
    assert set(SUPPORTED_ENV_IDS) == set(SOCIALRL_ENV_IDS)
    with pytest.raises(KeyError):
        asyncio.run(agent.reset("a", "red-black-v0", None, "x"))  # type: ignore[arg-type]


def test_reference_points_match_the_environment() -> None:
    rng = random.Random(0)
    for _ in range(40):
        counts = tuple(rng.randint(1, 4) for _ in range(3))
        va = tuple(rng.randint(0, 5) for _ in range(3))
        vb = tuple(rng.randint(0, 5) for _ in range(3))
        if sum(va) == 0 or sum(vb) == 0:
            continue
        for d in ((0.0, 0.0), (5.0, 5.0)):
            try:
                want = reference_agreement(counts, va, vb, d).points
            except ValueError:
                continue
            assert allocation_reference_points(counts, va, vb, d) == pytest.approx(want)


# ------------------------------------------------------------------------------------------ beliefs
def test_casino_posterior_finds_a_water_lover() -> None:
    seat = "mturk_agent_1"
    domain = domain_for("casino-v0", seat, private_view("casino-v0", seat))
    assert domain.belief_summary()["p_top"] < 0.2  # uniform over the 6 orders at first
    # The counterpart keeps asking for all the water and leaves the firewood (offers state its own share).
    theirs = [(2, 3, 0), (2, 3, 0), (2, 3, 0), (1, 3, 0), (1, 3, 0)]
    for turn, share in enumerate(theirs):
        deal = domain.space.deal_from_payload(to_payload(("food", "water", "firewood"), share))
        domain.on_offer(deal, 2 * turn + 1, 20)
    summary = domain.belief_summary()
    assert summary["top_order"][0] == "water"
    assert summary["top_order"][2] == "firewood"
    assert summary["p_high"]["water"] > 0.7
    assert "water most" in domain.infer_text()


def test_casino_keyword_cue_moves_the_posterior() -> None:
    seat = "mturk_agent_2"
    domain = domain_for("casino-v0", seat, private_view("casino-v0", seat))
    before = domain.belief_summary()["p_high"]["firewood"]
    domain.on_message("It gets very cold at night and we really need firewood.")
    assert domain.belief_summary()["p_high"]["firewood"] > before + 0.2
    domain.on_message("My top priority is food, my second priority is water and my lowest priority is firewood.")
    assert domain.belief_summary()["top_order"] == ("food", "water", "firewood")


def test_dnd_posterior_concentrates_on_the_values_behind_the_offers() -> None:
    seat = "alice"
    view = private_view("dnd-v0", seat, index=2)
    domain = domain_for("dnd-v0", seat, view)
    counts = tuple(view["public"]["counts"][i] for i in ("book", "hat", "ball"))
    true_values = max(
        (v for v in domain.types.astype(int).tolist() if v[2] == max(v)), key=lambda v: v[2]
    )  # a counterpart that cares most for balls
    # Scripted offers from that counterpart: all the balls, conceding books and hats one by one.
    shares = [(counts[0], counts[1], counts[2]), (counts[0], max(counts[1] - 1, 0), counts[2])]
    shares += [(max(counts[0] - 1, 0), max(counts[1] - 1, 0), counts[2]), (0, 0, counts[2])]
    for turn, share in enumerate(shares):
        domain.on_offer(domain.space.deal_from_payload(to_payload(("book", "hat", "ball"), share)), 2 * turn + 1, 10)
    expected = domain.expected_their_values() * np.array(counts)
    assert int(np.argmax(expected)) == 2, (true_values, expected)
    assert domain.their_favourites()[0] == "ball"


def test_price_posterior_recovers_the_sellers_floor() -> None:
    seat = "buyer"
    view = private_view("craigslist-v0", seat, index=1)
    domain = domain_for("craigslist-v0", seat, view)
    listing = domain.listing
    floor = 0.62 * listing
    for k in range(1, 10):  # a Boulware-ish seller: q(t) = L - (L - floor) t^2 at its odd turns
        turn = 2 * k - 1
        price = listing - (listing - floor) * (turn / 20) ** 2
        domain.on_offer(round(price, 2), turn, 20)
    assert abs(domain.belief_summary()["final_price_mean"] - floor) < 0.06 * listing


def test_contract_posterior_learns_the_counterparts_favourite_workplace() -> None:
    seat = "candidate"
    view = private_view("job-interview-v0", seat)
    domain = domain_for("job-interview-v0", seat, view)
    options = view["public"]["options"]
    liked = options["workplace"][2]
    rng = random.Random(1)
    for turn in range(6):
        offer = {
            "salary": min(options["salary"]),
            "holidays": min(options["holidays"]),
            "position": rng.choice(options["position"]),
            "workplace": liked,
            "company": rng.choice(options["company"]),
        }
        domain.on_offer(domain.space.deal_from_payload(offer), 2 * turn, 20)
    assert domain.favourite_option("workplace")[0] == liked


def test_calendar_beliefs_follow_proposals_and_availability_statements() -> None:
    seat = "requestor"
    view = private_view("calendar-v0", seat)
    domain = domain_for("calendar-v0", seat, view)
    slots = view["public"]["slots"]
    proposed, refused = slots[3], slots[1]
    domain.on_offer(proposed, 1, 20)
    domain.on_message(f"Unfortunately {refused} doesn't work on our side.")
    free = domain.belief_summary()["p_free"]
    assert free[proposed] > 0.9
    assert free[refused] < 0.2


# ------------------------------------------------------------------------------------- act texts
@pytest.mark.parametrize("env_id", SOCIALRL_ENV_IDS)
def test_act_texts_parse_to_the_intended_actions(env_id: str) -> None:
    seats = make(env_id)
    scenarios = sample_scenarios(env_id, 2, 21)
    checked = 0
    kinds = set()
    for index, scenario in enumerate(scenarios):
        seats = make(env_id)
        seats.reset(scenario, index)
        for seat in seats.agent_ids:
            for counterpart in ("boulware", "accommodating", "random"):
                outcome, teacher, n = asyncio.run(drive(env_id, scenario, index, seat, counterpart))
                checked += n
                kinds |= {entry["kind"] for entry in teacher.trace}
                assert outcome.roles[seat].invalid_actions == 0
                for entry in teacher.trace:
                    assert set(entry) >= {"turn", "infer", "act", "anticipate"}
                    assert entry["infer"] and entry["anticipate"]
                    assert "\n" in entry["act"] or entry["kind"] in ("select", "no_deal")
    assert checked >= 12
    assert kinds & {"propose", "offer", "make_offer"}, kinds
    KINDS_SEEN[env_id] = kinds


KINDS_SEEN: dict[str, set[str]] = {}


def test_act_texts_cover_every_move() -> None:
    """Offers, acceptances, walk-aways and DnD selections all occur (and parsed, in the test above)."""
    for env_id in SOCIALRL_ENV_IDS:
        if env_id not in KINDS_SEEN:
            test_act_texts_parse_to_the_intended_actions(env_id)
    seen = set().union(*KINDS_SEEN.values())
    assert {"propose", "offer", "make_offer", "accept", "accept_offer", "select"} <= seen, seen
    assert seen & {"quit", "end", "decline", "walk_away", "no_deal"}, seen


def test_dnd_selection_states_the_accepted_split() -> None:
    for index, scenario in enumerate(sample_scenarios("dnd-v0", 4, 3)):
        outcome, teacher, _ = asyncio.run(drive("dnd-v0", scenario, index, "bob", "conceder"))
        if outcome.metrics["proposal_accepted"]:
            assert outcome.metrics["ending"] == "deal"
            assert any(entry["kind"] == "select" for entry in teacher.trace)


def test_a_refused_text_is_retried_as_command_then_structured(monkeypatch: pytest.MonkeyPatch) -> None:
    from agents.socialrl.teacher.price import PriceDomain
    from environments.core.runtime import run_episode

    original = PriceDomain.render
    broken: set[int] = set()

    def render_once_broken(self, plan, ctx):
        text, kind, payload = original(self, plan, ctx)
        if id(self) not in broken:  # the first message of the episode names no price: unparseable
            broken.add(id(self))
            return "Let me think.\nOFFER a fair price", kind, payload
        return text, kind, payload

    monkeypatch.setattr(PriceDomain, "render", render_once_broken)
    scenario = sample_scenarios("craigslist-v0", 1, 0)[0]
    teacher = make_teacher(1)
    agents = {"buyer": teacher, "seller": make_code_agent("boulware", seed=2)}
    result = asyncio.run(run_episode(make("craigslist-v0"), agents, scenario, 0))
    buyer_moves = [e for e in result.transcript if e.agent_id == "buyer"]
    assert result.outcome.roles["buyer"].invalid_actions == 2  # the text, then its bare command line
    assert buyer_moves[0].kind == "offer" and buyer_moves[0].payload == teacher.trace[0]["payload"]
    assert result.outcome.agreement


# ---------------------------------------------------------------------------------------- leakage
def test_leak_guard_replaces_statements_of_private_facts() -> None:
    seat = "mturk_agent_1"
    view = private_view("casino-v0", seat)
    domain = domain_for("casino-v0", seat, view)
    top = next(item for item, level in view["private"]["priorities"].items() if level == "High")
    assert domain.safe(f"{top} is my top priority.") != f"{top} is my top priority."
    assert domain.safe("Here is a fair split.") == "Here is a fair split."
    seat = "buyer"
    view = private_view("marketplace-v0", seat)
    domain = domain_for("marketplace-v0", seat, view)
    reservation = view["private"]["reservation_price"]
    text, _, _ = domain.render(
        __import__("agents.socialrl.teacher.base", fromlist=["Plan"]).Plan(
            "offer", round(reservation * 0.7, 2), "concede"
        ),
        __import__("agents.socialrl.teacher.base", fromlist=["TurnContext"]).TurnContext(4, 20, None, ("make_offer",)),
    )
    assert f"{reservation:g}" not in text.split("\n")[0]


@pytest.mark.parametrize("env_id", SOCIALRL_ENV_IDS)
def test_no_leakage_over_many_episodes(env_id: str) -> None:
    episodes = [e for e in small_tournament() if e.env_id == env_id and e.candidate == TEACHER_NAME]
    assert len(episodes) >= 30
    leaked = [(e.seat, e.counterpart, e.leaked) for e in episodes if e.leaked]
    assert not leaked, leaked
    assert all(e.invalid_actions == 0 for e in episodes)


# --------------------------------------------------------------------------------------- strength
@pytest.mark.parametrize("env_id", SOCIALRL_ENV_IDS)
def test_teacher_beats_boulware_and_conceder(env_id: str) -> None:
    table = summarise([e for e in small_tournament() if e.env_id == env_id])[env_id]["candidates"]
    teacher = table[TEACHER_NAME]["mean_reward"]
    for baseline in ("boulware", "conceder"):
        assert teacher > table[baseline]["mean_reward"], (env_id, baseline, teacher, table[baseline]["mean_reward"])


def test_paired_design_is_paired() -> None:
    episodes = [e for e in small_tournament() if e.env_id == "dnd-v0"]
    keys = {
        c: sorted((e.seat, e.counterpart, e.scenario_index) for e in episodes if e.candidate == c)
        for c in (TEACHER_NAME, "boulware", "conceder")
    }
    assert keys[TEACHER_NAME] == keys["boulware"] == keys["conceder"]
    scenarios = {
        c: [e.result.scenario.scenario_id for e in episodes if e.candidate == c] for c in (TEACHER_NAME, "boulware")
    }
    assert scenarios[TEACHER_NAME] == scenarios["boulware"]
    rewards = [e.result.outcome.roles[e.seat].unclamped_reward for e in episodes]  # before the clamp: can fail
    assert min(rewards) >= 0.0 and max(rewards) <= 1.0 and statistics.pstdev(rewards) > 0


# ------------------------------------------------------------------------------------ determinism
@pytest.mark.parametrize("env_id", SOCIALRL_ENV_IDS)
def test_deterministic_by_seed(env_id: str) -> None:
    scenario = sample_scenarios(env_id, 1, 4)[0]
    seat = make(env_id).agent_ids[0] if env_id != "calendar-v0" else "assistant"

    def play(seed: int):
        outcome, teacher, _ = asyncio.run(drive(env_id, scenario, 0, seat, "reciprocal", teacher_seed=seed))
        return outcome.roles[seat].reward, [(t["act"], t["infer"], t["anticipate"]) for t in teacher.trace]

    first, second = play(7), play(7)
    assert first == second
    assert first[1], "the teacher acted"


def test_the_teacher_buyer_keeps_listening_sellers_talking_and_never_states_its_target() -> None:
    """Against sellers that leave a partner who stops moving (agents/socialrl/price_counterpart.py), the teacher
    buyer never offers the same price three turns running while a seller offer stands, anchors below its target
    and calls at most one offer final; most of its episodes end in a deal."""
    from agents.socialrl.price_reading import says_final, stated_limits
    from environments.core.runtime import run_episode

    scenarios = sample_scenarios("craigslist-v0", 12, seed=5)
    agreements = 0
    for i, scenario in enumerate(scenarios):
        seller = make_code_agent(("boulware", "conceder", "reciprocal")[i % 3], seed=i)
        result = asyncio.run(run_episode(make("craigslist-v0"), {"buyer": make_teacher(i), "seller": seller}, scenario))
        agreements += result.outcome.agreement
        mine = [t for t in result.transcript if t.agent_id == "buyer"]
        offers = [t.payload["price"] for t in mine if t.kind == "offer"]
        assert offers and offers[0] < scenario.buyer_target
        assert all(not (a == b == c) for a, b, c in zip(offers, offers[1:], offers[2:], strict=False)), offers
        assert sum(says_final(t.text) for t in mine) <= 1
        assert not any(stated_limits(t.text) for t in mine)
    assert agreements >= 10
