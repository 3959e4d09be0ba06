"""What the report reads besides a Dagster instance: the result files each stage's runner writes and the
repository keeps (benchmarks/results/: make_run_cpu.json, stage2_cpu.json, tom_cpu.json, yoao_cpu.json, ...).

A `ResultFile` is one parsed file with its `Provenance` (the keys of models/provenance.py `PROVENANCE_KEYS` and
the runner's `wall_s`; for a key a file does not carry, the report says "not recorded"). A
`<stem>_details.json` is written by the same run as `<stem>.json`, so a key its own content lacks is taken
from that file. `ResultSources.load(folder, names)` reads the named files that exist; each paper's file
measurers (models/socialrl/paper_files.py, models/yoao/paper_files.py) read their keys from it.
"""

from __future__ import annotations

import calendar
import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from models.provenance import PROVENANCE_KEYS
from models.report.claims import Interval

NOT_RECORDED = "not recorded"
"""What the report says for a provenance key a result file does not carry."""
RUN_RECORD = "_run"
"""The key under which some runners (run_tom's details) keep their run's own record (profile, wall time)."""
DETAILS_SUFFIX = "_details"
"""A file `<stem>_details.json` belongs to the run that wrote `<stem>.json`."""
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""How `measured_at` is written (models/provenance.py `provenance`)."""


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Where a result file came from; None for a key the file does not carry."""

    env_version: str | None = None
    """`agents.env_version.env_version()` of the code that measured it."""
    commit: str | None = None
    """The git commit checked out when it was measured."""
    uncommitted_changes: bool | None = None
    """Whether tracked files differed from `commit`."""
    profile: str | None = None
    """The profile of the run (cpu, smoke, paper)."""
    measured_at: str | None = None
    """UTC time of the measurement, `TIME_FORMAT`."""
    wall_s: float | Mapping[str, float] | None = None
    """The run's wall seconds (or asset -> seconds where the runner times its assets)."""
    machine_update_tok_s: float | None = None
    """The machine's PPO update speed (tokens/s) when measured."""

    def __post_init__(self) -> None:
        if self.measured_at is not None and self.timestamp() is None:
            raise ValueError(f"measured_at {self.measured_at!r} is not {TIME_FORMAT}")

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Provenance:
        """The provenance keys of a parsed result file: top level first, then its run record (`RUN_RECORD`)."""
        record = data.get(RUN_RECORD)
        sources = [data, record] if isinstance(record, Mapping) else [data]
        found: dict[str, Any] = {}
        for f in fields(cls):
            found[f.name] = next((s[f.name] for s in sources if s.get(f.name) is not None), None)
        if found["measured_at"] is not None and _parse_time(str(found["measured_at"])) is None:
            found["measured_at"] = None  # a date in another format: not a time the report can order by
        return cls(**found)

    def merged(self, other: Provenance) -> Provenance:
        """This provenance, with the keys it lacks taken from `other` (the main file of a details file)."""
        return Provenance(**{f.name: _first(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)})

    def timestamp(self) -> float | None:
        """`measured_at` as seconds since the epoch (None when not recorded)."""
        return None if self.measured_at is None else _parse_time(self.measured_at)

    def total_wall_s(self) -> float | None:
        """The wall seconds, summed over assets where the runner timed each."""
        if isinstance(self.wall_s, Mapping):
            return float(sum(v for v in self.wall_s.values() if isinstance(v, int | float)))
        return None if self.wall_s is None else float(self.wall_s)

    def as_json(self) -> dict[str, Any]:
        """Every key (`PROVENANCE_KEYS` and wall_s), "not recorded" for those the file does not carry."""
        return {f.name: NOT_RECORDED if getattr(self, f.name) is None else getattr(self, f.name) for f in fields(self)}

    def text(self) -> str:
        """One line: environment version, commit, profile, time, wall time and machine speed."""
        wall = self.total_wall_s()
        speed = self.machine_update_tok_s
        parts = {
            "environment version": self.env_version,
            "commit": self.commit[:10] + ("+uncommitted" if self.uncommitted_changes else "") if self.commit else None,
            "profile": self.profile,
            "measured": self.measured_at,
            "wall time": None if wall is None else f"{wall / 60:.1f} min",
            "machine update speed": None if speed is None else f"{speed:.0f} tok/s",
        }
        return "; ".join(f"{k} {NOT_RECORDED if v is None else v}" for k, v in parts.items())


PROVENANCE_FIELDS = (*PROVENANCE_KEYS, "wall_s")
"""The keys `Provenance` reads: models/provenance.py's and the runner's wall time (tests/test_paper_report.py
checks that they are its fields)."""


def _first(a: Any, b: Any) -> Any:
    return a if a is not None else b


def _parse_time(text: str) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(text, TIME_FORMAT)))
    except ValueError:
        return None


@dataclass(frozen=True, kw_only=True)
class ResultFile:
    """One result file, parsed."""

    name: str
    """The file's name, e.g. "stage2_cpu.json"."""
    path: Path
    data: Mapping[str, Any] = field(repr=False)
    """Its parsed content (a JSON object)."""
    provenance: Provenance

    def __post_init__(self) -> None:
        if not isinstance(self.data, Mapping):
            raise ValueError(f"{self.name}: a result file holds a JSON object, not {type(self.data).__name__}")
        if self.path.name != self.name:
            raise ValueError(f"{self.name}: the name is the path's ({self.path.name})")

    def get(self, *keys: str) -> Any:
        """The value at `keys` (nested), None where any is absent."""
        node: Any = self.data
        for key in keys:
            if not isinstance(node, Mapping) or key not in node:
                return None
            node = node[key]
        return node

    @property
    def env_version(self) -> str | None:
        return self.provenance.env_version


@dataclass(frozen=True, kw_only=True)
class ResultSources:
    """The result files read from one folder."""

    folder: Path | None = None
    """Where they were read from (None: no folder was given)."""
    files: tuple[ResultFile, ...] = ()
    unreadable: Mapping[str, str] = field(default_factory=dict)
    """File name -> why it could not be read (not JSON, not an object)."""

    def __post_init__(self) -> None:
        names = [f.name for f in self.files]
        if len(set(names)) != len(names):
            raise ValueError(f"a file is listed twice: {names}")

    @classmethod
    def load(cls, folder: Path, names: Iterable[str]) -> ResultSources:
        """The files of `names` that exist in `folder`; a details file takes the keys it lacks from its main
        file's provenance (module docstring)."""
        read: dict[str, ResultFile] = {}
        unreadable = {}
        for name in dict.fromkeys(names):
            path = folder / name
            if not path.is_file():
                continue
            try:
                data = json.loads(path.read_text())
                read[name] = ResultFile(name=name, path=path, data=data, provenance=Provenance.of(data))
            except (ValueError, TypeError) as exc:
                unreadable[name] = f"{type(exc).__name__}: {exc}"[:300]
        for name, file in list(read.items()):
            stem = Path(name).stem
            main = read.get(stem.removesuffix(DETAILS_SUFFIX) + ".json") if stem.endswith(DETAILS_SUFFIX) else None
            if main is not None:
                read[name] = ResultFile(
                    name=name, path=file.path, data=file.data, provenance=file.provenance.merged(main.provenance)
                )
        return cls(folder=folder, files=tuple(read.values()), unreadable=unreadable)

    def get(self, name: str) -> ResultFile | None:
        return next((f for f in self.files if f.name == name), None)

    def first(self, *names: str) -> ResultFile | None:
        """The first of `names` that was read (e.g. make_run_cpu.json, else make_run_cpu_before_audit.json)."""
        return next((f for n in names if (f := self.get(n)) is not None), None)

    def why_absent(self, *names: str) -> str:
        """Why none of `names` gives a value: unreadable, or not in the folder."""
        errors = "; ".join(f"{n}: {self.unreadable[n]}" for n in names if n in self.unreadable)
        where = f" in {self.folder}" if self.folder is not None else " (no result folder was given)"
        return errors or f"no {' or '.join(names)}{where}"


def entry_interval(entry: Any, clusters: int | None = None) -> Interval | None:
    """A result file's estimate ({mean or r, ci_low, ci_high, n or games, clusters}) as an `Interval`; None when
    `entry` is not one. Games are the clusters of a Red-Black estimate; `clusters` is used where the entry
    records none (derived by the caller, e.g. from a stage-1 plan's scenarios)."""
    if not isinstance(entry, Mapping) or not ({"mean", "r"} & set(entry)) or "ci_low" not in entry:
        return None

    def number(key: str) -> float:
        value = entry.get(key)
        return math.nan if value is None else float(value)

    mean = number("mean") if "mean" in entry else number("r")
    n = int(entry.get("n") or entry.get("games") or 0)
    recorded = entry.get("clusters") or entry.get("games")
    return Interval(mean, number("ci_low"), number("ci_high"), n, int(recorded) if recorded else clusters)
