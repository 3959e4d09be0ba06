"""Stage 2 of SocialRL from an empty instance in one command: stage 1 for the chosen domains (what the instance
already materialised with the profile is skipped, as in `make run`), then one Dagster run of the stage-2
assets (transfer_matrix -> cascade_order -> cascade_policy, mopd_student -> unified_evaluation, with their
checks) on the instance `make ui` opens, sharing one vLLM engine and proxy. Prints the transfer matrix, the
cascade order, the unified table and the MOPD recovered share, and writes them to
<data>/reports/stage2-<time>.json (and to --result, e.g. benchmarks/results/stage2_cpu.json).

    python -m pipelines.run_stage2 [--profile smoke|cpu|paper] [--domains craigslist-v0,marketplace-v0,dnd-v0]
                                   [--data-dir DIR] [--force] [--result PATH]
"""

import argparse
import json
import time
from pathlib import Path
from typing import Any

from environments import SOCIALRL_ENV_IDS
from models.profiles import PROFILE_NAMES, get_profile
from models.settings import DataPaths
from pipelines.run_lineage import PROFILE_TAG, QUIET_CONSOLE, StepResult, configure_logging, run_lineage

DOMAINS_TAG = "socialrl/stage2_domains"
STAGE2_ASSETS = ("transfer_matrix", "cascade_order", "cascade_policy", "mopd_student", "unified_evaluation")


def _materialised(instance, profile: str, domains: tuple[str, ...]) -> str | None:
    """The run id of the newest `unified_evaluation` made with this profile and these domains, if any."""
    from dagster import AssetKey, AssetRecordsFilter

    records = instance.fetch_materializations(AssetRecordsFilter(asset_key=AssetKey("unified_evaluation")), limit=20)
    for record in records.records:
        run = instance.get_run_by_id(record.run_id)
        if run and run.tags.get(PROFILE_TAG) == profile and run.tags.get(DOMAINS_TAG) == ",".join(domains):
            return record.run_id
    return None


def run_stage2(
    profile: str,
    domains: tuple[str, ...],
    data: Path,
    force: bool = False,
    with_stage1: bool = True,
    log_file: Path | None = None,
) -> tuple[list[StepResult], StepResult, dict[str, Any] | None]:
    """Stage 1 for `domains`, sized by the profile's `stage2.specialist_*` (unless `with_stage1` is False: stage 2
    then uses what the registry holds, e.g. `make run`'s champions), then
    the stage-2 assets; returns the stage-1 steps, the stage-2 step and the stage-2 outputs (None when it
    failed)."""
    from dagster import AssetSelection, DagsterInstance, materialize

    from assets import stage2 as stage2_assets
    from pipelines.definitions import all_assets, all_checks, build_resources

    paths = DataPaths(data)
    stage1 = (
        run_lineage(profile, domains, False, paths.root, force, log_file, stage2_specialists=True)
        if with_stage1
        else []
    )
    instance = DagsterInstance.from_config(str(paths.dagster_home))
    done = None if force else _materialised(instance, profile, domains)
    if done is not None:
        step = StepResult("stage2_job", "stage2_job", None, True, 0.0, done, skipped=True)
        print(f"[stage 2] already materialised with this profile and domains (run {done[:8]}), skipped", flush=True)
        return stage1, step, _outputs_of(instance, done)
    failed = [s.name for s in stage1 if not s.success]
    if failed:
        print(f"[stage 2] stage 1 failed for {', '.join(failed)}; stage 2 runs on what is registered", flush=True)
    start = time.perf_counter()
    result = materialize(
        [*all_assets, *all_checks],
        selection=AssetSelection.groups(stage2_assets.GROUP),
        resources=build_resources(profile=profile, data_dir=str(paths.root)),
        instance=instance,
        run_config={
            "ops": {"transfer_matrix": {"config": {"domains": list(domains)}}},
            "loggers": QUIET_CONSOLE,  # the full log is the file `configure_logging` set up
        },
        raise_on_error=False,
        tags={"socialrl/launched_by": "run_stage2", PROFILE_TAG: profile, DOMAINS_TAG: ",".join(domains)},
    )
    seconds = time.perf_counter() - start
    failures = [e.message or "" for e in result.all_events if e.is_failure]
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    step = StepResult(
        "stage2_job", "stage2_job", None, result.success, seconds, result.run_id, "; ".join(failures)[:2000]
    )
    print(f"[stage 2] {'ok' if result.success else 'FAILED: ' + step.error} ({seconds:.0f} s, checks {checks})")
    if not result.success:
        return stage1, step, None
    return stage1, step, {name: result.output_for_node(name) for name in STAGE2_ASSETS}


def _outputs_of(instance, run_id: str) -> dict[str, Any] | None:
    """The stage-2 assets' latest outputs, read back from the instance's IO manager storage (the filesystem
    IO manager `materialize` uses: one pickle per asset under the instance's storage directory)."""
    import pickle

    storage = Path(instance.storage_directory())
    if not all((storage / name).is_file() for name in STAGE2_ASSETS):
        return None
    return {name: pickle.loads((storage / name).read_bytes()) for name in STAGE2_ASSETS}


def result_json(outputs: dict[str, Any], domains: tuple[str, ...], wall_s: float) -> dict[str, Any]:
    """The stage-2 result file (benchmarks/results/stage2_cpu.json): exactly these keys."""
    mopd = outputs["mopd_student"]
    return {
        "domains": list(domains),
        "transfer_matrix": outputs["transfer_matrix"].matrix.as_json(),
        "cascade_order": list(outputs["cascade_order"].order),
        "unified": outputs["unified_evaluation"].as_json(),
        "mopd_recovered_share": mopd.recovered_mean,
        "mopd_steps": mopd.steps,
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
    parser.add_argument("--force", action="store_true", help="materialise again what is already materialised")
    parser.add_argument("--result", type=Path, default=None, help="also write the result JSON here")
    parser.add_argument("--skip-stage1", action="store_true", help="use the specialists already registered")
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
    data = result_json(outputs, domains, elapsed)
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
