"""Stage 2 of SocialRL from an empty instance in one command: the registered stage-1 specialists of the chosen
domains (`make run`'s, found in the MLflow registry by domain and held-out plan: `stage1.select_specialist`),
stage 1 at the profile's `stage2.specialist_*` sizes only for the domains that have none (what the instance
already materialised so is skipped, as in `make run`), then one Dagster run of the stage-2 assets
(transfer_matrix -> cascade_order -> cascade_policy, mopd_student -> unified_evaluation, with their checks) on
the instance `make ui` opens, sharing one vLLM engine and proxy. Prints the transfer matrix, the cascade order,
the unified table and the MOPD recovered share, and writes them with the specialists used
(`specialists_source`) to <data>/reports/stage2-<time>.json (and to --result, e.g.
benchmarks/results/stage2_cpu.json).

    python -m pipelines.run_stage2 [--profile smoke|cpu|paper] [--domains craigslist-v0,marketplace-v0,dnd-v0]
                                   [--data-dir DIR] [--force] [--result PATH]
"""

import argparse
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents.env_version import env_version
from environments import SOCIALRL_ENV_IDS
from models.profiles import PROFILE_NAMES, get_profile
from models.provenance import machine_speed_or_none, provenance
from models.settings import DataPaths
from pipelines.launcher import Launcher
from pipelines.run_lineage import StepResult, configure_logging, run_lineage

log = logging.getLogger("socialrl.run_stage2")

DOMAINS_TAG = "socialrl/stage2_domains"
STAGE2_ASSETS = ("transfer_matrix", "cascade_order", "cascade_policy", "mopd_student", "unified_evaluation")


def registry_specialists(profile: str, domains: tuple[str, ...], paths: DataPaths) -> dict[str, Any]:
    """domain -> the registered specialist stage 2 would use (`stage1.select_specialist`), None where there is none."""
    from models.socialrl import stage1
    from models.tracking import Tracker, TrackingConfig

    tracker = Tracker(TrackingConfig.from_env(paths))
    sized = get_profile(profile)
    return {d: stage1.select_specialist(tracker, d, sized) for d in domains}


def _stage1(
    profile: str, domains: tuple[str, ...], paths: DataPaths, force: bool, log_file: Path | None
) -> list[StepResult]:
    """Stage 1, at the stage-2 sizes, for the domains without a registered specialist (with `force`, also those
    whose specialist run_stage2 trained before; `make run`'s are never retrained here)."""
    from models.socialrl.stage1 import FROM_STAGE2

    found = registry_specialists(profile, domains, paths)
    for env_id, source in found.items():
        have = source.reference() if source is not None else "none on the held-out plan: stage 1 trains one"
        print(f"[stage 2] {env_id} specialist: {have}", flush=True)
    train = tuple(d for d in domains if found[d] is None or (force and found[d].source == FROM_STAGE2))
    if not train:
        return []
    # A domain with nothing usable registered runs again even if this instance materialised it (a run
    # from before plans were recorded on the versions).
    redo = tuple(d for d in train if found[d] is None)
    return run_lineage(profile, train, False, paths.root, force, log_file, stage2_specialists=True, redo=redo)


def run_stage2(
    profile: str,
    domains: tuple[str, ...],
    data: Path,
    force: bool = False,
    with_stage1: bool = True,
    log_file: Path | None = None,
) -> tuple[list[StepResult], StepResult, dict[str, Any] | None]:
    """Stage 1 for the `domains` without a registered specialist, sized by the profile's `stage2.specialist_*`
    (unless `with_stage1` is False: stage 2 then uses only what the registry holds), then `stage2_job`; returns the
    stage-1 steps, the stage-2 step and the stage-2 outputs read back through the instance (None when it failed).
    Without `force`, a `unified_evaluation` this instance made with the profile and these domains is reused."""
    paths = DataPaths(data)
    stage1 = _stage1(profile, domains, paths, force, log_file) if with_stage1 else []
    launcher = Launcher(profile, paths, "run_stage2", log_file=log_file)
    tags = {DOMAINS_TAG: ",".join(domains)}
    done = None if force else launcher.latest("unified_evaluation", tags=tags)
    if done is not None:
        step = StepResult(
            name="stage2_job", job="stage2_job", partition=None, success=True, seconds=0.0, run_id=done.run_id, skipped=True,
            step_seconds=launcher.step_seconds(done.run_id),  # the run that made the outputs reused
        )  # fmt: skip
        print(
            f"[stage 2] already materialised with this profile and domains (run {done.run_id[:8]}), skipped", flush=True
        )
        return stage1, step, _outputs(launcher)
    failed = [s.name for s in stage1 if not s.success]
    if failed:
        print(f"[stage 2] stage 1 failed for {', '.join(failed)}; stage 2 runs on what is registered", flush=True)
    config = {"ops": {"transfer_matrix": {"config": {"domains": list(domains)}}}}
    # Without `force`, a stage2_job that did not finish (killed, failed) resumes after what it materialised.
    launch = launcher.run if force else launcher.resume
    run = launch("stage2_job", config=config, tags=tags)
    step = StepResult(
        name="stage2_job", job="stage2_job", partition=None, success=run.success, seconds=run.seconds, run_id=run.run_id, error=run.error[:2000],
        step_seconds=launcher.step_seconds(run.run_id) if run.run_id else {},
    )  # fmt: skip
    print(f"[stage 2] {'ok' if run.success else 'FAILED: ' + step.error} ({run.seconds:.0f} s, checks {run.checks})")
    return stage1, step, _outputs(launcher) if run.success else None


def _outputs(launcher: Launcher) -> dict[str, Any] | None:
    """The stage-2 assets' latest outputs, read through the instance (None when one is missing)."""
    try:
        return {name: launcher.load(name) for name in STAGE2_ASSETS}
    except Exception:  # a missing or unreadable output: stage 2 counts as not done, as before
        return None


def timeline(steps: Sequence[StepResult]) -> list[dict[str, Any]]:
    """Each Dagster run of a stage-2 invocation (stage 1's, then stage 2's) with its wall seconds and the wall
    seconds of each of its steps, from Dagster's own step stats (a skipped stage-2 run: the earlier run whose
    outputs are reused, with its steps)."""
    return [
        {"name": s.name, "run_id": s.run_id, "seconds": round(s.seconds, 1), "skipped": s.skipped,
         "step_seconds": {k: round(v, 1) for k, v in s.step_seconds.items()}}
        for s in steps
    ]  # fmt: skip


def result_json(
    outputs: dict[str, Any], domains: tuple[str, ...], wall_s: float, steps: Sequence[StepResult] = ()
) -> dict[str, Any]:
    """The stage-2 result file (benchmarks/results/stage2_cpu.json): exactly these keys. `cascade_curve` is each
    domain's held-out mean after each cascade stage (the forgetting curve), `cascade_stages` each stage's domain,
    kept checkpoint and wall seconds, `steps` the runs' timeline (`timeline`)."""
    mopd = outputs["mopd_student"]
    matrix = outputs["transfer_matrix"].matrix
    cascade = outputs["cascade_policy"]
    return {
        "env_version": env_version(),
        "domains": list(domains),
        "specialists_source": outputs["transfer_matrix"].sources_json(),
        "transfer_matrix": matrix.as_json(),
        "clusters_per_cell": matrix.clusters_per_cell(),
        "cascade_order": list(outputs["cascade_order"].order),
        "unified": outputs["unified_evaluation"].as_json(),
        "unified_vs_best_baseline": outputs["unified_evaluation"].vs_best_baseline_json(),
        "mopd_recovered_share": mopd.share_of(matrix).as_dict(),
        "mopd_steps": mopd.steps,
        "mopd_student_init": mopd.student_init,
        "mopd_curriculum": mopd.curriculum_json(),
        "cascade_curve": cascade.curve(),
        "cascade_stages": [
            {"stage": st.index + 1, "domain": st.domain, "kept": st.chosen, "wall_s": round(st.wall_s, 1)}
            for st in cascade.stages
        ],
        "steps": timeline(steps),
        "wall_s": round(wall_s, 1),
    }


def report(outputs: dict[str, Any]) -> str:
    """The numbers people look at, as the results render themselves."""
    matrix = outputs["transfer_matrix"].matrix
    return "\n".join(
        [
            "Transfer matrix (specialist - base, paired, held-out; rows donors, columns recipients):",
            "",
            matrix.markdown(),
            "",
            matrix.describe_donors(),
            "",
            outputs["cascade_order"].summary(),
            "",
            outputs["cascade_policy"].markdown(),
            "",
            "Unified evaluation (held-out):",
            "",
            outputs["unified_evaluation"].markdown(),
            "",
            outputs["mopd_student"].summary(),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default=None, help="default: $SOCIALRL_PROFILE or cpu")
    parser.add_argument(
        "--domains", default="", help="comma-separated environment ids (default: the profile's stage 2)"
    )
    parser.add_argument("--data-dir", type=Path, default=None, help="overrides $SOCIALRL_DATA_DIR")
    parser.add_argument(
        "--force",
        action="store_true",
        help="materialise again what is already materialised (make run's registered specialists are still reused)",
    )
    parser.add_argument("--result", type=Path, default=None, help="also write the result JSON here")
    parser.add_argument(
        "--machine-speed", action="store_true", help="measure the machine's PPO update speed after the run (seconds)"
    )
    parser.add_argument(
        "--skip-stage1", action="store_true", help="train no specialist: use only those already registered"
    )
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    domains = tuple(d for d in args.domains.split(",") if d) or profile.stage2.domains
    unknown = set(domains) - set(SOCIALRL_ENV_IDS)
    if unknown:
        parser.error(f"unknown domains {sorted(unknown)}; choose from {', '.join(SOCIALRL_ENV_IDS)}")
    root = (DataPaths(args.data_dir) if args.data_dir else DataPaths.from_env()).root
    log_file = DataPaths(root).log_file("stage2")
    configure_logging(log_file)
    print(
        f"[stage 2] profile {profile.name}, domains {', '.join(domains)}, data {root}; full log {log_file}", flush=True
    )
    start = time.perf_counter()
    stage1, step, outputs = run_stage2(profile.name, domains, root, args.force, not args.skip_stage1, log_file)
    elapsed = time.perf_counter() - start
    print(f"\n[stage 2] finished in {elapsed / 60:.1f} min (stage 1 {sum(s.seconds for s in stage1) / 60:.1f} min)\n")
    if outputs is None:
        print(f"[stage 2] failed: {step.error}")
        return 1
    print(report(outputs))
    speed = machine_speed_or_none(log) if args.machine_speed else None
    data = {
        **provenance(profile=profile.name, machine_update_tok_s=speed),
        **result_json(outputs, domains, elapsed, [*stage1, step]),
    }
    path = DataPaths(root).report_file("stage2")
    path.write_text(json.dumps(data, indent=1))
    print(f"\nThis run's numbers: {path}")
    if args.result is not None:
        args.result.parent.mkdir(parents=True, exist_ok=True)
        args.result.write_text(json.dumps(data, indent=1))
        print(f"Result file: {args.result}")
    return 0 if step.success and all(s.success for s in stage1) else 1


if __name__ == "__main__":
    raise SystemExit(main())
