"""The Theory-of-Mind study in one command: `tom_job` (tom_traces -> tom_student -> tom_analysis) per domain of
the profile, on the Dagster instance `make ui` opens, then the results file.

    python -m pipelines.run_tom [--profile smoke|cpu|paper] [--domains craigslist-v0,...] [--data-dir DIR]
                                [--output benchmarks/results/tom_<profile>.json]

Each domain is two runs of `tom_job` (`STAGES`; the second starts its own vLLM server and proxy for
tom_analysis), launched through pipelines/launcher.py; the printed tables are `ToMDomainResult.markdown()`. The results file has, per
domain, the five arms {mean, ci_low, ci_high, n}, its `clusters` (held-out scenarios behind every interval; the
fewest over the domains also at the top) and `skill_outcome_correlation` {infer, anticipate} each
{r, ci_low, ci_high, n}; everything else (paired differences, skill scores, rates, wall time) goes to
`<output stem>_details.json` beside it. On the cpu profile: Craigslist, 52.2 min measured from a fresh clone
(benchmarks/results/tom_cpu.json, docs/tom.md).
"""

import argparse
import logging
import time
from pathlib import Path

from environments import SOCIALRL_ENV_IDS
from models.profiles import PROFILE_NAMES, get_profile
from models.provenance import machine_speed_or_none, provenance
from models.settings import REPO_ROOT, DataPaths
from models.socialrl.tom import ToMDomainResult, result_file, write_json
from pipelines.launcher import Launcher
from pipelines.run_lineage import configure_logging

log = logging.getLogger("socialrl.run_tom")

STAGES = (("students", ("tom_traces", "tom_student")), ("analysis", ("tom_analysis",)))
"""The two runs of `tom_job` per domain: the students train before the engine starts (in one in-process run
every resource starts with the run, so vLLM would sit beside the SFT trainer, idle and holding memory)."""


def run_tom(
    profile: str, domains: tuple[str, ...], data: Path | None = None, log_file: Path | None = None
) -> dict[str, ToMDomainResult | str]:
    """Run `tom_job` per domain (`STAGES`); returns each domain's result, read back through the instance, or
    the error that stopped it."""
    paths = DataPaths(data) if data is not None else DataPaths.from_env()
    launcher = Launcher(profile, paths, "run_tom", log_file=log_file)
    out: dict[str, ToMDomainResult | str] = {}
    for domain in domains:
        start = time.perf_counter()
        for stage, assets in STAGES:
            run = launcher.run("tom_job", domain, assets=assets)
            seconds = time.perf_counter() - start
            if not run.success:
                out[domain] = f"{stage}: {run.error[:1000] or 'failed'}"
                print(f"[tom] {domain} {stage}: FAILED ({seconds:.0f} s)", flush=True)
                break
            print(f"[tom] {domain} {stage}: ok ({seconds:.0f} s)", flush=True)
        else:
            out[domain] = launcher.load("tom_analysis", domain)
    return out


def tom_timeline(profile: str, domains: tuple[str, ...], data: Path) -> dict[str, list[dict[str, object]]]:
    """Per domain, each `STAGES` run that made the latest materialisation of its last asset: the run id and the
    wall seconds of each of its steps, from Dagster's own step stats (the run's timeline, never typed)."""
    launcher = Launcher(profile, DataPaths(data), "run_tom")
    out: dict[str, list[dict[str, object]]] = {}
    for domain in domains:
        out[domain] = []
        for stage, assets in STAGES:
            done = launcher.latest(assets[-1], domain)
            if done is not None:
                seconds = {k: round(v, 1) for k, v in launcher.step_seconds(done.run_id).items()}
                out[domain].append({"stage": stage, "run_id": done.run_id, "step_seconds": seconds})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default=None, help="default: $SOCIALRL_PROFILE or cpu")
    parser.add_argument("--domains", default="", help="comma-separated environment ids (default: the profile's)")
    parser.add_argument("--data-dir", type=Path, default=None, help="overrides $SOCIALRL_DATA_DIR")
    parser.add_argument("--output", type=Path, default=None, help="default: benchmarks/results/tom_<profile>.json")
    parser.add_argument(
        "--machine-speed", action="store_true", help="measure the machine's PPO update speed after the run (seconds)"
    )
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    domains = tuple(d for d in args.domains.split(",") if d) or profile.tom.domains
    unknown = set(domains) - set(SOCIALRL_ENV_IDS)
    if unknown:
        parser.error(f"unknown domains {sorted(unknown)}; choose from {', '.join(SOCIALRL_ENV_IDS)}")
    output = args.output or REPO_ROOT / "benchmarks" / "results" / f"tom_{profile.name}.json"
    paths = DataPaths(args.data_dir) if args.data_dir is not None else DataPaths.from_env()
    log_file = paths.log_file("tom")
    configure_logging(log_file)
    print(f"[tom] profile {profile.name}, domains {', '.join(domains)}; full log {log_file}", flush=True)
    start = time.perf_counter()
    results = run_tom(profile.name, domains, paths.root, log_file)
    elapsed = time.perf_counter() - start
    done = [r for r in results.values() if isinstance(r, ToMDomainResult)]
    for r in done:
        print(r.markdown() + "\n")
    if done:
        speed = machine_speed_or_none(log) if args.machine_speed else None
        # Provenance first, then one entry per domain (models/provenance.py PROVENANCE_KEYS).
        write_json(
            output,
            {
                **provenance(profile=profile.name, machine_update_tok_s=speed),
                "wall_s": round(elapsed, 1),
                **result_file(done),
            },
        )
        details = {r.env_id: r.details() for r in done}
        details["_run"] = {
            "profile": profile.name,
            "domains": list(domains),
            "wall_s": round(elapsed, 1),
            "steps": tom_timeline(profile.name, domains, paths.root),
        }
        write_json(output.with_name(f"{output.stem}_details.json"), details)
        print(f"[tom] results: {output} (details beside it)")
    print(f"[tom] finished in {elapsed / 60:.1f} min")
    failed = {d: r for d, r in results.items() if isinstance(r, str)}
    for domain, error in failed.items():
        print(f"[tom] {domain} FAILED: {error}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
