"""Parse time of adversarial replies, per environment and reply shape (issue 14: linear-time grammars).

Every environment is driven through real episodes by code agents; whenever a seat is asked to act, the
environment's own `parse` is timed on adversarial replies of growing length (the shapes below: a command
word, a long run of whitespace and one stray character, long numbers, repeated terms, ...). Parsing is
pure, so probing does not change the episode. A series stops once one parse takes longer than
`--stop-after` seconds. The largest time over the seats and phases of an environment is reported.

    python -m benchmarks.bench_parsers [--sizes 250,500,1000,2000,4000,100000] [--out NAME] [--uncapped]

`--uncapped` lifts each environment's reply cap (`max_reply_chars`) so that the grammar itself is timed on
the full length (the cap normally cuts a reply to its last characters before parsing).
Results go to benchmarks/results/<NAME>.json (default: parsers.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from environments import make, sample_scenarios
from environments.core.events import Action, Notification

RESULTS = Path(__file__).resolve().parent / "results"
ENV_IDS = (
    "dnd-v0",
    "casino-v0",
    "craigslist-v0",
    "marketplace-v0",
    "job-interview-v0",
    "calendar-v0",
    "red-black-v0",
    "sugarscape-v0",
    "keyword-v0",
)


def _pad(word: str, fill: str) -> Callable[[int], str]:
    return lambda n: word + fill * n + "x"


SHAPES: dict[str, Callable[[int], str]] = {
    # The shape: a command word, a long run of whitespace, one stray character.
    **{f"{w}+spaces+x": _pad(w, " ") for w in ("accept", "ACCEPT", "OFFER", "offer", "PROPOSE", "propose")},
    **{f"{w}+spaces+x": _pad(w, " ") for w in ("REFLECT:", "INTENT:", "VOTE", "vote", "SELECT", "I get")},
    **{f"{w}+spaces+x": _pad(w, " ") for w in ("no deal", "walk away", "OFFER: GIVE 3", "PROPOSE book=1")},
    "accept+tabs+x": _pad("accept", "\t"),
    "ACCEPT+newlines+x": _pad("ACCEPT", "\n"),
    "accept+!+x": _pad("accept", "!"),
    "OFFER $+digits+x": lambda n: "OFFER $" + "1" * n + "x",
    "OFFER+digit-commas": lambda n: "OFFER " + "1," * (n // 2),
    "PROPOSE+digits": lambda n: "PROPOSE " + "9" * n,
    "digits": lambda n: "9" * n,
    "PROPOSE+terms": lambda n: "PROPOSE " + "book=1 " * (n // 7),
    "PROPOSE+salary-terms": lambda n: "PROPOSE " + "salary=35, " * (n // 11),
    "I get+counts": lambda n: "I get " + "1 hat, " * (n // 7),
    "not+ACCEPT": lambda n: "not " * (n // 4) + "ACCEPT",
    "ACCEPT repeated": lambda n: "ACCEPT " * (n // 7),
    "OFFER repeated": lambda n: "OFFER $5 " * (n // 9),
    "stars": lambda n: "*" * n,
    "letters": lambda n: "a" * n,
    "INFER-ACT": lambda n: "INFER:" + " " * n + "x",
    "vote-words": lambda n: "vote for " * (n // 9) + "x",
}


class ParseTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise ParseTimeout


def timed_parse(env: Any, agent_id: str, text: str, limit_s: float) -> tuple[float, str | None]:
    """Seconds one parse took (at most about `limit_s`: SIGALRM interrupts a regex that runs longer), and
    the exception it raised, if any."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    start = time.perf_counter()
    try:
        env.parse(agent_id, text)
        error = None
    except ParseTimeout:
        error = "timeout"
    except Exception as exc:  # a parser must never raise: report it
        error = f"{type(exc).__name__}: {str(exc)[:120]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return time.perf_counter() - start, error


class ProbeAgent:
    """Wraps a code agent: before each answer, times the environment's parse on every shape."""

    def __init__(self, inner: Any, env: Any, probe: Callable[[Any, str, tuple[str, ...]], None]) -> None:
        self.inner, self.env, self.probe = inner, env, probe

    async def reset(self, agent_id: str, env_id: str, spec: Any, episode_id: str) -> None:
        self.agent_id = agent_id
        await self.inner.reset(agent_id, env_id, spec, episode_id)

    async def observe(self, event: Any) -> None:
        await self.inner.observe(event)

    async def act(self, request: Notification) -> Action:
        self.probe(self.env, self.agent_id, tuple(request.allowed))
        return await self.inner.act(request)


def code_agents(env_id: str, env: Any, scenario: Any, seed: int) -> dict[str, Any]:
    """One code agent per seat of a reset environment."""
    env.reset(scenario, seed)
    seat_ids = tuple(env.agent_ids)
    if env_id == "red-black-v0":
        from agents.yoao.red_black_strategies import make_strategy_agent

        return {s: make_strategy_agent("tit_for_tat", seed) for s in seat_ids}
    if env_id == "sugarscape-v0":
        from agents.yoao.sugarscape_agents import MRSTrader

        return {s: MRSTrader() for s in seat_ids}
    if env_id == "keyword-v0":
        from environments.core.events import RAW_TEXT

        class Writer:
            async def reset(self, *args: Any) -> None:
                pass

            async def observe(self, event: Any) -> None:
                pass

            async def act(self, request: Notification) -> Action:
                return Action(request.to, RAW_TEXT, "no no no no no no no no")

        return {s: Writer() for s in seat_ids}
    from agents.socialrl.code_agents import make_code_agent

    return {s: make_code_agent("conceder", seed=seed) for s in seat_ids}


def measure(env_id: str, sizes: list[int], stop_after: float, uncapped: bool) -> dict[str, Any]:
    from environments.core.runtime import run_episode

    env = make(env_id)
    scenario = sample_scenarios(env_id, 1, seed=3)[0]
    times: dict[str, dict[int, float]] = {name: {} for name in SHAPES}
    stopped: set[str] = set()
    phases: set[tuple[str, ...]] = set()
    errors: list[str] = []

    def probe(env: Any, agent_id: str, allowed: tuple[str, ...]) -> None:
        if allowed in phases:
            return  # one seat per distinct phase
        phases.add(allowed)
        if uncapped and hasattr(env, "max_reply_chars"):
            env.max_reply_chars = 10**9
        for name, shape in SHAPES.items():
            for n in sizes:
                if name in stopped and n > max(times[name], default=0):
                    break
                elapsed, error = timed_parse(env, agent_id, shape(n), limit_s=stop_after * 4)
                if error == "timeout":
                    elapsed = float("inf")  # interrupted: longer than the limit
                elif error is not None:
                    errors.append(f"{allowed} {name} n={n}: {error}")
                times[name][n] = max(times[name].get(n, 0.0), elapsed)
                if elapsed > stop_after:
                    stopped.add(name)
                    break
        if uncapped and hasattr(env, "max_reply_chars"):
            del env.max_reply_chars

    agents = {s: ProbeAgent(a, env, probe) for s, a in code_agents(env_id, make(env_id), scenario, 0).items()}
    asyncio.run(run_episode(env, agents, scenario, seed=0, turn_timeout=None))
    worst = {n: max((t[n] for t in times.values() if n in t), default=None) for n in sizes}
    worst_shape = {
        n: max((name for name, t in times.items() if n in t), key=lambda name: times[name][n], default=None)
        for n in sizes
    }
    limit = f"timeout (> {stop_after * 4:g} s)"

    def out(t: float | None) -> float | str | None:
        return limit if t == float("inf") else t

    return {
        "env_id": env_id,
        "phases": len(phases),
        "worst_seconds": {str(n): out(worst[n]) for n in sizes},
        "worst_shape": {str(n): worst_shape[n] for n in sizes},
        "stopped_shapes": sorted(stopped),
        "seconds": {name: {str(n): out(t) for n, t in series.items()} for name, series in times.items()},
        "errors": errors,
    }


def _ms(seconds: float | str | None) -> str:
    if seconds is None:
        return "-"
    return "timeout" if isinstance(seconds, str) else f"{seconds * 1000:.1f}ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,200,400,800,1600,3200,100000")
    parser.add_argument(
        "--stop-after", type=float, default=0.5, help="seconds; a series stops after a longer parse (cut at 4x)"
    )
    parser.add_argument("--uncapped", action="store_true", help="lift the reply cap (time the grammar itself)")
    parser.add_argument("--out", default="parsers", help="results file name (without .json)")
    parser.add_argument("--envs", default=",".join(ENV_IDS))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for env_id in args.envs.split(","):
        row = measure(env_id, sizes, args.stop_after, args.uncapped)
        rows.append(row)
        cells = "  ".join(f"{n}:{_ms(row['worst_seconds'][str(n)])}" for n in sizes)
        print(f"{env_id:18s} phases={row['phases']:2d} worst {cells}  errors={len(row['errors'])}", flush=True)
        for error in row["errors"][:3]:
            print("   ", error)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{args.out}.json"
    out.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "python": platform.python_version(),
                "sizes": sizes,
                "stop_after_s": args.stop_after,
                "uncapped": args.uncapped,
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
