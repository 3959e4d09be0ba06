"""The incentive audit of the price domains (models/socialrl/incentives.py) on a profile's held-out plans.

Plays the scripted buyers, the best fixed rule, the oracle, the trivial baselines and the teacher on each price
domain's held-out plan (`evaluation_plan(domain, profile, seat="buyer")`), all code (no model), and writes
benchmarks/results/incentives_<profile>.json. Exits 1 when a target of the audit fails (the file says which).

    python -m benchmarks.bench_incentives [--profile cpu] [--out PATH] [--machine-speed]
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
from pathlib import Path

from models.profiles import get_profile
from models.provenance import machine_speed_or_none, provenance
from models.socialrl.incentives import PRICE_DOMAINS, IncentiveAudit, run_incentive_audit
from models.socialrl.stage1.evaluation import evaluation_plan

RESULTS = Path(__file__).resolve().parent / "results"
log = logging.getLogger("socialrl.bench_incentives")


def render(audit: IncentiveAudit) -> str:
    """A console table: each domain's behaviours and reference policies."""
    lines = [f"env_version {audit.env_version}"]
    for env_id, d in audit.domains.items():
        lines.append(f"{env_id}: n = {d.n} episodes over {d.clusters} scenarios")
        for name, b in d.behaviours.items():
            lines.append(f"  {name:22s} {b.effect.text('+.3f')}  identical {b.identical}/{b.effect.n}")
        f, best = d.best_fixed_rule
        lines.append(f"  best fixed rule f={f:g}     {best.text()}")
        lines.append(
            f"  teacher                {d.teacher.text()}  minus best rule {d.teacher_minus_best_fixed_rule.text('+.3f')}"
        )
        lines.append(f"  oracle                 {d.oracle.text()}")
        for name, e in d.baselines.items():
            lines.append(f"  {name:22s} {e.text()}")
        if d.calibration is not None:
            c = d.calibration
            lines.append(
                f"  calibration: deal/listing median {c.deal_over_listing_median:.3f} (people "
                f"{c.human_deal_over_listing_median:.3f}), KS {c.ks_distance:.3f}, agreement {c.agreement:.3f} "
                f"(people {c.human_agreement:.3f})"
            )
    failures = audit.failures()
    lines.append("all targets hold" if not failures else "FAILED: " + "; ".join(failures))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/incentives_<profile>.json")
    parser.add_argument(
        "--machine-speed", action="store_true", help="also measure the machine's PPO update speed (a few seconds)"
    )
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    start = time.perf_counter()
    plans = [evaluation_plan(env_id, profile, seat="buyer") for env_id in PRICE_DOMAINS]
    audit = run_incentive_audit(plans)
    wall_s = round(time.perf_counter() - start, 1)
    speed = machine_speed_or_none(log) if args.machine_speed else None
    payload = {
        **audit.as_json(),
        **provenance(profile=profile.name, machine_update_tok_s=speed),
        "wall_s": wall_s,
        "machine": platform.platform(),
        "command": f"python -m benchmarks.bench_incentives --profile {profile.name}",
    }
    out = args.out or RESULTS / f"incentives_{profile.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=1) + "\n")
    print(render(audit))
    print(f"written to {out}")
    return 0 if not audit.failures() else 1


if __name__ == "__main__":
    sys.exit(main())
