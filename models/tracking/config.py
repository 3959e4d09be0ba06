"""Where runs, registered models and artifacts live (`TrackingConfig`), the `mlflow server` command over the
same store, and the environment that keeps MLflow offline and quiet (set on import, before mlflow loads)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.settings import DataPaths

QUIET_ENVIRONMENT: dict[str, str] = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "MLFLOW_ENABLE_ASYNC_LOGGING": "false",
    "MLFLOW_LOGGING_LEVEL": "WARNING",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}
"""Environment defaults that keep MLflow offline (no telemetry) and quiet, for this process and `mlflow server`."""

for _key, _value in QUIET_ENVIRONMENT.items():
    os.environ.setdefault(_key, _value)

SERVER_ENVIRONMENT: dict[str, str] = {
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    "MLFLOW_WORKERS": "1",
    "MLFLOW_UVICORN_OPTS": "--no-access-log",
}
"""What `mlflow server` (`make ui`) runs with beyond the quiet defaults: no job execution (its huey consumers
serve GenAI judges and scorers this project does not use), one uvicorn worker instead of 4, and no access log
(365 of the 466 lines `make ui` printed). Measured by benchmarks/bench_ui_memory.py."""

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
    def from_env(
        cls, paths: DataPaths, experiment: str = "socialrl", tracking_uri: str = "", artifact_root: str = ""
    ) -> TrackingConfig:
        """The one derivation of the tracking config every entry point uses (the command lines, the MLflow
        and engine resources, the local teacher): `tracking_uri` and `artifact_root` when given (a resource's
        fields), else $SOCIALRL_MLFLOW_TRACKING_URI (else $MLFLOW_TRACKING_URI) and
        $SOCIALRL_MLFLOW_ARTIFACT_ROOT, else `for_data(paths)`."""
        base = cls.for_data(paths, experiment)
        uri = tracking_uri or os.environ.get("SOCIALRL_MLFLOW_TRACKING_URI") or os.environ.get("MLFLOW_TRACKING_URI")
        root = artifact_root or os.environ.get("SOCIALRL_MLFLOW_ARTIFACT_ROOT")
        return dataclasses.replace(
            base, tracking_uri=uri or base.tracking_uri, artifact_root=root or base.artifact_root
        )

    @property
    def local_artifact_dir(self) -> Path | None:
        """The artifact root as a local directory, when it is one."""
        return Path(_file_uri_to_path(self.artifact_root)) if _scheme(self.artifact_root) == "file" else None


def server_command(config: TrackingConfig, port: int = 5000, host: str = "127.0.0.1") -> list[str]:
    """argv of `mlflow server` (the UI and REST API) over the same store; run it with `server_environment()`."""
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


def server_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of `server_command`: `quiet_environment(base)` and `SERVER_ENVIRONMENT` (one worker,
    no job execution, no access log)."""
    return {**quiet_environment(base), **SERVER_ENVIRONMENT}


def _file_uri_to_path(uri: str) -> str:
    parsed = urllib.parse.urlparse(uri)
    return urllib.parse.unquote(parsed.path)
