"""What a listening counterpart reads in its partner's words (agents/socialrl/price_reading.py): stated limits
however phrased, rejections, commitments and prices, negation, and the grammar fuzz cases (capped, linear)."""

from __future__ import annotations

import gc
import time

import pytest

from agents.socialrl.price_reading import is_rejection, mentioned_price, says_final, stated_limits
from environments.core.grammar import MAX_REPLY_CHARS
from tests.adversarial import SHAPES


@pytest.mark.parametrize(
    ("text", "limits"),
    [
        ("My target is $120 and my maximum is $180.", [120.0, 180.0]),
        ("I can go up to $1,200 for it.", [1200.0]),
        ("my budget: 300", [300.0]),
        ("The most I can pay is $95.", [95.0]),
        ("Honestly $80 is my max.", [80.0]),
        ("I can't go above $70, sorry.", [70.0]),
        ("I can afford $9.50 at most", [9.5]),
        ("My limit would be around $450", [450.0]),
        ("I can go as low as $300.", [300.0]),
        ("My bottom line is $260.", [260.0]),
        # Not a limit: an offer, a price of the item, a negated statement, an unreadable number.
        ("I can offer $50.", []),
        ("It is listed at $200, would you take $150?", []),
        ("That is not my budget of $300 talking.", []),
        ("My budget is $1e308.", []),
        ("My budget is $1,50.", []),
        ("x" + "9" * 60 + " is my max", []),  # a number longer than the look-back is not read in part
    ],
)
def test_a_stated_limit_is_read_however_it_is_phrased(text: str, limits: list[float]) -> None:
    assert stated_limits(text) == limits


def test_rejections_and_commitments_and_their_negations() -> None:
    assert is_rejection("That's too high for me. OFFER $40")
    assert is_rejection("That's more than I hoped for. I can move a little.")
    assert is_rejection("That's a bit far from what I had in mind.")
    assert is_rejection("No deal at that price.")
    assert not is_rejection("That's not too high, let's talk.")
    assert not is_rejection("How about $40?")
    assert says_final("This is my final offer: $45.")
    assert says_final("Take it or leave it.")
    assert says_final("Let's close this. $22 is the best I can do, and it's my last offer.")
    assert not says_final("This is not my final offer.")
    assert not says_final("What's your final price?")  # asking for theirs commits to nothing
    assert mentioned_price("I'd do $400, or 410 dollars at most.") == 410.0
    assert mentioned_price("No numbers here") is None
    assert mentioned_price("OFFER $1e308") is None
    assert stated_limits(None) == [] and not is_rejection(None) and mentioned_price(12) is None


def _best_time(fn) -> float:
    gc.disable()
    try:
        best = float("inf")
        for _ in range(3):
            start = time.thread_time()
            fn()
            best = min(best, time.thread_time() - start)
    finally:
        gc.enable()
    return best


def _read_all(text: str) -> tuple:
    return (stated_limits(text), is_rejection(text), says_final(text), mentioned_price(text))


def test_the_grammar_fuzz_cases_read_as_their_capped_tail_in_linear_time() -> None:
    """A hostile reply is read as its last MAX_REPLY_CHARS characters, and an 8x longer (capped) text costs
    less than 32x as much in every adversarial shape of the action grammars (tests/adversarial.py)."""
    extra = {
        "my budget+spaces": lambda n: "my budget is" + " " * n + "x",
        "can go up to+digits": lambda n: "I can go up to $" + "9" * n,
        "too high repeated": lambda n: "too high " * (n // 9),
        "final offer repeated": lambda n: "final offer " * (n // 12),
        "not+final": lambda n: "not " * (n // 4) + "final offer",
    }
    for name, shape in {**SHAPES, **extra}.items():
        text = shape(100_000)
        assert _read_all(text) == _read_all(text[-MAX_REPLY_CHARS:]), name
        short, long = shape(1_000), shape(8_000)
        t_short = max(_best_time(lambda text=short: _read_all(text)), 5e-4)
        assert _best_time(lambda text=long: _read_all(text)) < 32 * t_short, name
