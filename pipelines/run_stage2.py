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
                                   [--data-dir DIR] [--force] [--result PATH] [--read-back]

A run that fails still writes what it materialised (`complete` false, `missing` naming the assets it lacks); one
stopped by hand (a session's end) is read back from the instance with `--read-back`, which runs nothing, and goes
on from its last whole step when run again without it.
"""

import argparse
import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agents.env_version import env_version
from environments import SOCIALRL_ENV_IDS
from models.profiles import PROFILE_NAMES, get_profile
from models.provenance import machine_speed_or_none, provenance
from models.serving.stack import shared_engines
from models.settings import DataPaths
from pipelines.launcher import Launcher
from pipelines.run_lineage import StepResult, configure_logging, run_lineage
from resources.instance import latest_materialisation

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
    with shared_engines():  # stage 1's runs and stage 2's share one engine where they serve the same model
        return _run_stage2(profile, domains, DataPaths(data), force, with_stage1, log_file)


def _run_stage2(
    profile: str, domains: tuple[str, ...], paths: DataPaths, force: bool, with_stage1: bool, log_file: Path | None
) -> tuple[list[StepResult], StepResult, dict[str, Any] | None]:
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


def _past_run(launcher: Launcher, job: str, partition: str | None, run_id: str) -> StepResult:
    """A run of this instance as a `StepResult`: its status, its wall seconds (for a run whose process was killed,
    which never ended: the sum of its finished steps' seconds) and its steps' seconds, from Dagster's run stats."""
    from dagster import DagsterRunStatus

    run = launcher.instance.get_run_by_id(run_id)
    stats = launcher.instance.get_run_stats(run_id)
    steps = launcher.step_seconds(run_id)
    ended = stats.start_time is not None and stats.end_time is not None
    return StepResult(
        name=f"{job}[{partition}]" if partition else job, job=job, partition=partition,
        success=run is not None and run.status == DagsterRunStatus.SUCCESS,
        seconds=stats.end_time - stats.start_time if ended else sum(steps.values()), run_id=run_id, step_seconds=steps,
    )  # fmt: skip


def read_back(profile: str, domains: tuple[str, ...], data: Path) -> tuple[dict[str, Any], list[StepResult]]:
    """What run_stage2 materialised for these domains on the instance, finished or not (a run that failed, or
    was stopped by hand): the stage-2 assets it has (latest of each, made with this profile and these domains)
    and the Dagster runs behind them, each domain's stage-1 run (at the stage-2 sizes) first. The instance stores
    only an asset's newest value, so an asset materialised since by another profile or domain set is left out."""
    paths = DataPaths(data)
    launcher = Launcher(profile, paths, "run_stage2")
    outputs: dict[str, Any] = {}
    stage2_runs: list[str] = []
    for asset in STAGE2_ASSETS:
        done = launcher.latest(asset, tags={DOMAINS_TAG: ",".join(domains)})
        stored = latest_materialisation(launcher.instance, asset)  # whose value the IO manager holds
        if done is not None and stored is not None and stored.run_id == done.run_id:
            outputs[asset] = launcher.load(asset)
            stage2_runs += [] if done.run_id in stage2_runs else [done.run_id]
    specialists = Launcher(profile, paths, "run_stage2", stage2_specialists=True)
    steps = []
    for domain in domains:
        trained = specialists.latest("specialist_eval", domain)
        if trained is not None:
            steps.append(_past_run(specialists, "stage1_job", domain, trained.run_id))
    return outputs, steps + [_past_run(launcher, "stage2_job", None, run_id) for run_id in stage2_runs]


def timeline(steps: Sequence[StepResult]) -> list[dict[str, Any]]:
    """Each Dagster run of a stage-2 invocation (stage 1's, then stage 2's) with its wall seconds and the wall
    seconds of each of its steps, from Dagster's own step stats (a skipped stage-2 run: the earlier run whose
    outputs are reused, with its steps)."""
    return [
        {"name": s.name, "run_id": s.run_id, "seconds": round(s.seconds, 1), "skipped": s.skipped,
         "step_seconds": {k: round(v, 1) for k, v in s.step_seconds.items()}}
        for s in steps
    ]  # fmt: skip


def _cascade_stages(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"stage": st.index + 1, "domain": st.domain, "kept": st.chosen, "wall_s": round(st.wall_s, 1)}
        for st in outputs["cascade_policy"].stages
    ]


def _share_over_warmstart(outputs: dict[str, Any]) -> dict[str, Any]:
    """The MOPD student's recovered share of the specialists' advantage over each domain's warm-start (the
    `mopd_recovered_share` key holds it over the base)."""
    from models.socialrl.stage2 import recovered_share

    return recovered_share(
        outputs["mopd_student"].scores, outputs["transfer_matrix"].matrix, floor="warmstart"
    ).as_dict()


# The result file's stage-2 keys in their order: each with the assets it is read from and how.
RESULT_PARTS: tuple[tuple[str, tuple[str, ...], Callable[[dict[str, Any]], Any]], ...] = (
    ("specialists_source", ("transfer_matrix",), lambda o: o["transfer_matrix"].sources_json()),
    ("transfer_matrix", ("transfer_matrix",), lambda o: o["transfer_matrix"].matrix.as_json()),
    ("transfer_matrix_vs_warmstart", ("transfer_matrix",), lambda o: o["transfer_matrix"].matrix.versus_warmstart_json()),
    ("clusters_per_cell", ("transfer_matrix",), lambda o: o["transfer_matrix"].matrix.clusters_per_cell()),
    ("cascade_order", ("cascade_order",), lambda o: list(o["cascade_order"].order)),
    ("unified", ("unified_evaluation",), lambda o: o["unified_evaluation"].as_json()),
    ("unified_vs_best_baseline", ("unified_evaluation",), lambda o: o["unified_evaluation"].vs_best_baseline_json()),
    (
        "mopd_recovered_share",
        ("mopd_student", "transfer_matrix"),
        lambda o: o["mopd_student"].share_of(o["transfer_matrix"].matrix).as_dict(),
    ),
    (
        "mopd_recovered_share_over_warmstart",
        ("mopd_student", "transfer_matrix"),
        _share_over_warmstart,
    ),
    ("mopd_steps", ("mopd_student",), lambda o: o["mopd_student"].steps),
    ("mopd_student_init", ("mopd_student",), lambda o: o["mopd_student"].student_init),
    ("mopd_curriculum", ("mopd_student",), lambda o: o["mopd_student"].curriculum_json()),
    ("cascade_curve", ("cascade_policy",), lambda o: o["cascade_policy"].curve()),
    ("cascade_stages", ("cascade_policy",), _cascade_stages),
)  # fmt: skip


def result_json(
    outputs: dict[str, Any], domains: tuple[str, ...], wall_s: float, steps: Sequence[StepResult] = ()
) -> dict[str, Any]:
    """The stage-2 result file (benchmarks/results/stage2_cpu.json): exactly these keys (`RESULT_PARTS`).
    `transfer_matrix` is each specialist - base, `transfer_matrix_vs_warmstart` each specialist - the recipient's
    warm-start (both paired on the recipient's held-out plan), `cascade_curve` each domain's held-out mean after
    each cascade stage (the forgetting curve), `cascade_stages` each stage's domain, kept checkpoint and wall
    seconds, `steps` the runs' timeline (`timeline`). When `outputs` lacks some of `STAGE2_ASSETS` (a run that
    failed or was stopped), `complete` is false, `missing` names those assets, and the keys read from them are
    left out."""
    missing = [a for a in STAGE2_ASSETS if a not in outputs]
    head: dict[str, Any] = {"env_version": env_version(), "domains": list(domains)}
    if missing:
        head |= {"complete": False, "missing": missing}
    parts = {key: read(outputs) for key, assets, read in RESULT_PARTS if not set(assets) - set(outputs)}
    return {**head, **parts, "steps": timeline(steps), "wall_s": round(wall_s, 1)}


def report(outputs: dict[str, Any]) -> str:
    """The numbers people look at, as the results render themselves (the sections of the assets `outputs` has)."""
    sections: list[str] = []
    if "transfer_matrix" in outputs:
        matrix = outputs["transfer_matrix"].matrix
        sections += [
            "Transfer matrix (specialist - base, paired, held-out; rows donors, columns recipients):",
            matrix.markdown(),
            matrix.describe_donors(),
            "Transfer against the recipient's own warm-start (specialist - SFT warm-start, paired, held-out):",
            matrix.markdown_vs_warmstart(),
        ]
    if "cascade_order" in outputs:
        sections.append(outputs["cascade_order"].summary())
    if "cascade_policy" in outputs:
        sections.append(outputs["cascade_policy"].markdown())
    if "unified_evaluation" in outputs:
        sections += ["Unified evaluation (held-out):", outputs["unified_evaluation"].markdown()]
    if "mopd_student" in outputs:
        sections.append(outputs["mopd_student"].summary())
    return "\n\n".join(sections)


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
    parser.add_argument(
        "--read-back",
        action="store_true",
        help="run nothing: write what an earlier run (finished, failed or stopped) materialised for these domains",
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
    if args.read_back:
        outputs, steps = read_back(profile.name, domains, root)
        elapsed = sum(s.seconds for s in steps)  # the runs ran one after the other
        ok = not set(STAGE2_ASSETS) - set(outputs)
    else:
        stage1, step, outputs = run_stage2(profile.name, domains, root, args.force, not args.skip_stage1, log_file)
        elapsed = time.perf_counter() - start
        steps, ok = [*stage1, step], outputs is not None and step.success and all(s.success for s in stage1)
        print(
            f"\n[stage 2] finished in {elapsed / 60:.1f} min (stage 1 {sum(s.seconds for s in stage1) / 60:.1f} min)\n"
        )
        if outputs is None:
            print(f"[stage 2] failed: {step.error}")
            outputs = read_back(profile.name, domains, root)[0]  # what it did materialise is still written
    if not outputs:
        print(f"[stage 2] nothing of stage 2 materialised for {', '.join(domains)} on {root}")
        return 1
    missing = set(STAGE2_ASSETS) - set(outputs)
    print(report(outputs))
    speed = machine_speed_or_none(log) if args.machine_speed else None
    data = {
        **provenance(profile=profile.name, machine_update_tok_s=speed),
        **result_json(outputs, domains, elapsed, steps),
    }
    for path in (DataPaths(root).report_file("stage2"), args.result):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data, indent=1))
            print(f"Result file{' (incomplete: no ' + ', '.join(sorted(missing)) + ')' if missing else ''}: {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
