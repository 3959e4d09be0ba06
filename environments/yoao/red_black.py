"""YOAO Red-Black game (`red-black-v0`): two teams discuss inside the team, then vote BLACK or RED by majority.

| aspect | rule |
| --- | --- |
| roles | Two teams, A and B, of `team_size` seats each: "A0".."A{N-1}" and "B0".."B{N-1}" (N = 5 by default; 10 and 15 are the other sizes used, any N >= 1 works). Every seat of a team gets its team's reward. |
| private information | None beyond each agent's own reasoning: `private_facts` is empty, so leakage is never reported. What is hidden is enforced by addressing: a team's discussion reaches only that team's members (team B never sees team A's opinions), and individual votes are never shown (each team learns only its own vote tally and both teams' choices). |
| actions | `opinion`: free text broadcast to the teammates, optional payload {"choice": "BLACK" or "RED"}. `pass`: stay silent (allowed only when `willingness_to_speak`). `vote`: payload {"choice": "BLACK" or "RED"}. Raw model text is parsed tolerantly: the last explicit command ("VOTE: RED", "I vote black", "I choose SHARE") wins; the frame's words map to BLACK (cooperative choice) and RED (defecting choice). A choice word negated by the words before it ("VOTE: NOT RED", "we should not go RED"; the shared negation rule of environments/core/grammar.py) is no choice: a negated vote is an invalid action. |
| reply cap | replies longer than 8,000 characters are cut to their last 8,000 before parsing (`max_reply_chars`); parsing is linear in the reply's length (environments/core/grammar.py) |
| reward | Per round (own / other): BLACK-BLACK +3 / +3, RED-RED -3 / -3, RED against BLACK +6 / -6, times the round's multiplier (round 5 x3, round 8 x5, round 10 x10, otherwise x1; M = sum of multipliers = 25). Team score S lies in [-6M, +6M] = [-150, +150]; reward = (S + 6M) / (12M), the same for every seat of the team. Full mutual cooperation gives S = 75 per team (reward 0.75), collective welfare 150. |
| termination | After `rounds` rounds (10). Each round: `discussion_rounds` discussion steps, then one vote step; both teams act at the same time in every step. |

Tie rule: RED needs a strict majority of the counted votes; a tie (including a team whose every vote is an
abstention) chooses BLACK. Invalid-vote rule: a malformed or illegal vote is rejected, counted and retried up to
`max_invalid_retries` times; after that the seat abstains (its vote is not counted in the majority). An opinion
that fails (empty text, unknown choice) becomes silence after the retries. An opinion is any non-empty text; a
choice named in it is recorded when one can be read, otherwise the opinion simply states no choice.

Discussion order (`RedBlackScenario.discussion_order`):

| order | who is asked in a discussion step | what a speaker has heard |
| --- | --- | --- |
| `simultaneous` (default) | every seat of both teams at once; opinions are held back until every seat has answered and then relayed together | the earlier steps and rounds only |
| `rotating` (the YOAO paper's sequential discussion) | one seat per team at a time; its opinion reaches its teammates at once, then the next seat is asked. Round r starts at seat (r - 1) mod N and goes up from there (A2, A3, A4, A0, A1 in round 3 of a team of 5), so every seat speaks first equally often | everything its teammates said before it in this round |
| `random` | as `rotating`, with a fresh order per round and team drawn from the episode's seeded generator (team A first, at the start of the round) | as `rotating` |

The two teams discuss in parallel in every order (they never hear each other). Votes are always asked of
every seat at once and scored only when every seat has voted (or abstained). Whatever the order, the order in
which simultaneous answers arrive never changes what anyone observes or scores. A sequential order asks as
many LLM calls per game as the simultaneous one, but only one per team can be in flight during a discussion
step, so fewer calls batch together in the engine (measured in benchmarks/bench_red_black_order.py).

Held-out frames: `sample_scenario` draws training frames only; `sample_held_out_scenario` (the hook of
models/evaluation/scenarios.py) draws held-out frames only, so evaluation never plays a training frame.

`Outcome.agreement` is True iff the collective welfare (sum of both teams' scores) is positive; Pareto
optimality and envy-freeness are undefined here (None). `Outcome.metrics` holds cooperation rates, per-team
scores, welfare, per-agent vote and opinion histories, the round log, tie and abstention counts, invalid votes,
and (when the scenario names a `focal_agent`) the focal agent's influence on its teammates.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from environments.core.base import (
    ActionSpec,
    Environment,
    Outcome,
    ParseError,
    PrivateFact,
    RoleOutcome,
    Scenario,
    ScenarioError,
)
from environments.core.data import DataFileError
from environments.core.events import Action, Event, Observation
from environments.core.grammar import cap_reply, find_last_command, negated_before, normalise_text, squeeze
from environments.core.quoting import quote
from environments.core.registry import register

BLACK = "BLACK"
"""The cooperative choice."""
RED = "RED"
"""The defecting choice."""
CHOICES = (BLACK, RED)
SILENT = "SILENT"
"""Opinion-history marker of a seat that passed (or whose opinion failed after the retries)."""
TEAMS = ("A", "B")
PAYOFFS: dict[tuple[str, str], int] = {(BLACK, BLACK): 3, (RED, RED): -3, (RED, BLACK): 6, (BLACK, RED): -6}
"""Base points of a team for (own choice, other team's choice), before the round multiplier."""
MAX_ROUND_POINTS = 6
"""Largest absolute base points a team can get in a round."""
DEFAULT_MULTIPLIERS: dict[int, int] = {5: 3, 8: 5, 10: 10}
"""Round -> multiplier; unlisted rounds count x1."""
FRAMES_DIR = Path(__file__).resolve().parent / "frames" / "red_black"
"""Where the frame files live (one YAML file per frame, named after the frame)."""
SPLITS = ("train", "heldout")
"""Frame splits: training frames are sampled by `sample_scenario`; held-out frames by `sample_held_out_scenario`."""
SIMULTANEOUS, ROTATING, RANDOM_ORDER = "simultaneous", "rotating", "random"
DISCUSSION_ORDERS = (SIMULTANEOUS, ROTATING, RANDOM_ORDER)
"""Discussion orders (see the module docstring)."""
DISCUSSION = "discussion"
VOTE = "vote"
VOTE_REQUEST = "cast your final vote."
"""The words of every vote turn's request (what tells a vote turn from a discussion turn in a rendered chat)."""

_FRAME_NAME = re.compile(r"^[a-z0-9_]+$")
_LABEL = re.compile(r"^[A-Z][A-Z-]*(?: [A-Z][A-Z-]*)*$")
_FRAME_FIELDS = ("name", "split", "title", "intro", "teams", "cooperate", "defect", "mute_sentence")


# --------------------------------------------------------------------------------------------- frames
class FrameError(DataFileError):
    """A frame file is missing or malformed; the message names the file and the field."""

    def __init__(self, path: str | Path, reason: str, field_name: str | None = None) -> None:
        super().__init__(path, f"field '{field_name}': {reason}" if field_name else reason)
        self.field_name = field_name


@dataclass(frozen=True)
class ChoiceName:
    """How a frame names one of the two choices."""

    label: str
    """The word agents say and vote with, upper case (e.g. "SHARE"); also accepted in votes."""
    description: str
    """What the choice means in the story, in words."""


@dataclass(frozen=True)
class Frame:
    """A re-skin of the game: the story, the team names and the words for the two choices."""

    name: str
    """Frame id; equals the file name without `.yaml`."""
    split: str
    """"train" or "heldout"."""
    title: str
    """Short title of the story."""
    intro: str
    """Narrative introduction shown to every agent (no payoffs: the game adds them)."""
    team_names: dict[str, str]
    """Team id ("A", "B") -> name in the story."""
    cooperate: ChoiceName
    """The cooperative choice (BLACK)."""
    defect: ChoiceName
    """The defecting choice (RED)."""
    mute_sentence: str
    """What a muted agent broadcasts: "I vote BLACK." in the frame's words."""

    def label(self, choice: str) -> str:
        """The frame's word for BLACK or RED."""
        return self.cooperate.label if choice == BLACK else self.defect.label

    def word_map(self) -> dict[str, str]:
        """Every accepted choice word (upper case) -> BLACK or RED."""
        return {BLACK: BLACK, RED: RED, self.cooperate.label: BLACK, self.defect.label: RED}

    def to_data(self) -> dict[str, Any]:
        """Structured form for observations."""
        return {
            "name": self.name,
            "title": self.title,
            "teams": dict(self.team_names),
            "cooperate": {"label": self.cooperate.label, "description": self.cooperate.description, "choice": BLACK},
            "defect": {"label": self.defect.label, "description": self.defect.description, "choice": RED},
            "mute_sentence": self.mute_sentence,
        }


def _text_field(path: Path, raw: Mapping[str, Any], key: str, prefix: str = "") -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise FrameError(path, "missing or not a non-empty string", prefix + key)
    return value.strip()


def _choice_field(path: Path, raw: Mapping[str, Any], key: str) -> ChoiceName:
    value = raw.get(key)
    if not isinstance(value, Mapping):
        raise FrameError(path, "missing or not a mapping with 'label' and 'description'", key)
    label = _text_field(path, value, "label", f"{key}.")
    if not _LABEL.match(label):
        raise FrameError(path, f"{quote(label)} must be upper-case words (A-Z, '-')", f"{key}.label")
    return ChoiceName(label, _text_field(path, value, "description", f"{key}."))


def _teams_field(path: Path, raw: Mapping[str, Any]) -> dict[str, str]:
    value = raw.get("teams")
    if not isinstance(value, Mapping) or set(value) != set(TEAMS):
        raise FrameError(path, "must be a mapping with exactly the keys A and B", "teams")
    names = {team: _text_field(path, value, team, "teams.") for team in TEAMS}
    if names["A"] == names["B"]:
        raise FrameError(path, "the two teams need different names", "teams")
    return names


def _check_choices(path: Path, frame: Frame) -> None:
    if frame.cooperate.label == frame.defect.label:
        raise FrameError(path, "the two choices need different labels", "defect.label")
    if frame.cooperate.label == RED:
        raise FrameError(path, "the cooperative choice cannot be called RED", "cooperate.label")
    if frame.defect.label == BLACK:
        raise FrameError(path, "the defecting choice cannot be called BLACK", "defect.label")
    if _ChoiceReader(frame).read(frame.mute_sentence) != BLACK:
        raise FrameError(path, f"must name the cooperative choice {frame.cooperate.label}", "mute_sentence")


def load_frame_file(path: str | Path) -> Frame:
    """Load and validate one frame file; raises FrameError naming the file and the field."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:  # invalid UTF-8 names the file too
        raise FrameError(path, f"cannot read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise FrameError(path, f"not valid YAML: {exc}") from exc
    if not isinstance(raw, Mapping):
        raise FrameError(path, "must be a YAML mapping")
    unknown = sorted(set(map(str, raw)) - set(_FRAME_FIELDS))
    if unknown:
        raise FrameError(path, f"unknown field (expected {', '.join(_FRAME_FIELDS)})", unknown[0])
    name = _text_field(path, raw, "name")
    if name != path.stem:
        raise FrameError(path, f"{quote(name)} must equal the file name {quote(path.stem)}", "name")
    split = _text_field(path, raw, "split")
    if split not in SPLITS:
        raise FrameError(path, f"{quote(split)} must be one of {', '.join(SPLITS)}", "split")
    frame = Frame(
        name=name,
        split=split,
        title=_text_field(path, raw, "title"),
        intro=" ".join(_text_field(path, raw, "intro").split()),
        team_names=_teams_field(path, raw),
        cooperate=_choice_field(path, raw, "cooperate"),
        defect=_choice_field(path, raw, "defect"),
        mute_sentence=_text_field(path, raw, "mute_sentence"),
    )
    _check_choices(path, frame)
    return frame


def frame_path(name: str, directory: str | Path | None = None) -> Path:
    """Path of a frame's file (it may not exist)."""
    if not _FRAME_NAME.match(name):
        raise ValueError(f"frame name {name!r} must match {_FRAME_NAME.pattern}")
    return Path(directory or FRAMES_DIR) / f"{name}.yaml"


def load_frame(name: str, directory: str | Path | None = None) -> Frame:
    """Load a frame by name from `directory` (default: the packaged frames)."""
    path = frame_path(name, directory)
    if not path.is_file():
        known = ", ".join(list_frames(directory=directory)) or "none"
        raise FrameError(path, f"no such frame file (known frames: {known})")
    return load_frame_file(path)


def list_frames(split: str | None = None, directory: str | Path | None = None) -> list[str]:
    """Sorted frame names, optionally only those of one split (which loads and validates each file)."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)} or None, got {split!r}")
    names = sorted(p.stem for p in Path(directory or FRAMES_DIR).glob("*.yaml"))
    if split is None:
        return names
    return [n for n in names if load_frame(n, directory).split == split]


# -------------------------------------------------------------------------------------------- parsing
_CHOICE_FILLERS = ("vote", "voting", "choose", "choosing", "pick", "picking", "go", "for", "with", "on", "say")
"""Words that may stand between a negation and a choice word ("we should not vote RED")."""


class _ChoiceReader:
    """Reads BLACK/RED out of text, accepting the frame's words (case-insensitive in explicit commands).

    Matching is on normalised text (environments/core/grammar.py), so it is linear in the text's length;
    a choice word negated by the words before it (the shared negation rule: "VOTE: NOT RED", "we should
    not go RED") is not a choice."""

    def __init__(self, frame: Frame | None) -> None:
        words = frame.word_map() if frame else {BLACK: BLACK, RED: RED}
        self.words = words
        alternatives = "|".join(re.escape(w).replace(r"\ ", " ") for w in sorted(words, key=len, reverse=True))
        self.explicit = (
            r"\b(?:vote|voting|choose|choice|pick|decision|final answer)\b[ :=-]{0,3}"
            rf"(?:(?:is|for|to|will be)\b[ :=-]{{0,3}})?[\"'(\[]{{0,3}}(?:(?:not|never|no) )?(?P<choice>{alternatives})\b"
        )
        # Bare mentions outside a command count only in upper case ("we should SHARE", not "I share your view").
        self.bare = re.compile(rf"(?-i:\b(?P<choice>{alternatives})\b)")
        self.whole = re.compile(rf"\W*(?P<choice>{alternatives})\W*", re.IGNORECASE)

    def to_choice(self, word: str) -> str | None:
        return self.words.get(" ".join(word.upper().split()))

    def command(self, text: str) -> tuple[str | None, bool]:
        """The choice of the last explicit command ("VOTE: RED", "I choose SHARE") and whether it is negated
        ("VOTE: NOT RED"); (None, False) without one."""
        match = find_last_command(text, {VOTE: self.explicit})
        if match is None:
            return None, False
        negated = negated_before(match.body, match.group_starts["choice"], _CHOICE_FILLERS)
        return self.to_choice(match.groups["choice"]), negated

    def read(self, text: str) -> str | None:
        """The choice the text states: last explicit command, else a lone choice word, else the only choice
        mentioned in upper case (negated mentions do not count); None when there is none, it is negated or
        ambiguous."""
        found, negated = self.command(text)
        if found:
            return None if negated else found
        body = normalise_text(text)
        whole = self.whole.fullmatch(body)
        if whole:
            return self.to_choice(whole.group("choice"))
        mentioned = {
            self.to_choice(m.group("choice"))
            for m in self.bare.finditer(body)
            if not negated_before(body, m.start(), _CHOICE_FILLERS)
        }
        return mentioned.pop() if len(mentioned) == 1 else None


def read_choice(text: str, frame: Frame | None = None) -> str | None:
    """BLACK, RED or None: the choice `text` states, read exactly as the game reads opinions (with `frame`'s
    words when given). For analyses of recorded turns, e.g. the YOAO seed-data filter."""
    return _ChoiceReader(frame).read(text if isinstance(text, str) else "")


_PASS = re.compile(r"(?:i )?(?:pass|stay silent|remain silent|silent|no comment)\W*", re.IGNORECASE)


def _is_pass(text: str) -> bool:
    lines = normalise_text(text).splitlines()
    return bool(lines) and _PASS.fullmatch(lines[-1]) is not None


# ------------------------------------------------------------------------------------------- scenario
def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScenarioError(f"red-black: {name} must be an integer >= {minimum}, got {quote(value)}")


def _normalise_multipliers(value: Any, rounds: int) -> dict[int, int]:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"red-black: multipliers must be a mapping round -> multiplier, got {quote(value)}")
    out: dict[int, int] = {}
    for key, mult in value.items():
        try:
            round_ = int(key)
        except (TypeError, ValueError):
            raise ScenarioError(f"red-black: multiplier key {quote(key)} is not a round number") from None
        if not 1 <= round_ <= rounds:
            raise ScenarioError(
                f"red-black: multiplier for round {round_} but the game has {rounds} rounds; pass multipliers"
            )
        _check_int(f"multiplier of round {round_}", mult, 1)
        out[round_] = mult
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class RedBlackScenario(Scenario):
    """One Red-Black game."""

    frame: str = "baseline"
    """Frame name (a file in environments/frames/red_black/)."""
    team_size: int = 5
    """Seats per team (5 in the paper; 10 and 15 also used). Even sizes can tie: see the tie rule."""
    rounds: int = 10
    """Number of rounds."""
    discussion_rounds: int = 1
    """Discussion steps per round before the vote (>= 1)."""
    willingness_to_speak: bool = False
    """When True, each discussion turn also allows `pass` (stay silent)."""
    multipliers: dict[int, int] = field(default_factory=lambda: dict(DEFAULT_MULTIPLIERS))
    """Round -> payoff multiplier; unlisted rounds count x1. Keys must be rounds of the game."""
    focal_agent: str | None = None
    """Seat whose influence on its teammates is measured in the outcome metrics (optional)."""
    discussion_order: str = SIMULTANEOUS
    """"simultaneous", "rotating" (the paper's sequential discussion) or "random"; see the module docstring."""

    def __post_init__(self) -> None:
        if not isinstance(self.frame, str) or not _FRAME_NAME.match(self.frame):
            raise ScenarioError(f"red-black: frame must be a frame name, got {quote(self.frame)}")
        if not frame_path(self.frame).is_file():
            raise ScenarioError(f"red-black: unknown frame {quote(self.frame)}; known: {', '.join(list_frames())}")
        _check_int("team_size", self.team_size, 1)
        _check_int("rounds", self.rounds, 1)
        _check_int("discussion_rounds", self.discussion_rounds, 1)
        if not isinstance(self.willingness_to_speak, bool):
            raise ScenarioError(
                f"red-black: willingness_to_speak must be a bool, got {quote(self.willingness_to_speak)}"
            )
        object.__setattr__(self, "multipliers", _normalise_multipliers(self.multipliers, self.rounds))
        if self.focal_agent is not None and self.focal_agent not in self.seats():
            raise ScenarioError(f"red-black: focal_agent {quote(self.focal_agent)} is not a seat of this game")
        if self.discussion_order not in DISCUSSION_ORDERS:
            raise ScenarioError(
                f"red-black: discussion_order must be one of {', '.join(DISCUSSION_ORDERS)}, got {quote(self.discussion_order)}"
            )

    @property
    def sequential(self) -> bool:
        """Whether a team's members speak one at a time (rotating or random order)."""
        return self.discussion_order != SIMULTANEOUS

    def seats(self, team: str | None = None) -> tuple[str, ...]:
        """Seat ids of one team, or of both (A first)."""
        teams = TEAMS if team is None else (team,)
        return tuple(f"{t}{i}" for t in teams for i in range(self.team_size))

    def multiplier(self, round_: int) -> int:
        return self.multipliers.get(round_, 1)

    @property
    def total_multiplier(self) -> int:
        """M: the sum of the round multipliers (25 by default)."""
        return sum(self.multiplier(r) for r in range(1, self.rounds + 1))

    @property
    def max_team_score(self) -> int:
        """6M: the largest absolute team score (150 by default)."""
        return MAX_ROUND_POINTS * self.total_multiplier


def team_of(agent_id: str) -> str:
    """ "A3" -> "A"."""
    return agent_id[:1]


def other_team(team: str) -> str:
    return "B" if team == "A" else "A"


def team_choice(votes: Sequence[str | None]) -> tuple[str, bool]:
    """(team choice, whether it was a tie) from the seats' votes; None is an abstention.
    RED needs a strict majority of counted votes; ties (and no votes at all) choose BLACK."""
    red = sum(v == RED for v in votes)
    black = sum(v == BLACK for v in votes)
    return (RED if red > black else BLACK), red == black


def round_points(own: str, other: str, multiplier: int = 1) -> int:
    """Points of a team choosing `own` against `other` in a round with `multiplier`."""
    return PAYOFFS[(own, other)] * multiplier


# -------------------------------------------------------------------------------------- environment
@register
class RedBlackEnv(Environment[RedBlackScenario]):
    """The YOAO Red-Black game; see the module docstring for the rules."""

    env_id: ClassVar[str] = "red-black-v0"
    scenario_type: ClassVar[type[Scenario]] = RedBlackScenario

    def __init__(self, max_invalid_retries: int = 2) -> None:
        super().__init__(max_invalid_retries)
        self._seats: tuple[str, ...] = ()
        self._frame: Frame | None = None
        self._reader = _ChoiceReader(None)

    # ------------------------------------------------------------------------------ contract hooks
    @property
    def agent_ids(self) -> tuple[str, ...]:
        return self._seats

    @property
    def frame(self) -> Frame:
        if self._frame is None:
            raise RuntimeError(f"{self.env_id}: call reset() first")
        return self._frame

    @classmethod
    def sample_scenario(cls, rng: random.Random) -> RedBlackScenario:
        frame = rng.choice(list_frames("train"))
        return RedBlackScenario(scenario_id=f"gen:{frame}:{rng.randrange(10**9)}", frame=frame)

    @classmethod
    def sample_held_out_scenario(cls, rng: random.Random) -> RedBlackScenario:
        """A game on a held-out frame (the held-out hook of models/evaluation/scenarios.py)."""
        frame = rng.choice(list_frames("heldout"))
        return RedBlackScenario(scenario_id=f"heldout:{frame}:{rng.randrange(10**9)}", frame=frame)

    def action_spec(self, agent_id: str) -> ActionSpec:
        coop, defect = self._labels()
        kinds = {
            "opinion": "say what you think to your own team (free text; the other team cannot hear it)",
            VOTE: f"cast your final vote, {coop} or {defect}; your team's majority decides",
        }
        grammar = (
            f"In a discussion turn, write your opinion as free text; to state a choice, include 'I vote {coop}' "
            f"or 'I vote {defect}'. In a vote turn, end with one line 'VOTE: {coop}' or 'VOTE: {defect}' "
            f"({coop} is also called BLACK, {defect} is also called RED). The last VOTE line counts."
        )
        if self._scenario is not None and self.scenario.willingness_to_speak:
            kinds["pass"] = "stay silent in this discussion turn"
            grammar += " In a discussion turn you may instead reply PASS to stay silent."
        examples = (f"Cooperation has paid off so far. I vote {coop}.", f"VOTE: {coop}", f"VOTE: {defect}")
        return ActionSpec(kinds=kinds, grammar=grammar, examples=examples)

    def parse(self, agent_id: str, text: str) -> Action | ParseError:
        text = cap_reply(text, self.max_reply_chars)
        allowed = self._awaiting.get(agent_id, ()) if self._scenario is not None else ()
        if VOTE in allowed:
            return self._parse_vote(agent_id, text)
        if "pass" in allowed and _is_pass(text):
            return Action(agent_id, "pass")
        if not text.strip():
            hint = " (or PASS to stay silent)" if "pass" in allowed else ""
            return ParseError(f"an opinion must be non-empty text{hint}")
        choice = self._reader.read(text)
        return Action(agent_id, "opinion", squeeze(text), {"choice": choice} if choice else {})

    def private_facts(self, agent_id: str) -> tuple[PrivateFact, ...]:
        # The game has no private values: the only secrets (the team's discussion, individual votes) are kept by
        # addressing events, not by what an agent may say, so there is nothing to detect as a leak.
        return ()

    def _reset(self, scenario: RedBlackScenario) -> list[Event]:
        self._frame = load_frame(scenario.frame)
        self._reader = _ChoiceReader(self._frame)
        self._seats = scenario.seats()
        self._round, self._step_in_round, self._phase = 1, 1, DISCUSSION
        self._pending: set[str] = set()
        self._queues: dict[str, list[str]] = {t: [] for t in TEAMS}
        self._orders: dict[str, list[str]] = {}
        self._buffer: dict[str, tuple[str, str | None]] = {}
        self._votes: dict[str, list[str | None]] = {a: [] for a in self._seats}
        self._opinions: dict[str, list[list[str | None]]] = {a: [[]] for a in self._seats}
        self._choices: dict[str, list[str]] = {t: [] for t in TEAMS}
        self._scores = dict.fromkeys(TEAMS, 0)
        self._round_log: list[dict[str, Any]] = []
        self._invalid_votes = 0
        self._abstentions = 0
        return [*(self._intro(a) for a in self._seats), *self._open_step()]

    def _validate(self, action: Action) -> str | None:
        if action.kind == "pass":
            return None
        raw = action.payload.get("choice")
        if action.kind == VOTE:
            if raw is None:
                return "a vote needs payload {'choice': 'BLACK' or 'RED'}"
            return (
                None if self._payload_choice(raw) else f"unknown choice {quote(raw)}; use {' or '.join(self._labels())}"
            )
        if not action.text.strip():
            return "an opinion must be non-empty text"
        if raw is not None and self._payload_choice(raw) is None:
            return f"unknown choice {quote(raw)} in the opinion; use {' or '.join(self._labels())}"
        return None

    def _apply(self, action: Action) -> list[Event]:
        agent_id = action.agent_id
        if action.kind == VOTE:
            self._votes[agent_id].append(self._payload_choice(action.payload["choice"]))
        elif action.kind == "pass":
            self._opinions[agent_id][-1].append(SILENT)
        else:
            raw = action.payload.get("choice")
            choice = self._payload_choice(raw) if raw is not None else self._reader.read(action.text)
            self._opinions[agent_id][-1].append(choice)
            self._buffer[agent_id] = (action.text.strip(), choice)
        return self._answered(agent_id)

    def _on_retries_exhausted(self, agent_id: str) -> list[Event]:
        if self._phase == VOTE:
            self._votes[agent_id].append(None)
            self._abstentions += 1
        else:
            self._opinions[agent_id][-1].append(SILENT)
        return self._answered(agent_id)

    def _reject(self, agent_id: str, reason: str) -> list[Event]:
        if self._phase == VOTE and agent_id in self._awaiting:
            self._invalid_votes += 1
        return super()._reject(agent_id, reason)

    # ------------------------------------------------------------------------------------ the flow
    def _answered(self, agent_id: str) -> list[Event]:
        self._pending.discard(agent_id)
        events: list[Event] = []
        if self._phase == DISCUSSION and self.scenario.sequential:
            # The speaker's opinion reaches its teammates before the next speaker of its team is asked.
            events = self._release_opinions((agent_id,))
            queue = self._queues[team_of(agent_id)]
            if queue:
                events.append(self._turn_request(queue.pop(0)))
        if self._pending:
            return events
        if self._phase == DISCUSSION:
            events += self._release_opinions()
            if self._step_in_round < self.scenario.discussion_rounds:
                self._step_in_round += 1
            else:
                self._phase, self._step_in_round = VOTE, self.scenario.discussion_rounds + 1
            return events + self._open_step()
        events = self._resolve_round()
        if self._round == self.scenario.rounds:
            return self._finish(events)
        self._round, self._step_in_round, self._phase = self._round + 1, 1, DISCUSSION
        for agent_id in self._seats:
            self._opinions[agent_id].append([])
        return events + self._open_step()

    def _open_step(self) -> list[Event]:
        self._pending = set(self._seats)
        if self._phase == DISCUSSION and self.scenario.sequential:
            if self._step_in_round == 1:
                self._orders = {team: self._speaking_order(team) for team in TEAMS}
            self._queues = {team: list(order) for team, order in self._orders.items()}
            return [self._turn_request(self._queues[team].pop(0)) for team in TEAMS]
        return [self._turn_request(a) for a in self._seats]

    def _speaking_order(self, team: str) -> list[str]:
        """The order in which `team` speaks this round (sequential discussion orders only)."""
        seats = list(self.scenario.seats(team))
        if self.scenario.discussion_order == RANDOM_ORDER:
            self.rng.shuffle(seats)
            return seats
        start = (self._round - 1) % len(seats)
        return seats[start:] + seats[:start]

    def _turn_request(self, agent_id: str) -> Event:
        s, r = self.scenario, self._round
        steps = s.discussion_rounds + 1
        data = {
            "round": r,
            "phase": self._phase,
            "turn": (r - 1) * steps + self._step_in_round,
            "max_turns": s.rounds * steps,
            "multiplier": s.multiplier(r),
            "team": team_of(agent_id),
        }
        head = f"Round {r} of {s.rounds} (points x{s.multiplier(r)})"
        coop, defect = self._labels()
        if self._phase == VOTE:
            text = f"{head}: {VOTE_REQUEST} End with 'VOTE: {coop}' or 'VOTE: {defect}'."
            return self._request_turn(agent_id, (VOTE,), text, data)
        data["discussion_round"] = self._step_in_round
        if s.sequential:
            order = self._orders[team_of(agent_id)]
            data["speaker_position"] = order.index(agent_id) + 1
            data["speakers_before"] = order[: order.index(agent_id)]
        allowed: tuple[str, ...] = ("opinion", "pass") if s.willingness_to_speak else ("opinion",)
        text = (
            f"{head}, discussion {self._step_in_round} of {s.discussion_rounds}: share your opinion with your "
            f"team (e.g. 'I vote {coop}.' or 'I vote {defect}.')"
            + (", or reply PASS to stay silent." if s.willingness_to_speak else ".")
        )
        return self._request_turn(agent_id, allowed, text, data)

    def _release_opinions(self, speakers: Sequence[str] | None = None) -> list[Event]:
        """Relay the buffered opinions of `speakers` (default: every seat, in seat order) to their teammates."""
        events: list[Event] = []
        for speaker in self._seats if speakers is None else speakers:
            if speaker not in self._buffer:
                continue
            text, choice = self._buffer.pop(speaker)
            data = {
                "event": "opinion",
                "round": self._round,
                "discussion_round": self._step_in_round,
                "speaker": speaker,
                "choice": choice,
                "text": text,
            }
            for mate in self.scenario.seats(team_of(speaker)):
                if mate != speaker:
                    events.append(Observation(mate, f"{speaker}: {text}", dict(data), sender=speaker))
        return events

    def _resolve_round(self) -> list[Event]:
        s, r = self.scenario, self._round
        tallies, choices, ties = {}, {}, {}
        for team in TEAMS:
            votes = [self._votes[a][r - 1] for a in s.seats(team)]
            tallies[team] = {BLACK: votes.count(BLACK), RED: votes.count(RED), "abstain": votes.count(None)}
            choices[team], ties[team] = team_choice(votes)
        points = {t: round_points(choices[t], choices[other_team(t)], s.multiplier(r)) for t in TEAMS}
        for team in TEAMS:
            self._choices[team].append(choices[team])
            self._scores[team] += points[team]
        entry = {
            "round": r,
            "multiplier": s.multiplier(r),
            "choices": choices,
            "tallies": tallies,
            "ties": ties,
            "points": points,
            "scores": dict(self._scores),
        }
        if s.sequential:
            entry["speaking_order"] = {team: list(order) for team, order in self._orders.items()}
        self._round_log.append(entry)
        return [self._result_observation(a, entry) for a in self._seats]

    def _result_observation(self, agent_id: str, entry: dict[str, Any]) -> Observation:
        own, other = team_of(agent_id), other_team(team_of(agent_id))
        names, choices, points = self.frame.team_names, entry["choices"], entry["points"]
        tally = entry["tallies"][own]
        coop, defect = self._labels()
        text = (
            f"Round {entry['round']} result (points x{entry['multiplier']}): your team, {names[own]}, chose "
            f"{self.frame.label(choices[own])} (votes: {tally[BLACK]} {coop}, {tally[RED]} {defect}, "
            f"{tally['abstain']} abstained); {names[other]} chose {self.frame.label(choices[other])}. "
            f"Points this round: {names[own]} {points[own]:+d}, {names[other]} {points[other]:+d}. "
            f"Totals: {names[own]} {self._scores[own]}, {names[other]} {self._scores[other]}."
        )
        data = {
            "event": "round_result",
            "round": entry["round"],
            "multiplier": entry["multiplier"],
            "team": own,
            "choices": dict(choices),
            "points": dict(points),
            "scores": dict(self._scores),
            "own_tally": dict(tally),
        }
        return Observation(agent_id, text, data)

    def _intro(self, agent_id: str) -> Observation:
        s, frame = self.scenario, self.frame
        own, other = team_of(agent_id), other_team(team_of(agent_id))
        mates = [a for a in s.seats(own) if a != agent_id]
        text = "\n\n".join([frame.intro, self._rules_text(agent_id, mates, own, other)])
        data = {
            "event": "intro",
            "team": own,
            "team_name": frame.team_names[own],
            "other_team_name": frame.team_names[other],
            "teammates": mates,
            "frame": frame.to_data(),
            "rounds": s.rounds,
            "multipliers": dict(s.multipliers),
            "payoffs": {f"{a}/{b}": p for (a, b), p in PAYOFFS.items()},
            "team_size": s.team_size,
            "discussion_rounds": s.discussion_rounds,
            "willingness_to_speak": s.willingness_to_speak,
            "discussion_order": s.discussion_order,
        }
        return Observation(agent_id, text, data)

    def _rules_text(self, agent_id: str, mates: Sequence[str], own: str, other: str) -> str:
        s, frame = self.scenario, self.frame
        coop, defect = self._labels()
        names = frame.team_names
        special = ", ".join(f"round {r} counts x{m}" for r, m in s.multipliers.items()) or "all rounds count x1"
        turns = (
            " Members speak one at a time, in an order that changes every round; each hears those before it."
            if s.sequential
            else ""
        )
        return "\n".join(
            [
                f"You are {agent_id}, one of the {s.team_size} members of {names[own]}"
                + (f" (your teammates: {', '.join(mates)})." if mates else ".")
                + f" The other side is {names[other]}.",
                f"The game has {s.rounds} rounds. Each round your team first discusses: every member shares an "
                f"opinion with the team only ({names[other]} never hears your discussion).{turns} Then every member "
                f"secretly votes {coop} ({frame.cooperate.description}) or {defect} "
                f"({frame.defect.description}). The majority of your team's votes is your team's choice; "
                f"{defect} needs a strict majority, so a tie means {coop}. Both sides choose at the same time.",
                f"Points per round for your team / the other side: both {coop}: +3 / +3; both {defect}: -3 / -3; "
                f"you {defect} and they {coop}: +6 / -6; you {coop} and they {defect}: -6 / +6. "
                f"Other rounds count x1; {special}.",
                "Your reward is your team's total score.",
            ]
        )

    # ----------------------------------------------------------------------------------- helpers
    def _labels(self) -> tuple[str, str]:
        if self._frame is None:
            return BLACK, RED
        return self._frame.cooperate.label, self._frame.defect.label

    def _payload_choice(self, raw: Any) -> str | None:
        return self._reader.to_choice(raw) if isinstance(raw, str) else None

    def _parse_vote(self, agent_id: str, text: str) -> Action | ParseError:
        coop, defect = self._labels()
        _, negated = self._reader.command(text)
        if negated:
            return ParseError(
                "a negated choice ('VOTE: NOT ...') is not a vote; "
                f"end with one line 'VOTE: {coop}' or 'VOTE: {defect}'"
            )
        choice = self._reader.read(text)
        if choice is None:
            return ParseError(f"no vote found; end with one line 'VOTE: {coop}' or 'VOTE: {defect}'")
        return Action(agent_id, VOTE, squeeze(text), {"choice": choice})

    # ----------------------------------------------------------------------------------- outcome
    def _compute_outcome(self) -> Outcome:
        s = self.scenario
        welfare = self._scores["A"] + self._scores["B"]
        roles = {
            a: RoleOutcome(
                reward=(self._scores[team_of(a)] + s.max_team_score) / (2 * s.max_team_score),
                utility=float(self._scores[team_of(a)]),
            )
            for a in self._seats
        }
        return Outcome(
            env_id=self.env_id,
            scenario_id=s.scenario_id,
            agreement=welfare > 0,
            rounds=len(self._round_log),
            roles=roles,
            deal=None,
            pareto_optimal=None,
            envy_free=None,
            metrics=self._metrics(welfare),
        )

    def _metrics(self, welfare: int) -> dict[str, Any]:
        s = self.scenario
        played = len(self._round_log)
        coop = {t: self._choices[t].count(BLACK) / played if played else 0.0 for t in TEAMS}
        metrics: dict[str, Any] = {
            "ending": "completed",
            "frame": s.frame,
            "discussion_order": s.discussion_order,
            "team_size": s.team_size,
            "rounds_played": played,
            "cooperation_rate_A": coop["A"],
            "cooperation_rate_B": coop["B"],
            "cooperation_rate": (coop["A"] + coop["B"]) / 2,
            "score_A": self._scores["A"],
            "score_B": self._scores["B"],
            "welfare": welfare,
            "welfare_normalised": welfare / (2 * 3 * s.total_multiplier),
            "team_choices": {t: list(c) for t, c in self._choices.items()},
            "vote_histories": {a: list(v) for a, v in self._votes.items()},
            "opinion_choices": {a: [list(step) for step in rounds] for a, rounds in self._opinions.items()},
            "round_log": list(self._round_log),
            "ties": sum(entry["ties"][t] for entry in self._round_log for t in TEAMS),
            "abstentions": self._abstentions,
            "invalid_votes": self._invalid_votes,
        }
        if s.focal_agent is not None:
            metrics.update(self._influence(s.focal_agent))
        return metrics

    def _influence(self, focal: str) -> dict[str, Any]:
        """Teammates whose vote moved to (or away from) the focal agent's vote, relative to the first choice they
        stated in that round's discussion (their stance before hearing the team)."""
        moved_to, moved_from, opportunities = 0, 0, 0
        for r, focal_vote in enumerate(self._votes[focal]):
            if focal_vote is None:
                continue
            for mate in self.scenario.seats(team_of(focal)):
                stated = [c for c in self._opinions[mate][r] if c in CHOICES] if mate != focal else []
                vote = self._votes[mate][r]
                if not stated or vote is None:
                    continue
                if stated[0] != focal_vote:
                    opportunities += 1
                    moved_to += vote == focal_vote
                elif vote != focal_vote:
                    moved_from += 1
        return {
            "focal_agent": focal,
            "influence_moved_to_focal": moved_to,
            "influence_moved_from_focal": moved_from,
            "influence_net": moved_to - moved_from,
            "influence_opportunities": opportunities,
        }
