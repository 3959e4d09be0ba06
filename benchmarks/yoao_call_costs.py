"""Where a YOAO run's game time goes: its recorded LLM calls counted in tokens the engine had to compute.

A `make yoao` run's games are prefill-bound (docs/yoao.md): every call re-sends its seat's whole conversation
and the prefix cache serves what the seat's previous call already computed. This reads a finished run's
`recorded_calls` table (the propagation experiments' episodes) and counts, per kind of call (discussion
statement, vote):

| measure | definition |
| --- | --- |
| `prompt_tokens` | prompt tokens sent |
| `new_prompt_tokens` | prompt tokens beyond the longest prefix shared with the same seat's previous call (its prompt and completion), whole 32-token blocks only, as vLLM's prefix cache serves them on CPU (block size 32): what the engine recomputed if nothing was evicted and nothing was shared across seats (a bound from above on the first, from below on neither) |
| `completion_tokens` | tokens generated |
| `computed_tokens` | `new_prompt_tokens + completion_tokens`: the work the games' wall time paid for |

With the asset times of the run's result file (`wall_s`), it gives the computed tokens per second of the
propagation games, and what the games' share of a time budget allows at that rate.

    python -m benchmarks.yoao_call_costs --data <the run's data dir> --run-results benchmarks/results/yoao_cpu.json \\
        [--budget-min 75] [--result benchmarks/results/yoao_call_costs_cpu.json]

Code only, reading Parquet with DuckDB (models/storage.py): seconds.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from environments.yoao.red_black import VOTE_REQUEST
from models.storage import TableStore

RESULTS = Path(__file__).resolve().parent / "results"
BLOCK = 32
"""vLLM's prefix-cache block on CPU (the cpu profile's `block_size`): only whole blocks are served from cache."""
GAME_ASSETS = ("propagation_by_seed_count", "propagation_mute", "propagation_persistence",
               "propagation_prompting_baseline")  # fmt: skip
"""The assets whose wall time is the propagation games'."""


@dataclass(frozen=True, kw_only=True)
class Call:
    """One recorded call of a seat's conversation, in order."""

    conversation: str
    """Episode and seat."""
    kind: str
    """"vote" (the request ends with the vote request) or "statement"."""
    prompt: tuple[int, ...]
    completion: tuple[int, ...]


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def new_prompt_tokens(calls: Sequence[Call], block: int = BLOCK) -> list[int]:
    """Per call (in order), its prompt tokens beyond the whole blocks it shares with its seat's previous call's
    prompt and completion (module docstring)."""
    previous: dict[str, tuple[int, ...]] = {}
    out = []
    for call in calls:
        before = previous.get(call.conversation, ())
        cached = shared_prefix(before, call.prompt) // block * block
        out.append(len(call.prompt) - cached)
        previous[call.conversation] = call.prompt + call.completion
    return out


def costs(calls: Sequence[Call], block: int = BLOCK) -> dict[str, dict[str, int]]:
    """Kind -> {calls, prompt_tokens, new_prompt_tokens, completion_tokens, computed_tokens}, and "all"."""
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for call, new in zip(calls, new_prompt_tokens(calls, block), strict=True):
        for kind in (call.kind, "all"):
            t = totals[kind]
            t["calls"] += 1
            t["prompt_tokens"] += len(call.prompt)
            t["new_prompt_tokens"] += new
            t["completion_tokens"] += len(call.completion)
            t["computed_tokens"] += new + len(call.completion)
    return {kind: dict(t) for kind, t in totals.items()}


def calls_of(rows: Iterable[Mapping[str, Any]]) -> list[Call]:
    """`recorded_calls` rows (ordered by time) as calls; failed calls (no token ids) are left out."""
    out = []
    for row in rows:
        prompt, completion = row.get("prompt_token_ids"), row.get("completion_token_ids")
        if prompt is None or completion is None:
            continue
        messages = json.loads(row.get("request_messages") or "[]")
        last = messages[-1]["content"] if messages and isinstance(messages[-1], dict) else ""
        out.append(
            Call(
                conversation=f"{row['episode_id']}/{row['agent_id']}",
                kind="vote" if VOTE_REQUEST in str(last) else "statement",
                prompt=tuple(int(t) for t in prompt),
                completion=tuple(int(t) for t in completion),
            )
        )
    return out


def game_seconds(run_results: Mapping[str, Any]) -> float:
    """Wall seconds of the propagation games in a YOAO result file (`wall_s` of `GAME_ASSETS`)."""
    return float(sum(run_results.get("wall_s", {}).get(name, 0.0) for name in GAME_ASSETS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the run's data directory (tables/ under it)")
    parser.add_argument("--run-results", type=Path, required=True, help="the run's YOAO result file")
    parser.add_argument("--budget-min", type=float, default=75.0, help="the whole run's time budget, minutes")
    parser.add_argument("--result", type=Path, default=RESULTS / "yoao_call_costs_cpu.json")
    args = parser.parse_args(argv)
    run = json.loads(args.run_results.read_text())
    frame = TableStore(args.data / "tables").query(
        "SELECT episode_id, agent_id, request_messages, prompt_token_ids, completion_token_ids "
        "FROM recorded_calls WHERE episode_id LIKE 'propagation%' ORDER BY created_at"
    )
    counted = costs(calls_of(frame.to_dict("records")))
    games_s = game_seconds(run)
    other_s = float(sum(run.get("wall_s", {}).values())) - games_s
    rate = counted["all"]["computed_tokens"] / games_s if games_s else None
    left_s = args.budget_min * 60 - other_s
    out = {
        "run": {
            key: run.get(key) for key in ("env_version", "commit", "profile", "measured_at", "machine_update_tok_s")
        },
        "block": BLOCK,
        "calls": counted,
        "game_seconds": round(games_s, 1),
        "other_asset_seconds": round(other_s, 1),
        "computed_tokens_per_s": round(rate, 1) if rate else None,
        "budget_min": args.budget_min,
        "games_budget_s": round(left_s, 1),
        "games_budget_share": round(left_s / games_s, 3) if games_s and left_s > 0 else 0.0,
    }
    args.result.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
