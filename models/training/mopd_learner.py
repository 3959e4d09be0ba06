"""The MOPD student's update (models/training/mopd.py runs the loop): the top-k reverse KL and one AdamW step of
the student's LoRA adapter on it.

Device: everything the update builds (padded input ids and masks, the kept positions, the teacher's top-k
targets, the sampled ids) goes to the device of the student's parameters, and the bf16 autocast follows that
device's type (models.training.device.autocast), so the student trains on the CPU or a CUDA GPU alike. Teacher
targets are scored on the CPU (models.training.mopd.score_segment) and moved once per micro-batch; the metrics
come back to the CPU as floats.

Imports torch and the PPO learner's padding only: a GPU box with torch, transformers and peft runs it (no
engine client, no table store; benchmarks/gpu_check_mopd.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from models.training.device import autocast
from models.training.mopd_config import MOPDConfig
from models.training.segments import Segment, micro_batches, pad_segments, predicting_logits


def topk_reverse_kl(
    student_logprobs: torch.Tensor,
    teacher_ids: torch.Tensor,
    teacher_logprobs: torch.Tensor,
    valid: torch.Tensor,
    tail_floor: float = 1e-6,
) -> torch.Tensor:
    """Per-position reverse KL(student || teacher) on the teacher's top-k support plus one tail outcome (see
    models/training/mopd.py's docstring). student_logprobs: (T, V) log-softmax of the student; teacher_ids,
    teacher_logprobs, valid: (T, K), the teacher's scored tokens per position (rows padded, `valid` marks real
    entries), on the student's device. Returns (T,)."""
    s = student_logprobs.gather(-1, teacher_ids)
    p_s = torch.where(valid, s.exp(), torch.zeros_like(s))
    head = (p_s * torch.where(valid, s - teacher_logprobs, torch.zeros_like(s))).sum(-1)
    tail_s = (1.0 - p_s.sum(-1)).clamp_min(1e-12)
    tail_t = (1.0 - torch.where(valid, teacher_logprobs.exp(), torch.zeros_like(s)).sum(-1)).clamp_min(tail_floor)
    return head + tail_s * (tail_s.log() - tail_t.log())


@dataclass(kw_only=True)
class ScoredSegment:
    """A student segment with its teacher's top-k log-probs at every agent position it could score."""

    domain: str
    segment: Segment
    teacher_ids: torch.Tensor
    """(T, K) token ids the teacher scored at each scored agent position (padded with 0)."""
    teacher_logprobs: torch.Tensor
    """(T, K) their teacher log-probs (padded with 0)."""
    valid: torch.Tensor
    """(T, K) which entries are real."""
    positions: list[int]
    """The agent positions scored (those inside the teacher's context), T of them."""
    sampled_teacher_logprob: torch.Tensor
    """(T,) teacher log-prob of the token the student actually sampled."""

    def to(self, device: torch.device) -> ScoredSegment:
        """A copy whose teacher tensors sit on `device` (the same object's tensors when already there)."""
        return replace(
            self,
            teacher_ids=self.teacher_ids.to(device),
            teacher_logprobs=self.teacher_logprobs.to(device),
            valid=self.valid.to(device),
            sampled_teacher_logprob=self.sampled_teacher_logprob.to(device),
        )


def student_log_distributions(
    model: nn.Module, segments: Sequence[Segment], positions: Sequence[Sequence[int]], pad_id: int
) -> list[torch.Tensor]:
    """The student's full log-softmax (temperature 1) predicting each listed position: (len(positions[i]), V)
    per segment (the logits at position j - 1 predict token j), on the model's device. Only the needed
    positions go through the LM head (transformers' `logits_to_keep`): a sequence's full logits are
    seq x vocab, most of it prompt."""
    device = next(model.parameters()).device
    ids, mask = pad_segments(segments, pad_id, device)  # PPO's padding: the same rows, right-padded
    rows, _ = predicting_logits(model, ids, mask, positions)
    return [torch.log_softmax(logits.float(), dim=-1) for logits in rows]


class MOPDLearner:
    """The student (a PEFT model) and its optimiser; one `update` per step, on the student's device."""

    def __init__(self, student: nn.Module, config: MOPDConfig, pad_id: int) -> None:
        self.student, self.config, self.pad_id = student, config, pad_id
        self.device = next(student.parameters()).device
        """Where the update runs: the student's parameters' device (models.training.sft.load_lora_model
        puts them on the compute settings' device)."""
        self.optimizer = torch.optim.AdamW(
            [p for p in student.parameters() if p.requires_grad], lr=config.learning_rate
        )

    def _autocast(self) -> Any:
        return autocast(self.device, self.config.bf16)

    def update(self, batch: Sequence[ScoredSegment]) -> dict[str, float]:
        """One optimiser step on the mean top-k reverse KL over every scored student token (micro-batched,
        gradients accumulated, so the step is that of one pass over the whole batch)."""
        batch = [b for b in batch if b.positions]
        n_tokens = sum(len(b.positions) for b in batch)
        if n_tokens == 0:
            raise ValueError("no scored student tokens in the batch")
        self.student.train()
        self.optimizer.zero_grad()
        total = sampled_gap = 0.0
        segments = [b.segment for b in batch]
        for a, z in micro_batches(segments, self.config.micro_batch_tokens):
            part = [b.to(self.device) for b in batch[a:z]]
            with self._autocast():
                logps = student_log_distributions(
                    self.student, [b.segment for b in part], [b.positions for b in part], self.pad_id
                )
            losses = []
            for scored, logp in zip(part, logps, strict=True):
                kl = topk_reverse_kl(
                    logp, scored.teacher_ids, scored.teacher_logprobs, scored.valid, self.config.tail_floor
                )
                losses.append(kl.sum())
                ids = torch.tensor([scored.segment.input_ids[p] for p in scored.positions], device=self.device)
                student_sampled = logp.detach().gather(-1, ids.unsqueeze(-1)).squeeze(-1)
                sampled_gap += float((student_sampled - scored.sampled_teacher_logprob).sum())
            loss = torch.stack(losses).sum() / n_tokens
            loss.backward()
            total += float(loss.detach())
        grad_norm = nn.utils.clip_grad_norm_(
            [p for p in self.student.parameters() if p.requires_grad], self.config.max_grad_norm
        )
        self.optimizer.step()
        return {
            "reverse_kl": total,
            "sampled_logratio": sampled_gap / n_tokens,
            "grad_norm": float(grad_norm),
            "scored_tokens": float(n_tokens),
        }
