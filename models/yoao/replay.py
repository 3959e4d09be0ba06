"""Asking a served model the turns of recorded conversations: each turn's context (everything before it) as a chat
request, the recorded reply kept beside the model's. Shared by the warm-starts' replay (models/yoao/imitation.py)
and the listener probe (models/yoao/listening.py)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import httpx

log = logging.getLogger("socialrl.yoao")

Message = Mapping[str, str]


@dataclass(frozen=True)
class ReplayTurn:
    """One assistant turn of a held-out conversation: its context and what the teacher answered."""

    conversation: int
    context: tuple[Message, ...]
    teacher: str
    kind: str
    """"vote" or "opinion"."""
    frame: str


async def ask_turns(
    turns: Sequence[ReplayTurn], base_url: str, model: str, max_tokens: int, temperature: float,
    api_key: str | None, concurrency: int, seeds: Sequence[int] | None = None, label: str | None = None,
) -> list[str]:  # fmt: skip
    """Each turn's context asked of `model` (`seeds[i]` the sampling seed of turn i, default i); a failed call
    answers "" (counted as an invalid reply, like a failed call in the game). With `label`, one progress line
    per quarter of the turns answered."""
    if seeds is not None and len(seeds) != len(turns):
        raise ValueError(f"{len(seeds)} seeds for {len(turns)} turns")
    gate = asyncio.Semaphore(concurrency)
    start, answered = time.perf_counter(), 0
    marks = {math.ceil(len(turns) * q / 4) for q in (1, 2, 3, 4)}
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(timeout=600.0) as client:

        async def one(i: int, turn: ReplayTurn) -> str:
            body = {
                "model": model,
                "messages": [dict(m) for m in turn.context],
                "max_tokens": max_tokens,
                "temperature": temperature,
                "seed": i if seeds is None else int(seeds[i]),
            }
            async with gate:
                try:
                    response = await client.post(f"{base_url.rstrip('/')}/chat/completions", json=body, headers=headers)
                    response.raise_for_status()
                    return response.json()["choices"][0]["message"]["content"] or ""
                except (httpx.HTTPError, KeyError, IndexError, ValueError):
                    return ""
                finally:
                    nonlocal answered
                    answered += 1
                    if label and answered in marks:
                        elapsed = time.perf_counter() - start
                        log.info("%s: %d/%d answered, %.0f s (%.2f/s)", label, answered, len(turns), elapsed,
                                 answered / elapsed)  # fmt: skip

        return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(turns))))
