"""Did the untrained players learn to weigh arguments? The incentive audit's discussions put to the format warm-up.

The incentive audit (models/yoao/incentives.py) shows that the *tutors* are moved by an argument more than by
a stated vote. The untrained seats of the LLM run are the format warm-up, trained to imitate those tutors;
whether it learned their weighing decides whether a seed can move it by what it says, and whether muting a seed
can lower its effect. The listener probe asks the served warm-up directly, without playing LLM games:

1. the audit's arms (`incentives.ARMS`: no seed, an arguing seed, the same seed muted, long text without a
   reason, a seed arguing the selfish choice) are played on the audit's held-out games among the tutors (code,
   seconds), every untrained seat traced as the chat an LLM seat sees (`TurnTracedAgent`);
2. for every round of those seats, the warm-up writes the seat's statement with the tutor's context up to it,
   then votes after the tutor's context with its own statement in the tutor's place (what it heard after
   speaking, then the vote request). Its statement must be its own: a tutor's statement already carries the
   tutor's persuaded choice, and a player that only repeats its statement in its vote would pass for one that
   listens. The game's temperature and token limit; the same sampling seeds for the same game, seat and round
   in every arm, so arms are compared on common random numbers. Replies are read as the game reads them.

| measure | definition |
| --- | --- |
| `model[arm]` | per game, the share of the warm-up's valid votes that are BLACK over the untrained seats' rounds; mean over games, bootstrap by game |
| `model_statements[arm]` | the same for the choices its statements state (statements stating none left out) |
| `tutors[arm]`, `tutor_statements[arm]` | the tutors' own votes and statements in those games: what a perfect imitation gives |
| `model_comparisons`, `tutor_comparisons` | the audit's `COMPARISONS` (e.g. `argue_minus_vote_only`) on the votes, paired by game |
| `model_statement_comparisons`, `tutor_statement_comparisons` | the same on the statements |
| `invalid_rate[arm]` | rounds whose vote reply is not a valid vote (left out of the shares) |

One round at a time: the contexts are the tutors' games (what the tutors said after the seat spoke, how
earlier rounds went among tutors), so the probe measures how the learned player responds to a discussion, not
how a game among learned players unfolds; the propagation experiments measure that. The two measures differ
in what they can show: a statement answers what the seat heard before it spoke (the seed, when it spoke
earlier, and the tutors before it), so `model_statement_comparisons` is the player's own response to the seed;
a vote also follows the tutors who spoke after it, who were persuaded as tutors are, so a player that follows
the stated majority gains part of the tutors' response in `model_comparisons` without weighing anything. The
warm-up `listens` when `argue_minus_vote_only` is above 0 on both; one that does not cannot show the paper's
mute test in the games, whatever the seed says.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from environments.core.runtime import Agent
from environments.yoao.red_black import BLACK, VOTE, VOTE_REQUEST, load_frame, read_choice
from models.display import entry_text, fixed
from models.evaluation.stats import Estimate, mean_estimate, paired_difference
from models.yoao.config import YoaoSettings
from models.yoao.games import GameSpec, game_specs, play_arms, seat_seed
from models.yoao.incentives import ARMS, COMPARISONS, audit_arm, entry, tutor_maker
from models.yoao.replay import Message, ReplayTurn, ask_turns
from models.yoao.seed.traces import TurnTracedAgent


@dataclass(frozen=True, kw_only=True)
class ProbeTurn:
    """One untrained seat's round in an audit game: the tutor's context, statement and vote."""

    arm: str
    """The audit arm whose game this is."""
    game: str
    """`GameSpec.key`: pairs the round's game across arms."""
    seat: str
    round: int
    frame: str
    statement_context: tuple[Message, ...]
    """Everything the seat saw before its statement (ends with the discussion request)."""
    tutor_statement: str
    after_statement: tuple[Message, ...]
    """What it heard after its statement, ending with the vote request."""
    tutor_vote: str

    def __post_init__(self) -> None:
        if not self.after_statement or VOTE_REQUEST not in self.after_statement[-1]["content"]:
            raise ValueError(f"{self.game} {self.seat} round {self.round}: the vote request must end the round")

    def vote_context(self, statement: str) -> tuple[Message, ...]:
        """The vote turn's context with `statement` in the seat's place."""
        return (*self.statement_context, {"role": "assistant", "content": statement}, *self.after_statement)

    def sampling_seed(self, kind: str) -> int:
        """The same for the same game, seat, round and turn kind in every arm (common random numbers)."""
        digest = hashlib.sha256(f"{self.game}:{self.seat}:{self.round}:{kind}".encode()).digest()
        return int.from_bytes(digest[:4], "big") % 2**31


def probe_games(settings: YoaoSettings, games: int, seed: int = 0) -> list[GameSpec]:
    """The first `games` of the audit's held-out games per frame (the audit's draw: `game_specs` with its seed)."""
    if games < 2:
        raise ValueError(f"the listener probe needs at least 2 games to pair, got {games}")
    return game_specs(settings.heldout_frames, settings.opponents, games, seed)


def probe_turns(settings: YoaoSettings, games: Sequence[GameSpec]) -> list[ProbeTurn]:
    """Play every audit arm on `games` among the tutors, tracing the untrained seats (module docstring, step 1);
    their rounds in arm, game, seat and round order."""
    tutor = tutor_maker(settings)
    turns: list[ProbeTurn] = []
    for name in ARMS:
        traced: dict[tuple[str, int], TurnTracedAgent] = {}

        def untrained(seat: str, seed: int, traced: dict[tuple[str, int], TurnTracedAgent] = traced) -> Agent:
            agent = traced[seat, seed] = TurnTracedAgent(tutor(seat, seed))
            return agent

        arm, makers = audit_arm(name, settings, untrained)
        play_arms([arm], games, makers, settings, f"yoao-listener:{name}")
        for game in games:
            for i, role in enumerate(arm.roles):
                if role == "untrained":
                    turns += _seat_rounds(name, game, f"A{i}", traced[f"A{i}", seat_seed(game, i)])
    return turns


def _seat_rounds(arm: str, game: GameSpec, seat: str, agent: TurnTracedAgent) -> list[ProbeTurn]:
    """Each round's statement and vote of a traced seat (a round without a statement is not asked)."""
    messages = agent.messages()
    replies = [p for p, m in enumerate(messages) if m["role"] == "assistant"]
    kinds = agent.reasoning()
    if len(kinds) != len(replies):
        raise ValueError(f"{seat} of {game.key}: {len(replies)} replies but {len(kinds)} recorded turns")
    out = []
    for n, (p, kind) in enumerate(zip(replies, kinds, strict=True)):
        said = n - 1
        if kind["kind"] != VOTE or said < 0 or kinds[said]["kind"] == VOTE or kinds[said]["round"] != kind["round"]:
            continue
        q = replies[said]
        turn = ProbeTurn(
            arm=arm, game=game.key, seat=seat, round=int(kind["round"]), frame=game.frame,
            statement_context=tuple(messages[:q]), tutor_statement=messages[q]["content"],
            after_statement=tuple(messages[q + 1 : p]), tutor_vote=messages[p]["content"],
        )  # fmt: skip
        out.append(turn)
    return out


@dataclass(frozen=True, kw_only=True)
class ListenerProbe:
    """What the probe measured (module docstring)."""

    adapter: str
    """The served model asked (the format warm-up's registered name)."""
    frames: tuple[str, ...]
    games: int
    """Paired games per arm."""
    rounds: int
    """Seat rounds asked (all arms), each a statement and a vote."""
    model: dict[str, Estimate]
    """Arm -> the warm-up's BLACK share of its valid votes (mean over games)."""
    model_statements: dict[str, Estimate]
    """Arm -> the BLACK share of the choices its statements state."""
    tutors: dict[str, Estimate]
    """Arm -> the tutors' BLACK share of their votes in the same games."""
    tutor_statements: dict[str, Estimate]
    """Arm -> the BLACK share of the choices the tutors' statements state."""
    model_comparisons: dict[str, Estimate]
    """`COMPARISONS` name -> the paired difference of the warm-up's vote shares."""
    tutor_comparisons: dict[str, Estimate]
    model_statement_comparisons: dict[str, Estimate]
    """`COMPARISONS` name -> the paired difference of its statements' shares."""
    tutor_statement_comparisons: dict[str, Estimate]
    invalid_rate: dict[str, float]
    """Arm -> share of its rounds the warm-up answered with no valid vote."""
    wall_s: float
    transcripts: tuple[dict[str, str], ...] = ()
    """One asked round per arm: what the seat heard, the tutor's statement and vote, the warm-up's."""

    def __post_init__(self) -> None:
        arms = (self.model, self.model_statements, self.tutors, self.tutor_statements, self.invalid_rate)
        comparisons = (self.model_comparisons, self.tutor_comparisons, self.model_statement_comparisons,
                       self.tutor_statement_comparisons)  # fmt: skip
        if len({frozenset(a) for a in arms}) != 1 or len({frozenset(c) for c in comparisons}) != 1:
            raise ValueError("every measure must cover the same arms, every comparison the same names")

    @property
    def listens(self) -> bool:
        """The warm-up is moved more by an argument than by a stated vote (`argue_minus_vote_only` above 0 in its
        votes and in its statements)."""
        name = "argue_minus_vote_only"
        return bool(self.model_comparisons[name].ci_low > 0 and self.model_statement_comparisons[name].ci_low > 0)

    def as_json(self) -> dict[str, Any]:
        return {
            "adapter": self.adapter,
            "frames": list(self.frames),
            "games": self.games,
            "rounds": self.rounds,
            "model": {arm: entry(e) for arm, e in self.model.items()},
            "model_statements": {arm: entry(e) for arm, e in self.model_statements.items()},
            "tutors": {arm: entry(e) for arm, e in self.tutors.items()},
            "tutor_statements": {arm: entry(e) for arm, e in self.tutor_statements.items()},
            "model_comparisons": {name: entry(e) for name, e in self.model_comparisons.items()},
            "tutor_comparisons": {name: entry(e) for name, e in self.tutor_comparisons.items()},
            "model_statement_comparisons": {n: entry(e) for n, e in self.model_statement_comparisons.items()},
            "tutor_statement_comparisons": {n: entry(e) for n, e in self.tutor_statement_comparisons.items()},
            "invalid_rate": {arm: _round(v) for arm, v in self.invalid_rate.items()},
            "listens": self.listens,
            "wall_s": round(self.wall_s, 1),
            "transcripts": list(self.transcripts),
        }

    def markdown(self) -> str:
        rows = [
            f"**Listener probe** ({self.adapter}: {self.rounds} seat rounds of the audit's games among the tutors, "
            f"{self.games} paired games per arm; the warm-up writes the seat's statement, then votes)",
            "",
            "| arm | warm-up's votes: BLACK share | tutors' votes | warm-up's statements | tutors' statements | "
            "warm-up's invalid votes |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for arm in self.model:
            cells = [
                e[arm].text(".2f") for e in (self.model, self.tutors, self.model_statements, self.tutor_statements)
            ]
            rows.append(f"| {arm} | " + " | ".join(cells) + f" | {fixed(self.invalid_rate[arm], '.2f')} |")
        rows += ["", "| paired comparison | warm-up's votes | tutors' votes | warm-up's statements | tutors' statements |",
                 "| --- | --- | --- | --- | --- |"]  # fmt: skip
        for name in self.model_comparisons:
            pairs = (self.model_comparisons, self.tutor_comparisons, self.model_statement_comparisons,
                     self.tutor_statement_comparisons)  # fmt: skip
            rows.append(f"| {name} | " + " | ".join(c[name].text("+.2f") for c in pairs) + " |")
        verdict = "weighs" if self.listens else "does not show that it weighs"
        rows += [
            "",
            f"The warm-up {verdict} an argument above a stated vote (argue_minus_vote_only, votes and statements).",
        ]
        for t in self.transcripts:
            rows += ["", f"{t['arm']}, {t['where']}:", f"> {t['heard']}", "",
                     f"tutor: `{t['tutor_statement']}` `{t['tutor_vote']}`; "
                     f"warm-up: `{t['model_statement']}` `{t['model_vote']}`"]  # fmt: skip
        return "\n".join(rows)


def worst_invalid_rate(row: Mapping[str, Any]) -> float | None:
    """The highest per-arm invalid-vote rate of a probe's `as_json()` (None when no arm has one)."""
    return max((v for v in row["invalid_rate"].values() if v is not None), default=None)


def _round(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)


def score_probe(
    turns: Sequence[ProbeTurn],
    statements: Sequence[str],
    votes: Sequence[str],
    adapter: str,
    games: int,
    wall_s: float,
) -> ListenerProbe:
    """The module table's measures from the asked rounds and the warm-up's statements and votes."""
    if not len(turns) == len(statements) == len(votes):
        raise ValueError(f"{len(statements)} statements and {len(votes)} votes for {len(turns)} rounds")
    tables: dict[str, dict[str, dict[str, list[bool]]]] = {
        part: {arm: {} for arm in ARMS} for part in ("model", "stated", "tutors", "tutor_stated")
    }
    asked = {arm: 0 for arm in ARMS}
    invalid = {arm: 0 for arm in ARMS}
    for t, statement, vote in zip(turns, statements, votes, strict=True):
        frame = load_frame(t.frame)
        asked[t.arm] += 1
        texts = {"model": vote, "stated": statement, "tutors": t.tutor_vote, "tutor_stated": t.tutor_statement}
        for part, text in texts.items():
            choice = read_choice(text, frame)
            tables[part][t.arm].setdefault(t.game, [])
            if choice is not None:
                tables[part][t.arm][t.game].append(choice == BLACK)
            elif part == "model":
                invalid[t.arm] += 1
    share = {part: _shares(table) for part, table in tables.items()}

    def means(part: str) -> dict[str, Estimate]:
        return {arm: _mean(share[part][arm]) for arm in ARMS}

    def compared(part: str) -> dict[str, Estimate]:
        return {name: _paired(share[part], a, b) for name, (a, b) in COMPARISONS.items()}

    return ListenerProbe(
        adapter=adapter,
        frames=tuple(sorted({t.frame for t in turns})),
        games=games,
        rounds=len(turns),
        model=means("model"),
        model_statements=means("stated"),
        tutors=means("tutors"),
        tutor_statements=means("tutor_stated"),
        model_comparisons=compared("model"),
        tutor_comparisons=compared("tutors"),
        model_statement_comparisons=compared("stated"),
        tutor_statement_comparisons=compared("tutor_stated"),
        invalid_rate={arm: invalid[arm] / asked[arm] if asked[arm] else math.nan for arm in ARMS},
        wall_s=wall_s,
        transcripts=_transcripts(turns, statements, votes),
    )


def _shares(votes: Mapping[str, Mapping[str, list[bool]]]) -> dict[str, dict[str, float]]:
    """Arm -> game -> BLACK share of its counted choices (games without one left out)."""
    return {arm: {g: sum(v) / len(v) for g, v in by_game.items() if v} for arm, by_game in votes.items()}


def _mean(by_game: Mapping[str, float]) -> Estimate:
    games = sorted(by_game)
    return mean_estimate([by_game[g] for g in games], games, (0.0, 1.0))


def _paired(shares: Mapping[str, Mapping[str, float]], a: str, b: str) -> Estimate:
    both = sorted(set(shares[a]) & set(shares[b]))
    return paired_difference({g: shares[a][g] for g in both}, {g: shares[b][g] for g in both})


def _transcripts(
    turns: Sequence[ProbeTurn], statements: Sequence[str], votes: Sequence[str]
) -> tuple[dict[str, str], ...]:
    """Per arm the first round-1 round of a seat that spoke after A0 (beside a seed: after the seed)."""
    out = []
    for arm in ARMS:
        first = next((i for i, t in enumerate(turns) if t.arm == arm and t.round == 1 and t.seat != "A0"), None)
        if first is not None:
            t = turns[first]
            before, after = t.statement_context[-1]["content"], t.after_statement[-1]["content"]
            heard = f"{before[-300:]} || after it spoke: {after[-200:]}".replace("\n", " ")
            out.append(
                {"arm": arm, "where": f"game {t.game}, seat {t.seat}, round {t.round}", "heard": heard,
                 "tutor_statement": t.tutor_statement, "tutor_vote": t.tutor_vote,
                 "model_statement": statements[first], "model_vote": votes[first]}
            )  # fmt: skip
    return tuple(out)


def run_listener_probe(
    settings: YoaoSettings,
    base_url: str,
    model: str,
    *,
    adapter: str,
    games: int,
    api_key: str | None = None,
) -> ListenerProbe:
    """Ask the warm-up served as `model` at `base_url` each round's statement, then its vote, of every untrained
    seat of the audit's games (module docstring)."""
    start = time.perf_counter()
    played = probe_games(settings, games)
    turns = probe_turns(settings, played)

    def ask(replays: list[ReplayTurn], kind: str) -> list[str]:
        asked = ask_turns(
            replays, base_url, model, settings.max_new_tokens, settings.temperature, api_key, settings.concurrency,
            seeds=[t.sampling_seed(kind) for t in turns], label=f"listener probe of {adapter}: {kind}s",
        )  # fmt: skip
        return asyncio.run(asked)

    statements = ask(
        [ReplayTurn(0, t.statement_context, t.tutor_statement, "opinion", t.frame) for t in turns], "opinion"
    )
    votes = ask(
        [ReplayTurn(0, t.vote_context(s), t.tutor_vote, VOTE, t.frame) for t, s in zip(turns, statements, strict=True)],
        VOTE,
    )
    return score_probe(turns, statements, votes, adapter, len(played), time.perf_counter() - start)


def recipes_markdown(result: Mapping[str, Any]) -> str:
    """A `benchmarks/bench_yoao_listener.py probe` result file as tables: per warm-up, its recipe and what the
    probe found (the warm-up's paired comparisons, the tutors' on the same games in brackets after them)."""
    rows = result.get("rows") or []
    lines = [
        "| warm-up | games | SFT steps | advocate share | held-out loss (first, last) | data: votes with the stated majority |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        r = row.get("recipe") or {}
        curve = r.get("eval_curve") or []
        loss = f"{curve[0][1]:.3f}, {curve[-1][1]:.3f}" if curve else "-"
        share = (r.get("overrides") or {}).get("warmup_advocate_share", 0.0)
        lines.append(
            f"| {row['adapter']} | {r.get('games', '-')} | {r.get('steps', '-')} | {share:g} | {loss} | "
            f"{fixed(r.get('follows_majority'), '.2f')} |"
        )
    names = ("argue_minus_vote_only", "argue_minus_none", "vote_only_minus_none", "long_minus_vote_only")
    lines += [
        "",
        "| warm-up | statements: argue_minus_vote_only | votes: "
        + " | ".join(names)
        + " | invalid votes (worst arm) | listens |",
        "| --- | --- | " + " | ".join("---" for _ in names) + " | --- | --- |",
    ]
    for row in rows:
        said = "argue_minus_vote_only"
        cells = [
            f"{entry_text(row['model_statement_comparisons'][said], '+.2f')} ({entry_text(row['tutor_statement_comparisons'][said], '+.2f')})"
        ]
        for name in names:
            mine, theirs = row["model_comparisons"][name], row["tutor_comparisons"][name]
            cells.append(f"{entry_text(mine, '+.2f')} ({entry_text(theirs, '+.2f')})")
        invalid = worst_invalid_rate(row)
        lines.append(
            f"| {row['adapter']} | "
            + " | ".join(cells)
            + f" | {fixed(invalid, '.2f')} | {'yes' if row['listens'] else 'no'} |"
        )
    games = sorted({row["games"] for row in rows})
    lines += [
        "",
        f"Paired games per arm: {', '.join(map(str, games))}; the tutors' own statements and votes on the same games "
        f"in brackets; each probe took {', '.join(str(round(row['wall_s'])) for row in rows)} s. "
        f"Machine speed (`machine_update_tok_s`): {fixed(result.get('machine_update_tok_s'), '.1f')}; commit "
        f"{str(result.get('commit'))[:7]}.",
    ]
    return "\n".join(lines) + "\n"


def listener_sentence(probe: Mapping[str, Any]) -> str:
    """The listener probe (models/yoao/listening.py) in one paragraph: the warm-up's paired comparisons beside
    the tutors' on the same contexts."""
    said = "argue_minus_vote_only"
    parts = [
        f"statements {said} {entry_text(probe['model_statement_comparisons'][said], '+.2f')} (tutors "
        f"{entry_text(probe['tutor_statement_comparisons'][said], '+.2f')})"
    ] + [
        f"votes {name} {entry_text(probe['model_comparisons'][name], '+.2f')} (tutors "
        f"{entry_text(probe['tutor_comparisons'][name], '+.2f')})"
        for name in ("argue_minus_vote_only", "argue_minus_none", "vote_only_minus_none", "long_minus_vote_only")
    ]
    invalid = worst_invalid_rate(probe)
    return (
        f"Listener probe (the format warm-up asked the audit's vote turns among the tutors, {probe['games']} paired "
        f"games, {probe['rounds']} seat rounds): "
        + "; ".join(parts)
        + f"; invalid votes at most {fixed(invalid, '.2f')} "
        f"per arm. The warm-up {'weighs' if probe['listens'] else 'does not show that it weighs'} an argument above "
        "a stated vote."
    )
