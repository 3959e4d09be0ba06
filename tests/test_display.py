"""Numbers for people: rounding for display (full precision stays in the data) and strictly valid JSON."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from models.display import display_metadata, display_number, format_number, json_safe, strict_json


def strict_loads(text: str):
    """A parser that refuses NaN/Infinity tokens, as JavaScript's JSON.parse and jq do."""

    def refuse(token: str):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def test_the_strict_parser_refuses_what_python_writes_by_default() -> None:
    with pytest.raises(ValueError, match="NaN"):
        strict_loads(json.dumps({"x": math.nan}))


@dataclass(frozen=True)
class Summary:
    n: int
    mean_reward: float
    pareto_optimal_rate: float
    path: Path


def test_strict_json_turns_nan_into_null_with_a_reason() -> None:
    report = {
        "profile": "smoke",
        "steps": [
            {"name": "craigslist-v0", "evaluation": Summary(0, math.nan, math.nan, Path("/tmp/x"))},
            {"name": "dnd-v0", "values": (1.5, math.inf, -math.inf), "custom": math.nan, "seats": {"b", "a"}},
        ],
        "counts": {1: np.int64(3), "rate": np.float64(0.25), "array": np.array([0.5, np.nan])},
    }
    parsed = strict_loads(strict_json(report, indent=1))
    first = parsed["steps"][0]["evaluation"]
    assert first["mean_reward"] is None and first["mean_reward_null_reason"] == "no episodes"
    assert first["pareto_optimal_rate_null_reason"] == "no agreement where Pareto optimality is defined"
    assert first["path"] == "/tmp/x" and first["n"] == 0
    second = parsed["steps"][1]
    assert second["values"] == [1.5, None, None]  # in a list there is no key to hang a reason on
    assert second["custom"] is None and second["custom_null_reason"] == "not a number"
    assert second["seats"] == ["a", "b"]
    assert parsed["counts"] == {"1": 3, "rate": 0.25, "array": [0.5, None]}
    # An existing key is never overwritten by a reason.
    assert json_safe({"x": math.nan, "x_null_reason": "mine"}) == {"x": None, "x_null_reason": "mine"}
    # Caller-given reasons.
    assert json_safe({"kl": math.inf}, reasons={"kl": "reference absent"})["kl_null_reason"] == "reference absent"


def test_display_rounding_keeps_small_values_visible_and_data_untouched() -> None:
    assert display_number(0.08333333333333333) == 0.0833
    assert display_number(0.6254999) == 0.625
    assert display_number(123.456789) == 123.457
    assert display_number(0.000123456) == 0.000123
    assert display_number(-0.0456789) == -0.0457
    assert display_number(7) == 7 and display_number(True) is True and display_number(0.0) == 0.0
    assert math.isnan(display_number(math.nan))
    values = {"mean_reward": 0.08333333333333333, "curve": [0.123456, 0.654321], "nested": {"kl": 1.23456e-05},
              "pareto": math.nan, "name": "x", "steps": 3}  # fmt: skip
    shown = display_metadata(values)
    assert shown == {"mean_reward": 0.0833, "curve": [0.123, 0.654], "nested": {"kl": 1.23e-05},
                     "pareto": "n/a", "name": "x", "steps": 3}  # fmt: skip
    assert values["mean_reward"] == 0.08333333333333333  # the input keeps full precision
    assert format_number(math.nan) == "n/a" and format_number(None) == "n/a" and format_number(0.5123) == "0.512"
    with pytest.raises(ValueError):
        display_number(0.5, digits=0)


def test_json_metadata_is_rounded_for_reading() -> None:
    from models.display import display_json

    report = {"paired": {"ppo_minus_sft": {"mean": 0.0015624999999999992, "ci_low": -0.0312500000001, "n": 48}},
              "curve": [0.13333333333333333, math.nan], "pareto_optimal_rate": math.nan, "name": "ppo"}  # fmt: skip
    shown = display_json(report)
    assert shown["paired"]["ppo_minus_sft"] == {"mean": 0.00156, "ci_low": -0.0313, "n": 48}
    assert shown["curve"] == [0.133, None] and shown["name"] == "ppo"
    assert shown["pareto_optimal_rate"] is None and "pareto_optimal_rate_null_reason" in shown
    assert strict_loads(json.dumps(shown)) == shown  # still strict JSON
    assert report["paired"]["ppo_minus_sft"]["mean"] == 0.0015624999999999992  # the data is untouched


def test_every_report_writes_an_estimate_one_way() -> None:
    from models.display import fixed, interval_text
    from models.evaluation.stats import Estimate

    assert interval_text(0.4056, 0.2749, 0.5361) == "0.406 [0.275, 0.536]"
    assert Estimate(0.105, 0.001, 0.197, 96).text("+.2f") == "+0.10 [+0.00, +0.20]"
    assert Estimate(0.25, 0.1, 0.4, 8).text(".1%") == "25.0% [10.0%, 40.0%]"
    # An undefined interval (one cluster, no data) leaves the bracket out rather than printing "nan".
    assert Estimate(0.5, math.nan, math.nan, 1).text() == "0.500"
    assert interval_text(0.5, None, 0.7) == "0.500"
    assert Estimate(-0.1, -0.3, 0.1, 4).text("+.2f", separator="\n") == "-0.10\n[-0.30, +0.10]"
    assert fixed(None) == "-" and fixed(math.inf) == "-" and fixed(math.nan, missing="n/a") == "n/a"
    assert fixed(2 / 3, ".0f") == "1" and fixed(2 / 3) == "0.667"
