"""Counting a YOAO run's calls in the tokens the engine computed (benchmarks/yoao_call_costs.py)."""

from __future__ import annotations

import json

from benchmarks.yoao_call_costs import Call, calls_of, costs, game_seconds, new_prompt_tokens
from environments.yoao.red_black import VOTE_REQUEST


def test_a_seats_next_call_recomputes_only_past_the_whole_blocks_it_shares() -> None:
    first = Call(conversation="g/A0", kind="statement", prompt=tuple(range(70)), completion=(900, 901))
    # The next prompt repeats the first prompt and its completion, then 10 new tokens: 72 shared, 64 in blocks.
    second = Call(conversation="g/A0", kind="vote", prompt=(*range(70), 900, 901, *range(500, 510)), completion=(7,))
    other_seat = Call(conversation="g/A1", kind="statement", prompt=tuple(range(70)), completion=(5,))
    assert new_prompt_tokens([first, second, other_seat], block=32) == [70, 82 - 64, 70]
    # A prompt that rewrote the earlier turn (a re-rendered reply) shares only up to where it differs.
    rewritten = Call(conversation="g/A0", kind="vote", prompt=(*range(40), 1, *range(41, 80)), completion=())
    assert new_prompt_tokens([first, rewritten], block=32) == [70, 80 - 32]
    totals = costs([first, second, other_seat], block=32)
    assert totals["all"] == {"calls": 3, "prompt_tokens": 222, "new_prompt_tokens": 158, "completion_tokens": 4,
                             "computed_tokens": 162}  # fmt: skip
    assert totals["vote"]["calls"] == 1 and totals["statement"]["new_prompt_tokens"] == 140


def test_recorded_rows_become_calls_by_their_last_message() -> None:
    def row(content: str, prompt: list[int] | None) -> dict:
        messages = json.dumps([{"role": "system", "content": "s"}, {"role": "user", "content": content}])
        return {"episode_id": "e", "agent_id": "A0", "request_messages": messages, "prompt_token_ids": prompt,
                "completion_token_ids": [1] if prompt is not None else None}  # fmt: skip

    calls = calls_of([row("Round 1: share your opinion.", [1, 2]), row(f"A1: hi\n{VOTE_REQUEST}.", [1, 2, 3]),
                      row("failed", None)])  # fmt: skip
    assert [c.kind for c in calls] == ["statement", "vote"] and calls[1].conversation == "e/A0"
    assert (
        game_seconds({"wall_s": {"propagation_by_seed_count": 100.0, "propagation_mute": 2.5, "yoao_seed_agent": 9}})
        == 102.5
    )
