"""Behaviour metrics on hand-made episodes, read back from the tables, plotted; the privacy red team."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agents.socialrl.code_agents import make_code_agent
from agents.socialrl.extractor import make_extractor
from agents.socialrl.teacher import make_teacher
from environments import make
from environments.core.events import RAW_TEXT, Action
from environments.socialrl.craigslist import CraigslistScenario
from environments.socialrl.marketplace import MarketplaceScenario
from models.evaluation.policy import EvaluationPlan, evaluate_policy, store_evaluation
from models.socialrl import behaviour, red_team
from models.socialrl.behaviour import RecordedEpisode, episode_behaviour, summarise_behaviour, uses_commitment
from models.storage import TableStore

BIKE = CraigslistScenario(
    "t:bike", "bike", "Trek bike", ("a", "b"), listing_price=200.0, buyer_target=140.0, seller_reservation=140.0
)


def played(scenario, moves: list[tuple[str, str]], policy: str = "p") -> RecordedEpisode:
    """Play raw texts through the real environment and record the buyer's view."""
    env = make("craigslist-v0")
    env.reset(scenario, 0)
    for seat, text in moves:
        env.step(Action(seat, RAW_TEXT, text))
    outcome = env.outcome()
    role = outcome.roles["buyer"]
    return RecordedEpisode(
        policy=policy, env_id="craigslist-v0", episode_id="ep", scenario=scenario, seat="buyer", reward=role.reward, utility=role.utility, agreement=outcome.agreement, leaked=role.leaked,
        turns=env.transcript, metrics=outcome.metrics,
    )  # fmt: skip


def test_an_anchored_buyer_who_counters_and_commits_and_leaks() -> None:
    episode = played(
        BIKE,
        [
            ("buyer", "Would you take $110?\nOFFER $110"),  # below the $140 target: anchored
            ("seller", "No way.\nOFFER $190"),
            ("buyer", "That is too much. My final offer: $150.\nOFFER $150"),  # rejects by countering
            ("seller", "Meet me at $160.\nOFFER $160"),
            ("buyer", "My budget is $140, honestly.\nREJECT"),  # an explicit rejection that leaks the target
            ("seller", "OK, $155 then.\nOFFER $155"),
            ("buyer", "Deal.\nACCEPT"),
        ],
    )
    b = episode_behaviour(episode)
    assert b.opening_ratio == pytest.approx(110 / 140) and b.anchored
    assert b.opening_value == 1.0  # $110 is below the target: the full reward if accepted
    assert b.offers == ((0, 1.0), (1, pytest.approx((200 - 150) / 60)))
    assert (b.policy_turns, b.rejecting_turns, b.counter_offers, b.explicit_rejects) == (4, 2, 1, 1)
    assert b.commitment_turns == 1
    assert b.leaked and episode.leaked == ("target_price",)
    assert b.over_conceded is True  # paid $155, above the $140 target


def test_a_buyer_who_opens_above_target_and_accepts_at_once_is_neither_anchored_nor_rejecting() -> None:
    episode = played(BIKE, [("buyer", "OFFER $180"), ("seller", "Fine.\nOFFER $185"), ("buyer", "ACCEPT")])
    b = episode_behaviour(episode)
    assert not b.anchored and b.opening_ratio == pytest.approx(180 / 140)
    assert (b.rejecting_turns, b.commitment_turns, b.leaked) == (0, 0, False)
    summary = summarise_behaviour([episode, played(BIKE, [("buyer", "OFFER $100"), ("seller", "QUIT")])])
    assert summary.anchored_rate.mean == 0.5 and summary.leak_rate.mean == 0.0
    assert summary.over_conceding_rate == 1.0 and summary.agreements == 1  # only the first has a deal
    ((turn, opening),) = summary.concession_curve  # only openings: the second own turn accepted
    assert turn == 0 and opening.n == 2 and opening.mean == pytest.approx(((200 - 180) / 60 + 1.0) / 2)


def test_a_craigslist_deal_over_concedes_by_its_price_against_the_seats_own_reference() -> None:
    """The buyer over-concedes above its target, whatever the reward (the reward runs over the seller's hidden
    corridor, below 1 for any price above the seller's reservation); the seller at or below its reservation."""
    lamp = CraigslistScenario(
        "t:lamp", "lamp", "Lamp", ("a",), listing_price=200.0, buyer_target=160.0, seller_reservation=120.0
    )
    below_target = played(lamp, [("buyer", "OFFER $150"), ("seller", "ACCEPT")])
    assert below_target.reward < 1.0 and behaviour.over_conceded(below_target) is False
    above_target = played(lamp, [("buyer", "OFFER $170"), ("seller", "ACCEPT")])
    assert behaviour.over_conceded(above_target) is True
    assert behaviour.over_conceded(played(lamp, [("buyer", "OFFER $150"), ("seller", "QUIT")])) is None
    seller = dataclasses.replace(below_target, seat="seller", utility=150.0 - 120.0)
    assert behaviour.over_conceded(seller) is False
    assert behaviour.over_conceded(dataclasses.replace(seller, utility=0.0)) is True  # sold at its reservation


def test_marketplace_over_conceding_is_a_deal_beyond_the_reservation() -> None:
    scenario = MarketplaceScenario("t", "Pens", 14.0, buyer_reservation=13.0, seller_reservation=11.0)
    env = make("marketplace-v0")
    env.reset(scenario, 0)
    for seat, text in [("buyer", "OFFER $13.50"), ("seller", "ACCEPT")]:
        env.step(Action(seat, RAW_TEXT, text))
    role = env.outcome().roles["buyer"]
    episode = RecordedEpisode(policy="p", env_id="marketplace-v0", episode_id="e", scenario=scenario, seat="buyer", reward=role.reward, utility=role.utility, agreement=True, leaked=(),
                              turns=env.transcript)  # fmt: skip
    assert behaviour.over_conceded(episode) is True
    assert episode_behaviour(episode).opening_ratio == pytest.approx(13.5 / 13.0)
    assert not episode_behaviour(episode).anchored  # a buyer opening above its own maximum


@pytest.mark.parametrize(
    "text, committed",
    [
        ("This is my final offer.", True),
        ("Take it or leave it: $120.", True),
        ("I can't go any lower than that.", True),
        ("That's the best I can do.", True),
        ("The price is non-negotiable.", True),
        ("Let's find a price that works for both of us.", False),
        ("Finally, an offer I like!", False),
    ],
)
def test_the_commitment_lexicon(text: str, committed: bool) -> None:
    assert uses_commitment(text) is committed


def test_behaviour_is_read_back_from_the_tables_and_plotted(tmp_path: Path) -> None:
    store = TableStore(tmp_path / "tables")
    direct = {}
    for name in ("teacher", "conceder"):
        make_policy = make_teacher if name == "teacher" else (lambda s: make_code_agent("conceder", s))
        for env_id in ("craigslist-v0", "calendar-v0"):
            result = evaluate_policy(EvaluationPlan(env_id, 3, seat=None), make_policy)
            store_evaluation(store, result, f"{env_id}:{name}", f"run-{name}-{env_id}")
            direct[(env_id, name)] = summarise_behaviour(behaviour.episodes_from_result(result, f"{env_id}:{name}"))
    report = behaviour.behaviour_report(store)
    assert report.episodes == 4 * 3 * 3  # 4 evaluations x 3 scenarios x 3 counterparts
    for summary in report.summaries:
        expected = direct[(summary.env_id, summary.policy.split(":")[1])]
        assert summary.as_dict() == expected.as_dict()  # the tables hold everything the metrics need
    conceder = next(s for s in report.summaries if s.policy == "craigslist-v0:conceder")
    curve = [e.mean for _, e in conceder.concession_curve]
    assert curve[0] > curve[-1]  # a conceder concedes
    assert "| craigslist-v0 | craigslist-v0:teacher |" in report.markdown()
    plots = behaviour.behaviour_plots(report)
    assert set(plots) == {
        f"{kind}-{env}.png" for kind in ("concession", "behaviour") for env in ("calendar-v0", "craigslist-v0")
    }
    assert all(png.startswith(b"\x89PNG") for png in plots.values())
    # A newer evaluation of the same policy replaces the older one in the report.
    result = evaluate_policy(EvaluationPlan("craigslist-v0", 2, seat="buyer"), make_teacher)
    store_evaluation(store, result, "craigslist-v0:teacher", "run-teacher-newer")
    newer = behaviour.behaviour_report(store)
    assert next(s for s in newer.summaries if s.policy == "craigslist-v0:teacher").episodes == 2 * 3


@pytest.mark.parametrize("env_id", red_team.RED_TEAM_DOMAINS)
def test_the_red_team_finds_the_policy_that_leaks_with_a_paired_interval(env_id: str) -> None:
    scenarios = red_team.red_team_scenarios(env_id, 4)
    assert len(scenarios) == 4
    assert all(getattr(s, "adversary", None) or getattr(s, "adversarial", False) for s in scenarios)
    policies = {
        "teacher": make_teacher,
        "accommodating": lambda seed: make_code_agent("accommodating", seed),  # states its private facts
    }
    summary, results = red_team.red_team_domain(env_id, scenarios, policies)
    assert summary.leak_rate["teacher"].mean == 0.0
    assert summary.leak_rate["accommodating"].mean == 1.0
    difference = summary.leak_difference["accommodating - teacher"]
    assert difference.n == 4 and difference.ci_low > 0
    # The extractor asked, pressured and tricked: its probes are in the transcripts.
    texts = [e.text for r in results["teacher"] for ep in r.episodes for e in ep.transcript if e.agent_id != r.seat]
    assert any("?" in t for t in texts)
    report = red_team.RedTeamReport((summary,))
    assert f"| {env_id} | accommodating | 1.00" in report.markdown()


def test_without_the_shared_data_the_red_team_attacks_generated_scenarios(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(red_team, "dataset_path", lambda *parts: None)
    for env_id in red_team.RED_TEAM_DOMAINS:
        scenarios = red_team.red_team_scenarios(env_id, 3)
        assert all(s.scenario_id.startswith("heldout:") for s in scenarios)
        assert all(s.adversary_instructions == red_team.FALLBACK_INSTRUCTIONS for s in scenarios)
    # Every generated calendar has a secret event to protect (a generated one holds one only by chance).
    calendars = red_team.red_team_scenarios("calendar-v0", 8)
    assert len(calendars) == 8 and all(any(e.secret for e in s.assistant_calendar) for s in calendars)
    seats = {red_team.principal_seat("marketplace-v0", s) for s in red_team.red_team_scenarios("marketplace-v0", 4)}
    assert seats == {"buyer", "seller"}
    assert make_extractor(1).describe() == "extractor(seed=1)"
