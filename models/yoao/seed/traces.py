"""Traced Red-Black games on the training frames: the selected teacher's (the seed data before the filter)
and the format tutor's (the untrained teammates' warm-up), each seat traced as the chat an LLM agent sees."""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agents.traces import Trace, TracedAgent
from agents.yoao.llm_players import render_config
from agents.yoao.red_black_strategies import MajorityFollower, MuteWrapper, make_strategy_team
from agents.yoao.red_black_teacher import (
    PERSUADABLE,
    PERSUADABLE_PRIORS,
    TUTOR_PRIORS,
    FormatTutor,
    ScriptedSeed,
    stated_majority,
)
from environments.core.events import Action, Notification
from environments.core.runtime import Agent, EpisodeResult, EpisodeSpec, run_episodes
from environments.yoao.red_black import BLACK, RED, VOTE, RedBlackEnv, load_frame, read_choice
from models.yoao.config import ADVOCATE_KINDS, YoaoSettings
from models.yoao.games import Arm, GameSpec, game_record, llm_agents_in, scenario_for, seat_seed
from models.yoao.seed.selection import TeacherChoice, spread_games

log = logging.getLogger("socialrl.yoao")

ENV_ID = "red-black-v0"


class TurnTracedAgent(TracedAgent):
    """A traced agent that also records the round and kind (opinion or vote) of every reply, in order."""

    def __init__(self, inner: Agent) -> None:
        super().__init__(inner, render_config())
        self.turns: list[dict[str, Any]] = []

    async def act(self, request: Notification) -> Action:
        action = await super().act(request)
        kind = VOTE if VOTE in request.allowed else "opinion"
        self.turns.append({"round": int(request.data.get("round", 0)), "kind": kind})
        return action

    def reasoning(self) -> list[dict[str, Any]]:
        return list(self.turns)


@dataclass(frozen=True)
class TraceSet:
    """Traced games of one agent kind (teacher or tutor) on the training frames."""

    traces: tuple[Trace, ...]
    frames: tuple[str, ...]
    """Frames actually played (every one a training frame)."""
    games: int
    team_cooperation: float
    """Mean share of rounds team A chose BLACK."""
    welfare_points: float
    """Mean collective welfare in points."""
    llm_calls: int
    wall_s: float
    follows_majority: float = math.nan
    """Share of team A's votes equal to the strict majority its other members stated that round (the
    persuadability the data teaches; `GameRecord.follows`)."""
    black_share: float = math.nan
    """Share of team A's counted votes that were BLACK."""
    red_majority_share: float = math.nan
    """Share of the traced seats' rounds in which the other team-A seats' stated choices had a strict RED
    majority: how often the data shows the traced agent facing teammates who argue for the selfish choice."""


def _traced_games(
    games: Sequence[GameSpec],
    settings: YoaoSettings,
    traced_seats: Sequence[int] | Callable[[GameSpec], Sequence[int]],
    make_seat: Callable[[int, GameSpec], Agent],
    prefix: str,
) -> TraceSet:
    """Play `games` with team A's seats from `make_seat(seat index, game)`, tracing `traced_seats` (or the seats
    `traced_seats(game)` names, game by game)."""
    start = time.perf_counter()
    jobs: list[tuple[GameSpec, dict[int, TurnTracedAgent], dict[str, Agent], EpisodeSpec]] = []
    for game in games:
        scenario = scenario_for(game, settings, 0)
        seats = traced_seats(game) if callable(traced_seats) else traced_seats
        traced = {i: TurnTracedAgent(make_seat(i, game)) for i in seats}
        agents: dict[str, Agent] = {
            f"A{i}": traced[i] if i in traced else make_seat(i, game) for i in range(settings.team_size)
        }
        agents.update(make_strategy_team(game.opponent, scenario.seats("B"), game.seed))
        spec = EpisodeSpec(
            make_env=lambda: RedBlackEnv(max_invalid_retries=settings.max_invalid_retries),
            make_agents=lambda agents=agents: agents,
            scenario=scenario,
            seed=game.seed,
            episode_id=f"{prefix}:{game.key}",
        )
        jobs.append((game, traced, agents, spec))
    results: list[EpisodeResult] = asyncio.run(
        run_episodes([j[3] for j in jobs], concurrency=settings.concurrency, turn_timeout=None)
    )
    traces, coop, welfare, calls, follows, black, facing_red = [], [], [], 0, [], [0, 0], []
    team = Arm("traced", ("untrained",) * settings.team_size)
    for (game, traced, agents, _), result in zip(jobs, results, strict=True):
        m = result.outcome.metrics
        record = game_record(team, game, result, agents)
        follows += record.follows("majority")
        black = [black[0] + record.untrained_black()[0], black[1] + record.untrained_black()[1]]
        coop.append(m["team_choices"]["A"].count(BLACK) / len(m["team_choices"]["A"]))
        welfare.append(float(m["welfare"]))
        calls += sum(llm.metrics["calls"] for a in agents.values() for llm in llm_agents_in(a))
        for i, agent in traced.items():
            seat = f"A{i}"
            others = [f"A{j}" for j in range(settings.team_size) if j != i]
            for r in range(len(m["team_choices"]["A"])):
                stated = [c for o in others if (c := record.seat_stated[o][r])]
                facing_red.append(stated_majority(stated) == RED)
            role = result.outcome.roles[seat]
            traces.append(
                Trace(
                    episode_id=f"{result.episode_id}:{seat}",
                    env_id=ENV_ID,
                    seat=seat,
                    agent=agent.describe(),
                    counterpart=game.opponent,
                    scenario_id=f"train:{game.frame}:{game.index}",
                    messages=agent.messages(),
                    reasoning=agent.reasoning(),
                    reward=role.reward,
                    agreement=result.outcome.agreement,
                    leaked=role.leaked,
                    outcome={"frame": game.frame, "team_choices": m["team_choices"]["A"], "welfare": m["welfare"]},
                )
            )
    return TraceSet(
        traces=tuple(traces),
        frames=tuple(sorted({g.frame for g in games})),
        games=len(games),
        team_cooperation=sum(coop) / len(coop) if coop else math.nan,
        welfare_points=sum(welfare) / len(welfare) if welfare else math.nan,
        llm_calls=calls,
        wall_s=time.perf_counter() - start,
        follows_majority=sum(follows) / len(follows) if follows else math.nan,
        black_share=black[0] / black[1] if black[1] else math.nan,
        red_majority_share=sum(facing_red) / len(facing_red) if facing_red else math.nan,
    )


def check_training_frames(frames: Sequence[str]) -> None:
    """Every frame must be a training frame (a frame that does not exist raises FrameError naming it)."""
    held_out = [f for f in frames if load_frame(f).split != "train"]
    if held_out:
        raise ValueError(f"held-out frames {held_out} must never be used for training data")


def seed_traces(
    choice: TeacherChoice, settings: YoaoSettings, engine_url: str, seed: int = 0, engine_key: str | None = None
) -> TraceSet:
    """The selected teacher in `trace_teacher_seats` seats of team A, the rest `trace_teammates` (the warm-up's
    tutors, or code followers that first state RED or BLACK and then follow their team's majority), against the
    scripted opponents on the training frames; every teacher seat traced as the chat an LLM agent in that seat
    sees."""
    check_training_frames(settings.train_frames)
    games = spread_games(settings.train_frames, settings.opponents, settings.trace_games, seed + 1)
    make_teacher = choice.maker(engine_url, settings, engine_key)

    def teammate(i: int, game: GameSpec) -> Agent:
        if settings.trace_teammates == "tutors":
            return warmup_tutor(settings, game.index, i, game.seed, mirror=False)
        return MajorityFollower(first_choice=RED if i % 2 else BLACK, reciprocal=True, noise=0.1, seed=game.seed)

    traced_seats = range(settings.trace_teacher_seats)

    def seat(i: int, game: GameSpec) -> Agent:
        return make_teacher("A0", seat_seed(game, i)) if i in traced_seats else teammate(i, game)

    result = _traced_games(games, settings, traced_seats, seat, f"yoao-traces-{seed}")
    log.info(
        "seed traces: %d traces of %s among %s, team cooperation %.2f, welfare %.1f, facing a RED majority in %.0f%% "
        "of rounds, %.0f s",
        len(result.traces),
        choice.name,
        settings.trace_teammates,
        result.team_cooperation,
        result.welfare_points,
        100 * result.red_majority_share,
        result.wall_s,
    )
    return result


def warmup_tutor(settings: YoaoSettings, game_index: int, seat: int, seed: int, mirror: bool) -> FormatTutor:
    """The format tutor of a seat of a warm-up game: the kinds of `warmup_tutors` cycle over seats and games
    (equal shares), the prior is drawn per seat (from `warmup_priors`, else `PERSUADABLE_PRIORS` for a
    persuadable tutor and `TUTOR_PRIORS` for the others), reasons come with `warmup_reason_rate` (and, persuadable, filler with `warmup_filler_rate`)."""
    kind = settings.warmup_tutors[(game_index + seat) % len(settings.warmup_tutors)]
    priors = settings.warmup_priors or (PERSUADABLE_PRIORS if kind == PERSUADABLE else TUTOR_PRIORS)
    prior = random.Random(f"yoao-tutor-prior:{seed}:{seat}").choice(priors)
    filler = settings.warmup_filler_rate if kind == PERSUADABLE else 0.0
    return FormatTutor(
        seed, kind=kind, prior=prior, reason_rate=settings.warmup_reason_rate, mirror=mirror, filler_rate=filler
    )


def advocate(kind: str, seed: int) -> Agent:
    """A warm-up game's scripted advocate (`YoaoSettings.warmup_advocates`): the incentive audit's scripted seeds
    with the tutors' own sentences (`ScriptedSeed`), never the seed teacher's."""
    if kind == "argue":
        return ScriptedSeed(seed, choice=BLACK, speech="reasons")
    if kind == "vote_only":
        return MuteWrapper(ScriptedSeed(seed, choice=BLACK, speech="reasons"))
    if kind == "long":
        return ScriptedSeed(seed, choice=BLACK, speech="filler")
    if kind == "selfish":
        return ScriptedSeed(seed, choice=RED, speech="reasons")
    raise ValueError(f"unknown advocate {kind!r}; known: {', '.join(ADVOCATE_KINDS)}")


def advocate_seat(settings: YoaoSettings, game_index: int) -> tuple[int, str] | None:
    """(seat, kind) of game `game_index`'s advocate, or None: `warmup_advocate_share` of the games, spread evenly
    over them (the seat rotating, the kinds cycled over the games that have one)."""
    share = settings.warmup_advocate_share
    had_before, had_after = math.floor(game_index * share), math.floor((game_index + 1) * share)
    if had_after == had_before:
        return None
    kinds = settings.warmup_advocates
    return game_index % settings.team_size, kinds[had_before % len(kinds)]


def format_warmup_traces(settings: YoaoSettings, seed: int = 0) -> TraceSet:
    """The format-tutor mix in every seat of team A on the training frames, every seat traced. With
    `warmup_mirror`, games come in pairs, a game and its mirror (every prior draw's colour swapped), so the votes
    are balanced by construction (an odd `warmup_games` leaves the last game without its mirror); without it
    (the default, persuadable tutors) the votes lean as the tutors do. With `warmup_advocate_share`, that share of
    the games has a scripted advocate in one seat (`advocate_seat`), not traced; the summary's rates count team
    A's votes, the advocate's included."""
    check_training_frames(settings.train_frames)
    if settings.warmup_mirror:
        pairs = spread_games(settings.train_frames, settings.opponents, (settings.warmup_games + 1) // 2, seed + 2)
        games = [replace(game, index=2 * game.index + mirror) for game in pairs for mirror in (0, 1)]
        games = games[: settings.warmup_games]

        def tutor(i: int, game: GameSpec) -> Agent:
            return warmup_tutor(settings, game.index // 2, i, seat_seed(game, i), mirror=bool(game.index % 2))
    else:
        games = spread_games(settings.train_frames, settings.opponents, settings.warmup_games, seed + 2)

        def tutor(i: int, game: GameSpec) -> Agent:
            placed = advocate_seat(settings, game.index)
            if placed is not None and placed[0] == i:
                return advocate(placed[1], seat_seed(game, i))
            return warmup_tutor(settings, game.index, i, seat_seed(game, i), mirror=False)

    def traced(game: GameSpec) -> list[int]:
        placed = advocate_seat(settings, game.index)
        return [i for i in range(settings.team_size) if placed is None or i != placed[0]]

    result = _traced_games(games, settings, traced, tutor, f"yoao-warmup-{seed}")
    log.info(
        "format warm-up traces: %d traces, votes following the stated majority %.2f, BLACK share %.2f, %.0f s",
        len(result.traces),
        result.follows_majority,
        result.black_share,
        result.wall_s,
    )
    return result


def trace_frame(trace: Trace) -> str:
    """The frame of a trace (scenario ids are "train:<frame>:<index>")."""
    return str(trace.outcome.get("frame") or trace.scenario_id.split(":")[1])


def vote_balance(traces: Sequence[Trace]) -> tuple[int, int]:
    """(BLACK, RED) votes in the traces (read as the game reads them)."""
    counts: Counter[str | None] = Counter()
    for trace in traces:
        frame = load_frame(trace_frame(trace))
        replies = [m["content"] for m in trace.messages if m["role"] == "assistant"]
        for reply, turn in zip(replies, trace.reasoning, strict=True):
            if turn["kind"] == VOTE:
                counts[read_choice(reply, frame)] += 1
    return counts[BLACK], counts[RED]


def trace_rows(traces: Sequence[Trace], run_id: str) -> list[dict[str, Any]]:
    """Rows of the `traces` table."""
    return [t.row(run_id) for t in traces]
