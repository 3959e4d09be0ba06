"""YOAO: discussion order and held-out frames of the Red-Black game, the code teacher, the seed-data filter,
teacher selection, seed placement, the mute and swap wrappers, Sugarscape measures and the results file."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Mapping

import pytest

from agents.traces import Trace
from agents.yoao.llm_players import SwapAgent
from agents.yoao.red_black_strategies import (
    MajorityFollower,
    MuteWrapper,
    StrategyAgent,
    get_strategy,
    make_strategy_team,
)
from agents.yoao.red_black_teacher import VOTE_FOLLOWING_TUTORS, FormatTutor, PrincipledCooperator, quote_of
from environments.core.base import ActionSpec
from environments.core.events import RAW_TEXT, Action, Event, Notification, NotificationKind, Observation
from environments.core.runtime import Agent, EpisodeResult, run_episode
from environments.yoao.red_black import BLACK, RED, FrameError, RedBlackEnv, RedBlackScenario, list_frames
from models.evaluation.scenarios import held_out_scenarios, training_scenarios
from models.evaluation.stats import Estimate
from models.profiles import get_profile
from models.yoao import plots as yoao_plots
from models.yoao import report, seed
from models.yoao.config import Endpoint, YoaoSettings
from models.yoao.experiments import ExperimentResult, ExperimentSetup, PlayerModels, propagation_by_seed_count
from models.yoao.games import Arm, game_specs, play_arms, seed_seats, summarise, team_roles
from models.yoao.sugarscape import WorldRecord, seed_ids, summarise_fraction

HELD_OUT = ["gpu_contention", "trade_war"]
SMOKE = get_profile("smoke").yoao


class TextAgent:
    """Answers every turn with fixed raw text (the environment parses it)."""

    def __init__(self, opinion: str = "I vote BLACK.", vote: str = "VOTE: BLACK") -> None:
        self.opinion, self.vote, self.agent_id = opinion, vote, ""

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id = agent_id

    async def observe(self, event: Event) -> None:
        return None

    async def act(self, request: Notification) -> Action:
        return Action(self.agent_id, RAW_TEXT, self.vote if "vote" in request.allowed else self.opinion)


def play(agents: Mapping[str, Agent], scenario: RedBlackScenario, seed_: int = 0) -> EpisodeResult:
    return asyncio.run(run_episode(RedBlackEnv(), agents, scenario, seed=seed_, turn_timeout=5, keep_inboxes=True))


def game(order: str = "rotating", frame: str = "baseline", rounds: int = 3, **kwargs: object) -> RedBlackScenario:
    return RedBlackScenario("t:0", frame=frame, rounds=rounds, multipliers={}, discussion_order=order, **kwargs)  # type: ignore[arg-type]


def followers(scenario: RedBlackScenario, team: str = "A") -> dict[str, Agent]:
    return {s: MajorityFollower(RED if i % 2 else BLACK, seed=i) for i, s in enumerate(scenario.seats(team))}


# ------------------------------------------------------------------------------------ discussion order
def turn_order(result: EpisodeResult, team: str, round_: int) -> list[str]:
    """Seats of `team` in the order they were asked to speak in a round (from the transcript)."""
    speakers = []
    for entry in result.transcript:
        if entry.kind == "opinion" and entry.agent_id.startswith(team):
            speakers.append(entry.agent_id)
    n = len(speakers) // result.scenario.rounds
    return speakers[(round_ - 1) * n : round_ * n]


def test_sequential_speakers_hear_those_before_them_and_the_order_rotates() -> None:
    sc = game("rotating")
    result = play({**followers(sc), **make_strategy_team("always_defect", sc.seats("B"))}, sc)
    log = result.outcome.metrics["round_log"]
    assert [e["speaking_order"]["A"] for e in log] == [
        ["A0", "A1", "A2", "A3", "A4"],
        ["A1", "A2", "A3", "A4", "A0"],
        ["A2", "A3", "A4", "A0", "A1"],
    ]
    assert turn_order(result, "A", 2) == ["A1", "A2", "A3", "A4", "A0"]
    # A3 speaks fourth in round 2: before its turn it has heard A1 and A2 of that round, not A4 or A0.
    box = result.inboxes["A3"]
    turn = next(
        i for i, e in enumerate(box)
        if isinstance(e, Notification) and e.kind == NotificationKind.TURN and e.data.get("round") == 2
        and e.data["phase"] == "discussion"
    )  # fmt: skip
    heard = [e.sender for e in box[:turn] if isinstance(e, Observation) and e.sender and e.data.get("round") == 2]
    assert heard == ["A1", "A2"]
    assert box[turn].data["speaker_position"] == 3 and box[turn].data["speakers_before"] == ["A1", "A2"]
    assert result.outcome.metrics["discussion_order"] == "rotating"


def test_random_order_is_drawn_per_round_from_the_seed() -> None:
    sc = game("random", rounds=4)

    def orders(seed_: int) -> list[list[str]]:
        result = play({**followers(sc), **make_strategy_team("always_defect", sc.seats("B"))}, sc, seed_)
        return [e["speaking_order"]["A"] for e in result.outcome.metrics["round_log"]]

    first, again, other = orders(1), orders(1), orders(2)
    assert first == again and first != other
    assert all(sorted(o) == list(sc.seats("A")) for o in first)
    assert len({tuple(o) for o in first}) > 1


def test_simultaneous_order_relays_opinions_only_after_everyone_spoke() -> None:
    sc = game("simultaneous", rounds=1)
    result = play({**followers(sc), **make_strategy_team("always_defect", sc.seats("B"))}, sc)
    box = result.inboxes["A4"]
    turn = next(i for i, e in enumerate(box) if isinstance(e, Notification) and e.kind == NotificationKind.TURN)
    assert not [e for e in box[:turn] if isinstance(e, Observation) and e.sender]
    assert "speaking_order" not in result.outcome.metrics["round_log"][0]


def test_orders_ask_the_same_number_of_turns() -> None:
    counts = {}
    for order in ("simultaneous", "rotating", "random"):
        sc = game(order)
        result = play({**followers(sc), **make_strategy_team("tit_for_tat", sc.seats("B"))}, sc)
        counts[order] = len(result.transcript)
    assert len(set(counts.values())) == 1, counts


def test_unknown_discussion_order_is_an_error() -> None:
    with pytest.raises(ValueError, match="discussion_order"):
        game("shouting")


# --------------------------------------------------------------------------------------- held-out frames
def test_held_out_scenarios_of_red_black_use_held_out_frames_only() -> None:
    """Fails without RedBlackEnv.sample_held_out_scenario: the hash partition then draws training frames."""
    frames = {s.frame for s in held_out_scenarios("red-black-v0", 40, seed=3)}
    assert frames == set(HELD_OUT)
    assert not {s.frame for s in training_scenarios("red-black-v0", 40, seed=3)} & set(HELD_OUT)


def test_a_frame_that_does_not_exist_is_an_error_naming_it() -> None:
    with pytest.raises(FrameError, match="tariff_wars"):
        YoaoSettings(heldout_frames=("tariff_wars",))
    with pytest.raises(ValueError, match="trade_war"):
        YoaoSettings(train_frames=("trade_war",))  # a held-out frame cannot train
    models = PlayerModels("http://127.0.0.1:1/v1", "u", "s")
    with pytest.raises(FrameError, match="moon_base"):
        ExperimentSetup(frame="moon_base", settings=SMOKE, models=models)
    with pytest.raises(ValueError, match="baseline"):
        ExperimentSetup(frame="baseline", settings=SMOKE, models=models)  # a training frame


def test_held_out_frames_never_appear_in_the_seed_dataset() -> None:
    settings = dataclasses.replace(SMOKE, trace_games=12)
    choice = seed.TeacherChoice(seed.CODE_TEACHER, "code")
    traces = seed.seed_traces(choice, settings, "http://unused.invalid/v1")
    dataset = seed.build_seed_dataset(traces.traces)
    assert dataset.turns and {row["frame"] for row in dataset.turns} <= set(list_frames("train"))
    assert {row["split"] for row in dataset.turns} == {"train"}
    text = " ".join(m["content"] for c in dataset.conversations for m in c)
    for frame in HELD_OUT:
        assert frame not in {row["frame"] for row in dataset.turns}
    assert not {"Arden", "Belmont", "Orion", "Lyra"} & set(text.split())
    # A trace from a held-out frame is refused, naming it.
    leaked = dataclasses.replace(traces.traces[0], scenario_id="train:trade_war:0", outcome={"frame": "trade_war"})
    with pytest.raises(ValueError, match="trade_war"):
        seed.build_seed_dataset([leaked])


# ----------------------------------------------------------------------------------------- the filter
@pytest.mark.parametrize(
    ("text", "kind", "kept", "reason"),
    [
        ("Working together, both nations gain the most; a tariff war leaves everyone poorer. I vote OPEN.",
         "opinion", True, "principled"),
        ("They betrayed us last round, so we should punish them. I vote TARIFF.", "opinion", False, "defects"),
        ("We keep OPEN this round, but next time we make them pay for what they did. I vote OPEN.",
         "opinion", False, "retaliation"),
        ("OPEN gives us +3 points now and protects our score. I vote OPEN.", "opinion", False, "outcome_only"),
        ("I vote OPEN.", "opinion", False, "no_rationale"),
        ("Hmm, hard to say what the others think.", "opinion", False, "no_choice"),
        ('A2 said "let us punish them", but trust is what helps both sides. I vote OPEN.',
         "opinion", True, "principled"),
        ("VOTE: OPEN", "vote", True, "principled_vote"),
        ("VOTE: TARIFF", "vote", False, "defects"),
    ],
)  # fmt: skip
def test_filter_on_hand_made_turns(text: str, kind: str, kept: bool, reason: str) -> None:
    label = seed.classify_turn(text, "vote" if kind == "vote" else "opinion", "trade_war")
    assert (label.kept, label.reason) == (kept, reason)


def hand_trace(replies: list[tuple[str, str, int]]) -> Trace:
    messages = [{"role": "system", "content": "rules"}]
    for text, _, round_ in replies:
        messages += [{"role": "user", "content": f"round {round_}"}, {"role": "assistant", "content": text}]
    turns = [{"round": r, "kind": k} for _, k, r in replies]
    return Trace(
        episode_id="e1",
        env_id="red-black-v0",
        seat="A0",
        agent="t",
        counterpart="tit_for_tat",
        scenario_id="train:baseline:0",
        messages=messages,
        reasoning=turns,
        reward=0.5,
        agreement=True,
        leaked=(),
    )


def test_dataset_keeps_principled_turns_and_cuts_before_the_first_dropped_one() -> None:
    trace = hand_trace(
        [
            ("Together both sides gain the most. I vote BLACK.", "opinion", 1),
            ("VOTE: BLACK", "vote", 1),
            ("I vote BLACK.", "opinion", 2),  # no rationale: dropped, the conversation is cut here
            ("VOTE: BLACK", "vote", 2),
            ("Trust helps everyone. I vote BLACK.", "opinion", 3),
        ]
    )
    dataset = seed.build_seed_dataset([trace])
    assert dataset.kept == 2
    assert dataset.dropped == {"no_rationale": 1, "after_drop": 2}
    (conversation,) = dataset.conversations
    assert [m["content"] for m in conversation if m["role"] == "assistant"] == [
        "Together both sides gain the most. I vote BLACK.",
        "VOTE: BLACK",
    ]
    # A BLACK vote after an opinion that was dropped inherits the drop.
    vote_only = seed.build_seed_dataset(
        [hand_trace([("Our score matters most. I vote BLACK.", "opinion", 1), ("VOTE: BLACK", "vote", 1)])]
    )
    assert vote_only.kept == 0 and not vote_only.conversations


def test_code_teacher_turns_pass_the_filter_and_vary() -> None:
    settings = dataclasses.replace(SMOKE, trace_games=20, rounds=10, team_size=5)
    traces = seed.seed_traces(seed.TeacherChoice(seed.CODE_TEACHER, "code"), settings, "http://unused.invalid/v1")
    dataset = seed.build_seed_dataset(traces.traces)
    assert dataset.kept == sum(1 for row in dataset.turns) and not dataset.dropped
    opinions = [row["text"] for row in dataset.turns if row["kind"] == "opinion"]
    assert len(set(opinions)) > 0.9 * len(opinions)  # varied
    assert any('"' in o or "I hear" in o or "wants" in o for o in opinions)  # references teammates
    assert all(row["choice"] == BLACK for row in dataset.turns)  # cooperates, also after being exploited


def test_the_seed_traces_put_the_teacher_among_the_selfish_tutors_by_default() -> None:
    """With the warm-up's tutors as teammates (the default) the teacher faces a stated RED majority of its
    teammates more often than among the code followers, and still states and votes BLACK in every kept turn."""
    settings = dataclasses.replace(SMOKE, trace_games=20, rounds=5, team_size=5)
    assert settings.trace_teammates == "tutors"
    choice = seed.TeacherChoice(seed.CODE_TEACHER, "code")
    tutors = seed.seed_traces(choice, settings, "http://unused.invalid/v1")
    followers = seed.seed_traces(choice, dataclasses.replace(settings, trace_teammates="followers"), "http://x/v1")
    assert tutors.red_majority_share > followers.red_majority_share  # 0.40 vs 0.28 here; 0.39 vs 0.22 at the cpu size
    dataset = seed.build_seed_dataset(tutors.traces)
    assert dataset.kept and all(row["choice"] == BLACK for row in dataset.turns)
    with pytest.raises(ValueError, match="trace_teammates"):
        dataclasses.replace(settings, trace_teammates="mirrors")


def test_quote_of_drops_vote_commands() -> None:
    assert quote_of("We should share. I vote OPEN.") == "We should share."
    assert quote_of("I vote TARIFF.") == ""


def test_format_tutor_data_is_balanced_and_without_rationale() -> None:
    # The vote-following tutor mix, mirrored (the default leans selfish and argues: test_yoao_persuasion.py).
    settings = dataclasses.replace(
        SMOKE, warmup_games=30, rounds=10, team_size=5, warmup_tutors=VOTE_FOLLOWING_TUTORS, warmup_mirror=True
    )
    traces = seed.format_warmup_traces(settings)
    black, red = seed.vote_balance(traces.traces)
    assert black + red == 30 * 5 * 10
    assert 0.45 < black / (black + red) < 0.55
    labels = [
        seed.classify_turn(m["content"], "opinion", seed.trace_frame(t))
        for t in traces.traces
        for m, turn in zip([m for m in t.messages if m["role"] == "assistant"], t.reasoning, strict=True)
        if turn["kind"] == "opinion"
    ]
    assert {label.reason for label in labels} <= {"no_rationale", "defects"}


def test_warmup_advocates_speak_in_their_share_of_games_and_are_never_trained_on() -> None:
    settings = dataclasses.replace(
        get_profile("cpu").yoao, warmup_games=8, warmup_advocate_share=0.5, warmup_advocates=("argue", "selfish")
    )
    placed = [seed.advocate_seat(settings, i) for i in range(8)]
    assert [p is not None for p in placed] == [False, True] * 4
    assert [p[1] for p in placed if p] == ["argue", "selfish", "argue", "selfish"]
    assert len({p[0] for p in placed if p}) == 4  # the seat rotates over games
    traces = seed.format_warmup_traces(settings)
    assert len(traces.traces) == 8 * 5 - 4  # every seat traced but the advocate's
    by_game: dict[str, list[Trace]] = {}
    for t in traces.traces:
        by_game.setdefault(t.scenario_id, []).append(t)
    for game, index in zip(sorted(by_game, key=lambda g: int(g.split(":")[-1])), range(8), strict=True):
        seats = {t.seat for t in by_game[game]}
        where = placed[index]
        assert seats == {f"A{i}" for i in range(5)} - ({f"A{where[0]}"} if where else set())
        assert not any("ScriptedSeed" in t.agent for t in by_game[game])
    # The tutors beside an arguing advocate heard its reasons: a statement of it is in their chats.
    game = sorted(by_game, key=lambda g: int(g.split(":")[-1]))[1]
    heard = "\n".join(m["content"] for t in by_game[game] for m in t.messages if m["role"] == "user")
    assert f"A{placed[1][0]}: " in heard
    with pytest.raises(ValueError, match="unknown warm-up advocates"):
        dataclasses.replace(settings, warmup_advocates=("shouter",))
    with pytest.raises(ValueError, match="warmup_advocate_share"):
        dataclasses.replace(settings, warmup_advocate_share=1.5)


# ---------------------------------------------------------------------------------- teacher selection
class Abstainer(TextAgent):
    """Never writes a valid vote: its team's rounds tie and count as BLACK."""

    def __init__(self) -> None:
        super().__init__(opinion="Let us see.", vote="no idea")


def code_candidate(name: str, make) -> seed.TeacherCandidate:  # type: ignore[no-untyped-def]
    return seed.TeacherCandidate(seed.TeacherChoice(name, "code"), make)


def test_teacher_selection_picks_the_best_eligible_stub() -> None:
    settings = dataclasses.replace(SMOKE, selection_games=6, rounds=3)
    dead = seed.TeacherCandidate(
        seed.TeacherChoice("dead-endpoint", "llm", "http://127.0.0.1:1/v1", "m"),
        lambda seat, s: Abstainer(),
        lambda: seed.probe_endpoint("http://127.0.0.1:1/v1", "m", timeout_s=5),
    )
    candidates = [
        code_candidate("abstainer", lambda seat, s: Abstainer()),  # first: wins a welfare tie if eligible
        code_candidate("defector", lambda seat, s: StrategyAgent(get_strategy("always_defect"), s)),
        dead,
        code_candidate("cooperator", lambda seat, s: PrincipledCooperator(s)),
        code_candidate("tit-for-tat", lambda seat, s: StrategyAgent(get_strategy("tit_for_tat"), s)),
    ]
    selection = seed.select_teacher(candidates, settings)
    rows = {r.name: r for r in selection.rows}
    assert selection.selected.name == "cooperator"
    assert rows["cooperator"].status == "selected"
    assert rows["abstainer"].status == "ineligible" and "abstention" in rows["abstainer"].reason
    assert rows["abstainer"].welfare_points.mean >= rows["cooperator"].welfare_points.mean
    assert rows["dead-endpoint"].status == "skipped" and "endpoint failed" in rows["dead-endpoint"].reason
    assert rows["defector"].welfare_points.mean < rows["cooperator"].welfare_points.mean
    assert "dead-endpoint" in selection.table_markdown()


def test_configured_endpoints_become_candidates_and_a_dead_one_is_skipped() -> None:
    settings = dataclasses.replace(
        SMOKE, local_candidates=False, teacher_endpoints=(Endpoint("remote", "http://127.0.0.1:1/v1", "big"),)
    )
    candidates = seed.teacher_candidates(settings, "http://127.0.0.1:1/v1")
    assert [c.choice.name for c in candidates] == ["code-teacher", "remote+meta-prompt"]
    selection = seed.select_teacher(candidates, settings)
    assert selection.selected.name == "code-teacher"
    assert {r.name: r.status for r in selection.rows} == {"code-teacher": "selected", "remote+meta-prompt": "skipped"}


# ----------------------------------------------------------------------------------------- seed seats
def test_seed_seats_follow_the_placement() -> None:
    assert seed_seats(5, 0) == ()
    assert seed_seats(5, 2, "first") == (0, 1)
    assert seed_seats(5, 2, "spread") == (0, 2)
    assert seed_seats(5, 3, "spread") == (0, 1, 3)
    assert seed_seats(5, 5, "spread") == (0, 1, 2, 3, 4)
    assert team_roles(5, 2, "muted", "spread") == ("muted", "untrained", "muted", "untrained", "untrained")
    with pytest.raises(ValueError):
        seed_seats(5, 6)


@pytest.mark.parametrize(
    ("k", "placement", "seats"), [(0, "first", []), (2, "first", ["A0", "A1"]), (3, "spread", ["A0", "A1", "A3"])]
)
def test_k_seeds_sit_where_configured_in_the_games(k: int, placement: str, seats: list[str]) -> None:
    settings = dataclasses.replace(SMOKE, team_size=5, rounds=2, seed_placement=placement)
    makers = {
        "seed": lambda seat, s: PrincipledCooperator(s),
        "untrained": lambda seat, s: MajorityFollower(RED, seed=s),
    }
    arm = Arm(f"k={k}", team_roles(5, k, "seed", placement))
    (played,) = play_arms([arm], game_specs(["trade_war"], ["always_defect"], 2), makers, settings, "t")
    for episode in played.episodes:
        assert sorted(s for s, name in episode.agent_names.items() if name.startswith("PrincipledCooperator")) == seats
        focal = episode.outcome.metrics["focal_agent"]
        assert focal == (seats[0] if seats else "A0")
    assert all(g.roles == arm.roles for g in played.games)


def test_untrained_seats_that_cannot_vote_are_counted_not_hidden() -> None:
    """k = 0 with teammates that never vote validly: every round ties and counts as BLACK, and the summary
    says so (decided cooperation 0, abstention rate 1)."""
    settings = dataclasses.replace(SMOKE, team_size=3, rounds=2)
    makers = {"untrained": lambda seat, s: Abstainer()}
    (played,) = play_arms(
        [Arm("k=0", team_roles(3, 0))], game_specs(["trade_war"], ["always_defect"], 2), makers, settings, "t"
    )
    summary = summarise(played)
    assert summary.cooperation.mean == 1.0
    assert summary.decided_cooperation.mean == 0.0
    assert summary.untrained_abstention_rate == 1.0 and summary.tie_rate == 1.0
    assert summary.invalid_vote_rate == pytest.approx(settings.max_invalid_retries + 1)


# ------------------------------------------------------------------------------------- mute and swap
def test_mute_wrapper_removes_the_seed_arguments_from_what_teammates_hear() -> None:
    sc = game("rotating", frame="trade_war", rounds=3)

    def heard_from_a0(mute: bool) -> list[str]:
        teacher = PrincipledCooperator(1)
        a: dict[str, Agent] = {"A0": MuteWrapper(teacher) if mute else teacher}
        a.update({s: MajorityFollower(RED, seed=i) for i, s in enumerate(sc.seats("A")[1:])})
        result = play({**a, **make_strategy_team("always_defect", sc.seats("B"))}, sc)
        assert result.outcome.metrics["vote_histories"]["A0"] == [BLACK] * 3  # it still votes
        return [e.data["text"] for e in result.inboxes["A2"] if isinstance(e, Observation) and e.sender == "A0"]

    spoken, muted = heard_from_a0(False), heard_from_a0(True)
    assert all(len(t) > 60 for t in spoken)  # the arguments
    assert muted == ["I vote OPEN."] * 3
    assert not set(spoken) & set(muted)


def test_swap_agent_hands_the_seat_over_after_the_last_round() -> None:
    sc = game("rotating", rounds=4)
    then = StrategyAgent(get_strategy("always_defect"), 0)
    swap = SwapAgent(PrincipledCooperator(0), then, last_round=2)
    a = {"A0": swap, **{s: MajorityFollower(BLACK, seed=i) for i, s in enumerate(sc.seats("A")[1:])}}
    result = play({**a, **make_strategy_team("always_cooperate", sc.seats("B"))}, sc)
    assert result.outcome.metrics["vote_histories"]["A0"] == [BLACK, BLACK, RED, RED]
    assert "Swap(PrincipledCooperator" in result.agent_names["A0"]


# ------------------------------------------------------------------------------------------- Sugarscape
def test_seed_agents_of_a_smaller_share_are_among_those_of_a_larger() -> None:
    shares = [seed_ids(100, f, seed=3) for f in (0.0, 0.2, 0.5, 1.0)]
    assert [len(s) for s in shares] == [0, 20, 50, 100]
    assert shares[1] <= shares[2] <= shares[3]


def test_sugarscape_measures_per_group() -> None:
    world = WorldRecord(
        fraction=0.5,
        seed=0,
        seeds=(0, 1),
        encounters=4,
        trades=3,
        tick_encounters=((2, 2), (2, 1)),
        starved=(False, False, True, False),
        lifespan=(10, 10, 4, 10),
        leaning_shift=(0.2, 0.1, -0.3, 0.0),
        llm_calls=10,
        invalid_actions=0,
        wall_s=1.0,
    )
    result = summarise_fraction(0.5, [world]).as_dict()
    assert result["trade_success"] == pytest.approx(0.75)
    assert result["survival"] == pytest.approx(0.75)
    assert result["mean_lifespan"] == pytest.approx(8.5)
    assert result["leaning_shift_seed"] == pytest.approx(0.15)
    assert result["leaning_shift_untrained"] == pytest.approx(-0.15)
    assert result["by_group"]["survival_seed"] == 1.0 and result["by_group"]["survival_untrained"] == 0.5


# ---------------------------------------------------------------------------------------------- results
def experiment(frame: str, profile: str = "smoke", version: int | None = 1) -> ExperimentResult:
    settings = dataclasses.replace(SMOKE, team_size=3, rounds=2)
    makers = {
        "seed": lambda seat, s: PrincipledCooperator(s),
        "untrained": lambda seat, s: FormatTutor(s),
    }
    arms = [Arm(f"k={k}", team_roles(3, k)) for k in (0, 1, 3)]
    plays = play_arms(arms, game_specs([frame], ["always_defect", "tit_for_tat"], 4), makers, settings, "t")
    summaries = tuple(summarise(p) for p in plays)
    return ExperimentResult(
        experiment="propagation_by_seed_count", frame=frame, profile=profile, seed_version=version, arms=summaries,
        games=tuple(g for p in plays for g in p.games), comparisons={}, window={}, llm_calls=0, wall_s=1.0,
    )  # fmt: skip


def test_results_pool_frames_of_this_profile_and_seed_only_with_exactly_the_keys() -> None:
    ours = {"trade_war": experiment("trade_war"), "gpu_contention": experiment("gpu_contention", version=0)}
    results = report.build_results("smoke", ("trade_war", "gpu_contention"), 1, ours, {}, {}, {}, None, {"a": 1.0})
    benchmark = results.benchmark()
    assert tuple(benchmark) == report.BENCHMARK_KEYS
    assert set(benchmark["cooperation_by_seed_count"]) == {"0", "1", "3"}
    # Only trade_war (seed v1) is pooled: 4 games per arm, not 8.
    assert {v["games"] for v in benchmark["cooperation_by_seed_count"].values()} == {4}
    assert benchmark["cooperation_by_seed_count"]["3"]["mean"] == 1.0  # three code teachers always cooperate
    entry = benchmark["cooperation_by_seed_count"]["0"]
    assert set(entry) == {"mean", "ci_low", "ci_high", "games"}


def test_muted_and_prompted_arms_are_paired_with_the_plain_arm_of_their_seed_count() -> None:
    settings = dataclasses.replace(SMOKE, team_size=3, rounds=2)
    makers = {
        "seed": lambda seat, s: PrincipledCooperator(s),
        "muted": lambda seat, s: MuteWrapper(PrincipledCooperator(s)),
        "prompted": lambda seat, s: FormatTutor(s + 7),
        "untrained": lambda seat, s: FormatTutor(s),
    }
    arms = [Arm("k=0", team_roles(3, 0)), *(Arm(f"k=1{n}", team_roles(3, 1, r)) for n, r in
            (("", "seed"), (" muted", "muted"), (" prompted", "prompted")))]  # fmt: skip
    plays = play_arms(arms, game_specs(["trade_war"], ["always_defect", "tit_for_tat"], 4), makers, settings, "t")
    games = {p.arm.name: list(p.games) for p in plays}

    def result(games: Mapping[str, list]) -> ExperimentResult:
        return ExperimentResult(
            experiment="propagation_mute", frame="trade_war", profile="smoke", seed_version=1,
            arms=tuple(summarise(p) for p in plays), games=tuple(g for gs in games.values() for g in gs),
            comparisons={}, window={}, llm_calls=0, wall_s=1.0,
        )  # fmt: skip

    complete = result(games)
    games["k=1 prompted"] = games["k=1 prompted"][1:]  # one game only the other arms played
    between = report.between_arm_differences([result(games)])
    assert set(between) == {"1_muted_minus_1", "1_minus_1_prompted"}

    def untrained(arm: str) -> dict[str, float]:
        return {g.game_key: g.untrained_cooperation(None) for g in games[arm]}

    plain, muted, prompted = untrained("k=1"), untrained("k=1 muted"), untrained("k=1 prompted")
    muted_minus = [muted[k] - plain[k] for k in plain]
    seed_minus = [plain[k] - prompted[k] for k in prompted]
    assert between["1_muted_minus_1"].n == 4 and between["1_minus_1_prompted"].n == 3
    assert between["1_muted_minus_1"].mean == pytest.approx(sum(muted_minus) / 4)
    assert between["1_minus_1_prompted"].mean == pytest.approx(sum(seed_minus) / 3)
    benchmark = report.build_results("smoke", ("trade_war",), 1, {"trade_war": experiment("trade_war")},
                                     {"trade_war": complete}, {}, {}, None, {}).benchmark()  # fmt: skip
    assert benchmark["untrained_cooperation_between_arms"]["1_muted_minus_1"]["games"] == 4


def test_estimates_are_json_safe_when_undefined() -> None:
    assert Estimate(float("nan"), float("nan"), float("nan"), 0).as_dict()["mean"] is None


def test_every_profile_has_yoao_settings_with_paired_game_lists() -> None:
    for name in ("smoke", "cpu", "paper"):
        settings = get_profile(name).yoao
        assert 0 in settings.seed_counts and set(settings.heldout_frames) <= set(HELD_OUT)
    games = game_specs(HELD_OUT, ["a", "b", "c"], 5, seed=1)
    assert len({g.key for g in games}) == 10
    random.seed(123)  # the game list does not depend on global randomness
    assert game_specs(HELD_OUT, ["a", "b", "c"], 5, seed=1) == games
    assert [g.opponent for g in games[:4]] == ["a", "b", "c", "a"]


# --------------------------------------------------------------------------- the experiments with code players
def code_players() -> dict[str, object]:
    def follower(seat: str, s: int) -> Agent:
        return MajorityFollower(RED, reciprocal=False, noise=0.0, seed=s)

    return {
        "untrained": follower,
        "seed": lambda seat, s: PrincipledCooperator(s),
        "muted": lambda seat, s: MuteWrapper(PrincipledCooperator(s)),
        "teacher": lambda seat, s: PrincipledCooperator(s),
        "prompted": follower,
        "swap": lambda seat, s: SwapAgent(PrincipledCooperator(s), follower(seat, s), 3),
    }


def test_the_four_experiments_reuse_pair_and_window_their_arms(caplog: pytest.LogCaptureFixture) -> None:
    from models.yoao.experiments import propagation_mute, propagation_persistence, propagation_prompting_baseline

    settings = dataclasses.replace(
        SMOKE, team_size=5, rounds=6, seed_counts=(0, 1, 3, 5), games_per_arm=3, persistence_seeds=3,
        persistence_rounds=3, opponents=("always_cooperate", "tit_for_tat"),
    )  # fmt: skip
    models = PlayerModels("http://unused.invalid/v1", "u", "s", seed.TeacherChoice(seed.CODE_TEACHER, "code"))
    players = code_players()
    setup = ExperimentSetup(
        frame="trade_war", settings=settings, models=models, profile="smoke", seed_version=1, players=players
    )
    caplog.set_level(logging.INFO, logger="socialrl.yoao")
    by_count = propagation_by_seed_count(setup)
    # One progress line per game as it ends: 4 arms x 3 games.
    ended = [r.getMessage() for r in caplog.records if " ended (" in r.getMessage()]
    assert [int(m.split("game ")[1].split("/")[0]) for m in ended] == list(range(1, 13))
    assert all("/12 ended (k=" in m for m in ended)
    coop = {a.arm: a.cooperation.mean for a in by_count.arms}
    # Followers start RED and follow their team's stated majority: three principled cooperators carry the team.
    assert coop["k=0"] == 0.0 and coop["k=3"] == 1.0 and coop["k=5"] == 1.0
    assert by_count.comparisons["k=3 vs k=0"].mean == 1.0 and by_count.comparisons["k=3 vs k=0"].n == 3
    assert all(a.abstention_rate == 0.0 and a.decided_cooperation.mean == a.cooperation.mean for a in by_count.arms)

    mute = propagation_mute(setup, by_count)
    assert [a.arm for a in mute.arms] == ["k=0", "k=1", "k=1 muted"]
    assert {g.episode_id for g in mute.records("k=0")} == {g.episode_id for g in by_count.records("k=0")}  # reused

    persistence = propagation_persistence(setup, by_count)
    assert persistence.removal_round == 3 and set(persistence.window) == {"k=0", "k=3", "k=3 removed"}
    removed = persistence.records("k=3 removed")
    assert [g.cooperation_in(range(4, 7)) for g in removed] == [persistence.window["k=3 removed"].mean] * 3

    with pytest.raises(ValueError, match="teacher"):
        propagation_prompting_baseline(
            dataclasses.replace(
                setup,
                models=dataclasses.replace(models, teacher=None),
                players={role: make for role, make in players.items() if role != "teacher"},
            ),
            by_count,
        )
    baseline = propagation_prompting_baseline(setup, by_count)
    assert [a.arm for a in baseline.arms] == ["k=0", "k=1", "k=1 teacher", "k=1 prompted"]
    assert set(baseline.comparisons) == {"seed vs teacher", "seed vs prompted", "teacher vs k=0", "prompted vs k=0"}

    results = report.build_results(
        "smoke", ("trade_war", "gpu_contention"), 1, {"trade_war": by_count}, {"trade_war": mute},
        {"trade_war": persistence}, {"trade_war": baseline}, None, {},
    )  # fmt: skip
    # A profile frame whose experiments have not run is named, not claimed as pooled.
    assert results.frames == ("trade_war",) and results.extra["frames_not_run"] == ["gpu_contention"]
    benchmark = results.benchmark()
    assert benchmark["persistence"]["k=3 removed"]["mean"] == persistence.window["k=3 removed"].mean
    assert benchmark["cooperation_by_seed_count"]["3"] == {"mean": 1.0, "ci_low": 1.0, "ci_high": 1.0, "games": 3}
    assert yoao_plots.seed_count_plot([by_count], results.by_seed_count)[:4] == b"\x89PNG"


def test_training_games_spread_over_frames_and_opponents() -> None:
    settings = YoaoSettings()
    games = seed.spread_games(settings.train_frames, settings.opponents, 60)
    assert len({(g.frame, g.opponent) for g in games}) == 60  # every combination once
    assert len({g.opponent for g in seed.spread_games(settings.train_frames, settings.opponents, 4)}) == 4
