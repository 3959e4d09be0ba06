"""Recorded episodes as training sequences, shared by the PPO and MOPD learners.

`episode_samples` turns one episode's recorded calls of a seat (engine prompt and completion token ids with
per-token log-probs, never re-tokenised text) into `Segment`s: each maximal prefix-stable run of turns (turn
k+1's prompt starts with turn k's prompt + completion) is one packed sequence with the agent's tokens marked.
`pad_segments` and `micro_batches` batch them; `predicting_logits` runs a causal LM over a batch with only the
positions that predict an agent token going through its LM head.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class RecordedTurn:
    """One recorded LLM call of the learning seat."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    """Engine log-prob of each completion token."""

    def __post_init__(self) -> None:
        if len(self.completion_ids) != len(self.logprobs):
            raise ValueError(
                f"{len(self.completion_ids)} completion tokens but {len(self.logprobs)} log-probs recorded"
            )
        if not self.prompt_ids:
            raise ValueError("a recorded turn needs its prompt token ids")


@dataclass
class Segment:
    """A token sequence with the positions of the agent's own tokens."""

    input_ids: list[int]
    agent_positions: list[int]
    """Indices j in input_ids of agent-generated tokens (predicted from position j - 1)."""
    old_logprobs: list[float]
    """Engine log-prob of each agent token, aligned with agent_positions."""
    turn_lengths: list[int] = field(default_factory=list)
    """Agent tokens of each turn in this segment, in order (sums to len(agent_positions)); empty = one turn."""

    def turns(self) -> list[int]:
        return self.turn_lengths or [len(self.agent_positions)]


@dataclass
class EpisodeSample:
    """One episode of the learning seat: its segments and the terminal reward."""

    episode_id: str
    segments: list[Segment]
    reward: float
    packed: bool
    """Whether the whole episode is one packed sequence."""
    baseline: float = 0.0
    """With group advantages: the mean reward of the other episodes of its group (0 otherwise)."""


def is_prefix_stable(turns: Sequence[RecordedTurn]) -> bool:
    """Whether every turn's prompt starts with the previous turn's prompt + completion."""
    for previous, current in itertools.pairwise(turns):
        prefix = previous.prompt_ids + previous.completion_ids
        if current.prompt_ids[: len(prefix)] != prefix:
            return False
    return True


def prefix_stable_runs(turns: Sequence[RecordedTurn]) -> list[list[RecordedTurn]]:
    """`turns` split into maximal runs in which each prompt extends the previous prompt + completion."""
    runs: list[list[RecordedTurn]] = []
    for turn in turns:
        if runs and is_prefix_stable([runs[-1][-1], turn]):
            runs[-1].append(turn)
        else:
            runs.append([turn])
    return runs


def episode_samples(episode_id: str, turns: Sequence[RecordedTurn], reward: float, pack: bool = True) -> EpisodeSample:
    """Build the training view of an episode (see the module docstring)."""
    if not turns:
        raise ValueError(f"episode {episode_id}: no recorded turns for the learning seat")
    turns = [t for t in turns if t.completion_ids]
    if not turns:
        raise ValueError(f"episode {episode_id}: every recorded completion is empty")
    runs = prefix_stable_runs(turns) if pack else [[t] for t in turns]
    segments = []
    for run in runs:
        last = run[-1]
        positions, logprobs, lengths = [], [], []
        for turn in run:
            start = len(turn.prompt_ids)
            positions += list(range(start, start + len(turn.completion_ids)))
            logprobs += list(turn.logprobs)
            lengths.append(len(turn.completion_ids))
        segments.append(Segment(list(last.prompt_ids + last.completion_ids), positions, logprobs, lengths))
    return EpisodeSample(episode_id, segments, float(reward), packed=pack and len(segments) == 1)


def pad_segments(
    segments: Sequence[Segment], pad_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s.input_ids) for s in segments)
    ids = torch.full((len(segments), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(segments), width), dtype=torch.long)
    for row, segment in enumerate(segments):
        ids[row, : len(segment.input_ids)] = torch.tensor(segment.input_ids)
        mask[row, : len(segment.input_ids)] = 1
    return ids.to(device), mask.to(device)


def micro_batches(segments: Sequence[Segment], max_tokens: int) -> list[tuple[int, int]]:
    """Consecutive [start, end) ranges of `segments` whose padded size (count x longest) is at most
    `max_tokens`; a segment longer than that goes alone."""
    ranges: list[tuple[int, int]] = []
    start, width = 0, 0
    for i, segment in enumerate(segments):
        wider = max(width, len(segment.input_ids))
        if i > start and wider * (i - start + 1) > max_tokens:
            ranges.append((start, i))
            start, wider = i, len(segment.input_ids)
        width = wider
    if segments:
        ranges.append((start, len(segments)))
    return ranges


def predicting_logits(
    model: nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    positions: Sequence[Sequence[int]],
    **forward_kwargs: Any,
) -> tuple[list[torch.Tensor], Any]:
    """The logits predicting each listed token position of each row ((len(positions[i]), V) per row, in the
    model's dtype: the logits at position j - 1 predict token j) and the model's output (`forward_kwargs`
    go to the forward, e.g. `output_hidden_states`). Only the predicting positions go through the LM head
    (transformers' `logits_to_keep`, the union over the rows): a sequence's full logits are seq x vocab and
    most of a sequence is prompt. For SmolLM2 (576 wide, 49,152 tokens) the head is a fifth of a forward pass's
    matmuls; for the tests' tiny model it is nearly all of it."""
    keep = sorted({p - 1 for wanted in positions for p in wanted})
    column = {p: i for i, p in enumerate(keep)}
    kept = torch.tensor(keep, dtype=torch.long, device=ids.device)
    out = model(input_ids=ids, attention_mask=mask, logits_to_keep=kept, **forward_kwargs)
    rows = []
    for row, wanted in enumerate(positions):
        index = torch.tensor([column[p - 1] for p in wanted], dtype=torch.long, device=out.logits.device)
        rows.append(out.logits[row, index])
    return rows, out
