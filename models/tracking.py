"""MLflow tracking and model registry: a thin client over `mlflow.tracking.MlflowClient`.

One `Tracker` is built from plain settings (`TrackingConfig`: tracking URI, artifact root, experiment
name), so that a Dagster ConfigurableResource can wrap it later; it never touches MLflow's global state
(`mlflow.set_tracking_uri`, the active-run stack). MLflow's file store is disabled, so the backend is a
sqlite database by default (`<data>/mlflow/mlflow.db`) with a local artifact root
(`<data>/mlflow/artifacts`); any SQLAlchemy URI or an `http(s)://` tracking server works too.

| task | call |
| --- | --- |
| one run per training job | `with tracker.start_run(name, params, tags) as run:` then `run.log_metrics(step, loss=...)`, `run.log_artifact_dir(adapter_dir, "adapter")`; the run ends FINISHED, or FAILED (KILLED on Ctrl-C) when the body raises |
| register a trained adapter | `tracker.register_adapter(run_id, "adapter", "socialrl-craigslist-specialist") -> version`; alias `candidate` moves to it |
| promote on evaluation | `tracker.promote_if_better(name, version, "mean_reward", 0.61)`: stores tag `eval.mean_reward` on the version, moves alias `champion` when it beats the champion's stored value |
| serve a registered adapter | `local = tracker.lookup(name, "champion")`, then `EngineClient.load_adapter(local.adapter_name, local.path)` |
| nightly re-evaluation | `tracker.champion_versions()` lists every registered model's champion |
| the UI (`make ui`) | `server_command(config, port=5000)` is the argv of `mlflow server` over the same store |

Offline and quiet: importing this module sets (unless already set) MLFLOW_DISABLE_TELEMETRY=true,
MLFLOW_ENABLE_ASYNC_LOGGING=false, MLFLOW_LOGGING_LEVEL=WARNING and MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=false; MLflow itself is imported lazily, on
first use, so these take effect as long as nothing imported mlflow earlier in the process.

Registry caveat: MLflow resolves `models:/name@alias` URIs (`mlflow.artifacts.download_artifacts`)
against the *global* registry URI (MLFLOW_TRACKING_URI, else `sqlite:///mlflow.db` in the current
directory, which it silently creates). `lookup` therefore resolves the alias with this tracker's own
client and fetches the version's source URI directly; registered sources are the run's concrete
artifact URI (e.g. `file:///.../artifacts/adapter`), not `runs:/`, for the same reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.settings import DataPaths

if TYPE_CHECKING:  # pragma: no cover
    from mlflow.entities.model_registry import ModelVersion
    from mlflow.tracking import MlflowClient

log = logging.getLogger(__name__)

QUIET_ENVIRONMENT: dict[str, str] = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "MLFLOW_ENABLE_ASYNC_LOGGING": "false",
    "MLFLOW_LOGGING_LEVEL": "WARNING",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}
"""Environment defaults that keep MLflow offline (no telemetry) and quiet, for this process and `mlflow server`."""

for _key, _value in QUIET_ENVIRONMENT.items():
    os.environ.setdefault(_key, _value)

CANDIDATE = "candidate"
"""Alias moved to every newly registered version."""
CHAMPION = "champion"
"""Alias of the best evaluated version (see `Tracker.promote_if_better`)."""
EVAL_TAG_PREFIX = "eval."
"""Model-version tags holding evaluation values: `eval.<metric>` -> the value as text."""
ARTIFACT_PATH_TAG = "socialrl.artifact_path"
"""Model-version tag: the run-relative artifact path the version was registered from."""

# Tracking URI schemes accepted (the part before any "+driver"): SQLAlchemy databases and a tracking server.
_DB_SCHEMES = {"sqlite", "postgresql", "mysql", "mssql"}
_SERVER_SCHEMES = {"http", "https", "databricks"}


def _import_mlflow() -> Any:
    """Import mlflow with the quiet defaults in place; drop a telemetry client if one slipped through."""
    import mlflow

    with contextlib.suppress(Exception):  # telemetry internals move between MLflow versions
        from mlflow.telemetry.client import get_telemetry_client, set_telemetry_client
        from mlflow.telemetry.utils import is_telemetry_disabled

        if get_telemetry_client() is not None and is_telemetry_disabled():
            set_telemetry_client()  # re-initialises to None when telemetry is disabled
    return mlflow


def default_tracking_uri(paths: DataPaths) -> str:
    """`sqlite:///<data>/mlflow/mlflow.db` (an absolute path, so four slashes on POSIX)."""
    return f"sqlite:///{paths.mlflow / 'mlflow.db'}"


def default_artifact_root(paths: DataPaths) -> str:
    """`<data>/mlflow/artifacts` as a file URI."""
    return (paths.mlflow / "artifacts").as_uri()


def _scheme(uri: str) -> str:
    return urllib.parse.urlparse(uri).scheme.lower()


def _sqlite_path(uri: str) -> str | None:
    """The database file of a sqlite URI (None for in-memory)."""
    path = uri.split("://", 1)[1].split("?", 1)[0]
    path = path[1:] if path.startswith("/") else path  # sqlite:///x -> "x" relative, sqlite:////x -> "/x"
    return None if path in ("", ":memory:") else path


@dataclass(frozen=True)
class TrackingConfig:
    """Where runs, registered models and artifacts live. Plain values only (a Dagster resource's config)."""

    tracking_uri: str
    """Backend store for runs and the model registry: `sqlite:///<path>` (default
    `sqlite:///<data>/mlflow/mlflow.db` from `for_data`), another SQLAlchemy URI (`postgresql://...`), or an
    `http(s)://` MLflow server. MLflow's file store (`file:` URIs, plain directories) is disabled and
    rejected. A relative sqlite path is made absolute against the current directory."""
    artifact_root: str
    """Where new experiments store artifacts (the LoRA adapter directories): a local directory or a URI
    (`file://`, `s3://`, `mlflow-artifacts:/`, ...). `for_data`: `<data>/mlflow/artifacts`. A plain path
    is turned into an absolute file URI. Existing experiments keep the location they were created with."""
    experiment: str = "socialrl"
    """Experiment that runs are created in (created on first use with `artifact_root` as its location)."""
    download_dir: str = ""
    """Where `Tracker.lookup` copies artifacts of a non-local store (empty: the system's temporary directory)."""

    def __post_init__(self) -> None:
        uri = self.tracking_uri.strip() if isinstance(self.tracking_uri, str) else ""
        scheme = _scheme(uri).split("+", 1)[0]
        if scheme in ("", "file") or (len(scheme) == 1 and uri[1:2] == ":"):  # "", file:, C:\...
            raise ValueError(
                f"tracking_uri {self.tracking_uri!r}: MLflow's file store is disabled; use a database such as "
                "'sqlite:////abs/path/mlflow.db' or an http(s) MLflow server"
            )
        if scheme not in _DB_SCHEMES | _SERVER_SCHEMES:
            raise ValueError(
                f"tracking_uri {self.tracking_uri!r}: unsupported scheme {scheme!r}; "
                f"use one of {sorted(_DB_SCHEMES | _SERVER_SCHEMES)}"
            )
        if scheme == "sqlite":
            if not uri.lower().startswith("sqlite:///"):
                raise ValueError(f"tracking_uri {self.tracking_uri!r}: a sqlite URI looks like 'sqlite:///<path>'")
            path = _sqlite_path(uri)
            if path is None:
                raise ValueError(f"tracking_uri {self.tracking_uri!r}: an in-memory registry would lose every run")
            if not Path(path).is_absolute():
                uri = f"sqlite:///{Path(path).resolve()}"
        object.__setattr__(self, "tracking_uri", uri)

        root = self.artifact_root.strip() if isinstance(self.artifact_root, str) else ""
        if not root:
            raise ValueError("artifact_root must be a directory or a URI, got an empty value")
        root_scheme = _scheme(root)
        if root_scheme == "" or (len(root_scheme) == 1 and root[1:2] == ":"):
            root = Path(root).expanduser().resolve().as_uri()
        elif root_scheme == "file":
            root = Path(_file_uri_to_path(root)).expanduser().resolve().as_uri()
        else:
            while root.endswith("/") and not root.endswith((":/", "://")):  # keep "mlflow-artifacts:/"
                root = root[:-1]
        object.__setattr__(self, "artifact_root", root)

        if not isinstance(self.experiment, str) or not self.experiment.strip():
            raise ValueError("experiment must be a non-empty name")
        if self.experiment != self.experiment.strip():
            raise ValueError(f"experiment {self.experiment!r} must not start or end with whitespace")

    @classmethod
    def for_data(cls, paths: DataPaths, experiment: str = "socialrl") -> TrackingConfig:
        """The project default under a data directory: sqlite registry and local artifacts in <data>/mlflow."""
        return cls(
            tracking_uri=default_tracking_uri(paths),
            artifact_root=default_artifact_root(paths),
            experiment=experiment,
            download_dir=str(paths.mlflow / "downloads"),
        )

    @classmethod
    def from_env(cls, paths: DataPaths, experiment: str = "socialrl") -> TrackingConfig:
        """`for_data(paths)`, overridden by $SOCIALRL_MLFLOW_TRACKING_URI (else $MLFLOW_TRACKING_URI) and
        $SOCIALRL_MLFLOW_ARTIFACT_ROOT (for the edges: command lines and the Dagster resource)."""
        base = cls.for_data(paths, experiment)
        uri = os.environ.get("SOCIALRL_MLFLOW_TRACKING_URI") or os.environ.get("MLFLOW_TRACKING_URI")
        root = os.environ.get("SOCIALRL_MLFLOW_ARTIFACT_ROOT")
        return dataclasses.replace(
            base, tracking_uri=uri or base.tracking_uri, artifact_root=root or base.artifact_root
        )

    @property
    def local_artifact_dir(self) -> Path | None:
        """The artifact root as a local directory, when it is one."""
        return Path(_file_uri_to_path(self.artifact_root)) if _scheme(self.artifact_root) == "file" else None


def server_command(config: TrackingConfig, port: int = 5000, host: str = "127.0.0.1") -> list[str]:
    """argv of `mlflow server` (the UI and REST API) over the same store; run it with `quiet_environment()`."""
    if not 0 < port < 65536:
        raise ValueError(f"port must lie in 1..65535, got {port}")
    return [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        config.tracking_uri,
        "--default-artifact-root",
        config.artifact_root,
        "--host",
        host,
        "--port",
        str(port),
    ]


def quiet_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with MLflow's telemetry off and logging at WARNING."""
    return {**(os.environ if base is None else base), **QUIET_ENVIRONMENT}


def _file_uri_to_path(uri: str) -> str:
    parsed = urllib.parse.urlparse(uri)
    return urllib.parse.unquote(parsed.path)


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

    def evaluation(self) -> dict[str, float]:
        """The stored evaluation values (`eval.<metric>` tags) by metric name."""
        out = {}
        for key, value in self.tags.items():
            if key.startswith(EVAL_TAG_PREFIX):
                with contextlib.suppress(ValueError):
                    out[key[len(EVAL_TAG_PREFIX) :]] = float(value)
        return out


@dataclass(frozen=True)
class LocalModel(RegisteredVersion):
    """A model version whose artifact directory is on the local disk (usable by the engine)."""

    path: Path = field(kw_only=True)
    """Local directory holding the adapter (adapter_config.json, weights)."""

    @property
    def adapter_name(self) -> str:
        """A stable served-model name for the engine: `<name>-v<version>`."""
        return f"{self.name}-v{self.version}"


class TrackedRun:
    """A run in progress (made by `Tracker.start_run`): params, per-step metrics, artifacts, tags."""

    def __init__(self, client: MlflowClient, run_id: str, experiment_id: str, artifact_uri: str) -> None:
        self.client = client
        self.run_id = run_id
        self.experiment_id = experiment_id
        self.artifact_uri = artifact_uri
        """Root artifact URI of the run (artifact paths are relative to it)."""

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
        from mlflow.utils.validation import MAX_METRICS_PER_BATCH

        if int(step) != step or step < 0:
            raise ValueError(f"step must be a non-negative integer, got {step!r}")
        values = {**(metrics or {}), **more}
        now = int(time.time() * 1000)
        entries = [Metric(k, float(v), now, int(step)) for k, v in sorted(values.items())]
        for chunk in _chunks(entries, MAX_METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=chunk)

    def set_tags(self, tags: Mapping[str, Any] | None = None, **more: Any) -> None:
        from mlflow.entities import RunTag
        from mlflow.utils.validation import MAX_PARAMS_TAGS_PER_BATCH

        values = {**(tags or {}), **more}
        for chunk in _chunks(sorted(values.items()), MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in chunk])

    def log_file(self, name: str, content: bytes | str, artifact_path: str = "") -> str:
        """Store `content` as the artifact `<artifact_path>/<name>` (a plot's PNG bytes, a markdown
        transcript); returns its artifact URI."""
        if not name or "/" in name:
            raise ValueError(f"artifact file name must be a plain name, got {name!r}")
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / name
            path.write_bytes(content.encode() if isinstance(content, str) else content)
            self.client.log_artifact(self.run_id, str(path), artifact_path.strip("/") or None)
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
                return self.client.create_experiment(name, artifact_location=self.config.artifact_root)
            except MlflowException as exc:  # created concurrently by another process
                experiment = self.client.get_experiment_by_name(name)
                if experiment is None:
                    raise RuntimeError(f"cannot create MLflow experiment {name!r}: {exc}") from exc
        if experiment.lifecycle_stage == "deleted":
            self.client.restore_experiment(experiment.experiment_id)
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
        """One run (one training job). It ends FINISHED when the body returns, FAILED when it raises (the
        error is kept in tag `socialrl.error`), KILLED on KeyboardInterrupt; the exception propagates."""
        run = self.client.create_run(
            self.experiment_id, run_name=name, tags={k: str(v) for k, v in (tags or {}).items()}
        )
        tracked = TrackedRun(self.client, run.info.run_id, self.experiment_id, run.info.artifact_uri)
        try:
            if params:
                tracked.log_params(params)
            yield tracked
        except BaseException as exc:
            status = "KILLED" if isinstance(exc, KeyboardInterrupt | GeneratorExit) else "FAILED"
            try:
                self.client.set_tag(tracked.run_id, "socialrl.error", f"{type(exc).__name__}: {exc}"[:5000])
                self.client.set_terminated(tracked.run_id, status)
            except Exception:  # never hide the body's exception behind a bookkeeping one
                log.exception("could not mark run %s as %s", tracked.run_id, status)
            raise
        else:
            self.client.set_terminated(tracked.run_id, "FINISHED")

    def run_status(self, run_id: str) -> str:
        return self.client.get_run(run_id).info.status

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

    def record_evaluation(self, name: str, version: int | str, metrics: Mapping[str, float]) -> None:
        """Store evaluation values on a version as tags `eval.<metric>` (full float precision)."""
        for metric, value in metrics.items():
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"evaluation value {metric}={value} is not finite")
            self.client.set_model_version_tag(name, str(version), f"{EVAL_TAG_PREFIX}{metric}", repr(value))

    def promote_if_better(
        self, name: str, version: int | str, metric_name: str, value: float, higher_is_better: bool = True
    ) -> bool:
        """Store `value` as the version's `eval.<metric_name>` tag and move alias `champion` to the version
        when it strictly beats the champion's stored value (or there is no champion, or the champion has no
        stored value for this metric). Returns True when the version is the champion afterwards (promoted
        now, or already the champion: its stored value is then refreshed), False when it lost.

        Compare only values measured on the same evaluation suite. Two concurrent promotions of one model
        can race (read, then set); run them from one job."""
        self._version(name, version)  # raises RegistryError when it does not exist
        self.record_evaluation(name, version, {metric_name: value})
        champion = self._alias_version(name, CHAMPION)
        if champion is not None and int(champion.version) == int(version):
            return True
        if champion is not None:
            stored = (champion.tags or {}).get(f"{EVAL_TAG_PREFIX}{metric_name}")
            if stored is None:
                log.warning(
                    "%s: champion v%s has no stored %s; v%s replaces it", name, champion.version, metric_name, version
                )
            else:
                best = float(stored)
                better = float(value) > best if higher_is_better else float(value) < best
                if not better:
                    return False
        self.client.set_registered_model_alias(name, CHAMPION, str(version))
        if champion is not None:
            self.client.set_model_version_tag(name, str(version), "socialrl.promoted_over", str(champion.version))
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
