"""Untrained teammates who weigh arguments: the reading of an argument's grounded reasons, the
decision rule (prior against weighed arguments for and against), the persuadable tutor in a game, the warm-up
data it writes, the scripted seeds, and the incentive audit before training."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Mapping

import pytest

from agents.yoao.persuasion import (
    FILLER_SENTENCES,
    HISTORY,
    NO_REASON,
    PAYOFF,
    REASON_KINDS,
    REASON_SENTENCES,
    REPEATED,
    WELFARE,
    Heard,
    Persuasion,
    Reading,
    available_reasons,
    read_argument,
)
from agents.yoao.red_black_strategies import MuteWrapper, make_strategy_team
from agents.yoao.red_black_teacher import (
    AFTER_EXPLOITED,
    AFTER_MUTUAL,
    CLOSINGS,
    DEFAULT_TUTORS,
    OPENINGS,
    PERSUADABLE,
    PERSUADABLE_PRIORS,
    STAKES,
    VOTE_FOLLOWING_TUTORS,
    FormatTutor,
    PrincipledCooperator,
    ScriptedSeed,
)
from environments.core.runtime import Agent, EpisodeResult, run_episode
from environments.yoao.red_black import BLACK, RED, RedBlackEnv, RedBlackScenario, list_frames, load_frame, read_choice
from models.evaluation.stats import Estimate
from models.profiles import get_profile
from models.yoao import report, seed
from models.yoao.config import YoaoSettings
from models.yoao.incentives import (
    COMPARISONS,
    PAPER_UNTRAINED_COOPERATION,
    YoaoIncentiveAudit,
    YoaoIncentiveSettings,
    prior_calibration,
    run_yoao_incentives,
)
from tests.test_yoao_propagation import Says  # the scripted teammate: a fixed statement and vote

SMOKE = get_profile("smoke").yoao
WORDS = {"coop": "OPEN", "defect": "TARIFF", "them": "Belmont Trade Council", "us": "Arden Trade Council"}
LABELS = ("OPEN", "TARIFF")
MODEL = Persuasion()


def read(text: str, has_history: bool = True) -> Reading:
    return read_argument(text, ignore=LABELS, has_history=has_history)


def heard(text: str, choice: str, age: int = 0) -> Heard:
    return Heard(choice=choice, reading=read(text), age=age)


ARGUMENT = (
    "If Belmont and we both go OPEN, we score +3 this round instead of -3. OPEN is the outcome where both sides "
    "come out ahead together. I vote OPEN."
)
COUNTER = (
    "If Belmont goes OPEN and we go TARIFF, we get +6 points while they lose 6. Nothing we do now will change how "
    "Belmont plays in the next round. I vote TARIFF."
)


# ------------------------------------------------------------------------------------------------ reading
@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("Mutual OPEN gives each side +3.", {PAYOFF, WELFARE}),
        ("This round counts x3, so the points matter.", {PAYOFF}),
        ("Cooperating now builds trust for the rounds ahead.", {REPEATED}),
        ("They chose TARIFF last round.", {HISTORY}),
        ("Let's all do what is best for everyone, together.", {WELFARE}),
        ("I vote OPEN.", set()),
        ("VOTE: TARIFF", set()),
        ("Round 3: I vote OPEN.", set()),  # a round number is not a payoff
        ("Going with TARIFF protects us here.", set()),  # a feeling, not a reason grounded in the game
    ],
)
def test_reading_finds_the_reasons_grounded_in_the_game(text: str, kinds: set[str]) -> None:
    assert read(text).reasons == kinds


def test_history_counts_only_after_a_past_round_and_quotes_and_choice_words_are_not_read() -> None:
    assert read("They defected last round.", has_history=False).reasons == frozenset()
    assert read("They defected last round.").reasons == {HISTORY}
    # A teammate quoted (here to be answered) is not the speaker's own argument.
    assert read('A2 said "we get +6 points while they lose 6". I vote OPEN.').reasons == frozenset()
    assert read("“Both sides gain together,” someone said.").reasons == frozenset()
    # The frame's choice words are not read: a frame whose cooperative choice is SHARE does not argue by naming it.
    assert read_argument("I vote SHARED.", ignore=("SHARED", "HOARD")).reasons == frozenset()
    assert read_argument("I vote SHARED.").reasons == {WELFARE}


def test_repeating_a_reason_or_padding_the_text_adds_nothing() -> None:
    once = read("Both sides gain together. I vote OPEN.")
    assert read(" ".join(["Both sides gain together."] * 50) + " I vote OPEN.").reasons == once.reasons
    padded = read(" ".join(FILLER_SENTENCES * 5) + " Both sides gain together. I vote OPEN.")
    assert padded.reasons == once.reasons and padded.words > 20 * once.words
    assert MODEL.weight(padded) == MODEL.weight(once)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "\n\t", "!!!???...", '"unclosed quote', "“", "\x00\x01\x02", "ÄÖÜ ß ✓ 勝つ", "+", "x", "9" * 500,
     "-" * 1000, "I vote OPEN." * 3],
)  # fmt: skip
def test_reading_is_robust_to_odd_input(text: str) -> None:
    reading = read(text)
    assert reading.reasons <= set(REASON_KINDS) and reading.words >= 0
    with pytest.raises(TypeError):
        read_argument(None)  # type: ignore[arg-type]


def test_reading_is_linear_in_the_text() -> None:
    unit = "Both sides gain together, and the points add up over the next round. " * 10
    start = time.perf_counter()
    small = read(unit * 100)
    small_s = time.perf_counter() - start
    start = time.perf_counter()
    large = read(unit * 1000)
    large_s = time.perf_counter() - start
    assert small.reasons == large.reasons == {WELFARE, PAYOFF, REPEATED}
    assert large.words == 10 * small.words
    assert large_s < 5.0 and large_s < 30 * max(small_s, 1e-3)  # ten times the text, not a hundred times the time


@pytest.mark.parametrize("frame", list_frames())
def test_every_tutor_sentence_gives_exactly_its_kind_and_filler_none_in_every_frame(frame: str) -> None:
    f = load_frame(frame)
    words = {"coop": f.cooperate.label, "defect": f.defect.label, "them": f.team_names["B"], "us": f.team_names["A"]}
    labels = (f.cooperate.label, f.defect.label)
    for choice, kinds in REASON_SENTENCES.items():
        for kind, pool in kinds.items():
            for sentence in pool:
                text = sentence.format(**words)
                assert read_argument(text, ignore=labels).reasons == {kind}, text
                assert read_choice(f"{text} I vote {f.label(choice)}.", f) == choice  # still states its choice
    for sentence in FILLER_SENTENCES:
        assert read_argument(sentence, ignore=labels).reasons == frozenset(), sentence
    assert read_argument(f.mute_sentence, ignore=labels).reasons == frozenset()  # the mute arm's sentence
    assert (
        read_argument(f.team_names["A"] + " " + f.team_names["B"]).reasons == frozenset()
    )  # team names give no reason


def test_the_principled_cooperator_argues_from_grounded_reasons() -> None:
    fill = dict(WORDS, pair=6, m=3, gain=18, last_pair=6, coop_desc="keep tariffs low")
    for pool in (OPENINGS, AFTER_MUTUAL, AFTER_EXPLOITED, STAKES):
        for sentence in pool:
            assert read(sentence.format(**fill)).reasons, sentence
    assert all(not read(c.format(**fill)).reasons - {WELFARE} for c in CLOSINGS)


def test_history_reasons_are_offered_only_when_true() -> None:
    assert HISTORY not in available_reasons(BLACK, None) and HISTORY not in available_reasons(RED, None)
    assert HISTORY in available_reasons(BLACK, BLACK) and HISTORY not in available_reasons(BLACK, RED)
    assert HISTORY in available_reasons(RED, RED) and WELFARE not in available_reasons(RED, RED)


# ------------------------------------------------------------------------------------------ decision rule
def test_the_prior_decides_when_nothing_is_heard() -> None:
    for prior in (0.0, 0.15, 0.3, 0.45, 1.0):
        assert MODEL.p_black(prior) == pytest.approx(prior, abs=1e-8)
    assert MODEL.decide(0.3, [], 0.29) == BLACK and MODEL.decide(0.3, [], 0.31) == RED


def test_a_bare_vote_moves_little_and_length_without_reasons_no_more() -> None:
    bare = MODEL.p_black(0.3, [heard("I vote OPEN.", BLACK)])
    assert 0.3 < bare < 0.37
    long = MODEL.p_black(0.3, [heard(" ".join(FILLER_SENTENCES) + " I vote OPEN.", BLACK)])
    assert long == bare
    # Four teammates' bare votes (a unanimous team) weigh as one reason: they bring a teammate of prior 0.3 to
    # about even, and do not turn the most selfish one (0.15).
    four = [heard("I vote OPEN.", BLACK)] * 4
    assert MODEL.log_odds(0.3, four) - MODEL.log_odds(0.3, []) == pytest.approx(MODEL.reason_weight)
    assert 0.45 < MODEL.p_black(0.3, four) < 0.55
    assert MODEL.p_black(0.15, four) < 0.35


def test_grounded_reasons_move_and_a_counter_argument_pulls_back() -> None:
    argued = MODEL.p_black(0.3, [heard(ARGUMENT, BLACK)])
    assert read(ARGUMENT).reasons == {PAYOFF, WELFARE}
    assert argued > 0.75  # two reasons outweigh a selfish prior
    countered = MODEL.p_black(0.3, [heard(ARGUMENT, BLACK), heard(COUNTER, RED)])
    assert read(COUNTER).reasons == {PAYOFF, REPEATED}
    assert countered == pytest.approx(0.3)  # as grounded an answer cancels it
    assert MODEL.p_black(0.3, [heard(COUNTER, RED)]) < 0.1
    # A counter of a bare vote pulls back only a little.
    assert argued - MODEL.p_black(0.3, [heard(ARGUMENT, BLACK), heard("I vote TARIFF.", RED)]) < 0.07


def test_the_worked_examples_of_the_docstring_hold() -> None:
    def said(choice: str, reasons: int) -> Heard:
        return Heard(choice=choice, reading=Reading(reasons=frozenset(REASON_KINDS[:reasons]), words=9))

    table = {
        (): (0.15, 0.3, 0.45),
        (said(BLACK, 0),): (0.18, 0.35, 0.51),
        (said(BLACK, 1),): (0.38, 0.6, 0.74),
        (said(BLACK, 2),): (0.63, 0.8, 0.89),
        (said(BLACK, 3),): (0.82, 0.92, 0.95),
        (said(BLACK, 2), said(RED, 2)): (0.15, 0.3, 0.45),
        (said(RED, 2),): (0.02, 0.04, 0.08),
    }
    for heard_, row in table.items():
        assert [round(MODEL.p_black(p, heard_), 2) for p in PERSUADABLE_PRIORS] == list(row), heard_
    assert Persuasion.__doc__ is not None and "| BLACK with two | 0.63 | 0.8 | 0.89 |" in Persuasion.__doc__


def test_memory_discounts_earlier_rounds() -> None:
    old = [heard(ARGUMENT, BLACK, age=1)]
    assert MODEL.p_black(0.3, old) == pytest.approx(0.3)  # the default: this round's discussion only
    remembering = Persuasion(memory=0.5)
    assert 0.3 < remembering.p_black(0.3, old) < remembering.p_black(0.3, [heard(ARGUMENT, BLACK)])


def test_model_parts_check_their_values() -> None:
    with pytest.raises(ValueError, match="memory"):
        Persuasion(memory=1.5)
    with pytest.raises(ValueError, match="reason_weight"):
        Persuasion(reason_weight=-1.0)
    with pytest.raises(ValueError, match="vote_weight"):
        Persuasion(vote_weight=math.nan)
    with pytest.raises(ValueError, match="choice"):
        Heard(choice="GREEN", reading=NO_REASON)
    with pytest.raises(ValueError, match="age"):
        Heard(choice=BLACK, reading=NO_REASON, age=-1)
    with pytest.raises(ValueError, match="unknown reason kinds"):
        Reading(reasons=frozenset({"charm"}), words=1)
    with pytest.raises(ValueError, match="prior"):
        MODEL.p_black(1.2)
    with pytest.raises(ValueError, match="draw"):
        MODEL.decide(0.3, [], 2.0)
    with pytest.raises(TypeError):
        Persuasion(0.5)  # type: ignore[misc]  # keyword-only


# ------------------------------------------------------------------------------ the persuadable tutor


def play(agents: Mapping[str, Agent], scenario: RedBlackScenario, seed_: int = 0) -> EpisodeResult:
    return asyncio.run(run_episode(RedBlackEnv(), agents, scenario, seed=seed_, turn_timeout=5))


def tutor_votes(first_text: str, first_choice: str, seeds: range) -> list[str]:
    """The round-1 vote of a selfish persuadable tutor (prior 0.3, seat A1) after A0 said `first_text`; the
    other seats say nothing that states a choice."""
    sc = RedBlackScenario("t:0", frame="trade_war", team_size=3, rounds=1, multipliers={}, discussion_order="rotating")
    votes = []
    for s in seeds:
        agents: dict[str, Agent] = {
            "A0": Says(first_text, first_choice),
            "A1": FormatTutor(s, kind=PERSUADABLE, prior=0.3),
            "A2": Says("Hmm.", RED),
            **make_strategy_team("always_cooperate", sc.seats("B")),
        }
        votes.append(play(agents, sc).outcome.metrics["vote_histories"]["A1"][0])
    return votes


def test_a_persuadable_tutor_follows_reasons_not_votes_or_length() -> None:
    seeds = range(60)
    bare = tutor_votes("I vote OPEN.", BLACK, seeds)
    long = tutor_votes(" ".join(FILLER_SENTENCES[:3]) + " I vote OPEN.", BLACK, seeds)
    argued = tutor_votes(ARGUMENT, BLACK, seeds)
    countered = tutor_votes(COUNTER, RED, seeds)
    assert long == bare  # the same draws: length without reasons weighs exactly as a bare vote
    # Paired by the tutor's draw: an argument never turns a BLACK vote RED, and turns many RED votes BLACK.
    assert all(a == BLACK for a, b in zip(argued, bare, strict=True) if b == BLACK)
    assert argued.count(BLACK) - bare.count(BLACK) >= 20
    assert bare.count(BLACK) <= 30 and countered.count(BLACK) <= bare.count(BLACK)


def test_persuadable_tutors_cannot_be_mirrored_and_settings_check_the_mix() -> None:
    with pytest.raises(ValueError, match="mirrored"):
        FormatTutor(0, kind=PERSUADABLE, mirror=True)
    with pytest.raises(ValueError, match="filler_rate"):
        FormatTutor(0, kind="majority", filler_rate=0.2)
    with pytest.raises(ValueError, match="reason_rate"):
        FormatTutor(0, kind=PERSUADABLE, reason_rate=0.8, filler_rate=0.3)
    with pytest.raises(ValueError, match="warmup_mirror"):
        dataclasses.replace(SMOKE, warmup_mirror=True)  # the default mix is persuadable
    with pytest.raises(ValueError, match="warmup_priors"):
        dataclasses.replace(SMOKE, warmup_priors=(0.2, 1.5))
    with pytest.raises(ValueError, match="warmup_filler_rate"):
        dataclasses.replace(SMOKE, warmup_reason_rate=0.9, warmup_filler_rate=0.2)
    assert YoaoSettings().warmup_tutors == DEFAULT_TUTORS == (PERSUADABLE,)
    assert get_profile("cpu").yoao.warmup_tutors == DEFAULT_TUTORS and not get_profile("cpu").yoao.warmup_mirror
    assert sum(PERSUADABLE_PRIORS) / len(PERSUADABLE_PRIORS) < 0.5  # they lean selfish


def test_warmup_data_of_persuadable_tutors_leans_selfish_and_shows_reasons_moving_votes() -> None:
    settings = dataclasses.replace(SMOKE, warmup_games=20, rounds=5, team_size=5)
    traces = seed.format_warmup_traces(settings)
    black, red = seed.vote_balance(traces.traces)
    assert black + red == 20 * 5 * 5 and 0.05 < black / (black + red) < 0.4  # no mirror: the data leans selfish
    assert {t.agent.split("kind=")[1].split(",")[0] for t in traces.traces} == {PERSUADABLE}
    statements = [m["content"] for t in traces.traces for m in t.messages if m["role"] == "assistant"]
    statements = [s for s in statements if not s.startswith("VOTE")]
    readings = [read_argument(s, ignore=[w for f in settings.train_frames for w in _labels(f)]) for s in statements]
    argued = sum(bool(r.reasons) for r in readings) / len(readings)
    filler = sum(any(f in s for f in FILLER_SENTENCES) for s in statements) / len(statements)
    assert 0.35 < argued < 0.65 and 0.1 < filler < 0.4  # reason_rate 0.5, filler_rate 0.25, the rest bare
    # Both colours are argued for in the data (the LLM sees grounded BLACK reasons too).
    assert any(r.reasons and "I vote" in s and s.split("I vote ")[-1].rstrip(".") in _coop_labels(settings)
               for s, r in zip(statements, readings, strict=True))  # fmt: skip


def _labels(frame: str) -> tuple[str, str]:
    f = load_frame(frame)
    return f.cooperate.label, f.defect.label


def _coop_labels(settings: YoaoSettings) -> set[str]:
    return {load_frame(f).cooperate.label for f in settings.train_frames}


# ------------------------------------------------------------------------------------------ scripted seeds
def test_scripted_seeds_state_their_choice_with_reasons_or_with_length_only() -> None:
    sc = RedBlackScenario("t:0", frame="trade_war", team_size=3, rounds=2, multipliers={}, discussion_order="rotating")
    seeds = {
        "A0": ScriptedSeed(0, choice=BLACK, speech="filler"),
        "A1": ScriptedSeed(1, choice=RED, speech="reasons"),
        "A2": PrincipledCooperator(2),
    }
    result = asyncio.run(
        run_episode(RedBlackEnv(), {**seeds, **make_strategy_team("always_defect", sc.seats("B"))}, sc, seed=0,
                    turn_timeout=5, keep_inboxes=True)
    )  # fmt: skip
    m = result.outcome.metrics
    assert m["vote_histories"]["A0"] == [BLACK, BLACK] and m["vote_histories"]["A1"] == [RED, RED]
    said = {seat: [e.data["text"] for e in result.inboxes["A2"] if getattr(e, "sender", None) == seat
                   and e.data.get("event") == "opinion"] for seat in ("A0", "A1")}  # fmt: skip
    filler, cooperator = said["A0"][0], seeds["A2"]
    assert read(filler).reasons == frozenset() and len(filler.split()) >= 45  # as long as an argument
    assert read(said["A1"][0], has_history=False).reasons == {PAYOFF, REPEATED}  # round 1: no history yet
    assert HISTORY in read(said["A1"][1]).reasons  # round 2: B chose RED, so a true history reason
    assert isinstance(cooperator, PrincipledCooperator)
    with pytest.raises(ValueError):
        ScriptedSeed(0, choice=RED, speech="shouting")


# --------------------------------------------------------------------------------------- the audit
AUDIT_SETTINGS = dataclasses.replace(SMOKE, team_size=5, rounds=3, opponents=("always_defect", "tit_for_tat"))


def test_the_audit_plays_paired_arms_and_reports_the_comparisons() -> None:
    audit = run_yoao_incentives(AUDIT_SETTINGS, YoaoIncentiveSettings(min_games=6))
    assert audit.games == 6 and audit.frames == ("trade_war",) and audit.tutors == DEFAULT_TUTORS
    result = audit.as_json()
    for name in ("argue_minus_none", "vote_only_minus_none", "long_minus_none", "argue_minus_vote_only"):
        assert set(result[name]) == {"mean", "ci_low", "ci_high", "games"} and result[name]["games"] == 6
    assert set(result["untrained_cooperation"]) == {"none", "argue", "vote_only", "long", "selfish"}
    # Filler weighs as a bare vote for every tutor, so the two arms are the same games vote for vote.
    assert result["long_minus_vote_only"]["mean"] == 0.0
    assert result["argue_minus_vote_only"]["mean"] > 0.0 and result["selfish_minus_none"]["mean"] < 0.0
    assert result["env_version"].startswith("env-") and result["persuasion"] == dataclasses.asdict(Persuasion())
    assert result["failures"] == audit.failures()


def _audit(none: float, argue_vote: Estimate, long_vote: Estimate) -> YoaoIncentiveAudit:
    zero = Estimate(0.0, -0.1, 0.1, 16)
    comparisons = {name: zero for name in COMPARISONS}
    comparisons.update(argue_minus_vote_only=argue_vote, long_minus_vote_only=long_vote)
    return YoaoIncentiveAudit(
        env_version="env-x", frames=("trade_war",), games=16, tutors=DEFAULT_TUTORS, persuasion=Persuasion(),
        untrained_cooperation=dict.fromkeys(("none", "argue", "vote_only", "long", "selfish"),
                                            Estimate(none, none, none, 16)),
        comparisons=comparisons, settings=YoaoIncentiveSettings(), wall_s=0.0,
    )  # fmt: skip


def test_the_audit_targets() -> None:
    good = Estimate(0.3, 0.1, 0.5, 16)
    assert _audit(0.25, good, Estimate(0.0, 0.0, 0.0, 16)).failures() == []
    failures = _audit(0.5, Estimate(0.1, -0.05, 0.2, 16), Estimate(0.1, 0.02, 0.2, 16)).failures()
    assert len(failures) == 3
    assert "no seed" in failures[0] and "does not beat" in failures[1] and "long text" in failures[2]
    assert _audit(0.2, Estimate(math.nan, math.nan, math.nan, 0), good).failures()  # no interval: not shown
    with pytest.raises(ValueError):
        YoaoIncentiveSettings(min_games=1)
    with pytest.raises(ValueError):
        YoaoIncentiveSettings(calibration_means=(0.1,), calibration_spread=0.15)


def test_prior_calibration_records_the_grid_and_the_mean_in_use() -> None:
    small = YoaoIncentiveSettings(calibration_means=(0.2, 0.5), calibration_games=4)
    calibration = prior_calibration(dataclasses.replace(SMOKE, team_size=5, rounds=3), small)
    shares = calibration["cooperation_by_mean_prior"]
    assert set(shares) == {"0.2", "0.5"} and shares["0.2"] < shares["0.5"]
    assert calibration["closest_mean"] in (0.2, 0.5) and calibration["target"] == PAPER_UNTRAINED_COOPERATION
    assert calibration["in_use_mean"] == pytest.approx(sum(PERSUADABLE_PRIORS) / 3)


def test_the_result_file_carries_the_audit() -> None:
    audit = run_yoao_incentives(AUDIT_SETTINGS, YoaoIncentiveSettings(min_games=2)).as_json()
    results = report.build_results("smoke", ("trade_war",), 1, {}, {}, {}, {}, None, {}, incentives=audit)
    benchmark = results.benchmark()
    assert tuple(benchmark) == report.BENCHMARK_KEYS and benchmark["yoao_incentives"] == audit
    empty = report.build_results("smoke", ("trade_war",), 1, {}, {}, {}, {}, None, {}).benchmark()
    assert empty["yoao_incentives"] == {}
    text = report.benchmark_markdown({**benchmark, "untrained_cooperation": {}})
    assert "Incentive audit before training" in text and "argue - vote only" in text
    assert "Incentive audit" not in report.benchmark_markdown({**empty, "untrained_cooperation": {}})


def test_vote_following_mix_is_still_available() -> None:
    assert set(VOTE_FOLLOWING_TUTORS) == {"majority", "last_speaker", "strongest_argument", "prior"}
    traces = seed.format_warmup_traces(
        dataclasses.replace(SMOKE, warmup_games=2, warmup_tutors=VOTE_FOLLOWING_TUTORS, warmup_mirror=True)
    )
    black, red = seed.vote_balance(traces.traces)
    assert black == red


def test_tutor_sentences_give_every_kind_for_black_and_no_welfare_for_red() -> None:
    assert set(REASON_SENTENCES[BLACK]) == set(REASON_KINDS)
    assert set(REASON_SENTENCES[RED]) == {PAYOFF, REPEATED, HISTORY}
    assert isinstance(MuteWrapper(PrincipledCooperator(0)).sentence, str)
