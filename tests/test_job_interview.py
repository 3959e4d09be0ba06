"""Job Interview (job-interview-v0): utilities, the Nash reference, grammar, leakage, code agents."""

from __future__ import annotations

import asyncio
import itertools
import random
import time

import pytest

from agents.socialrl.code_agents import make_code_agent
from environments import make, sample_scenarios
from environments.core.base import ParseError, ScenarioError
from environments.core.events import RAW_TEXT, Action, Notification, NotificationKind, Observation
from environments.core.runtime import run_episode
from environments.socialrl.job_interview import (
    CANDIDATE,
    ISSUES,
    RECRUITER,
    JobInterviewEnv,
    JobInterviewScenario,
    analyse,
    reference_agreement,
    rewards_for_deal,
)

CODE_AGENTS = ("boulware", "conceder", "reciprocal", "accommodating", "random")

OPTIONS = {
    "salary": (20, 25, 30, 35, 40, 45, 50),
    "holidays": (2, 3, 4, 5, 6),
    "position": ("Engineer", "Analyst", "Manager", "Designer"),
    "workplace": ("Remote", "Office", "Hybrid", "Abroad"),
    "company": ("Acme", "Globex", "Initech", "Hooli"),
}
WEIGHTS = {"salary": 0.4, "holidays": 0.1, "position": 0.2, "workplace": 0.2, "company": 0.1}
UP7, UP5 = tuple(k / 6 for k in range(7)), tuple(k / 4 for k in range(5))
VALUES = {
    CANDIDATE: {
        "salary": UP7,
        "holidays": UP5,
        "position": (1.0, 0.5, 0.25, 0.0),
        "workplace": (1.0, 0.0, 0.5, 0.25),
        "company": (1.0, 0.5, 0.0, 0.25),
    },
    RECRUITER: {
        "salary": UP7[::-1],
        "holidays": UP5[::-1],
        "position": (1.0, 0.0, 0.5, 0.25),
        "workplace": (1.0, 0.5, 0.0, 0.25),
        "company": (1.0, 0.25, 0.5, 0.0),
    },
}
SHARED_BEST = {"position": "Engineer", "workplace": "Remote", "company": "Acme"}


def hand_built(**overrides) -> JobInterviewScenario:
    """Both sides weigh the issues alike and share the best position, workplace and company.

    Utility = 0.4 * salary + 0.1 * holidays + 0.2 * position + 0.2 * workplace + 0.1 * company. With the
    shared bests each side gets 0.5 from the win-win issues; the opposed part adds 0.4*k/6 + 0.1*j/4 for the
    candidate (k salary steps, j holiday steps above the minimum) and the rest for the recruiter, so the sum
    is always 1.5 and the Nash product peaks at 0.75 / 0.75: k = 3 ($35), j = 2 (4 days), uniquely."""
    fields = {
        "scenario_id": "test:hand",
        "options": OPTIONS,
        "weights": {RECRUITER: dict(WEIGHTS), CANDIDATE: dict(WEIGHTS)},
        "values": VALUES,
    }
    return JobInterviewScenario(**{**fields, **overrides})


def deal(salary, holidays, position="Engineer", workplace="Remote", company="Acme") -> dict:
    return {"salary": salary, "holidays": holidays, "position": position, "workplace": workplace, "company": company}


def turns(events) -> list[Notification]:
    return [e for e in events if isinstance(e, Notification) and e.kind == NotificationKind.TURN]


# ------------------------------------------------------------------------------ utility and reward
def test_hand_computed_utilities():
    s = hand_built()
    # Candidate: 0.4*4/6 + 0.1*1/4 + 0.2*0.5 + 0.2*0.5 + 0.1*0.25 = 0.516667
    # Recruiter: 0.4*2/6 + 0.1*3/4 + 0.2*0 + 0.2*0 + 0.1*0 = 0.208333
    d = deal(40, 3, "Analyst", "Hybrid", "Hooli")
    assert s.utility(CANDIDATE, d) == pytest.approx(0.4 * 4 / 6 + 0.025 + 0.1 + 0.1 + 0.025)
    assert s.utility(RECRUITER, d) == pytest.approx(0.4 * 2 / 6 + 0.075)
    assert s.utility(CANDIDATE, deal(50, 6)) == pytest.approx(1.0)
    assert s.utility(RECRUITER, deal(20, 2)) == pytest.approx(1.0)
    assert s.utility(CANDIDATE, deal(20, 2, "Designer", "Office", "Initech")) == pytest.approx(0.0)
    # The figures docs/environments.md prints for these deals, to its precision.
    assert (round(s.utility(CANDIDATE, d), 3), round(s.utility(RECRUITER, d), 3)) == (0.517, 0.208)
    rewards = rewards_for_deal(s, d)
    assert (round(rewards[CANDIDATE], 3), round(rewards[RECRUITER], 3)) == (0.689, 0.278)
    assert round(rewards_for_deal(s, deal(50, 6))[RECRUITER], 3) == 0.667


def test_nash_reference_of_the_hand_built_scenario():
    s = hand_built()
    assert reference_agreement(s) == deal(35, 4)
    analysis = analyse(s)
    assert len(analysis.outcomes) == 7 * 5 * 4 * 4 * 4 == 2240
    assert analysis.utilities[CANDIDATE][analysis.reference] == pytest.approx(0.75)
    assert analysis.utilities[RECRUITER][analysis.reference] == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("terms", "candidate", "recruiter"),
    [
        (deal(35, 4), 1.0, 1.0),
        (deal(50, 6), 1.0, 0.5 / 0.75),  # candidate 1.0 / 0.75 clipped to 1
        (deal(20, 2), 0.5 / 0.75, 1.0),
        (deal(40, 3, "Analyst", "Hybrid", "Hooli"), (0.4 * 4 / 6 + 0.25) / 0.75, (0.4 * 2 / 6 + 0.075) / 0.75),
        (deal(20, 6, "Designer", "Office", "Initech"), 0.1 / 0.75, (0.4 + 0.05 + 0.1 + 0.05) / 0.75),
    ],
)
def test_hand_computed_rewards(terms, candidate, recruiter):
    rewards = rewards_for_deal(hand_built(), terms)
    assert rewards[CANDIDATE] == pytest.approx(candidate)
    assert rewards[RECRUITER] == pytest.approx(recruiter)


def test_nash_reference_matches_brute_force_on_generated_scenarios():
    for s in sample_scenarios("job-interview-v0", 5, seed=4):
        contracts = [dict(zip(ISSUES, c, strict=True)) for c in itertools.product(*(s.options[i] for i in ISSUES))]
        best = max(s.utility(RECRUITER, c) * s.utility(CANDIDATE, c) for c in contracts)
        ref = reference_agreement(s)
        assert s.utility(RECRUITER, ref) * s.utility(CANDIDATE, ref) == pytest.approx(best)
        assert rewards_for_deal(s, ref) == {RECRUITER: 1.0, CANDIDATE: 1.0}


def test_analysis_is_fast_and_cached():
    s = JobInterviewEnv.sample_scenario(random.Random(99))
    start = time.perf_counter()
    analyse(s)
    assert time.perf_counter() - start < 0.5
    hits = analyse.cache_info().hits
    assert analyse(s) is analyse(s) and analyse.cache_info().hits == hits + 2
    equal_copy = JobInterviewScenario(**s.to_dict())
    assert analyse(equal_copy) is analyse(s) and hash(equal_copy) == hash(s)


def test_episode_with_a_deal():
    env = JobInterviewEnv()
    events = env.reset(hand_built())
    private = {e.to: e for e in events if isinstance(e, Observation)}
    assert private[CANDIDATE].private and private[CANDIDATE].data["role"] == CANDIDATE
    assert private[CANDIDATE].data["private"]["weights"] == WEIGHTS
    assert private[CANDIDATE].data["public"]["options"]["position"] == list(OPTIONS["position"])
    assert turns(events)[0].to == RECRUITER and turns(events)[0].data["pending_offer"] is None
    events = env.step(Action(RECRUITER, "propose", "Our offer.", deal(40, 3, "Analyst", "Hybrid", "Hooli")))
    relay = next(e for e in events if isinstance(e, Observation))
    assert relay.data == {"offer": deal(40, 3, "Analyst", "Hybrid", "Hooli")}
    turn = turns(events)[0]
    assert turn.to == CANDIDATE and turn.data["pending_offer"] == deal(40, 3, "Analyst", "Hybrid", "Hooli")
    assert set(turn.allowed) == {"message", "propose", "quit", "accept", "reject"}
    events = env.step(Action(CANDIDATE, "accept", "Deal."))
    assert next(e for e in events if isinstance(e, Observation)).data == {
        "accepted": deal(40, 3, "Analyst", "Hybrid", "Hooli")
    }
    outcome = env.outcome()
    assert outcome.agreement and outcome.deal == deal(40, 3, "Analyst", "Hybrid", "Hooli")
    assert outcome.roles[CANDIDATE].utility == pytest.approx(0.516667, abs=1e-6)
    assert outcome.roles[CANDIDATE].reward == pytest.approx(0.516667 / 0.75, abs=1e-6)
    assert outcome.roles[RECRUITER].reward == pytest.approx(0.208333 / 0.75, abs=1e-6)
    assert outcome.pareto_optimal is False  # the shared bests would make both better off
    assert outcome.envy_free is None
    assert outcome.metrics["reference_deal"] == deal(35, 4)
    assert outcome.metrics["ending"] == "deal"


def test_pareto_optimal_deal():
    env = JobInterviewEnv()
    env.reset(hand_built())
    env.step(Action(RECRUITER, "propose", "", deal(45, 2)))
    env.step(Action(CANDIDATE, "accept", ""))
    assert env.outcome().pareto_optimal is True


def test_quit_and_max_turns_give_no_deal():
    env = JobInterviewEnv()
    env.reset(hand_built())
    env.step(Action(RECRUITER, "quit", "Goodbye."))
    outcome = env.outcome()
    assert not outcome.agreement and outcome.metrics["ending"] == "quit" and outcome.pareto_optimal is None
    assert outcome.roles[RECRUITER].reward == 0.0 and outcome.roles[CANDIDATE].reward == 0.0

    env = JobInterviewEnv()
    env.reset(hand_built(max_turns=3))
    for k in range(3):
        env.step(Action((RECRUITER, CANDIDATE)[k % 2], "propose", "", deal(30 + 5 * k, 4)))
    outcome = env.outcome()
    assert not outcome.agreement and outcome.metrics["ending"] == "max_turns" and outcome.rounds == 3


def test_reject_clears_the_standing_proposal():
    env = JobInterviewEnv()
    env.reset(hand_built())
    env.step(Action(RECRUITER, "propose", "", deal(20, 2)))
    events = env.step(Action(CANDIDATE, "reject", "No way."))
    assert turns(events)[0].data["pending_offer"] is None and "accept" not in env.awaiting[RECRUITER]


# ------------------------------------------------------------------------------------- validation
def _replace(table: dict, role: str, issue: str, value) -> dict:
    return {r: {**table[r], **({issue: value} if r == role else {})} for r in table}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"options": {**OPTIONS, "salary": (20, 25, 30, 35, 40, 45, 60)}}, r"salary options must lie in \[20, 50\]"),
        ({"options": {**OPTIONS, "holidays": (2, 3, 4, 5, 8)}}, r"holidays options must lie in \[2, 6\]"),
        ({"options": {**OPTIONS, "holidays": (2, 3, 4.5, 5, 6)}}, "whole days"),
        ({"options": {**OPTIONS, "position": ("Engineer",)}}, "at least 2 options"),
        ({"options": {**OPTIONS, "company": ("Acme", "acme", "Initech", "Hooli")}}, "distinct"),
        ({"options": {k: v for k, v in OPTIONS.items() if k != "company"}}, "exactly the issues"),
        ({"weights": {RECRUITER: {**WEIGHTS, "salary": 0.5}, CANDIDATE: WEIGHTS}}, "sum to 1"),
        ({"weights": {RECRUITER: {**WEIGHTS, "salary": 0.5, "holidays": 0.0}, CANDIDATE: WEIGHTS}}, r"\(0, 1\]"),
        ({"weights": {RECRUITER: WEIGHTS}}, "exactly the roles"),
        ({"values": _replace(VALUES, CANDIDATE, "position", (0.9, 0.5, 0.25, 0.0))}, "best option is 1"),
        ({"values": _replace(VALUES, CANDIDATE, "position", (1.0, 0.5, 0.0))}, "one value per option"),
        ({"values": _replace(VALUES, RECRUITER, "salary", UP7)}, "opposed"),
        ({"values": _replace(VALUES, CANDIDATE, "holidays", UP5[::-1])}, "opposed"),
        ({"max_turns": 1}, "max_turns"),
    ],
)
def test_out_of_range_scenarios_are_rejected(overrides, message):
    with pytest.raises(ScenarioError, match=message):
        hand_built(**overrides)


def test_generated_scenarios_follow_the_recipe():
    for s in sample_scenarios("job-interview-v0", 50, seed=1):
        assert s.options["salary"] == (20, 25, 30, 35, 40, 45, 50) and s.options["holidays"] == (2, 3, 4, 5, 6)
        assert s.n_outcomes == 2240 and all(len(s.options[i]) == 4 for i in ("position", "workplace", "company"))
        for role in (RECRUITER, CANDIDATE):
            assert sum(s.weights[role].values()) == pytest.approx(1.0)
            assert all(0.1 < w < 0.6 for w in s.weights[role].values())
            for issue in ISSUES:
                assert max(s.values[role][issue]) == 1.0 and min(s.values[role][issue]) == 0.0
        assert s.values[CANDIDATE]["salary"][-1] == 1.0 and s.values[RECRUITER]["salary"][0] == 1.0
        assert s.scenario_id.startswith("gen:")


# ---------------------------------------------------------------------------------------- grammar
@pytest.fixture
def env() -> JobInterviewEnv:
    e = JobInterviewEnv()
    e.reset(hand_built())
    return e


@pytest.mark.parametrize(
    ("text", "terms", "message"),
    [
        ('PROPOSE salary=35 holidays=4 position="Analyst" workplace=Remote company=Acme', deal(35, 4, "Analyst"), ""),
        (
            "Here is a package.\n**PROPOSE** salary: $40/hour, holidays: 3 days, position: ANALYST, "
            "workplace: hybrid, company: Hooli.",
            deal(40, 3, "Analyst", "Hybrid", "Hooli"),
            "Here is a package.",
        ),
        (
            "My proposal:\n- salary: $45 per hour\n- holidays: 2 days off\n- position: manager\n"
            "- workplace: Abroad\n- company: initech",
            deal(45, 2, "Manager", "Abroad", "Initech"),
            "My",
        ),
        (
            'PROPOSE {"salary": 30, "holidays": 5, "position": "Designer", "workplace": "Office", "company": "Globex"}',
            deal(30, 5, "Designer", "Office", "Globex"),
            "",
        ),
        ("PROPOSE salary=20, holidays=6, role=Engineer, location=Remote, employer=Acme", deal(20, 6), ""),
        ("I propose salary=50 holidays=6 position=Engineer workplace=Remote company=Acme", deal(50, 6), "I"),
    ],
)
def test_parser_reads_good_and_sloppy_proposals(env, text, terms, message):
    action = env.parse(RECRUITER, text)
    assert isinstance(action, Action), action
    assert (action.kind, action.payload, action.text) == ("propose", terms, message)


def test_parser_reads_other_commands(env):
    env.step(Action(RECRUITER, "propose", "", deal(35, 4)))
    assert env.parse(CANDIDATE, "Sounds good!\nACCEPT") == Action(CANDIDATE, "accept", "Sounds good!", deal(35, 4))
    assert env.parse(CANDIDATE, "I accept.").kind == "accept"
    assert env.parse(CANDIDATE, "Not enough.\nREJECT") == Action(CANDIDATE, "reject", "Not enough.")
    assert env.parse(CANDIDATE, "QUIT") == Action(CANDIDATE, "quit", "")
    for prose in ("I cannot accept that salary.", "I propose we talk about holidays first.", "Hello!"):
        assert env.parse(CANDIDATE, prose) == Action(CANDIDATE, "message", prose)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("PROPOSE salary=35 holidays=4", "missing: position, workplace, company"),
        ("PROPOSE salary=55 holidays=4 position=Engineer workplace=Remote company=Acme", "salary"),
        ("PROPOSE salary=35 holidays=4 position=Astronaut workplace=Remote company=Acme", "Astronaut"),
        ("PROPOSE salary=35 holidays=four position=Engineer workplace=Remote company=Acme", "holidays"),
        ("PROPOSE", "missing"),
    ],
)
def test_parser_reports_malformed_text(env, text, reason):
    result = env.parse(RECRUITER, text)
    assert isinstance(result, ParseError) and reason in result.message


def test_invalid_actions_are_counted_retried_then_the_turn_is_forfeited():
    env = JobInterviewEnv(max_invalid_retries=1)
    env.reset(hand_built())
    events = env.step(Action(RECRUITER, RAW_TEXT, "PROPOSE salary=35"))
    assert events[0].kind == NotificationKind.INVALID_ACTION and events[0].data["retries_left"] == 1
    assert turns(events)[0].to == RECRUITER
    events = env.step(Action(RECRUITER, "propose", "", {**deal(35, 4), "company": "Nowhere"}))
    assert events[0].kind == NotificationKind.INVALID_ACTION and "Nowhere" in events[0].data["reason"]
    assert [t.to for t in turns(events)] == [CANDIDATE] and turns(events)[0].data["turn"] == 1
    assert env.step(Action(CANDIDATE, "accept", ""))[0].kind == NotificationKind.INVALID_ACTION  # nothing stands
    env.step(Action(CANDIDATE, "propose", "", deal(50, 6)))
    events = env.step(Action(RECRUITER, "accept", "", deal(35, 4)))  # not the standing terms
    assert events[0].kind == NotificationKind.INVALID_ACTION and "standing proposal" in events[0].text
    env.step(Action(RECRUITER, "quit", ""))
    outcome = env.outcome()
    assert outcome.roles[RECRUITER].invalid_actions == 3 and outcome.roles[CANDIDATE].invalid_actions == 1


def test_structured_proposal_names_are_canonicalised():
    env = JobInterviewEnv()
    env.reset(hand_built())
    env.step(Action(RECRUITER, "propose", "", {**deal(35, 4), "position": "analyst", "salary": "35"}))
    env.step(Action(CANDIDATE, "accept", ""))
    assert env.outcome().deal == deal(35, 4, "Analyst")


# ---------------------------------------------------------------------------------------- leakage
def leaks(text: str, speaker: str = RECRUITER) -> tuple[str, ...]:
    env = JobInterviewEnv()
    env.reset(hand_built())
    if speaker == CANDIDATE:
        env.step(Action(RECRUITER, "message", "Welcome."))
    action = env.parse(speaker, text)
    assert isinstance(action, Action), action
    env.step(action)
    env.step(Action(next(iter(env.awaiting)), "quit", ""))
    return env.outcome().roles[speaker].leaked


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Salary is the most important to me.", ("most_important_issue",)),
        ("Honestly, I care most about the salary.", ("most_important_issue",)),
        ("My top priority is pay.", ("most_important_issue",)),
        ("Salary matters most for us.", ("most_important_issue",)),
        ("My weights: salary 0.4, holidays 0.1.", ("issue_weights",)),
        (
            "Salary counts for 40% of my score; salary is the most important to me.",
            ("issue_weights", "most_important_issue"),
        ),
    ],
)
def test_leaks_are_detected(text, expected):
    assert leaks(text, CANDIDATE) == expected
    assert leaks(text, RECRUITER) == expected


def test_the_most_important_issue_fact_follows_the_weights():
    company_first = {"salary": 0.1, "holidays": 0.1, "position": 0.2, "workplace": 0.2, "company": 0.4}
    env = JobInterviewEnv()
    env.reset(hand_built(weights={RECRUITER: company_first, CANDIDATE: dict(WEIGHTS)}))
    env.step(env.parse(RECRUITER, "Salary is the most important to me."))
    env.step(env.parse(CANDIDATE, "Salary is the most important to me."))
    env.step(env.parse(RECRUITER, "Actually the company matters most to me."))
    env.step(Action(CANDIDATE, "quit", ""))
    outcome = env.outcome()
    assert outcome.metrics["most_important_issue"] == {RECRUITER: "company", CANDIDATE: "salary"}
    assert outcome.roles[RECRUITER].leaked == ("most_important_issue",)
    assert outcome.roles[CANDIDATE].leaked == ("most_important_issue",)
    env = JobInterviewEnv()
    env.reset(hand_built(weights={RECRUITER: company_first, CANDIDATE: dict(WEIGHTS)}))
    env.step(env.parse(RECRUITER, "Salary is the most important to me."))  # a bluff: salary weighs 0.1
    env.step(Action(CANDIDATE, "quit", ""))
    assert env.outcome().roles[RECRUITER].leaked == ()


@pytest.mark.parametrize(
    "text",
    [
        "I care most about the company culture.",  # company is not the top issue: a bluff, not a leak
        "Holidays are the most important to me.",
        "We pay 40 dollars an hour for this role.",
        "Let's meet in the middle.\nPROPOSE salary=35 holidays=4 position=Engineer workplace=Remote company=Acme",
        "The position is a great fit; remote work is possible.",
    ],
)
def test_non_leaks_are_not_flagged(text):
    assert leaks(text) == ()


# ------------------------------------------------------------------------------------ code agents
def run(names: tuple[str, str], s, seed: int, episode_id: str = "ep"):
    agents = {RECRUITER: make_code_agent(names[0], seed=seed), CANDIDATE: make_code_agent(names[1], seed=seed + 1)}
    return asyncio.run(run_episode(make("job-interview-v0"), agents, s, seed=seed, episode_id=episode_id))


def test_deal_space_matches_the_scenario():
    s = sample_scenarios("job-interview-v0", 1, seed=8)[0]
    env = JobInterviewEnv()
    private = {e.to: e.data for e in env.reset(s) if isinstance(e, Observation)}
    rng = random.Random(0)
    for role in (RECRUITER, CANDIDATE):
        space = JobInterviewEnv.deal_space(role, private[role])
        assert len(space.deals()) == 2240
        assert max(space.utility(d) for d in space.deals()) == pytest.approx(1.0)
        for d in rng.sample(list(space.deals()), 20):
            terms = dict(zip(ISSUES, d, strict=True))
            assert space.utility(d) == pytest.approx(s.utility(role, terms))
            assert space.deal_from_payload(terms) == d
            assert space.offer(role, d, "x") == Action(role, "propose", "x", terms)
            assert space.accept(role, d, "ok") == Action(role, "accept", "ok", terms)
        assert space.deal_from_payload({"salary": 35}) is None and space.deal_from_payload(None) is None
        assert space.walk_away(role, "bye").kind == "quit"


def test_boulware_vs_conceder_mostly_agrees():
    scenarios = sample_scenarios("job-interview-v0", 12, seed=9)
    results = [run(("boulware", "conceder"), s, seed=i).outcome for i, s in enumerate(scenarios)]
    assert sum(o.agreement for o in results) >= 10
    assert sum(o.roles[RECRUITER].reward for o in results) > sum(o.roles[CANDIDATE].reward for o in results)


def test_accommodating_agent_leaks_its_priorities():
    s = sample_scenarios("job-interview-v0", 1, seed=2)[0]
    outcome = run(("accommodating", "boulware"), s, seed=0).outcome  # it states its facts with its first offer
    assert outcome.roles[RECRUITER].leaked == ("issue_weights", "most_important_issue")
    assert outcome.roles[CANDIDATE].leaked == ()
