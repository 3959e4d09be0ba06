"""Does the trained seed persuade ideal listeners as its teacher does? The incentive audit with the seed seated.

The propagation games mix two unknowns: what the trained seed says, and how the learned players (the format
warm-up) respond over five rounds. The listener probe (models/yoao/listening.py) measures the second one
round at a time; this audit measures the first. It plays the incentive audit's games (models/yoao/incentives.py:
the same held-out games, the same tutors in the untrained seats, the seed placed as the profile places seeds)
with a fourth kind of seed, the trained seed (any `Maker`, e.g. the seed adapter behind an OpenAI-compatible
server), beside three of the audit's code arms. The tutors are the listeners the warm-up was trained to
imitate and weigh reasons by their content (docs/yoao.md, "A model of persuasion"), so the arms differ only in
what the seed's seat says and votes:

| arm | the seed's seat |
| --- | --- |
| `none` | a tutor too (k = 0) |
| `argue` | the seed's teacher (`PrincipledCooperator`), the audit's arguing seed |
| `vote_only` | the teacher muted: it votes BLACK and says only that (the mute arm) |
| `seed` | the trained seed |

| comparison (paired by game, untrained cooperation) | reads |
| --- | --- |
| `seed_minus_none` | the trained seed moves the tutors at all |
| `seed_minus_vote_only` | its words move them beyond a bare vote for BLACK (`persuades`: `ci_low > 0`) |
| `argue_minus_seed` | what the teacher's arguments do that the seed's do not (0: the seed argues as well) |

Also reported: the choices the seed's statements state (BLACK, RED, none), its BLACK share of votes, and its
first statement in each of the first three games (what it says). The tutors play from their seeds, so the
three code arms are the audit's own games, played again; only the seed's seat samples. LLM calls: two per round of the
seed's seat (one game's statement and vote), 160 for the cpu profile's 16 games of 5 rounds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from environments.core.base import ActionSpec
from environments.core.events import Action, Event, Notification
from environments.core.runtime import Agent, describe_agent
from environments.yoao.red_black import BLACK, RED, VOTE
from models.display import entry_text, fixed
from models.evaluation.stats import Estimate
from models.yoao.config import YoaoSettings
from models.yoao.games import (
    Arm,
    GameRecord,
    Maker,
    paired_untrained_difference,
    play_arms,
    seat_seed,
    summarise_records,
)
from models.yoao.incentives import YoaoIncentiveSettings, audit_arm, audit_games, entry, tutor_maker

CODE_ARMS = ("none", "argue", "vote_only")
"""The incentive audit's arms played beside the trained seed (module docstring)."""
SEED_ARM = "seed"
COMPARISONS: dict[str, tuple[str, str]] = {
    "seed_minus_none": (SEED_ARM, "none"),
    "seed_minus_vote_only": (SEED_ARM, "vote_only"),
    "argue_minus_seed": ("argue", SEED_ARM),
}
"""Name -> (minuend arm, subtrahend arm), paired by game."""
TRANSCRIPT_GAMES = 3
"""Games whose first seed statement the audit keeps."""


@dataclass(frozen=True, kw_only=True)
class SeedAudit:
    """What the seed audit measured (module docstring)."""

    seed: str
    """The seed played (e.g. the adapter's registered name)."""
    frames: tuple[str, ...]
    games: int
    """Paired games per arm."""
    untrained_cooperation: dict[str, Estimate]
    """Arm -> the tutors' cooperation (mean over games of the untrained seats' BLACK share of counted votes)."""
    comparisons: dict[str, Estimate]
    """`COMPARISONS` name -> paired difference of untrained cooperation."""
    stated: dict[str, int]
    """"BLACK", "RED", "none" -> the seed's statements stating that choice (its first in the statement)."""
    seed_black_votes: float
    """Share of the seed's counted votes that were BLACK (NaN without any)."""
    llm_calls: int
    """Calls the seed's seat made (retries included)."""
    wall_s: float
    transcripts: tuple[dict[str, str], ...] = ()
    """The seed's first statement in each of the first `TRANSCRIPT_GAMES` games: `game`, `statement`."""

    def __post_init__(self) -> None:
        if set(self.untrained_cooperation) != {*CODE_ARMS, SEED_ARM} or set(self.comparisons) != set(COMPARISONS):
            raise ValueError(f"the audit covers arms {(*CODE_ARMS, SEED_ARM)} and comparisons {tuple(COMPARISONS)}")
        if set(self.stated) != {BLACK, RED, "none"} or min(self.stated.values()) < 0:
            raise ValueError(f"stated counts BLACK, RED and none statements, got {self.stated}")

    @property
    def persuades(self) -> bool:
        """The seed's words move the tutors beyond a bare BLACK vote (`seed_minus_vote_only` above 0)."""
        return bool(self.comparisons["seed_minus_vote_only"].ci_low > 0)

    def as_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "frames": list(self.frames),
            "games": self.games,
            "untrained_cooperation": {arm: entry(e) for arm, e in self.untrained_cooperation.items()},
            **{name: entry(e) for name, e in self.comparisons.items()},
            "persuades": self.persuades,
            "stated": dict(self.stated),
            "seed_black_votes": None if math.isnan(self.seed_black_votes) else round(self.seed_black_votes, 4),
            "llm_calls": self.llm_calls,
            "wall_s": round(self.wall_s, 1),
            "transcripts": list(self.transcripts),
        }

    def markdown(self) -> str:
        stated = ", ".join(f"{n} {c}" for c, n in self.stated.items())
        rows = [
            f"**Seed audit** ({self.seed} in the seed's seat among the tutors, {self.games} paired games per arm "
            f"of the incentive audit)",
            "",
            "| arm | tutors' cooperation |",
            "| --- | --- |",
            *(f"| {arm} | {e.text('.3f')} |" for arm, e in self.untrained_cooperation.items()),
            "",
            "| paired comparison | difference |",
            "| --- | --- |",
            *(f"| {name} | {e.text('+.3f')} |" for name, e in self.comparisons.items()),
            "",
            f"The seed's statements state {stated}; BLACK in {fixed(self.seed_black_votes, '.2f')} of its votes. "
            f"Its words {'move' if self.persuades else 'are not shown to move'} the tutors beyond a bare vote.",
        ]
        rows += [f"- {t['game']}: `{t['statement']}`" for t in self.transcripts]
        return "\n".join(rows)


def _seed_choices(records: list[GameRecord]) -> tuple[dict[str, int], float]:
    """(stated choice counts, BLACK share of counted votes) of the seed seats of `records`."""
    stated = {BLACK: 0, RED: 0, "none": 0}
    black = counted = 0
    for record in records:
        for i, role in enumerate(record.roles):
            if role != "seed":
                continue
            for choice in record.seat_stated[f"A{i}"]:
                stated[choice if choice in (BLACK, RED) else "none"] += 1
            votes = [v for v in record.seat_votes[f"A{i}"] if v is not None]
            black, counted = black + votes.count(BLACK), counted + len(votes)
    return stated, (black / counted if counted else math.nan)


def run_seed_audit(
    settings: YoaoSettings,
    seed: Maker,
    *,
    name: str,
    games: int | None = None,
    audit: YoaoIncentiveSettings | None = None,
) -> SeedAudit:
    """Play the audit's code arms and `seed` in the seed's seat on the audit's games among the tutors (module
    docstring), the first `games` of them (None: all), and compare them, paired by game."""
    start = time.perf_counter()
    played = audit_games(settings, audit)[:games]
    if len(played) < 2:
        raise ValueError(f"the seed audit needs at least 2 paired games, got {len(played)}")
    untrained = tutor_maker(settings)
    said: dict[int, StatementLog] = {}

    def seated(seat: str, sampling_seed: int) -> Agent:
        agent = said[sampling_seed] = StatementLog(seed(seat, sampling_seed))
        return agent

    records: dict[str, list[GameRecord]] = {}
    cooperation: dict[str, Estimate] = {}
    for arm_name in (*CODE_ARMS, SEED_ARM):
        arm, makers = audit_arm("argue" if arm_name == SEED_ARM else arm_name, settings, untrained)
        if arm_name == SEED_ARM:  # the teacher's seat and placement, played by the trained seed
            arm, makers = Arm(SEED_ARM, arm.roles), {**makers, "seed": seated}
        (play,) = play_arms([arm], played, makers, settings, f"yoao-seed-audit:{arm_name}")
        records[arm_name] = list(play.games)
        cooperation[arm_name] = summarise_records(arm, records[arm_name]).untrained_cooperation
    comparisons = {n: paired_untrained_difference(records[a], records[b]) for n, (a, b) in COMPARISONS.items()}
    stated, black_votes = _seed_choices(records[SEED_ARM])
    seats = [i for i, role in enumerate(records[SEED_ARM][0].roles) if role == "seed"]
    first_statements = [
        {"game": game.key, "statement": statement}
        for game in played[:TRANSCRIPT_GAMES]
        for i in seats
        for statement in said[seat_seed(game, i)].statements[:1]
    ]
    return SeedAudit(
        seed=name,
        frames=tuple(settings.heldout_frames),
        games=len(played),
        untrained_cooperation=cooperation,
        comparisons=comparisons,
        stated=stated,
        seed_black_votes=black_votes,
        llm_calls=sum(r.llm_calls for r in records[SEED_ARM]),
        wall_s=time.perf_counter() - start,
        transcripts=tuple(first_statements),
    )


class StatementLog:
    """Wraps a seat's agent and keeps the text of every statement (opinion) it makes, in order; what it does is
    unchanged (`inner`, as the other wrappers, so its LLM calls are counted)."""

    def __init__(self, inner: Agent) -> None:
        self.inner = inner
        self.statements: list[str] = []

    def describe(self) -> str:
        return describe_agent(self.inner)

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        await self.inner.reset(agent_id, env_id, spec, episode_id)

    async def observe(self, event: Event) -> None:
        await self.inner.observe(event)

    async def act(self, request: Notification) -> Action:
        action = await self.inner.act(request)
        if VOTE not in request.allowed and action.kind != "pass":
            self.statements.append(action.text)
        return action


def seed_audit_sentence(audit: Mapping[str, Any]) -> str:
    """The seed audit's `as_json()` in one paragraph (the result file's `warmstarts.seed_audit`)."""
    compared = "; ".join(f"{name} {entry_text(audit[name], '+.2f')}" for name in COMPARISONS)
    stated = ", ".join(f"{n} {choice}" for choice, n in audit["stated"].items())
    return (
        f"Seed audit (the trained seed in the seed's seat among the tutors, {audit['games']} paired games of the "
        f"incentive audit): tutors' cooperation {compared}. The seed's statements state {stated}; "
        f"BLACK in {fixed(audit['seed_black_votes'], '.2f')} of its votes. Its words "
        f"{'move' if audit['persuades'] else 'are not shown to move'} the tutors beyond a bare vote."
    )
