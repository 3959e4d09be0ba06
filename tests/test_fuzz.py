"""A bounded fuzz of every environment's parser and of full episodes with adversarial replies.

Replies are drawn (seeded) from the adversarial shapes of tests/adversarial.py at random lengths, traps (negated
commands, unreadable or out-of-range numbers and times), random Unicode (lone surrogates, control and direction
characters) and valid commands, wrapped in prose. Asserted:

* no parse and no episode raises;
* (parse time is not asserted here: a timed test fails on a slow shared host. benchmarks/bench_parsers.py
  measures it per environment and shape at growing lengths, results in benchmarks/results/parsers.json;
  the slowest parse of this fuzz is printed with the counts);
* no wrongly valid action: a trap never parses to the move it imitates (a negated ACCEPT is no acceptance,
  `OFFER -5` / `1e308` / `1,50` / 400 nines is no offer, nor are `OFFER 1 200` / `1'000` / `1/2` /
  `13:61`, `PROPOSE -1 1 1`, `PROPOSE 1 1e308 1 1`, `PROPOSE 2,30` (Calendar), ...), and every action parsed or applied carries a
  sane payload (finite prices in range, whole counts, real times, deltas in [-2, 2], BLACK or RED);
* every role's reward, read before the base class's clamp (`unclamped_reward`), is finite and in [0, 1];
* every episode row is recorded: the episodes, roles and turns tables hold exactly the expected rows and
  nothing went to the dead-letter files (text with lone surrogates is stored escaped).

The counts are printed (run with -s to see them) so that they can be quoted.
"""

from __future__ import annotations

import asyncio
import gc
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from environments import make, sample_scenarios
from environments.core.base import ParseError
from environments.core.events import RAW_TEXT, Action, Notification
from environments.core.runtime import EpisodeSpec, run_episodes
from environments.yoao.sugarscape_core import MAX_STOCK
from models.records import rows_for
from models.storage import TableStore
from tests.adversarial import ENV_IDS, SHAPES, code_agents, parse_contexts, probe_scenario

pytestmark = pytest.mark.slow

SEED = 14
RANDOM_REPLIES_PER_ENV = 4_000
"""Random adversarial replies parsed per environment after the traps (a count, not a wall-clock budget: the same
replies on every machine)."""
EPISODES_PER_ENV = {"red-black-v0": 6, "sugarscape-v0": 60, "keyword-v0": 40}
DEFAULT_EPISODES = 30
ADVERSARIAL_SHARE = 0.5
"""Share of turns in fuzzed episodes answered with an adversarial reply instead of the code agent's move."""

ACCEPT_KINDS = {"accept", "accept_offer"}
OFFER_KINDS = {"offer", "make_offer"}
NEGATIONS = ("I do NOT", "I refuse to", "I can't ", "I won't\n", "I will never", "I am not going to", "Not")
FILLER = [
    "well",
    "hmm",
    "the",
    "weather",
    "is",
    "nice",
    "and",
    "we",
    "should",
    "talk",
    "a",
    "little",
    "more",
    "about",
    "it",
    "first",
]


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(words))


def _unicode(rng: random.Random, n: int) -> str:
    pool = ["\ud800", "\udfff", "\u202e", "\u200b", "\x00", "\x1b", "\t", "\n", "\u2028", "é", "€", "٣", "²", "🙂"]
    return "".join(rng.choice(pool) if rng.random() < 0.3 else chr(rng.randint(32, 126)) for _ in range(n))


# --------------------------------------------------------------------------------------------- traps
BAD_PRICES = ("-5", "1e308", "1,50", "9" * 400, "2000000000", "inf", "NaN", "0", "$-3", "1.5k", "12,3456")
PRICES_NOT_ONE_NUMBER = ("1 200", "1'000", "1/2", "13:61", "120-130", "50%", "5-")
"""Prices that used to be read up to the first unexpected character ($1, $1, $1, $13, ...)."""
ALLOCATION_MISREAD = (
    "PROPOSE -1 {0}, 1 {1}, 0 {2}",
    "PROPOSE -1 1 1",
    "PROPOSE 1 1e308 1 1",
    "PROPOSE 1 5- 1 1",
    "PROPOSE 1 -2pm 1 1",
    "PROPOSE -14:00 {0}, 1 {1}, 0 {2}",
    "I get -1 {0}, 1 {1} and 1 {2}",
)
"""Allocation replies that used to be read as other counts (a swallowed minus, a skipped token)."""
Trap = tuple[str, Callable[[Any], bool]]
"""(reply, predicate on the parse result that must be False: the wrongly valid reading)."""


def _is_kind(kinds: set[str]) -> Callable[[Any], bool]:
    return lambda result: isinstance(result, Action) and result.kind in kinds


def traps(env_id: str, rng: random.Random) -> list[Trap]:
    out: list[Trap] = []
    accept = "ACCEPT"
    for negation in NEGATIONS:
        out.append((f"{_prose(rng, 3)}. {negation} {accept}", _is_kind(ACCEPT_KINDS)))
    if env_id in ("craigslist-v0", "marketplace-v0"):
        for bad in (*BAD_PRICES, *PRICES_NOT_ONE_NUMBER):
            out.append((f"{_prose(rng, 4)}\nOFFER {bad}", _is_kind(OFFER_KINDS)))
    if env_id == "job-interview-v0":
        for bad in ("-35", "1e3", "3,5", "9" * 400, "35 000", "35/2"):
            text = f"PROPOSE salary={bad} holidays=4 position=x workplace=y company=z"
            out.append((text, _is_kind({"propose"})))
    if env_id == "calendar-v0":
        for bad in ("-5", "1e3", "25:00", "9" * 50, "3pmish", "2,30", "1,50", "2 30", "13:61"):
            out.append((f"{_prose(rng, 3)}\nPROPOSE {bad}", _is_kind({"propose"})))
        out.append(("I won't DECLINE", _is_kind({"decline"})))
    if env_id in ("dnd-v0", "casino-v0"):
        items = ("book", "hat", "ball") if env_id == "dnd-v0" else ("food", "water", "firewood")
        for bad in ("-1", "9" * 5000):
            out.append((f"PROPOSE {items[0]}={bad} {items[1]}=1 {items[2]}=1", _is_kind({"propose", "select"})))
        for shape in ALLOCATION_MISREAD:
            out.append((shape.format(*items), _is_kind({"propose", "select"})))
    if env_id == "sugarscape-v0":
        for text in ("REFLECT: 5e-2", "REFLECT: +5", "REFLECT: -1e308", "REFLECT: nan"):
            out.append((text, _is_kind({"reflect"})))
        for bad in ("-3", "1e3", "2.5", "9" * 400, "3 5", "3/4", "3-"):
            out.append((f"OFFER: GIVE {bad} SUGAR FOR 5 SPICE", _is_kind({"offer"})))
        for text in ("REFLECT: 0.05/2", "REFLECT: -0:05", "REFLECT: 0.1 5"):
            out.append((text, _is_kind({"reflect"})))
    if env_id == "red-black-v0":
        for text in ("VOTE: NOT RED", "VOTE: NOT BLACK", "vote: never red", "I will not vote RED"):
            out.append((text, _is_kind({"vote"})))
    return out


def adversarial_reply(env_id: str, rng: random.Random, examples: tuple[str, ...]) -> str:
    roll = rng.random()
    if roll < 0.35:
        name = rng.choice(sorted(SHAPES))
        return SHAPES[name](rng.choice((10, 100, 1_000, 5_000, 20_000)))
    if roll < 0.55:
        return rng.choice(traps(env_id, rng))[0]
    if roll < 0.7:
        return _unicode(rng, rng.randint(0, 300))
    if roll < 0.85 and examples:
        return f"{_prose(rng, rng.randint(0, 8))}\n{rng.choice(examples)}"
    return _prose(rng, rng.randint(0, 30)) + rng.choice(("", ".", "!", "?", "\n", " ACCEPT", " accept"))


# ------------------------------------------------------------------------------------------- payloads
def payload_problem(action: Action) -> str | None:
    """Why an action's payload is not sane (a wrongly read value), or None."""
    p = action.payload
    if "price" in p and not (
        isinstance(p["price"], int | float) and math.isfinite(p["price"]) and 0 < p["price"] <= 1e9
    ):
        return f"price {p['price']!r}"
    if isinstance(p.get("mine"), dict) and not all(isinstance(n, int) and 0 <= n <= 9999 for n in p["mine"].values()):
        return f"counts {p['mine']!r}"
    if "slot" in p:
        hours, _, minutes = str(p["slot"]).partition(":")
        if not (hours.isdigit() and minutes.isdigit() and int(hours) <= 24 and int(minutes) < 60):
            return f"slot {p['slot']!r}"
    for key in ("give", "get"):
        if key in p and not (isinstance(p[key], int) and 0 <= p[key] <= MAX_STOCK):
            return f"{key} {p[key]!r}"
    if "delta" in p and not (
        isinstance(p["delta"], int | float) and math.isfinite(p["delta"]) and abs(p["delta"]) <= 2
    ):
        return f"delta {p['delta']!r}"
    if action.kind == "vote" and p.get("choice") not in ("BLACK", "RED"):
        return f"vote {p.get('choice')!r}"
    for key in ("salary", "holidays"):
        if key in p and not (isinstance(p[key], int | float) and math.isfinite(p[key]) and 0 <= p[key] <= 1e6):
            return f"{key} {p[key]!r}"
    return None


# -------------------------------------------------------------------------------------------- parsers
def fuzz_parsers(env_id: str, rng: random.Random) -> dict[str, Any]:
    contexts = parse_contexts(env_id)
    parsed = slowest = 0.0
    problems: list[str] = []
    trap_list = traps(env_id, rng)
    for env, seat, allowed in contexts:  # every trap in every phase
        for text, wrongly_valid in trap_list:
            result = env.parse(seat, text)
            parsed += 1
            if wrongly_valid(result):
                problems.append(f"{allowed}: {text[:60]!r} read as {result}")
    for _ in range(RANDOM_REPLIES_PER_ENV):
        env, seat, allowed = rng.choice(contexts)
        text = adversarial_reply(env_id, rng, env.action_spec(seat).examples)
        result, elapsed = _timed(env, seat, text)
        parsed += 1
        slowest = max(slowest, elapsed)
        if isinstance(result, Action) and (why := payload_problem(result)):
            problems.append(f"{allowed}: {text[:60]!r} gave a wrongly valid payload: {why}")
        assert isinstance(result, Action | ParseError)
    return {"parsed": int(parsed), "slowest_ms": slowest * 1000, "problems": problems}


def _timed(env: Any, seat: str, text: str) -> tuple[Any, float]:
    """The parse result and its CPU time (printed, not asserted), with the garbage collector paused (a
    collection of the test's whole heap is not the parser's cost)."""
    gc.disable()
    try:
        start = time.thread_time()
        result = env.parse(seat, text)
        return result, time.thread_time() - start
    finally:
        gc.enable()


# ------------------------------------------------------------------------------------------- episodes
class FuzzAgent:
    """Answers a share of its turns with adversarial raw text, the rest with a code agent's valid move."""

    def __init__(self, env_id: str, inner: Any, rng: random.Random) -> None:
        self.env_id, self.inner, self.rng = env_id, inner, rng
        self.examples: tuple[str, ...] = ()

    async def reset(self, agent_id: str, env_id: str, spec: Any, episode_id: str) -> None:
        self.examples = tuple(spec.examples)
        await self.inner.reset(agent_id, env_id, spec, episode_id)

    async def observe(self, event: Any) -> None:
        await self.inner.observe(event)

    async def act(self, request: Notification) -> Action:
        if self.rng.random() < ADVERSARIAL_SHARE:
            return Action(request.to, RAW_TEXT, adversarial_reply(self.env_id, self.rng, self.examples))
        return await self.inner.act(request)


def episode_specs(env_id: str, rng: random.Random) -> list[EpisodeSpec]:
    n = EPISODES_PER_ENV.get(env_id, DEFAULT_EPISODES)
    scenarios = [probe_scenario(env_id), *sample_scenarios(env_id, n - 1, seed=SEED)]
    specs = []
    for index, scenario in enumerate(scenarios):
        seed = rng.randrange(2**31)
        seats = tuple(_seats(env_id, scenario))

        def agents(seats: tuple[str, ...] = seats, seed: int = seed) -> dict[str, Any]:
            inner = code_agents(env_id, seats, seed)
            return {s: FuzzAgent(env_id, a, random.Random(f"{seed}:{s}")) for s, a in inner.items()}

        specs.append(
            EpisodeSpec(
                make_env=lambda: make(env_id),
                make_agents=agents,
                scenario=scenario,
                seed=seed,
                episode_id=f"fuzz:{env_id}:{index}",
            )
        )
    return specs


def _seats(env_id: str, scenario: Any) -> tuple[str, ...]:
    env = make(env_id)
    env.reset(scenario, 0)
    return tuple(env.agent_ids)


def test_fuzz_parsers_and_episodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(SEED)
    totals = {"parsed": 0, "episodes": 0, "turns": 0, "rows": 0}
    problems: list[str] = []
    slowest = 0.0
    started = time.monotonic()
    store = TableStore(tmp_path)
    for env_id in ENV_IDS:
        report = fuzz_parsers(env_id, rng)
        totals["parsed"] += report["parsed"]
        slowest = max(slowest, report["slowest_ms"])
        problems += [f"{env_id} {p}" for p in report["problems"]]

        results = asyncio.run(run_episodes(episode_specs(env_id, rng), concurrency=16, turn_timeout=None))
        for result in results:
            totals["turns"] += len(result.transcript)
            for seat, role in result.outcome.roles.items():
                raw = role.unclamped_reward
                if not (raw is not None and math.isfinite(raw) and 0.0 <= raw <= 1.0):
                    problems.append(f"{env_id} {result.episode_id} {seat}: reward before the clamp {raw!r}")
            for entry in result.transcript:
                why = payload_problem(Action(entry.agent_id, entry.kind, entry.text, entry.payload))
                if why:
                    problems.append(f"{env_id} {result.episode_id}: applied {entry.kind} with {why}")
        totals["episodes"] += len(results)
        tables = rows_for(results, run_id="fuzz")
        expected = {table: len(rows) for table, rows in tables.items()}
        before = {t: _count(store, t) for t in expected}
        store.append_all(tables)
        for table, n in expected.items():
            assert _count(store, table) - before[table] == n, f"{env_id}: {table} lost rows"
            assert store.dead_letters(table) == [], f"{env_id}: {table} rows went to the dead-letter file"
            totals["rows"] += n
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(
            f"\nfuzz: {totals['parsed']} replies parsed (slowest {slowest:.1f} ms), {totals['episodes']} episodes "
            f"({totals['turns']} accepted actions), {totals['rows']} rows recorded, {len(problems)} problems, "
            f"{elapsed:.0f} s"
        )
    assert not problems, "\n".join(problems[:30])


def _count(store: TableStore, table: str) -> int:
    return int(store.query(f"SELECT count(*) AS n FROM {table}").n[0])
