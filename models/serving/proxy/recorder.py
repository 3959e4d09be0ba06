"""Buffering recorded calls and writing them as Parquet shards.

Rows are buffered in memory and written as one shard (TableStore: temporary name, then atomic rename) every
`flush_every` rows, every `flush_interval_s` seconds, and at shutdown. One bad row never stops the recording:
`TableStore.append_rows` writes the rows that fit the schema and sends a row that does not (with the reason)
to the dead-letter file `<tables>/dead_letter/recorded_calls/`; a batch that cannot be written at all (a full
disk) goes to the dead-letter file whole. Nothing ever goes back into the buffer, so a bad row cannot make
every later flush fail. Counters: `rows_written`, `rows_dead_lettered`, `rows_lost` (not even the dead-letter
file could be written), `write_errors`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from models.serving.proxy.config import TABLE
from models.storage import TableStore

log = logging.getLogger("socialrl.proxy")


class CallRecorder:
    """Buffers rows and writes them as Parquet shards (by size, by age, and on close)."""

    def __init__(self, store: TableStore, flush_every: int, flush_interval_s: float, table: str = TABLE) -> None:
        self.store, self.table = store, table
        self.flush_every, self.flush_interval_s = flush_every, flush_interval_s
        self.buffer: list[dict[str, Any]] = []
        self.rows_written = 0
        self.shards_written = 0
        self.rows_dead_lettered = 0
        self.rows_lost = 0
        self.write_errors = 0
        self._oldest = 0.0
        self._nonempty = asyncio.Event()
        self._writes: set[asyncio.Future[Any]] = set()
        self._timer: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._timer = asyncio.create_task(self._flush_by_age())

    async def add(self, rows: Sequence[dict[str, Any]]) -> None:
        """Buffer rows; when the buffer is full, return only after its shard is written."""
        if not rows:
            return
        if not self.buffer:
            self._oldest = time.monotonic()
            self._nonempty.set()
        self.buffer.extend(rows)
        if len(self.buffer) >= self.flush_every:
            await self.flush()

    async def flush(self) -> None:
        batch, self.buffer = self.buffer, []
        if not batch:
            return
        future = asyncio.ensure_future(asyncio.to_thread(self._store, batch))
        self._writes.add(future)
        future.add_done_callback(self._written)
        # Shielded: a cancelled caller (client gone) must not lose the batch.
        with contextlib.suppress(Exception):
            await asyncio.shield(future)

    def _store(self, batch: list[dict[str, Any]]) -> _BatchOutcome:
        """Write a batch (in a worker thread); rows that cannot be written go to the dead-letter file."""
        try:
            result = self.store.append_rows(self.table, batch)
            return _BatchOutcome(result.written, result.path is not None, len(result.rejected), 0, False)
        except Exception as exc:  # disk full, permissions, ...: keep the rows, with the reason, elsewhere
            reason = f"the shard could not be written: {type(exc).__name__}: {exc}"
            log.error("writing %d recorded calls failed (%s); they go to the dead-letter file", len(batch), reason)
            try:
                self.store.dead_letter(self.table, [(row, reason) for row in batch])
            except Exception as dead:
                log.error("the dead-letter file could not be written either (%s): %d rows lost", dead, len(batch))
                return _BatchOutcome(0, False, 0, len(batch), True)
            return _BatchOutcome(0, False, len(batch), 0, True)

    def _written(self, future: asyncio.Future[Any]) -> None:
        # Runs in the event loop (a done callback), so the counters need no lock.
        self._writes.discard(future)
        if future.cancelled() or future.exception() is not None:  # pragma: no cover - _store catches everything
            self.write_errors += 1
            return
        outcome: _BatchOutcome = future.result()
        self.rows_written += outcome.written
        self.shards_written += outcome.shard
        self.rows_dead_lettered += outcome.dead_lettered
        self.rows_lost += outcome.lost
        self.write_errors += outcome.failed

    async def _flush_by_age(self) -> None:
        while True:
            if not self.buffer:
                self._nonempty.clear()
                await self._nonempty.wait()
                continue
            wait = self._oldest + self.flush_interval_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            await self.flush()  # never raises: a failed write goes to the dead-letter file

    async def drain(self) -> None:
        """Return once every row added before this call is in a renamed shard (or in the dead-letter file): the
        buffer becomes one more write, and every write in progress at the call is awaited. The writes are taken
        before the first await, so a flush that starts meanwhile (by size or by age) holds only rows added
        later; waiting for the writes first and taking the buffer after (as before) missed the rows that such a
        flush took from the buffer in between."""
        in_progress = list(self._writes)
        await self.flush()
        if in_progress:
            await asyncio.gather(*(asyncio.shield(w) for w in in_progress), return_exceptions=True)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
        await self.drain()

    def counters(self) -> dict[str, int]:
        return {
            "buffered_rows": len(self.buffer),
            "rows_written": self.rows_written,
            "shards_written": self.shards_written,
            "rows_dead_lettered": self.rows_dead_lettered,
            "rows_lost": self.rows_lost,
            "write_errors": self.write_errors,
        }


@dataclass(frozen=True)
class _BatchOutcome:
    written: int
    shard: bool
    dead_lettered: int
    lost: int
    failed: bool
