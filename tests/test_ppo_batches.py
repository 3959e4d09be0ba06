"""PPO's rollout groups and batch building, without an engine: which episodes share a scenario, how group
baselines and the invalid-action penalty enter the training rewards, and that left-out episodes are counted."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from models.training.config import PPOConfig, PPOHyper
from models.training.ppo import training_samples
from models.training.rollouts import rollout_specs
from models.training.segments import RecordedTurn


def _episode(episode_id: str, reward: float, invalid: int = 0) -> SimpleNamespace:
    role = SimpleNamespace(reward=reward, invalid_actions=invalid)
    return SimpleNamespace(episode_id=episode_id, outcome=SimpleNamespace(roles={"buyer": role}))


def _turns() -> list[RecordedTurn]:
    return [RecordedTurn((1, 2), (3,), (-0.5,))]


def test_a_group_shares_scenario_and_counterpart_and_differs_in_the_policy_seed() -> None:
    config = PPOConfig(
        env_id="craigslist-v0", episodes_per_iteration=8, group_size=4, hyper=PPOHyper(advantage="group")
    )
    specs = rollout_specs(config, iteration=2, proxy_base_url="http://proxy.invalid/v1", model="m")
    assert len(specs) == 8
    for group in (specs[:4], specs[4:]):
        assert len({s.scenario.scenario_id for s in group}) == 1 and len({s.seed for s in group}) == 1
        agents = [s.make_agents() for s in group]
        assert len({a["seller"].describe() for a in agents}) == 1  # one counterpart, one counterpart seed
        assert len({a["buyer"].config.seed for a in agents}) == 4  # four sampling seeds
    assert specs[0].scenario.scenario_id != specs[4].scenario.scenario_id


def test_group_size_one_keeps_the_seeds_of_one_episode_per_scenario() -> None:
    config = PPOConfig(env_id="craigslist-v0", episodes_per_iteration=4)
    specs = rollout_specs(config, iteration=1, proxy_base_url="http://proxy.invalid/v1", model="m")
    seeds = [(config.seed * 1_000_003 + 1) * 10_007 + index for index in range(4)]
    assert [s.seed for s in specs] == seeds
    assert [s.make_agents()["buyer"].config.seed for s in specs] == [seed % 2**31 for seed in seeds]
    assert [s.make_agents()["seller"].name for s in specs] == ["boulware", "conceder", "reciprocal", "boulware"]


def test_group_baselines_penalty_and_left_out_episodes() -> None:
    config = PPOConfig(
        env_id="craigslist-v0",
        episodes_per_iteration=4,
        group_size=2,
        invalid_action_penalty=0.1,
        hyper=PPOHyper(advantage="group"),
    )
    results = [_episode("a", 1.0, invalid=2), _episode("b", 0.2), _episode("c", 0.5), _episode("d", 0.0)]
    recorded = {"a": _turns(), "b": _turns(), "c": _turns()}  # "d" has no recorded call (e.g. every call failed)
    samples, stats = training_samples(config, results, recorded, "buyer")
    assert [s.episode_id for s in samples] == ["a", "b", "c"]
    assert [s.reward for s in samples] == pytest.approx([0.8, 0.2, 0.5])  # 1.0 minus 2 x 0.1
    # Each baseline is the other member of its group, the left-out "d" included.
    assert [s.baseline for s in samples] == pytest.approx([0.2, 0.8, 0.0])
    assert stats["episodes_without_calls"] == 1
    assert stats["training_reward_mean"] == pytest.approx((0.8 + 0.2 + 0.5 + 0.0) / 4)


def test_group_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="group_size >= 2"):
        PPOConfig(env_id="craigslist-v0", hyper=PPOHyper(advantage="group"))
    with pytest.raises(ValueError, match="divide episodes_per_iteration"):
        PPOConfig(env_id="craigslist-v0", episodes_per_iteration=10, group_size=4)
    with pytest.raises(ValueError, match="advantage must be"):
        PPOHyper(advantage="critic")
