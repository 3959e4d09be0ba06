"""What a Dagster instance holds: the latest materialisation of an asset (by tags), its materialised partitions,
a run's step times, the newest run of a job that did not finish (`unfinished_run`: what a relaunch resumes
from), and a snapshot of many assets' stored outputs. The command lines read results through
here (pipelines/launcher.py's `Launcher.latest` and `step_seconds`), and so does the `paper_report` asset
(assets/report.py), which reads every stage without depending on it in the graph.

    latest_materialisation(instance, "specialist_eval", "craigslist-v0", {PROFILE_TAG: "cpu"})
    read_snapshot(instance, load, ("specialist_eval", "transfer_matrix"))   # a models.report Snapshot

`load(asset, partition)` reads a stored output through the asset's IO manager: the Launcher passes its
Definitions' `load_asset_value`; an asset, whose run has no repository to ask (an in-process run's step context
carries none), passes `io_manager_loader(context.resources.io_manager, context.instance)`: every asset of this
code location stores through the one `io_manager` resource (Dagster's default, the filesystem under the
instance's storage directory), keyed by asset and partition.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from models.report import Snapshot, StageRead

PROFILE_TAG = "socialrl/profile"
"""The run tag that names the profile a run was launched with (marked when stage 1 is sized for stage 2)."""
LAUNCHED_BY_TAG = "socialrl/launched_by"
"""The run tag that names the command that launched a run."""
PROCESS_TAG = "socialrl/process"
"""The run tag "<host>:<pid>" of the process that executes a run in-process (the command line's), so that a later
launch can tell a run whose process was killed from one still going."""
RESUMES_TAG = "socialrl/resumes"
"""The run tag of a relaunch that resumes an unfinished run: the id of the first run of that chain, which the
training assets key their work directories by (assets/common.py `work_key`), so checkpoints carry over."""
STALE_AFTER_S = 1800.0
"""A started run whose process cannot be checked (no `PROCESS_TAG`: launched before it existed; or another
host's) counts as dead after this long without an event; a live step logs a "still working" line a minute."""

Loader = Callable[[str, str | None], Any]
"""(asset, partition) -> the asset's stored output."""


@dataclass(frozen=True)
class Materialisation:
    """One materialisation of an asset on the instance, with its metadata as plain values."""

    asset: str
    partition: str | None
    run_id: str
    timestamp: float
    """Seconds since the epoch."""
    metadata: dict[str, Any]
    """The materialisation's metadata (each entry's value: a dict for JSON, the text for markdown, ...)."""
    tags: dict[str, str] = field(default_factory=dict)
    """The tags of the run that materialised it (`PROFILE_TAG`, `LAUNCHED_BY_TAG`, Dagster's own)."""

    @property
    def day(self) -> str:
        """The UTC date of the materialisation (YYYY-MM-DD)."""
        return time.strftime("%Y-%m-%d", time.gmtime(self.timestamp))


def latest_materialisation(
    instance: Any, asset: str, partition: str | None = None, tags: Mapping[str, str] | None = None, limit: int = 20
) -> Materialisation | None:
    """The newest materialisation of `asset` (`partition`) by a run carrying every one of `tags` (none: any
    run), among the asset's `limit` newest; None when there is none."""
    from dagster import AssetKey, AssetRecordsFilter

    wanted = dict(tags or {})
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[partition] if partition else None),
        limit=limit,
    ).records
    for record in records:  # newest first
        run = instance.get_run_by_id(record.run_id)
        run_tags = dict(run.tags) if run is not None else {}
        if all(run_tags.get(k) == v for k, v in wanted.items()) and (run is not None or not wanted):
            materialization = record.asset_materialization
            metadata = {k: v.value for k, v in (materialization.metadata if materialization else {}).items()}
            return Materialisation(asset, partition, record.run_id, record.timestamp, metadata, run_tags)
    return None


def materialised_partitions(instance: Any, asset: str) -> list[str]:
    """The partitions of `asset` the instance holds a materialisation of, sorted (empty: unpartitioned or none)."""
    from dagster import AssetKey

    return sorted(instance.get_materialized_partitions(AssetKey(asset)))


def step_seconds(instance: Any, run_id: str) -> dict[str, float]:
    """Wall seconds of each finished step of a run, from Dagster's own step stats (the run's timeline)."""
    stats = instance.get_run_step_stats(run_id) if run_id else []
    return {
        s.step_key: round(s.end_time - s.start_time, 1)
        for s in stats
        if s.start_time is not None and s.end_time is not None
    }


def io_manager_loader(io_manager: Any, instance: Any) -> Loader:
    """(asset, partition) -> the stored output, read by `io_manager` as it would load the asset as an input
    (a partition key is all the filesystem IO manager needs of the asset's partitions)."""
    from dagster import AssetKey, StaticPartitionsDefinition, build_input_context, build_output_context

    def load(asset: str, partition: str | None) -> Any:
        context = build_input_context(
            asset_key=AssetKey(asset),
            instance=instance,
            partition_key=partition,
            asset_partitions_def=StaticPartitionsDefinition([partition]) if partition else None,
            upstream_output=build_output_context(asset_key=AssetKey(asset)),
        )
        return io_manager.load_input(context)

    return load


def _read(instance: Any, load: Loader, asset: str, partition: str | None) -> StageRead | None:
    found = latest_materialisation(instance, asset, partition)
    if found is None:
        return None
    try:
        value, error = load(asset, partition), ""
    except Exception as exc:  # a class renamed since, a file removed: the report says so instead of failing
        value, error = None, f"the stored output could not be read: {type(exc).__name__}: {exc}"[:500]
    return StageRead(
        asset=asset,
        partition=partition,
        run_id=found.run_id,
        timestamp=found.timestamp,
        profile=found.tags.get(PROFILE_TAG, ""),
        metadata=found.metadata,
        value=value,
        error=error,
    )


def read_snapshot(instance: Any, load: Loader, assets: Iterable[str]) -> Snapshot:
    """The latest materialisation of each of `assets` (of each materialised partition), whichever run made it
    (the IO manager keeps one stored output per asset and partition: the newest), with its stored output read
    through `load`. An asset the instance never materialised is simply absent."""
    reads = []
    for asset in dict.fromkeys(assets):
        for partition in materialised_partitions(instance, asset) or [None]:
            read = _read(instance, load, asset, partition)
            if read is not None:
                reads.append(read)
    return Snapshot(tuple(reads))


def chain_of(run: Any) -> str:
    """The first run of the chain a Dagster run belongs to: the run a command's relaunch resumes (`RESUMES_TAG`),
    else Dagster's root run of a re-execution, else the run itself."""
    return run.tags.get(RESUMES_TAG) or run.root_run_id or run.run_id


def process_tag() -> str:
    """This process's `PROCESS_TAG` value."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _process_gone(tag: str | None) -> bool | None:
    """Whether the process a `PROCESS_TAG` names is gone: None when it cannot be told (no tag, another host)."""
    host, _, pid = (tag or "").rpartition(":")
    if not host or host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # someone else's live process
        return False
    return False


@dataclass(frozen=True)
class UnfinishedRun:
    """The newest run of a job that did not finish, and what it materialised before it stopped."""

    run_id: str
    status: str
    """Its Dagster status when found ("FAILURE", "CANCELED", or "STARTED" for a killed command's run, which this
    lookup then reports failed so the UI stops showing it as running)."""
    materialised: tuple[str, ...]
    """The assets it materialised (each step's output is whole: a later run can load it)."""
    chain: str
    """The first run of the chain it belongs to (`chain_of`): what a relaunch resumes."""


def unfinished_run(
    instance: Any,
    job: str,
    partition: str | None = None,
    tags: Mapping[str, str] | None = None,
    now: float | None = None,
) -> UnfinishedRun | None:
    """The newest run of `job` (`partition`) carrying every one of `tags`, when it did not finish: it failed, was
    canceled, or was started by a process that is gone (a killed command: its `PROCESS_TAG` names a process of
    this host that no longer exists; without the tag or on another host, no event for `STALE_AFTER_S`). None
    when the newest such run succeeded or may still be running, or there is none. A dead started run is
    reported failed here."""
    from dagster import DagsterEventType, DagsterRunStatus, RunsFilter

    wanted = {**(tags or {}), **({"dagster/partition": partition} if partition else {})}
    runs = instance.get_runs(filters=RunsFilter(job_name=job, tags=wanted), limit=1)
    if not runs:
        return None
    run = runs[0]
    status = run.status
    if status in (DagsterRunStatus.STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.NOT_STARTED):
        gone = _process_gone(run.tags.get(PROCESS_TAG))
        if gone is None:  # no tag (an older run) or another host's process: judge by its newest event
            last = instance.get_records_for_run(run.run_id, limit=1, ascending=False).records
            newest = last[0].event_log_entry.timestamp if last else 0.0
            gone = (now if now is not None else time.time()) - newest > STALE_AFTER_S
        if not gone:
            return None
        instance.report_run_failed(run, "its process is gone (killed): reported failed by the next launch")
    elif status not in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED):
        return None
    records = instance.get_records_for_run(run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records
    assets = dict.fromkeys(r.event_log_entry.dagster_event.asset_key.to_user_string() for r in records)
    return UnfinishedRun(run.run_id, status.value, tuple(assets), chain_of(run))
