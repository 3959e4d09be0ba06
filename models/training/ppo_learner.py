"""The learner half of multi-turn PPO with a critic: batches from recorded calls, GAE, the PPO update.

TRL 1.16 has no PPOTrainer, and its GRPO/RLOO trainers generate single-turn completions themselves, so
multi-turn PPO over engine-recorded episodes with a separate critic model is written here.

Data flow: the rollout proxy records each LLM call with the engine's prompt and completion token ids and
per-token log-probs; `episode_samples` (models/training/segments.py) turns one episode's calls (one seat, in turn order) plus the
episode's terminal reward into `EpisodeSample`s without re-tokenising any text. When the chat template is
prefix-stable (turn k+1's prompt starts with turn k's prompt + completion, checked on the recorded ids)
the episode is one packed sequence with only the agent's completion tokens in the loss. Where it is not
(a re-tokenised reply, or a prompt the LLM agent shortened to fit the context), a new segment starts:
each maximal prefix-stable run of turns is one packed segment. Either way GAE runs over the agent's tokens across all its turns (environment
tokens are masked), with the outcome-only reward on the last agent token.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from models.progress import ProgressMeter
from models.training.config import ComputeSettings, PPOHyper
from models.training.device import autocast
from models.training.segments import (
    EpisodeSample,
    Segment,
    micro_batches,
    pad_segments,
    predicting_logits,
)

log = logging.getLogger("socialrl.ppo")


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


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
    """A separate critic: a causal-LM backbone with a scalar value head on every position."""

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_pretrained(cls, model_dir: Path, compute: ComputeSettings | None = None) -> ValueModel:
        """The critic on `compute`'s device. Its weights are all trained, so they stay fp32 (master weights;
        bf16 compute comes from the learner's autocast)."""
        from transformers import AutoModel

        from models.training.device import enable_gradient_checkpointing, select_device

        compute = compute or ComputeSettings()
        backbone = AutoModel.from_pretrained(
            model_dir, dtype=torch.float32, attn_implementation=compute.attn_implementation
        )
        if compute.gradient_checkpointing:
            enable_gradient_checkpointing(backbone)
        return cls(backbone, backbone.config.hidden_size).to(select_device(compute.device))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        return self.head(hidden).squeeze(-1)


class ValueHead(nn.Module):
    """A shared critic: a scalar head on the actor's last hidden state (one forward serves both)."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head(hidden.float()).squeeze(-1)


@dataclass
class TokenStats:
    """What one forward pass over segments gives for the agent tokens."""

    logprobs: list[torch.Tensor]
    """Log-prob of each agent token under the (tempered, restricted) policy, per segment."""
    entropy: list[torch.Tensor]
    """Entropy of the policy's distribution at each agent token, per segment."""
    hidden: torch.Tensor | None = None
    """Last hidden state at each agent token's predicting position, all segments concatenated (shared critic)."""


def _agent_token_stats(
    model: nn.Module,
    segments: Sequence[Segment],
    pad_id: int,
    temperature: float = 1.0,
    allowed_token_ids: Sequence[int] | None = None,
    with_hidden: bool = False,
) -> TokenStats:
    device = next(model.parameters()).device
    ids, mask = pad_segments(segments, pad_id, device)
    wanted = [s.agent_positions for s in segments]
    rows, out = predicting_logits(model, ids, mask, wanted, use_cache=False, output_hidden_states=with_hidden)
    blocked = None
    if allowed_token_ids is not None:
        blocked = torch.ones(rows[0].shape[-1], dtype=torch.bool, device=device)
        blocked[list(allowed_token_ids)] = False
    logprobs, entropies, hidden = [], [], []
    for row, (segment, logits) in enumerate(zip(segments, rows, strict=True)):
        positions = torch.tensor(segment.agent_positions, device=device)
        scaled = logits.float() / temperature  # only the agent positions go to float32
        if blocked is not None:
            scaled = scaled.masked_fill(blocked, float("-inf"))
        logp = torch.log_softmax(scaled, dim=-1)
        logprobs.append(logp.gather(-1, ids[row, positions].unsqueeze(-1)).squeeze(-1))
        entropies.append(-(logp.exp() * logp.nan_to_num(neginf=0.0)).sum(-1))
        if with_hidden:
            hidden.append(out.hidden_states[-1][row, positions - 1])
    return TokenStats(logprobs, entropies, torch.cat(hidden) if with_hidden else None)


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
    return _agent_token_stats(model, segments, pad_id, temperature, allowed_token_ids).logprobs


def token_values(critic: ValueModel, segments: Sequence[Segment], pad_id: int) -> list[torch.Tensor]:
    """Critic value before each agent token (read at the preceding position)."""
    device = next(critic.parameters()).device
    ids, mask = pad_segments(segments, pad_id, device)
    values = critic(ids, mask)
    return [values[row, torch.tensor(s.agent_positions, device=device) - 1] for row, s in enumerate(segments)]


# Per-token bounds of the KL estimate, as verl's `low_var_kl` sets them (verl/trainer/ppo/core_algos.py).
K3_LOG_RATIO_BOUND = 20.0
K3_TOKEN_BOUND = 10.0


def k3_kl(ref_logprobs: torch.Tensor, logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference), exp(r) - r - 1 with r = ref - policy log-prob, >= 0.

    Unbounded, one sampled token that the policy now finds a thousand times less likely than the reference
    does (r = 7) weighs as much as a thousand ordinary tokens: an ablation arm's first iteration measured a
    mean of 2,751 (benchmarks/results/ppo_ablation_before_audit.json), which swamped the policy objective at
    kl_coef 0.01.
    So r is clamped to +-20 and each token's estimate to 10; past the clamp such a token adds no gradient."""
    log_ratio = (ref_logprobs - logprobs).clamp(-K3_LOG_RATIO_BOUND, K3_LOG_RATIO_BOUND)
    return (torch.exp(log_ratio) - log_ratio - 1).clamp(max=K3_TOKEN_BOUND)


def turn_advantages(
    values: torch.Tensor, turn_lengths: Sequence[int], reward: float, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn-level credit: GAE over the turns (a turn's value is the value at its first token, the terminal
    reward follows the last turn); each turn's advantage and return are given to all of its tokens."""
    starts = [0, *itertools.accumulate(turn_lengths)][:-1]
    turn_values = values[starts]
    rewards = torch.zeros_like(turn_values)
    rewards[-1] = reward
    advantages, returns = gae(rewards, turn_values, gamma, lam)
    repeats = torch.tensor(list(turn_lengths))
    return advantages.repeat_interleave(repeats), returns.repeat_interleave(repeats)


@dataclass
class PreparedEpisode:
    """An episode with everything the update needs, computed once per iteration."""

    sample: EpisodeSample
    old_logprobs: list[torch.Tensor]
    old_values: list[torch.Tensor]
    advantages: list[torch.Tensor] = field(default_factory=list)
    returns: list[torch.Tensor] = field(default_factory=list)
    ref_logprobs: list[torch.Tensor] = field(default_factory=list)
    """Log-probs of the agent tokens under the reference policy (empty without a KL penalty)."""


def whiten_advantages(prepared: Sequence[PreparedEpisode]) -> None:
    """Normalise the advantages of the whole batch to mean 0, standard deviation 1 (in place)."""
    flat = torch.cat([a for p in prepared for a in p.advantages])
    mean, std = flat.mean(), flat.std(unbiased=False)
    for p in prepared:
        p.advantages = [(a - mean) / (std + 1e-8) for a in p.advantages]


@dataclass
class _Targets:
    """A minibatch's per-token targets, concatenated in segment order."""

    old_lp: torch.Tensor
    old_v: torch.Tensor
    adv: torch.Tensor
    ret: torch.Tensor
    ref_lp: torch.Tensor | None


REFERENCE_ADAPTER = "reference"
"""Name of the frozen warm-start adapter loaded next to the trained one (the KL reference)."""


class PPOLearner:
    """Holds the actor (PEFT model), the critic (a separate model or a head on the actor) and their
    optimisers; prepares batches and runs updates.

    The KL reference is the policy PPO started from: `load_reference(adapter_dir)` loads the warm-start
    adapter frozen next to the trained one; without it the reference is the base model (adapter disabled).
    """

    def __init__(
        self,
        actor: nn.Module,
        critic: ValueModel | None,
        hyper: PPOHyper,
        pad_id: int,
        bf16: bool = False,
        temperature: float = 1.0,
        allowed_token_ids: Sequence[int] | None = None,
        progress_interval_s: float = 60.0,
    ) -> None:
        self.actor, self.hyper, self.pad_id, self.bf16 = actor, hyper, pad_id, bf16
        if progress_interval_s < 0:
            raise ValueError(f"progress_interval_s must be >= 0, got {progress_interval_s}")
        self.progress_interval_s = progress_interval_s
        """Most seconds between the update's progress lines (micro-batches done of the total, tokens/s, time left)."""
        if temperature <= 0:
            raise ValueError(f"PPO needs a sampling temperature > 0, got {temperature}")
        self.temperature = temperature
        """The rollouts' sampling temperature: the policy being optimised is the tempered one."""
        self.allowed_token_ids = list(allowed_token_ids) if allowed_token_ids is not None else None
        """Tokens the rollouts may sample (vLLM's allowed_token_ids); None = the whole vocabulary."""
        self.device = next(actor.parameters()).device
        if hyper.critic == "shared":
            if critic is not None:
                raise ValueError("a shared critic is a head on the actor; do not pass a critic model")
            self.critic: nn.Module = ValueHead(actor.config.hidden_size).to(self.device)
        else:
            if critic is None:
                raise ValueError("critic='separate' needs a critic model")
            self.critic = critic
        self.shared = hyper.critic == "shared"
        self.has_reference_adapter = False
        self.data_parallel: Any = None
        """A models.training.distributed.Collective when this learner is one rank of a data-parallel group:
        it then runs its share of each minibatch's micro-batches and sums gradients and statistics over ranks."""
        self.actor_optimizer = torch.optim.AdamW([p for p in actor.parameters() if p.requires_grad], lr=hyper.actor_lr)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=hyper.critic_lr)

    def load_reference(self, adapter_dir: Path) -> None:
        """Use the adapter at `adapter_dir` (frozen) as the KL reference instead of the bare base model."""
        self.actor.load_adapter(str(adapter_dir), adapter_name=REFERENCE_ADAPTER, is_trainable=False)
        self.actor.set_adapter("default")  # keeps the trained adapter active and trainable
        self.has_reference_adapter = True

    @contextlib.contextmanager
    def _reference(self) -> Iterator[None]:
        if not self.has_reference_adapter:
            with self.actor.disable_adapter():
                yield
            return
        self.actor.set_adapter(REFERENCE_ADAPTER, inference_mode=True)
        try:
            yield
        finally:
            self.actor.set_adapter("default")

    def _autocast(self) -> Any:
        return autocast(self.device, self.bf16)

    def _stats(self, segments: Sequence[Segment], with_hidden: bool) -> TokenStats:
        return _agent_token_stats(
            self.actor, segments, self.pad_id, self.temperature, self.allowed_token_ids, with_hidden=with_hidden
        )

    @torch.no_grad()
    def prepare(
        self, samples: Sequence[EpisodeSample], whiten: bool = True
    ) -> tuple[list[PreparedEpisode], dict[str, float]]:
        """Old log-probs, values, reference log-probs, advantages and returns (by `hyper.credit`); plus the
        engine/trainer log-prob mismatch and the policy entropy. `whiten=False` leaves the whitening of
        `hyper.whiten_advantages` to the caller (a data-parallel rank holds only part of the batch)."""
        h = self.hyper
        prepared, diffs, entropies = [], [], []
        self.actor.eval()
        self.critic.eval()
        for sample in samples:
            trainer_logprobs, values, ref_logprobs = [], [], []
            for a, b in micro_batches(sample.segments, h.micro_batch_tokens):
                part = sample.segments[a:b]
                with self._autocast():
                    stats = self._stats(part, with_hidden=self.shared)
                    if self.shared:
                        flat = self.critic(stats.hidden)
                        values += list(torch.split(flat, [len(s.agent_positions) for s in part]))
                    else:
                        values += token_values(self.critic, part, self.pad_id)
                    if h.kl_coef > 0:
                        with self._reference():
                            ref_logprobs += [x.float() for x in self._stats(part, with_hidden=False).logprobs]
                trainer_logprobs += stats.logprobs
                entropies += stats.entropy
            engine_logprobs = [torch.tensor(s.old_logprobs, dtype=torch.float32) for s in sample.segments]
            diffs += [(t.float().cpu() - e).abs() for t, e in zip(trainer_logprobs, engine_logprobs, strict=True)]
            old = engine_logprobs if h.old_logprobs == "engine" else [t.float().cpu() for t in trainer_logprobs]
            chain_values = torch.cat([v.float().cpu() for v in values])
            if h.advantage == "group":  # every agent token gets the episode's return minus its group's baseline
                advantages = torch.full_like(chain_values, sample.reward - sample.baseline)
                returns = torch.full_like(chain_values, sample.reward)
            elif h.credit == "turn":
                lengths = [n for s in sample.segments for n in s.turns()]
                advantages, returns = turn_advantages(chain_values, lengths, sample.reward, h.gamma, h.lam)
            else:
                rewards = torch.zeros_like(chain_values)
                rewards[-1] = sample.reward
                advantages, returns = gae(rewards, chain_values, h.gamma, h.lam)
            sizes = [len(v) for v in values]
            prepared.append(
                PreparedEpisode(
                    sample,
                    old,
                    [v.float().cpu() for v in values],
                    list(torch.split(advantages, sizes)),
                    list(torch.split(returns, sizes)),
                    [r.cpu() for r in ref_logprobs],
                )
            )
        if h.whiten_advantages and whiten:
            whiten_advantages(prepared)
        mismatch = torch.cat(diffs)
        return prepared, {
            "logprob_mismatch_mean_abs": float(mismatch.mean()),
            "logprob_mismatch_max_abs": float(mismatch.max()),
            "entropy": float(torch.cat([e.float().cpu() for e in entropies]).mean()),
        }

    def _value_loss(self, values: torch.Tensor, old_v: torch.Tensor, ret: torch.Tensor, n_tokens: int) -> torch.Tensor:
        clip = self.hyper.value_clip_range
        squared = (values - ret) ** 2
        if clip is not None:
            clipped = old_v + (values - old_v).clamp(-clip, clip)
            squared = torch.max(squared, (clipped - ret) ** 2)
        return 0.5 * squared.sum() / n_tokens

    def update(
        self, prepared: Sequence[PreparedEpisode], train_actor: bool, generator: torch.Generator
    ) -> dict[str, float]:
        """PPO epochs over minibatches of episodes; returns mean losses and statistics. Each minibatch's
        segments go through the models in micro-batches of at most `micro_batch_tokens` padded tokens whose
        gradients accumulate, so memory is bounded and the update is the same as one pass over all of them.
        With a shared critic one forward gives log-probs and values, and one backward the joint loss; while
        the actor is frozen (critic warm-up) only the head learns, on detached hidden states. An update of many
        micro-batches logs its progress at most every `progress_interval_s` (done of total, tokens/s, time left)."""
        h = self.hyper
        names = ("policy_loss", "value_loss", "kl", "clip_fraction", "ratio_mean", "actor_grad_norm", "tokens")
        stats: dict[str, list[float]] = {k: [] for k in names}
        self.actor.train()
        self.critic.train()
        started = time.perf_counter()
        # Every epoch's order drawn first (the generator serves nothing else here, so the draws are the same) to
        # count the micro-batches of the whole update before the first one runs.
        epochs = []
        for _ in range(h.ppo_epochs):
            order = torch.randperm(len(prepared), generator=generator).tolist()
            epochs.append(
                [
                    [prepared[i] for i in order[a : a + h.minibatch_episodes]]
                    for a in range(0, len(order), h.minibatch_episodes)
                ]
            )
        total = sum(len(self._chunks(self._segments(batch))) for batches in epochs for batch in batches)
        meter = ProgressMeter("PPO update", total, unit="micro-batch", interval_s=self.progress_interval_s, logger=log)
        for epoch, batches in enumerate(epochs):
            done = len(stats["value_loss"])  # this epoch's minibatches come after
            for batch in batches:
                for key, value in self._minibatch_step(batch, train_actor, meter).items():
                    stats[key].append(value)
            log.info(
                "PPO update epoch %d/%d%s: value loss %.4f, policy loss %.4f, %.0f s",
                epoch + 1, h.ppo_epochs, "" if train_actor else " (critic warm-up)",
                _mean(stats["value_loss"][done:]), _mean(stats["policy_loss"][done:]), time.perf_counter() - started,
            )  # fmt: skip
        tokens = sum(stats.pop("tokens"))
        out = {k: _mean(v) for k, v in stats.items()}
        out["update_tokens"] = tokens
        return out

    @staticmethod
    def _segments(batch: Sequence[PreparedEpisode]) -> list[Segment]:
        return [s for p in batch for s in p.sample.segments]

    def _chunks(self, segments: Sequence[Segment]) -> list[tuple[int, int, Sequence[Segment]]]:
        """The micro-batches of a minibatch this rank runs: (first, end) of their agent tokens in the minibatch's
        targets, and their segments."""
        offsets = [0, *itertools.accumulate(len(s.agent_positions) for s in segments)]
        chunks = [
            (offsets[a], offsets[b], segments[a:b]) for a, b in micro_batches(segments, self.hyper.micro_batch_tokens)
        ]
        return self.data_parallel.share(chunks) if self.data_parallel is not None else chunks

    def _minibatch_step(
        self, batch: Sequence[PreparedEpisode], train_actor: bool, meter: ProgressMeter | None = None
    ) -> dict[str, float]:
        """One optimiser step on a minibatch: its micro-batches' gradients summed (over the data-parallel
        ranks too), clipped, applied; the minibatch's statistics. `meter` counts each micro-batch run."""
        h, to = self.hyper, self.device
        segments = self._segments(batch)
        targets = _Targets(
            old_lp=torch.cat([x for p in batch for x in p.old_logprobs]).to(to),
            old_v=torch.cat([x for p in batch for x in p.old_values]).to(to),
            adv=torch.cat([x for p in batch for x in p.advantages]).to(to),
            ret=torch.cat([x for p in batch for x in p.returns]).to(to),
            ref_lp=torch.cat([x for p in batch for x in p.ref_logprobs]).to(to) if h.kl_coef > 0 else None,
        )
        n_tokens = sum(len(s.agent_positions) for s in segments)
        chunks = self._chunks(segments)
        self.critic_optimizer.zero_grad()
        self.actor_optimizer.zero_grad()
        sums = [0.0] * 5  # value loss, policy loss, KL, clipped tokens, ratio total
        for lo, hi, part in chunks:
            loss, part_sums = self._micro_batch_loss(part, targets, slice(lo, hi), n_tokens, train_actor)
            loss.backward()
            sums = [a + b for a, b in zip(sums, part_sums, strict=True)]
            if meter is not None:
                meter.advance(tokens=sum(len(s.input_ids) for s in part))
        if self.data_parallel is not None:  # every rank then holds the whole minibatch's gradients
            modules = [self.critic, self.actor] if train_actor else [self.critic]
            sums = list(self.data_parallel.reduce(modules, sums))
        value_loss, policy_loss, kl_total, clipped_count, ratio_total = sums
        nn.utils.clip_grad_norm_(self.critic.parameters(), h.max_grad_norm)
        self.critic_optimizer.step()
        out = {"tokens": float(sum(len(s.input_ids) for s in segments)), "value_loss": value_loss}
        if not train_actor:
            return out
        grad_norm = nn.utils.clip_grad_norm_([p for p in self.actor.parameters() if p.requires_grad], h.max_grad_norm)
        self.actor_optimizer.step()
        return {
            **out,
            "policy_loss": policy_loss,
            "kl": kl_total,
            "clip_fraction": clipped_count / n_tokens,
            "ratio_mean": ratio_total / n_tokens,
            "actor_grad_norm": float(grad_norm),
        }

    def _micro_batch_loss(
        self, part: Sequence[Segment], targets: _Targets, span: slice, n_tokens: int, train_actor: bool
    ) -> tuple[torch.Tensor, list[float]]:
        """A micro-batch's share of the minibatch loss (value, clipped policy objective, KL) and its sums."""
        h = self.hyper
        loss = torch.zeros((), device=self.device)
        if self.shared and not train_actor:
            with torch.no_grad(), self._autocast():
                hidden = self._stats(part, with_hidden=True).hidden
            with self._autocast():
                values = self.critic(hidden.detach()).float()
        elif self.shared:
            with self._autocast():
                token_stats = self._stats(part, with_hidden=True)
                # Group advantages do not use the values: the head learns on its own, the policy only from its
                # objective.
                hidden = token_stats.hidden.detach() if h.advantage == "group" else token_stats.hidden
                values = self.critic(hidden).float()
        else:
            with self._autocast():
                values = torch.cat(token_values(self.critic, part, self.pad_id)).float()
            if train_actor:
                with self._autocast():
                    token_stats = self._stats(part, with_hidden=False)
        part_value = self._value_loss(values, targets.old_v[span], targets.ret[span], n_tokens)
        loss = loss + (h.vf_coef * part_value if self.shared and train_actor else part_value)
        sums = [float(part_value.detach()), 0.0, 0.0, 0.0, 0.0]
        if not train_actor:
            return loss, sums
        new_lp = torch.cat(token_stats.logprobs).float()
        ratio = torch.exp(new_lp - targets.old_lp[span])
        adv = targets.adv[span]
        objective = torch.min(ratio * adv, ratio.clamp(1 - h.clip_range, 1 + h.clip_range) * adv)
        part_policy = -objective.sum() / n_tokens
        loss = loss + part_policy
        if targets.ref_lp is not None:
            part_kl = k3_kl(targets.ref_lp[span], new_lp).sum() / n_tokens
            loss = loss + h.kl_coef * part_kl
            sums[2] = float(part_kl.detach())
        sums[1] = float(part_policy.detach())
        sums[3] = float(((ratio.detach() - 1).abs() > h.clip_range).sum())
        sums[4] = float(ratio.detach().sum())
        return loss, sums
