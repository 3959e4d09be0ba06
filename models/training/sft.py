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
from pathlib import Path
from typing import Any

from models.training.config import LoraSettings, SFTResult, SFTSettings


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
    settings: SFTSettings | None = None,
    eval_conversations: Sequence[Sequence[dict[str, str]]] = (),
    init_adapter_dir: Path | None = None,
) -> SFTResult:
    """Train a LoRA adapter on the assistant turns of `train_conversations`; save it to output_dir/adapter."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    settings = settings or SFTSettings()
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
