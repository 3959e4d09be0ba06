"""Links between the two UIs: from Dagster metadata to MLflow runs and registry versions, and from an MLflow
run back to the Dagster run that launched it.

| call | opens |
| --- | --- |
| `links.mlflow_experiment(experiment_id)` | the experiment's training runs (MLflow 3 opens an experiment on its GenAI "Traces" overview unless the URL asks for the `machine_learning` workflow) |
| `links.mlflow_run(experiment_id, run_id)` | a run's page |
| `links.mlflow_version(name, version)` | a registered model version's page (description, tags, source run) |
| `links.dagster_run(run_id)` | a Dagster run's page (its events, logs and materialisations) |

The base URLs are those `make ui` serves (http://127.0.0.1:3000 and :5000 by default; pipelines/ui.py passes
its ports to the code location as $SOCIALRL_DAGSTER_UI_URL and $SOCIALRL_MLFLOW_UI_URL).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

DAGSTER_UI_URL = "http://127.0.0.1:3000"
MLFLOW_UI_URL = "http://127.0.0.1:5000"
ML_WORKFLOW = "workflowType=machine_learning"
"""The MLflow UI's URL parameter that shows the model-training side (runs, charts, registry) instead of GenAI."""


def _base(url: str, name: str) -> str:
    parsed = urllib.parse.urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"{name} must be an http(s) URL, got {url!r}")
    return url.strip().rstrip("/")


@dataclass(frozen=True)
class UiLinks:
    """Where the Dagster UI and the MLflow UI are served."""

    dagster_url: str = DAGSTER_UI_URL
    """Base URL of the Dagster webserver."""
    mlflow_url: str = MLFLOW_UI_URL
    """Base URL of the MLflow server."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "dagster_url", _base(self.dagster_url, "dagster_url"))
        object.__setattr__(self, "mlflow_url", _base(self.mlflow_url, "mlflow_url"))

    def mlflow_experiment(self, experiment_id: str) -> str:
        return f"{self.mlflow_url}/#/experiments/{experiment_id}/runs?{ML_WORKFLOW}"

    def mlflow_run(self, experiment_id: str, run_id: str) -> str:
        return f"{self.mlflow_url}/#/experiments/{experiment_id}/runs/{run_id}?{ML_WORKFLOW}"

    def mlflow_version(self, name: str, version: int | str) -> str:
        return f"{self.mlflow_url}/#/models/{urllib.parse.quote(name, safe='')}/versions/{version}?{ML_WORKFLOW}"

    def dagster_run(self, run_id: str) -> str:
        return f"{self.dagster_url}/runs/{run_id}"
