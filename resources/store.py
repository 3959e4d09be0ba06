"""The tables resource: Parquet shards + DuckDB (see models/storage.py for the one-writer rule)."""

from dagster import ConfigurableResource
from pydantic import Field

from models.settings import tables_dir
from models.storage import TableStore


class StoreResource(ConfigurableResource):
    """Append-only Parquet tables queried with DuckDB."""

    root: str = Field(default="", description="Table root; empty = <data dir>/tables.")

    def store(self) -> TableStore:
        return TableStore(self.root or tables_dir())
