"""Tables as Parquet shards under the data directory, queried with DuckDB.

Storage rule (DuckDB allows one writer per database file): nothing holds a long-lived DuckDB database
file open for writing. Every writer appends immutable Parquet shards (written to a temporary name, then
atomically renamed), and readers open an in-memory DuckDB connection with one view per table over
`<table>/*.parquet`. Concurrent writers (several runs, the rollout proxy, assets) therefore never
contend for a lock, and a crashed writer leaves at most a stray `.tmp` file that readers ignore.

Bad rows never cost the others. Text is stored safely: a string that is not valid Unicode (a lone surrogate,
e.g. from a JSON `"\ud800"` escape) is stored with each such code point written as its Python escape
(`\ud800`), so nothing is lost and nothing breaks the Parquet writer. A row whose values still do not fit
the schema (an INTEGER column given 2**31, text in a number column) is left out of the shard and written,
with the reason, to a dead-letter file `<root>/dead_letter/<table>/<id>.jsonl` (one JSON object per line:
`table`, `reason`, `rejected_at`, `row`); the other rows of the batch are written as usual
(`append_rows` says which rows went where).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from models.records import TABLES, VIEWS

log = logging.getLogger("socialrl.storage")

DEAD_LETTER = "dead_letter"
"""Directory under the store's root for rows that could not be stored (not a table: readers never see it)."""


def safe_text(value: Any) -> Any:
    """`value` with every string in it made storable: code points UTF-8 cannot encode (lone surrogates)
    are written as their Python escape (backslashreplace). Lists are handled element by element."""
    if isinstance(value, str):
        if value.isascii():
            return value
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list | tuple):
        return [safe_text(v) for v in value]
    return value


@dataclass(frozen=True)
class RejectedRow:
    """A row left out of a shard, and why."""

    index: int
    """Position of the row in the batch given to `append_rows`."""
    reason: str


@dataclass(frozen=True)
class AppendResult:
    """What `append_rows` did with a batch."""

    path: Path | None
    """The new shard (None when no row was written)."""
    written: int
    """Rows in the shard."""
    rejected: tuple[RejectedRow, ...] = ()
    """Rows that did not fit the schema, in the dead-letter file."""
    dead_letter: Path | None = None
    """The dead-letter file of the rejected rows."""


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
        """Write rows as one new shard; returns its path (None when no row was written). A row that does not
        fit the schema goes to the dead-letter file instead (logged; see the module docstring)."""
        return self.append_rows(table, rows).path

    def append_rows(self, table: str, rows: Iterable[Mapping[str, Any]]) -> AppendResult:
        """Write rows as one new shard and say what happened to each: written, or rejected to the dead-letter
        file with its reason. Columns outside the schema are a programming error (ValueError, nothing written);
        a batch that fails for a reason no single row explains (disk full) raises as well."""
        directory = self.table_dir(table)
        rows = list(rows)
        if not rows:
            return AppendResult(None, 0)
        schema = self.schemas[table]
        extra = set().union(*(set(row) for row in rows)) - set(schema)
        if extra:
            raise ValueError(f"table {table}: columns {sorted(extra)} are not in the schema")
        prepared = [{col: safe_text(row.get(col)) for col in schema} for row in rows]
        try:
            return AppendResult(self._write(directory, schema, prepared), len(prepared))
        except (duckdb.Error, ValueError, TypeError, OverflowError) as batch_error:
            rejected = self._bad_rows(schema, prepared)
            if not rejected:
                raise batch_error
        bad = {r.index for r in rejected}
        good = [row for i, row in enumerate(prepared) if i not in bad]
        dead = self.dead_letter(table, [(rows[r.index], r.reason) for r in rejected])
        path = self._write(directory, schema, good) if good else None
        log.error(
            "table %s: %d of %d rows did not fit the schema and went to %s (first: %s)",
            table,
            len(rejected),
            len(rows),
            dead,
            rejected[0].reason,
        )
        return AppendResult(path, len(good), tuple(rejected), dead)

    def dead_letter(self, table: str, rows: Iterable[tuple[Mapping[str, Any], str]]) -> Path:
        """Write (row, reason) pairs to a new dead-letter file of `table` (temporary name, then renamed)."""
        directory = self.root / DEAD_LETTER / table
        directory.mkdir(parents=True, exist_ok=True)
        final = directory / f"{uuid.uuid4().hex}.jsonl"
        tmp = directory / f".{final.name}.tmp"
        now = datetime.now(UTC).isoformat()
        with tmp.open("w", encoding="utf-8") as out:
            for row, reason in rows:
                record = {"table": table, "reason": reason, "rejected_at": now, "row": dict(row)}
                out.write(json.dumps(record, default=repr, ensure_ascii=True) + "\n")
        os.replace(tmp, final)
        return final

    def dead_letters(self, table: str) -> list[dict[str, Any]]:
        """Every dead-letter record of `table`, oldest file first."""
        directory = self.root / DEAD_LETTER / table
        files = sorted(directory.glob("*.jsonl"), key=lambda p: p.stat().st_mtime) if directory.is_dir() else []
        return [json.loads(line) for path in files for line in path.read_text(encoding="utf-8").splitlines()]

    @staticmethod
    def _select(schema: Mapping[str, str]) -> str:
        return ", ".join(f'CAST("{col}" AS {typ}) AS "{col}"' for col, typ in schema.items())

    def _write(self, directory: Path, schema: Mapping[str, str], rows: list[dict[str, Any]]) -> Path:
        frame = pd.DataFrame(rows, columns=list(schema))
        directory.mkdir(parents=True, exist_ok=True)
        final = directory / f"{uuid.uuid4().hex}.parquet"
        tmp = directory / f".{final.name}.tmp"
        try:
            with duckdb.connect() as con:
                con.register("frame", frame)
                con.execute(f"COPY (SELECT {self._select(schema)} FROM frame) TO '{tmp}' (FORMAT PARQUET)")
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, final)
        return final

    def _bad_rows(self, schema: Mapping[str, str], rows: list[dict[str, Any]]) -> list[RejectedRow]:
        """The rows that do not convert to the schema on their own, with DuckDB's reason (in memory)."""
        rejected = []
        with duckdb.connect() as con:
            for index, row in enumerate(rows):
                try:
                    con.register("one", pd.DataFrame([row], columns=list(schema)))
                    con.execute(f"SELECT {self._select(schema)} FROM one").fetchall()
                except (duckdb.Error, ValueError, TypeError, OverflowError) as exc:
                    rejected.append(RejectedRow(index, f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))
                finally:
                    con.unregister("one")
        return rejected

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
