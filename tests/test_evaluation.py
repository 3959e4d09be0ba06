"""Policy evaluation: held-out scenarios, the summary metrics, confidence intervals, tables.

Policies here are code agents (and two deliberately bad agents); an LLM agent goes through the same
`Agent` factory, so nothing below depends on the kind of policy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from agents.socialrl.code_agents import make_code_agent
from environments import SOCIALRL_ENV_IDS, sample_scenarios
from environments.core.base import ActionSpec
from environments.core.events import RAW_TEXT, Action, Event, Notification
from models.evaluation.policy import (
    EVALUATION_TABLES,
    EVALUATIONS_COLUMNS,
    EvaluationPlan,
    evaluate_policy,
    evaluate_policy_async,
    paired_difference,
    store_evaluation,
    summary_rows,
)
from models.evaluation.scenarios import held_out_scenarios, is_held_out, scenario_key, training_scenarios
from models.evaluation.stats import (
    confidence_interval,
    correlation_estimate,
    mean_estimate,
    ratio_estimate,
    t_quantile,
)
from models.evaluation.stats import paired_difference as paired_from_dicts
from models.storage import TableStore

ENV = "craigslist-v0"


class BrokenAgent:
    """Answers every turn with malformed text (a command without its argument)."""

    def describe(self) -> str:
        return "broken"

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id = agent_id

    async def observe(self, event: Event) -> None:
        pass

    async def act(self, request: Notification) -> Action:
        return Action(self.agent_id, RAW_TEXT, "I think this is fair.\nOFFER")


class SlowAgent(BrokenAgent):
    """Never answers within the turn timeout."""

    async def act(self, request: Notification) -> Action:
        await asyncio.sleep(5)
        return Action(self.agent_id, "quit")


def boulware(seed: int = 0) -> object:
    return make_code_agent("boulware", seed=seed)


def plan(**fields) -> EvaluationPlan:
    return EvaluationPlan(ENV, **fields)


@pytest.fixture(scope="module")
def boulware_buyer() -> object:
    return evaluate_policy(plan(seat="buyer", counterparts=("conceder",), scenarios=12, seed=3), boulware)


# ----------------------------------------------------------------------------------- held-out scenarios
@pytest.mark.parametrize("env_id", SOCIALRL_ENV_IDS)
def test_held_out_scenarios_are_deterministic_and_disjoint_from_training(env_id: str) -> None:
    held = held_out_scenarios(env_id, 12, seed=0)
    assert [s.scenario_id for s in held] == [s.scenario_id for s in held_out_scenarios(env_id, 12, seed=0)]
    assert len(held) == 12
    assert all(s.scenario_id.startswith("heldout:") for s in held)
    assert all(is_held_out(env_id, s) for s in held)
    held_keys = {scenario_key(env_id, s) for s in held}
    for seed in range(5):
        # No shared id with the plain training stream ...
        train = sample_scenarios(env_id, 40, seed)
        assert not {s.scenario_id for s in held} & {s.scenario_id for s in train}
        # ... and no shared content with the training stream that skips the held-out partition.
        assert not held_keys & {scenario_key(env_id, s) for s in training_scenarios(env_id, 40, seed)}
    assert {s.scenario_id for s in held_out_scenarios(env_id, 12, seed=1)} != {s.scenario_id for s in held}


def test_training_scenarios_are_the_sample_stream_without_the_held_out_partition() -> None:
    # dnd-v0 has a small scenario space: plain seeds repeat contents, which is why the partition exists.
    stream = sample_scenarios("dnd-v0", 200, seed=4)
    training = training_scenarios("dnd-v0", 50, seed=4)
    expected = [s for s in stream if not is_held_out("dnd-v0", s)][:50]
    assert [s.scenario_id for s in training] == [s.scenario_id for s in expected]
    share = sum(is_held_out("dnd-v0", s) for s in stream) / len(stream)
    assert 0.05 < share < 0.4  # about HELD_OUT_FRACTION of the stream is held out
    assert held_out_scenarios("dnd-v0", 0, seed=0) == []
    with pytest.raises(ValueError):
        held_out_scenarios("dnd-v0", -1)


def test_an_environment_with_its_own_held_out_split_is_sampled_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from environments.socialrl.craigslist import CraigslistEnv

    def own(cls, rng):  # e.g. held-out frames or items the training sampler never draws
        scenario = cls.sample_scenario(rng)
        return dataclasses.replace(scenario, title="held-out item", scenario_id="own")

    monkeypatch.setattr(CraigslistEnv, "sample_held_out_scenario", classmethod(own), raising=False)
    held = held_out_scenarios(ENV, 5, seed=0)
    assert [s.title for s in held] == ["held-out item"] * 5
    assert all(s.scenario_id.startswith("heldout:") for s in held)
    plain = [s.scenario_id for s in sample_scenarios(ENV, 7, seed=2)]
    assert [s.scenario_id for s in training_scenarios(ENV, 7, seed=2)] == plain


def test_scenario_key_ignores_the_id_but_not_the_content() -> None:
    a = sample_scenarios(ENV, 1, seed=0)[0]
    assert scenario_key(ENV, a) == scenario_key(ENV, dataclasses.replace(a, scenario_id="other"))
    assert scenario_key(ENV, a) != scenario_key(ENV, dataclasses.replace(a, buyer_target=a.buyer_target - 1))
    assert scenario_key(ENV, a) != scenario_key("marketplace-v0", a)


# ------------------------------------------------------------------------------------------ statistics
def test_t_quantiles_match_the_tables() -> None:
    table = {1: 12.7062, 2: 4.3027, 3: 3.1824, 5: 2.5706, 10: 2.2281, 29: 2.0452, 100: 1.9840}
    for df, expected in table.items():
        assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)
    assert t_quantile(0.025, 10) == pytest.approx(-2.2281, abs=1e-4)
    assert t_quantile(0.975, 1e9) == pytest.approx(1.959964, abs=1e-6)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def test_confidence_intervals() -> None:
    values = [0.2, 0.9, 0.4, 0.7, 0.5, 0.6, 0.1, 0.8]
    mean = float(np.mean(values))
    t_low, t_high = confidence_interval(values, method="t")
    half = t_quantile(0.975, 7) * float(np.std(values, ddof=1)) / math.sqrt(8)
    assert (t_low, t_high) == pytest.approx((mean - half, mean + half))
    n_low, n_high = confidence_interval(values, method="normal")
    assert t_low < n_low < mean < n_high < t_high
    b_low, b_high = confidence_interval(values, method="bootstrap", seed=1)
    assert b_low < mean < b_high
    assert (b_low, b_high) == confidence_interval(values, method="bootstrap", seed=1)
    wide = confidence_interval(values, confidence=0.99)
    assert wide[0] < t_low and wide[1] > t_high
    assert all(math.isnan(x) for x in confidence_interval([0.5]))
    with pytest.raises(ValueError, match="ci method"):
        confidence_interval(values, method="wald")


# ------------------------------------------------------------------------------------------ evaluation
def test_mean_reward_and_ci_match_a_direct_computation(boulware_buyer) -> None:
    result = boulware_buyer
    assert len(result.episodes) == 12 and result.summary.n == 12
    assert result.seat == "buyer" and result.counterparts == ("conceder",)
    assert result.policy.startswith("boulware(")
    assert result.scenario_source == "heldout(n=12, seed=3)"
    rewards = [r.outcome.roles["buyer"].reward for r in result.episodes]
    summary = result.summary
    assert summary.mean_reward == pytest.approx(sum(rewards) / len(rewards))
    assert summary.ci_low <= summary.mean_reward <= summary.ci_high
    clustered = mean_estimate(rewards, list(range(12)), (0.0, 1.0), seed=3)  # one counterpart: 1 episode/scenario
    assert (summary.ci_low, summary.ci_high) == pytest.approx((clustered.ci_low, clustered.ci_high))
    assert summary.ci_method == "bootstrap" and summary.mean_rounds > 0
    assert summary.agreement_rate == pytest.approx(np.mean([r.outcome.agreement for r in result.episodes]))
    assert summary.invalid_action_rate == 0.0 and summary.leakage_rate == 0.0
    # Every seat the policy played is the buyer, every counterpart a conceder.
    for episode in result.episodes:
        assert episode.agent_names["buyer"].startswith("boulware(")
        assert episode.agent_names["seller"].startswith("conceder(")
        assert episode.scenario.scenario_id.startswith("heldout:")
    row = result.by_counterpart.iloc[0]
    assert row.counterpart == "conceder" and row.n == 12
    assert row.mean_reward == pytest.approx(summary.mean_reward)
    frame = result.frame()
    assert frame.reward.tolist() == pytest.approx(rewards)
    assert set(frame.seat) == {"buyer"}


def test_the_interval_shrinks_with_more_episodes(boulware_buyer) -> None:
    small = evaluate_policy(plan(seat="buyer", counterparts=("conceder",), scenarios=4, seed=3), boulware)
    large = evaluate_policy(plan(seat="buyer", counterparts=("conceder",), scenarios=60, seed=3), boulware)
    widths = [r.summary.ci_high - r.summary.ci_low for r in (small, boulware_buyer, large)]
    assert widths[0] > widths[1] > widths[2] > 0
    assert large.summary.ci_low <= large.summary.mean_reward <= large.summary.ci_high


def test_leakage_rate_separates_the_accommodating_agent_from_boulware() -> None:
    leaky = evaluate_policy(plan(seat="buyer", scenarios=6), lambda seed: make_code_agent("accommodating", seed=seed))
    tough = evaluate_policy(plan(seat="buyer", scenarios=6), boulware)
    assert leaky.summary.leakage_rate > 0
    assert tough.summary.leakage_rate == 0
    assert all(r.outcome.roles["buyer"].leaked == ("target_price",) for r in leaky.episodes)
    assert list(leaky.by_counterpart.counterpart) == ["boulware", "conceder", "reciprocal"]
    assert (leaky.by_counterpart.leakage_rate == 1.0).all()
    assert tough.summary.mean_reward > leaky.summary.mean_reward


def test_a_broken_agent_is_all_invalid_actions_and_zero_reward() -> None:
    result = evaluate_policy(
        plan(seat="buyer", counterparts=("conceder", "boulware"), scenarios=4), lambda seed: BrokenAgent()
    )
    assert result.summary.invalid_action_rate > 0
    assert result.summary.invalid_action_rate == 1.0  # no answer of it was ever accepted
    assert result.summary.mean_reward == 0.0
    assert result.summary.agreement_rate == 0.0
    assert math.isnan(result.summary.pareto_optimal_rate)  # undefined without agreements
    assert all(e.invalid_actions > 0 and e.policy_turns == e.invalid_actions for e in result.policy_episodes)
    assert result.policy == "broken"


def test_timeouts_count_as_invalid_actions() -> None:
    result = evaluate_policy(
        plan(seat="seller", counterparts=("conceder",), scenarios=2, turn_timeout=0.01), lambda seed: SlowAgent()
    )
    assert all(e.timeouts > 0 for e in result.policy_episodes)
    assert result.summary.invalid_action_rate == 1.0


def test_alternating_seats_and_paired_counterparts() -> None:
    result = evaluate_policy(plan(counterparts=("conceder", "reciprocal"), scenarios=6, seed=1), boulware)
    assert result.seat == "alternating"
    frame = result.frame()
    assert len(frame) == 12
    for name in ("conceder", "reciprocal"):
        mine = frame[frame.counterpart == name]
        assert mine.seat.tolist() == ["buyer", "seller"] * 3
    # Both counterparts meet the same scenarios from the same side.
    by = {name: frame[frame.counterpart == name].scenario_id.tolist() for name in ("conceder", "reciprocal")}
    assert by["conceder"] == by["reciprocal"]
    for episode, view in zip(result.episodes, result.policy_episodes, strict=True):
        assert episode.agent_names[view.seat].startswith("boulware(")
        other = "seller" if view.seat == "buyer" else "buyer"
        assert episode.agent_names[other].startswith(view.counterpart)
        assert view.reward == episode.outcome.roles[view.seat].reward


def test_results_do_not_depend_on_concurrency_and_given_scenarios_work() -> None:
    scenarios = held_out_scenarios(ENV, 5, seed=9)
    serial = evaluate_policy(plan(seat="seller", scenarios=tuple(scenarios), concurrency=1), boulware)
    parallel = evaluate_policy(plan(seat="seller", scenarios=tuple(scenarios), concurrency=16), boulware)
    assert serial.frame().reward.tolist() == parallel.frame().reward.tolist()
    assert serial.scenario_source == "given(n=5)"
    assert len({e.episode_id for e in serial.episodes + parallel.episodes}) == 30  # unique across runs


def test_async_variant_runs_inside_an_event_loop() -> None:
    async def main():
        return await evaluate_policy_async(plan(seat="buyer", counterparts=("conceder",), scenarios=3), boulware)

    result = asyncio.run(main())
    assert result.summary.n == 3


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="no seat"):
        evaluate_policy(plan(seat="landlord", scenarios=1), boulware)
    with pytest.raises(ValueError, match="counterparts"):
        plan(seat="buyer", counterparts=(), scenarios=1)
    with pytest.raises(ValueError, match="no scenarios"):
        plan(seat="buyer", scenarios=())
    with pytest.raises(ValueError, match="ci method"):
        plan(seat="buyer", scenarios=1, ci_method="wald")
    with pytest.raises(ValueError, match="name the policy's seat"):
        evaluate_policy(EvaluationPlan("red-black-v0", scenarios=1), boulware)


def test_two_policies_with_one_plan_are_paired_episode_by_episode() -> None:
    shared = plan(seat="buyer", counterparts=("conceder", "reciprocal"), scenarios=10, seed=5)
    tough = evaluate_policy(shared, boulware)
    soft = evaluate_policy(shared, lambda seed: make_code_agent("accommodating", seed=seed))
    assert [e.pair_key for e in tough.policy_episodes] == [e.pair_key for e in soft.policy_episodes]
    diff = paired_difference(tough, soft)
    expected = np.mean([a.reward - b.reward for a, b in zip(tough.policy_episodes, soft.policy_episodes, strict=True)])
    assert diff.mean == pytest.approx(expected) and diff.n == 20
    assert diff.excludes_zero() and diff.ci_low > 0  # Boulware keeps more of the surplus than accommodating
    # The paired interval is narrower than the difference of the two marginal intervals suggests.
    assert diff.ci_high - diff.ci_low < (tough.summary.ci_high - tough.summary.ci_low) + (
        soft.summary.ci_high - soft.summary.ci_low
    )
    other = evaluate_policy(plan(seat="buyer", counterparts=("conceder",), scenarios=10, seed=5), boulware)
    with pytest.raises(ValueError, match="not paired"):
        paired_difference(tough, other)


# ------------------------------------------------------------------------------------- bootstrap statistics
def test_paired_difference_on_a_hand_made_example() -> None:
    # Three scenarios, two episodes each; policy a beats b by exactly 0.1 on every episode.
    keys = [(s, c) for s in "xyz" for c in (1, 2)]
    b = {k: 0.2 + 0.3 * i for i, k in enumerate(keys)}
    a = {k: v + 0.1 for k, v in b.items()}
    clusters = {k: k[0] for k in keys}
    same = paired_from_dicts(a, b, clusters)
    assert same.mean == pytest.approx(0.1) and same.ci_low == pytest.approx(0.1) and same.ci_high == pytest.approx(0.1)
    assert (same.n, same.clusters) == (6, 3)
    # Differences of +0.3 in scenario x, 0 in y, -0.3 in z: the mean is 0 and the interval spans it.
    mixed = {k: b[k] + {"x": 0.3, "y": 0.0, "z": -0.3}[k[0]] for k in keys}
    spread = paired_from_dicts(mixed, b, clusters)
    assert spread.mean == pytest.approx(0.0, abs=1e-12)
    assert spread.ci_low < 0 < spread.ci_high and not spread.excludes_zero()
    # Resampling whole scenarios: every bootstrap mean is an average of the three scenario means.
    assert spread.ci_low >= -0.3 - 1e-12 and spread.ci_high <= 0.3 + 1e-12
    with pytest.raises(ValueError, match="not paired"):
        paired_from_dicts(a, {k: v for k, v in b.items() if k != ("x", 1)}, clusters)


def test_clustered_bootstrap_is_wider_than_treating_correlated_episodes_as_independent() -> None:
    rng = np.random.default_rng(0)
    scenario_effect = rng.normal(0, 0.3, size=12)
    values = [float(np.clip(0.5 + scenario_effect[s] + rng.normal(0, 0.05), 0, 1)) for s in range(12) for _ in range(4)]
    clusters = [s for s in range(12) for _ in range(4)]
    clustered = mean_estimate(values, clusters, (0, 1))
    naive = mean_estimate(values, None, (0, 1))
    assert clustered.ci_high - clustered.ci_low > 1.5 * (naive.ci_high - naive.ci_low)
    assert clustered.as_dict() == {
        "mean": pytest.approx(np.mean(values)),
        "ci_low": pytest.approx(clustered.ci_low),
        "ci_high": pytest.approx(clustered.ci_high),
        "n": 48,
    }


def test_a_t_or_normal_interval_near_zero_is_clipped_to_the_reward_range() -> None:
    """mean +- q x sem leaves [0, 1] near its ends; the clip keeps it there. (A percentile bootstrap of a [0, 1]
    mean cannot leave [0, 1] at all, so it cannot show the clip.)"""
    from models.evaluation.policy import PolicyEpisode, summarise

    rewards = [0.0] * 9 + [0.9]  # mean 0.09, sem 0.09: 0.09 - 2.262 x 0.09 < 0
    for method in ("t", "normal"):
        raw_low, raw_high = confidence_interval(rewards, method=method)
        low, high = confidence_interval(rewards, method=method, bounds=(0.0, 1.0))
        assert raw_low < -0.05
        assert low == 0.0 and high == pytest.approx(raw_high) and 0.2 < high < 1.0
    t_half = t_quantile(0.975, 9) * 0.09
    assert confidence_interval(rewards, method="t")[0] == pytest.approx(0.09 - t_half)
    # Near 1 the upper end is clipped.
    assert confidence_interval([1.0 - r for r in rewards], method="t", bounds=(0.0, 1.0))[1] == 1.0
    # The evaluation summary's t interval is a reward range.
    episodes = [
        PolicyEpisode(
            episode_id=f"e{i}",
            counterpart="boulware",
            seat="buyer",
            scenario_id=f"s{i}",
            seed=i,
            reward=r,
            utility=r,
            agreement=True,
            pareto_optimal=None,
            invalid_actions=0,
            policy_turns=1,
            leaked=(),
            timeouts=0,
            rounds=2,
            scenario_index=i,
        )
        for i, r in enumerate(rewards)
    ]
    summary = summarise(episodes, ci_method="t")
    assert summary.ci_low == 0.0 and summary.ci_high == pytest.approx(confidence_interval(rewards, method="t")[1])


def test_mean_estimate_of_one_value_has_no_interval_and_is_json_safe() -> None:
    single = mean_estimate([0.4], None, (0.0, 1.0))
    assert single.mean == 0.4 and math.isnan(single.ci_low)
    assert single.as_dict() == {"mean": 0.4, "ci_low": None, "ci_high": None, "n": 1}
    import json

    json.loads(json.dumps(single.as_dict()), parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))


def test_ratio_estimate_is_the_ratio_of_sums_with_a_cluster_bootstrap() -> None:
    # Two clusters whose own ratios differ (0.9 on a tiny denominator, 0.2 on a large one): the mean of the
    # ratios is 0.55, the ratio of the sums (0.009 + 0.1) / (0.01 + 0.5) = 0.2137.
    num = [0.0045, 0.0045, 0.05, 0.05]
    den = [0.005, 0.005, 0.25, 0.25]
    clusters = ["a", "a", "b", "b"]
    estimate = ratio_estimate(num, den, clusters)
    assert estimate.mean == pytest.approx(0.109 / 0.51)
    assert (estimate.n, estimate.clusters) == (4, 2)
    # Every resampled ratio is a denominator-weighted mean of the cluster ratios 0.9 and 0.2.
    assert 0.2 - 1e-12 <= estimate.ci_low <= estimate.mean <= estimate.ci_high <= 0.9 + 1e-12
    assert estimate.ci_low == pytest.approx(0.2) and estimate.ci_high > estimate.mean
    # Proportional numerators: every resample gives the same ratio.
    flat = ratio_estimate([0.05, 0.1, 0.2], [0.1, 0.2, 0.4], ["x", "y", "z"])
    assert (flat.mean, flat.ci_low, flat.ci_high) == pytest.approx((0.5, 0.5, 0.5))
    assert math.isnan(ratio_estimate([0.1, 0.2], [0.3, -0.3]).mean)  # nothing to divide by
    assert math.isnan(ratio_estimate([0.1, 0.2], [0.3, 0.1], ["one", "one"]).ci_low)  # one cluster: no interval
    with pytest.raises(ValueError, match="2 numerators, 1 denominators"):
        ratio_estimate([0.1, 0.2], [0.3])


def test_correlation_estimate_has_the_known_sign() -> None:
    rng = np.random.default_rng(1)
    skill = rng.uniform(0, 1, size=60)
    reward = np.clip(0.8 * skill + rng.normal(0, 0.1, size=60), 0, 1)
    positive = correlation_estimate(skill, reward)
    assert positive.mean > 0.8 and positive.ci_low > 0.5
    negative = correlation_estimate(skill, 1 - reward)
    assert negative.mean < -0.8 and negative.ci_high < -0.5
    noise = correlation_estimate(skill, rng.uniform(0, 1, size=60))
    assert noise.ci_low < 0 < noise.ci_high
    assert math.isnan(correlation_estimate([1, 1, 1, 1], [0, 1, 2, 3]).mean)


# ---------------------------------------------------------------------------------------------- tables
def test_summary_rows_round_trip_through_the_table_store(tmp_path: Path, boulware_buyer) -> None:
    rows = summary_rows(boulware_buyer, policy_name="boulware", run_id="eval-1")
    assert [r["counterpart"] for r in rows] == ["*", "conceder"]
    assert all(list(r) == list(EVALUATIONS_COLUMNS) for r in rows)
    store = TableStore(tmp_path, schemas=EVALUATION_TABLES)
    store_evaluation(store, boulware_buyer, policy_name="boulware", run_id="eval-1")
    table = store.query("SELECT * FROM evaluations WHERE run_id = 'eval-1' ORDER BY counterpart")
    assert table.counterpart.tolist() == ["*", "conceder"]
    pooled = table.iloc[0]
    assert pooled.mean_reward == pytest.approx(boulware_buyer.summary.mean_reward)
    assert pooled.ci_low == pytest.approx(boulware_buyer.summary.ci_low)
    assert (pooled.n, pooled.seat, pooled.env_id, pooled.policy_name) == (12, "buyer", ENV, "boulware")
    roles = store.query("SELECT avg(reward) AS r FROM episode_roles WHERE run_id = 'eval-1' AND agent_id = 'buyer'")
    assert roles.r[0] == pytest.approx(boulware_buyer.summary.mean_reward)
    without = {k: v for k, v in EVALUATION_TABLES.items() if k != "evaluations"}
    with pytest.raises(KeyError, match="evaluations"):
        store_evaluation(TableStore(tmp_path, schemas=without), boulware_buyer, "boulware", "eval-2")


# ------------------------------------------------------------------------------------ real-data scenarios
@pytest.mark.parametrize("env_id", ["craigslist-v0", "marketplace-v0", "calendar-v0", "dnd-v0", "casino-v0"])
def test_real_data_scenarios_load_and_split_by_content(env_id: str) -> None:
    from models.evaluation.scenarios import dataset_scenarios

    pool = dataset_scenarios(env_id)
    if pool is None:
        pytest.skip("the shared data is not beside this checkout")
    held = held_out_scenarios(env_id, 12, seed=0, source="dataset")
    train = training_scenarios(env_id, 40, seed=0, source="dataset")
    assert held == held_out_scenarios(env_id, 12, seed=0, source="dataset")  # deterministic
    assert all(is_held_out(env_id, s) for s in held) and not any(is_held_out(env_id, s) for s in train)
    assert not {scenario_key(env_id, s) for s in held} & {scenario_key(env_id, s) for s in train}
    # Real records keep their dataset ids, and nothing generated slips in.
    assert not any(s.scenario_id.startswith(("gen:", "heldout:")) for s in held + train)
    assert {s.scenario_id for s in held} <= {s.scenario_id for s in pool}


def test_a_domain_without_its_data_falls_back_to_the_generator(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from models.evaluation import scenarios

    monkeypatch.setenv("SOCIALRL_SHARED_DATA", str(tmp_path))  # an empty data folder
    scenarios.dataset_scenarios.cache_clear()
    try:
        assert scenarios.dataset_scenarios("craigslist-v0") is None
        held = held_out_scenarios("craigslist-v0", 3, seed=0, source="dataset")
        assert [s.scenario_id for s in held] == [s.scenario_id for s in held_out_scenarios("craigslist-v0", 3, seed=0)]
        assert held_out_scenarios("job-interview-v0", 2, source="dataset")[0].scenario_id.startswith("heldout:")
    finally:
        scenarios.dataset_scenarios.cache_clear()
    with pytest.raises(ValueError, match="scenario source"):
        held_out_scenarios("craigslist-v0", 1, source="web")
