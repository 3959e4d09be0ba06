"""The MLflow resource: a thin ConfigurableResource over models.tracking.Tracker (sqlite + local artifacts)."""

from dagster import ConfigurableResource
from pydantic import Field

from models.tracking import Tracker, TrackingConfig, UiLinks
from models.tracking.links import DAGSTER_UI_URL, MLFLOW_UI_URL
from resources.settings import SettingsResource


class MlflowResource(ConfigurableResource):
    """Tracking and registry; empty fields take the project defaults under the data directory."""

    settings: SettingsResource
    tracking_uri: str = Field(default="", description="MLflow tracking URI (sqlite:///...); empty = default.")
    artifact_root: str = Field(default="", description="Artifact root directory; empty = default.")
    experiment: str = Field(default="socialrl", description="Experiment name.")
    ui_url: str = Field(default=MLFLOW_UI_URL, description="The MLflow UI that Dagster metadata links to.")
    dagster_ui_url: str = Field(default=DAGSTER_UI_URL, description="The Dagster UI that MLflow runs link back to.")

    def config(self) -> TrackingConfig:
        """This resource's fields over the environment's and the data directory's defaults
        (`TrackingConfig.from_env`, the one derivation); the engine resource resolves `models:/` through it."""
        return TrackingConfig.from_env(self.settings.paths(), self.experiment, self.tracking_uri, self.artifact_root)

    def tracker(self) -> Tracker:
        return Tracker(self.config())

    def links(self) -> UiLinks:
        """URLs between the two UIs (models/tracking/links.py)."""
        return UiLinks(dagster_url=self.dagster_ui_url, mlflow_url=self.ui_url)
