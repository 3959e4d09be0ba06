"""`make run`: launch the lineage's jobs (pipelines.definitions.LINEAGE, the same jobs the UI runs) in this
process on the Dagster instance the UI uses (pipelines/launcher.py), and report what their assets recorded.

Order: `tournament_job`; `incentives_job` (the incentive audit, code only); `stage1_job` once per domain partition (scenarios -> teacher_traces ->
sft_warmstart -> specialist -> specialist_eval -> specialist_champion, with the checks); with --nightly
also `champion_evaluation_job` (the nightly re-evaluation of every champion: the nightly schedule's work, so
`make run` leaves it out and says per domain where the champion stands instead). A job that fails does not stop the
others; the command exits non-zero and names it. A candidate that loses the blocking `beats_champion`
check is an outcome ("not promoted"), not a failure. What this instance already materialised with the same
profile is skipped unless --force.

The console shows one concise line per step (SFT steps, PPO iterations, jobs) from the `socialrl` loggers;
every Dagster event and every log line go to <data>/logs/make-run-<time>.log. The report (printed, and
written to <data>/reports/make-run-<time>.json) is read back from the `report` metadata of each domain's
`specialist_eval` materialisation: per domain the policies' held-out results, the paired differences
(`ppo_minus_sft`, `sft_minus_base`, `ppo_minus_base`, each {mean, ci_low, ci_high, n}) and the PPO
`learning_curve`; and, with --nightly, from `champion_evaluations`' `report` the nightly result (`nightly`:
each champion's mean reward with its interval and n).

Beside the report, <data>/reports/make-run-transcripts-<time>.json holds what the agents said: per domain, the
best, median and worst episode (and the most refused one, where any has a refused attempt) of the warm-start
(`sft`), the specialist (`ppo`) and the teacher, as the asset page renders them, from the
`representative_episodes` metadata of the same materialisation (`write_transcripts`).

    python -m pipelines.run_lineage [--profile smoke|cpu|paper] [--domains craigslist-v0,dnd-v0]
                                    [--data-dir DIR] [--nightly] [--force]
"""

import argparse
import logging
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from environments import SOCIALRL_ENV_IDS
from models.display import format_number, strict_json
from models.profiles import PROFILE_NAMES, get_profile
from models.progress import PlainFormatter
from models.provenance import machine_speed_or_none, provenance
from models.serving.stack import shared_engines
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
    transcripts: dict[str, Any] | None = None
    """A domain run's representative episodes, policy -> entries (its `representative_episodes` metadata,
    models/evaluation/transcripts.py `transcripts_json`); None where the materialisation has none."""
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


def _transcripts(done: Materialisation | None) -> dict[str, Any] | None:
    """The representative episodes a `specialist_eval` materialisation keeps (`representative_episodes`), else
    None."""
    return done.metadata.get("representative_episodes") if done is not None else None


def _step(launcher: Launcher, run: LaunchedRun) -> StepResult:
    """The StepResult of a run the launcher just made."""
    partition = run.partition
    promoted = run.checks.get("beats_champion") if partition else None
    marker = launcher.latest(_MARKER[run.job], partition)
    report, markdown = _evaluation(marker)  # where the marker has them
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
        transcripts=_transcripts(marker) if ok else None,
        step_seconds=launcher.step_seconds(run.run_id),
        promoted=promoted,
    )


def run_lineage(
    profile: str,
    domains: tuple[str, ...],
    with_monitoring: bool = False,
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
    # The runs follow each other in this process: those that serve the same model share one engine.
    with shared_engines() as engines:
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
                        transcripts=_transcripts(done),
                        skipped=True,
                    )
                )
            else:
                log.info("%s: starting", f"{job}[{partition}]" if partition else job)
                run = launcher.run(job, partition) if force else launcher.resume(job, partition)
                steps.append(_step(launcher, run))
            _announce(steps[-1], stage2_specialists)
        if engines.started:
            log.info("engine: started %d time(s), kept for %d run(s) after the first", engines.started, engines.reused)
    return steps


def _announce(step: StepResult, stage2_specialists: bool = False) -> None:
    status = "ok" if step.success else f"FAILED: {step.error}"
    if step.skipped:
        status = "already materialised with this profile, skipped (FORCE=1 redoes it)"
    if step.promoted is not None and not step.skipped:
        kept = "run_stage2's specialists never become champions" if stage2_specialists else "the champion stays"
        status += ", promoted to champion" if step.promoted else f", not promoted ({kept})"
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
    report = {
        # Results of different environment versions are never compared (agents/env_version.py).
        **provenance(profile=profile, machine_update_tok_s=machine_update_tok_s),
        "wall_s": round(elapsed, 1),
        "domains": domains,
        "nightly": next((s.report for s in steps if s.job == "champion_evaluation_job" and s.report), None),
        "steps": [
            {k: v for k, v in asdict(s).items() if k not in ("report", "markdown", "transcripts")} for s in steps
        ],
    }
    path.write_text(strict_json(report, indent=1))
    return path


def write_transcripts(paths: DataPaths, profile: str, steps: list[StepResult]) -> Path:
    """What the agents said, as strict JSON under <data>/reports/ (make-run-transcripts-<time>.json), beside the
    report: per domain, policy -> its representative episodes (`labels` such as best, median, worst, most
    refused; `episode_id`, `scenario_id`, `counterpart`, the policy seat's `reward`, `agreement`, and the
    `markdown` the asset page shows), with the environment version and the code's commit."""
    path = paths.report_file("make-run-transcripts")
    transcripts = {
        **provenance(profile=profile),
        "domains": {s.partition: s.transcripts for s in steps if s.partition and s.transcripts},
    }
    path.write_text(strict_json(transcripts, indent=1))
    return path


def nightly_text(report: dict[str, Any]) -> str:
    """What `make run` prints of `champion_evaluations`' report: each champion's mean reward with its interval."""
    lines = ["Nightly champion evaluation (fresh held-out scenarios):"]
    for label, r in report.items():
        low, high = format_number(r.get("ci_low")), format_number(r.get("ci_high"))
        lines.append(f"  {label}: mean reward {format_number(r.get('mean_reward'))} [{low}, {high}] (n={r.get('n')})")
    return "\n".join(lines)


def champion_text(steps: list[StepResult]) -> str:
    """Where each domain's champion stands after the run: this run's candidate promoted, or the champion kept."""
    lines = ["Champions:"]
    for step in steps:
        if not step.partition:
            continue
        model = (step.report or {}).get("model") or "no candidate"
        if step.skipped:
            where = f"{model} evaluated earlier on this instance (skipped)"
        elif step.promoted:
            where = f"{model} promoted to champion"
        elif step.promoted is False:
            where = f"{model} not promoted: it did not beat the champion, its warm-start or the best rule; the champion stays"
        else:
            where = f"{model}: no promotion decision ({'failed' if not step.success else 'not checked'})"
        lines.append(f"  {step.partition}: {where}")
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
    parser.add_argument(
        "--nightly", action="store_true", help="also run champion_evaluations (the nightly schedule's job)"
    )
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
    steps = run_lineage(profile.name, domains, args.nightly, paths.root, args.force, log_file)
    elapsed = time.perf_counter() - start
    print(f"\n[make run] lineage finished in {elapsed / 60:.1f} min\n")
    for step in steps:
        if step.markdown:
            print(step.markdown + "\n")
        if step.job == "champion_evaluation_job" and step.report:
            print(nightly_text(step.report) + "\n")
    print(champion_text(steps) + "\n")
    speed = machine_speed_or_none(log) if args.machine_speed else None
    if speed is not None:
        print(f"[make run] this machine's PPO update speed: {speed:,.0f} tokens/s")
    print(f"This run's numbers: {write_report(paths, profile.name, steps, elapsed, speed)}")
    print(f"What the agents said (best, median, worst episodes): {write_transcripts(paths, profile.name, steps)}")
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
