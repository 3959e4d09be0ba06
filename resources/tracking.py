"""The MLflow resource: a thin ConfigurableResource over models.tracking.Tracker (sqlite + local artifacts)."""

from dagster import ConfigurableResource
from pydantic import Field

from models.tracking import Tracker, TrackingConfig


class MlflowResource(ConfigurableResource):
    """Tracking and registry; empty fields take the project defaults under the data directory."""

    tracking_uri: str = Field(default="", description="MLflow tracking URI (sqlite:///...); empty = default.")
    artifact_root: str = Field(default="", description="Artifact root directory; empty = default.")
    experiment: str = Field(default="socialrl", description="Experiment name.")

    def config(self) -> TrackingConfig:
        base = TrackingConfig.from_env(self.experiment)
        return TrackingConfig(
            tracking_uri=self.tracking_uri or base.tracking_uri,
            artifact_root=self.artifact_root or base.artifact_root,
            experiment=self.experiment,
        )

    def tracker(self) -> Tracker:
        return Tracker(self.config())
