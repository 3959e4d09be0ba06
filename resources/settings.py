"""The settings resource: which profile (smoke / cpu / paper) and where the data lives."""

from dagster import ConfigurableResource
from pydantic import Field

from models.profiles import PROFILE_NAMES, Profile, get_profile
from models.settings import DataPaths


class SettingsResource(ConfigurableResource):
    """Profile and data directory shared by every asset and by the other resources (which hold it)."""

    profile: str = Field(default="cpu", description=f"One of {', '.join(PROFILE_NAMES)}.")
    data_dir: str = Field(default="", description="Project data directory; empty = $SOCIALRL_DATA_DIR or ./data.")
    stage2_specialists: bool = Field(
        default=False,
        description="Size stage 1 as `run_stage2` trains its specialists (the profile's `stage2.specialist_*`).",
    )

    def get_profile(self) -> Profile:
        profile = get_profile(self.profile)
        return profile.for_stage2_specialists() if self.stage2_specialists else profile

    def paths(self) -> DataPaths:
        """The data layout every library function is given explicitly (models/settings.py)."""
        return DataPaths(self.data_dir) if self.data_dir else DataPaths.from_env()
