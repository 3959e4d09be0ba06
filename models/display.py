"""Numbers and JSON for people: values rounded for display, and strictly valid JSON.

Full precision stays in the tables and in MLflow; only what a person reads (Dagster metadata, report
text) is rounded here.

| function | what it does |
| --- | --- |
| `display_number(x, digits=3)` | a float rounded for display: `digits` decimals, or `digits` significant digits for values below 0.1 in magnitude (0.000123 stays visible); ints, bools and non-finite values unchanged |
| `format_number(x, digits=3)` | the same as text, "n/a" for a missing or non-finite value (for markdown tables) |
| `fixed(x, spec=".3f")` | `x` with a format spec (".2f", "+.3f", ".1%"); "-" for a missing or non-finite value (report text) |
| `interval_text(mean, low, high, spec=".3f")` | "mean [low, high]" with one spec, the one way every report writes an estimate; the bracket is left out when the interval is undefined |
| `display_metadata(values, digits=3)` | a mapping with every float (also inside lists and nested mappings) rounded by `display_number`; NaN and infinities become text ("n/a", "inf") because Dagster shows a NaN float as a bare `NaN` |
| `display_json(value, digits=3)` | `json_safe(value)` with every float rounded by `display_number`: JSON metadata (`MetadataValue.json`) a person reads (0.0015624999999999992 -> 0.00156), NaN as `null` with its reason |
| `json_safe(value, reasons=...)` | a JSON-serialisable copy: dataclasses and mappings become dicts, tuples/sets lists, paths and other objects text; NaN and +-inf become `null`, and in a mapping a sibling key `<key>_null_reason` says why (from `reasons`, else "not a number" / "infinite") |
| `strict_json(value, **dumps_kwargs)` | `json.dumps(json_safe(value), allow_nan=False)`: text any strict parser accepts (no bare `NaN`) |

Why not `json.dumps(..., default=str)`: Python writes NaN as a bare `NaN`, which is not JSON (RFC 8259);
JavaScript's `JSON.parse`, jq and most other parsers reject the whole document.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Mapping
from datetime import date, datetime
from pathlib import PurePath
from typing import Any

NULL_REASON_SUFFIX = "_null_reason"
"""Suffix of the key that says why a sibling value is null (see `json_safe`)."""

EVALUATION_NULL_REASONS: dict[str, str] = {
    "mean_reward": "no episodes",
    "ci_low": "interval undefined (fewer than 2 episodes or scenarios)",
    "ci_high": "interval undefined (fewer than 2 episodes or scenarios)",
    "agreement_rate": "no episodes",
    "pareto_optimal_rate": "no agreement where Pareto optimality is defined",
    "invalid_action_rate": "the policy never acted",
    "leakage_rate": "no episodes",
    "mean_rounds": "no episodes",
    "median_opening_over_target": "no buyer offer",
    "eval_loss_before": "no held-out examples",
    "eval_loss_after": "no held-out examples",
}
"""Why an evaluation field (models.evaluation.policy.EvaluationSummary and friends) can be NaN."""


def display_number(value: Any, digits: int = 3) -> Any:
    """`value` rounded for display when it is a finite float (see the module table); anything else unchanged."""
    if digits < 1:
        raise ValueError(f"digits must be >= 1, got {digits}")
    if isinstance(value, bool) or not isinstance(value, float):
        return value
    if not math.isfinite(value) or value == 0.0:
        return value
    if abs(value) >= 0.1:
        return round(value, digits)
    # Small values keep `digits` significant digits instead of collapsing to 0.0.
    exponent = math.floor(math.log10(abs(value)))
    return round(value, digits - 1 - exponent)


def format_number(value: Any, digits: int = 3) -> str:
    """`display_number(value)` as text; "n/a" for None, NaN and infinities (for markdown tables)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return str(display_number(value, digits))


def fixed(value: float | None, spec: str = ".3f", missing: str = "-") -> str:
    """`value` formatted with the format spec `spec`; `missing` for None, NaN and infinities."""
    if value is None or not math.isfinite(value):
        return missing
    return format(value, spec)


def interval_text(
    mean: float | None, low: float | None, high: float | None, spec: str = ".3f", separator: str = " "
) -> str:
    """`mean [low, high]`, each number by `fixed(.., spec)`; the bracket (after `separator`) is left out when
    either bound is missing or not finite (an interval from one cluster, an undefined estimate)."""
    text = fixed(mean, spec)
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return text
    return f"{text}{separator}[{fixed(low, spec)}, {fixed(high, spec)}]"


def entry_text(entry: Mapping[str, Any] | None, spec: str = ".2f") -> str:
    """A result-file entry {mean, ci_low, ci_high, ...} as `interval_text` gives it, "-" when absent."""
    if not entry or entry.get("mean") is None:
        return "-"
    return interval_text(entry["mean"], entry.get("ci_low"), entry.get("ci_high"), spec)


def _display(value: Any, digits: int) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, float):
        return display_number(value, digits)
    if isinstance(value, Mapping):
        return {k: _display(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_display(v, digits) for v in value]
    return value


def display_metadata(values: Mapping[str, Any], digits: int = 3) -> dict[str, Any]:
    """`values` for Dagster metadata: floats rounded (also inside lists and mappings), NaN -> "n/a",
    +-inf -> "inf"/"-inf"; other values (ints, text, MetadataValue objects) are passed through."""
    return {key: _display(value, digits) for key, value in values.items()}


def display_json(value: Any, digits: int = 3, reasons: Mapping[str, str] | None = None) -> Any:
    """`json_safe(value, reasons)` with every float rounded for display (also inside lists and mappings): for
    JSON metadata a person reads. Whoever needs full precision reads the asset's output or the tables."""
    return _display(json_safe(value, reasons), digits)


def _non_finite_reason(value: float) -> str:
    return "not a number" if math.isnan(value) else "infinite"


def json_safe(value: Any, reasons: Mapping[str, str] | None = None) -> Any:
    """A copy of `value` that `json.dumps(..., allow_nan=False)` accepts (see the module table).

    `reasons` maps a key to why its value can be missing (default: `EVALUATION_NULL_REASONS`); a NaN or
    infinite value under that key becomes `null` with `<key>_null_reason` beside it. A key that already
    exists is never overwritten."""
    reasons = EVALUATION_NULL_REASONS if reasons is None else reasons
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        notes: dict[str, str] = {}
        for key, item in value.items():
            name = key if isinstance(key, str) else str(key)
            if isinstance(item, float) and not math.isfinite(item):
                out[name] = None
                notes[f"{name}{NULL_REASON_SUFFIX}"] = reasons.get(name, _non_finite_reason(item))
            else:
                out[name] = json_safe(item, reasons)
        for key, note in notes.items():
            out.setdefault(key, note)
        return out
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [json_safe(item, reasons) for item in items]
    if isinstance(value, enum.Enum):
        return json_safe(value.value, reasons)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    # numpy scalars and arrays, pandas timestamps: through their Python value when they have one.
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return json_safe(tolist(), reasons)
    item = getattr(value, "item", None)
    if callable(item):
        return json_safe(item(), reasons)
    return str(value)


def strict_json(value: Any, reasons: Mapping[str, str] | None = None, **dumps_kwargs: Any) -> str:
    """`value` as strictly valid JSON text (no NaN/Infinity tokens); see `json_safe`. `dumps_kwargs` go to
    `json.dumps` (indent, sort_keys, ...)."""
    dumps_kwargs.pop("allow_nan", None)
    return json.dumps(json_safe(value, reasons), allow_nan=False, **dumps_kwargs)
