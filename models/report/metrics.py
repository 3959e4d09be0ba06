"""Every number a stage's stored output holds, as rows, and every figure it carries.

`metric_rows(value)` walks the output (dataclasses, mappings, sequences) and lists, with its path:
every estimate with its interval, n and clusters (flagged below MIN_CLUSTERS), every number, flag and short
text. Nothing is selected, so a number that goes against the paper is listed like any other. Left out:
raw per-episode data (a field declared with `repr=False`, such as episode records and transcripts, and the
sequences named in RAW_FIELDS), paths and bytes (figures: `figures`). One policy's per-episode rewards
(`PolicyScores`: keys, clusters, rewards) are listed as their mean with its bootstrap interval.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from models.report.claims import Interval

RAW_FIELDS = frozenset(
    {"records", "keys", "rewards", "games", "ahead", "worlds", "clusters", "turns", "conversations", "traces",
     "held_out", "transcripts", "policy_episodes", "episodes", "examples"}
)  # fmt: skip
"""Sequence fields that hold per-episode (or per-game, per-world) data rather than metrics."""
MAX_ROWS = 5000
"""A stage listing longer than this is cut, and says so (no stage of this project comes near it)."""
MAX_DEPTH = 10
MAX_TEXT = 200
MAX_SERIES = 40
PNG_MAGIC = b"\x89PNG"


@dataclass(frozen=True)
class MetricRow:
    path: str
    value: str
    n: int | None = None
    clusters: str = ""
    """The clusters behind an interval, flagged "< 8 clusters" when fewer (empty for a plain number)."""


def _is_estimate(value: Any) -> bool:
    """An `Estimate`, or its dict (mean, ci_low, ci_high, ...)."""
    if isinstance(value, Mapping):
        return {"mean", "ci_low", "ci_high"} <= set(value)
    return all(hasattr(value, a) for a in ("mean", "ci_low", "ci_high", "n")) and not isinstance(value, type)


def _is_scores(value: Any) -> bool:
    return all(hasattr(value, a) for a in ("keys", "clusters", "rewards")) and callable(
        getattr(value, "estimate", None)
    )


def _number(value: float) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return "undefined" if not math.isfinite(value) else f"{value:.4g}"


def _label(item: Any, index: int) -> str:
    """A sequence element's path part: its own name where it has one (arm, policy, domain, ...)."""
    for attr in ("arm", "policy", "label", "env_id", "domain", "name", "iteration", "index"):
        value = item.get(attr) if isinstance(item, Mapping) else getattr(item, attr, None)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return f"[{attr}={value}]"
    return f"[{index}]"


def _interval_row(path: str, estimate: Any) -> MetricRow:
    interval = Interval.of(estimate)
    assert interval is not None
    return MetricRow(path, interval.text(4), interval.n, interval.cluster_text() if interval.has_interval else "")


def _children(value: Any) -> Iterator[tuple[str, Any]]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            child = getattr(value, f.name)
            raw = f.name in RAW_FIELDS and isinstance(child, list | tuple)
            if f.repr and not raw:
                yield f".{f.name}", child
    elif isinstance(value, Mapping):
        for key, child in value.items():
            yield f".{key}", child
    else:
        for index, child in enumerate(value):
            yield _label(child, index), child


def _walk(value: Any, path: str, depth: int) -> Iterator[MetricRow]:
    if value is None or isinstance(value, bytes | bytearray | PurePath):
        return
    if isinstance(value, bool | int | float):
        yield MetricRow(path, _number(value))
    elif isinstance(value, str):
        if value and len(value) <= MAX_TEXT:
            yield MetricRow(path, value.replace("\n", " "))
    elif _is_estimate(value):
        yield _interval_row(path, value)
    elif _is_scores(value):
        yield _interval_row(f"{path} (mean reward over {len(value.rewards)} episodes)", value.estimate())
    elif depth >= MAX_DEPTH:
        return
    elif isinstance(value, list | tuple) and value and all(isinstance(v, int | float) for v in value):
        shown = ", ".join(_number(v) for v in value[:MAX_SERIES])
        more = f", ... ({len(value)} values)" if len(value) > MAX_SERIES else ""
        yield MetricRow(path, shown + more, len(value))
    elif _container(value):
        for part, child in _children(value):
            yield from _walk(child, f"{path}{part}", depth + 1)


def _container(value: Any) -> bool:
    """A dataclass instance, a mapping or a list/tuple: what `_children` walks into."""
    return (dataclasses.is_dataclass(value) and not isinstance(value, type)) or isinstance(
        value, Mapping | list | tuple
    )


def metric_rows(value: Any, root: str = "") -> tuple[tuple[MetricRow, ...], int]:
    """Every number of `value` (module docstring), and how many rows were cut beyond MAX_ROWS (0: none)."""
    rows = []
    for row in _walk(value, root, 0):
        rows.append(MetricRow(row.path.lstrip("."), row.value, row.n, row.clusters))
    return tuple(rows[:MAX_ROWS]), max(0, len(rows) - MAX_ROWS)


def figures(value: Any, root: str = "") -> dict[str, bytes]:
    """Every PNG the stored output carries (a `*_png` field, a plots mapping), by its path."""
    found: dict[str, bytes] = {}

    def visit(item: Any, path: str, depth: int) -> None:
        if isinstance(item, bytes | bytearray):
            if bytes(item[:4]) == PNG_MAGIC:
                found[path.lstrip(".") or "figure"] = bytes(item)
        elif depth < MAX_DEPTH and _container(item) and not _is_estimate(item):
            for part, child in _children(item):
                visit(child, f"{path}{part}", depth + 1)

    visit(value, root, 0)
    return found
