"""Trained YOAO seeds in the incentive audit's seed seat among the tutors (models/yoao/seed_audit.py).

Separates what a trained seed says from how the learned players listen: the tutors weigh reasons by content, so
a seed whose arguments are as good as its teacher's moves them as much (`argue_minus_seed` near 0), and one
whose words carry nothing beyond its vote does no better than the muted teacher (`seed_minus_vote_only` near 0).

    python -m benchmarks.bench_yoao_seed_audit --adapter seed=<dir holding adapter_config.json> \\
        [--adapter other=...] [--machine-speed] [--result PATH]

Each adapter plays the audit's games (the profile's held-out games, `games_per_arm` of them at least 16) on one
vLLM engine configured as the profile's YOAO engine; one row per adapter (the audit's `as_json`, the adapter's
directory) goes to benchmarks/results/yoao_seed_audit_<profile>.json with the provenance of models/provenance.py.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from benchmarks.bench_yoao_listener import adapters_of, write_rows, yoao_engine
from models.profiles import get_profile
from models.yoao.experiments import llm_maker
from models.yoao.seed_audit import run_seed_audit

RESULTS = Path(__file__).resolve().parent / "results"
log = logging.getLogger("socialrl.bench")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--adapter", action="append", required=True, help="NAME=DIR of a seed adapter")
    parser.add_argument("--machine-speed", action="store_true", help="measure machine_update_tok_s too")
    parser.add_argument("--result", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    adapters = adapters_of(args.adapter)
    profile = get_profile(args.profile)
    yoao = profile.yoao.resolved(profile.base_model)
    rows = []
    with yoao_engine(profile, adapters) as engine:
        for name, path in adapters.items():
            result = run_seed_audit(yoao, llm_maker(engine.base_url, name, yoao), name=name)
            log.info("%s\n%s", name, result.markdown())
            rows.append({"adapter_dir": str(path), **result.as_json()})
    write_rows(args.result or RESULTS / f"yoao_seed_audit_{profile.name}.json", profile, rows, args.machine_speed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
