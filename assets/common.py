"""What several asset modules share."""

import uuid

from dagster import AssetExecutionContext
from dagster._core.errors import DagsterInvalidPropertyError


def dagster_run_id(context: AssetExecutionContext) -> str:
    """The Dagster run's id; "direct" for an asset invoked directly (a test's `build_asset_context` has no run)."""
    try:
        return context.run.run_id
    except DagsterInvalidPropertyError:
        return "direct"


def execution_id(context: AssetExecutionContext) -> str:
    """The id one asset execution gives its rows, MLflow runs and work directories: the Dagster run's first 8
    characters and 4 random ones, so a re-executed asset never collides with the attempt before it."""
    return f"{dagster_run_id(context)[:8]}-{uuid.uuid4().hex[:4]}"
