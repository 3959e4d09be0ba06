"""YOAO propagation that can propagate: warm-up tutors whose votes depend on what they hear, the
untrained players' outcomes and the vote-arithmetic null, mute that can differ from unmuted, the warm-starts'
imitation measures, the result file's keys, Sugarscape left out with its reason, the leaderboard's Red-Black
order and rates."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping

import pytest

from agents.yoao.llm_players import SwapAgent
from agents.yoao.red_black_strategies import MuteWrapper, make_strategy_team
from agents.yoao.red_black_teacher import (
    TUTOR_REASONS,
    VOTE_FOLLOWING_TUTORS,
    FormatTutor,
    PrincipledCooperator,
    argument_words,
    strongest_argument,
)
from environments.core.runtime import Agent, EpisodeResult, run_episode
from environments.yoao.red_black import BLACK, RED, RedBlackEnv, RedBlackScenario
from models.profiles import get_profile
from models.training.config import SFTCheckpoint, SFTResult
from models.yoao import plots as yoao_plots
from models.yoao import report, seed
from models.yoao.experiments import (
    ExperimentSetup,
    PlayerModels,
    later_arms,
    propagation_by_seed_count,
    propagation_mute,
    propagation_persistence,
    propagation_prompting_baseline,
)
from models.yoao.games import (
    GameRecord,
    paired_cooperation_difference,
    paired_untrained_difference,
    vote_arithmetic,
)
from models.yoao.imitation import replay_turns, score_replies
from models.yoao.seed.training import eval_curve, heldout_count, split_eval
from models.yoao.sugarscape import SugarscapeResult, WorldRecord, sugarscape_zero_shot, summarise_fraction

SMOKE = get_profile("smoke").yoao


def play(agents: Mapping[str, Agent], scenario: RedBlackScenario) -> EpisodeResult:
    return asyncio.run(run_episode(RedBlackEnv(), agents, scenario, seed=0, turn_timeout=5, keep_inboxes=True))


def game(rounds: int = 3) -> RedBlackScenario:
    return RedBlackScenario("t:0", frame="trade_war", rounds=rounds, multipliers={}, discussion_order="rotating")


# ------------------------------------------------------------------------------------------- the tutors
def test_argument_weight_ignores_vote_sentences() -> None:
    assert argument_words("I vote OPEN.") == 0
    assert argument_words("For this round, I vote TARIFF.") == 0
    assert argument_words("Working together helps both nations. I vote OPEN.") == 5
    assert strongest_argument([("I vote OPEN.", BLACK), ("They may trick us this round. I vote TARIFF.", RED)]) == RED
    assert strongest_argument([("I vote OPEN.", BLACK), ("I vote TARIFF.", RED)]) is None  # no argument at all
    # Reasons of either colour weigh the same at the same position (a mirrored tutor stays a mirror).
    for black, red in zip(TUTOR_REASONS[BLACK], TUTOR_REASONS[RED], strict=True):
        words = {"them": "X", "coop": "OPEN", "defect": "TARIFF"}
        assert argument_words(black.format(**words)) == argument_words(red.format(**words))


class Says:
    """A scripted teammate: states a fixed text, votes a fixed choice."""

    def __init__(self, text: str, vote: str) -> None:
        self.text, self.vote, self.agent_id = text, vote, ""

    async def reset(self, agent_id, env_id, spec, episode_id) -> None:  # type: ignore[no-untyped-def]
        self.agent_id = agent_id

    async def observe(self, event) -> None:  # type: ignore[no-untyped-def]
        return None

    async def act(self, request):  # type: ignore[no-untyped-def]
        from environments.core.events import RAW_TEXT, Action

        return Action(self.agent_id, RAW_TEXT, f"VOTE: {self.vote}" if "vote" in request.allowed else self.text)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("majority", RED),  # two bare TARIFF against one argued OPEN
        ("last_speaker", RED),  # A4 speaks last in round 1 (A0..A4) and says TARIFF
        ("strongest_argument", BLACK),  # A1's argument outweighs the bare statements
        ("prior", BLACK),  # prior 1: BLACK whatever it heard
    ],
)
def test_each_tutor_kind_votes_by_its_rule(kind: str, expected: str) -> None:
    sc = dataclasses.replace(game(1), team_size=5)
    seats = sc.seats("A")
    agents: dict[str, Agent] = {
        seats[0]: FormatTutor(0, kind=kind, prior=1.0),
        seats[1]: Says("Working together, both nations gain the most from trade. I vote OPEN.", BLACK),
        seats[2]: Says("I vote TARIFF.", RED),
        seats[3]: Says("I vote OPEN.", BLACK),
        seats[4]: Says("I vote TARIFF.", RED),
    }
    # A0 speaks first (hears nothing: states its prior, BLACK) and then votes by its rule over the whole round:
    # stated BLACK, BLACK, RED, BLACK, RED except for the majority rule, which counts its own statement too.
    if kind == "majority":
        agents[seats[3]] = Says("I vote TARIFF.", RED)
    result = play({**agents, **make_strategy_team("always_cooperate", sc.seats("B"))}, sc)
    assert result.outcome.metrics["vote_histories"]["A0"] == [expected]


def test_warmup_data_mixes_listening_tutors_balanced_by_mirrored_games() -> None:
    # The vote-following mix, mirrored (the default is the persuadable tutors, tests/test_yoao_persuasion.py).
    settings = dataclasses.replace(
        SMOKE, warmup_games=16, rounds=5, team_size=5, warmup_tutors=VOTE_FOLLOWING_TUTORS, warmup_mirror=True
    )
    traces = seed.format_warmup_traces(settings)
    black, red = seed.vote_balance(traces.traces)
    assert black == red == 16 * 5 * 5 // 2  # a game and its mirror: exactly balanced
    kinds = [t.agent.split("kind=")[1].split(",")[0] for t in traces.traces]
    assert {k: kinds.count(k) for k in VOTE_FOLLOWING_TUTORS} == dict.fromkeys(VOTE_FOLLOWING_TUTORS, 20)
    # The data's votes depend on what was said: most follow the teammates' stated majority, not all.
    assert 0.7 < traces.follows_majority < 0.98
    # A prior-only mix hears nothing: its votes follow the stated majority about half the time.
    deaf = seed.format_warmup_traces(dataclasses.replace(settings, warmup_tutors=("prior",), warmup_reason_rate=0.0))
    assert 0.35 < deaf.follows_majority < 0.65
    with pytest.raises(ValueError, match="unknown warm-up tutors"):
        dataclasses.replace(settings, warmup_tutors=("parrot",))


# ------------------------------------------------------------------------ the untrained players' outcomes
def record(arm: str, roles: tuple[str, ...], votes: list[list[str | None]], stated: list[list[str | None]],
           key: str = "g:0", removal: int | None = None) -> GameRecord:  # fmt: skip
    """A finished game from votes and statements per round (rows) and seat (columns)."""
    from environments.yoao.red_black import team_choice

    choices = tuple(team_choice(v)[0] for v in votes)
    n = len(roles)
    return GameRecord(
        arm=arm, game_key=key, episode_id=f"{arm}:{key}", frame="trade_war", opponent="x", seed=0, roles=roles,
        team_choices=choices, decided_black=tuple(False for _ in votes), welfare=0.0, max_welfare=1.0, score_a=0.0,
        ties=0, abstentions={}, invalid={}, vote_turns={}, invalid_votes=0, influence_moved_to=0,
        influence_opportunities=0, llm_calls=0, completion_tokens=0,
        seat_votes={f"A{i}": tuple(v[i] for v in votes) for i in range(n)},
        seat_stated={f"A{i}": tuple(s[i] for s in stated) for i in range(n)},
        removal_round=removal,
    )  # fmt: skip


B, R = BLACK, RED


def test_untrained_cooperation_counts_untrained_players_only_and_the_null_is_vote_arithmetic() -> None:
    k0 = record("k=0", ("untrained",) * 3, [[R, R, B], [R, None, R]], [[R, R, B], [R, R, R]])
    # One seed (A0) votes BLACK; A1 follows it in round 1.
    k1 = record("k=1", ("seed", "untrained", "untrained"), [[B, B, B], [B, R, None]], [[B, B, B], [B, R, R]])
    assert k0.untrained_cooperation() == pytest.approx(1 / 5)  # abstentions are not counted votes
    assert k1.untrained_cooperation() == pytest.approx(2 / 3)  # the seed's votes are not the untrained players'
    assert k1.follows("seed") == [True, True, False]  # votes equal to the seed's stated BLACK
    assert k0.follows("seed") == [True, False, True]  # the placebo at k = 0: A0's statement (RED, RED)
    # Round 1: A0 and A1 heard a tie (no target); A2's BLACK did not follow R, R. Round 2: both votes follow.
    assert k0.follows("majority") == [False, True, True]
    # The null: k = 0's votes of A1, A2 with the seed's vote added: round 1 B+R+B -> BLACK, round 2 B+None+R tie
    # -> BLACK. Observed: BLACK both rounds.
    assert k1.vote_arithmetic_null(k0) == 1.0
    null, minus = vote_arithmetic([k1], [k0])
    assert null.mean == 1.0 and minus.mean == 0.0
    assert paired_untrained_difference([k1], [k0]).mean == pytest.approx(2 / 3 - 1 / 5)


def test_after_removal_the_swapped_seats_count_as_untrained() -> None:
    removed = record("k=1 removed", ("swap", "untrained"), [[B, B], [R, B], [R, R]], [[B, B], [R, B], [R, R]],
                     removal=1)  # fmt: skip
    assert removed.role_in(0, 1) == "swap" and removed.role_in(0, 2) == "untrained"
    assert removed.untrained_cooperation(range(2, 4)) == pytest.approx(1 / 4)
    assert removed.untrained_cooperation() == pytest.approx(2 / 5)  # A1 in 3 rounds, A0 in rounds 2-3


def test_what_the_seeds_said_is_counted_in_the_rounds_they_held_the_seeds_place() -> None:
    """A seed that votes BLACK while stating RED (the echo of the cpu run of fa7b2df) shows as such; a removed
    seed's rounds after the removal belong to the untrained member who took its seat; an arm without a seed
    has nothing to count."""
    from models.yoao.statements import seed_statements

    echo = record("k=1", ("seed", "untrained"), [[B, R], [B, R], [None, R]], [[R, R], [R, R], [None, B]])
    said = seed_statements([echo, echo])
    assert (said.statements, said.stated_black, said.stated_red, said.stated_none) == (6, 0, 4, 2)
    assert (said.votes, said.black_votes) == (4, 4)  # the abstention is not a counted vote
    removed = record("k=1 removed", ("swap", "untrained"), [[B, R], [R, R], [R, R]], [[B, R], [R, R], [R, R]],
                     removal=1)  # fmt: skip
    after = seed_statements([removed])
    assert (after.statements, after.stated_black, after.votes, after.black_votes) == (1, 1, 1, 1)
    assert seed_statements([record("k=0", ("untrained",) * 2, [[R, R]], [[R, R]])]) is None
    with pytest.raises(ValueError, match="must equal statements"):
        type(said)(statements=2, stated_black=1, stated_red=0, stated_none=0, votes=0, black_votes=0)


def test_paired_differences_raise_on_unmatched_games() -> None:
    a = [record("k=1", ("seed", "untrained"), [[B, B]], [[B, B]], key=k) for k in ("g:0", "g:1")]
    b = [record("k=0", ("untrained", "untrained"), [[R, R]], [[R, R]], key="g:0")]
    with pytest.raises(ValueError, match="not paired"):
        paired_cooperation_difference(a, b)
    with pytest.raises(ValueError, match="not paired"):
        paired_untrained_difference(a, b)
    with pytest.raises(ValueError, match="not paired"):
        vote_arithmetic(a, b)
    assert paired_cooperation_difference(a[:1], b).mean == 1.0


# -------------------------------------------------------------------------------- mute can differ from unmuted
def listening_players(persistence_rounds: int) -> dict[str, object]:
    """Untrained teammates that follow the strongest argument they hear, else vote RED (their prior)."""

    def listener(seat: str, s: int) -> Agent:
        return FormatTutor(s, kind="strongest_argument", prior=0.0)

    return {
        "untrained": listener,
        "seed": lambda seat, s: PrincipledCooperator(s),
        "muted": lambda seat, s: MuteWrapper(PrincipledCooperator(s)),
        "swap": lambda seat, s: SwapAgent(PrincipledCooperator(s), listener(seat, s), persistence_rounds),
    }


def test_a_muted_seed_does_not_move_teammates_who_listen_to_arguments() -> None:
    settings = dataclasses.replace(
        SMOKE, team_size=5, rounds=4, seed_counts=(0, 1, 3), games_per_arm=3, persistence_seeds=3,
        persistence_rounds=2, opponents=("always_defect", "tit_for_tat"), batch_arms=True, prompting_baseline=False,
    )  # fmt: skip
    models = PlayerModels("http://unused.invalid/v1", "u", "s")
    setup = ExperimentSetup(
        frame="trade_war",
        settings=settings,
        models=models,
        profile="smoke",
        seed_version=1,
        players=listening_players(2),
    )
    by_count = propagation_by_seed_count(setup)
    assert {a.name for a in by_count.ahead_arms} == {"k=1 muted", "k=3 removed"}  # played in the same batch
    untrained = {a.arm: a.untrained_cooperation.mean for a in by_count.arms}
    assert untrained == {"k=0": 0.0, "k=1": 1.0, "k=3": 1.0}
    mute = propagation_mute(setup, by_count)
    assert mute.llm_calls == 0 and {g.episode_id for g in mute.records("k=1 muted")} == {
        g.episode_id for g in by_count.ahead if g.arm == "k=1 muted"
    }  # reused, not replayed
    muted = mute.arm("k=1 muted")
    # The muted seed still votes BLACK, but its bare "I vote OPEN." carries no argument: nobody follows it.
    assert muted.untrained_cooperation.mean == 0.0 and muted.cooperation.mean == 0.0
    assert mute.untrained_comparisons["k=1 muted vs k=1"].mean == -1.0
    persistence = propagation_persistence(setup, by_count)
    # After the seeds leave (round 2), nobody argues any more: the listeners fall back to their prior.
    assert persistence.arm("k=3 removed").untrained_cooperation.mean == 0.0
    assert persistence.untrained_comparisons["removed vs never"].mean == 0.0
    baseline = propagation_prompting_baseline(setup, by_count)
    assert baseline.skipped and not baseline.arms

    results = report.build_results(
        "smoke", ("trade_war",), 1, {"trade_war": by_count}, {"trade_war": mute}, {"trade_war": persistence},
        {"trade_war": baseline}, None, {"a": 1.0}, warmstarts={"passed": True},
    )  # fmt: skip
    benchmark = results.benchmark()
    assert tuple(benchmark) == report.BENCHMARK_KEYS
    arms = {"0", "1", "1_muted", "3", "3_removed"}
    assert set(benchmark["untrained_cooperation"]) == arms
    assert set(benchmark["untrained_cooperation_paired"]) == arms - {"0"}
    for entry in (*benchmark["untrained_cooperation"].values(), *benchmark["untrained_cooperation_paired"].values()):
        assert set(entry) == {"mean", "ci_low", "ci_high", "games"} and entry["games"] == 3
    assert benchmark["untrained_cooperation_paired"]["1"]["mean"] == 1.0
    assert benchmark["untrained_cooperation_paired"]["1_muted"]["mean"] == 0.0
    assert benchmark["abstention"] == dict.fromkeys(arms, 0.0)
    assert benchmark["persuadability_k0"]["games"] == 3 and benchmark["persuadability_k0"]["votes"] > 0
    assert benchmark["follows_seed"]["1"]["mean"] == 1.0 and benchmark["follows_seed"]["1_muted"]["mean"] == 0.0
    # The principled seed states BLACK in each round it speaks; muted, "I vote OPEN." states it too.
    said = benchmark["seed_statements"]
    assert set(said) == arms - {"0"}
    assert said["1"]["stated_black"] == said["1"]["statements"] == 3 * 4 and said["1"]["black_votes"] == 12
    assert said["1_muted"]["stated_black"] == said["1_muted"]["statements"] == 12
    assert said["3_removed"]["statements"] == 3 * 3 * 2  # three seeds, rounds 1-2 only
    # Vote arithmetic: one BLACK seed among four RED votes gives RED; the arguments made the team cooperate.
    assert benchmark["team"]["1"]["vote_arithmetic_null"]["mean"] == 0.0
    assert benchmark["team"]["1"]["observed_minus_null"]["mean"] == 1.0
    assert benchmark["team"]["3"]["observed_minus_null"]["mean"] == 0.0  # three seeds are a majority anyway
    assert benchmark["sugarscape"] == {} and benchmark["warmstarts"] == {"passed": True}
    assert "vote-arithmetic null" in results.markdown()
    # The cpu plan runs no prompting baseline: its plot is left out, not drawn empty (a cpu run failed there).
    pngs = yoao_plots.pooled_plots(results, [by_count])
    assert set(pngs) == {"untrained_cooperation.png", "cooperation_by_seed_count.png", "mute.png", "persistence.png"}
    assert all(png.startswith(b"\x89PNG") for png in pngs.values())


def test_batched_prompting_baseline_is_played_with_the_seed_counts_and_reused() -> None:
    settings = dataclasses.replace(
        SMOKE, team_size=5, rounds=3, seed_counts=(0, 1), games_per_arm=2, persistence_seeds=3,
        persistence_rounds=1, opponents=("always_defect",), batch_arms=True, prompting_baseline=True,
    )  # fmt: skip
    players = listening_players(1)
    # The teacher argues as the seed does; the prompted model here only states its vote, so nobody follows it.
    players |= {"teacher": players["seed"], "prompted": players["muted"]}
    setup = ExperimentSetup(
        frame="trade_war", settings=settings, models=PlayerModels("http://unused.invalid/v1", "u", "s"),
        profile="smoke", seed_version=1, players=players,
    )  # fmt: skip
    by_count = propagation_by_seed_count(setup)
    ahead = {a.name for a in by_count.ahead_arms}
    assert ahead == {"k=1 muted", "k=3", "k=3 removed", "k=1 teacher", "k=1 prompted"}  # k=3: the persistence test
    baseline = propagation_prompting_baseline(setup, by_count)
    assert baseline.llm_calls == 0 and not baseline.skipped  # every arm reused from the batch, none replayed
    assert {g.episode_id for g in baseline.records("k=1 teacher")} == {
        g.episode_id for g in by_count.ahead if g.arm == "k=1 teacher"
    }
    untrained = {a.arm: a.untrained_cooperation.mean for a in baseline.arms}
    assert untrained == {"k=0": 0.0, "k=1": 1.0, "k=1 teacher": 1.0, "k=1 prompted": 0.0}
    without_teacher = dataclasses.replace(setup, players=listening_players(1))
    assert "propagation_prompting_baseline" not in later_arms(without_teacher)
    with pytest.raises(ValueError, match="needs the selected teacher"):
        propagation_prompting_baseline(without_teacher, by_count)


# ------------------------------------------------------------------------------------------- warm-starts
def test_heldout_split_and_learning_curve() -> None:
    assert heldout_count(12, 0.1, unit=5) == 5 and heldout_count(60, 0.1) == 6 and heldout_count(4, 0.1) == 0
    train, held = split_eval([[{"role": "user", "content": str(i)}] for i in range(4)], 2)
    assert len(train) == 2 and [c[0]["content"] for c in held] == ["0", "1"]
    result = SFTResult(
        adapter_dir="x", train_loss=1.0, eval_loss_before=2.0, eval_loss_after=1.0, steps=9, examples=10, wall_seconds=1.0,
        checkpoints=(SFTCheckpoint(3, 0, 1.5, "a"), SFTCheckpoint(6, 0, 1.02, "b"), SFTCheckpoint(9, 0, 1.0, "c")),
    )  # fmt: skip
    assert eval_curve(result) == ((0, 2.0), (3, 1.5), (6, 1.02), (9, 1.0))


def test_replayed_turns_are_scored_against_the_teacher() -> None:
    vote_following = dataclasses.replace(SMOKE, warmup_games=2, warmup_tutors=VOTE_FOLLOWING_TUTORS, warmup_mirror=True)
    traces = seed.format_warmup_traces(vote_following)
    conversations = [t.messages for t in traces.traces]
    turns = replay_turns(conversations)
    assert {t.kind for t in turns} == {"vote", "opinion"} and {t.frame for t in turns} <= set(SMOKE.train_frames)
    assert all(t.context[-1]["role"] == "user" for t in turns)
    perfect = score_replies(turns, [t.teacher for t in turns])
    assert perfect["valid_vote_rate"].mean == 1.0 and perfect["vote_follows_teacher"].mean == 1.0
    assert perfect["principled_rate"].mean == 0.0  # the vote-following tutors give no welfare reasons
    off = score_replies(turns, ["Hmm." for _ in turns])
    assert off["valid_vote_rate"].mean == 0.0 and off["states_choice_rate"].mean == 0.0
    # The default (persuadable) tutors argue, some BLACK statements from the group's welfare: a perfect replay
    # scores the share of their statements the seed-data filter keeps.
    turns = replay_turns(
        [t.messages for t in seed.format_warmup_traces(dataclasses.replace(SMOKE, warmup_games=4)).traces]
    )
    opinions = [t for t in turns if t.kind == "opinion"]
    kept = [seed.classify_turn(t.teacher, "opinion", t.frame).kept for t in opinions]
    perfect = score_replies(turns, [t.teacher for t in turns])
    assert perfect["principled_rate"].mean == pytest.approx(sum(kept) / len(kept))


# ------------------------------------------------------------------------------ profiles and Sugarscape
def test_cpu_profile_sizes_the_paired_arms_and_leaves_sugarscape_out_with_a_reason() -> None:
    cpu = get_profile("cpu").yoao
    assert cpu.games_per_arm >= 16 and set(cpu.seed_counts) >= {0, 1, 3, 5} and cpu.mute_seed_counts == (1,)
    assert cpu.persistence_seeds == 3 and cpu.batch_arms and cpu.prompting_baseline
    assert cpu.sugarscape.skip and "invalid" in cpu.sugarscape.skip
    assert cpu.warmup_sft.checkpoint_every and cpu.seed_sft.checkpoint_every
    paper = get_profile("paper").yoao
    assert paper.prompting_baseline and not paper.sugarscape.skip and set(paper.seed_counts) == set(range(6))
    skipped = sugarscape_zero_shot(cpu.sugarscape, "http://unused.invalid/v1", "s", "u")
    assert isinstance(skipped, SugarscapeResult) and skipped.skipped == cpu.sugarscape.skip and not skipped.worlds


def test_sugarscape_reports_trades_and_invalid_rate() -> None:
    world = WorldRecord(
        fraction=0.5,
        seed=0,
        seeds=(0,),
        encounters=4,
        trades=3,
        tick_encounters=((2, 2), (2, 1)),
        starved=(False, True),
        lifespan=(3, 2),
        leaning_shift=(0.0, 0.1),
        llm_calls=20,
        invalid_actions=5,
        wall_s=1.0,
    )
    share = summarise_fraction(0.5, [world]).as_dict()
    assert share["trades"] == 3 and share["trade_rate"] == pytest.approx(0.75) and share["invalid_rate"] == 0.25
    assert set(report.SUGARSCAPE_KEYS) <= set(share)


# ------------------------------------------------------------------------------------------- leaderboard
def test_leaderboard_red_black_plays_the_paper_order_and_reports_decided_cooperation_and_abstention() -> None:
    from models.cli.leaderboard import red_black_game_rates, red_black_scenarios

    assert {s.discussion_order for s in red_black_scenarios(get_profile("smoke"))} == {"rotating"}
    sc = dataclasses.replace(game(2), team_size=3)
    team = {"A0": Says("I vote OPEN.", BLACK), "A1": Says("I vote OPEN.", "maybe"), "A2": Says("no", RED)}
    result = play({**team, **make_strategy_team("always_defect", sc.seats("B"))}, sc)
    decided, abstention = red_black_game_rates(result)
    assert decided == 0.0  # BLACK 1, RED 1: a tie, BLACK by the rule but not decided
    assert abstention == pytest.approx(1 / 3)
