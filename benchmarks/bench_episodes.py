"""Code-agent episodes per second per environment, single process.

Runs the round-robin of all code agents on each SocialRL environment twice: one episode at a time
(sequential `run_episode`) and all concurrently in one event loop (`run_episodes`), side by side in one
run, and writes benchmarks/results/episodes.json.

    python -m benchmarks.bench_episodes [--scenarios N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import time
from pathlib import Path

from agents.socialrl.tournament import TournamentConfig, tournament_specs
from environments import SOCIALRL_ENV_IDS
from environments.core.runtime import run_episode, run_episodes

RESULTS = Path(__file__).resolve().parent / "results" / "episodes.json"


async def sequential(specs: list) -> None:
    for spec in specs:
        await run_episode(spec.make_env(), spec.make_agents(), spec.scenario, spec.seed, episode_id=spec.episode_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", type=int, default=8)
    args = parser.parse_args(argv)
    rows = []
    for env_id in SOCIALRL_ENV_IDS:
        specs = tournament_specs(TournamentConfig(env_ids=(env_id,), scenarios_per_pairing=args.scenarios))
        start = time.perf_counter()
        asyncio.run(sequential(specs))
        seq = time.perf_counter() - start
        start = time.perf_counter()
        results = asyncio.run(run_episodes(specs, concurrency=64))
        conc = time.perf_counter() - start
        turns = sum(len(r.transcript) for r in results)
        rows.append(
            {
                "env_id": env_id,
                "episodes": len(specs),
                "mean_turns": turns / len(specs),
                "episodes_per_s_sequential": len(specs) / seq,
                "episodes_per_s_concurrent64": len(specs) / conc,
                "concurrent_over_sequential": seq / conc,
            }
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps({"machine": platform.platform(), "python": platform.python_version(), "rows": rows}, indent=2)
    )
    print(f"{'env':18s} {'episodes':>8s} {'turns':>6s} {'eps/s seq':>10s} {'eps/s c64':>10s} {'ratio':>6s}")
    for r in rows:
        print(
            f"{r['env_id']:18s} {r['episodes']:8d} {r['mean_turns']:6.1f} {r['episodes_per_s_sequential']:10.0f} "
            f"{r['episodes_per_s_concurrent64']:10.0f} {r['concurrent_over_sequential']:6.2f}"
        )
    print(f"written to {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
