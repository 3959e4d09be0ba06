"""The learner half of multi-turn PPO with a critic: batches from recorded calls, GAE, the PPO update.

TRL 1.16 has no PPOTrainer, and its GRPO/RLOO trainers generate single-turn completions themselves, so
multi-turn PPO over engine-recorded episodes with a separate critic model is written here.

Data flow: the rollout proxy records each LLM call with the engine's prompt and completion token ids and
per-token log-probs; `episode_samples` turns one episode's calls (one seat, in turn order) plus the
episode's terminal reward into `EpisodeSample`s without re-tokenising any text. When the chat template is
prefix-stable (turn k+1's prompt starts with turn k's prompt + completion, checked on the recorded ids)
the episode is one packed sequence with only the agent's completion tokens in the loss. Where it is not
(a re-tokenised reply, or a prompt the LLM agent shortened to fit the context), a new segment starts:
each maximal prefix-stable run of turns is one packed segment. Either way GAE runs over the agent's tokens across all its turns (environment
tokens are masked), with the outcome-only reward on the last agent token.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from models.training.config import PPOHyper


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


@dataclass
class EpisodeSample:
    """One episode of the learning seat: its segments and the terminal reward."""

    episode_id: str
    segments: list[Segment]
    reward: float
    packed: bool
    """Whether the whole episode is one packed sequence."""


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
        positions, logprobs = [], []
        for turn in run:
            start = len(turn.prompt_ids)
            positions += list(range(start, start + len(turn.completion_ids)))
            logprobs += list(turn.logprobs)
        segments.append(Segment(list(last.prompt_ids + last.completion_ids), positions, logprobs))
    return EpisodeSample(episode_id, segments, float(reward), packed=pack and len(segments) == 1)


def gae(rewards: torch.Tensor, values: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over one chain of agent tokens (value after the last is 0)."""
    advantages = torch.zeros_like(values)
    running = torch.zeros((), dtype=values.dtype)
    for t in range(len(values) - 1, -1, -1):
        next_value = values[t + 1] if t + 1 < len(values) else torch.zeros((), dtype=values.dtype)
        delta = rewards[t] + gamma * next_value - values[t]
        running = delta + gamma * lam * running
        advantages[t] = running
    return advantages, advantages + values


class ValueModel(nn.Module):
    """The critic: a causal-LM backbone with a scalar value head on every position."""

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_pretrained(cls, model_dir: Path) -> ValueModel:
        from transformers import AutoModel

        backbone = AutoModel.from_pretrained(model_dir, dtype=torch.float32)
        return cls(backbone, backbone.config.hidden_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(hidden).squeeze(-1)


def _pad(segments: Sequence[Segment], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s.input_ids) for s in segments)
    ids = torch.full((len(segments), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(segments), width), dtype=torch.long)
    for row, segment in enumerate(segments):
        ids[row, : len(segment.input_ids)] = torch.tensor(segment.input_ids)
        mask[row, : len(segment.input_ids)] = 1
    return ids, mask


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


def token_logprobs(
    model: nn.Module,
    segments: Sequence[Segment],
    pad_id: int,
    temperature: float = 1.0,
    allowed_token_ids: Sequence[int] | None = None,
) -> list[torch.Tensor]:
    """Log-prob of every agent token of every segment under `model` (a causal LM), for the distribution the
    engine samples from: logits divided by `temperature` and, when given, restricted to
    `allowed_token_ids` (the engine's processed log-probs, see models.serving.engine.EngineConfig.logprobs_mode)."""
    ids, mask = _pad(segments, pad_id)
    logits = model(input_ids=ids, attention_mask=mask).logits
    blocked = None
    if allowed_token_ids is not None:
        blocked = torch.ones(logits.shape[-1], dtype=torch.bool)
        blocked[list(allowed_token_ids)] = False
    out = []
    for row, segment in enumerate(segments):
        positions = torch.tensor(segment.agent_positions)
        # Only the agent positions go to float32 (a whole sequence's logits are seq x vocab).
        scaled = logits[row, positions - 1].float() / temperature
        if blocked is not None:
            scaled = scaled.masked_fill(blocked, float("-inf"))
        logp = torch.log_softmax(scaled, dim=-1)
        out.append(logp.gather(-1, ids[row, positions].unsqueeze(-1)).squeeze(-1))
    return out


def token_values(critic: ValueModel, segments: Sequence[Segment], pad_id: int) -> list[torch.Tensor]:
    """Critic value before each agent token (read at the preceding position)."""
    ids, mask = _pad(segments, pad_id)
    values = critic(ids, mask)
    return [values[row, torch.tensor(s.agent_positions) - 1] for row, s in enumerate(segments)]


@dataclass
class PreparedEpisode:
    """An episode with everything the update needs, computed once per iteration."""

    sample: EpisodeSample
    old_logprobs: list[torch.Tensor]
    old_values: list[torch.Tensor]
    advantages: list[torch.Tensor] = field(default_factory=list)
    returns: list[torch.Tensor] = field(default_factory=list)


class PPOLearner:
    """Holds actor (PEFT model), critic and their optimisers; prepares batches and runs updates."""

    def __init__(
        self,
        actor: nn.Module,
        critic: ValueModel,
        hyper: PPOHyper,
        pad_id: int,
        bf16: bool = False,
        temperature: float = 1.0,
        allowed_token_ids: Sequence[int] | None = None,
    ) -> None:
        self.actor, self.critic, self.hyper, self.pad_id, self.bf16 = actor, critic, hyper, pad_id, bf16
        if temperature <= 0:
            raise ValueError(f"PPO needs a sampling temperature > 0, got {temperature}")
        self.temperature = temperature
        """The rollouts' sampling temperature: the policy being optimised is the tempered one."""
        self.allowed_token_ids = list(allowed_token_ids) if allowed_token_ids is not None else None
        """Tokens the rollouts may sample (vLLM's allowed_token_ids); None = the whole vocabulary."""
        self.actor_optimizer = torch.optim.AdamW([p for p in actor.parameters() if p.requires_grad], lr=hyper.actor_lr)
        self.critic_optimizer = torch.optim.AdamW(critic.parameters(), lr=hyper.critic_lr)

    def _autocast(self) -> Any:
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16)

    @torch.no_grad()
    def prepare(self, samples: Sequence[EpisodeSample]) -> tuple[list[PreparedEpisode], dict[str, float]]:
        """Old log-probs, values, GAE advantages and returns; plus the engine/trainer log-prob mismatch."""
        prepared, diffs = [], []
        self.actor.eval()
        self.critic.eval()
        for sample in samples:
            trainer_logprobs, values = [], []
            for a, b in micro_batches(sample.segments, self.hyper.micro_batch_tokens):
                with self._autocast():
                    part = sample.segments[a:b]
                    trainer_logprobs += token_logprobs(
                        self.actor, part, self.pad_id, self.temperature, self.allowed_token_ids
                    )
                    values += token_values(self.critic, part, self.pad_id)
            engine_logprobs = [torch.tensor(s.old_logprobs, dtype=torch.float32) for s in sample.segments]
            diffs += [(t.float() - e).abs() for t, e in zip(trainer_logprobs, engine_logprobs, strict=True)]
            old = engine_logprobs if self.hyper.old_logprobs == "engine" else [t.float() for t in trainer_logprobs]
            chain_values = torch.cat([v.float() for v in values])
            rewards = torch.zeros_like(chain_values)
            rewards[-1] = sample.reward
            advantages, returns = gae(rewards, chain_values, self.hyper.gamma, self.hyper.lam)
            sizes = [len(v) for v in values]
            prepared.append(
                PreparedEpisode(
                    sample,
                    old,
                    [v.float() for v in values],
                    list(torch.split(advantages, sizes)),
                    list(torch.split(returns, sizes)),
                )
            )
        if self.hyper.whiten_advantages:
            flat = torch.cat([a for p in prepared for a in p.advantages])
            mean, std = flat.mean(), flat.std(unbiased=False)
            for p in prepared:
                p.advantages = [(a - mean) / (std + 1e-8) for a in p.advantages]
        mismatch = torch.cat(diffs)
        return prepared, {
            "logprob_mismatch_mean_abs": float(mismatch.mean()),
            "logprob_mismatch_max_abs": float(mismatch.max()),
        }

    def update(
        self, prepared: Sequence[PreparedEpisode], train_actor: bool, generator: torch.Generator
    ) -> dict[str, float]:
        """PPO epochs over minibatches of episodes; returns mean losses and statistics. Each minibatch's
        segments go through the models in micro-batches of at most `micro_batch_tokens` padded tokens whose
        gradients accumulate, so memory is bounded and the update is the same as one pass over all of them."""
        h = self.hyper
        stats: dict[str, list[float]] = {
            k: [] for k in ("policy_loss", "value_loss", "kl", "clip_fraction", "ratio_mean", "actor_grad_norm")
        }
        self.actor.train()
        self.critic.train()
        for _ in range(h.ppo_epochs):
            order = torch.randperm(len(prepared), generator=generator).tolist()
            for start in range(0, len(order), h.minibatch_episodes):
                batch = [prepared[i] for i in order[start : start + h.minibatch_episodes]]
                segments = [s for p in batch for s in p.sample.segments]
                old_lp = torch.cat([x for p in batch for x in p.old_logprobs])
                old_v = torch.cat([x for p in batch for x in p.old_values])
                adv = torch.cat([x for p in batch for x in p.advantages])
                ret = torch.cat([x for p in batch for x in p.returns])
                offsets = [0, *itertools.accumulate(len(s.agent_positions) for s in segments)]
                n_tokens = offsets[-1]
                chunks = [
                    (offsets[a], offsets[b], segments[a:b]) for a, b in micro_batches(segments, h.micro_batch_tokens)
                ]

                self.critic_optimizer.zero_grad()
                value_loss = 0.0
                for lo, hi, part in chunks:
                    with self._autocast():
                        values = torch.cat(token_values(self.critic, part, self.pad_id)).float()
                    squared = (values - ret[lo:hi]) ** 2
                    if h.value_clip_range is not None:
                        clipped = old_v[lo:hi] + (values - old_v[lo:hi]).clamp(-h.value_clip_range, h.value_clip_range)
                        squared = torch.max(squared, (clipped - ret[lo:hi]) ** 2)
                    loss = 0.5 * squared.sum() / n_tokens
                    loss.backward()
                    value_loss += float(loss.detach())
                nn.utils.clip_grad_norm_(self.critic.parameters(), h.max_grad_norm)
                self.critic_optimizer.step()
                stats["value_loss"].append(value_loss)
                if not train_actor:
                    continue

                self.actor_optimizer.zero_grad()
                policy_loss = kl_total = clipped_count = ratio_total = 0.0
                for lo, hi, part in chunks:
                    with self._autocast():
                        new_lp = torch.cat(
                            token_logprobs(self.actor, part, self.pad_id, self.temperature, self.allowed_token_ids)
                        ).float()
                    ratio = torch.exp(new_lp - old_lp[lo:hi])
                    objective = torch.min(
                        ratio * adv[lo:hi], ratio.clamp(1 - h.clip_range, 1 + h.clip_range) * adv[lo:hi]
                    )
                    part_policy = -objective.sum() / n_tokens
                    loss = part_policy
                    if h.kl_coef > 0:
                        with torch.no_grad(), self.actor.disable_adapter(), self._autocast():
                            ref_lp = torch.cat(
                                token_logprobs(self.actor, part, self.pad_id, self.temperature, self.allowed_token_ids)
                            ).float()
                        log_ratio = ref_lp - new_lp
                        part_kl = (torch.exp(log_ratio) - log_ratio - 1).sum() / n_tokens  # k3 estimator, >= 0
                        loss = loss + h.kl_coef * part_kl
                        kl_total += float(part_kl.detach())
                    loss.backward()
                    policy_loss += float(part_policy.detach())
                    clipped_count += float(((ratio.detach() - 1).abs() > h.clip_range).sum())
                    ratio_total += float(ratio.detach().sum())
                grad_norm = nn.utils.clip_grad_norm_(
                    [p for p in self.actor.parameters() if p.requires_grad], h.max_grad_norm
                )
                self.actor_optimizer.step()
                stats["policy_loss"].append(policy_loss)
                stats["kl"].append(kl_total)
                stats["clip_fraction"].append(clipped_count / n_tokens)
                stats["ratio_mean"].append(ratio_total / n_tokens)
                stats["actor_grad_norm"].append(float(grad_norm))
        return {k: (sum(v) / len(v) if v else math.nan) for k, v in stats.items()}
