"""What several asset modules share."""

import uuid

from dagster import AssetExecutionContext, MetadataValue
from dagster._core.errors import DagsterInvalidPropertyError

from resources import MlflowResource
from resources.instance import chain_of


def dagster_run_id(context: AssetExecutionContext) -> str:
    """The Dagster run's id; "direct" for an asset invoked directly (a test's `build_asset_context` has no run)."""
    try:
        return context.run.run_id
    except DagsterInvalidPropertyError:
        return "direct"


def work_key(context: AssetExecutionContext) -> str:
    """What a training asset keys its work directory (and so its checkpoints) by: the run it resumes (the launcher's
    `socialrl/resumes` tag, the first run of a killed chain), else the root run, so both a command's relaunch
    and Dagster's "re-execute from failure" go on from the last checkpoint."""
    return chain_of(context.run)[:8]


def execution_id(context: AssetExecutionContext) -> str:
    """The id one asset execution gives its rows, MLflow runs and work directories: the Dagster run's first 8
    characters and 4 random ones, so a re-executed asset never collides with the attempt before it."""
    return f"{dagster_run_id(context)[:8]}-{uuid.uuid4().hex[:4]}"


def mlflow_links(
    context: AssetExecutionContext,
    mlflow: MlflowResource,
    run_id: str | None = None,
    model: str = "",
    version: int | None = None,
) -> dict[str, MetadataValue]:
    """Metadata that links an asset to its MLflow run (`mlflow_run`) and registry version (`model_version`),
    clickable in Dagster; and the MLflow run's description links back to this Dagster run (the run that
    launched it, or a line for a later asset such as the evaluation). Nothing for what is absent."""
    links = mlflow.links()
    out: dict[str, MetadataValue] = {}
    if run_id:
        tracker = mlflow.tracker()
        out["mlflow_run"] = MetadataValue.url(links.mlflow_run(tracker.experiment_id, run_id))
        dagster = dagster_run_id(context)
        if dagster != "direct":
            tracker.link_dagster_run(run_id, dagster, links.dagster_run(dagster), context.asset_key.to_user_string())
    if model and version is not None:
        out["model_version"] = MetadataValue.url(links.mlflow_version(model, version))
    return out
