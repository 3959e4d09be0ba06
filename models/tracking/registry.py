"""`Tracker`: MLflow tracking and the model registry over one `MlflowClient` (the package docstring has the
task table): runs, registered versions and aliases, evaluation values and history, the one promotion rule."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.tracking.cards import ModelCard, write_model_card
from models.tracking.champion import (
    EVAL_TAG_PREFIX,
    ChampionComparison,
    EvaluatedVersion,
    Measurement,
    compare_versions,
    evaluation_tags,
    read_evaluated,
)
from models.tracking.config import (
    _DB_SCHEMES,
    TrackingConfig,
    _file_uri_to_path,
    _import_mlflow,
    _scheme,
    _sqlite_path,
)
from models.tracking.runs import (
    DAGSTER_RUN_URL_TAG,
    DOMAIN_TAG,
    GIT_COMMIT_TAG,
    HISTORY_PREFIX,
    NOTE_TAG,
    PROFILE_TAG,
    SEAT_TAG,
    TrackedRun,
    ended_run,
    finite_metrics,
    log_metric_entries,
    log_run_file,
)

if TYPE_CHECKING:  # pragma: no cover
    from mlflow.entities.model_registry import ModelVersion
    from mlflow.tracking import MlflowClient

log = logging.getLogger("models.tracking")

CANDIDATE = "candidate"
"""Alias moved to every newly registered version."""
CHAMPION = "champion"
"""Alias of the best evaluated version (see `Tracker.promote_if_better`)."""
ARTIFACT_PATH_TAG = "socialrl.artifact_path"
"""Model-version tag: the run-relative artifact path the version was registered from."""
EVALUATED_TAG_PREFIX = "evaluated."
"""Model-version tags of an evaluation suite's bookkeeping: `evaluated.<suite>.at` (ISO time of the latest),
`evaluated.<suite>.source` (e.g. the nightly run id), `evaluated.<suite>.count` (evaluations so far)."""

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
"""MLflow's experiment tag that picks what its UI opens an experiment on; "custom_model_development" is the
runs table (training), where an untagged experiment opened on an empty GenAI "Traces" overview."""
TRAINING_KIND = "custom_model_development"

_SUITE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


class RegistryError(LookupError):
    """A registered model, version or alias does not exist, or an artifact is missing."""


@dataclass(frozen=True)
class RegisteredVersion:
    """One model version of the registry."""

    name: str
    """Registered model name, e.g. "socialrl-craigslist-specialist"."""
    version: int
    """Version number (1, 2, ...)."""
    run_id: str | None
    """The training run that produced it."""
    source: str
    """Where its artifacts live (the run's artifact URI of the adapter directory)."""
    tags: dict[str, str]
    """Model-version tags (evaluation values under `eval.<metric>`)."""
    aliases: tuple[str, ...] = ()
    """Aliases pointing at this version ("candidate", "champion", ...)."""

    def evaluation(self, suite: str | None = None) -> dict[str, float]:
        """The stored evaluation values by metric name: the promotion values (`eval.<metric>` tags, what
        `promote_if_better` compares) by default, or the latest of a suite (`eval.<suite>.<metric>`, written
        by `Tracker.record_evaluation_history`)."""
        prefix = EVAL_TAG_PREFIX if suite is None else f"{EVAL_TAG_PREFIX}{suite}."
        out = {}
        for key, value in self.tags.items():
            if key.startswith(prefix) and "." not in key[len(prefix) :]:
                with contextlib.suppress(ValueError):
                    out[key[len(prefix) :]] = float(value)
        return out

    def evaluated_at(self, suite: str) -> datetime | None:
        """When the suite last evaluated this version (tag `evaluated.<suite>.at`), if ever."""
        value = self.tags.get(f"{EVALUATED_TAG_PREFIX}{suite}.at")
        return datetime.fromisoformat(value) if value else None


@dataclass(frozen=True)
class LocalModel(RegisteredVersion):
    """A model version whose artifact directory is on the local disk (usable by the engine)."""

    path: Path = field(kw_only=True)
    """Local directory holding the adapter (adapter_config.json, weights)."""

    @property
    def adapter_name(self) -> str:
        """A stable served-model name for the engine: `<name>-v<version>`."""
        return f"{self.name}-v{self.version}"


class Tracker:
    """MLflow tracking and registry over one `MlflowClient` (see the module docstring)."""

    def __init__(self, config: TrackingConfig) -> None:
        self.config = config
        mlflow = _import_mlflow()
        if _scheme(self.config.tracking_uri) == "sqlite":
            path = _sqlite_path(self.config.tracking_uri)
            if path is not None:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
        local_root = self.config.local_artifact_dir
        if local_root is not None:
            local_root.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            # MLflow's sqlalchemy store trips SQLAlchemy deprecation warnings when it first opens the database.
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"(mlflow|sqlalchemy)\.")
            self.client: MlflowClient = mlflow.tracking.MlflowClient(
                tracking_uri=self.config.tracking_uri, registry_uri=self.config.tracking_uri
            )
            self.experiment_id = self._ensure_experiment()

    # ------------------------------------------------------------------------------------ tracking
    def _ensure_experiment(self) -> str:
        from mlflow.exceptions import MlflowException

        name = self.config.experiment
        experiment = self.client.get_experiment_by_name(name)
        if experiment is None:
            try:
                return self.client.create_experiment(
                    name, artifact_location=self.config.artifact_root, tags={EXPERIMENT_KIND_TAG: TRAINING_KIND}
                )
            except MlflowException as exc:  # created concurrently by another process
                experiment = self.client.get_experiment_by_name(name)
                if experiment is None:
                    raise RuntimeError(f"cannot create MLflow experiment {name!r}: {exc}") from exc
        if experiment.lifecycle_stage == "deleted":
            self.client.restore_experiment(experiment.experiment_id)
        if EXPERIMENT_KIND_TAG not in (experiment.tags or {}):
            self.client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, TRAINING_KIND)
        if experiment.artifact_location.rstrip("/") != self.config.artifact_root.rstrip("/"):
            log.warning(
                "experiment %r keeps its artifact location %s (configured artifact_root: %s)",
                name,
                experiment.artifact_location,
                self.config.artifact_root,
            )
        return experiment.experiment_id

    @contextlib.contextmanager
    def start_run(
        self, name: str, params: Mapping[str, Any] | Any = None, tags: Mapping[str, Any] | None = None
    ) -> Iterator[TrackedRun]:
        """One run (one training job). It ends FINISHED when the body returns, FAILED when it raises an error
        (kept in tag `socialrl.error`), KILLED when it is interrupted (KeyboardInterrupt, SystemExit, Dagster's
        termination: a BaseException that is no Exception); the exception propagates."""
        run = self.client.create_run(
            self.experiment_id, run_name=name, tags={k: str(v) for k, v in (tags or {}).items()}
        )
        tracked = TrackedRun(self.client, run.info.run_id, self.experiment_id, run.info.artifact_uri)
        with ended_run(self.client, tracked):
            if params:
                tracked.log_params(params)
            yield tracked

    def link_dagster_run(self, run_id: str, dagster_run_id: str, url: str, what: str = "") -> None:
        """Point an MLflow run back at a Dagster run (`UiLinks.dagster_run`): the first one, the run that
        launched it, becomes tag `dagster.run_url` and the run's description "Launched by Dagster run ...";
        a later one (e.g. the evaluation of a training run) adds a line "<what>: Dagster run ..." to the
        description. Descriptions are markdown on the run page, so the links are clickable."""
        run = self.client.get_run(run_id)
        tags = run.data.tags
        link = f"Dagster run [{dagster_run_id[:8]}]({url})"
        note = tags.get(NOTE_TAG, "")
        if link in note:
            return
        if DAGSTER_RUN_URL_TAG not in tags:
            self.client.set_tag(run_id, DAGSTER_RUN_URL_TAG, url)
            line = f"Launched by {link}" + (f" ({what})" if what else "")
        else:
            line = f"{what or 'Used by'}: {link}"
        self.client.set_tag(run_id, NOTE_TAG, f"{note}\n\n{line}".strip())

    def run_status(self, run_id: str) -> str:
        return self.client.get_run(run_id).info.status

    def latest_run_artifact(
        self, run_name: str, artifact_path: str, params: Mapping[str, str] | None = None
    ) -> Path | None:
        """A local directory of `artifact_path` of the newest FINISHED run of this experiment named `run_name`
        whose params have the given values (e.g. the `sft-<domain>` warm-start of a profile); None if none."""
        clauses = [f"attributes.run_name = '{run_name}'", "attributes.status = 'FINISHED'"]
        clauses += [f"params.`{k}` = '{v}'" for k, v in (params or {}).items()]
        runs = self.client.search_runs(
            [self.experiment_id], " AND ".join(clauses), order_by=["attributes.start_time DESC"], max_results=1
        )
        if not runs:
            return None
        run = runs[0]
        uri = f"{run.info.artifact_uri.rstrip('/')}/{artifact_path.strip('/')}"
        if _scheme(uri) == "file":
            path = Path(_file_uri_to_path(uri))
            return path if path.is_dir() else None
        target = Path(self.config.download_dir or tempfile.gettempdir()) / "runs" / run.info.run_id
        target.mkdir(parents=True, exist_ok=True)
        return Path(self.client.download_artifacts(run.info.run_id, artifact_path.strip("/"), str(target)))

    # ------------------------------------------------------------------------------------ registry
    def _version(self, name: str, version: int | str) -> ModelVersion:
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_model_version(name, str(version))
        except MlflowException as exc:
            raise RegistryError(f"model {name!r} has no version {version}: {exc.message}") from exc

    def _alias_version(self, name: str, alias: str) -> ModelVersion | None:
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_model_version_by_alias(name, alias)
        except MlflowException:
            return None

    def _info(self, mv: ModelVersion) -> RegisteredVersion:
        return RegisteredVersion(
            name=mv.name,
            version=int(mv.version),
            run_id=mv.run_id or None,
            source=mv.source,
            tags=dict(mv.tags or {}),
            aliases=tuple(sorted(mv.aliases or ())),
        )

    def get_version(self, name: str, version: int | str) -> RegisteredVersion:
        return self._info(self._version(name, version))

    def register_adapter(
        self,
        run_id: str,
        artifact_path: str,
        name: str,
        tags: Mapping[str, Any] | None = None,
        description: str | None = None,
        wait_s: float = 60.0,
    ) -> int:
        """Register the run's artifact directory `artifact_path` as a new version of model `name` (created
        if missing) and move alias `candidate` to it. Returns the version number."""
        from mlflow.exceptions import MlflowException

        artifact_path = artifact_path.strip("/")
        run = self.client.get_run(run_id)
        if not self.client.list_artifacts(run_id, artifact_path or None):
            raise RegistryError(f"run {run_id} has no artifacts under {artifact_path!r}; log the adapter first")
        try:
            self.client.create_registered_model(name)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        if _scheme(self.config.tracking_uri).split("+", 1)[0] in _DB_SCHEMES:
            # The concrete artifact URI: resolvable without any global MLflow state (see the module docstring).
            base = run.info.artifact_uri.rstrip("/")
        else:
            # A tracking server accepts only sources it can resolve itself (it refuses local paths).
            base = f"runs:/{run_id}"
        source = f"{base}/{artifact_path}" if artifact_path else base
        version_tags = {ARTIFACT_PATH_TAG: artifact_path, **{k: str(v) for k, v in (tags or {}).items()}}
        mv = self.client.create_model_version(
            name, source=source, run_id=run_id, tags=version_tags, description=description
        )
        deadline = time.monotonic() + wait_s
        while mv.status == "PENDING_REGISTRATION" and time.monotonic() < deadline:  # remote registries
            time.sleep(0.5)
            mv = self._version(name, mv.version)
        if mv.status != "READY":
            raise RegistryError(f"{name} version {mv.version} is {mv.status}: {mv.status_message}")
        self.client.set_registered_model_alias(name, CANDIDATE, str(mv.version))
        return int(mv.version)

    def record_evaluation(
        self, name: str, version: int | str, metrics: Mapping[str, float], measured: Measurement | None = None
    ) -> None:
        """Store evaluation values on a version as tags `eval.<metric>` (full float precision); with `measured`,
        the plan they were measured on and the per-episode rewards (models/tracking/champion.py)."""
        for metric, value in metrics.items():
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"evaluation value {metric}={value} is not finite")
            self.client.set_model_version_tag(name, str(version), f"{EVAL_TAG_PREFIX}{metric}", repr(value))
        if measured is not None:
            run_id = self._version(name, version).run_id
            for key, value in evaluation_tags(self.client, run_id, measured).items():
                self.client.set_model_version_tag(name, str(version), key, value)

    def document_version(self, name: str, version: int | str, card: ModelCard) -> RegisteredVersion:
        """Make a version explain itself: its description (`card.description()`), tags (base model, domain,
        seat, profile, parent, git commit) and, beside the adapter in the version's artifacts, a README.md model card
        and an adapter_config.json naming the base model by name (see `write_model_card`). Returns the
        updated version."""
        mv = self._version(name, version)
        card = dataclasses.replace(card, version=int(mv.version), run_id=card.run_id or (mv.run_id or ""))
        self.client.update_model_version(name, str(mv.version), description=card.description())
        tags = {
            "socialrl.base_model": card.base_model,
            DOMAIN_TAG: card.domain,
            SEAT_TAG: card.seat,
            PROFILE_TAG: card.profile,
            "socialrl.parent": card.parent,
            GIT_COMMIT_TAG: card.git_commit,
        }
        for key, value in tags.items():
            if value:
                self.client.set_model_version_tag(name, str(mv.version), key, value)
        artifact_path = (mv.tags or {}).get(ARTIFACT_PATH_TAG)
        if mv.run_id and artifact_path is not None:
            with tempfile.TemporaryDirectory() as directory:
                local = Path(directory)
                with contextlib.suppress(Exception):  # an adapter without a config still gets its card
                    self.client.download_artifacts(
                        mv.run_id, f"{artifact_path}/adapter_config.json".lstrip("/"), directory
                    )
                write_model_card(local, card)
                for path in (local / "adapter_config.json", local / "README.md"):
                    if path.is_file():
                        self.client.log_artifact(mv.run_id, str(path), artifact_path or None)
        else:
            log.warning("%s v%s: no run artifacts to put the model card beside; description only", name, mv.version)
        return self.get_version(name, mv.version)

    def log_run_metrics(
        self, run_id: str, metrics: Mapping[str, Any] | Any, step: int = 0, prefix: str = ""
    ) -> dict[str, float]:
        """Log numbers on a run that may already have ended (e.g. the held-out evaluation of a training run):
        every finite number of `metrics` (a mapping or a dataclass) as `<prefix><name>` at `step`."""
        from mlflow.entities import Metric

        if dataclasses.is_dataclass(metrics) and not isinstance(metrics, type):
            metrics = dataclasses.asdict(metrics)
        values = finite_metrics(metrics, prefix)
        now = int(time.time() * 1000)
        log_metric_entries(self.client, run_id, [Metric(k, v, now, int(step)) for k, v in sorted(values.items())])
        return values

    def record_evaluation_history(
        self,
        name: str,
        version: int | str,
        metrics: Mapping[str, Any] | Any,
        suite: str = "nightly",
        when: datetime | None = None,
        source: str = "",
    ) -> dict[str, float]:
        """Record one evaluation of a version by an evaluation suite, keeping every earlier one.

        * latest values: version tags `eval.<suite>.<metric>` (read back with `RegisteredVersion.evaluation(suite)`),
          plus `evaluated.<suite>.at` (ISO time), `evaluated.<suite>.source` and `evaluated.<suite>.count`;
        * history: metric `trend/<suite>/<metric>` (`HISTORY_PREFIX`) of the version's training run, one point
          per evaluation (step = its number 0, 1, 2, ...; timestamp = `when`), which the MLflow UI plots over time;
        * NaN values (e.g. a Pareto rate without agreements) are left out and named in `evaluated.<suite>.undefined`.

        The promotion values (`eval.<metric>`, what `promote_if_better` compares) are left alone: a suite
        with other scenarios (the nightly one draws fresh scenarios each day) is not paired with them.
        Returns the values recorded."""
        from mlflow.entities import Metric

        if not _SUITE.match(suite):
            raise ValueError(f"suite {suite!r} must be lower-case letters, digits, '-' or '_'")
        mv = self._version(name, version)
        if not mv.run_id:
            raise RegistryError(f"{name} v{mv.version} has no training run to keep the evaluation history on")
        if dataclasses.is_dataclass(metrics) and not isinstance(metrics, type):
            metrics = dataclasses.asdict(metrics)
        values = finite_metrics(metrics)
        undefined = sorted(
            k for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v) and not isinstance(v, bool)
        )
        if not values:
            raise ValueError(f"{name} v{mv.version}: no finite evaluation values in {sorted(metrics)}")
        when = when or datetime.now(UTC)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        try:  # evaluations so far (the step of this one), kept on the version
            count = int((mv.tags or {}).get(f"{EVALUATED_TAG_PREFIX}{suite}.count", "0"))
        except ValueError:
            count = 0
        stamp = int(when.timestamp() * 1000)
        entries = [Metric(f"{HISTORY_PREFIX}{suite}/{k}", v, stamp, count) for k, v in sorted(values.items())]
        log_metric_entries(self.client, mv.run_id, entries)
        tags = {f"{EVAL_TAG_PREFIX}{suite}.{k}": repr(v) for k, v in values.items()}
        tags |= {
            f"{EVALUATED_TAG_PREFIX}{suite}.at": when.isoformat(timespec="seconds"),
            f"{EVALUATED_TAG_PREFIX}{suite}.count": str(count + 1),
            f"{EVALUATED_TAG_PREFIX}{suite}.undefined": ", ".join(undefined) or "-",
        }
        if source:
            tags[f"{EVALUATED_TAG_PREFIX}{suite}.source"] = source
        for key, value in tags.items():
            self.client.set_model_version_tag(name, str(mv.version), key, value)
        return values

    def evaluation_history(
        self, name: str, version: int | str, metric: str = "mean_reward", suite: str = "nightly"
    ) -> list[tuple[datetime, float]]:
        """Every value `record_evaluation_history` recorded for one metric of a version, oldest first."""
        mv = self._version(name, version)
        if not mv.run_id:
            return []
        points = self.client.get_metric_history(mv.run_id, f"{HISTORY_PREFIX}{suite}/{metric}")
        return [
            (datetime.fromtimestamp(p.timestamp / 1000, UTC), float(p.value))
            for p in sorted(points, key=lambda p: p.step)
        ]

    def log_artifact_file(self, run_id: str, name: str, content: bytes | str, artifact_path: str = "") -> None:
        """`TrackedRun.log_file` for a run that has ended (plots and transcripts made after training)."""
        log_run_file(self.client, run_id, name, content, artifact_path)

    def compare_with_champion(
        self,
        name: str,
        version: int | str,
        metric_name: str,
        value: float,
        higher_is_better: bool = True,
        measured: Measurement | None = None,
    ) -> ChampionComparison:
        """The promotion rule (`champion.compare_versions`: the same plan, paired where both kept their episodes,
        or refused), without changing anything (what the blocking asset check reports)."""
        candidate = EvaluatedVersion.of(int(version), float(value), measured)
        champion = self._alias_version(name, CHAMPION)
        held = read_evaluated(self.client, champion, metric_name, candidate) if champion is not None else None
        return compare_versions(candidate, held, higher_is_better)

    def promote_if_better(
        self,
        name: str,
        version: int | str,
        metric_name: str,
        value: float,
        higher_is_better: bool = True,
        measured: Measurement | None = None,
    ) -> bool:
        """Store `value` (and where it was `measured`) on the version and move alias `champion` to it when
        `compare_with_champion` says it wins. Returns True when the version is the champion afterwards (promoted
        now, or already the champion: its stored value is then refreshed), False when it lost or was refused.
        Two concurrent promotions of one model can race (read, then set); run them from one job."""
        self._version(name, version)  # raises RegistryError when it does not exist
        comparison = self.compare_with_champion(name, version, metric_name, value, higher_is_better, measured)
        self.record_evaluation(name, version, {metric_name: value}, measured)
        if not comparison.wins:
            log.info("%s v%s not promoted: %s", name, version, comparison.reason)
            return False
        if comparison.champion_version == int(version):
            return True
        if comparison.champion_version is not None and comparison.champion_value is None:
            log.warning("%s: %s; v%s replaces it", name, comparison.reason, version)
        self.client.set_registered_model_alias(name, CHAMPION, str(version))
        if comparison.champion_version is not None:
            self.client.set_model_version_tag(
                name, str(version), "socialrl.promoted_over", str(comparison.champion_version)
            )
        return True

    def lookup(
        self,
        name: str,
        alias: str | None = CHAMPION,
        version: int | str | None = None,
        download_dir: str | Path | None = None,
    ) -> LocalModel:
        """The version behind `alias` (or the explicit `version`), with a local directory of its artifacts.

        A local (`file:`) artifact store is used in place, read-only by convention; anything else is
        downloaded once into `download_dir/<name>/v<version>` (default: the config's `download_dir`)."""
        if (alias is None) == (version is None):
            raise ValueError("give exactly one of alias and version")
        if version is not None:
            mv = self._version(name, version)
        else:
            mv = self._alias_version(name, alias)  # type: ignore[arg-type]
            if mv is None:
                raise RegistryError(f"model {name!r} has no alias {alias!r}; aliases: {self.aliases(name)}")
        info = self._info(mv)
        uri = self.client.get_model_version_download_uri(name, str(mv.version))
        path = self._local_copy(uri, name, info.version, download_dir)
        return LocalModel(**dataclasses.asdict(info), path=path)

    def aliases(self, name: str) -> dict[str, int]:
        from mlflow.exceptions import MlflowException

        try:
            model = self.client.get_registered_model(name)
        except MlflowException as exc:
            raise RegistryError(f"no registered model {name!r}") from exc
        return {alias: int(v) for alias, v in (model.aliases or {}).items()}

    def _local_copy(self, uri: str, name: str, version: int, download_dir: str | Path | None) -> Path:
        if _scheme(uri) == "file":
            path = Path(_file_uri_to_path(uri))
            if not path.is_dir():
                raise RegistryError(f"{name} v{version}: artifact directory {path} is missing")
            return path
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        fallback = self.config.download_dir or Path(tempfile.gettempdir()) / "socialrl-mlflow-downloads"
        root = Path(download_dir) if download_dir is not None else Path(fallback)
        final = root / name / f"v{version}"
        if final.is_dir():  # versions are immutable; a finished download is published atomically
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".v{version}-", dir=final.parent))
        try:
            repo = get_artifact_repository(
                uri, tracking_uri=self.config.tracking_uri, registry_uri=self.config.tracking_uri
            )
            repo.download_artifacts("", dst_path=str(staging))
            try:
                os.replace(staging, final)
            except OSError:
                if not final.is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return final

    def versions(self, name: str) -> list[RegisteredVersion]:
        """Every version of a registered model with its tags and aliases, oldest first ([] without the model)."""
        found = sorted(self.client.search_model_versions(f"name = '{name}'"), key=lambda mv: int(mv.version))
        held = self.aliases(name) if found else {}  # a version search leaves the aliases out
        alias = lambda v: tuple(sorted(a for a, n in held.items() if n == v))  # noqa: E731
        return [dataclasses.replace(self._info(mv), aliases=alias(int(mv.version))) for mv in found]

    def version_numbers(self, prefix: str = "") -> dict[str, list[int]]:
        """Every registered model whose name starts with `prefix`, with its version numbers (ascending)."""
        out: dict[str, list[int]] = {}
        token = None
        while True:
            page = self.client.search_registered_models(max_results=100, page_token=token)
            for model in page:
                if model.name.startswith(prefix):
                    versions = self.client.search_model_versions(f"name = '{model.name}'")
                    out[model.name] = sorted(int(v.version) for v in versions)
            token = page.token
            if not token:
                break
        return out

    def champion_versions(self, alias: str = CHAMPION, prefix: str = "") -> list[RegisteredVersion]:
        """Every registered model (whose name starts with `prefix`) that has `alias`, with that version."""
        out = []
        token = None
        while True:
            page = self.client.search_registered_models(max_results=100, page_token=token)
            for model in page:
                if model.name.startswith(prefix) and alias in (model.aliases or {}):
                    out.append(self._info(self._version(model.name, model.aliases[alias])))
            token = page.token
            if not token:
                break
        return sorted(out, key=lambda v: v.name)
