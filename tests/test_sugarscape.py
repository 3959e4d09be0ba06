"""Sugarscape with negotiated trade: world rules, the MRS trade, the encounter environment, the simulation."""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from agents.yoao.sugarscape_agents import (
    AltruistTrader,
    ExploiterTrader,
    MRSTrader,
    SurvivorTrader,
    identity_trader,
    mrs_trader,
)
from environments import sample_scenarios
from environments.core.base import ActionSpec, ScenarioError
from environments.core.data import DataFileError, dataset_path
from environments.core.events import RAW_TEXT, Action, Event, Notification
from environments.core.runtime import run_episode
from environments.yoao.sugarscape import (
    TRADER_A,
    TRADER_B,
    AgentInit,
    SugarscapeConfig,
    SugarscapeWorld,
    TradeEncounter,
    TraderInfo,
    TraderState,
    TradeScenario,
    best_deal,
    leaning_label,
    load_sugar_map,
    mrs_trade,
    run_simulation,
    welfare,
)
from environments.yoao.sugarscape_core import ORIGINS, SUGAR_MAP_PARTS, gini, mrs

SMALL = SugarscapeConfig(max_ticks=12, seed=5)


def small_world(**overrides: object) -> SugarscapeConfig:
    return replace(SugarscapeConfig(width=10, height=10, n_agents=0, vision=(1, 3), max_ticks=5), **overrides)


def blank(height: int = 10, width: int = 10) -> np.ndarray:
    return np.zeros((height, width), dtype=np.int64)


# ------------------------------------------------------------------------------------------- MRS rule
def test_mrs_trade_matches_the_hand_worked_example() -> None:
    # A: 2 sugar, 8 spice, metabolisms 3 / 1 -> MRS_A = (8/1) / (2/3) = 12;  W_A = s^0.75 * p^0.25
    # B: 8 sugar, 6 spice, metabolisms 1 / 1 -> MRS_B = (6/1) / (8/1) = 0.75; W_B = s^0.5 * p^0.5
    # Step 1: price = sqrt(12 * 0.75) = 3 -> A (higher MRS) buys 1 sugar for 3 spice: A (3, 5), B (7, 9).
    #   W_A 2.828 -> 3.409, W_B 6.928 -> 7.937 (both up); MRS_A = 5/(3/3) = 5 > MRS_B = 9/7 = 1.286 (no cross).
    # Step 2: price = sqrt(5 * 9/7) = 2.535 -> 1 sugar for int(2.535) = 2 spice: A (4, 3), B (6, 11).
    #   W_A 3.409 -> 3.722, W_B 7.937 -> 8.124 (both up); MRS_A = 3/(4/3) = 2.25 > MRS_B = 11/6 = 1.833.
    # Step 3: price = sqrt(2.25 * 1.833) = 2.031 -> 1 sugar for 2 spice would give A (5, 1):
    #   W_A = 5^0.75 * 1 = 3.344 < 3.722, so trading stops. A got 2 sugar and gave 5 spice.
    assert mrs_trade((2, 8, 3, 1), (8, 6, 1, 1)) == (-2, 5)
    assert mrs_trade((8, 6, 1, 1), (2, 8, 3, 1)) == (2, -5)  # the same trade seen from the other side
    assert welfare(4, 3, 3, 1) == pytest.approx(3.7224, abs=1e-4)
    assert welfare(6, 11, 1, 1) == pytest.approx(math.sqrt(66))
    # Every figure of the worked example in docs/environments.md, to the 3 decimals it prints.
    assert (round(welfare(2, 8, 3, 1), 3), round(welfare(8, 6, 1, 1), 3)) == (2.828, 6.928)
    assert (round(mrs(2, 8, 3, 1), 3), round(mrs(8, 6, 1, 1), 3)) == (12, 0.75)
    assert (round(welfare(3, 5, 3, 1), 3), round(welfare(7, 9, 1, 1), 3)) == (3.409, 7.937)  # after step 1
    assert (round(mrs(3, 5, 3, 1), 3), round(mrs(7, 9, 1, 1), 3)) == (5, 1.286)
    assert round(math.sqrt(mrs(3, 5, 3, 1) * mrs(7, 9, 1, 1)), 3) == 2.535  # step 2's price
    assert (round(welfare(4, 3, 3, 1), 3), round(welfare(6, 11, 1, 1), 3)) == (3.722, 8.124)  # after step 2
    assert (round(mrs(4, 3, 3, 1), 3), round(mrs(6, 11, 1, 1), 3)) == (2.25, 1.833)
    assert round(math.sqrt(mrs(4, 3, 3, 1) * mrs(6, 11, 1, 1)), 3) == 2.031  # step 3's price
    assert round(welfare(5, 1, 3, 1), 3) == 3.344  # step 3 would lower A's welfare: trading stops


def test_mrs_trade_stops_before_the_mrs_cross() -> None:
    # A (5 sugar, 20 spice, metabolisms 2/1) and B (20, 5, 1/2) are mirror images, so MRS_A * MRS_B = 1 and
    # the price stays 1 (1 sugar for 1 spice). After k steps MRS_A = 2(20-k)/(5+k) and MRS_B = (5+k)/(2(20-k)):
    # A's stays above B's while 2(20-k) > 5+k, i.e. k < 35/3, so the 12th step would cross and is refused,
    # although it would still raise both welfares (13.208 -> 13.223).
    assert mrs_trade((5, 20, 2, 1), (20, 5, 1, 2)) == (-11, 11)
    assert welfare(17, 8, 2, 1) > welfare(16, 9, 2, 1)


def test_mrs_trade_does_nothing_when_the_mrs_are_equal_or_a_stock_is_empty() -> None:
    assert mrs_trade((10, 10, 2, 2), (20, 20, 1, 1)) == (0, 0)
    assert mrs_trade((0, 10, 1, 1), (10, 10, 1, 1)) == (0, 0)


def test_a_trade_only_moves_resources_between_the_two_traders() -> None:
    rng = random.Random(1)
    for _ in range(500):
        a = (rng.randint(1, 60), rng.randint(1, 60), rng.randint(1, 4), rng.randint(1, 4))
        b = (rng.randint(1, 60), rng.randint(1, 60), rng.randint(1, 4), rng.randint(1, 4))
        sugar, spice = mrs_trade(a, b)
        after_a, after_b = (a[0] - sugar, a[1] - spice), (b[0] + sugar, b[1] + spice)
        assert after_a[0] + after_b[0] == a[0] + b[0] and after_a[1] + after_b[1] == a[1] + b[1]
        assert min(*after_a, *after_b) > 0
        if (sugar, spice) != (0, 0):  # both strictly better off, one resource against the other
            assert welfare(*after_a, *a[2:]) > welfare(*a) and welfare(*after_b, *b[2:]) > welfare(*b)
            assert sugar * spice < 0


def test_best_deal_keeps_the_other_side_whole() -> None:
    own, other = (2, 8, 3, 1), (8, 6, 1, 1)
    sugar, spice, w = best_deal(own, other, strict=True)
    assert welfare(other[0] + sugar, other[1] + spice, *other[2:]) > welfare(*other)
    assert w == pytest.approx(welfare(own[0] - sugar, own[1] - spice, *own[2:]))
    assert w >= welfare(2 + 2, 8 - 5, 3, 1)  # at least as good for `own` as the MRS trade
    # The best deals of docs/environments.md's worked example (the counterpart at least as well off).
    sugar, spice, w = best_deal(own, other)  # A gets 3 sugar for 4 spice: A (5, 4), B (5, 10)
    assert (sugar, spice, round(w, 3)) == (-3, 4, 4.729)
    assert (round(welfare(5, 10, 1, 1), 3), round(welfare(*other), 3)) == (7.071, 6.928)  # B no worse off
    sugar, spice, w = best_deal(other, own)  # B gets 7 spice for 2 sugar: B (6, 13), A (4, 1)
    assert (sugar, spice, round(w, 3)) == (2, -7, 8.832)
    assert round(welfare(4, 1, 3, 1), 3) == round(welfare(*own), 3) == 2.828


# ------------------------------------------------------------------------------------------- the world
def test_each_tick_conserves_resources() -> None:
    world = SugarscapeWorld(replace(SMALL, max_ticks=40))
    deaths_seen = 0
    while not world.finished:
        before = world.resources()
        report = world.step()
        after = world.resources()
        for i, name in enumerate(("sugar", "spice")):
            expected = before[f"agent_{name}"] + report.harvested[i] - report.consumed[i] - report.dead_resources[i]
            assert after[f"agent_{name}"] == expected
            assert after[f"cell_{name}"] == before[f"cell_{name}"] + report.growback[i] - report.harvested[i]
        assert (world.stock >= 0).all()
        deaths_seen += sum(report.deaths)
    assert deaths_seen > 0 and report.trades >= 0 and world.stats.completed > 0


def test_apply_trade_is_atomic_and_never_goes_below_zero() -> None:
    agents = [AgentInit(1, 1, sugar=5, spice=5), AgentInit(1, 2, sugar=5, spice=5)]
    world = SugarscapeWorld(small_world(), sugar_capacity=blank(), spice_capacity=blank(), agents=agents)
    world.begin_tick()
    assert world.stock.tolist() == [[5, 5], [5, 5]]
    stock = world.stock.copy()
    assert world.apply_trade(0, 1, 6, -1) is False  # a would give 6 sugar out of 5
    assert world.apply_trade(0, 1, -1, 7) is False  # a would give 7 spice
    assert (world.stock == stock).all() and world.stats.rejected_deals == 2
    assert world.apply_trade(0, 1, 2, -3) is True
    assert world.stock.sum(axis=1).tolist() == stock.sum(axis=1).tolist()
    assert world.stock[:, 0].tolist() == [stock[0, 0] - 2, stock[1, 0] + 3]


@pytest.mark.parametrize("shape", ["lattice", "diamond"])
def test_movement_and_sight_wrap_across_the_torus_edge(shape: str) -> None:
    sugar = blank()
    sugar[5, 9] = 4  # one rich cell just across the left edge of the agent at (5, 0)
    sugar[8, 3] = 4  # and one three rows up across the top edge of the agent at (1, 3)
    agents = [AgentInit(5, 0, 10, 10, 1, 1, vision=1), AgentInit(1, 3, 10, 10, 1, 1, vision=3)]
    world = SugarscapeWorld(
        small_world(vision_shape=shape), sugar_capacity=sugar, spice_capacity=blank(), agents=agents
    )
    world.begin_tick()
    assert [(world.agent_state(r)["row"], world.agent_state(r)["col"]) for r in (0, 1)] == [(5, 9), (8, 3)]
    assert world.stock[0].tolist() == [14, 14]  # each harvested its cell's 4 sugar
    bounded = SugarscapeWorld(
        small_world(vision_shape=shape, torus=False), sugar_capacity=sugar, spice_capacity=blank(), agents=agents
    )
    bounded.begin_tick()
    assert [(bounded.agent_state(r)["row"], bounded.agent_state(r)["col"]) for r in (0, 1)] == [(5, 0), (1, 3)]


def test_neighbours_across_the_edge_meet() -> None:
    agents = [AgentInit(4, 0), AgentInit(4, 9), AgentInit(0, 6), AgentInit(9, 6), AgentInit(2, 2)]
    flat = blank()
    for cfg, expected in ((small_world(), {(0, 1), (2, 3)}), (small_world(torus=False), set())):
        world = SugarscapeWorld(cfg, sugar_capacity=flat, spice_capacity=flat, agents=agents)
        meetings = world._meetings()
        assert {tuple(sorted(m)) for m in meetings} == expected


def test_movement_prefers_welfare_then_distance() -> None:
    sugar = blank()
    sugar[5, 7], sugar[5, 2] = 2, 2  # equal sugar at distance 2 (east) and 3 (west)
    sugar[2, 5] = 1  # less sugar, nearer (north, distance 3)
    agent = AgentInit(5, 5, 10, 10, 1, 1, vision=3)
    world = SugarscapeWorld(small_world(), sugar_capacity=sugar, spice_capacity=blank(), agents=[agent])
    world.begin_tick()
    assert (world.agent_state(0)["row"], world.agent_state(0)["col"]) == (5, 7)


def test_contested_cell_goes_to_one_agent_and_the_other_takes_its_next_best() -> None:
    sugar = blank()
    sugar[5, 5], sugar[5, 3] = 4, 1  # both agents want (5, 5); the one left over goes for (5, 3) or stays
    agents = [AgentInit(5, 4, 10, 10, 1, 1, vision=1), AgentInit(5, 6, 10, 10, 1, 1, vision=1)]
    world = SugarscapeWorld(small_world(), sugar_capacity=sugar, spice_capacity=blank(), agents=agents)
    world.begin_tick()
    cells = sorted((world.agent_state(r)["row"], world.agent_state(r)["col"]) for r in (0, 1))
    assert (5, 5) in cells and len(set(cells)) == 2
    assert cells in ([(5, 3), (5, 5)], [(5, 5), (5, 6)])


def test_claims_on_one_cell_go_to_the_earliest_and_the_others_choose_again() -> None:
    world = SugarscapeWorld(small_world())
    rng = np.random.default_rng(0)
    for _ in range(200):
        n, k = int(rng.integers(2, 30)), 12
        own = rng.choice(1000, size=n, replace=False)
        sight = np.concatenate([own[:, None], rng.integers(1000, 1030, size=(n, k - 1))], axis=1)
        key = rng.integers(0, 4, size=(n, k)).astype(float)  # many ties, many shared cells
        key[rng.random((n, k)) < 0.2] = -np.inf
        key[:, 0] = -0.5  # staying is worse than any finite cell in sight
        first = sight[np.arange(n), key.argmax(axis=1)]
        state = world.rng.bit_generator.state
        got = world._resolve_claims(key.copy(), sight, first.copy())
        world.rng.bit_generator.state = state
        rank = world.rng.permutation(n)  # the order the method drew
        # Reference: the earliest claimant keeps its cell; the others choose in rank order among unclaimed cells.
        winners = {}
        for i in np.argsort(rank):
            winners.setdefault(int(first[i]), i)
        taken = set(winners)
        expected = first.copy()
        for i in np.argsort(rank):
            if winners[int(first[i])] != i:
                order = np.argsort(-key[i], kind="stable")
                expected[i] = next(c for c in sight[i, order] if c not in taken)
                taken.add(int(expected[i]))
        assert (got == expected).all() and len(set(got.tolist())) == n


def test_starvation_and_old_age_are_recorded() -> None:
    agents = [AgentInit(1, 1, 1, 5, 2, 1, max_age=50), AgentInit(5, 5, 20, 20, 1, 1, max_age=2)]
    world = SugarscapeWorld(small_world(), sugar_capacity=blank(), spice_capacity=blank(), agents=agents)
    world.run()
    causes = {d.agent_id: d.cause for d in world.deaths}
    assert causes == {0: "starvation", 1: "old_age"}
    metrics = world.metrics()
    assert metrics["survival"] == 0.5 and metrics["deaths"] == {"starvation": 1, "old_age": 1}
    old = next(d for d in world.deaths if d.agent_id == 1)
    assert old.age == 3 and (old.sugar, old.spice) == (17, 17)


def test_trade_rounds_are_disjoint_and_keep_each_agents_order() -> None:
    meetings = [(0, 1), (1, 2), (3, 4), (0, 3), (2, 5)]
    rounds = SugarscapeWorld.trade_rounds(meetings)
    assert rounds == [[(0, 1), (3, 4)], [(1, 2), (0, 3)], [(2, 5)]]
    for round_ in rounds:
        seats = [a for pair in round_ for a in pair]
        assert len(seats) == len(set(seats))


def test_generated_landscape_has_sugar_ne_sw_and_spice_nw_se() -> None:
    world = SugarscapeWorld(SugarscapeConfig(n_agents=0))
    sugar = world.capacity[0, :-1].reshape(20, 20)
    spice = world.capacity[1, :-1].reshape(20, 20)
    assert sugar.max() == 4 and sugar.min() == 0
    assert sugar[5, 15] >= 3 and sugar[15, 5] >= 3 and sugar[5, 5] <= 1 and sugar[15, 15] <= 1
    assert (spice == sugar[:, ::-1]).all()


def test_same_seed_gives_identical_metrics() -> None:
    first, second = run_simulation(SMALL), run_simulation(SMALL)
    assert first.metrics == second.metrics and first.deaths == second.deaths
    assert run_simulation(replace(SMALL, seed=6)).metrics != first.metrics
    negotiated = run_simulation(replace(SMALL, max_ticks=6), identity_trader)
    assert negotiated.metrics == run_simulation(replace(SMALL, max_ticks=6), identity_trader).metrics


def test_a_world_negotiated_by_mrs_traders_equals_the_fast_mrs_path() -> None:
    fast = run_simulation(SMALL)
    negotiated = run_simulation(SMALL, mrs_trader)
    assert negotiated.negotiated and negotiated.episodes == fast.metrics["trade"]["attempted"] > 0
    assert fast.metrics["trade"]["completed"] > 0
    assert negotiated.metrics == fast.metrics
    assert negotiated.deaths == fast.deaths


def test_metrics_report_trade_survival_identity_and_welfare() -> None:
    config = replace(SMALL, max_ticks=45)
    world = SugarscapeWorld(config)
    result = run_simulation(config, identity_trader, world=world)
    metrics = result.metrics
    trade = metrics["trade"]
    assert trade["attempted"] == sum(v["attempted"] for v in trade["by_origin_pair"].values())
    assert [(w["start"], w["end"]) for w in trade["by_window"]] == [(0, 19), (20, 39), (40, 59)]
    # The rates are the counts' (not only a number in [0, 1]), overall, by window and by origin pair.
    assert 0 < trade["completed"] < trade["attempted"]
    assert trade["success_rate"] == trade["completed"] / trade["attempted"]
    for part in (*trade["by_window"], *trade["by_origin_pair"].values()):
        assert part["success_rate"] == (part["completed"] / part["attempted"] if part["attempted"] else None)
    assert trade["completed"] == sum(w["completed"] for w in trade["by_window"])
    assert set(metrics["identity_shift"]) == {"altruist", "exploiter", "survivor"}
    assert metrics["identity_shift"]["altruist"] > 0 > metrics["identity_shift"]["exploiter"]
    assert metrics["identity_shift"]["survivor"] == 0
    # Lifespans and wealth at death are the deaths' own (every death counted, its sugar and spice both).
    assert result.deaths and metrics["mean_lifespan"] == pytest.approx(np.mean([d.age for d in result.deaths]))
    assert metrics["wealth_at_death"]["mean"] == pytest.approx(np.mean([d.sugar + d.spice for d in result.deaths]))
    welfare_ = metrics["welfare"]
    assert welfare_["rawlsian"] <= welfare_["nash"] <= welfare_["utilitarian"] / max(metrics["alive"], 1) + 1e-9
    # The Gini coefficient is the live agents' welfare's, by the mean-absolute-difference formula (not the
    # rank formula `gini` uses): sum |w_i - w_j| / (2 n^2 mean).
    w = world.welfare_of_agents()
    assert w.size == metrics["alive"] > 1 and welfare_["utilitarian"] == pytest.approx(w.sum())
    by_pairs = np.abs(w[:, None] - w[None, :]).sum() / (2 * w.size**2 * w.mean())
    assert welfare_["gini"] == pytest.approx(by_pairs) and welfare_["gini"] > 0
    assert gini(np.array([1.0, 1.0, 1.0])) == 0 and gini(np.array([0.0, 0.0, 3.0])) == pytest.approx(2 / 3)


def test_origin_mix_is_honoured() -> None:
    world = SugarscapeWorld(SugarscapeConfig(origin_mix={"altruist": 0.5, "exploiter": 0.25, "survivor": 0.25}))
    counts = np.bincount(world.origin, minlength=3).tolist()
    assert counts == [50, 25, 25]
    default = SugarscapeWorld(SugarscapeConfig())
    assert np.bincount(default.origin, minlength=3).tolist() == [20, 60, 20]
    assert sorted(set(default.leaning.tolist())) == [-0.8, 0.0, 0.8]
    assert [leaning_label(x) for x in (0.8, 0.3, -0.31, 0.0)] == ["good-leaning", "mixed", "bad-leaning", "mixed"]


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"vision": (1, 10)}, "vision"),
        ({"vision": (0, 3)}, "vision"),
        ({"n_agents": 401}, "n_agents"),
        ({"sugar_metabolism": (0, 2)}, "sugar_metabolism"),
        ({"max_age": (10, 5)}, "max_age"),
        ({"origin_mix": {"altruist": 0.5, "exploiter": 0.2}}, "sum to 1"),
        ({"origin_mix": {"saint": 1.0}}, "unknown origin"),
        ({"landscape": "moon"}, "landscape"),
        ({"width": 2}, "3x3"),
        ({"window": 0}, "window"),
    ],
)
def test_config_rejects_out_of_range_parameters(overrides: dict, words: str) -> None:
    with pytest.raises(ScenarioError, match=words):
        SugarscapeConfig(**overrides)


# ------------------------------------------------------------------------------------------ map loader
def test_the_classic_map_loads() -> None:
    path = dataset_path(*SUGAR_MAP_PARTS)
    if path is None:
        pytest.skip("the shared Sugarscape map is not present")
    sugar = load_sugar_map(path)
    assert sugar.shape == (50, 50) and sugar.min() == 0 and sugar.max() == 4
    world = SugarscapeWorld(SugarscapeConfig.classic(n_agents=10))
    assert (world.capacity[0, :-1].reshape(50, 50) == sugar).all()
    assert (world.capacity[1, :-1].reshape(50, 50) == sugar[:, ::-1]).all()


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("0 1 2\n0 x 2\n1 1 1\n", 2, "not a number"),
        ("0 1 2\n0 1 2\n1 1\n", 3, "row has 2 values"),
        ("0 1 2\n\n0 -1 2\n", 3, "whole number"),
        ("0 1 2.5\n", 1, "whole number"),
    ],
)
def test_a_broken_map_names_the_file_and_the_line(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = tmp_path / "sugar-map.txt"
    path.write_text(text)
    with pytest.raises(DataFileError, match=reason) as caught:
        load_sugar_map(path)
    assert caught.value.record == line and caught.value.path == path and str(path) in str(caught.value)


def test_an_empty_or_missing_map_is_a_data_file_error(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(DataFileError, match="empty"):
        load_sugar_map(tmp_path / "empty.txt")
    with pytest.raises(DataFileError, match="cannot read"):
        load_sugar_map(tmp_path / "missing.txt")


def test_a_map_of_the_wrong_size_is_rejected() -> None:
    with pytest.raises(ScenarioError, match="rows x cols"):
        SugarscapeWorld(SugarscapeConfig(width=20, height=20), sugar_capacity=np.zeros((10, 10)))


# ----------------------------------------------------------------------------------- the encounter env
def scenario(a: tuple = (2, 8, 3, 1, "survivor"), b: tuple = (8, 6, 1, 1, "survivor")) -> TradeScenario:
    return TradeScenario("test:0", TraderState(*a), TraderState(*b))


def play(env: TradeEncounter, script: list[tuple[str, str]]) -> list[Event]:
    events: list[Event] = []
    for seat, text in script:
        events += env.step(Action(seat, RAW_TEXT, text))
    return events


TALK = [(TRADER_A, "Hello"), (TRADER_B, "Hi"), (TRADER_A, "Fine weather"), (TRADER_B, "Indeed")]
INTENT = [(TRADER_A, "INTENT: TRADE"), (TRADER_B, "intent: trade")]


def test_sampled_encounters_give_the_first_trader_sugar_to_trade() -> None:
    # Registration and seeded sampling are checked for every environment in tests/test_conformance.py.
    assert all(s.trader_a.sugar >= 5 for s in sample_scenarios("sugarscape-v0", 5, 3))


def test_a_negotiated_trade_moves_the_offer_and_scores_welfare_gains() -> None:
    env = TradeEncounter()
    env.reset(scenario())
    offers = [(TRADER_A, "OFFER: GIVE 5 SPICE FOR 2 SUGAR"), (TRADER_B, "PASS"), (TRADER_A, "PASS"), (TRADER_B, "PASS")]
    play(env, [*TALK, *INTENT, *offers, (TRADER_A, "ACCEPT"), (TRADER_B, "ACCEPT")])
    play(env, [(TRADER_A, "REFLECT: 0"), (TRADER_B, "REFLECT: 0")])
    out = env.outcome()
    assert out.agreement and out.deal["sugar_a_to_b"] == -2 and out.deal["spice_a_to_b"] == 5
    assert out.metrics["stocks_after"] == {TRADER_A: {"sugar": 4, "spice": 3}, TRADER_B: {"sugar": 6, "spice": 11}}
    assert out.metrics["reference_trade"] == {"sugar_a_to_b": -2, "spice_a_to_b": 5}
    for seat, (before, after) in {TRADER_A: ((2, 8, 3, 1), (4, 3)), TRADER_B: ((8, 6, 1, 1), (6, 11))}.items():
        w = out.metrics["welfare"][seat]
        assert w["before"] == pytest.approx(welfare(*before)) and w["after"] == pytest.approx(
            welfare(*after, *before[2:])
        )
        expected = (w["after"] - w["before"]) / (w["best"] - w["before"])  # the documented formula
        assert out.roles[seat].reward == pytest.approx(expected) and 0 < out.roles[seat].reward <= 1
    assert out.rounds == 14
    # The documented worked example: A's best deal gives W 4.729, B's 8.832 -> rewards 0.47 and 0.63.
    assert out.roles[TRADER_A].reward == pytest.approx(0.4705, abs=1e-4)
    assert out.roles[TRADER_B].reward == pytest.approx(0.6282, abs=1e-4)


def test_invalid_offer_text_is_counted_and_ends_without_a_trade() -> None:
    env = TradeEncounter(max_invalid_retries=2)
    env.reset(scenario())
    play(env, [*TALK, *INTENT])
    events = play(env, [(TRADER_A, "OFFER: GIVE lots of SUGAR FOR spice")] * 3)
    assert [e.data["retries_left"] for e in events if isinstance(e, Notification) and e.kind == "invalid_action"] == [
        2,
        1,
        0,
    ]
    assert set(env.awaiting) == {TRADER_A, TRADER_B} and env.awaiting[TRADER_A] == ("reflect",)
    play(env, [(TRADER_A, "REFLECT: 0"), (TRADER_B, "REFLECT: 0")])
    out = env.outcome()
    assert not out.agreement and out.deal is None and out.metrics["ending"] == "forfeit"
    assert out.roles[TRADER_A].invalid_actions == 3 and out.roles[TRADER_B].invalid_actions == 0
    assert out.metrics["stocks_after"][TRADER_A] == {"sugar": 2, "spice": 8}
    assert out.roles[TRADER_A].reward == 0 and out.roles[TRADER_A].utility == 0


def test_an_offer_of_more_than_one_holds_is_refused_and_nothing_goes_negative() -> None:
    env = TradeEncounter(max_invalid_retries=1)
    env.reset(scenario())
    play(env, [*TALK, *INTENT])
    greedy = Action(TRADER_A, "offer", "", {"give_resource": "sugar", "give": 1000, "get": 1})
    events = env.step(greedy)
    assert "you hold only 2 sugar" in events[0].text and env.invalid_counts[TRADER_A] == 1
    # An offer asking the other for more than it holds can be made, but not executed.
    env.step(Action(TRADER_A, "offer", "", {"give_resource": "sugar", "give": 1, "get": 500}))
    play(env, [(TRADER_B, "PASS"), (TRADER_A, "PASS"), (TRADER_B, "PASS"), (TRADER_A, "ACCEPT"), (TRADER_B, "ACCEPT")])
    play(env, [(TRADER_A, "REFLECT: 0"), (TRADER_B, "REFLECT: 0")])
    out = env.outcome()
    assert not out.agreement and out.metrics["ending"] == "infeasible"
    assert all(v >= 0 for stocks in out.metrics["stocks_after"].values() for v in stocks.values())
    for bad in ({"give_resource": "gold", "give": 1, "get": 1}, {"give_resource": "sugar", "give": -1, "get": 2}):
        env2 = TradeEncounter()
        env2.reset(scenario())
        play(env2, [*TALK, *INTENT])
        assert env2.step(Action(TRADER_A, "offer", "", bad))[0].kind == "invalid_action"


def test_reflection_keeps_the_leaning_within_bounds() -> None:
    env = TradeEncounter()
    env.reset(scenario(a=(5, 5, 1, 1, "altruist"), b=(5, 5, 1, 1, "exploiter")))
    play(env, [*TALK, (TRADER_A, "INTENT: NO TRADE"), (TRADER_B, "INTENT: TRADE")])
    assert set(env.awaiting) == {TRADER_A, TRADER_B}  # straight to the reflection
    assert env.step(Action(TRADER_A, "reflect", "", {"delta": float("nan")}))[0].kind == "invalid_action"
    play(env, [(TRADER_A, "REFLECT: +2"), (TRADER_B, "REFLECT: -2")])  # the largest shifts a reflection may state
    out = env.outcome()
    assert out.metrics["ending"] == "declined"
    assert out.metrics["leaning_after"] == {TRADER_A: 1.0, TRADER_B: -1.0}


def test_the_parser_reads_commands_and_leaves_prose_alone() -> None:
    env = TradeEncounter()
    env.reset(scenario())
    play(env, TALK)
    assert env.parse(TRADER_A, "Sure.\nNO TRADE").payload == {"trade": False}
    assert env.parse(TRADER_A, "I would like to trade, really").__class__.__name__ == "ParseError"
    play(env, INTENT)
    action = env.parse(TRADER_A, "**Offer:** give 3 sugar for 4 spice")
    assert action.kind == "offer" and action.payload == {"give_resource": "sugar", "give": 3, "get": 4}
    assert "whole numbers" in env.parse(TRADER_A, "OFFER: GIVE 2.5 SUGAR FOR 1 SPICE").message
    assert env.parse(TRADER_A, "Maybe I should pass on that idea, but OK: PASS").kind == "pass"


class Adversary:
    """Always wants to trade, asks for absurd amounts, accepts everything, reflects wildly."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id = agent_id

    async def observe(self, event: Event) -> None:
        return None

    async def act(self, request: Notification) -> Action:
        kind = request.allowed[0]
        payload = {
            "message": {"share": {"sugar": 10**6}},
            "intent": {"trade": True},
            "offer": {"give_resource": "spice", "give": self.rng.choice([0, 1, 10**6]), "get": 10**6},
            "accept": {},
            "reflect": {"delta": self.rng.uniform(-3, 3)},
        }[kind]
        return Action(self.agent_id, kind, "gimme", payload)


def test_adversarial_agents_never_push_a_stock_below_zero() -> None:
    config = replace(SMALL, max_ticks=8)

    def factory(info: TraderInfo) -> object:
        return Adversary(info.agent_id) if info.origin == "exploiter" else AltruistTrader()

    world = SugarscapeWorld(config)
    ticks = []
    result = run_simulation(config, factory, world=world, keep_reports=True, on_tick=ticks.append)
    assert ticks == list(result.reports) and [t.tick for t in ticks] == list(range(len(ticks)))
    assert (world.stock >= 0).all()
    assert all(d.sugar >= 0 and d.spice >= 0 for d in result.deaths)
    assert result.metrics["trade"]["invalid_actions"] > 0
    # Leanings move by the reflections that were accepted, each trader's own: the altruist traders reflect +0.05
    # an encounter, so theirs only rise, by whole steps of 0.05 until the +1 bound; the adversaries' wild
    # deltas (|delta| <= 2 accepted, the rest refused and retried) moved some exploiters' leanings.
    moved = world.leaning - world.leaning_start
    exploiter = world.origin == ORIGINS.index("exploiter")
    calm = moved[~exploiter]
    steps = calm / AltruistTrader.reflection_delta
    assert (calm >= -1e-12).all() and (calm > 0).any()
    assert (np.isclose(steps, np.round(steps)) | np.isclose(world.leaning[~exploiter], 1.0)).all()
    assert (moved[exploiter] != 0).any()


def test_garbage_text_is_counted_and_never_trades() -> None:
    class Babbler:
        async def reset(self, *args: object) -> None:
            self.agent_id = args[0]

        async def observe(self, event: Event) -> None:
            return None

        async def act(self, request: Notification) -> Action:
            return Action(self.agent_id, RAW_TEXT, "OFFER: GIVE lots of SUGAR FOR spice")

    result = run_simulation(replace(SMALL, max_ticks=4), lambda info: Babbler())
    trade = result.metrics["trade"]
    assert trade["attempted"] > 0 and trade["completed"] == 0 and trade["invalid_actions"] >= 3 * trade["attempted"]


# ---------------------------------------------------------------------------------------------- agents
def run(env_scenario: TradeScenario, a: object, b: object) -> object:
    return asyncio.run(run_episode(TradeEncounter(), {TRADER_A: a, TRADER_B: b}, env_scenario)).outcome


def test_two_mrs_traders_reach_the_mrs_trade() -> None:
    out = run(scenario(), MRSTrader(), MRSTrader())
    assert out.agreement and (out.deal["sugar_a_to_b"], out.deal["spice_a_to_b"]) == (-2, 5)
    assert out.metrics["leaning_delta"] == {TRADER_A: 0.0, TRADER_B: 0.0}


def test_identity_traders_behave_as_documented() -> None:
    exploited = run(scenario(), ExploiterTrader(), MRSTrader())
    assert exploited.agreement
    mrs_gain = welfare(4, 3, 3, 1) - welfare(2, 8, 3, 1)
    assert exploited.roles[TRADER_A].utility > mrs_gain > 0 < exploited.roles[TRADER_B].utility
    assert exploited.metrics["leaning_delta"][TRADER_A] == pytest.approx(-0.05)
    kind = run(scenario(a=(2, 8, 3, 1, "altruist")), AltruistTrader(), MRSTrader())
    assert kind.agreement and kind.metrics["leaning_delta"][TRADER_A] == pytest.approx(0.05)
    rich = run(scenario(a=(60, 80, 3, 1), b=(80, 60, 1, 1)), SurvivorTrader(), MRSTrader())
    assert not rich.agreement and rich.metrics["intents"][TRADER_A] is False
    silent = run(scenario(), MRSTrader(share=False), MRSTrader(share=False))
    assert not silent.agreement and silent.metrics["ending"] == "no_offer"


def test_scenario_fields_are_validated() -> None:
    with pytest.raises(ScenarioError, match="sugar"):
        TraderState(-1, 5, 1, 1)
    with pytest.raises(ScenarioError, match="metabolism_spice"):
        TraderState(1, 5, 1, 0)
    with pytest.raises(ScenarioError, match="leaning"):
        TraderState(1, 5, 1, 1, "altruist", 1.5)
    assert TraderState(1, 1, 1, 1, "exploiter").leaning == -0.8
