"""Dagster resources: settings (profile, data directory), engine + rollout proxy, tables, MLflow."""

from resources.engine import EngineResource
from resources.settings import SettingsResource
from resources.store import StoreResource
from resources.tracking import MlflowResource

__all__ = ["EngineResource", "MlflowResource", "SettingsResource", "StoreResource"]
