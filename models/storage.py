"""Tables as Parquet shards under the data directory, queried with DuckDB.

Storage rule (DuckDB allows one writer per database file): nothing holds a long-lived DuckDB database
file open for writing. Every writer appends immutable Parquet shards (written to a temporary name, then
atomically renamed), and readers open an in-memory DuckDB connection with one view per table over
`<table>/*.parquet`. Concurrent writers (several runs, the rollout proxy, assets) therefore never
contend for a lock, and a crashed writer leaves at most a stray `.tmp` file that readers ignore.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from models.records import TABLES, VIEWS


class TableStore:
    """Append-only Parquet tables with DuckDB queries over them."""

    def __init__(
        self,
        root: str | Path,
        schemas: Mapping[str, Mapping[str, str]] = TABLES,
        views: Mapping[str, tuple[str, tuple[str, ...]]] = VIEWS,
    ) -> None:
        self.root = Path(root)
        self.schemas = dict(schemas)
        overlap = set(views) & set(self.schemas)
        if overlap:
            raise ValueError(f"view names {sorted(overlap)} are also table names")
        self.views = dict(views)
        """View name -> (SELECT over the tables, the tables it needs); see models/records.py VIEWS."""

    def table_dir(self, table: str) -> Path:
        if table not in self.schemas:
            raise KeyError(f"unknown table {table!r}; known: {', '.join(sorted(self.schemas))}")
        return self.root / table

    def append(self, table: str, rows: Iterable[Mapping[str, Any]]) -> Path | None:
        """Write rows as one new shard; returns its path (None when there are no rows)."""
        directory = self.table_dir(table)
        rows = list(rows)
        if not rows:
            return None
        schema = self.schemas[table]
        extra = set(rows[0]) - set(schema)
        if extra:
            raise ValueError(f"table {table}: columns {sorted(extra)} are not in the schema")
        frame = pd.DataFrame([{col: row.get(col) for col in schema} for row in rows], columns=list(schema))
        directory.mkdir(parents=True, exist_ok=True)
        final = directory / f"{uuid.uuid4().hex}.parquet"
        tmp = directory / f".{final.name}.tmp"
        select = ", ".join(f'CAST("{col}" AS {typ}) AS "{col}"' for col, typ in schema.items())
        with duckdb.connect() as con:
            con.register("frame", frame)
            con.execute(f"COPY (SELECT {select} FROM frame) TO '{tmp}' (FORMAT PARQUET)")
        os.replace(tmp, final)
        return final

    def append_all(self, tables: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, Path | None]:
        return {name: self.append(name, rows) for name, rows in tables.items()}

    def connect(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with one view per table (empty tables are empty views), plus the
        derived views (e.g. `transcripts`) whose tables are all in this store's schemas."""
        con = duckdb.connect()
        for table, schema in self.schemas.items():
            directory = self.table_dir(table)
            if directory.is_dir() and any(directory.glob("*.parquet")):
                con.execute(
                    f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{directory}/*.parquet', union_by_name=true)"
                )
            else:
                cols = ", ".join(f'CAST(NULL AS {typ}) AS "{col}"' for col, typ in schema.items())
                con.execute(f"CREATE VIEW {table} AS SELECT {cols} WHERE false")
        for view, (sql, needs) in self.views.items():
            if set(needs) <= set(self.schemas):
                con.execute(f"CREATE VIEW {view} AS {sql}")
        return con

    def query(self, sql: str, params: list[Any] | None = None) -> pd.DataFrame:
        with self.connect() as con:
            return con.execute(sql, params or []).df()
