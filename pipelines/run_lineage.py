"""`make run`: launch the lineage's jobs (pipelines.definitions.LINEAGE, the same jobs the UI runs) in this
process on the Dagster instance the UI uses (pipelines/launcher.py), and report what their assets recorded.

Order: `tournament_job`; `incentives_job` (the incentive audit, code only); `stage1_job` once per domain partition (scenarios -> teacher_traces ->
sft_warmstart -> specialist -> specialist_eval -> specialist_champion, with the checks); then
`champion_evaluation_job` (the nightly re-evaluation of every champion). A job that fails does not stop the
others; the command exits non-zero and names it. A candidate that loses the blocking `beats_champion`
check is an outcome ("not promoted"), not a failure. What this instance already materialised with the same
profile is skipped unless --force.

The console shows one concise line per step (SFT steps, PPO iterations, jobs) from the `socialrl` loggers;
every Dagster event and every log line go to <data>/logs/make-run-<time>.log. The report (printed, and
written to <data>/reports/make-run-<time>.json) is read back from the `report` metadata of each domain's
`specialist_eval` materialisation: per domain the policies' held-out results, the paired differences
(`ppo_minus_sft`, `sft_minus_base`, `ppo_minus_base`, each {mean, ci_low, ci_high, n}) and the PPO
`learning_curve`; and from `champion_evaluations`' `report` the nightly result (`nightly`: each champion's
mean reward with its interval and n).

    python -m pipelines.run_lineage [--profile smoke|cpu|paper] [--domains craigslist-v0,dnd-v0]
                                    [--data-dir DIR] [--skip-monitoring] [--force]
"""

import argparse
import logging
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agents.env_version import env_version
from environments import SOCIALRL_ENV_IDS
from models.display import format_number, strict_json
from models.profiles import PROFILE_NAMES, get_profile
from models.progress import PlainFormatter
from models.provenance import code_state, measure_update_tok_s
from models.settings import DataPaths
from models.tracking import TrackingConfig
from pipelines.launcher import LaunchedRun, Launcher, Materialisation

log = logging.getLogger("socialrl.make_run")


@dataclass(frozen=True, kw_only=True)
class StepResult:
    """One Dagster run of the lineage."""

    name: str
    """The job, with its partition (e.g. "stage1_job[craigslist-v0]")."""
    job: str
    partition: str | None
    success: bool
    """Whether the run succeeded (a candidate that is not promoted counts as success)."""
    seconds: float
    run_id: str
    """The Dagster run id ("" when the run could not be created)."""
    error: str = ""
    report: dict[str, Any] | None = None
    """A domain run's `specialist_eval` report (policies, paired differences, learning curve), or the nightly
    run's `champion_evaluations` report (each champion's mean reward with its interval and n)."""
    markdown: str = ""
    """The same evaluation as `SpecialistEvaluation.markdown()` rendered it (its `evaluation` metadata)."""
    step_seconds: dict[str, float] = field(default_factory=dict)
    """Wall seconds of each step of the Dagster run, from the instance's step stats."""
    promoted: bool | None = None
    """Whether the domain's new specialist became `champion` (None: not a domain run)."""
    skipped: bool = False
    """Already materialised with this profile (today, for the nightly job): not run again."""
    notes: list[str] = field(default_factory=list)


# The asset whose materialisation marks a job as done, per job.
_MARKER = {
    "tournament_job": "code_agent_tournament",
    "incentives_job": "environment_incentives",
    "stage1_job": "specialist_eval",
}
_MARKER["champion_evaluation_job"] = "champion_evaluations"


def plan(domains: tuple[str, ...], with_monitoring: bool = True) -> list[tuple[str, str | None]]:
    """(job, partition) of every run of the lineage, in order (pipelines.definitions.LINEAGE)."""
    from pipelines.definitions import LINEAGE

    return [
        (job, partition)
        for job, partitioned in LINEAGE
        if with_monitoring or job != "champion_evaluation_job"
        for partition in (domains if partitioned else (None,))
    ]


def _done(launcher: Launcher, job: str, partition: str | None) -> Materialisation | None:
    """What marks the run as done on this instance with this profile: the job's marker asset, materialised
    today (UTC) for the nightly job."""
    done = launcher.latest(_MARKER[job], partition)
    today = time.strftime("%Y-%m-%d", time.gmtime())
    return None if done is None or (job == "champion_evaluation_job" and done.day != today) else done


def _evaluation(done: Materialisation | None) -> tuple[dict[str, Any] | None, str]:
    """The `report` and the markdown of a marker's materialisation: a `specialist_eval`'s
    (SpecialistEvaluation.report() and .markdown(), kept in its metadata), `champion_evaluations`' report (each
    champion's nightly summary; no markdown)."""
    if done is None:
        return None, ""
    return done.metadata.get("report"), done.metadata.get("evaluation") or ""


def _step(launcher: Launcher, run: LaunchedRun) -> StepResult:
    """The StepResult of a run the launcher just made."""
    partition = run.partition
    promoted = run.checks.get("beats_champion") if partition else None
    report, markdown = _evaluation(launcher.latest(_MARKER[run.job], partition))  # where the marker has them
    # A candidate that does not beat the champion fails the blocking check (Dagster marks the run failed and
    # the alias stays); for `make run` that is an outcome, not an error.
    not_promoted = promoted is False and report is not None and all("beats_champion" in k for k in run.failed_steps)
    ok = run.success or not_promoted
    return StepResult(
        name=run.name,
        job=run.job,
        partition=partition,
        success=ok,
        seconds=run.seconds,
        run_id=run.run_id,
        error="" if not_promoted else run.error[:500],
        report=report if ok else None,
        markdown=markdown if ok else "",
        step_seconds=launcher.step_seconds(run.run_id),
        promoted=promoted,
    )


def run_lineage(
    profile: str,
    domains: tuple[str, ...],
    with_monitoring: bool = True,
    data: Path | None = None,
    force: bool = False,
    log_file: Path | None = None,
    stage2_specialists: bool = False,
    redo: tuple[str, ...] = (),
) -> list[StepResult]:
    """Launch the lineage's jobs; one StepResult per Dagster run. Without `force`, what this instance already
    materialised with the same profile is skipped (the tournament, each domain's `specialist_eval`, and
    `champion_evaluations` if it ran today, UTC), so a second `make run` only completes what is missing, and a
    job whose last run did not finish (killed, failed) resumes after the assets that run materialised;
    the domains in `redo` run again all the same. `stage2_specialists` sizes stage 1 as `run_stage2` trains its
    specialists; such runs are tagged apart (`profile_tag`), so `make run` does not take them for its own."""
    paths = DataPaths(data) if data is not None else DataPaths.from_env()
    log_file = log_file or paths.log_file("make-run")
    launcher = Launcher(profile, paths, "make run", stage2_specialists, log_file)
    steps: list[StepResult] = []
    for job, partition in plan(domains, with_monitoring):
        done = None if force or (partition is not None and partition in redo) else _done(launcher, job, partition)
        if done is not None:
            report, markdown = _evaluation(done)
            name = f"{job}[{partition}]" if partition else job
            steps.append(
                StepResult(
                    name=name,
                    job=job,
                    partition=partition,
                    success=True,
                    seconds=0.0,
                    run_id=done.run_id,
                    report=report,
                    markdown=markdown,
                    skipped=True,
                )
            )
        else:
            log.info("%s: starting", f"{job}[{partition}]" if partition else job)
            run = launcher.run(job, partition) if force else launcher.resume(job, partition)
            steps.append(_step(launcher, run))
        _announce(steps[-1])
    return steps


def _announce(step: StepResult) -> None:
    status = "ok" if step.success else f"FAILED: {step.error}"
    if step.skipped:
        status = "already materialised with this profile, skipped (FORCE=1 redoes it)"
    if step.promoted is not None and not step.skipped:
        status += ", promoted to champion" if step.promoted else ", not promoted (the champion stays)"
    log.info("%s: %s (%.0f s, run %s)", step.name, status, step.seconds, step.run_id[:8])


def write_report(
    paths: DataPaths,
    profile: str,
    steps: list[StepResult],
    elapsed: float,
    machine_update_tok_s: float | None = None,
) -> Path:
    """The run's numbers as strict JSON under <data>/reports/: per domain `paired` and `learning_curve`, with
    where they came from (the code's commit and the machine's speed, models/provenance.py)."""
    path = paths.report_file("make-run")
    domains = {s.partition: s.report for s in steps if s.partition and s.report}
    code = code_state()
    report = {
        "profile": profile,
        # Results of different environment versions are never compared (agents/env_version.py).
        "env_version": env_version(),
        "commit": code.commit,
        "uncommitted_changes": code.uncommitted_changes,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_s": round(elapsed, 1),
        "machine_update_tok_s": machine_update_tok_s,
        "domains": domains,
        "nightly": next((s.report for s in steps if s.job == "champion_evaluation_job" and s.report), None),
        "steps": [{k: v for k, v in asdict(s).items() if k not in ("report", "markdown")} for s in steps],
    }
    path.write_text(strict_json(report, indent=1))
    return path


def nightly_text(report: dict[str, Any]) -> str:
    """What `make run` prints of `champion_evaluations`' report: each champion's mean reward with its interval."""
    lines = ["Nightly champion evaluation (fresh held-out scenarios):"]
    for label, r in report.items():
        low, high = format_number(r.get("ci_low")), format_number(r.get("ci_high"))
        lines.append(f"  {label}: mean reward {format_number(r.get('mean_reward'))} [{low}, {high}] (n={r.get('n')})")
    return "\n".join(lines)


def configure_logging(log_file: Path) -> None:
    """Concise INFO lines of our loggers on the console; everything at DEBUG in the log file."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    to_file = logging.FileHandler(log_file)
    to_file.setFormatter(PlainFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root.addHandler(to_file)
    console = logging.StreamHandler(sys.stdout)
    console.setLevel(logging.INFO)
    # Dagster-managed, the socialrl records reach this handler rewritten; PlainFormatter prints them as written.
    console.setFormatter(PlainFormatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    console.addFilter(lambda record: record.name.startswith("socialrl"))
    root.addHandler(console)
    # Library warnings (Dagster's preview and beta notices on loading the definitions) go to the file only.
    logging.captureWarnings(True)
    for noisy in ("httpx", "httpcore", "urllib3", "filelock", "datasets"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default=None, help="default: $SOCIALRL_PROFILE or cpu")
    parser.add_argument("--domains", default="", help="comma-separated environment ids (default: the profile's)")
    parser.add_argument("--data-dir", type=Path, default=None, help="overrides $SOCIALRL_DATA_DIR")
    parser.add_argument("--skip-monitoring", action="store_true", help="leave out champion_evaluations")
    parser.add_argument("--force", action="store_true", help="materialise again what is already materialised")
    parser.add_argument(
        "--machine-speed",
        action="store_true",
        help="measure the machine's PPO update speed after the run (a few seconds) for the report",
    )
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    domains = tuple(d for d in args.domains.split(",") if d) or profile.domains
    unknown = set(domains) - set(SOCIALRL_ENV_IDS)
    if unknown:
        parser.error(f"unknown domains {sorted(unknown)}; choose from {', '.join(SOCIALRL_ENV_IDS)}")
    paths = DataPaths(args.data_dir) if args.data_dir else DataPaths.from_env()
    log_file = paths.log_file("make-run")
    configure_logging(log_file)
    log.info("profile %s, domains %s, data %s; full log %s", profile.name, ", ".join(domains), paths.root, log_file)
    start = time.perf_counter()
    steps = run_lineage(profile.name, domains, not args.skip_monitoring, paths.root, args.force, log_file)
    elapsed = time.perf_counter() - start
    print(f"\n[make run] lineage finished in {elapsed / 60:.1f} min\n")
    for step in steps:
        if step.markdown:
            print(step.markdown + "\n")
        if step.job == "champion_evaluation_job" and step.report:
            print(nightly_text(step.report) + "\n")
    speed = None
    if args.machine_speed:
        try:
            speed = measure_update_tok_s()
            print(f"[make run] this machine's PPO update speed: {speed:,.0f} tokens/s")
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:  # the run's numbers matter more
            log.warning("the machine's speed was not measured: %s", exc)
    print(f"This run's numbers: {write_report(paths, profile.name, steps, elapsed, speed)}")
    tracking = TrackingConfig.from_env(paths)
    print(
        f"\nTables (Parquet, query with DuckDB): {paths.tables}\n"
        f"MLflow registry: {tracking.tracking_uri} (models socialrl-<domain>-specialist, aliases candidate/champion)\n"
        f"Dagster runs: {paths.dagster_home}\nFull log: {log_file}\n"
        "Browse both: make ui  (Dagster http://127.0.0.1:3000, MLflow http://127.0.0.1:5000)"
    )
    failed = [s.name for s in steps if not s.success]
    if failed:
        print(f"\n[make run] failed: {', '.join(failed)} (see the runs in the Dagster UI and the full log)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
