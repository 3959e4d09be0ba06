"""One MLflow run per training step, across the attempts of the step: a killed step that resumes from its
checkpoint continues its run, so the run's step history is one curve (models/tracking/__init__.py's table)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.tracking.runs import NOTE_TAG, TrackedRun, ended_run, read_run_record, write_run_record

if TYPE_CHECKING:  # pragma: no cover
    from mlflow.entities import Run

    from models.tracking.registry import Tracker

log = logging.getLogger("models.tracking")

RESUMED_AT_TAG = "socialrl.resumed_at"
"""Run tag: the step of the checkpoint the last attempt resumed the run from."""
SUPERSEDED_BY_TAG = "socialrl.superseded_by"
"""Run tag of a killed attempt's run ended KILLED: the run of the attempt that started over."""


@contextlib.contextmanager
def attempt_run(
    tracker: Tracker,
    record: Path,
    name: str,
    params: Mapping[str, Any] | Any = None,
    tags: Mapping[str, Any] | None = None,
    resume_at: int | None = None,
) -> Iterator[TrackedRun]:
    """The run of one attempt at a training step whose attempts share a work directory: `record` (a file in it)
    names the run of the last attempt. `resume_at` (the step of the checkpoint the attempt resumes from; None
    when it starts over) continues that run, so its metric history goes on from the checkpoint in one run
    (`TrackedRun.resumed`; params are not logged again, tags are updated, the description says where it
    resumed). Otherwise a new run starts and is recorded, and the last attempt's run, if a kill left it RUNNING,
    is ended KILLED. A recorded run the tracker does not have (deleted, another store) is not continued. The
    run ends as `Tracker.start_run`'s does."""
    previous = recorded_run(tracker, record)
    if resume_at is not None and previous is not None:
        with _continued(tracker, previous, resume_at, tags) as run:
            yield run
        return
    with tracker.start_run(name, params, tags) as run:
        write_run_record(record, run.run_id)
        if previous is not None and previous.info.status == "RUNNING":
            tracker.client.set_tag(previous.info.run_id, SUPERSEDED_BY_TAG, run.run_id)
            tracker.client.set_terminated(previous.info.run_id, "KILLED")
            log.info("MLflow run %s of a killed attempt ended KILLED (new run %s)", previous.info.run_id, run.run_id)
        yield run


def recorded_run(tracker: Tracker, record: Path) -> Run | None:
    """The run `record` names, if the tracker has it in its experiment and it is not deleted."""
    from mlflow.exceptions import MlflowException

    run_id = read_run_record(record)
    if run_id is None:
        return None
    try:
        run = tracker.client.get_run(run_id)
    except MlflowException:
        return None
    if run.info.experiment_id != tracker.experiment_id or run.info.lifecycle_stage != "active":
        return None
    return run


@contextlib.contextmanager
def _continued(tracker: Tracker, run: Run, resume_at: int, tags: Mapping[str, Any] | None) -> Iterator[TrackedRun]:
    """Reopen `run` (RUNNING again) for an attempt that resumes at step `resume_at`."""
    client, run_id = tracker.client, run.info.run_id
    client.update_run(run_id, status="RUNNING")
    launched = dict(tags or {}).get(NOTE_TAG, "")
    line = f"Resumed from the checkpoint at step {resume_at}" + (f": {launched}" if launched else "")
    for key, value in (tags or {}).items():
        if key != NOTE_TAG:  # the description keeps who launched the run first, and gains this line
            client.set_tag(run_id, key, str(value))
    client.set_tag(run_id, NOTE_TAG, f"{run.data.tags.get(NOTE_TAG, '')}\n\n{line}".strip())
    client.set_tag(run_id, RESUMED_AT_TAG, str(resume_at))
    log.info("MLflow run %s continues from step %d", run_id, resume_at)
    tracked = TrackedRun(client, run_id, tracker.experiment_id, run.info.artifact_uri, resumed=True)
    with ended_run(client, tracked):
        yield tracked
