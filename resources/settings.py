"""The settings resource: which profile (smoke / cpu / paper) and where the data lives; while a run's
resources are up it also runs the silence watch (models/progress.py), so that no stretch of the run goes
longer than the profile's `progress_interval_s` without a line in the console and the run's Events."""

from collections.abc import Iterator
from contextlib import contextmanager

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field

from models.profiles import PROFILE_NAMES, Profile, get_profile
from models.progress import watch_silence
from models.settings import DataPaths


class SettingsResource(ConfigurableResource):
    """Profile and data directory shared by every asset and by the other resources (which hold it)."""

    profile: str = Field(default="cpu", description=f"One of {', '.join(PROFILE_NAMES)}.")
    data_dir: str = Field(default="", description="Project data directory; empty = $SOCIALRL_DATA_DIR or ./data.")
    progress_interval_s: float = Field(
        default=0.0,
        description="Longest silence of a run before a 'still working' line; 0 = the profile's progress_interval_s.",
    )
    stage2_specialists: bool = Field(
        default=False,
        description="Size stage 1 as `run_stage2` trains its specialists (the profile's `stage2.specialist_*`).",
    )

    @contextmanager
    def yield_for_execution(self, context: InitResourceContext) -> Iterator["SettingsResource"]:
        with watch_silence(self.progress_interval_s or self.get_profile().progress_interval_s):
            yield self

    def get_profile(self) -> Profile:
        profile = get_profile(self.profile)
        return profile.for_stage2_specialists() if self.stage2_specialists else profile

    def paths(self) -> DataPaths:
        """The data layout every library function is given explicitly (models/settings.py)."""
        return DataPaths(self.data_dir) if self.data_dir else DataPaths.from_env()
