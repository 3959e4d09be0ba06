"""The MLflow resource: a thin ConfigurableResource over models.tracking.Tracker (sqlite + local artifacts)."""

from dagster import ConfigurableResource
from pydantic import Field

from models.tracking import Tracker, TrackingConfig
from resources.settings import SettingsResource


class MlflowResource(ConfigurableResource):
    """Tracking and registry; empty fields take the project defaults under the data directory."""

    settings: SettingsResource
    tracking_uri: str = Field(default="", description="MLflow tracking URI (sqlite:///...); empty = default.")
    artifact_root: str = Field(default="", description="Artifact root directory; empty = default.")
    experiment: str = Field(default="socialrl", description="Experiment name.")

    def config(self) -> TrackingConfig:
        """This resource's fields over the environment's and the data directory's defaults
        (`TrackingConfig.from_env`, the one derivation); the engine resource resolves `models:/` through it."""
        return TrackingConfig.from_env(self.settings.paths(), self.experiment, self.tracking_uri, self.artifact_root)

    def tracker(self) -> Tracker:
        return Tracker(self.config())
