"""No silent stretches: a watch that logs a line whenever the project's loggers have been quiet too long.

The phases of a run print their own progress on the `socialrl.*` loggers (an ended episode of a PPO rollout or
an evaluation, a PPO update epoch, an SFT step, a MOPD step, a cascade stage, a champion's nightly result).
Some stretches still have nothing to say for minutes (a vLLM engine starting, a long update epoch, the first
episodes of a batch that all end together). `watch_silence(interval_s)` is the guarantee: while it runs, a
daemon thread logs "still working ..." on `socialrl.progress`, with the last line and how long ago it came,
whenever no `socialrl` logger has logged for `interval_s` seconds. Dagster puts every `socialrl` line into the
run's event log (the Events tab) because the instance lists the logger in `python_logs.managed_python_loggers`
(models/settings.py writes that into the instance's dagster.yaml); the settings resource runs the watch for as
long as a run's resources are up (resources/settings.py), with the profile's `progress_interval_s`.

Written here because no library does it: logging's handlers only react to records, and tqdm's monitor thread
only adjusts its own progress bars.

The watch says that a step is alive, not whether it moves. Long loops of known length (a PPO update's
micro-batches) say that themselves with a `ProgressMeter`: at most one line per `interval_s` (a minute by
default) with the units done of the total, tokens per second and the time left at that rate.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

ROOT_LOGGER = "socialrl"
"""The logger tree the watch listens to (and Dagster captures)."""
log = logging.getLogger("socialrl.progress")


def original_message(record: logging.LogRecord) -> str:
    """A record's message as its caller wrote it. Dagster's managed-logger handler rewrites `record.msg` in place
    to "<job> - <run id> - <step> - <message>" (and keeps the original in `record.dagster_meta`), which every
    later handler of the same record then sees."""
    meta = getattr(record, "dagster_meta", None)
    if isinstance(meta, dict) and isinstance(meta.get("orig_message"), str):
        return meta["orig_message"]
    return record.getMessage()


class PlainFormatter(logging.Formatter):
    """A formatter that prints a record's message as its caller wrote it (`original_message`), so that a
    console handler shows "PPO ... it 2/6 rollout: ..." and not Dagster's rewritten "<job> - <run id> - ..."."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.msg, record.args
        record.msg, record.args = original_message(record), ()
        try:
            return super().format(record)
        finally:
            record.msg, record.args = saved


class _Activity(logging.Handler):
    """Notes when a `socialrl` logger last logged, and what."""

    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.last_time = time.monotonic()
        """When a line, the watch's own included, was last logged (the watch waits an interval after either)."""
        self.last_work_time = self.last_time
        """When a line other than the watch's was last logged (the silence the watch reports)."""
        self.last_line = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.last_time = time.monotonic()
        if record.name == log.name:
            return  # the watch's own line is no progress: quoting it nested every line in the one before
        self.last_work_time = self.last_time
        self.last_line = original_message(record)


class SilenceWatch:
    """The watch of `watch_silence` (one per process: nested users share it)."""

    def __init__(self, interval_s: float, poll_s: float | None = None) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.interval_s = interval_s
        self.poll_s = poll_s if poll_s is not None else min(1.0, interval_s / 4)
        self.started = time.monotonic()
        self.lines = 0
        """"Still working" lines logged so far."""
        self._activity = _Activity()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="socialrl-silence-watch", daemon=True)

    def start(self) -> SilenceWatch:
        logging.getLogger(ROOT_LOGGER).addHandler(self._activity)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        logging.getLogger(ROOT_LOGGER).removeHandler(self._activity)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            now = time.monotonic()
            if now - self._activity.last_time >= self.interval_s and log.isEnabledFor(logging.INFO):
                last = self._activity.last_line.splitlines()[0][:200] if self._activity.last_line else "none yet"
                self.lines += 1
                log.info(
                    "still working (%.0f min in): %.0f s since the last line, %s",
                    (now - self.started) / 60, now - self._activity.last_work_time, last,
                )  # fmt: skip
                self._activity.last_time = time.monotonic()  # in case the logger's handlers drop the line


_LOCK = threading.Lock()
_ACTIVE: list[SilenceWatch] = []
_USERS = 0


@contextlib.contextmanager
def watch_silence(interval_s: float) -> Iterator[SilenceWatch]:
    """Run the silence watch (see the module docstring) for the duration of the block. One watch per process:
    a block inside another (Dagster initialises a resource nested in another one separately) shares it."""
    global _USERS
    with _LOCK:
        if not _ACTIVE:
            _ACTIVE.append(SilenceWatch(interval_s).start())
        _USERS += 1
        watch = _ACTIVE[0]
    try:
        yield watch
    finally:
        with _LOCK:
            _USERS -= 1
            if _USERS == 0:
                _ACTIVE.pop().stop()


# ------------------------------------------------------------------------------------- progress lines
@dataclass(frozen=True, kw_only=True)
class WorkProgress:
    """Where a loop of known length stands."""

    done: int
    """Units finished (micro-batches, steps, ...)."""
    total: int
    """Units in all."""
    tokens: float
    """Tokens processed by the finished units."""
    elapsed_s: float
    """Seconds since the loop started."""

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.elapsed_s if self.elapsed_s > 0 else math.nan

    @property
    def remaining_s(self) -> float:
        """The time left at the rate so far (NaN before the first unit)."""
        return self.elapsed_s / self.done * (self.total - self.done) if self.done > 0 else math.nan


def duration_text(seconds: float) -> str:
    """A duration as a person reads it: "45 s", "12 min", "2.5 h"; "?" when unknown."""
    if not math.isfinite(seconds):
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def progress_text(label: str, unit: str, progress: WorkProgress) -> str:
    """One progress line: "<label>: <unit> 12/48 done, 3,745 tok/s, about 4 min left"."""
    rate = progress.tokens_per_s
    speed = f"{rate:,.0f} tok/s" if math.isfinite(rate) else "- tok/s"
    return (
        f"{label}: {unit} {progress.done}/{progress.total} done, {speed}, "
        f"about {duration_text(progress.remaining_s)} left"
    )


class ProgressMeter:
    """Counts the units of a loop of known length (`advance`) and logs `progress_text` on `logger` at most once
    per `interval_s` (0: after every unit); the last unit logs no line of its own (the loop's caller says it
    ended). `clock` is for tests."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        unit: str = "step",
        interval_s: float = 60.0,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if total < 0 or interval_s < 0:
            raise ValueError(f"total and interval_s must be >= 0, got {total} and {interval_s}")
        self.label, self.total, self.unit, self.interval_s = label, total, unit, interval_s
        self.logger = logger or logging.getLogger(f"{ROOT_LOGGER}.progress.work")
        self.clock = clock
        self.started = self.last_line = clock()
        self.done = 0
        self.tokens = 0.0
        self.lines = 0
        """Lines logged so far."""

    def progress(self, now: float | None = None) -> WorkProgress:
        """Where the loop stands (at `now`, by `clock`; default: the clock's time)."""
        elapsed = (self.clock() if now is None else now) - self.started
        return WorkProgress(done=self.done, total=self.total, tokens=self.tokens, elapsed_s=elapsed)

    def advance(self, units: int = 1, tokens: float = 0.0) -> WorkProgress | None:
        """Count `units` more done (with the `tokens` they processed); the progress when a line was logged."""
        self.done += units
        self.tokens += tokens
        now = self.clock()
        if self.done >= self.total or now - self.last_line < self.interval_s:
            return None
        self.last_line = now
        self.lines += 1
        progress = self.progress(now)
        self.logger.info(progress_text(self.label, self.unit, progress))
        return progress
