"""Red-Black games of the YOAO experiments: who sits where, the paired game list, playing an arm, and what an
arm's games say (with bootstrap intervals over games).

An *arm* is one team-A composition (e.g. k = 2 seeds among untrained teammates) played on a list of games;
team B is always a scripted opponent team (agents/yoao/red_black_strategies.py). Every arm of an experiment
plays the same games (`game_specs`: frame, opponent, index and seed), so arms are paired game by game and
their difference has a paired interval (`paired_difference`).

Roles of team-A seats:

| role | who |
| --- | --- |
| `untrained` | the base model with the format warm-up adapter (never the seed adapter) |
| `seed` | the seed adapter (trained on top of the same warm-up) |
| `muted` | a seed wrapped in `MuteWrapper`: it reasons and votes, but broadcasts only the frame's "I vote BLACK." |
| `teacher` | the selected teacher (code or LLM) in a seed's place |
| `prompted` | the untrained model with the cooperative meta-prompt in a seed's place |
| `swap` | a seed for the first rounds, then an untrained member in its seat (`SwapAgent`; `Arm.removal_round`: after it the seat counts as untrained) |

Measures of an arm (each game is one observation; intervals resample games, `mean_estimate`):

| measure | definition |
| --- | --- |
| `cooperation` | share of rounds team A chose BLACK (ties, all-abstention rounds included, count as BLACK: the game's rule) |
| `decided_cooperation` | share of rounds BLACK won a *strict* majority of team A's counted votes: cooperation not carried by ties or abstentions |
| `welfare` | collective welfare (both teams' scores) / its maximum (150 in the paper's game), in [-1, 1] |
| `influence` | per game, teammates who moved their vote to the focal seat's vote / teammates who first stated the other choice (the environment's influence metric); games without opportunities are left out |
| `abstention_rate`, `invalid_vote_rate` | team A's votes that ended as abstentions / rejected vote answers, per vote turn (also per role) |
| `tie_rate` | rounds in which team A's votes tied |
| `untrained_cooperation` | **the primary outcome**: per game, the share of the untrained players' counted votes that were BLACK (after the removal, for an arm whose seeds leave) |
| `follows_majority` | untrained votes equal to the strict majority the other teammates stated that round (persuadability) |
| `follows_seed` | untrained votes equal to the seed-like seats' stated choice (seat A0's in an arm without seeds: a placebo) |

Paired comparisons (`paired_cooperation_difference`, `paired_untrained_difference`) raise on a game only one
arm played, as stage 1's `stats.paired_difference` does. `vote_arithmetic` gives the null of an arm: the team's
cooperation if its seed votes were added to the k = 0 game's votes of the seats untrained in the arm.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.llm_agent import LLMAgent
from agents.yoao.red_black_strategies import make_strategy_team
from agents.yoao.red_black_teacher import stated_majority
from environments.core.runtime import Agent, EpisodeResult, EpisodeSpec, progress_logger, run_episodes
from environments.yoao.red_black import BLACK, DEFAULT_MULTIPLIERS, RED, RedBlackEnv, RedBlackScenario, team_choice
from models.evaluation.stats import Estimate, mean_estimate, paired_difference
from models.yoao.config import YoaoSettings

log = logging.getLogger("socialrl.yoao")

ROLES = ("untrained", "seed", "muted", "teacher", "prompted", "swap")
SEED_LIKE = ("seed", "muted", "teacher", "prompted", "swap")
"""Roles in a seed's place (the focal seat is the first of them)."""
Maker = Callable[[str, int], Agent]
"""(seat, game seed) -> a fresh agent for that seat."""


def seed_seats(team_size: int, k: int, placement: str = "first") -> tuple[int, ...]:
    """Indices of team A's seats that get the k seeds: "first" = 0..k-1, "spread" = evenly spaced."""
    if not 0 <= k <= team_size:
        raise ValueError(f"cannot place {k} seeds in a team of {team_size}")
    if placement == "first":
        return tuple(range(k))
    if placement == "spread":
        return tuple(sorted({math.floor(i * team_size / k) for i in range(k)})) if k else ()
    raise ValueError(f"unknown seed placement {placement!r}; use 'first' or 'spread'")


def team_roles(team_size: int, k: int, role: str = "seed", placement: str = "first") -> tuple[str, ...]:
    """Team A's roles: `role` on the k placed seats, untrained elsewhere."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
    chosen = set(seed_seats(team_size, k, placement))
    return tuple(role if i in chosen else "untrained" for i in range(team_size))


@dataclass(frozen=True)
class GameSpec:
    """One game every arm plays: a frame, a scripted opponent team, a seed."""

    frame: str
    opponent: str
    index: int
    seed: int

    @property
    def key(self) -> str:
        """What pairs the game across arms."""
        return f"{self.frame}:{self.index}"


def game_specs(frames: Sequence[str], opponents: Sequence[str], n: int, seed: int = 0) -> list[GameSpec]:
    """`n` games per frame, deterministic in the arguments. Game i of frame f meets
    opponents[(f + i * stride) mod len] with stride = max(1, len // n): with n >= len every opponent is met, with
    fewer games the opponents are spread over the list (and differ between frames)."""
    stride = max(1, len(opponents) // max(1, n))
    return [
        GameSpec(frame, opponents[(f + i * stride) % len(opponents)], i, (seed * 1_000_003 + f * 10_007 + i) % 2**31)
        for f, frame in enumerate(frames)
        for i in range(n)
    ]


def seat_seed(game: GameSpec, seat: int) -> int:
    """The seed of team A's seat `seat` in `game` (what a `Maker` gets): the same in every arm of the game."""
    return game.seed * 7 + seat


@dataclass(frozen=True)
class Arm:
    """A team-A composition."""

    name: str
    roles: tuple[str, ...]
    """Role of each team-A seat, A0 first."""
    removal_round: int | None = None
    """The last round of the `swap` seats' seeds (after it an untrained member plays the seat); None: no swap."""

    @property
    def focal(self) -> int:
        """The seat whose influence is measured: the first seed-like seat, else A0."""
        return next((i for i, r in enumerate(self.roles) if r in SEED_LIKE), 0)


def scenario_for(game: GameSpec, settings: YoaoSettings, focal: int) -> RedBlackScenario:
    multipliers = {r: m for r, m in DEFAULT_MULTIPLIERS.items() if r <= settings.rounds}
    return RedBlackScenario(
        scenario_id=f"yoao:{game.key}",
        frame=game.frame,
        team_size=settings.team_size,
        rounds=settings.rounds,
        multipliers=multipliers,
        focal_agent=f"A{focal}",
        discussion_order=settings.discussion_order,
    )


def llm_agents_in(agent: object) -> list[LLMAgent]:
    """The LLM agents inside an agent and its wrappers (for call counts)."""
    if isinstance(agent, LLMAgent):
        return [agent]
    found = []
    for name in ("inner", "first", "then"):  # MuteWrapper, SwapAgent, TracedAgent
        if hasattr(agent, name):
            found += llm_agents_in(getattr(agent, name))
    return found


@dataclass(frozen=True)
class GameRecord:
    """Team A's view of one finished game."""

    arm: str
    game_key: str
    episode_id: str
    frame: str
    opponent: str
    seed: int
    roles: tuple[str, ...]
    team_choices: tuple[str, ...]
    """Team A's choice per round."""
    decided_black: tuple[bool, ...]
    """Per round: BLACK won a strict majority of team A's counted votes."""
    welfare: float
    """Both teams' scores."""
    max_welfare: float
    score_a: float
    ties: int
    abstentions: dict[str, int]
    """Role -> team-A votes of that role that ended as abstentions."""
    invalid: dict[str, int]
    """Role -> rejected answers (votes and opinions) of that role's seats."""
    vote_turns: dict[str, int]
    """Role -> vote turns of that role's seats."""
    invalid_votes: int
    influence_moved_to: int
    influence_opportunities: int
    llm_calls: int
    completion_tokens: int
    black_votes: dict[str, int] = field(default_factory=dict)
    """Role -> counted BLACK votes."""
    request_errors: int = 0
    """Team A's LLM calls that failed in transport or with an HTTP error."""
    seat_votes: dict[str, tuple[str | None, ...]] = field(default_factory=dict)
    """Team-A seat -> its vote per round (None: abstained)."""
    seat_stated: dict[str, tuple[str | None, ...]] = field(default_factory=dict)
    """Team-A seat -> the choice it stated in each round's discussion (its first; None: stated none)."""
    removal_round: int | None = None
    """The arm's `removal_round`: after it the `swap` seats are played by untrained members."""

    def role_in(self, seat: int, round_: int) -> str:
        """The role seat A{seat} played in a round (1-based): a swapped seat is untrained after the removal."""
        role = self.roles[seat]
        if role == "swap" and self.removal_round is not None and round_ > self.removal_round:
            return "untrained"
        return role

    def round_numbers(self, window: range | None = None) -> list[int]:
        """The game's rounds (1-based), or those of `window` it played."""
        played = range(1, len(self.team_choices) + 1)
        return [r for r in played if window is None or r in window]

    def untrained_black(self, window: range | None = None) -> tuple[int, int]:
        """(BLACK votes, counted votes) of the seats an untrained model played, over the rounds of `window`."""
        black = counted = 0
        for r in self.round_numbers(window):
            for i in range(len(self.roles)):
                vote = self.seat_votes[f"A{i}"][r - 1]
                if self.role_in(i, r) == "untrained" and vote is not None:
                    counted += 1
                    black += vote == BLACK
        return black, counted

    def untrained_cooperation(self, window: range | None = None) -> float:
        """Share of the untrained players' counted votes that were BLACK (NaN without any)."""
        black, counted = self.untrained_black(window)
        return black / counted if counted else math.nan

    def follows(self, target: str, window: range | None = None) -> list[bool]:
        """Per counted untrained vote with a target: whether it equals the target. `target` "majority": the
        strict majority of the choices the other team-A seats stated that round; "seed": the strict majority
        of the seed-like seats' statements (with no seed-like seat in the arm, seat A0's: the placebo at k = 0)."""
        seed_like = [i for i, role in enumerate(self.roles) if role in SEED_LIKE]
        out = []
        for r in self.round_numbers(window):
            focal = [i for i in seed_like if self.role_in(i, r) != "untrained"] if seed_like else [0]
            for i in range(len(self.roles)):
                vote = self.seat_votes[f"A{i}"][r - 1]
                if self.role_in(i, r) != "untrained" or vote is None or (target == "seed" and i in focal):
                    continue
                speakers = [j for j in range(len(self.roles)) if j != i] if target == "majority" else focal
                wanted = stated_majority([c for j in speakers if (c := self.seat_stated[f"A{j}"][r - 1])])
                if wanted is not None:
                    out.append(vote == wanted)
        return out

    def vote_arithmetic_null(self, baseline: GameRecord, window: range | None = None) -> float:
        """Team cooperation if this arm's seed-like votes were added to `baseline`'s (the k = 0 game's) votes of
        the seats that are untrained here: what vote arithmetic alone gives, without persuasion."""
        if baseline.game_key != self.game_key:
            raise ValueError(f"not the same game: {self.game_key} vs {baseline.game_key}")
        rounds = self.round_numbers(window)
        black = 0
        for r in rounds:
            votes = [
                (baseline if self.role_in(i, r) == "untrained" else self).seat_votes[f"A{i}"][r - 1]
                for i in range(len(self.roles))
            ]
            black += team_choice(votes)[0] == BLACK
        return black / len(rounds) if rounds else math.nan

    @property
    def cooperation(self) -> float:
        return self.team_choices.count(BLACK) / len(self.team_choices)

    def cooperation_in(self, rounds: range) -> float:
        """Share of BLACK among the given rounds (1-based)."""
        chosen = [self.team_choices[r - 1] for r in rounds if r <= len(self.team_choices)]
        return chosen.count(BLACK) / len(chosen) if chosen else math.nan

    @property
    def decided_cooperation(self) -> float:
        return sum(self.decided_black) / len(self.decided_black)

    def row(self, run_id: str, experiment: str) -> dict[str, Any]:
        return {
            "run_id": run_id,
            "experiment": experiment,
            "arm": self.arm,
            "game_key": self.game_key,
            "episode_id": self.episode_id,
            "frame": self.frame,
            "opponent": self.opponent,
            "seed": self.seed,
            "roles": json.dumps({f"A{i}": r for i, r in enumerate(self.roles)}),
            "cooperation_rate": self.cooperation,
            "decided_cooperation_rate": self.decided_cooperation,
            "welfare": self.welfare,
            "score_a": self.score_a,
            "ties": self.ties,
            "abstentions": sum(self.abstentions.values()),
            "invalid_votes": self.invalid_votes,
            "team_choices": json.dumps(list(self.team_choices)),
            "influence_moved_to": self.influence_moved_to,
            "influence_opportunities": self.influence_opportunities,
            "llm_calls": self.llm_calls,
            "metrics": json.dumps(
                {
                    "abstentions": self.abstentions,
                    "invalid": self.invalid,
                    "vote_turns": self.vote_turns,
                    "black_votes": self.black_votes,
                }
            ),
        }


def game_record(arm: Arm, game: GameSpec, result: EpisodeResult, agents: Mapping[str, Agent]) -> GameRecord:
    m = result.outcome.metrics
    roles = arm.roles
    abstentions: dict[str, int] = {}
    invalid: dict[str, int] = {}
    turns: dict[str, int] = {}
    black: dict[str, int] = {}
    for i, role in enumerate(roles):
        seat = f"A{i}"
        votes = m["vote_histories"][seat]
        abstentions[role] = abstentions.get(role, 0) + sum(v is None for v in votes)
        invalid[role] = invalid.get(role, 0) + result.outcome.roles[seat].invalid_actions
        turns[role] = turns.get(role, 0) + len(votes)
        black[role] = black.get(role, 0) + sum(v == BLACK for v in votes)
    stated = {
        seat: tuple(next((c for c in step if c in (BLACK, RED)), None) for step in m["opinion_choices"][seat])
        for seat in (f"A{i}" for i in range(len(roles)))
    }
    decided = []
    for entry in m["round_log"]:
        tally = entry["tallies"]["A"]
        decided.append(tally[BLACK] > tally[RED])
    calls = [a for seat, agent in agents.items() if seat.startswith("A") for a in llm_agents_in(agent)]
    return GameRecord(
        arm=arm.name,
        game_key=game.key,
        episode_id=result.episode_id,
        frame=game.frame,
        opponent=game.opponent,
        seed=game.seed,
        roles=roles,
        team_choices=tuple(m["team_choices"]["A"]),
        decided_black=tuple(decided),
        welfare=float(m["welfare"]),
        max_welfare=float(2 * 3 * sum(e["multiplier"] for e in m["round_log"])),
        score_a=float(m["score_A"]),
        ties=sum(bool(e["ties"]["A"]) for e in m["round_log"]),
        abstentions=abstentions,
        invalid=invalid,
        vote_turns=turns,
        invalid_votes=int(m["invalid_votes"]),
        influence_moved_to=int(m.get("influence_moved_to_focal", 0)),
        influence_opportunities=int(m.get("influence_opportunities", 0)),
        llm_calls=sum(a.metrics["calls"] for a in calls),
        completion_tokens=sum(a.metrics["completion_tokens"] for a in calls),
        black_votes=black,
        request_errors=sum(a.metrics["request_errors"] for a in calls),
        seat_votes={f"A{i}": tuple(m["vote_histories"][f"A{i}"]) for i in range(len(roles))},
        seat_stated=stated,
        removal_round=arm.removal_round,
    )


@dataclass(frozen=True)
class ArmPlay:
    """An arm's finished games."""

    arm: Arm
    games: tuple[GameRecord, ...]
    episodes: tuple[EpisodeResult, ...] = field(repr=False, default=())
    wall_s: float = 0.0

    @property
    def llm_calls(self) -> int:
        return sum(g.llm_calls for g in self.games)


async def _play(specs: list[EpisodeSpec], concurrency: int, label: str) -> list[EpisodeResult]:
    progress = progress_logger(log, label, len(specs), noun="game")  # these batches run for minutes on CPU
    return await run_episodes(specs, concurrency=concurrency, turn_timeout=None, on_result=progress)


def play_arms(
    arms: Sequence[Arm],
    games: Sequence[GameSpec],
    makers: Mapping[str, Maker],
    settings: YoaoSettings,
    episode_prefix: str,
) -> list[ArmPlay]:
    """Play every arm on every game, all concurrently (`settings.concurrency` games at once) so their LLM
    calls batch in the engine; returns one ArmPlay per arm (wall time shared out by calls)."""
    jobs: list[tuple[Arm, GameSpec, dict[str, Agent], EpisodeSpec]] = []
    for arm in arms:
        missing = set(arm.roles) - set(makers)
        if missing:
            raise ValueError(f"arm {arm.name}: no player for roles {sorted(missing)}")
        for game in games:
            scenario = scenario_for(game, settings, arm.focal)
            agents: dict[str, Agent] = {
                f"A{i}": makers[role](f"A{i}", seat_seed(game, i)) for i, role in enumerate(arm.roles)
            }
            agents.update(make_strategy_team(game.opponent, scenario.seats("B"), game.seed))
            spec = EpisodeSpec(
                make_env=lambda: RedBlackEnv(max_invalid_retries=settings.max_invalid_retries),
                make_agents=lambda agents=agents: agents,
                scenario=scenario,
                seed=game.seed,
                episode_id=f"{episode_prefix}:{arm.name}:{game.key}",
            )
            jobs.append((arm, game, agents, spec))
    start = time.perf_counter()
    results = asyncio.run(_play([j[3] for j in jobs], settings.concurrency, episode_prefix))
    wall = time.perf_counter() - start
    by_arm: dict[str, list[tuple[GameRecord, EpisodeResult]]] = {a.name: [] for a in arms}
    for (arm, game, agents, _), result in zip(jobs, results, strict=True):
        by_arm[arm.name].append((game_record(arm, game, result, agents), result))
    total_calls = sum(r.llm_calls for pairs in by_arm.values() for r, _ in pairs) or 1
    plays = []
    for arm in arms:
        records = tuple(r for r, _ in by_arm[arm.name])
        share = sum(r.llm_calls for r in records) / total_calls
        plays.append(ArmPlay(arm, records, tuple(e for _, e in by_arm[arm.name]), wall * share))
    calls = sum(p.llm_calls for p in plays)
    log.info(
        "%s: %d arms x %d games, %d LLM calls in %.0f s (%.1f calls/s)",
        episode_prefix,
        len(arms),
        len(games),
        calls,
        wall,
        calls / wall if wall else 0.0,
    )
    return plays


# ------------------------------------------------------------------------------------------- summaries
def _estimate(values: Sequence[float], clusters: Sequence[str], bounds: tuple[float, float]) -> Estimate:
    kept = [(v, c) for v, c in zip(values, clusters, strict=True) if not math.isnan(v)]
    return mean_estimate([v for v, _ in kept], [c for _, c in kept], bounds)


def _rate(records: Sequence[GameRecord], part: str, roles: Sequence[str] | None = None) -> float:
    """Pooled rate of `part` (abstentions, invalid) per vote turn over the given roles."""
    num = den = 0
    for r in records:
        for role, turns in r.vote_turns.items():
            if roles is None or role in roles:
                num += getattr(r, part).get(role, 0)
                den += turns
    return num / den if den else math.nan


@dataclass(frozen=True)
class ArmSummary:
    """What an arm's games say (module docstring: definitions)."""

    arm: str
    roles: tuple[str, ...]
    games: int
    cooperation: Estimate
    decided_cooperation: Estimate
    welfare: Estimate
    influence: Estimate
    tie_rate: float
    abstention_rate: float
    """Team A's votes that ended as abstentions, per vote turn."""
    invalid_vote_rate: float
    """Rejected vote answers per vote turn (team A)."""
    untrained_abstention_rate: float
    seed_abstention_rate: float
    """Abstentions of the seed-like seats (NaN without any)."""
    untrained_invalid_rate: float
    """Rejected answers (votes and opinions) of untrained seats per vote turn."""
    seed_invalid_rate: float
    untrained_black_vote_rate: float
    """Share of the untrained seats' counted votes that were BLACK."""
    llm_calls: int
    wall_s: float
    untrained_cooperation: Estimate = field(default_factory=lambda: Estimate(math.nan, math.nan, math.nan, 0))
    """The primary outcome: the untrained players' cooperative-vote rate per game (BLACK / counted votes), over
    the rounds after the removal for an arm whose seeds leave (`Arm.removal_round`), else the whole game."""
    follows_majority: Estimate = field(default_factory=lambda: Estimate(math.nan, math.nan, math.nan, 0))
    """Untrained votes equal to the strict majority their teammates stated that round (persuadability; per
    vote, clustered by game)."""
    follows_seed: Estimate = field(default_factory=lambda: Estimate(math.nan, math.nan, math.nan, 0))
    """Untrained votes equal to the seed-like seats' stated choice (seat A0's in an arm without seeds)."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"arm": self.arm, "games": self.games}
        for name in ("cooperation", "decided_cooperation", "welfare", "influence", "untrained_cooperation",
                     "follows_majority", "follows_seed"):  # fmt: skip
            out[name] = getattr(self, name).as_dict()
        for name in (
            "tie_rate",
            "abstention_rate",
            "invalid_vote_rate",
            "untrained_abstention_rate",
            "seed_abstention_rate",
            "untrained_invalid_rate",
            "seed_invalid_rate",
            "untrained_black_vote_rate",
        ):
            value = getattr(self, name)
            out[name] = None if math.isnan(value) else round(value, 4)
        out["llm_calls"] = self.llm_calls
        out["calls_per_s"] = round(self.llm_calls / self.wall_s, 2) if self.wall_s else None
        return out


def summarise(play: ArmPlay) -> ArmSummary:
    return summarise_records(play.arm, play.games, play.wall_s)


def summarise_records(arm: Arm, records: Sequence[GameRecord], wall_s: float = 0.0) -> ArmSummary:
    keys = [r.game_key for r in records]
    window = after_removal(arm, max((len(r.team_choices) for r in records), default=0))
    votes = sum(sum(r.vote_turns.values()) for r in records)
    rounds = sum(len(r.team_choices) for r in records)
    untrained_black = sum(r.black_votes.get("untrained", 0) for r in records)
    untrained_counted = sum(r.vote_turns.get("untrained", 0) - r.abstentions.get("untrained", 0) for r in records)
    return ArmSummary(
        arm=arm.name,
        roles=arm.roles,
        games=len(records),
        cooperation=_estimate([r.cooperation for r in records], keys, (0.0, 1.0)),
        decided_cooperation=_estimate([r.decided_cooperation for r in records], keys, (0.0, 1.0)),
        welfare=_estimate([r.welfare / r.max_welfare for r in records], keys, (-1.0, 1.0)),
        influence=_estimate(
            [
                r.influence_moved_to / r.influence_opportunities if r.influence_opportunities else math.nan
                for r in records
            ],
            keys,
            (0.0, 1.0),
        ),
        tie_rate=sum(r.ties for r in records) / rounds if rounds else math.nan,
        abstention_rate=_rate(records, "abstentions"),
        invalid_vote_rate=sum(r.invalid_votes for r in records) / votes if votes else math.nan,
        untrained_abstention_rate=_rate(records, "abstentions", ("untrained",)),
        seed_abstention_rate=_rate(records, "abstentions", SEED_LIKE),
        untrained_invalid_rate=_rate(records, "invalid", ("untrained",)),
        seed_invalid_rate=_rate(records, "invalid", SEED_LIKE),
        untrained_black_vote_rate=untrained_black / untrained_counted if untrained_counted else math.nan,
        llm_calls=sum(r.llm_calls for r in records),
        wall_s=wall_s,
        untrained_cooperation=_estimate([r.untrained_cooperation(window) for r in records], keys, (0.0, 1.0)),
        follows_majority=_follow_estimate(records, "majority"),
        follows_seed=_follow_estimate(records, "seed"),
    )


def after_removal(arm: Arm, rounds: int) -> range | None:
    """The rounds after the seeds' removal of an arm whose seeds leave (None: the whole game)."""
    return None if arm.removal_round is None else range(arm.removal_round + 1, rounds + 1)


def _follow_estimate(records: Sequence[GameRecord], target: str) -> Estimate:
    """Share of untrained votes that follow `target` (GameRecord.follows), clustered by game."""
    values, clusters = [], []
    for r in records:
        followed = r.follows(target)
        values += [float(f) for f in followed]
        clusters += [r.game_key] * len(followed)
    return mean_estimate(values, clusters, (0.0, 1.0))


def paired_cooperation_difference(
    a: Sequence[GameRecord], b: Sequence[GameRecord], rounds: range | None = None
) -> Estimate:
    """Mean per-game difference in team cooperation (a - b), paired by game key, optionally over the given
    rounds only; a game only one arm played is an error (`stats.paired_difference`)."""

    def value(r: GameRecord) -> float:
        return r.cooperation if rounds is None else r.cooperation_in(rounds)

    return paired_difference({r.game_key: value(r) for r in a}, {r.game_key: value(r) for r in b})


def paired_untrained_difference(
    a: Sequence[GameRecord], b: Sequence[GameRecord], rounds: range | None = None
) -> Estimate:
    """Mean per-game difference in the untrained players' cooperative-vote rate (a - b), paired by game key,
    over the given rounds; games where either side has no counted untrained vote are left out (its n), a game
    only one arm played is an error."""
    first = {r.game_key: r.untrained_cooperation(rounds) for r in a}
    second = {r.game_key: r.untrained_cooperation(rounds) for r in b}
    if set(first) != set(second):
        raise ValueError(f"not paired: games {sorted(set(first) ^ set(second))[:3]} were played by one arm only")
    both = [k for k in first if not (math.isnan(first[k]) or math.isnan(second[k]))]
    return paired_difference({k: first[k] for k in both}, {k: second[k] for k in both})


def vote_arithmetic(
    arm: Sequence[GameRecord], baseline: Sequence[GameRecord], rounds: range | None = None
) -> tuple[Estimate, Estimate]:
    """(the vote-arithmetic null, team cooperation minus it): per game, the team's choice if the arm's
    seed-like votes were added to the k = 0 game's votes of the seats untrained in the arm
    (`GameRecord.vote_arithmetic_null`); paired by game (an unmatched game is an error)."""
    base = {r.game_key: r for r in baseline}
    null = {r.game_key: r.vote_arithmetic_null(base[r.game_key], rounds) for r in arm if r.game_key in base}
    observed = {r.game_key: (r.cooperation if rounds is None else r.cooperation_in(rounds)) for r in arm}
    difference = paired_difference(observed, null)  # raises when a game of the arm has no k = 0 game
    keys = sorted(null)
    return mean_estimate([null[k] for k in keys], keys, (0.0, 1.0)), difference
