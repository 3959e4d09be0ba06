"""How well the ToM skill scorers read a known reasoner: the strategic code teacher's own INFER and ANTICIPATE.

The teacher writes INFER / ANTICIPATE from its belief model (agents/socialrl/teacher), so its replies are a
check on the parsers (coverage: the share of replies they can read) and a reference for the scores a
trained student could reach. The teacher plays the held-out scenarios in both seats (alternating by
scenario) against the three evaluation counterparts, wrapped in the study's `TurnProbe`; each skill is the
mean per-episode score with its scenario-clustered bootstrap CI (models/socialrl/tom_skills.py). No model, no
engine: seconds per domain.

    python -m benchmarks.bench_tom_scorers [--scenarios 12] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from agents.socialrl.teacher import make_teacher
from environments import SOCIALRL_ENV_IDS
from models.evaluation.policy import EvaluationPlan, evaluate_policy
from models.evaluation.stats import mean_estimate
from models.socialrl import tom, tom_skills

RESULTS = Path(__file__).resolve().parent / "results" / "tom_scorers.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    out: dict[str, dict] = {}
    for env_id in SOCIALRL_ENV_IDS:
        start = time.perf_counter()
        probes: list[tom_skills.TurnProbe] = []

        def make(seed: int, probes: list[tom_skills.TurnProbe] = probes) -> tom_skills.TurnProbe:
            probes.append(tom_skills.TurnProbe(make_teacher(seed)))
            return probes[-1]

        result = evaluate_policy(EvaluationPlan(env_id, args.scenarios, seat=None, seed=args.seed), make)
        by_id = {p.episode_id: p for p in probes}
        skills = [
            tom_skills.episode_skills(env_id, e, v.seat, v.counterpart, by_id[e.episode_id])
            for e, v in zip(result.episodes, result.policy_episodes, strict=True)
        ]
        replies = sum(s.replies for s in skills)
        row: dict = {"episodes": len(skills), "replies": replies}
        for skill in tom.SKILLS:
            pairs = [(getattr(s, skill), v.scenario_index) for s, v in zip(skills, result.policy_episodes, strict=True)
                     if getattr(s, skill) is not None]  # fmt: skip
            row[skill] = mean_estimate(
                [p[0] for p in pairs], [p[1] for p in pairs], (0.0, 1.0), seed=args.seed
            ).as_dict()
            row[f"{skill}_coverage"] = sum(getattr(s, f"{skill}_scored") for s in skills) / replies if replies else None
        out[env_id] = row
        print(f"{env_id}: INFER {row['infer']['mean']:.3f} (coverage {row['infer_coverage']:.2f}), ANTICIPATE "
              f"{row['anticipate']['mean']:.3f} (coverage {row['anticipate_coverage']:.2f}), "
              f"{time.perf_counter() - start:.1f} s", flush=True)  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"scenarios": args.scenarios, "seed": args.seed, "domains": out}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
