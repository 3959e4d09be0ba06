"""Where the project keeps its data: one directory per installation, passed around explicitly as `DataPaths`.

Only the edges read the environment: the command-line entry points (`make run`, `make ui`, the
tournament, benchmarks) and the Dagster settings resource call `DataPaths.from_env()`
($SOCIALRL_DATA_DIR, default ./data). Every library function takes a `DataPaths`, or the one directory it
needs, as an argument, so nothing writes to ./data behind the caller's back.

| path | what |
| --- | --- |
| `tables/` | Parquet shards of every table (models/storage.py), queried with DuckDB |
| `models/` | converted and test checkpoints (models/serving/model_store.py) |
| `mlflow/mlflow.db`, `mlflow/artifacts/` | MLflow tracking + registry (sqlite) and its artifacts |
| `runs/` | work directories of training runs (SFT, PPO checkpoints) |
| `logs/` | engine and proxy server logs, full run logs |
| `reports/` | `make run` reports (JSON) |
| `dagster_home/` | the Dagster instance `make run` and `make ui` share; its dagster.yaml (written when missing) makes the `socialrl` loggers Dagster-managed, so their lines reach each run's event log (the Events tab) |
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR_ENV = "SOCIALRL_DATA_DIR"
"""Environment variable the edges read the data directory from."""
DAGSTER_INSTANCE_YAML = """\
# Written by socialrl (models/settings.py DataPaths.dagster_home) for the instance `make run` and `make ui` share.
# The project's progress lines (PPO rollouts and update epochs, evaluation episodes, SFT steps, "still working")
# go to the `socialrl` loggers; as managed loggers Dagster puts them into each run's event log, so a run
# launched from the UI shows them in its Events tab.
python_logs:
  managed_python_loggers:
    - socialrl
  python_log_level: INFO
# No usage statistics from an offline machine (and no telemetry banner on the console of the first run).
telemetry:
  enabled: false
# No "Join the community" e-mail prompt on the UI's first visit.
nux:
  enabled: false
"""
"""The dagster.yaml of a new instance (an existing one is left as it is)."""


@dataclass(frozen=True)
class DataPaths:
    """The data directory of one installation and the fixed layout below it (see the module table)."""

    root: Path
    """The data directory (made absolute)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).expanduser().resolve())

    @classmethod
    def from_env(cls) -> DataPaths:
        """$SOCIALRL_DATA_DIR, else <repo>/data: for command-line entry points and the settings resource only."""
        return cls(Path(os.environ.get(DATA_DIR_ENV) or REPO_ROOT / "data"))

    def _dir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def tables(self) -> Path:
        return self._dir("tables")

    @property
    def models(self) -> Path:
        return self._dir("models")

    @property
    def runs(self) -> Path:
        return self._dir("runs")

    @property
    def logs(self) -> Path:
        return self._dir("logs")

    @property
    def reports(self) -> Path:
        return self._dir("reports")

    @property
    def mlflow(self) -> Path:
        return self._dir("mlflow")

    @property
    def dagster_home(self) -> Path:
        """The Dagster instance directory, with `DAGSTER_INSTANCE_YAML` as its dagster.yaml unless it has one."""
        home = self._dir("dagster_home")
        config = home / "dagster.yaml"
        if not config.exists():  # written whole, then renamed: a reader never sees half a file
            partial = home / f".dagster.yaml.{os.getpid()}.tmp"
            partial.write_text(DAGSTER_INSTANCE_YAML)
            os.replace(partial, config)
        return home

    def log_file(self, command: str) -> Path:
        """logs/<command>-<UTC time>.log: the full log of one command-line run (e.g. make-run, stage2, yoao)."""
        return self.logs / f"{command}-{utc_stamp()}.log"

    def report_file(self, command: str) -> Path:
        """reports/<command>-<UTC time>.json: the report of one command-line run."""
        return self.reports / f"{command}-{utc_stamp()}.json"

    def run_dir(self, *parts: str) -> Path:
        """runs/<parts...>, created."""
        path = self.runs.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path


def utc_stamp() -> str:
    """The current UTC time as file names carry it: 20261202T031500Z (sorts in time order)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
