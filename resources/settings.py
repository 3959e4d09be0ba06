"""The settings resource: which profile (smoke / cpu / paper) and where the data lives."""

import os
from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field

from models.profiles import PROFILE_NAMES, Profile, get_profile
from models.settings import data_dir


class SettingsResource(ConfigurableResource):
    """Profile and data directory shared by every asset."""

    profile: str = Field(default="cpu", description=f"One of {', '.join(PROFILE_NAMES)}.")
    data_dir: str = Field(default="", description="Project data directory; empty = $SOCIALRL_DATA_DIR or ./data.")

    def get_profile(self) -> Profile:
        return get_profile(self.profile)

    def root(self) -> Path:
        if self.data_dir:
            os.environ["SOCIALRL_DATA_DIR"] = self.data_dir  # models/ reads it for its own paths
            path = Path(self.data_dir)
            path.mkdir(parents=True, exist_ok=True)
            return path
        return data_dir()
