"""The strategic code teacher against the Boulware and conceder baselines, per domain.

Paired design (agents/socialrl/teacher/evaluation.py): the teacher, `boulware` and `conceder` each play the same
seeded scenarios, in both seats, against the same five code-agent counterparts with the same seeds.
Writes benchmarks/results/teacher.json with, per domain and candidate, the mean reward and its 95% CI,
the agreement rate, the leak rate and invalid actions, plus the paired differences teacher - baseline.

    python -m benchmarks.bench_teacher [--scenarios 40] [--seed 0] [--envs dnd-v0,casino-v0]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from agents.env_version import env_version
from agents.socialrl.teacher.evaluation import CANDIDATES, COUNTERPARTS, run_paired, summarise
from environments import SOCIALRL_ENV_IDS

RESULTS = Path(__file__).resolve().parent / "results" / "teacher.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", type=int, default=40, help="scenarios per domain (each in every seat)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--envs", default=",".join(SOCIALRL_ENV_IDS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    env_ids = tuple(e for e in args.envs.split(",") if e)
    start = time.perf_counter()
    timings = {}
    episodes = []
    for env_id in env_ids:
        t0 = time.perf_counter()
        episodes += run_paired(env_ids=(env_id,), n_scenarios=args.scenarios, seed=args.seed)
        timings[env_id] = time.perf_counter() - t0
        print(f"{env_id}: done in {timings[env_id]:.1f} s", flush=True)
    table = summarise(episodes)
    payload = {
        "env_version": env_version(),
        "machine": platform.platform(),
        "python": platform.python_version(),
        "command": f"python -m benchmarks.bench_teacher --scenarios {args.scenarios} --seed {args.seed}",
        "design": {
            "scenarios_per_domain": args.scenarios,
            "seed": args.seed,
            "candidates": list(CANDIDATES),
            "counterparts": list(COUNTERPARTS),
            "seats": "every seat of every scenario",
            "episodes_per_candidate_per_domain": "scenarios x seats x counterparts",
        },
        "wall_seconds": {**timings, "total": time.perf_counter() - start},
        "domains": table,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2))
    print(render(table))
    print(f"written to {args.out}")
    return 0


def render(table: dict) -> str:
    """A markdown table: mean reward [95% CI], agreement and leak rates per domain and candidate."""
    lines = [
        "| domain | candidate | episodes | mean reward [95% CI] | agreement | leak rate | teacher - candidate [95% CI] |",
        "| --- | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for env_id, row in table.items():
        for name, c in row["candidates"].items():
            diff = row["paired_differences"].get(f"teacher-{name}")
            diff_text = f"{diff['mean']:+.3f} [{diff['ci95'][0]:+.3f}, {diff['ci95'][1]:+.3f}]" if diff else ""
            lines.append(
                f"| {env_id} | {name} | {c['episodes']} | {c['mean_reward']:.3f} "
                f"[{c['ci95'][0]:.3f}, {c['ci95'][1]:.3f}] | {c['agreement_rate']:.2f} | {c['leak_rate']:.2f} | "
                f"{diff_text} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
