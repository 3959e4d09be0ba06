"""Core helpers: grammar, leakage detection, scoring, registry, scenario sampling."""

from __future__ import annotations

import pytest

from environments.core.base import PrivateFact
from environments.core.grammar import NUMBER, NumberError, clean, find_last_command, read_number
from environments.core.leakage import detect_leaks, numbers_in
from environments.core.scoring import (
    complement,
    enumerate_allocations,
    is_envy_free,
    is_pareto_optimal,
    nash_bargaining_point,
    normalise,
    pareto_frontier,
    points,
)

COMMANDS = {"offer": rf"\bOFFER\b ?:? ?(?P<price>{NUMBER})?", "accept": r"\bACCEPT\b"}


def test_last_command_wins_and_message_is_the_rest() -> None:
    match = find_last_command("I said OFFER 100 before.\n**OFFER: $1,250.50**", COMMANDS)
    assert match is not None
    assert match.kind == "offer"
    assert read_number(match.groups["price"]) == 1250.5
    assert match.message.startswith("I said OFFER 100 before.")


def test_longer_match_wins_at_the_same_position_and_none_without_command() -> None:
    assert find_last_command("nothing to see", COMMANDS) is None
    match = find_last_command("ok then, accept", COMMANDS)
    assert match is not None and match.kind == "accept"


def test_clean_and_read_number() -> None:
    assert clean("**OFFER** `5`") == "OFFER 5"
    assert read_number("$ 1,000") == 1000.0
    assert isinstance(read_number("abc"), NumberError)


def test_numbers_in_text() -> None:
    assert numbers_in("I can pay $1,200.50 or 99, not v2") == [1200.5, 99.0]


def test_leak_by_number_and_pattern_but_not_by_offered_price() -> None:
    facts = (
        PrivateFact("target", "target price", numbers=(150.0,)),
        PrivateFact("priority", "water first", patterns=(r"water is my top priority",)),
    )
    assert detect_leaks(facts, ["My budget is $150."]) == ("target",)
    assert detect_leaks(facts, ["Honestly, WATER is my top priority"]) == ("priority",)
    assert detect_leaks(facts, ["I offer 149", "maybe 1500"]) == ()
    # The number of the move itself (payload) is not a leak.
    assert detect_leaks(facts, [("I can do $150.", {"price": 150.0})]) == ()
    assert detect_leaks(facts, []) == ()


def test_enumerate_allocations_and_complement() -> None:
    counts = (1, 2)
    allocations = enumerate_allocations(counts)
    assert allocations == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert complement((1, 0), counts) == (0, 2)
    assert points((1, 2), (3, 4)) == 11.0


def test_pareto_envy_free_and_nash_by_hand() -> None:
    # Two items (1 of each). A values (6, 4), B values (2, 8).
    counts = (1, 1)
    va, vb = (6, 4), (2, 8)
    allocs = enumerate_allocations(counts)

    def ua(a: tuple[int, ...]) -> float:
        return points(a, va)

    def ub(a: tuple[int, ...]) -> float:
        return points(complement(a, counts), vb)

    # (1,0): A gets item 0 -> A 6, B 8. (1,1): A 10, B 0. (0,0): A 0, B 10. (0,1): A 4, B 2 (dominated).
    assert set(pareto_frontier(allocs, [ua, ub])) == {(0, 0), (1, 0), (1, 1)}
    assert not is_pareto_optimal((0, 1), allocs, [ua, ub])
    assert is_envy_free((1, 0), counts, va, vb)
    assert not is_envy_free((1, 1), counts, va, vb)
    assert nash_bargaining_point(allocs, [ua, ub]) == (1, 0)  # 6 * 8 = 48 is the largest product
    with pytest.raises(ValueError):
        nash_bargaining_point([], [ua, ub])


def test_normalise_clips() -> None:
    assert normalise(5, 10) == 0.5
    assert normalise(15, 10) == 1.0
    assert normalise(-1, 10) == 0.0
    assert normalise(3, 10, floor=2) == pytest.approx(1 / 8)
