"""The tables resource: Parquet shards + DuckDB (see models/storage.py for the one-writer rule)."""

from dagster import ConfigurableResource
from pydantic import Field

from models.storage import TableStore
from resources.settings import SettingsResource


class StoreResource(ConfigurableResource):
    """Append-only Parquet tables queried with DuckDB."""

    settings: SettingsResource
    root: str = Field(default="", description="Table root; empty = <data dir>/tables.")

    def store(self) -> TableStore:
        return TableStore(self.root or self.settings.paths().tables)
