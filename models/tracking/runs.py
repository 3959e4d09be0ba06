"""One MLflow run in progress (`TrackedRun`), the tags that say what a run is, and the helpers that turn
parameters and metrics into MLflow's batches."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from mlflow.tracking import MlflowClient

log = logging.getLogger("models.tracking")

DOMAIN_TAG = "socialrl.domain"
DOMAINS_TAG = "socialrl.domains"
"""Model-version tag: the comma-separated domains a multi-domain policy was trained and evaluated on."""
SEAT_TAG = "socialrl.seat"
"""Model-version tag: the seat the version was trained to play in its domain (from its model card)."""
PROFILE_TAG = "socialrl.profile"
STAGE_TAG = "socialrl.stage"
DAGSTER_RUN_TAG = "dagster.run_id"
GIT_COMMIT_TAG = "mlflow.source.git.commit"
"""MLflow's own tag for the source commit (its UI shows it on the run page)."""
PARENT_RUN_TAG = "mlflow.parentRunId"
"""MLflow's own tag for the parent run (its UI nests the run under the parent)."""
DAGSTER_RUN_URL_TAG = "dagster.run_url"
"""The Dagster UI page of the run that launched this one."""
NOTE_TAG = "mlflow.note.content"
"""MLflow's own tag for a run's description (its run page renders it as markdown: links are clickable)."""
SUMMARY_PREFIX = "summary/"
"""Prefix of a run's single-value metrics (held-out results, final losses). MLflow's run page shows one chart
section per prefix in alphabetical order, single values as bar charts: under "summary/" they come after the
per-step curves ("ppo/", "sft/") instead of before them, as "eval/" did."""
HISTORY_PREFIX = "trend/"
"""Prefix of a model version's re-evaluation history on its training run (`trend/<suite>/<metric>`, one point
per evaluation). MLflow's run page names a chart section by everything before a metric's last "/" and sorts
the sections by name (seen in MLflow 3.17's "Model metrics" tab): "trend/nightly" comes after the training
curves and "summary", where a bare "nightly" came first."""
WARM_START_RUN_TAG = "socialrl.warm_start_run_id"
"""The MLflow run of the warm-start a run starts from (a tag, not a parent: the UI lists the run at top level)."""


def flatten_params(params: Mapping[str, Any] | Any, prefix: str = "") -> dict[str, str]:
    """Nested mappings and dataclasses as dotted keys with text values (what MLflow params are)."""
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        params = dataclasses.asdict(params)
    flat: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, prefix=f"{name}."))
        else:
            flat[name] = str(value)
    return flat


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def run_tags(
    *,
    domain: str | None = None,
    profile: str | None = None,
    git_commit: str | None = None,
    dagster_run_id: str | None = None,
    parent_run_id: str | None = None,
    warm_start_run_id: str | None = None,
    stage: str | None = None,
    extra: Mapping[str, Any] | None = None,
    dagster_run_url: str | None = None,
) -> dict[str, str]:
    """The tags that say what a run is, for `Tracker.start_run(..., tags=...)`; callers pass the values
    (none is read from the environment). Empty values are left out.

    | argument | tag |
    | --- | --- |
    | domain | `socialrl.domain` (an environment id, e.g. craigslist-v0) |
    | profile | `socialrl.profile` (smoke, cpu, paper) |
    | git_commit | `mlflow.source.git.commit` (shown by the MLflow UI; see `git_commit()`) |
    | dagster_run_id | `dagster.run_id` (the Dagster run that launched it) |
    | parent_run_id | `mlflow.parentRunId` (the UI nests the run under it and hides it until the parent is unfolded) |
    | warm_start_run_id | `socialrl.warm_start_run_id` (the warm-start a PPO run starts from; the run stays at top level, and its description names the warm-start run) |
    | stage | `socialrl.stage` (sft, ppo, eval, cascade, mopd, ...) |
    | dagster_run_url | `dagster.run_url`, and the run's description (`mlflow.note.content`) links to it |
    """
    tags = {
        DOMAIN_TAG: domain,
        PROFILE_TAG: profile,
        GIT_COMMIT_TAG: git_commit,
        DAGSTER_RUN_TAG: dagster_run_id,
        PARENT_RUN_TAG: parent_run_id,
        WARM_START_RUN_TAG: warm_start_run_id,
        STAGE_TAG: stage,
        DAGSTER_RUN_URL_TAG: dagster_run_url,
        NOTE_TAG: _note(dagster_run_id, dagster_run_url, warm_start_run_id),
        **dict(extra or {}),
    }
    return {k: str(v) for k, v in tags.items() if v is not None and str(v) != ""}


def _note(dagster_run_id: str | None, dagster_run_url: str | None, warm_start_run_id: str | None) -> str | None:
    """The run's description: the Dagster run that launched it, and the warm-start run it starts from."""
    parts = []
    if dagster_run_url:
        parts.append(f"Launched by Dagster run [{(dagster_run_id or 'run')[:8]}]({dagster_run_url})")
    if warm_start_run_id:
        parts.append(f"Starts from the warm-start's MLflow run `{warm_start_run_id}`")
    return ". ".join(parts) or None


def finite_metrics(values: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The finite numbers of `values` (bools and text left out) under `prefix<key>`."""
    out = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(float(value)):
            out[f"{prefix}{key}"] = float(value)
    return out


def log_metric_entries(client: MlflowClient, run_id: str, entries: Sequence[Any]) -> None:
    from mlflow.utils.validation import MAX_METRICS_PER_BATCH

    for chunk in _chunks(list(entries), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=chunk)


def log_run_file(client: MlflowClient, run_id: str, name: str, content: bytes | str, artifact_path: str) -> None:
    """Write `content` as the artifact `artifact_path/name` of the run (also of a run that has ended)."""
    if not name or "/" in name:
        raise ValueError(f"artifact file name must be a plain name, got {name!r}")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        client.log_artifact(run_id, str(path), artifact_path.strip("/") or None)


@contextlib.contextmanager
def ended_run(client: MlflowClient, tracked: TrackedRun) -> Iterator[TrackedRun]:
    """End the run when the block ends: FINISHED, FAILED on an error (kept in tag `socialrl.error`), KILLED on an
    interruption (KeyboardInterrupt, SystemExit, Dagster's termination: a BaseException that is no Exception);
    the exception propagates."""
    try:
        yield tracked
    except BaseException as exc:
        status = "FAILED" if isinstance(exc, Exception) else "KILLED"
        try:
            client.set_tag(tracked.run_id, "socialrl.error", f"{type(exc).__name__}: {exc}"[:5000])
            client.set_terminated(tracked.run_id, status)
        except Exception:  # never hide the body's exception behind a bookkeeping one
            log.exception("could not mark run %s as %s", tracked.run_id, status)
        raise
    else:
        client.set_terminated(tracked.run_id, "FINISHED")


def read_run_record(path: Path) -> str | None:
    """The run id a training step's run record (attempts.py `attempt_run`) names, or None when there is none (or it
    cannot be read: then the step starts a new run)."""
    try:
        run_id = json.loads(path.read_text()).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
    return run_id if isinstance(run_id, str) and run_id else None


def write_run_record(path: Path, run_id: str) -> None:
    """Write the run record atomically (a kill mid-write leaves the previous record, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps({"run_id": run_id}) + "\n")
    os.replace(partial, path)


class TrackedRun:
    """A run in progress (made by `Tracker.start_run` or `attempt_run`): params, per-step metrics,
    artifacts, tags."""

    def __init__(
        self, client: MlflowClient, run_id: str, experiment_id: str, artifact_uri: str, resumed: bool = False
    ) -> None:
        self.client = client
        self.run_id = run_id
        self.experiment_id = experiment_id
        self.artifact_uri = artifact_uri
        """Root artifact URI of the run (artifact paths are relative to it)."""
        self.resumed = resumed
        """True when this attempt continues the run of a killed attempt (its history is already on the run)."""

    def log_params(self, params: Mapping[str, Any] | Any = None, **more: Any) -> None:
        """Log parameters (nested mappings/dataclasses flattened to dotted keys). MLflow params are
        write-once: logging a key again with another value raises."""
        from mlflow.entities import Param
        from mlflow.utils.validation import MAX_PARAMS_TAGS_PER_BATCH

        flat = {**flatten_params(params or {}), **flatten_params(more)}
        for chunk in _chunks(sorted(flat.items()), MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in chunk])

    def log_metrics(self, step: int, metrics: Mapping[str, float] | None = None, **more: float) -> None:
        """Log metric values at a training step (names with "/" or "." go through `metrics`)."""
        from mlflow.entities import Metric

        if int(step) != step or step < 0:
            raise ValueError(f"step must be a non-negative integer, got {step!r}")
        values = {**(metrics or {}), **more}
        now = int(time.time() * 1000)
        entries = [Metric(k, float(v), now, int(step)) for k, v in sorted(values.items())]
        log_metric_entries(self.client, self.run_id, entries)

    def log_history(self, history: Sequence[Mapping[str, Any]], step_key: str = "step", prefix: str = "") -> int:
        """Log per-step records (one mapping per logged step, e.g. transformers' `trainer.state.log_history`):
        every finite number of a record at the record's `step_key`; records without a step are skipped.
        Returns how many values were logged."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        entries = []
        for record in history:
            step = record.get(step_key)
            if isinstance(step, bool) or not isinstance(step, int | float) or int(step) != step or step < 0:
                continue
            values = finite_metrics({k: v for k, v in record.items() if k != step_key}, prefix)
            entries += [Metric(k, v, now, int(step)) for k, v in sorted(values.items())]
        log_metric_entries(self.client, self.run_id, entries)
        return len(entries)

    def log_evaluation(
        self, summary: Mapping[str, Any] | Any, prefix: str = "eval/", step: int = 0
    ) -> dict[str, float]:
        """Log an evaluation's numbers (a mapping or a dataclass such as EvaluationSummary) as metrics
        `<prefix><name>`; NaN, text and bools are left out. Returns what was logged."""
        if dataclasses.is_dataclass(summary) and not isinstance(summary, type):
            summary = dataclasses.asdict(summary)
        values = finite_metrics(summary, prefix)
        if values:
            self.log_metrics(step, values)
        return values

    def log_file(self, name: str, content: bytes | str, artifact_path: str = "") -> str:
        """Store `content` as the artifact `<artifact_path>/<name>` (a plot's PNG bytes, a markdown
        transcript); returns its artifact URI."""
        log_run_file(self.client, self.run_id, name, content, artifact_path)
        prefix = f"{self.artifact_uri.rstrip('/')}/{artifact_path.strip('/')}".rstrip("/")
        return f"{prefix}/{name}"

    def log_artifact_dir(self, local_dir: str | Path, artifact_path: str = "adapter") -> str:
        """Upload a directory (e.g. the LoRA adapter) under `artifact_path`; returns its artifact URI."""
        local = Path(local_dir)
        if not local.is_dir():
            raise NotADirectoryError(f"{local}: not a directory")
        if not any(local.iterdir()):
            raise ValueError(f"{local}: the directory is empty")
        artifact_path = artifact_path.strip("/")
        self.client.log_artifacts(self.run_id, str(local), artifact_path or None)
        return f"{self.artifact_uri.rstrip('/')}/{artifact_path}" if artifact_path else self.artifact_uri
