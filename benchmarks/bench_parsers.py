"""Parse time of adversarial replies, per environment and reply shape (the grammars are linear-time).

Every environment is driven through real episodes by code agents; whenever a seat is asked to act, the
environment's own `parse` is timed on adversarial replies of growing length (the shapes of
tests/adversarial.py: a command word, a long run of whitespace and one stray character, long numbers,
repeated terms, ...). Parsing is
pure, so probing does not change the episode. A series stops once one parse takes longer than
`--stop-after` seconds. The largest time over the seats and phases of an environment is reported.

    python -m benchmarks.bench_parsers [--sizes 100,200,...,100000] [--out NAME] [--uncapped] [--envs a,b]

It also measures what one adversarial seat does to other episodes in the same event loop (with the old
grammars, 4 concurrent episodes went from 0.02 s to 2.24 s): 4 concurrent `dnd-v0` episodes of code agents, one of them
with a seat that answers every turn with "accept" + N spaces + "x", and a heartbeat task that records the
longest gap between its 1 ms ticks (the longest time the loop was blocked).

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
from pathlib import Path
from typing import Any

from tests.adversarial import ENV_IDS, SHAPES, visit_turns

RESULTS = Path(__file__).resolve().parent / "results"


class ParseTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise ParseTimeout


def timed_parse(env: Any, agent_id: str, text: str, limit_s: float) -> tuple[float, str | None]:
    """CPU seconds one parse took (at most about `limit_s` of wall time: SIGALRM interrupts a regex that runs
    longer), and the exception it raised, if any. CPU time, because on a shared machine wall time also counts
    waiting for a core; parsing runs in the event loop, so its CPU time is what it blocks the loop for."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    start = time.thread_time()
    try:
        env.parse(agent_id, text)
        error = None
    except ParseTimeout:
        error = "timeout"
    except Exception as exc:  # a parser must never raise: report it
        error = f"{type(exc).__name__}: {str(exc)[:120]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return time.thread_time() - start, error


def measure(env_id: str, sizes: list[int], stop_after: float, uncapped: bool) -> dict[str, Any]:
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
        for shape in SHAPES.values():  # warm up: the first parse compiles the grammar's patterns
            timed_parse(env, agent_id, shape(10), limit_s=60)
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

    visit_turns(env_id, probe)
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


class _Stubborn:
    """Answers every turn with the backtracking reply: a command word, N spaces, one stray character."""

    def __init__(self, spaces: int) -> None:
        self.text = "accept" + " " * spaces + "x"

    async def reset(self, *args: Any) -> None:
        pass

    async def observe(self, event: Any) -> None:
        pass

    async def act(self, request: Any) -> Any:
        from environments.core.events import RAW_TEXT, Action

        return Action(request.to, RAW_TEXT, self.text)


def loop_stall(spaces: int, episodes: int = 4, timeout_s: float = 0.5) -> dict[str, Any]:
    """Wall time of `episodes` concurrent dnd episodes (one with a stubborn seat) and the longest loop stall."""
    from environments import make, sample_scenarios
    from environments.core.runtime import EpisodeSpec, run_episodes
    from tests.adversarial import code_agents

    scenarios = sample_scenarios("dnd-v0", episodes, seed=1)

    def agents(index: int) -> dict[str, Any]:
        seats = code_agents("dnd-v0", ("alice", "bob"), seed=index)
        if index == 0:
            seats["bob"] = _Stubborn(spaces)
        return seats

    specs = [
        EpisodeSpec(lambda: make("dnd-v0"), lambda i=i: agents(i), s, seed=i, episode_id=f"loop{i}")
        for i, s in enumerate(scenarios)
    ]

    async def run() -> tuple[float, float, int]:
        stall = 0.0
        done = False

        async def heartbeat() -> None:
            nonlocal stall
            last = time.perf_counter()
            while not done:
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                stall, last = max(stall, now - last), now

        beat = asyncio.create_task(heartbeat())
        start = time.perf_counter()
        results = await run_episodes(specs, concurrency=episodes, turn_timeout=timeout_s)
        elapsed = time.perf_counter() - start
        done = True
        await beat
        return elapsed, stall, sum(sum(r.timeouts.values()) for r in results)

    elapsed, stall, timeouts = asyncio.run(run())
    return {"spaces": spaces, "episodes": episodes, "wall_s": elapsed, "longest_stall_s": stall, "timeouts": timeouts}


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
    parser.add_argument("--no-loop", action="store_true", help="skip the concurrent-episodes measurement")
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
    loops = [loop_stall(spaces) for spaces in (0, 320)] if not args.no_loop else []
    for row in loops:
        print(
            f"4 concurrent dnd episodes, one seat answering 'accept' + {row['spaces']} spaces + 'x': "
            f"{row['wall_s']:.2f} s, longest loop stall {row['longest_stall_s'] * 1000:.1f} ms, "
            f"{row['timeouts']} timeouts (turn timeout 0.5 s)",
            flush=True,
        )
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
                "event_loop": loops,
            },
            indent=2,
        )
    )
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
