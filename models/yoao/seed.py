"""The YOAO seed pipeline as plain functions: teacher selection -> seed traces -> filtered seed dataset ->
format-only warm-up of the untrained teammates -> seed agent (LoRA SFT on top of the warm-up).

Teacher selection (`select_teacher`): every candidate plays `selection_games` games as the whole of team A on
the training frames against the scripted opponents (cycled); the candidate with the highest mean collective
welfare (both teams' scores, 150 at most) is selected (the paper: Kimi-K2, 127/150). A candidate whose probe
call fails, or whose every call fails, is skipped with the reason; one whose votes end as abstentions more
often than `max_abstention_rate` is not eligible (a tie counts as BLACK, so abstaining looks like cooperation).
Ties in welfare go to the earlier candidate (the code teacher comes first).

Seed-data filter (`classify_turn`, the rule-based default; `LLMJudge` optional). Each assistant turn of a
teacher trace is an opinion or a vote. Quoted text (a teammate's words between double quotes) and the frame's two
choice words (SHARE is a choice, not an argument) are ignored by the cue rules.

| decision | rule (first that applies) |
| --- | --- |
| drop `defects` | the turn states RED (read exactly as the game reads it) |
| drop `no_choice` | an opinion that states no choice |
| drop `retaliation` | it speaks of retaliating: punish, retaliate, revenge, pay (them) back, teach them a lesson, make them pay, get even, eye for an eye, hit/strike back, payback |
| drop `outcome_only` | it argues from the team's own points, score or winning (points, score, payoff, profit, +6, win, gain, maximise) with no collective-welfare cue |
| drop `no_rationale` | it states BLACK with no collective-welfare cue: together, both sides/teams/of us, collective, combined, joint, mutual, shared, common good, trust, everyone, all of us, each other, welfare, long run/term |
| keep `principled` | it states BLACK with a collective-welfare cue |
| vote: keep `principled_vote` / drop `vote_without_principled_opinion` | a BLACK vote is kept when the seat's opinion in the same round was kept (the vote carries no text of its own to judge) |

The LLM judge (any OpenAI endpoint) decides instead of the rules for opinions that state BLACK (answer KEEP or
DROP; an unreadable answer leaves the rule's decision, counted). `run_sft` trains on every assistant turn of
the conversations it gets, so each conversation is cut before its first dropped turn (the later turns are
counted as `after_drop`): every trained turn is a kept one, in its real context.

Format warm-up (`format_warmup_traces`): the `FormatTutor` code agent fills team A on the training frames,
stating and voting a fair coin each round without rationale; a LoRA adapter SFT'd on those games teaches the
untrained teammates the answer format (valid votes) but no disposition (their votes stay balanced between
colours). The seed adapter continues that adapter, so seed and untrained teammates differ only by the
cooperative training.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agents.llm_agent import LLMAgent
from agents.traces import Trace, TracedAgent
from agents.yoao.llm_players import red_black_config, render_config
from agents.yoao.red_black_strategies import MajorityFollower, make_strategy_team
from agents.yoao.red_black_teacher import FormatTutor, PrincipledCooperator
from environments.core.events import Action, Notification
from environments.core.runtime import Agent, EpisodeResult, EpisodeSpec, run_episodes
from environments.yoao.red_black import BLACK, RED, VOTE, RedBlackEnv, list_frames, load_frame, read_choice
from models.evaluation.stats import Estimate
from models.training.config import SFTResult, SFTSettings
from models.yoao.config import ENGINE, Endpoint, YoaoSettings
from models.yoao.games import Arm, ArmPlay, GameSpec, Maker, llm_agents_in, play_arms, scenario_for, summarise

log = logging.getLogger("socialrl.yoao")

ENV_ID = "red-black-v0"
CODE_TEACHER = "code-teacher"
SEED_MODEL_NAME = "yoao-seed"
"""Registry name of the seed adapter."""
WARMUP_MODEL_NAME = "yoao-format-warmup"
"""Registry name of the untrained teammates' format-only warm-up adapter."""


# ------------------------------------------------------------------------------------ teacher selection
@dataclass(frozen=True)
class TeacherChoice:
    """A teacher, rebuildable in any later run: the code teacher or an LLM behind an endpoint."""

    name: str
    kind: str
    """"code" or "llm"."""
    base_url: str = ""
    """LLM only: an OpenAI base URL, or "engine" for the run's own engine (through the proxy)."""
    model: str = ""
    cooperative_prompt: bool = False
    """LLM only: whether it plays with the cooperative meta-prompt."""
    api_key_env: str | None = None

    def maker(self, engine_url: str, settings: YoaoSettings, engine_key: str | None = None) -> Maker:
        """(seat, seed) -> the teacher's agent; `engine_key` is the token of `engine_url` (the proxy's)."""
        if self.kind == "code":
            return lambda seat, seed: PrincipledCooperator(seed)
        local = self.base_url == ENGINE
        url = engine_url if local else self.base_url

        def make(seat: str, seed: int) -> Agent:
            config = red_black_config(
                url,
                self.model,
                seed=seed,
                cooperative_prompt=self.cooperative_prompt,
                max_tokens=settings.max_new_tokens,
                temperature=settings.temperature,
                api_key_env=self.api_key_env,
                name=self.name,
                api_key=engine_key if local else None,
            )
            return LLMAgent(config)

        return make


@dataclass(frozen=True)
class TeacherCandidate:
    """A candidate teacher for selection."""

    choice: TeacherChoice
    make: Maker
    probe: Callable[[], str | None] | None = None
    """Returns why the candidate cannot play (None when it can); called once before its games."""


def probe_endpoint(
    base_url: str, model: str, api_key_env: str | None = None, timeout_s: float = 30.0, api_key: str | None = None
) -> str | None:
    """None when the endpoint answers a one-token chat request, else why not."""
    import os

    headers = {}
    key = api_key or (os.environ.get(api_key_env) if api_key_env else None)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    body = {"model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1}
    try:
        response = httpx.post(f"{base_url.rstrip('/')}/chat/completions", json=body, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    return None


def teacher_candidates(
    settings: YoaoSettings, engine_url: str, base_model: str = "base", engine_key: str | None = None
) -> list[TeacherCandidate]:
    """The code teacher (first: the embedded default), the engine's base model without and with the
    cooperative meta-prompt (when `local_candidates`), and every configured endpoint with the meta-prompt.
    `engine_key` is the token of `engine_url` (the rollout proxy's)."""
    choices = [TeacherChoice(CODE_TEACHER, "code")]
    if settings.local_candidates:
        choices += [
            TeacherChoice("engine:base", "llm", ENGINE, base_model, cooperative_prompt=False),
            TeacherChoice("engine:base+meta-prompt", "llm", ENGINE, base_model, cooperative_prompt=True),
        ]
    choices += [
        TeacherChoice(f"{e.name}+meta-prompt", "llm", e.base_url, e.model, True, e.api_key_env)
        for e in settings.teacher_endpoints
    ]
    candidates = []
    for choice in choices:
        probe = None
        if choice.kind == "llm":
            local = choice.base_url == ENGINE
            url = engine_url if local else choice.base_url
            key = engine_key if local else None

            def probe(url: str = url, choice: TeacherChoice = choice, key: str | None = key) -> str | None:
                return probe_endpoint(url, choice.model, choice.api_key_env, api_key=key)

        candidates.append(TeacherCandidate(choice, choice.maker(engine_url, settings, engine_key), probe))
    return candidates


def spread_games(frames: Sequence[str], opponents: Sequence[str], n: int, seed: int = 0) -> list[GameSpec]:
    """`n` games over the (frame, opponent) combinations: game i plays frames[i mod F] against
    opponents[(i + i div F) mod O]. The first games already meet different opponents, and F x O games cover
    every combination once when F + 1 and O have no common divisor (6 training frames, 10 opponents: 7 and 10)."""
    f, o = len(frames), len(opponents)
    return [
        GameSpec(frames[i % f], opponents[(i + i // f) % o], i, (seed * 1_000_003 + 7_919 * i + 13) % 2**31)
        for i in range(n)
    ]


@dataclass(frozen=True)
class CandidateRow:
    """One line of the selection table."""

    name: str
    kind: str
    status: str
    """"selected", "eligible", "ineligible" or "skipped"."""
    reason: str
    games: int
    welfare_points: Estimate
    """Mean collective welfare in points (150 = full mutual cooperation in the paper's game)."""
    cooperation: Estimate
    abstention_rate: float
    invalid_vote_rate: float
    llm_calls: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "reason": self.reason,
            "games": self.games,
            "welfare_points": self.welfare_points.as_dict(),
            "cooperation": self.cooperation.as_dict(),
            "abstention_rate": None if math.isnan(self.abstention_rate) else self.abstention_rate,
            "invalid_vote_rate": None if math.isnan(self.invalid_vote_rate) else self.invalid_vote_rate,
            "llm_calls": self.llm_calls,
        }


@dataclass(frozen=True)
class TeacherSelection:
    """The selection table and the selected teacher."""

    rows: tuple[CandidateRow, ...]
    selected: TeacherChoice
    wall_s: float

    def table_markdown(self) -> str:
        lines = [
            "| candidate | status | welfare (points) [95% CI] | cooperation | abstention | invalid votes | games | reason |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in self.rows:
            w = r.welfare_points
            lines.append(
                f"| {r.name} | {r.status} | {_fmt(w.mean, 1)} [{_fmt(w.ci_low, 1)}, {_fmt(w.ci_high, 1)}] | "
                f"{_fmt(r.cooperation.mean)} | {_fmt(r.abstention_rate)} | {_fmt(r.invalid_vote_rate)} | {r.games} | "
                f"{r.reason} |"
            )
        return "\n".join(lines)


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


_NO_ESTIMATE = Estimate(math.nan, math.nan, math.nan, 0)


def select_teacher(candidates: Sequence[TeacherCandidate], settings: YoaoSettings, seed: int = 0) -> TeacherSelection:
    """Play every candidate as team A and pick the best eligible one by collective welfare (module docstring)."""
    if not candidates:
        raise ValueError("no teacher candidates")
    start = time.perf_counter()
    games = spread_games(settings.train_frames, settings.opponents, settings.selection_games, seed)
    skipped: dict[str, str] = {}
    playing = []
    for candidate in candidates:
        probe_start = time.perf_counter()
        reason = candidate.probe() if candidate.probe is not None else None
        log.info(
            "teacher candidate %s: probe %s in %.1f s",
            candidate.choice.name,
            reason or "ok",
            time.perf_counter() - probe_start,
        )
        if reason:
            skipped[candidate.choice.name] = f"endpoint failed: {reason}"
            log.info("teacher candidate %s skipped: %s", candidate.choice.name, reason)
        else:
            playing.append(candidate)
    arms = [Arm(c.choice.name, (f"candidate{i}",) * settings.team_size) for i, c in enumerate(playing)]
    makers = {f"candidate{i}": c.make for i, c in enumerate(playing)}
    plays = play_arms(arms, games, makers, settings, f"yoao-selection-{seed}") if arms else []
    results: dict[str, ArmPlay] = {p.arm.name: p for p in plays}
    rows: list[CandidateRow] = []
    best: tuple[float, int] | None = None
    for index, candidate in enumerate(candidates):
        name = candidate.choice.name
        if name in skipped:
            rows.append(
                CandidateRow(
                    name,
                    candidate.choice.kind,
                    "skipped",
                    skipped[name],
                    0,
                    _NO_ESTIMATE,
                    _NO_ESTIMATE,
                    math.nan,
                    math.nan,
                    0,
                )
            )
            continue
        play = results[name]
        summary = summarise(play)
        welfare = Estimate(
            summary.welfare.mean * play.games[0].max_welfare,
            summary.welfare.ci_low * play.games[0].max_welfare,
            summary.welfare.ci_high * play.games[0].max_welfare,
            summary.welfare.n,
        )
        errors = sum(g.request_errors for g in play.games)
        status, reason = "eligible", ""
        if play.llm_calls and errors >= play.llm_calls:
            status, reason = "skipped", f"every call failed ({errors} request errors)"
        elif summary.abstention_rate > settings.max_abstention_rate:
            status = "ineligible"
            reason = f"abstention rate {summary.abstention_rate:.2f} > {settings.max_abstention_rate:.2f}"
        elif best is None or welfare.mean > best[0]:
            best = (welfare.mean, index)
        rows.append(
            CandidateRow(
                name,
                candidate.choice.kind,
                status,
                reason,
                len(play.games),
                welfare,
                summary.cooperation,
                summary.abstention_rate,
                summary.invalid_vote_rate,
                play.llm_calls,
            )
        )
    if best is None:
        raise RuntimeError("no eligible teacher candidate:\n" + "\n".join(f"{r.name}: {r.reason}" for r in rows))
    chosen = candidates[best[1]].choice
    rows = [
        CandidateRow(**{**r.__dict__, "status": "selected"}) if r.name == chosen.name else r  # type: ignore[arg-type]
        for r in rows
    ]
    log.info("teacher selection: %s (%.1f welfare points)", chosen.name, best[0])
    return TeacherSelection(tuple(rows), chosen, time.perf_counter() - start)


# ------------------------------------------------------------------------------------------ traces
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


def _traced_games(
    games: Sequence[GameSpec],
    settings: YoaoSettings,
    traced_seats: Sequence[int],
    make_traced: Callable[[int], Agent],
    make_other: Callable[[int, int], Agent],
    prefix: str,
) -> TraceSet:
    start = time.perf_counter()
    jobs: list[tuple[GameSpec, dict[int, TurnTracedAgent], dict[str, Agent], EpisodeSpec]] = []
    for game in games:
        scenario = scenario_for(game, settings, 0)
        traced = {i: TurnTracedAgent(make_traced(game.seed * 7 + i)) for i in traced_seats}
        agents: dict[str, Agent] = {
            f"A{i}": traced[i] if i in traced else make_other(i, game.seed) for i in range(settings.team_size)
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
    traces, coop, welfare, calls = [], [], [], 0
    for (game, traced, agents, _), result in zip(jobs, results, strict=True):
        m = result.outcome.metrics
        coop.append(m["team_choices"]["A"].count(BLACK) / len(m["team_choices"]["A"]))
        welfare.append(float(m["welfare"]))
        calls += sum(llm.metrics["calls"] for a in agents.values() for llm in llm_agents_in(a))
        for i, agent in traced.items():
            seat = f"A{i}"
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
    )


def check_training_frames(frames: Sequence[str]) -> None:
    """Every frame must be a training frame (a frame that does not exist raises FrameError naming it)."""
    held_out = [f for f in frames if load_frame(f).split != "train"]
    if held_out:
        raise ValueError(f"held-out frames {held_out} must never be used for training data")


def seed_traces(
    choice: TeacherChoice, settings: YoaoSettings, engine_url: str, seed: int = 0, engine_key: str | None = None
) -> TraceSet:
    """The selected teacher in `trace_teacher_seats` seats of team A (the rest: untrained-like followers that
    first state RED or BLACK and then follow their team's majority), against the scripted opponents on the
    training frames; every teacher seat traced as the chat an LLM agent in that seat sees."""
    check_training_frames(settings.train_frames)
    games = spread_games(settings.train_frames, settings.opponents, settings.trace_games, seed + 1)
    make_teacher = choice.maker(engine_url, settings, engine_key)

    def follower(i: int, game_seed: int) -> Agent:
        return MajorityFollower(first_choice=RED if i % 2 else BLACK, reciprocal=True, noise=0.1, seed=game_seed)

    traced_seats = range(settings.trace_teacher_seats)
    result = _traced_games(
        games, settings, traced_seats, lambda s: make_teacher("A0", s), follower, f"yoao-traces-{seed}"
    )
    log.info(
        "seed traces: %d traces of %s, team cooperation %.2f, welfare %.1f, %.0f s",
        len(result.traces),
        choice.name,
        result.team_cooperation,
        result.welfare_points,
        result.wall_s,
    )
    return result


def format_warmup_traces(settings: YoaoSettings, seed: int = 0) -> TraceSet:
    """The format tutor in every seat of team A on the training frames, every seat traced."""
    check_training_frames(settings.train_frames)
    games = spread_games(settings.train_frames, settings.opponents, settings.warmup_games, seed + 2)
    seats = range(settings.team_size)
    result = _traced_games(games, settings, seats, FormatTutor, lambda i, s: FormatTutor(s), f"yoao-warmup-{seed}")
    log.info("format warm-up traces: %d traces, %.0f s", len(result.traces), result.wall_s)
    return result


# ------------------------------------------------------------------------------------------ the filter
_QUOTED = re.compile(r'"[^"\n]*"')
_RETALIATION = re.compile(
    r"\b(?:punish\w*|retaliat\w*|revenge\w*|pay\s+(?:them|him|her|it)?\s*back|payback|teach\s+them\s+a\s+lesson|"
    r"make\s+them\s+pay|get\s+even|eye\s+for\s+an\s+eye|(?:hit|strike)\s+(?:them\s+)?back)\b",
    re.IGNORECASE,
)
_OUTCOME = re.compile(
    r"(?:\b(?:points?|score\w*|payoffs?|profit\w*|win\w*|gain\w*|maximi[sz]\w*)\b|\+\s?6\b)", re.IGNORECASE
)
_COLLECTIVE = re.compile(
    r"\b(?:together|both\s+(?:sides|teams|of\s+us|nations|parties|groups|labs|countries)|collective\w*|combined|"
    r"joint\w*|mutual\w*|shared?|common\s+good|trust\w*|everyone|everybody|all\s+of\s+us|each\s+other|"
    r"welfare|long\s+(?:run|term))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class TurnLabel:
    """The filter's decision on one assistant turn."""

    kind: str
    choice: str | None
    kept: bool
    reason: str
    judge: str | None = None


def classify_turn(text: str, kind: str, frame_name: str | None = None) -> TurnLabel:
    """The rule-based decision on one turn (module docstring); votes are judged by `label_conversation`."""
    frame = load_frame(frame_name) if frame_name else None
    choice = read_choice(text, frame)
    if kind == VOTE:
        if choice == BLACK:
            return TurnLabel(kind, choice, True, "principled_vote")
        return TurnLabel(kind, choice, False, "defects" if choice == RED else "no_choice")
    if choice == RED:
        return TurnLabel(kind, choice, False, "defects")
    if choice is None:
        return TurnLabel(kind, choice, False, "no_choice")
    own = _QUOTED.sub(" ", text)
    if frame is not None:  # the choice words are not arguments ("SHARE" is a choice, not a collective cue)
        for label in (frame.cooperate.label, frame.defect.label):
            own = re.sub(rf"\b{re.escape(label)}\b", " ", own)
    if _RETALIATION.search(own):
        return TurnLabel(kind, choice, False, "retaliation")
    collective = bool(_COLLECTIVE.search(own))
    if _OUTCOME.search(own) and not collective:
        return TurnLabel(kind, choice, False, "outcome_only")
    if not collective:
        return TurnLabel(kind, choice, False, "no_rationale")
    return TurnLabel(kind, choice, True, "principled")


JUDGE_PROMPT = """\
You check training data for a cooperative agent in a team game where {coop} is the cooperative choice and \
{defect} the defecting one. Keep a message only if it chooses {coop} for a principled reason about the welfare \
of both sides (not to retaliate, not only for its own team's points). Answer with one word, KEEP or DROP.

Message: {text}"""


@dataclass(frozen=True)
class LLMJudge:
    """An LLM deciding KEEP/DROP for cooperative opinions, through any OpenAI-compatible endpoint."""

    base_url: str
    model: str
    api_key_env: str | None = None
    concurrency: int = 16
    api_key: str | None = field(default=None, repr=False)
    """The token itself (the rollout proxy's when the judge is the run's engine); else `api_key_env`."""

    def judge_all(self, items: Sequence[tuple[str, str]]) -> list[str]:
        """(text, frame) -> "KEEP", "DROP" or "unparsed" (also when the call fails)."""
        return asyncio.run(self._judge_all(items))

    async def _judge_all(self, items: Sequence[tuple[str, str]]) -> list[str]:
        import os

        gate = asyncio.Semaphore(self.concurrency)
        headers = {}
        key = self.api_key or (os.environ.get(self.api_key_env) if self.api_key_env else None)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        async with httpx.AsyncClient(timeout=120.0) as client:

            async def one(text: str, frame_name: str) -> str:
                frame = load_frame(frame_name)
                prompt = JUDGE_PROMPT.format(coop=frame.cooperate.label, defect=frame.defect.label, text=text)
                body = {
                    "model": self.model,
                    "messages": [{"role": "user", "content": prompt}],
                    "max_tokens": 4,
                    "temperature": 0.0,
                }
                async with gate:
                    try:
                        response = await client.post(
                            f"{self.base_url.rstrip('/')}/chat/completions", json=body, headers=headers
                        )
                        answer = response.json()["choices"][0]["message"]["content"] or ""
                    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
                        return "unparsed"
                found = re.search(r"\b(KEEP|DROP)\b", answer.upper())
                return found.group(1) if found else "unparsed"

            return list(await asyncio.gather(*(one(t, f) for t, f in items)))


@dataclass(frozen=True)
class SeedDataset:
    """The filtered seed data: training conversations and every turn's decision."""

    conversations: tuple[tuple[dict[str, str], ...], ...]
    """Each cut before its first dropped turn; only conversations with at least one assistant turn."""
    turns: tuple[dict[str, Any], ...]
    """One row per assistant turn (schema `yoao_seed_turns`, without run_id)."""
    frames: tuple[str, ...]
    """Frames in the training data (all training frames; asserted)."""
    kept: int
    dropped: dict[str, int]
    """Reason -> dropped turns (`after_drop`: turns after a conversation's first dropped one)."""
    judge_agreement: float | None
    """Share of judged opinions on which the judge agreed with the rules (None without a judge)."""
    examples: dict[str, str]
    """Reason -> one example turn."""
    wall_s: float

    @property
    def trained_turns(self) -> int:
        return sum(m["role"] == "assistant" for c in self.conversations for m in c)


def trace_frame(trace: Trace) -> str:
    """The frame of a trace (scenario ids are "train:<frame>:<index>")."""
    return str(trace.outcome.get("frame") or trace.scenario_id.split(":")[1])


def build_seed_dataset(traces: Sequence[Trace], judge: LLMJudge | None = None) -> SeedDataset:
    """Label every assistant turn of the teacher traces and cut the conversations (module docstring)."""
    start = time.perf_counter()
    frames = sorted({trace_frame(t) for t in traces})
    check_training_frames(frames)
    labelled: list[tuple[Trace, list[int], list[TurnLabel]]] = []
    for trace in traces:
        frame = trace_frame(trace)
        positions = [i for i, m in enumerate(trace.messages) if m["role"] == "assistant"]
        if len(positions) != len(trace.reasoning):
            raise ValueError(f"{trace.episode_id}: {len(positions)} replies but {len(trace.reasoning)} recorded turns")
        labels = [
            classify_turn(trace.messages[p]["content"], turn["kind"], frame)
            for p, turn in zip(positions, trace.reasoning, strict=True)
        ]
        labelled.append((trace, positions, labels))
    agreement = _apply_judge(labelled, judge) if judge is not None else None
    conversations, rows = [], []
    dropped: Counter[str] = Counter()
    examples: dict[str, str] = {}
    kept = 0
    for trace, positions, labels in labelled:
        frame = trace_frame(trace)
        opinion_kept: dict[int, bool] = {}
        cut: int | None = None
        for p, turn, label in zip(positions, trace.reasoning, labels, strict=True):
            round_ = int(turn["round"])
            if label.kind == VOTE and label.kept and not opinion_kept.get(round_, False):
                label = TurnLabel(label.kind, label.choice, False, "vote_without_principled_opinion", label.judge)
            if label.kind != VOTE:
                opinion_kept[round_] = opinion_kept.get(round_, True) and label.kept
            reason = label.reason
            if cut is not None:
                reason, kept_now = "after_drop", False
            else:
                kept_now = label.kept
                if not kept_now:
                    cut = p
            if kept_now:
                kept += 1
            else:
                dropped[reason] += 1
            examples.setdefault(reason, trace.messages[p]["content"])
            rows.append(
                {
                    "episode_id": trace.episode_id,
                    "frame": frame,
                    "split": load_frame(frame).split,
                    "turn": p,
                    "round": round_,
                    "kind": label.kind,
                    "text": trace.messages[p]["content"],
                    "choice": label.choice,
                    "kept": kept_now,
                    "reason": reason,
                    "judge": label.judge,
                }
            )
        messages = trace.messages if cut is None else trace.messages[:cut]
        if any(m["role"] == "assistant" for m in messages):
            conversations.append(tuple(dict(m) for m in messages))
    dataset = SeedDataset(
        conversations=tuple(conversations),
        turns=tuple(rows),
        frames=tuple(frames),
        kept=kept,
        dropped=dict(dropped),
        judge_agreement=agreement,
        examples=examples,
        wall_s=time.perf_counter() - start,
    )
    assert_no_held_out_frames(dataset)
    log.info("seed dataset: %d turns kept, dropped %s, %d conversations", kept, dict(dropped), len(conversations))
    return dataset


def _apply_judge(labelled: list[tuple[Trace, list[int], list[TurnLabel]]], judge: LLMJudge) -> float | None:
    """Let the judge decide the cooperative opinions in place; returns its agreement with the rules."""
    items, where = [], []
    for t, (trace, positions, labels) in enumerate(labelled):
        for i, (p, label) in enumerate(zip(positions, labels, strict=True)):
            if label.kind != VOTE and label.choice == BLACK:
                items.append((trace.messages[p]["content"], trace_frame(trace)))
                where.append((t, i))
    answers = judge.judge_all(items) if items else []
    agree = judged = 0
    for (t, i), answer in zip(where, answers, strict=True):
        label = labelled[t][2][i]
        if answer == "unparsed":
            labelled[t][2][i] = TurnLabel(label.kind, label.choice, label.kept, label.reason, answer)
            continue
        judged += 1
        agree += (answer == "KEEP") == label.kept
        reason = "judge_keep" if answer == "KEEP" else "judge_drop"
        labelled[t][2][i] = TurnLabel(label.kind, label.choice, answer == "KEEP", reason, answer)
    return agree / judged if judged else None


def assert_no_held_out_frames(dataset: SeedDataset) -> None:
    """Held-out frames never appear in training data: neither as a turn's frame nor in any message (their
    intros and team names are distinctive)."""
    held_out = {name: load_frame(name) for name in list_frames("heldout")}
    bad = sorted({row["frame"] for row in dataset.turns if row["frame"] in held_out or row["split"] != "train"})
    if bad:
        raise ValueError(f"held-out frames {bad} in the seed data")
    for frame in held_out.values():
        markers = (frame.intro[:80], *frame.team_names.values())
        for conversation in dataset.conversations:
            if any(marker in m["content"] for m in conversation for marker in markers):
                raise ValueError(f"held-out frame {frame.name} appears in a training conversation")


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


# ------------------------------------------------------------------------------------------ training
@dataclass(frozen=True)
class TrainedAdapter:
    """An SFT'd adapter, registered in MLflow when a tracker was given."""

    adapter_dir: str
    registered_name: str
    version: int | None
    mlflow_run_id: str | None
    train_loss: float
    eval_loss_before: float | None
    eval_loss_after: float | None
    steps: int
    examples: int
    conversations: int
    init_adapter_dir: str | None
    wall_s: float


def split_eval(conversations: Sequence[Sequence[dict[str, str]]]) -> tuple[list, list]:
    """(train, eval): with 20 or more conversations, 2 of them measure the loss before and after (each eval
    pass costs a forward over every turn of them); fewer conversations are all trained on."""
    n_eval = 2 if len(conversations) >= 20 else 0
    return [list(c) for c in conversations[n_eval:]], [list(c) for c in conversations[:n_eval]]


def train_adapter(
    base_model_dir: Path,
    conversations: Sequence[Sequence[dict[str, str]]],
    output: Path,
    sft: SFTSettings,
    registered_name: str,
    tracker: Any | None = None,
    params: Mapping[str, Any] | None = None,
    init_adapter_dir: Path | None = None,
    description: str = "",
) -> TrainedAdapter:
    """LoRA SFT through `run_sft` (continuing `init_adapter_dir` when given); logged and registered as a new
    version of `registered_name` (alias `candidate`) when a tracker is given."""
    from models.training.sft import run_sft  # loads torch: only when training runs

    train, held_out = split_eval(conversations)
    if not train:
        raise ValueError(f"{registered_name}: no training conversations")

    def fit() -> SFTResult:
        return run_sft(base_model_dir, train, output, sft, held_out, init_adapter_dir=init_adapter_dir)

    run_id = version = None
    if tracker is None:
        result = fit()
    else:
        with tracker.start_run(registered_name, params={"sft": asdict(sft), **(params or {})}) as run:
            result = fit()
            run.log_metrics(
                result.steps,
                train_loss=result.train_loss,
                eval_loss_before=result.eval_loss_before or 0.0,
                eval_loss_after=result.eval_loss_after or 0.0,
                examples=result.examples,
                wall_seconds=result.wall_seconds,
            )
            run.log_artifact_dir(result.adapter_dir, "adapter")
            run_id = run.run_id
        version = tracker.register_adapter(run_id, "adapter", registered_name, description=description or None)
    log.info(
        "%s: SFT %d steps on %d examples, loss %.3f, %.0f s%s",
        registered_name,
        result.steps,
        result.examples,
        result.train_loss,
        result.wall_seconds,
        f", registered v{version}" if version else "",
    )
    return TrainedAdapter(
        adapter_dir=str(result.adapter_dir),
        registered_name=registered_name,
        version=version,
        mlflow_run_id=run_id,
        train_loss=result.train_loss,
        eval_loss_before=result.eval_loss_before,
        eval_loss_after=result.eval_loss_after,
        steps=result.steps,
        examples=result.examples,
        conversations=len(train),
        init_adapter_dir=str(init_adapter_dir) if init_adapter_dir else None,
        wall_s=result.wall_seconds,
    )


def trace_rows(traces: Sequence[Trace], run_id: str) -> list[dict[str, Any]]:
    """Rows of the `traces` table."""
    return [t.row(run_id) for t in traces]


def judge_for(settings: YoaoSettings, engine_url: str, engine_key: str | None = None) -> LLMJudge | None:
    """The configured judge (None: rules only); `engine_key` is the token of `engine_url`."""
    judge: Endpoint | None = settings.judge
    if judge is None:
        return None
    url = judge.url(engine_url)
    return LLMJudge(url, judge.model, judge.api_key_env, api_key=engine_key if url == engine_url else None)


def dataset_summary(dataset: SeedDataset) -> dict[str, Any]:
    return {
        "kept": dataset.kept,
        "dropped": dataset.dropped,
        "conversations": len(dataset.conversations),
        "trained_turns": dataset.trained_turns,
        "frames": list(dataset.frames),
        "judge_agreement": dataset.judge_agreement,
    }


def conversations_json(dataset: SeedDataset) -> str:
    return "\n".join(json.dumps(list(c)) for c in dataset.conversations)


@dataclass(frozen=True)
class FormatWarmup:
    """The untrained teammates' format-only warm-up adapter and what it was trained on."""

    adapter: TrainedAdapter
    traces: int
    black_votes: int
    red_votes: int
    """Votes in the training data (balanced by construction: a fair coin per round)."""
    frames: tuple[str, ...]
    wall_s: float

    @property
    def black_share(self) -> float:
        total = self.black_votes + self.red_votes
        return self.black_votes / total if total else math.nan


def format_warmup(
    settings: YoaoSettings, base_model_dir: Path, output: Path, tracker: Any | None = None, seed: int = 0
) -> FormatWarmup:
    """Format-tutor games on the training frames -> LoRA SFT from the base model (module docstring)."""
    start = time.perf_counter()
    traces = format_warmup_traces(settings, seed)
    black, red = vote_balance(traces.traces)
    adapter = train_adapter(
        base_model_dir,
        [t.messages for t in traces.traces],
        output,
        settings.warmup_sft,
        WARMUP_MODEL_NAME,
        tracker,
        params={"games": traces.games, "frames": ",".join(traces.frames), "black_votes": black, "red_votes": red},
        description="Format-only warm-up of the untrained YOAO teammates (neutral data, votes balanced).",
    )
    return FormatWarmup(adapter, len(traces.traces), black, red, traces.frames, time.perf_counter() - start)


def train_seed(
    dataset: SeedDataset,
    warmup: FormatWarmup,
    settings: YoaoSettings,
    base_model_dir: Path,
    output: Path,
    tracker: Any | None = None,
) -> TrainedAdapter:
    """The seed: LoRA SFT on the filtered seed data, continuing the format warm-up adapter."""
    assert_no_held_out_frames(dataset)
    return train_adapter(
        base_model_dir,
        dataset.conversations,
        output,
        settings.seed_sft,
        SEED_MODEL_NAME,
        tracker,
        params={
            "kept_turns": dataset.kept,
            "conversations": len(dataset.conversations),
            "frames": ",".join(dataset.frames),
            "warmup_version": warmup.adapter.version or 0,
        },
        init_adapter_dir=Path(warmup.adapter.adapter_dir),
        description="YOAO seed: SFT on principled cooperative teacher turns, on top of the format warm-up.",
    )
