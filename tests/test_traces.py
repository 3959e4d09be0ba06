"""Teacher traces: the teacher's play rendered exactly as an LLM agent in the seat would see it."""

from __future__ import annotations

import pytest

from agents.socialrl.teacher import make_teacher
from agents.traces import collect_traces, filter_traces
from environments import make, sample_scenarios


@pytest.fixture(scope="module")
def craigslist_traces() -> list:
    return collect_traces("craigslist-v0", sample_scenarios("craigslist-v0", 3, seed=4), make_teacher, seed=1)


def test_every_seat_of_every_scenario_is_traced_with_alternating_chat(craigslist_traces: list) -> None:
    assert len(craigslist_traces) == 6  # 3 scenarios x 2 seats
    assert {t.seat for t in craigslist_traces} == {"buyer", "seller"}
    for trace in craigslist_traces:
        roles = [m["role"] for m in trace.messages]
        assert roles[0] == "system"
        assert roles[1:] == ["user", "assistant"] * (len(roles[1:]) // 2)  # strictly alternating
        assert 0.0 <= trace.unclamped_reward <= 1.0 and trace.reward == trace.unclamped_reward
        assert not trace.leaked


def test_the_system_prompt_holds_the_seat_private_facts_and_grammar(craigslist_traces: list) -> None:
    buyer = next(t for t in craigslist_traces if t.seat == "buyer")
    system = buyer.messages[0]["content"]
    assert "private target price" in system and "OFFER $<price>" in system
    seller = next(t for t in craigslist_traces if t.seat == "seller")
    assert "private target price" not in seller.messages[0]["content"]  # the buyer's facts stay with the buyer


def test_assistant_turns_are_the_teacher_texts_and_parse(craigslist_traces: list) -> None:
    env = make("craigslist-v0")
    trace = craigslist_traces[0]
    env.reset(sample_scenarios("craigslist-v0", 3, seed=4)[0])
    for message in trace.messages:
        if message["role"] == "assistant":
            parsed = env.parse(trace.seat, message["content"])
            assert getattr(parsed, "kind", None) in {"message", "offer", "accept", "reject", "quit"}
    assert len(trace.reasoning) == sum(m["role"] == "assistant" for m in trace.messages)
    assert all({"infer", "act", "anticipate"} <= set(r) for r in trace.reasoning)


def test_filters_and_summary(craigslist_traces: list) -> None:
    assert len(filter_traces(craigslist_traces, min_reward=1.01)) == 0
    kept = filter_traces(craigslist_traces, min_reward=0.0)
    assert len(kept) == len(craigslist_traces)
    from models.evaluation.stats import mean_estimate
    from models.socialrl.stage1 import trace_summary

    summary = trace_summary(craigslist_traces)
    rewards = [t.reward for t in craigslist_traces]
    assert summary["n"] == 6 and summary["mean_reward"] == pytest.approx(sum(rewards) / 6)
    assert 0.0 <= summary["ci_low"] < summary["mean_reward"] < summary["ci_high"] <= 1.0
    # Both seats of one scenario share its price: the interval resamples scenarios, not episodes.
    clustered = mean_estimate(rewards, [t.scenario_id for t in craigslist_traces], (0.0, 1.0))
    assert (summary["ci_low"], summary["ci_high"]) == pytest.approx((clustered.ci_low, clustered.ci_high))
    assert trace_summary([]) == {"n": 0}


def test_only_the_traced_seats_are_collected_with_the_same_seeds_and_counterparts(craigslist_traces: list) -> None:
    buyers = collect_traces(
        "craigslist-v0", sample_scenarios("craigslist-v0", 3, seed=4), make_teacher, seed=1, traced_seats=("buyer",)
    )
    assert [t.seat for t in buyers] == ["buyer"] * 3
    both = [t for t in craigslist_traces if t.seat == "buyer"]
    # The same episodes as when both seats are traced: tracing a seat does not change who plays whom.
    assert [(t.counterpart, t.messages, t.reward) for t in buyers] == [
        (t.counterpart, t.messages, t.reward) for t in both
    ]
    with pytest.raises(ValueError, match="cannot trace seats"):
        collect_traces("craigslist-v0", sample_scenarios("craigslist-v0", 1, 0), make_teacher, traced_seats=("pilot",))
