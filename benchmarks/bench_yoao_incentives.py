"""The YOAO incentive audit (models/yoao/incentives.py) on a profile's held-out games, with the prior calibration.

Plays scripted seeds (arguing for cooperation, stating a vote only, long text without reasons, arguing for the
selfish choice, none) among the persuadable tutors the untrained seats imitate, paired on the same held-out
games, all code (no model), and the calibration of the tutors' priors on the training frames' warm-up games;
writes benchmarks/results/yoao_incentives_<profile>.json. Exits 1 when a target of the audit fails (the file
says which).

    python -m benchmarks.bench_yoao_incentives [--profile cpu] [--out PATH] [--machine-speed]
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
from pathlib import Path

from models.profiles import PROFILE_NAMES, get_profile
from models.provenance import machine_speed_or_none, provenance
from models.yoao.incentives import audit_markdown, prior_calibration, run_yoao_incentives

RESULTS = Path(__file__).resolve().parent / "results"
log = logging.getLogger("socialrl.bench_yoao_incentives")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=PROFILE_NAMES, default="cpu")
    parser.add_argument(
        "--out", type=Path, default=None, help="default: benchmarks/results/yoao_incentives_<profile>.json"
    )
    parser.add_argument(
        "--machine-speed", action="store_true", help="also measure the machine's PPO update speed (a few seconds)"
    )
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    settings = profile.yoao
    start = time.perf_counter()
    audit = run_yoao_incentives(settings)
    calibration = prior_calibration(settings)
    wall_s = round(time.perf_counter() - start, 1)
    speed = machine_speed_or_none(log) if args.machine_speed else None
    payload = {
        **audit.as_json(),
        **provenance(profile=profile.name, machine_update_tok_s=speed),
        "prior_calibration": calibration,
        "team_size": settings.team_size,
        "rounds": settings.rounds,
        "wall_s": wall_s,
        "machine": platform.platform(),
        "command": f"python -m benchmarks.bench_yoao_incentives --profile {profile.name}",
    }
    out = args.out or RESULTS / f"yoao_incentives_{profile.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"env_version {audit.env_version}; {audit.games} paired games per arm on {', '.join(audit.frames)}")
    print(audit_markdown(payload))
    print(f"written to {out}")
    return 0 if not audit.failures() else 1


if __name__ == "__main__":
    sys.exit(main())
