"""Play in the browser: a person takes one seat of an environment, through the same event interface as
every other agent, against a code agent or a served model; the finished episode is recorded like any other.

| part | what |
| --- | --- |
| `WebHumanAgent` | an `environments.core.runtime.Agent`: keeps every event addressed to its seat (and nothing else) for the page, and answers a TURN request with the text the person typed, sent as RAW_TEXT so the environment's own grammar parses it (malformed moves get the same invalid-action notice and retries as a model's); with the environment's attempt record it also says how each of the person's moves was read, which replies of the other seats were refused and why, and when a seat's refused replies used up its retries (the turn is forfeited) |
| `CodeOpponents` | the code agents of agents/socialrl/code_agents.py in the six SocialRL domains; the scripted strategies of agents/yoao/red_black_strategies.py in the Red-Black game |
| `OpponentProvider` | what any other source of opponents implements (models/play.py: registered models served by the local vLLM engine) |
| `create_app(providers, record)` | the FastAPI app: the page at `/`, a small JSON API under `/api` |

Seats and teams: in a two-seat negotiation the opponent plays the other seat. In the Red-Black game the
person plays one seat of a team; the opponent plays every seat of the other team, and the person's own
teammates are "untrained teammates" (`MajorityFollower`: they state and vote the team majority).

API (every error is JSON `{"error": "..."}` with a 4xx status, and the page shows the message):

| request | answer |
| --- | --- |
| `GET /api/environments` | each playable environment: id, title, seats, `opponent_seats` (per seat of the person: the seats the opponent plays), opponents (name, label, kind, `default_seat`: the person's seat that leaves a model the seat it was trained for, and for a model what it was trained for: `trained`, `domains`, `seat`) |
| `POST /api/games` `{"env_id", "seat", "opponent", "seed"}` | 201 `{"game_id", "episode_id", "warning", ...}` (`warning`: the model plays outside the domain or seat it was trained for; without a seat the person gets the opponent's `default_seat`); 400 for an unknown environment, seat or opponent (a model alias the registry does not know) |
| `GET /api/games/{id}?since=n` | the events addressed to the seat from index n on (with how each of the person's moves was read, each refused reply of another seat, reason only, and each forfeited turn), whether it is the person's turn (allowed kinds, the request's text), while the opponent starts what it is doing and for how long (`preparing`, `elapsed_s`; a slow start ends with a "ready" event), and when done the seat's outcome and every attempt of every seat with its text (`record`, forfeits marked) |
| `POST /api/games/{id}/moves` `{"text"}` | 202; 409 when it is not the person's turn; 400 for an empty or over-long move |
| `DELETE /api/games/{id}` | abandons a game (nothing is recorded) |

The page is plain HTML and JavaScript (agents/web_play_page.py), no build step; it renders every text with
`textContent`, never as HTML.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, Field

from agents.socialrl.code_agents import CODE_AGENTS, make_code_agent
from agents.web_play_page import PAGE
from agents.yoao.red_black_strategies import PAPER_OPPONENTS, STRATEGIES, MajorityFollower, make_strategy_team
from environments import SOCIALRL_ENV_IDS, make
from environments.core.base import ActionSpec, Attempt, Environment
from environments.core.events import RAW_TEXT, Action, Event, Notification, NotificationKind, Observation
from environments.core.registry import env_class, sample_scenarios
from environments.core.runtime import Agent, EpisodeResult, run_episode

log = logging.getLogger("socialrl.play")

RED_BLACK = "red-black-v0"
PLAYABLE_ENV_IDS: tuple[str, ...] = (*SOCIALRL_ENV_IDS, RED_BLACK)
"""The environments the page offers: the six SocialRL domains and the Red-Black game."""
MAX_MOVE_CHARS = 4000
"""Longest move the page may send."""


class PlayError(ValueError):
    """Bad input from the page (unknown environment, seat, opponent or game; a move out of turn)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class OpponentOption:
    """An opponent the page offers."""

    name: str
    """What the page sends back: a code agent or strategy name, "base", or "models:/name@alias"."""
    label: str
    """What the person reads."""
    kind: str
    """"code" or "model"."""
    trained: str = ""
    """What a model was trained for, in words (e.g. "craigslist-v0 as buyer"); "" for a code agent."""
    domains: tuple[str, ...] = ()
    """The environments it was trained on (empty: not recorded, or a code agent that plays them all)."""
    seat: str = ""
    """The seat it was trained to play there ("" when not recorded)."""


class OpponentProvider(Protocol):
    """A source of opponents (code agents here; served models in models/play.py)."""

    def handles(self, name: str) -> bool:
        """Whether `name` is this provider's kind of opponent (e.g. starts with "models:/")."""

    def options(self, env_id: str) -> list[OpponentOption]:
        """The opponents to list for an environment."""

    def check(self, env_id: str, name: str) -> None:
        """Raise PlayError when `name` cannot play `env_id` (fast: called before the game starts)."""

    async def make_agents(self, env_id: str, name: str, seats: Sequence[str], seed: int) -> dict[str, Agent]:
        """Agents for the opponent's `seats` (may start serving a model: it can take a while)."""

    def note(self, env_id: str, name: str, seats: Sequence[str]) -> str:
        """A warning when `name` plays `seats` of `env_id` outside what it was trained for; "" otherwise."""

    def trained_seat(self, env_id: str, name: str) -> str:
        """The seat `name` was trained to play ("" when none or not recorded): the person's default seat leaves
        it that seat (`default_seat`). Fast: called before the game starts."""

    def preparing(self, name: str) -> str:
        """What getting `name` ready still takes, for the page while the game starts (e.g. "Starting the model
        engine (this takes about half a minute)"); "" when it is ready or quick."""


def opponent_and_team_seats(env_id: str, seats: Sequence[str], human_seat: str) -> tuple[list[str], list[str]]:
    """(the opponent's seats, the person's teammates' seats). Red-Black: the other team / the rest of the
    own team; every other environment: every other seat / none."""
    if env_id == RED_BLACK:
        team = human_seat[:1]
        return [s for s in seats if s[:1] != team], [s for s in seats if s[:1] == team and s != human_seat]
    return [s for s in seats if s != human_seat], []


def default_seat(env_id: str, seats: Sequence[str], trained_seat: str = "") -> str:
    """The person's default seat: the first one that leaves the opponent the seat it was trained for (a
    Craigslist buyer model: the person sells), else the first seat."""
    for seat in seats:
        if trained_seat and trained_seat in opponent_and_team_seats(env_id, seats, seat)[0]:
            return seat
    return seats[0]


class CodeOpponents:
    """Code agents (SocialRL domains) and scripted strategies (Red-Black) by name."""

    def handles(self, name: str) -> bool:
        return name in CODE_AGENTS or name in STRATEGIES

    def options(self, env_id: str) -> list[OpponentOption]:
        if env_id == RED_BLACK:
            names = [*PAPER_OPPONENTS, *(n for n in STRATEGIES if n not in PAPER_OPPONENTS)]
            return [OpponentOption(n, f"{n} (scripted team: {STRATEGIES[n].description})", "code") for n in names]
        if env_id in SOCIALRL_ENV_IDS:
            return [OpponentOption(n, f"{n} (code agent)", "code") for n in CODE_AGENTS]
        return []

    def check(self, env_id: str, name: str) -> None:
        known = [o.name for o in self.options(env_id)]
        if name not in known:
            raise PlayError(f"opponent {name!r} cannot play {env_id}; code opponents there: {', '.join(known)}")

    async def make_agents(self, env_id: str, name: str, seats: Sequence[str], seed: int) -> dict[str, Agent]:
        self.check(env_id, name)
        if env_id == RED_BLACK:
            return dict(make_strategy_team(name, seats, seed))
        return {seat: make_code_agent(name, seed + 7919 * (k + 1)) for k, seat in enumerate(seats)}

    def note(self, env_id: str, name: str, seats: Sequence[str]) -> str:
        return ""  # code agents and scripted teams play every seat of the environments they are offered in

    def trained_seat(self, env_id: str, name: str) -> str:
        return ""

    def preparing(self, name: str) -> str:
        return ""  # built in milliseconds


# ------------------------------------------------------------------------------------------ the person
def event_view(event: Event) -> dict[str, Any]:
    """What the page shows of one event addressed to the seat (its text; structured data stays out)."""
    if isinstance(event, Observation):
        return {"kind": "observation", "text": event.text, "sender": event.sender, "private": event.private}
    return {"kind": event.kind.value, "text": event.text, "allowed": list(event.allowed)}


def parsed_text(attempt: Attempt) -> str:
    """How the environment read a move: its kind and payload, e.g. `offer {"price": 50.0}`."""
    payload = json.dumps(attempt.payload, sort_keys=True, default=str) if attempt.payload else ""
    return f"{attempt.kind} {payload}".strip() or "(nothing)"


def forfeits(attempts: Sequence[Attempt], max_retries: int) -> set[int]:
    """Indices of the refused attempts that used up their seat's retries: after `max_retries` + 1 refusals in a
    row the environment applies its rule for a seat that keeps failing (the turn is forfeited: it passes to the
    other side, or the seat counts as silent, abstaining or selecting no deal). Counted as the environment
    counts (environments/core/base.py `_reject`): refusals of a turn request in a row, reset by an accepted
    answer; an answer out of turn does not count."""
    out: set[int] = set()
    refused_in_a_row: dict[str, int] = {}
    for attempt in attempts:
        if attempt.request is None:
            continue
        if attempt.accepted:
            refused_in_a_row[attempt.agent_id] = 0
            continue
        refused_in_a_row[attempt.agent_id] = refused_in_a_row.get(attempt.agent_id, 0) + 1
        if refused_in_a_row[attempt.agent_id] > max_retries:
            out.add(attempt.index)
            refused_in_a_row[attempt.agent_id] = 0
    return out


def forfeit_view(attempt: Attempt, seat: str, max_retries: int) -> dict[str, Any]:
    """The line that says a turn was forfeited (after the refusal that used up the retries)."""
    who = "You forfeit" if attempt.agent_id == seat else f"{attempt.agent_id} forfeits"
    return {
        "kind": "forfeit",
        "text": f"{who} this turn: {max_retries + 1} replies in a row were refused.",
        "sender": attempt.agent_id,
    }


def attempt_view(attempt: Attempt, seat: str) -> dict[str, Any] | None:
    """What the person's page shows of one attempt while the game runs: how its own accepted moves were read
    (its refusals already arrive as invalid-action notices), and that another seat's reply was refused, with
    the reason but not the text (the text never reached this seat in the game; `record_view` shows it after
    the game). Another seat's accepted moves arrive as the environment's own observations: None."""
    if attempt.agent_id == seat:
        if not attempt.accepted:
            return None
        return {"kind": "parsed", "text": f"The game read your move as: {parsed_text(attempt)}", "sender": seat}
    if attempt.accepted:
        return None
    return {
        "kind": "refused",
        "text": f"{attempt.agent_id}'s reply was refused: {attempt.reason or 'no reason given'}",
        "sender": attempt.agent_id,
    }


def record_view(attempt: Attempt, forfeit: bool = False) -> dict[str, Any]:
    """One attempt of the finished game, as the page's full record lists it (`forfeit`: this refusal used up
    the seat's retries, see `forfeits`)."""
    return {
        "index": attempt.index,
        "seat": attempt.agent_id,
        "text": attempt.text,
        "accepted": attempt.accepted,
        "read_as": parsed_text(attempt) if attempt.kind else "",
        "reason": attempt.reason,
        "forfeit": forfeit,
    }


class WebHumanAgent:
    """A person in a browser: an `Agent` whose moves come from `submit` (the page's POST)."""

    def __init__(self, name: str = "web-human") -> None:
        self.name = name
        self.agent_id = ""
        self.env_id = ""
        self.spec: ActionSpec | None = None
        self.events: list[dict[str, Any]] = []
        """Everything the seat saw (and the moves it sent), in order: what the page renders."""
        self.pending: Notification | None = None
        """The TURN request waiting for the person's move, if any."""
        self.preface: list[dict[str, Any]] = []
        """Events shown before the episode's own (e.g. that a slow opponent is ready); kept by `reset`."""
        self._answer: asyncio.Future[str] | None = None
        self._env: Environment | None = None
        self._attempts_seen = 0
        self._own_forfeit: dict[str, Any] | None = None
        """The person's own forfeit, shown after the invalid-action notice of its last refusal."""

    def watch(self, env: Environment) -> None:
        """Read the environment's attempt record (how moves were parsed or why they were refused) into the
        events, in order: before each event the seat observes, and whenever the page asks (`sync`)."""
        self._env, self._attempts_seen = env, 0

    @property
    def max_retries(self) -> int:
        """The environment's retries after a refused answer (2: the third refusal in a row forfeits)."""
        return self._env.max_invalid_retries if self._env is not None else 0

    def forfeits(self) -> set[int]:
        """Indices of the attempts so far that forfeited a turn (see `forfeits`)."""
        return forfeits(self._env.attempts, self.max_retries) if self._env is not None else set()

    def sync(self) -> None:
        """Add the views of the attempts recorded since the last call (see `attempt_view`; a forfeited turn gets
        a line of its own). Every event the seat observes was emitted after the attempts recorded before it, so
        the order of the page is the game's."""
        if self._env is None or not self.agent_id:
            return
        attempts = self._env.attempts
        forfeited = self.forfeits() if len(attempts) > self._attempts_seen else set()
        for attempt in attempts[self._attempts_seen :]:
            view = attempt_view(attempt, self.agent_id)
            if view is not None:
                self.events.append(view)
            if attempt.index in forfeited:
                forfeit = forfeit_view(attempt, self.agent_id, self.max_retries)
                if attempt.agent_id == self.agent_id:
                    self._own_forfeit = forfeit  # after the invalid-action notice, which is still on its way
                else:
                    self.events.append(forfeit)
        self._attempts_seen = len(attempts)

    def describe(self) -> str:
        return self.name

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id, self.env_id, self.spec = agent_id, env_id, spec
        self.events, self.pending, self._answer, self._attempts_seen = [*self.preface], None, None, 0
        self._own_forfeit = None

    async def observe(self, event: Event) -> None:
        if event.to != self.agent_id:  # the runtime addresses correctly; refuse to show anything else anyway
            return
        self.sync()
        self.events.append(event_view(event))
        if self._own_forfeit is not None and getattr(event, "kind", None) == NotificationKind.INVALID_ACTION:
            self.events.append(self._own_forfeit)
            self._own_forfeit = None

    async def act(self, request: Notification) -> Action:
        self._answer = asyncio.get_running_loop().create_future()
        self.pending = request
        try:
            text = await self._answer
        finally:
            self.pending, self._answer = None, None
        return Action(self.agent_id, RAW_TEXT, text)

    def submit(self, text: str) -> None:
        """The person's move for the pending TURN request (call from the event loop's thread)."""
        if not isinstance(text, str) or not text.strip():
            raise PlayError("type a move first")
        if len(text) > MAX_MOVE_CHARS:
            raise PlayError(f"a move is at most {MAX_MOVE_CHARS} characters, got {len(text)}")
        if self._answer is None or self._answer.done():
            raise PlayError("it is not your turn", status=409)
        self.events.append({"kind": "you", "text": text})
        self._answer.set_result(text)


# ----------------------------------------------------------------------------------------------- games
@dataclass(kw_only=True)
class Game:
    """One game in progress or finished."""

    game_id: str
    env_id: str
    seat: str
    opponent: str
    seed: int
    episode_id: str
    human: WebHumanAgent
    created: float = field(default_factory=time.monotonic)
    status: str = "starting"
    """starting (opponents being prepared), playing, finished, failed, abandoned."""
    task: asyncio.Task[None] | None = None
    result: EpisodeResult | None = None
    error: str = ""
    recorded: bool = False
    warning: str = ""
    """Why the opponent may play badly here (a model outside the domain or seat it was trained for)."""
    preparing: Callable[[], str] = field(default=lambda: "", repr=False)
    """What getting the opponent ready still takes (asked while the game starts; `OpponentProvider.preparing`)."""

    def view(self, since: int = 0) -> dict[str, Any]:
        since = max(0, since)
        self.human.sync()
        pending = self.human.pending
        spec = self.human.spec
        state: dict[str, Any] = {
            "game_id": self.game_id,
            "episode_id": self.episode_id,
            "env_id": self.env_id,
            "seat": self.seat,
            "opponent": self.opponent,
            "status": self.status,
            "since": since,
            "events": self.human.events[since:],
            "next": len(self.human.events),
            "your_turn": pending is not None,
            "allowed": list(pending.allowed) if pending else [],
            "turn_text": pending.text if pending else "",
            "grammar": spec.grammar if spec else "",
            "examples": list(spec.examples) if spec else [],
            "kinds": dict(spec.kinds) if spec else {},
            "done": self.status in ("finished", "failed", "abandoned"),
            "error": self.error,
            "warning": self.warning,
            "preparing": self.preparing() if self.status == "starting" else "",
            "elapsed_s": round(time.monotonic() - self.created, 1),
            "outcome": None,
            "record": [],
        }
        if self.result is not None:
            outcome = self.result.outcome
            role = outcome.roles.get(self.seat)
            state["outcome"] = {
                "agreement": outcome.agreement,
                "deal": outcome.deal,
                "rounds": outcome.rounds,
                "reward": role.reward if role else None,
                "utility": role.utility if role else None,
                "invalid_actions": role.invalid_actions if role else None,
                "leaked": list(role.leaked) if role else [],
                "recorded": self.recorded,
            }
            # The game is over: every attempt of every seat, texts included (what the tables keep).
            forfeited = forfeits(self.result.attempts, self.human.max_retries)
            state["record"] = [record_view(a, a.index in forfeited) for a in self.result.attempts]
        return state


def environment_title(env_id: str) -> str:
    """The first line of the environment module's docstring (its one-line description)."""
    module = sys.modules.get(env_class(env_id).__module__)
    doc = (module.__doc__ if module else "") or ""
    return doc.strip().splitlines()[0].rstrip(".") if doc.strip() else env_id


class GameRoom:
    """The games of one server: starts them in the running event loop, keeps them for polling, records
    finished episodes through `record` (called in a worker thread)."""

    def __init__(
        self,
        providers: Sequence[OpponentProvider],
        record: Callable[[EpisodeResult], Any] | None = None,
        env_ids: Sequence[str] = PLAYABLE_ENV_IDS,
        max_active: int = 16,
        max_kept: int = 200,
    ) -> None:
        if not providers:
            raise ValueError("at least one opponent provider is needed")
        self.providers = list(providers)
        self.record = record
        self.env_ids = tuple(env_ids)
        self.max_active, self.max_kept = max_active, max_kept
        self.games: dict[str, Game] = {}
        self._seats = {env_id: self._seats_of(env_id, 0) for env_id in self.env_ids}

    @staticmethod
    def _seats_of(env_id: str, seed: int) -> tuple[str, ...]:
        env = make(env_id)
        env.reset(sample_scenarios(env_id, 1, seed)[0], seed)
        return tuple(env.agent_ids)

    def environments(self) -> list[dict[str, Any]]:
        out = []
        for env_id in self.env_ids:
            seats = self._seats[env_id]
            opponents = [
                {**o.__dict__, "default_seat": default_seat(env_id, seats, o.seat)}
                for p in self.providers
                for o in p.options(env_id)
            ]
            out.append(
                {
                    "env_id": env_id,
                    "title": environment_title(env_id),
                    "seats": list(seats),
                    "opponent_seats": {s: opponent_and_team_seats(env_id, seats, s)[0] for s in seats},
                    "opponents": opponents,
                }
            )
        return out

    def _provider(self, env_id: str, opponent: str) -> OpponentProvider:
        for provider in self.providers:
            if provider.handles(opponent):
                provider.check(env_id, opponent)
                return provider
        names = [o.name for p in self.providers for o in p.options(env_id)]
        raise PlayError(
            f"unknown opponent {opponent!r} for {env_id}; choose one of {', '.join(names)} "
            "or a registered model as models:/<name>@<alias>"
        )

    def game(self, game_id: str) -> Game:
        try:
            return self.games[game_id]
        except KeyError:
            raise PlayError(f"no game {game_id!r} (finished games are kept only for a while)", status=404) from None

    def start(self, env_id: str, seat: str | None, opponent: str, seed: int = 0) -> Game:
        """Validate the choice and start the game in the running event loop (opponents are prepared there)."""
        if env_id not in self.env_ids:
            raise PlayError(f"unknown environment {env_id!r}; choose one of {', '.join(self.env_ids)}")
        if not isinstance(seed, int) or not 0 <= seed < 2**31:
            raise PlayError(f"seed must be an integer in [0, 2^31), got {seed!r}")
        scenario = sample_scenarios(env_id, 1, seed)[0]
        env = make(env_id)
        env.reset(scenario, seed)
        seats = tuple(env.agent_ids)
        if seat and seat not in seats:
            raise PlayError(f"unknown seat {seat!r} in {env_id}; choose one of {', '.join(seats)}")
        provider = self._provider(env_id, opponent)
        seat = seat or default_seat(env_id, seats, provider.trained_seat(env_id, opponent))
        active = [g for g in self.games.values() if g.status in ("starting", "playing")]
        if len(active) >= self.max_active:
            raise PlayError(f"{len(active)} games are in progress already; finish or abandon one", status=429)
        self._forget_old()
        game_id = uuid.uuid4().hex[:12]
        game = Game(
            game_id=game_id,
            env_id=env_id,
            seat=seat,
            opponent=opponent,
            seed=seed,
            episode_id=f"play:{env_id}:{game_id}",
            human=WebHumanAgent(),
        )
        game.preparing = lambda: provider.preparing(opponent)
        game.warning = provider.note(env_id, opponent, opponent_and_team_seats(env_id, seats, seat)[0])
        self.games[game_id] = game
        game.task = asyncio.get_running_loop().create_task(self._play(game, provider, scenario, seats))
        return game

    async def _play(self, game: Game, provider: OpponentProvider, scenario: Any, seats: Sequence[str]) -> None:
        opponents: dict[str, Agent] = {}
        try:
            opponent_seats, teammate_seats = opponent_and_team_seats(game.env_id, seats, game.seat)
            slow = provider.preparing(game.opponent)
            opponents = await provider.make_agents(game.env_id, game.opponent, opponent_seats, game.seed)
            if slow:  # the page said what it was waiting for; now it says that the wait is over
                took = time.monotonic() - game.created
                game.human.preface.append({"kind": "ready", "text": f"{game.opponent} is ready (after {took:.0f} s)."})
            teammates = {
                s: MajorityFollower(seed=game.seed * 31 + k + 1) for k, s in enumerate(teammate_seats)
            }  # Red-Black only
            agents: dict[str, Agent] = {**opponents, **teammates, game.seat: game.human}
            env = make(game.env_id)
            game.human.watch(env)
            game.status = "playing"
            game.result = await run_episode(
                env, agents, scenario, game.seed, turn_timeout=None, episode_id=game.episode_id
            )
        except asyncio.CancelledError:
            game.status = "abandoned"
            raise
        except Exception as exc:  # the page shows what went wrong; the server keeps serving
            log.exception("game %s failed", game.game_id)
            game.status, game.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            for agent in opponents.values():
                close = getattr(agent, "aclose", None)
                if callable(close):
                    with contextlib.suppress(Exception):
                        await close()
        if game.result is not None and self.record is not None:
            try:
                await asyncio.to_thread(self.record, game.result)
                game.recorded = True
            except Exception as exc:  # keep the result on the page even when the tables refuse it
                log.exception("recording game %s failed", game.game_id)
                game.error = f"the episode was played but could not be recorded: {type(exc).__name__}: {exc}"
        if game.result is not None:
            # Finished only once recorded: whoever sees the outcome can already find the episode in the tables.
            game.status = "finished"

    def move(self, game_id: str, text: str) -> None:
        game = self.game(game_id)
        if game.status != "playing":
            raise PlayError(f"the game is {game.status}", status=409)
        game.human.submit(text)

    async def abandon(self, game_id: str) -> None:
        game = self.game(game_id)
        if game.task is not None and not game.task.done():
            game.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await game.task
        game.status = "abandoned" if game.status != "finished" else game.status

    def _forget_old(self) -> None:
        done = sorted((g for g in self.games.values() if g.task is not None and g.task.done()), key=lambda g: g.created)
        for game in done[: max(0, len(self.games) - self.max_kept + 1)]:
            self.games.pop(game.game_id, None)

    async def close(self) -> None:
        for game in list(self.games.values()):
            if game.task is not None and not game.task.done():
                await self.abandon(game.game_id)


# -------------------------------------------------------------------------------------------- the app
class GameRequest(BaseModel):
    env_id: str = Field(description="An environment of /api/environments.")
    seat: str | None = Field(
        default=None, description="The person's seat (default: the one that leaves a model its trained seat)."
    )
    opponent: str = Field(description="A code agent or strategy name, 'base', or models:/<name>@<alias>.")
    seed: int = Field(default=0, description="Picks the scenario and seeds the opponents.")


class MoveRequest(BaseModel):
    text: str = Field(description="The move, in the environment's grammar.")


def create_app(
    providers: Sequence[OpponentProvider],
    record: Callable[[EpisodeResult], Any] | None = None,
    env_ids: Sequence[str] = PLAYABLE_ENV_IDS,
    on_shutdown: Callable[[], Awaitable[None] | None] | None = None,
) -> FastAPI:
    """The web app: the page at `/` and the JSON API (module docstring). `record` stores a finished episode
    (e.g. `TableStore.append_all(rows_for([result], run_id))`); it runs in a worker thread."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await room.close()
        if on_shutdown is not None:
            maybe = on_shutdown()
            if asyncio.iscoroutine(maybe):
                await maybe

    room = GameRoom(providers, record, env_ids)
    app = FastAPI(title="socialrl play", lifespan=lifespan)
    app.state.room = room

    @app.exception_handler(PlayError)
    async def play_error(request: Request, exc: PlayError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.get("/", response_class=HTMLResponse)
    async def page() -> str:
        return PAGE

    @app.get("/api/environments")
    async def environments() -> list[dict[str, Any]]:
        return room.environments()

    @app.post("/api/games", status_code=201)
    async def new_game(body: GameRequest) -> dict[str, Any]:
        game = room.start(body.env_id, body.seat, body.opponent.strip(), body.seed)
        return game.view()

    @app.get("/api/games/{game_id}")
    async def game_state(game_id: str, since: int = 0) -> dict[str, Any]:
        return room.game(game_id).view(since)

    @app.post("/api/games/{game_id}/moves", status_code=202)
    async def move(game_id: str, body: MoveRequest) -> dict[str, Any]:
        room.move(game_id, body.text)
        return {"accepted": True}

    @app.delete("/api/games/{game_id}")
    async def abandon(game_id: str) -> dict[str, Any]:
        await room.abandon(game_id)
        return {"status": room.game(game_id).status}

    return app
