"""Teacher selection: every candidate (the code teacher, the engine's base model with and without the
cooperative meta-prompt, configured endpoints) plays team A on the training frames against the scripted
opponents; the eligible one with the highest collective welfare is selected (the package docstring)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from agents.llm_agent import LLMAgent
from agents.yoao.llm_players import red_black_config
from agents.yoao.red_black_teacher import PrincipledCooperator
from environments.core.runtime import Agent
from models.display import fixed
from models.evaluation.stats import Estimate
from models.yoao.config import ENGINE, YoaoSettings
from models.yoao.games import Arm, ArmPlay, GameSpec, Maker, play_arms, summarise

log = logging.getLogger("socialrl.yoao")

CODE_TEACHER = "code-teacher"


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


@dataclass(frozen=True, kw_only=True)
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
                f"| {r.name} | {r.status} | {w.text('.1f')} | "
                f"{_fmt(r.cooperation.mean)} | {_fmt(r.abstention_rate)} | {_fmt(r.invalid_vote_rate)} | {r.games} | "
                f"{r.reason} |"
            )
        return "\n".join(lines)


def _fmt(value: float | None, digits: int = 2) -> str:
    return fixed(value, f".{digits}f")


_NO_ESTIMATE = Estimate(math.nan, math.nan, math.nan, 0)


def select_teacher(candidates: Sequence[TeacherCandidate], settings: YoaoSettings, seed: int = 0) -> TeacherSelection:
    """Play every candidate as team A and pick the best eligible one by collective welfare (package docstring)."""
    if not candidates:
        raise ValueError("no teacher candidates")
    start = time.perf_counter()
    games = spread_games(settings.train_frames, settings.opponents, settings.selection_games, seed)
    skipped, playing = _probe_candidates(candidates)
    arms = [Arm(c.choice.name, (f"candidate{i}",) * settings.team_size) for i, c in enumerate(playing)]
    makers = {f"candidate{i}": c.make for i, c in enumerate(playing)}
    plays = play_arms(arms, games, makers, settings, f"yoao-selection-{seed}") if arms else []
    results: dict[str, ArmPlay] = {p.arm.name: p for p in plays}
    rows: list[CandidateRow] = []
    best: tuple[float, int] | None = None
    for index, candidate in enumerate(candidates):
        name = candidate.choice.name
        if name in skipped:
            row = _skipped_row(candidate.choice, skipped[name])
        else:
            row = _played_row(candidate.choice, results[name], settings)
        # Ties go to the earlier candidate (the code teacher comes first).
        if row.status == "eligible" and (best is None or row.welfare_points.mean > best[0]):
            best = (row.welfare_points.mean, index)
        rows.append(row)
    if best is None:
        raise RuntimeError("no eligible teacher candidate:\n" + "\n".join(f"{r.name}: {r.reason}" for r in rows))
    chosen = candidates[best[1]].choice
    rows = [
        CandidateRow(**{**r.__dict__, "status": "selected"}) if r.name == chosen.name else r  # type: ignore[arg-type]
        for r in rows
    ]
    log.info("teacher selection: %s (%.1f welfare points)", chosen.name, best[0])
    return TeacherSelection(tuple(rows), chosen, time.perf_counter() - start)


def _probe_candidates(candidates: Sequence[TeacherCandidate]) -> tuple[dict[str, str], list[TeacherCandidate]]:
    """Each candidate's probe, once, before any game: (name -> why it is skipped, the candidates that play)."""
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
    return skipped, playing


def _skipped_row(choice: TeacherChoice, reason: str) -> CandidateRow:
    return CandidateRow(
        name=choice.name,
        kind=choice.kind,
        status="skipped",
        reason=reason,
        games=0,
        welfare_points=_NO_ESTIMATE,
        cooperation=_NO_ESTIMATE,
        abstention_rate=math.nan,
        invalid_vote_rate=math.nan,
        llm_calls=0,
    )


def _played_row(choice: TeacherChoice, play: ArmPlay, settings: YoaoSettings) -> CandidateRow:
    """A candidate that played: its welfare in points, "skipped" when every call failed, "ineligible" when it
    abstained too often, else "eligible"."""
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
    return CandidateRow(
        name=choice.name,
        kind=choice.kind,
        status=status,
        reason=reason,
        games=len(play.games),
        welfare_points=welfare,
        cooperation=summary.cooperation,
        abstention_rate=summary.abstention_rate,
        invalid_vote_rate=summary.invalid_vote_rate,
        llm_calls=play.llm_calls,
    )
