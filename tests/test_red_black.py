"""Tests of the YOAO Red-Black game, its frames, scripted opponents, mute wrapper and majority follower."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from agents.yoao.red_black_strategies import (
    PAPER_OPPONENTS,
    STRATEGIES,
    Exploitation,
    MajorityFollower,
    MuteWrapper,
    Recovery,
    StrategyAgent,
    StrategySpec,
    make_strategy_team,
    planned_sequence,
)
from environments.core import registry
from environments.core.base import ActionSpec, Outcome, ScenarioError
from environments.core.events import RAW_TEXT, Action, Event, Notification, NotificationKind, Observation
from environments.core.runtime import Agent, EpisodeResult, run_episode
from environments.yoao.red_black import (
    BLACK,
    RED,
    SILENT,
    FrameError,
    RedBlackEnv,
    RedBlackScenario,
    list_frames,
    load_frame,
    load_frame_file,
    team_choice,
)

B, R = BLACK, RED
TRAIN = [
    "agi_safety",
    "baseline",
    "climate_cooperation",
    "election_crisis",
    "pandemic_vaccines",
    "standards_coordination",
]


# ------------------------------------------------------------------------------------------- helpers
class TextAgent:
    """Answers every turn with fixed raw text, parsed by the environment."""

    def __init__(self, opinion: str = "I vote BLACK.", vote: str = "VOTE: BLACK") -> None:
        self.opinion, self.vote, self.agent_id = opinion, vote, ""

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id = agent_id

    async def observe(self, event: Event) -> None:
        return None

    async def act(self, request: Notification) -> Action:
        return Action(self.agent_id, RAW_TEXT, self.vote if "vote" in request.allowed else self.opinion)


def scenario(**kwargs: object) -> RedBlackScenario:
    return RedBlackScenario(scenario_id="test:0", **kwargs)  # type: ignore[arg-type]


def run(agents: Mapping[str, Agent], sc: RedBlackScenario, seed: int = 0, inboxes: bool = False) -> EpisodeResult:
    return asyncio.run(run_episode(RedBlackEnv(), agents, sc, seed=seed, turn_timeout=5, keep_inboxes=inboxes))


def teams(a: Mapping[str, Agent], b: Mapping[str, Agent]) -> dict[str, Agent]:
    return {**a, **b}


def strategy_game(name_a: str, name_b: str, seed: int = 0, **kwargs: object) -> EpisodeResult:
    sc = scenario(**kwargs)
    return run(
        teams(make_strategy_team(name_a, sc.seats("A"), seed), make_strategy_team(name_b, sc.seats("B"), seed)), sc
    )


def play(env: RedBlackEnv, sc: RedBlackScenario, votes: Sequence[Mapping[str, str]]) -> Outcome:
    """Step the environment directly: every seat says something, then votes votes[round][seat]."""
    env.reset(sc)
    for round_votes in votes:
        for seat in sc.seats():
            env.step(Action(seat, "opinion", f"{seat} thinks."))
        for seat in sc.seats():
            env.step(Action(seat, "vote", "", {"choice": round_votes[seat]}))
    return env.outcome()


def team_votes(sc: RedBlackScenario, a: Sequence[str], b: Sequence[str]) -> list[dict[str, str]]:
    """Every seat of a team votes its team's choice of the round."""
    return [
        {**dict.fromkeys(sc.seats("A"), ca), **dict.fromkeys(sc.seats("B"), cb)} for ca, cb in zip(a, b, strict=True)
    ]


def seq(text: str) -> list[str]:
    return [B if c == "B" else R for c in text.replace(" ", "")]


# ----------------------------------------------------------------------------------------- payoffs
def test_all_black_totals_150() -> None:
    sc = scenario()
    outcome = play(RedBlackEnv(), sc, team_votes(sc, [B] * 10, [B] * 10))
    m = outcome.metrics
    assert (m["score_A"], m["score_B"], m["welfare"]) == (75, 75, 150)
    assert m["welfare_normalised"] == pytest.approx(1.0)
    assert m["cooperation_rate_A"] == m["cooperation_rate_B"] == 1.0
    assert outcome.agreement is True
    assert [r.reward for r in outcome.roles.values()] == pytest.approx([0.75] * 10)
    assert outcome.roles["B3"].utility == 75
    assert outcome.pareto_optimal is None and outcome.envy_free is None


def test_all_red_totals_minus_150() -> None:
    sc = scenario()
    outcome = play(RedBlackEnv(), sc, team_votes(sc, [R] * 10, [R] * 10))
    assert (outcome.metrics["score_A"], outcome.metrics["score_B"], outcome.metrics["welfare"]) == (-75, -75, -150)
    assert outcome.agreement is False
    assert outcome.roles["A0"].reward == pytest.approx(0.25)
    assert outcome.metrics["cooperation_rate"] == 0.0


def test_hand_computed_mixed_game() -> None:
    # A defects in the multiplied rounds 5, 8, 10 against an always-cooperating B:
    # A: 4*3 + 6*3 + 2*3 + 6*5 + 3 + 6*10 = 129; B: 4*3 - 6*3 + 2*3 - 6*5 + 3 - 6*10 = -87.
    sc = scenario()
    outcome = play(RedBlackEnv(), sc, team_votes(sc, seq("BBBBRBBRBR"), [B] * 10))
    m = outcome.metrics
    assert (m["score_A"], m["score_B"], m["welfare"]) == (129, -87, 42)
    assert outcome.roles["A2"].reward == pytest.approx((129 + 150) / 300)
    assert outcome.roles["B2"].reward == pytest.approx((-87 + 150) / 300)
    # As docs/environments.md prints them: rewards 0.93 and 0.21, normalised welfare 42 / 150 = 0.28.
    assert (round(outcome.roles["A2"].reward, 2), round(outcome.roles["B2"].reward, 2)) == (0.93, 0.21)
    assert round(m["welfare_normalised"], 2) == 0.28
    assert m["cooperation_rate_A"] == pytest.approx(0.7)
    assert [e["points"]["A"] for e in m["round_log"]] == [3, 3, 3, 3, 18, 3, 3, 30, 3, 60]
    assert outcome.agreement is True


def test_multipliers_default_and_custom() -> None:
    sc = scenario()
    assert [sc.multiplier(r) for r in range(1, 11)] == [1, 1, 1, 1, 3, 1, 1, 5, 1, 10]
    assert (sc.total_multiplier, sc.max_team_score) == (25, 150)
    custom = scenario(rounds=3, multipliers={"2": 4})
    assert custom.multipliers == {2: 4}
    outcome = play(RedBlackEnv(), custom, team_votes(custom, [B, R, R], [B, B, R]))
    # round 1: +3/+3; round 2 (x4): +24/-24; round 3: -3/-3. Reward range is +-6*6 = 36.
    assert (outcome.metrics["score_A"], outcome.metrics["score_B"]) == (24, -24)
    assert outcome.roles["A0"].reward == pytest.approx((24 + 36) / 72)


# -------------------------------------------------------------------------------- majority and ties
def test_team_choice_majority_and_tie_rule() -> None:
    assert team_choice([R, R, R, B, B]) == (R, False)
    assert team_choice([B, B, B, R, R]) == (B, False)
    assert team_choice([R, R, B, B]) == (B, True)
    assert team_choice([R, None, None, B, None]) == (B, True)
    assert team_choice([None, None]) == (B, True)
    assert team_choice([R, None, None]) == (R, False)


def test_majority_and_tie_in_the_environment() -> None:
    sc = scenario(team_size=4, rounds=2, multipliers={})
    votes = [
        {"A0": R, "A1": R, "A2": B, "A3": B, "B0": R, "B1": R, "B2": R, "B3": B},
        {"A0": R, "A1": R, "A2": R, "A3": B, "B0": B, "B1": B, "B2": B, "B3": R},
    ]
    outcome = play(RedBlackEnv(), sc, votes)
    assert outcome.metrics["team_choices"] == {"A": [B, R], "B": [R, B]}
    assert outcome.metrics["ties"] == 1
    assert outcome.metrics["round_log"][0]["tallies"]["A"] == {B: 2, R: 2, "abstain": 0}
    assert (outcome.metrics["score_A"], outcome.metrics["score_B"]) == (-6 + 6, 6 - 6)


def test_answer_order_does_not_change_results() -> None:
    sc = scenario(rounds=2, multipliers={})
    rng = random.Random(3)
    votes = [{s: rng.choice([B, R]) for s in sc.seats()} for _ in range(2)]

    def events_by_seat(order: Sequence[str]) -> tuple[dict[str, list[Event]], Outcome]:
        env, seen = RedBlackEnv(), {s: [] for s in sc.seats()}
        for e in env.reset(sc):
            seen[e.to].append(e)
        for round_votes in votes:
            for seat in order:
                for e in env.step(Action(seat, "opinion", f"{seat} says hi", {"choice": round_votes[seat]})):
                    seen[e.to].append(e)
            for seat in order:
                for e in env.step(Action(seat, "vote", "", {"choice": round_votes[seat]})):
                    seen[e.to].append(e)
        return seen, env.outcome()

    forward, out_forward = events_by_seat(sc.seats())
    backward, out_backward = events_by_seat(tuple(reversed(sc.seats())))
    assert forward == backward
    assert out_forward == out_backward


# --------------------------------------------------------------------------------- scripted opponents
EXPECTED_VS_COOPERATE = {
    "always_defect": "RRRRRRRRRR",
    "early_exploiter_no_recovery": "BRRRRRRRRR",
    "defect_critical": "BBBBRBBRBR",
    "critical_exploiter": "BBBBRRRRRR",
    "late_betrayer": "BBBBBBRRRR",
    "mid_exploiter": "BBBBRRBBBB",
    "early_exploiter": "BRRRBBBBBB",
    "tit_for_tat": "BBBBBBBBBB",
    "always_cooperate": "BBBBBBBBBB",
    "mid_exploiter_conditional": "BBBBRRBBBB",
    "late_betrayer_recovery": "BBBBBBRRRB",
    "alternating": "BRBRBRBRBR",
    "forgiver": "BBBBBBBBBB",
}
REACTIVE_VS_DEFECT = {
    "tit_for_tat": "BRRRRRRRRR",
    "mid_exploiter_conditional": "BBBBRRRRRR",
    "forgiver": "BBRRRRRRRR",
}


@pytest.mark.parametrize("name", sorted(EXPECTED_VS_COOPERATE))
@pytest.mark.parametrize("opponent", ["always_cooperate", "always_defect"])
def test_strategy_sequences_against_fixed_opponents(name: str, opponent: str) -> None:
    expected = EXPECTED_VS_COOPERATE[name]
    if opponent == "always_defect":
        expected = REACTIVE_VS_DEFECT.get(name, expected)
    result = strategy_game(name, opponent)
    assert result.outcome.metrics["team_choices"]["A"] == seq(expected)
    assert result.outcome.metrics["team_choices"]["B"] == [B if opponent == "always_cooperate" else R] * 10
    histories = result.outcome.metrics["vote_histories"]
    assert all(histories[s] == seq(expected) for s in ("A0", "A1", "A2", "A3", "A4"))
    assert planned_sequence(name, [B if opponent == "always_cooperate" else R] * 10) == seq(expected)


def test_every_strategy_has_an_expected_sequence() -> None:
    assert set(PAPER_OPPONENTS) <= set(STRATEGIES)
    assert len(PAPER_OPPONENTS) == 10
    assert set(STRATEGIES) - set(EXPECTED_VS_COOPERATE) == {"mostly_cooperate"}


def test_tit_for_tat_mirrors_the_other_team() -> None:
    result = strategy_game("tit_for_tat", "alternating")
    assert result.outcome.metrics["team_choices"]["B"] == seq("BRBRBRBRBR")
    assert result.outcome.metrics["team_choices"]["A"] == seq("BBRBRBRBRB")
    forgiving = strategy_game("forgiver", "alternating")
    assert forgiving.outcome.metrics["team_choices"]["A"] == [B] * 10


def test_mostly_cooperate_is_seeded_and_team_consistent() -> None:
    first = strategy_game("mostly_cooperate", "always_defect", seed=11)
    again = strategy_game("mostly_cooperate", "always_defect", seed=11)
    choices = first.outcome.metrics["team_choices"]["A"]
    assert choices == again.outcome.metrics["team_choices"]["A"]
    assert choices == planned_sequence("mostly_cooperate", [R] * 10, seed=11)
    assert all(first.outcome.metrics["vote_histories"][s] == choices for s in ("A0", "A4"))
    many = [c for seed in range(30) for c in planned_sequence("mostly_cooperate", [B] * 10, seed=seed)]
    assert 0.7 < many.count(B) / len(many) < 0.9
    assert len({tuple(planned_sequence("mostly_cooperate", [B] * 10, seed=s)) for s in range(30)}) > 1


def test_gradual_recovery_and_overrides() -> None:
    spec = StrategySpec("probe", "test", exploitation=Exploitation.EARLY, recovery=Recovery.GRADUAL)
    assert planned_sequence(spec, [B] * 10) == seq("BRRRBRBBBB")
    fixed = StrategySpec("fixed", "test", overrides=((1, RED), (10, RED)))
    assert planned_sequence(fixed, [B] * 10) == seq("RBBBBBBBBR")
    with pytest.raises(ValueError, match="BLACK or RED"):
        StrategySpec("bad", "test", cycle=("GREEN",))


def test_scripted_agents_speak_in_the_frame_words() -> None:
    sc = scenario(frame="agi_safety", rounds=1, multipliers={})
    agents = teams(
        make_strategy_team("always_cooperate", sc.seats("A")), make_strategy_team("always_defect", sc.seats("B"))
    )
    result = run(agents, sc, inboxes=True)
    opinions = [e for e in result.inboxes["B1"] if isinstance(e, Observation) and e.sender]
    assert opinions and all(e.data["text"] == "I vote RACE." for e in opinions)
    votes = [t.text for t in result.transcript if t.kind == "vote" and t.agent_id.startswith("A")]
    assert votes == ["VOTE: SAFEGUARD"] * 5


# -------------------------------------------------------------------------------------------- frames
def test_frames_load_and_splits() -> None:
    assert list_frames("train") == TRAIN
    assert list_frames("heldout") == ["gpu_contention", "trade_war"]
    assert len(list_frames()) == 8
    for name in list_frames():
        frame = load_frame(name)
        assert frame.name == name
        assert frame.word_map()[frame.cooperate.label] == BLACK
        assert frame.word_map()[frame.defect.label] == RED
    assert load_frame("pandemic_vaccines").cooperate.label == "SHARE"
    assert load_frame("baseline").mute_sentence == "I vote BLACK."


def test_sample_scenario_uses_training_frames_only() -> None:
    rng = random.Random(0)
    frames = {RedBlackEnv.sample_scenario(rng).frame for _ in range(200)}
    assert frames == set(TRAIN)
    first = registry.sample_scenarios("red-black-v0", 5, seed=7)
    assert first == registry.sample_scenarios("red-black-v0", 5, seed=7)


GOOD_FRAME = """\
name: {name}
split: train
title: T
intro: Some story.
teams: {{A: Red Team, B: Blue Team}}
cooperate: {{label: SHARE, description: share}}
defect: {{label: GRAB, description: grab}}
mute_sentence: I vote SHARE.
"""


@pytest.mark.parametrize(
    ("replace", "by", "field"),
    [
        ("cooperate: {label: SHARE, description: share}\n", "", "cooperate"),
        ("split: train", "split: test", "split"),
        ("label: GRAB", "label: grab", "defect.label"),
        ("mute_sentence: I vote SHARE.", "mute_sentence: I vote GRAB.", "mute_sentence"),
        ("title: T", "title: T\ncolour: red", "colour"),
        ("name: broken", "name: other", "name"),
        ("{A: Red Team, B: Blue Team}", "{A: Red Team}", "teams"),
    ],
)
def test_broken_frame_file_names_file_and_field(tmp_path: Path, replace: str, by: str, field: str) -> None:
    path = tmp_path / "broken.yaml"
    text = GOOD_FRAME.format(name="broken")
    assert replace in text
    path.write_text(text.replace(replace, by))
    with pytest.raises(FrameError) as info:
        load_frame("broken", directory=tmp_path)
    assert str(path) in str(info.value)
    assert f"field '{field}'" in str(info.value)


def test_frame_file_errors_for_bad_yaml_and_unknown_names(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(GOOD_FRAME.format(name="good"))
    assert load_frame("good", directory=tmp_path).defect.label == "GRAB"
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    with pytest.raises(FrameError, match=r"bad\.yaml: not valid YAML"):
        load_frame_file(tmp_path / "bad.yaml")
    with pytest.raises(FrameError, match="no such frame file"):
        load_frame("missing", directory=tmp_path)
    with pytest.raises(ScenarioError, match="unknown frame"):
        scenario(frame="missing")


# ------------------------------------------------------------------------------- scenario validation
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"team_size": 0}, "team_size"),
        ({"team_size": True}, "team_size"),
        ({"rounds": 0}, "rounds"),
        ({"discussion_rounds": 0}, "discussion_rounds"),
        ({"willingness_to_speak": 1}, "willingness_to_speak"),
        ({"multipliers": {11: 2}}, "round 11"),
        ({"multipliers": {5: 0}}, "multiplier of round 5"),
        ({"multipliers": [5, 3]}, "mapping"),
        ({"focal_agent": "C0"}, "focal_agent"),
        ({"focal_agent": "A5"}, "focal_agent"),
    ],
)
def test_scenario_validation(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        scenario(**kwargs)


@pytest.mark.parametrize("size", [10, 15])
def test_larger_teams(size: int) -> None:
    result = strategy_game("always_cooperate", "always_cooperate", team_size=size, rounds=2, multipliers={})
    assert len(result.outcome.roles) == 2 * size
    assert f"B{size - 1}" in result.outcome.roles
    assert result.outcome.metrics["score_A"] == 6


# ------------------------------------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ("I vote BLACK", B),
        ("**VOTE: black**", B),
        ("vote: red", R),
        ("Red.", R),
        ("I think it over... Final answer: SHARE", B),
        ("My vote is: HOARD. On reflection, VOTE: SHARE", B),
        ("We should HOARD now.", R),
        ("I will vote to share", B),
        ("- **I choose** `HOARD`", R),
    ],
)
def test_vote_parser_is_tolerant(text: str, choice: str) -> None:
    env = RedBlackEnv()
    sc = scenario(frame="pandemic_vaccines")
    env.reset(sc)
    for seat in sc.seats():
        env.step(Action(seat, "opinion", "hi"))
    parsed = env.parse("A0", text)
    assert isinstance(parsed, Action) and parsed.kind == "vote"
    assert parsed.payload == {"choice": choice}


@pytest.mark.parametrize("text", ["", "hmm", "I share your worry", "RED or BLACK?", "PASS"])
def test_vote_parser_rejects_unclear_text(text: str) -> None:
    env = RedBlackEnv()
    sc = scenario(frame="pandemic_vaccines")
    env.reset(sc)
    for seat in sc.seats():
        env.step(Action(seat, "opinion", "hi"))
    assert not isinstance(env.parse("A0", text), Action)


def test_opinion_parser_accepts_any_text() -> None:
    env = RedBlackEnv()
    env.reset(scenario())
    plain = env.parse("A0", "Let us think about what the others will do.")
    assert isinstance(plain, Action) and plain.kind == "opinion" and plain.payload == {}
    stated = env.parse("A0", "Trust matters. I vote BLACK.")
    assert isinstance(stated, Action) and stated.payload == {"choice": B}
    assert not isinstance(env.parse("A0", "   "), Action)


# ---------------------------------------------------------------------------------- observability
def test_team_b_never_sees_team_a_discussion() -> None:
    sc = scenario(rounds=3, multipliers={})
    a = {s: TextAgent(opinion=f"ALPHA-SECRET from {s}: I vote RED.", vote="VOTE: RED") for s in sc.seats("A")}
    result = run(teams(a, make_strategy_team("always_cooperate", sc.seats("B"))), sc, inboxes=True)
    for seat in sc.seats("B"):
        inbox = result.inboxes[seat]
        assert not [e for e in inbox if isinstance(e, Observation) and e.sender in sc.seats("A")]
        assert not [e for e in inbox if "ALPHA-SECRET" in e.text or "ALPHA-SECRET" in str(e.data)]
        assert len([e for e in inbox if isinstance(e, Observation) and e.sender]) == 4 * 3
    heard = [e for e in result.inboxes["A1"] if isinstance(e, Observation) and e.sender]
    assert sorted({e.sender for e in heard}) == ["A0", "A2", "A3", "A4"]
    assert len(heard) == 4 * 3 and all("ALPHA-SECRET" in e.text for e in heard)
    results = [e for e in result.inboxes["B0"] if isinstance(e, Observation) and e.data.get("event") == "round_result"]
    assert [e.data["choices"] for e in results] == [{"A": R, "B": B}] * 3
    assert all("own_tally" in e.data and e.data["own_tally"][B] == 5 for e in results)


def test_turn_requests_carry_round_phase_turn() -> None:
    sc = scenario(rounds=2, multipliers={}, discussion_rounds=2)
    result = run(
        teams(
            make_strategy_team("always_cooperate", sc.seats("A")), make_strategy_team("always_defect", sc.seats("B"))
        ),
        sc,
        inboxes=True,
    )
    turns = [e for e in result.inboxes["A0"] if isinstance(e, Notification) and e.kind == NotificationKind.TURN]
    assert [(t.data["round"], t.data["phase"], t.data["turn"]) for t in turns] == [
        (1, "discussion", 1),
        (1, "discussion", 2),
        (1, "vote", 3),
        (2, "discussion", 4),
        (2, "discussion", 5),
        (2, "vote", 6),
    ]
    assert {t.data["max_turns"] for t in turns} == {6}
    end = result.inboxes["A0"][-1]
    assert isinstance(end, Notification) and end.kind == NotificationKind.EPISODE_END
    assert end.data["reward"] == pytest.approx(result.outcome.roles["A0"].reward)


# -------------------------------------------------------------------------------------------- mute
def test_mute_wrapper_replaces_broadcast_text_but_keeps_vote() -> None:
    sc = scenario(frame="pandemic_vaccines", rounds=2, multipliers={})
    inner = TextAgent(opinion="TOP SECRET: we should HOARD everything.", vote="VOTE: HOARD")
    a: dict[str, Agent] = {"A0": MuteWrapper(inner), **make_strategy_team("always_cooperate", sc.seats("A")[1:])}
    result = run(teams(a, make_strategy_team("always_cooperate", sc.seats("B"))), sc, inboxes=True)
    from_a0 = [e for e in result.inboxes["A3"] if isinstance(e, Observation) and e.sender == "A0"]
    assert [e.data["text"] for e in from_a0] == ["I vote SHARE."] * 2
    assert all(e.data["choice"] == B for e in from_a0)
    assert not [e for box in result.inboxes.values() for e in box if "TOP SECRET" in e.text]
    assert result.outcome.metrics["vote_histories"]["A0"] == [R, R]
    explicit = MuteWrapper(TextAgent(), sentence="Only this.")
    result = run(
        teams(
            {"A0": explicit, **make_strategy_team("always_cooperate", sc.seats("A")[1:])},
            make_strategy_team("always_cooperate", sc.seats("B")),
        ),
        sc,
        inboxes=True,
    )
    assert {e.data["text"] for e in result.inboxes["A1"] if isinstance(e, Observation) and e.sender == "A0"} == {
        "Only this."
    }


# ---------------------------------------------------------------------------------- invalid actions
def test_invalid_vote_is_counted_retried_then_abstention() -> None:
    sc = scenario(rounds=2, multipliers={})
    a: dict[str, Agent] = {
        "A0": TextAgent(vote="hmm, I am not sure"),
        "A1": TextAgent(vote="VOTE: RED"),
        "A2": TextAgent(vote="VOTE: RED"),
        "A3": TextAgent(vote="VOTE: BLACK"),
        "A4": TextAgent(vote="VOTE: BLACK"),
    }
    result = run(teams(a, make_strategy_team("always_cooperate", sc.seats("B"))), sc, inboxes=True)
    m = result.outcome.metrics
    assert result.outcome.roles["A0"].invalid_actions == 3 * 2  # max_invalid_retries=2: 3 attempts per vote
    assert m["invalid_votes"] == 6 and m["abstentions"] == 2
    assert m["vote_histories"]["A0"] == [None, None]
    assert m["team_choices"]["A"] == [B, B]  # 2 RED vs 2 BLACK with one abstention: tie -> BLACK
    notes = [
        e for e in result.inboxes["A0"] if isinstance(e, Notification) and e.kind == NotificationKind.INVALID_ACTION
    ]
    assert [n.data["retries_left"] for n in notes] == [2, 1, 0, 2, 1, 0]
    assert result.outcome.roles["A1"].invalid_actions == 0


def test_invalid_opinion_becomes_silence_and_pass_needs_willingness() -> None:
    sc = scenario(rounds=1, multipliers={})
    a: dict[str, Agent] = {"A0": TextAgent(opinion="   "), **make_strategy_team("always_cooperate", sc.seats("A")[1:])}
    result = run(teams(a, make_strategy_team("always_cooperate", sc.seats("B"))), sc, inboxes=True)
    assert result.outcome.metrics["opinion_choices"]["A0"] == [[SILENT]]
    assert result.outcome.roles["A0"].invalid_actions == 3
    assert not [e for e in result.inboxes["A1"] if isinstance(e, Observation) and e.sender == "A0"]
    env = RedBlackEnv()
    env.reset(sc)
    events = env.step(Action("A0", "pass"))
    assert events[0].kind == NotificationKind.INVALID_ACTION and env.invalid_counts["A0"] == 1


def test_willingness_to_speak_allows_silence() -> None:
    sc = scenario(rounds=2, multipliers={}, willingness_to_speak=True)
    a: dict[str, Agent] = {
        "A0": TextAgent(opinion="Nothing to add this time.\n**PASS**"),
        **make_strategy_team("always_cooperate", sc.seats("A")[1:]),
    }
    result = run(teams(a, make_strategy_team("always_cooperate", sc.seats("B"))), sc, inboxes=True)
    assert result.outcome.metrics["opinion_choices"]["A0"] == [[SILENT], [SILENT]]
    assert result.outcome.roles["A0"].invalid_actions == 0
    assert not [e for e in result.inboxes["A2"] if isinstance(e, Observation) and e.sender == "A0"]
    turn = next(e for e in result.inboxes["A0"] if isinstance(e, Notification) and e.kind == NotificationKind.TURN)
    assert turn.allowed == ("opinion", "pass")


# ------------------------------------------------------------------------------ followers and focal
def test_majority_follower_and_focal_influence() -> None:
    sc = scenario(rounds=3, multipliers={}, focal_agent="A0")
    followers = {s: MajorityFollower(first_choice=RED, reciprocal=False, noise=0.0) for s in ("A3", "A4")}
    a = {**make_strategy_team("always_cooperate", ("A0", "A1", "A2")), **followers}
    result = run(teams(a, make_strategy_team("always_defect", sc.seats("B"))), sc)
    m = result.outcome.metrics
    assert m["opinion_choices"]["A3"] == [[R], [R], [R]]
    assert m["vote_histories"]["A3"] == [B, B, B]  # heard 3 BLACK and 1 RED, plus its own RED
    assert (m["influence_moved_to_focal"], m["influence_opportunities"], m["influence_net"]) == (6, 6, 6)
    alone = {"A0": StrategyAgent(STRATEGIES["always_cooperate"])}
    alone.update({s: MajorityFollower(first_choice=RED, reciprocal=False, noise=0.0) for s in sc.seats("A")[1:]})
    m = run(teams(alone, make_strategy_team("always_defect", sc.seats("B"))), sc).outcome.metrics
    assert m["team_choices"]["A"] == [R, R, R] and m["influence_moved_to_focal"] == 0


def test_follower_reciprocates_and_updates_in_later_discussion_steps() -> None:
    sc = scenario(rounds=2, multipliers={}, discussion_rounds=2)
    a = {
        **make_strategy_team("always_cooperate", ("A0", "A1", "A2")),
        "A3": MajorityFollower(RED),
        "A4": MajorityFollower(RED, noise=0.0),
    }
    result = run(teams(a, make_strategy_team("always_defect", sc.seats("B"))), sc)
    opinions = result.outcome.metrics["opinion_choices"]["A4"]
    assert opinions == [[R, B], [R, B]]  # stance RED (round 2: B defected), then the team majority


# ------------------------------------------------------------------------------------ determinism
def test_same_seed_same_game() -> None:
    def game(seed: int) -> EpisodeResult:
        sc = scenario(frame="trade_war", focal_agent="A0")
        a = {s: MajorityFollower(first_choice=B, noise=0.3, seed=seed) for s in sc.seats("A")}
        return run(teams(a, make_strategy_team("mostly_cooperate", sc.seats("B"), seed)), sc, seed=seed)

    first, second = game(5), game(5)
    assert first.transcript == second.transcript
    assert first.outcome == second.outcome
    others = [game(s).outcome.metrics["vote_histories"] for s in range(6, 10)]
    assert any(o != first.outcome.metrics["vote_histories"] for o in others)
