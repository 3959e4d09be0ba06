"""One launcher for the command lines: run a job of the code location (the one the UI shows) in this process on
the Dagster instance `make ui` opens, find what that instance already materialised, and read results back
through it.

    launcher = Launcher("cpu", DataPaths.from_env(), launched_by="run_tom", log_file=paths.log_file("tom"))
    run = launcher.run("tom_job", "craigslist-v0", assets=("tom_analysis",))   # a LaunchedRun
    done = launcher.latest("specialist_eval", "craigslist-v0")               # a Materialisation or None
    result = launcher.load("tom_analysis", "craigslist-v0")                    # the asset's stored output

Every run carries two tags: `socialrl/profile` (the profile, marked when stage 1 is sized for stage 2, so that
`make run` never takes such runs for its own) and `socialrl/launched_by` (the command). Dagster's event stream
stays off the console (the `socialrl` loggers print one line per step); with a log file every event goes there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.settings import DataPaths
from resources.instance import (
    LAUNCHED_BY_TAG,
    PROCESS_TAG,
    PROFILE_TAG,
    RESUMES_TAG,
    Materialisation,
    UnfinishedRun,
    latest_materialisation,
    process_tag,
    step_seconds,
    unfinished_run,
)

__all__ = [
    "LAUNCHED_BY_TAG",
    "PROFILE_TAG",
    "QUIET_CONSOLE",
    "LaunchedRun",
    "Launcher",
    "Materialisation",
    "UnfinishedRun",
    "profile_tag",
]

log = logging.getLogger("socialrl.launcher")

# The `loggers` run config that keeps Dagster's event stream off the console of every run our commands launch:
# the console is for people (the socialrl loggers print one line per step, and each command prints a failed
# run's messages in one line); the events, stack traces included, are in the Dagster UI and in the log file.
# ERROR let a failed blocking check's stack trace through: a candidate that did not beat the champion, an
# outcome the command reports as "not promoted".
QUIET_CONSOLE: dict[str, Any] = {"console": {"config": {"log_level": "CRITICAL"}}}


def profile_tag(profile: str, stage2_specialists: bool = False) -> str:
    """The `PROFILE_TAG` value of a run: the profile, marked when stage 1 is sized for stage 2."""
    return f"{profile}+stage2-specialists" if stage2_specialists else profile


def config_for(config: Mapping[str, Any] | None, assets: Sequence[str]) -> dict[str, Any]:
    """A run config cut to the ops of `assets`: Dagster refuses config for an op the run leaves out ("unexpected
    config entry"), so a resumed run drops the config of the steps already done."""
    ops = {op: c for op, c in (config or {}).get("ops", {}).items() if op in assets}
    rest = {k: v for k, v in (config or {}).items() if k != "ops"}
    return {**rest, "ops": ops} if ops else rest


@dataclass(frozen=True, kw_only=True)
class LaunchedRun:
    """One Dagster run of a defined job, as the launcher saw it end."""

    job: str
    partition: str | None
    success: bool
    seconds: float
    run_id: str
    """The Dagster run id ("" when the run could not be created)."""
    error: str = ""
    """Every failure event's message, joined (the definition error when the run could not be created)."""
    checks: dict[str, bool] = field(default_factory=dict)
    """Asset check -> passed, for the checks the run evaluated."""
    failed_steps: tuple[str, ...] = ()
    """The step keys that failed."""

    @property
    def name(self) -> str:
        """The job with its partition, e.g. "stage1_job[craigslist-v0]"."""
        return f"{self.job}[{self.partition}]" if self.partition else self.job


class Launcher:
    """The code location's Definitions for one profile and data directory, and the instance they run on."""

    def __init__(
        self,
        profile: str,
        paths: DataPaths,
        launched_by: str,
        stage2_specialists: bool = False,
        log_file: Path | None = None,
    ) -> None:
        """`stage2_specialists`: stage 1 sized as run_stage2 trains its specialists (tagged apart); `log_file`:
        where Dagster's events of every run go (none: the UI only)."""
        from dagster import DagsterInstance

        from pipelines.definitions import build_definitions

        self.paths = paths
        self.launched_by = launched_by
        self.log_file = log_file
        self.tag = profile_tag(profile, stage2_specialists)
        self.definitions = build_definitions(profile, str(paths.root), stage2_specialists)
        self.instance = DagsterInstance.from_config(str(paths.dagster_home))  # the same instance `make ui` opens

    def run(
        self,
        job: str,
        partition: str | None = None,
        assets: Sequence[str] | None = None,
        config: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> LaunchedRun:
        """Execute the defined `job` (only `assets` of it, with their checks, when given) for `partition`, with
        `config` merged into the run config and `tags` added to the launcher's. Never raises for a failing run:
        the LaunchedRun says what failed."""
        from dagster import AssetKey

        loggers: dict[str, Any] = dict(QUIET_CONSOLE)
        if self.log_file is not None:
            loggers["file"] = {"config": {"path": str(self.log_file), "log_level": "DEBUG"}}
        start = time.perf_counter()
        try:
            result = self.definitions.resolve_job_def(job).execute_in_process(
                run_config={**(config or {}), "loggers": loggers},
                instance=self.instance,
                partition_key=partition,
                asset_selection=[AssetKey(a) for a in assets] if assets else None,
                raise_on_error=False,
                tags={
                    LAUNCHED_BY_TAG: self.launched_by,
                    PROFILE_TAG: self.tag,
                    PROCESS_TAG: process_tag(),
                    **(tags or {}),
                },
            )
        except Exception as exc:  # a definition error: the caller reports it and decides what runs next
            return LaunchedRun(
                job=job,
                partition=partition,
                success=False,
                seconds=time.perf_counter() - start,
                run_id="",
                error=f"{type(exc).__name__}: {exc}",
            )
        return LaunchedRun(
            job=job,
            partition=partition,
            success=result.success,
            seconds=time.perf_counter() - start,
            run_id=result.run_id,
            error="; ".join(e.message or "" for e in result.all_events if e.is_failure),
            checks={e.check_name: e.passed for e in result.get_asset_check_evaluations()},
            failed_steps=tuple(e.step_key or "" for e in result.all_events if e.is_step_failure),
        )

    def job_assets(self, job: str) -> tuple[str, ...]:
        """The assets the defined `job` materialises, sorted."""
        keys = self.definitions.resolve_job_def(job).asset_layer.selected_asset_keys
        return tuple(sorted(k.to_user_string() for k in keys))

    def unfinished(
        self, job: str, partition: str | None = None, tags: Mapping[str, str] | None = None
    ) -> UnfinishedRun | None:
        """The newest run of `job` (`partition`) with this launcher's profile tag and `tags` when it did not finish
        (failed, or its process was killed), with what it materialised (resources/instance.py)."""
        return unfinished_run(self.instance, job, partition, {PROFILE_TAG: self.tag, **(tags or {})})

    def resume(
        self,
        job: str,
        partition: str | None = None,
        config: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        assets: Sequence[str] | None = None,
    ) -> LaunchedRun:
        """Run `job` (only `assets` of it, when given), leaving out what its newest unfinished run (same profile,
        `tags`) already materialised: a command killed mid-job (a session's end, the OOM killer) goes on from
        its last whole step instead of redoing hours. Runs them all when there is nothing to resume."""
        unfinished = self.unfinished(job, partition, tags)
        done = set(unfinished.materialised) if unfinished else set()
        remaining = [a for a in (assets or self.job_assets(job)) if a not in done]
        if unfinished is not None:  # the training steps find their checkpoints under the chain's first run
            tags = {**(tags or {}), RESUMES_TAG: unfinished.chain}
        if not (done and remaining):
            return self.run(job, partition, assets=assets, config=config, tags=tags)
        log.info(
            "%s: resuming run %s (%s): %s already materialised there, not redone",
            f"{job}[{partition}]" if partition else job,
            unfinished.run_id[:8],
            unfinished.status.lower(),
            ", ".join(sorted(done)),
        )
        return self.run(job, partition, assets=remaining, config=config_for(config, remaining), tags=tags)

    def latest(self, asset: str, partition: str | None = None, tags: Mapping[str, str] | None = None):
        """The newest materialisation of `asset` (`partition`) by a run with this launcher's profile tag and
        `tags`, among the asset's 20 newest; None when there is none (resources/instance.py)."""
        return latest_materialisation(self.instance, asset, partition, {PROFILE_TAG: self.tag, **(tags or {})})

    def load(self, asset: str, partition: str | None = None) -> Any:
        """The asset's stored output (its latest materialisation), read through its IO manager on this instance."""
        from dagster import AssetKey

        return self.definitions.load_asset_value(AssetKey(asset), instance=self.instance, partition_key=partition)

    def step_seconds(self, run_id: str) -> dict[str, float]:
        """Wall seconds of each finished step of a run, from Dagster's own step stats (the run's timeline)."""
        return step_seconds(self.instance, run_id)
