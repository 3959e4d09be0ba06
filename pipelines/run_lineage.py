"""`make run`: materialise the whole lineage with the chosen profile, in this process, on the same Dagster
instance the UI uses (so every run, materialisation and check shows up in `make ui` afterwards).

Order: the code-agent tournament; then, per domain partition, scenarios -> teacher_traces ->
sft_warmstart -> specialist -> specialist_eval -> specialist_champion (one Dagster run per domain, with
its checks); then `champion_evaluations`, the nightly re-evaluation of every champion. A domain that fails
does not stop the others; the command exits non-zero and names it. Each domain's run starts and stops
its own vLLM server and proxy (about 40 s each on CPU). What this instance already materialised with the
same profile is skipped unless --force (see `run_lineage`).

    python -m pipelines.run_lineage [--profile smoke|cpu|paper] [--domains craigslist-v0,dnd-v0]
                                    [--data-dir DIR] [--skip-monitoring] [--force]
"""

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from environments import SOCIALRL_ENV_IDS
from models.profiles import PROFILE_NAMES, get_profile
from models.settings import DataPaths
from models.storage import TableStore
from models.tracking import TrackingConfig

PROFILE_TAG = "socialrl/profile"


@dataclass(frozen=True)
class StepResult:
    """One Dagster run of the lineage."""

    name: str
    """What was materialised (an asset or a domain partition)."""
    success: bool
    """Whether the run and its blocking checks succeeded."""
    seconds: float
    """Wall time of the run."""
    run_id: str
    """The Dagster run id ("" when the run could not be created)."""
    error: str = ""
    """Why it failed."""
    evaluation: dict | None = None
    """A domain run's `specialist_eval` output: the specialist, its PPO iterations and the evaluations."""
    promoted: bool | None = None
    """Whether the domain's new specialist became `champion` (None: not a domain run)."""
    skipped: bool = False
    """Already materialised with this profile (today, for the nightly asset): not run again."""


def _latest(instance, asset: str, profile: str, partition: str | None = None) -> tuple[str, float] | None:
    """(run id, timestamp) of the newest materialisation of `asset` (`partition`) made with `profile`."""
    from dagster import AssetKey, AssetRecordsFilter

    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[partition] if partition else None), limit=20
    ).records
    for record in records:  # newest first
        run = instance.get_run_by_id(record.run_id)
        if run is not None and run.tags.get(PROFILE_TAG) == profile:
            return record.run_id, record.timestamp
    return None


def _materialise(
    name: str, assets: list, selection, resources: dict, instance, profile: str, partition_key: str | None = None
):
    from dagster import materialize

    start = time.perf_counter()
    try:
        result = materialize(
            assets,
            selection=selection,
            resources=resources,
            instance=instance,
            partition_key=partition_key,
            raise_on_error=False,
            tags={"socialrl/launched_by": "make run", PROFILE_TAG: profile},
        )
    except Exception as exc:  # a definition error: report it, keep the other domains going
        return StepResult(name, False, time.perf_counter() - start, "", f"{type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - start
    evaluation, promoted = None, None
    if partition_key is not None:
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        promoted = checks.get("beats_champion")
        try:
            evaluation = result.output_for_node("specialist_eval")
        except Exception:  # the domain failed before its evaluation
            evaluation = None
    failed_steps = {e.step_key or "" for e in result.all_events if e.is_step_failure}
    # A candidate that does not beat the champion fails the blocking check (so the run is marked failed in
    # Dagster and the alias stays); for `make run` that is an outcome, not an error.
    not_promoted = promoted is False and evaluation is not None and all("beats_champion" in k for k in failed_steps)
    failures = [e.message or "" for e in result.all_events if e.is_failure]
    return StepResult(
        name,
        result.success or not_promoted,
        seconds,
        result.run_id,
        "" if not_promoted else "; ".join(failures)[:500],
        evaluation,
        promoted,
    )


def run_lineage(
    profile: str,
    domains: tuple[str, ...],
    with_monitoring: bool = True,
    data: Path | None = None,
    force: bool = False,
) -> list[StepResult]:
    """Materialise the lineage; returns one StepResult per Dagster run. Without `force`, what this
    instance already materialised with the same profile is skipped (the tournament, each domain's
    `specialist_eval`, and `champion_evaluations` if it ran today, UTC), so a second `make run` only
    completes what is missing."""
    from dagster import AssetSelection, DagsterInstance

    from pipelines.definitions import all_assets, all_checks, build_resources

    paths = DataPaths(data) if data is not None else DataPaths.from_env()
    instance = DagsterInstance.from_config(str(paths.dagster_home))  # the same instance `make ui` opens
    resources = build_resources(profile=profile, data_dir=str(paths.root))
    everything = [*all_assets, *all_checks]
    stage1 = AssetSelection.groups("socialrl") - AssetSelection.assets("code_agent_tournament")
    plan: list[tuple[str, str, object, str | None]] = [
        ("code_agent_tournament", "code_agent_tournament", AssetSelection.assets("code_agent_tournament"), None)
    ]
    plan += [(domain, "specialist_eval", stage1, domain) for domain in domains]
    if with_monitoring:
        plan.append(
            ("champion_evaluations", "champion_evaluations", AssetSelection.assets("champion_evaluations"), None)
        )
    today = time.strftime("%Y-%m-%d", time.gmtime())
    steps = []
    for name, marker, selection, partition in plan:
        done = None if force else _latest(instance, marker, profile, partition)
        if done is not None and marker == "champion_evaluations":
            done = done if time.strftime("%Y-%m-%d", time.gmtime(done[1])) == today else None
        if done is not None:
            steps.append(StepResult(name, True, 0.0, done[0], skipped=True))
        else:
            steps.append(_materialise(name, everything, selection, resources, instance, profile, partition))
        _report(steps[-1])
    return steps


def _report(step: StepResult) -> None:
    status = "ok" if step.success else f"FAILED: {step.error}"
    if step.skipped:
        status = "already materialised with this profile, skipped (FORCE=1 redoes it)"
    if step.promoted is not None:
        status += ", promoted to champion" if step.promoted else ", not promoted (the champion stays)"
    print(f"[make run] {step.name}: {status} ({step.seconds:.0f} s, run {step.run_id[:8]})", flush=True)


def domain_report(step: StepResult) -> str:
    """Base vs SFT vs PPO on held-out scenarios and the PPO iterations' wall time, as markdown."""
    if not step.evaluation:
        return ""
    lines = [
        f"{step.name} (seat {step.evaluation.get('seat', '?')}): held-out evaluation",
        "",
        "| policy | n | mean reward [95% CI] | agreement | invalid/turn | leak | below-target opening |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, e in step.evaluation["evaluation"].items():
        opening = e.get("below_target_opening_rate")
        lines.append(
            f"| {label} | {e['n']} | {e['mean_reward']:.3f} [{e['ci_low']:.3f}, {e['ci_high']:.3f}] | "
            f"{e['agreement_rate']:.2f} | {e['invalid_action_rate']:.2f} | {e['leakage_rate']:.2f} | "
            f"{'-' if opening is None else f'{opening:.2f}'} |"
        )
    lines += ["", "| PPO iteration | reward | rollout s | train s | sync s |", "| --- | --- | --- | --- | --- |"]
    for it in step.evaluation.get("iterations", []):
        lines.append(
            f"| {it['iteration']} | {it['reward_mean']:.3f} | {it['time_rollout_s']:.0f} | "
            f"{it['time_train_s']:.0f} | {it['time_sync_s']:.1f} |"
        )
    return "\n".join(lines)


def write_report(root: Path, profile: str, steps: list[StepResult], elapsed: float) -> Path:
    """The run's numbers as JSON under <data>/reports/."""
    path = root / "reports" / f"make-run-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    report = {"profile": profile, "wall_s": round(elapsed, 1), "steps": [asdict(s) for s in steps]}
    path.write_text(json.dumps(report, indent=1, default=str))
    return path


def summary(root: Path) -> str:
    """The latest held-out evaluation per domain and policy, from the `evaluations` table."""
    store = TableStore(root / "tables")
    if not (store.root / "evaluations").exists():
        return "(no evaluations yet)"
    frame = store.query(
        """SELECT policy_name, mean_reward, ci_low, ci_high, agreement_rate, invalid_action_rate, leakage_rate, n
           FROM evaluations WHERE counterpart = '*' QUALIFY row_number() OVER (PARTITION BY policy_name ORDER BY created_at DESC) = 1
           ORDER BY policy_name"""
    )
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.precision", 3):
        return frame.to_string(index=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default=None, help="default: $SOCIALRL_PROFILE or cpu")
    parser.add_argument("--domains", default="", help="comma-separated environment ids (default: the profile's)")
    parser.add_argument("--data-dir", type=Path, default=None, help="overrides $SOCIALRL_DATA_DIR")
    parser.add_argument("--skip-monitoring", action="store_true", help="leave out champion_evaluations")
    parser.add_argument("--force", action="store_true", help="materialise again what is already materialised")
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    domains = tuple(d for d in args.domains.split(",") if d) or profile.domains
    unknown = set(domains) - set(SOCIALRL_ENV_IDS)
    if unknown:
        parser.error(f"unknown domains {sorted(unknown)}; choose from {', '.join(SOCIALRL_ENV_IDS)}")
    root = (DataPaths(args.data_dir) if args.data_dir else DataPaths.from_env()).root
    print(f"[make run] profile {profile.name}, domains {', '.join(domains)}, data {root}", flush=True)
    start = time.perf_counter()
    steps = run_lineage(profile.name, domains, not args.skip_monitoring, root, force=args.force)
    elapsed = time.perf_counter() - start
    print(f"\n[make run] lineage finished in {elapsed / 60:.1f} min\n")
    for step in steps:
        if step.evaluation:
            print(domain_report(step) + "\n")
    print("Latest evaluation per policy in the `evaluations` table (all runs so far):\n")
    print(summary(root))
    print(f"\nThis run's numbers: {write_report(root, profile.name, steps, elapsed)}")
    tracking = TrackingConfig.from_env(DataPaths(root))
    print(
        f"\nTables (Parquet, query with DuckDB): {DataPaths(root).tables}\n"
        f"MLflow registry: {tracking.tracking_uri} (models socialrl-<domain>-specialist, aliases candidate/champion)\n"
        f"Dagster runs: {root / 'dagster_home'}\n"
        "Browse both: make ui  (Dagster http://127.0.0.1:3000, MLflow http://127.0.0.1:5000)"
    )
    failed = [s.name for s in steps if not s.success]
    if failed:
        print(f"\n[make run] failed: {', '.join(failed)} (see the runs in the Dagster UI)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
