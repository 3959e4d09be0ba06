"""Supervised warm-starts: TRL's SFTTrainer with a PEFT LoRA adapter, loss on assistant turns only.

Traces are chat conversations (system, user, assistant, ...). Each assistant turn becomes one
conversational prompt-completion example (prompt = every message before it, completion = that
assistant message), and TRL computes the loss on the completion tokens only. This works with any chat
template, including SmolLM2's, which has no `{% generation %}` markers for `assistant_only_loss`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LoraSettings:
    """The LoRA adapter shape (shared by SFT and PPO, so PPO can continue an SFT adapter)."""

    r: int = 16
    """Adapter rank (the engine's --max-lora-rank must be at least this)."""
    alpha: int = 32
    """LoRA scaling numerator (effective scale alpha / r)."""
    dropout: float = 0.0
    """Dropout on the adapter input; 0 keeps trainer and engine log-probs comparable."""
    target_modules: tuple[str, ...] = DEFAULT_LORA_TARGETS
    """Linear layers that get adapters."""

    def __post_init__(self) -> None:
        if self.r < 1:
            raise ValueError(f"LoRA r must be >= 1, got {self.r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LoRA dropout must be in [0, 1), got {self.dropout}")
        if not self.target_modules:
            raise ValueError("target_modules must not be empty")

    def peft_config(self) -> Any:
        from peft import LoraConfig

        return LoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=list(self.target_modules),
            task_type="CAUSAL_LM",
        )


@dataclass(frozen=True)
class SFTSettings:
    """One supervised warm-start."""

    learning_rate: float = 2e-4
    """AdamW learning rate of the adapter."""
    epochs: float = 1.0
    """Passes over the training examples (ignored when max_steps > 0)."""
    max_steps: int = -1
    """Optimiser steps; -1 means use `epochs`."""
    batch_size: int = 4
    """Examples per device batch."""
    grad_accumulation: int = 1
    """Batches per optimiser step."""
    max_length: int = 1024
    """Longer examples are truncated (from the left, so the completion survives)."""
    bf16: bool = False
    """Train under bfloat16 autocast (faster on CPUs with AVX-512 bf16)."""
    seed: int = 0
    """Seeds data order and adapter initialisation."""
    lora: LoraSettings = field(default_factory=LoraSettings)
    """Adapter shape."""

    def __post_init__(self) -> None:
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(f"max_steps must be -1 or > 0, got {self.max_steps}")
        if self.batch_size < 1 or self.grad_accumulation < 1:
            raise ValueError("batch_size and grad_accumulation must be >= 1")
        if self.max_length < 32:
            raise ValueError(f"max_length must be >= 32, got {self.max_length}")


@dataclass(frozen=True)
class SFTResult:
    """What a warm-start produced."""

    adapter_dir: Path
    train_loss: float
    eval_loss_before: float | None
    eval_loss_after: float | None
    steps: int
    examples: int
    wall_seconds: float


def prompt_completion_examples(conversations: Sequence[Sequence[dict[str, str]]]) -> list[dict[str, Any]]:
    """One example per assistant turn: {"prompt": messages before it, "completion": [that message]}."""
    examples = []
    for messages in conversations:
        for index, message in enumerate(messages):
            if message.get("role") == "assistant" and index > 0:
                examples.append({"prompt": [dict(m) for m in messages[:index]], "completion": [dict(message)]})
    return examples


def load_lora_model(base_model_dir: Path, lora: LoraSettings, init_adapter_dir: Path | None = None) -> tuple[Any, Any]:
    """The base model in float32 with a trainable LoRA adapter (`init_adapter_dir`'s, else a new one shaped
    by `lora`), and its tokenizer. Seed torch first for a reproducible new adapter."""
    import torch
    from peft import PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_model_dir)
    model = AutoModelForCausalLM.from_pretrained(base_model_dir, dtype=torch.float32)
    if init_adapter_dir is not None:
        return PeftModel.from_pretrained(model, init_adapter_dir, is_trainable=True), tokenizer
    return get_peft_model(model, lora.peft_config()), tokenizer


def run_sft(
    base_model_dir: Path,
    train_conversations: Sequence[Sequence[dict[str, str]]],
    output_dir: Path,
    settings: SFTSettings = SFTSettings(),
    eval_conversations: Sequence[Sequence[dict[str, str]]] = (),
    init_adapter_dir: Path | None = None,
) -> SFTResult:
    """Train a LoRA adapter on the assistant turns of `train_conversations`; save it to output_dir/adapter."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    start = time.perf_counter()
    train = prompt_completion_examples(train_conversations)
    if not train:
        raise ValueError("no assistant turns in the training conversations")
    held_out = prompt_completion_examples(eval_conversations)
    torch.manual_seed(settings.seed)
    model, tokenizer = load_lora_model(base_model_dir, settings.lora, init_adapter_dir)
    config = SFTConfig(
        output_dir=str(output_dir / "trainer"),
        learning_rate=settings.learning_rate,
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps,
        per_device_train_batch_size=settings.batch_size,
        per_device_eval_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.grad_accumulation,
        max_length=settings.max_length,
        truncation_mode="keep_end",
        completion_only_loss=True,
        bf16=settings.bf16,
        use_cpu=not torch.cuda.is_available(),
        seed=settings.seed,
        data_seed=settings.seed,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(train),
        eval_dataset=Dataset.from_list(held_out) if held_out else None,
        processing_class=tokenizer,
    )
    before = trainer.evaluate()["eval_loss"] if held_out else None
    outcome = trainer.train()
    after = trainer.evaluate()["eval_loss"] if held_out else None
    adapter_dir = output_dir / "adapter"
    trainer.model.save_pretrained(adapter_dir)
    tokenizer.save_pretrained(adapter_dir)
    loss = float(outcome.training_loss)
    if not math.isfinite(loss):
        raise RuntimeError(f"SFT diverged: training loss {loss}")
    return SFTResult(
        adapter_dir=adapter_dir,
        train_loss=loss,
        eval_loss_before=before,
        eval_loss_after=after,
        steps=int(outcome.global_step),
        examples=len(train),
        wall_seconds=time.perf_counter() - start,
    )
