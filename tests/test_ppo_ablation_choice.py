"""The PPO ablation's choice of arm (benchmarks/bench_ppo_ablation.py `choose_arm`): the profile switches to
the value head only on a paired difference whose interval lies above 0, and says why either way."""

from __future__ import annotations

from benchmarks.bench_ppo_ablation import CHALLENGER_ARM, PROFILE_ARM, choose_arm

KEY = f"{CHALLENGER_ARM} - {PROFILE_ARM}"
ARMS = {PROFILE_ARM: {}, CHALLENGER_ARM: {}}


def diff(mean: float, low: float, high: float) -> dict[str, float]:
    return {"mean": mean, "ci_low": low, "ci_high": high, "n": 48}


def test_the_value_head_is_chosen_only_when_its_paired_interval_lies_above_zero():
    chosen = choose_arm(ARMS, {KEY: diff(0.08, 0.02, 0.15)})
    assert chosen["arm"] == CHALLENGER_ARM
    assert "+0.080 [+0.020, +0.150]" in chosen["why"]


def test_a_better_mean_with_an_interval_across_zero_keeps_the_profile_arm():
    chosen = choose_arm(ARMS, {KEY: diff(0.08, -0.01, 0.15)})
    assert chosen["arm"] == PROFILE_ARM
    assert "does not beat" in chosen["why"]
    assert choose_arm(ARMS, {KEY: diff(-0.05, -0.12, -0.01)})["arm"] == PROFILE_ARM


def test_without_both_arms_paired_nothing_is_decided():
    assert choose_arm({PROFILE_ARM: {}}, {})["why"].startswith("not decided")
    assert choose_arm(ARMS, {})["why"].startswith("not decided")
