"""benchmarks/pair_make_runs.py: two make-run instances paired episode by episode, refused across environment
versions and plans."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.pair_make_runs import compare, episode_key


def make_run_data(root: Path, env_version: str, rewards: dict[str, dict[str, float]]) -> Path:
    """A make-run data directory with a report and, per policy, evaluation episodes whose buyer earned
    `rewards[policy][episode]` (episode `scenario/k` belongs to scenario `scenario`)."""
    (root / "reports").mkdir(parents=True)
    (root / "reports" / "make-run-20261206T000000Z.json").write_text(json.dumps({"env_version": env_version}))
    episodes, roles = [], []
    for policy, by_episode in rewards.items():
        run_id = f"eval-1234-{policy}"
        for episode_id, reward in by_episode.items():
            episodes.append({"episode_id": episode_id, "run_id": run_id, "scenario_id": episode_id.split("/")[0]})
            roles.append(
                {"episode_id": episode_id, "run_id": run_id, "agent_name": f"llm(x-{policy})", "reward": reward}
            )
            roles.append({"episode_id": episode_id, "run_id": run_id, "agent_name": "boulware(seed=1)", "reward": 0.9})
    for table, rows in (("episodes", episodes), ("episode_roles", roles)):
        (root / "tables" / table).mkdir(parents=True)
        pd.DataFrame(rows).to_parquet(root / "tables" / table / "part-0.parquet")
    return root


SFT = {"s1/0": 0.2, "s1/1": 0.4, "s2/0": 0.3}


def test_two_runs_pair_by_episode_and_say_whether_they_started_from_the_same_warm_start(tmp_path: Path) -> None:
    a = make_run_data(tmp_path / "a", "env-1", {"ppo": {"s1/0": 0.2, "s1/1": 0.5, "s2/0": 0.3}, "sft": SFT})
    b = make_run_data(tmp_path / "b", "env-1", {"ppo": {"s1/0": 0.5, "s1/1": 0.5, "s2/0": 0.6}, "sft": SFT})
    result = compare(a, b, "ppo")
    assert result["b_minus_a"]["mean"] == pytest.approx(0.2)  # (0.3 + 0 + 0.3) / 3, the seller's rewards ignored
    assert result["b_minus_a"]["n"] == 3
    assert result["warm_start_identical"] and result["warm_start_episodes_differing"] == 0
    other = make_run_data(
        tmp_path / "c", "env-1", {"ppo": {"s1/0": 0.5, "s1/1": 0.5, "s2/0": 0.6}, "sft": {**SFT, "s2/0": 0.0}}
    )
    assert compare(a, other, "ppo")["warm_start_episodes_differing"] == 1


def test_runs_of_different_environments_or_plans_are_refused(tmp_path: Path) -> None:
    a = make_run_data(tmp_path / "a", "env-1", {"ppo": {"s1/0": 0.2}, "sft": {"s1/0": 0.2}})
    newer = make_run_data(tmp_path / "b", "env-2", {"ppo": {"s1/0": 0.2}, "sft": {"s1/0": 0.2}})
    with pytest.raises(ValueError, match="environment versions"):
        compare(a, newer, "ppo")
    other_plan = make_run_data(tmp_path / "c", "env-1", {"ppo": {"s9/0": 0.2}, "sft": {"s9/0": 0.2}})
    with pytest.raises(ValueError, match="not paired"):
        compare(a, other_plan, "ppo")


def test_episode_keys_drop_the_runs_tag_only() -> None:
    assert episode_key("eval:craigslist-v0:3c0b359aa384:boulware:7:buyer") == "eval:craigslist-v0:boulware:7:buyer"
    assert episode_key("eval:craigslist-v0:57d67a7ca359:boulware:7:buyer") == episode_key(
        "eval:craigslist-v0:3c0b359aa384:boulware:7:buyer"
    )
    assert episode_key("eval:craigslist-v0:57d67a7ca359:conceder:7:buyer") != episode_key(
        "eval:craigslist-v0:3c0b359aa384:boulware:7:buyer"
    )
