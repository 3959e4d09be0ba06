"""What several asset modules share."""

import uuid

from dagster import AssetExecutionContext


def execution_id(context: AssetExecutionContext) -> str:
    """The id one asset execution gives its rows, MLflow runs and work directories: the Dagster run's first 8
    characters and 4 random ones, so a re-executed asset never collides with the attempt before it."""
    return f"{context.run.run_id[:8]}-{uuid.uuid4().hex[:4]}"
