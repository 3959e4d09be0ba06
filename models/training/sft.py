"""Supervised warm-starts: TRL's SFTTrainer with a PEFT LoRA adapter, loss on assistant tokens only.

Traces are chat conversations (system, user, assistant, ...). A conversation is tokenised once with the
chat template and trained as ONE example whose loss covers every assistant turn (the tokens of each
assistant message, up to and including its end-of-turn marker); TRL then packs examples into
`max_length` sequences (best-fit decreasing, padding-free: transformers reads the packed boundaries from
the position ids and masks attention across them). The alternative, one example per assistant turn with
the whole conversation so far as its prompt, re-processes the shared prefix at every turn: measured on
the cpu profile's Craigslist traces, 336,683 tokens per epoch for per-turn examples against 57,864 for
whole conversations (5.8x), with the same loss tokens.

Masks come from the template itself: for assistant message k, the rendering of messages[:k] with the
generation prompt must be a prefix of the rendering of messages[:k+1]; the difference is message k's
tokens. Where a template is not prefix-stable for a conversation, that conversation falls back to one
example per assistant turn (counted). A conversation longer than `max_length` is split into windows of
whole exchanges, each starting with the system prompt (what the LLM agent sends once it trims its
oldest exchanges, agents/llm_agent.py); a single exchange longer than `max_length` keeps its end.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.training.config import ComputeSettings, LoraSettings, SFTCheckpoint, SFTResult, SFTSettings

log = logging.getLogger("socialrl.sft")

Message = dict[str, str]


@dataclass(frozen=True)
class TokenisedExample:
    """One training example: token ids and which of them carry the loss."""

    input_ids: tuple[int, ...]
    completion_mask: tuple[int, ...]
    """1 on assistant tokens (trained), 0 on context."""

    def as_row(self) -> dict[str, list[int]]:
        return {"input_ids": list(self.input_ids), "completion_mask": list(self.completion_mask)}


@dataclass(frozen=True)
class TokenisedConversations:
    """Examples built from conversations, with how they were built."""

    examples: tuple[TokenisedExample, ...]
    conversations: int
    """Conversations with at least one assistant turn."""
    windows: int
    """Whole-exchange windows (a conversation that fits is one window)."""
    per_turn_fallbacks: int
    """Conversations whose template rendering was not prefix-stable (one example per assistant turn)."""
    truncated: int
    """Examples cut to `max_length` (their oldest tokens dropped)."""

    @property
    def tokens(self) -> int:
        return sum(len(e.input_ids) for e in self.examples)

    @property
    def loss_tokens(self) -> int:
        return sum(sum(e.completion_mask) for e in self.examples)


def _render(tokenizer: Any, messages: Sequence[Message], generation_prompt: bool = False) -> list[int]:
    return list(
        tokenizer.apply_chat_template(
            [dict(m) for m in messages], tokenize=True, return_dict=False, add_generation_prompt=generation_prompt
        )
    )


def _masked(tokenizer: Any, messages: Sequence[Message]) -> tuple[list[int], list[int]] | None:
    """Token ids of `messages` with 1 on every assistant message's tokens, or None when the template's
    renderings are not prefix-stable for them."""
    ids: list[int] = []
    mask: list[int] = []
    for k, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        prompt = _render(tokenizer, messages[:k], generation_prompt=True)
        full = _render(tokenizer, messages[: k + 1])
        if prompt[: len(ids)] != ids or full[: len(prompt)] != prompt:
            return None
        mask += [0] * (len(prompt) - len(ids)) + [1] * (len(full) - len(prompt))
        ids = full
    return (ids, mask) if ids else None


def _truncate(ids: list[int], mask: list[int], max_length: int) -> tuple[list[int], list[int], bool]:
    if len(ids) <= max_length:
        return ids, mask, False
    return ids[-max_length:], mask[-max_length:], True


def tokenise_conversations(
    conversations: Sequence[Sequence[Message]], tokenizer: Any, max_length: int
) -> TokenisedConversations:
    """Training examples from chat conversations (see the module docstring)."""
    examples: list[TokenisedExample] = []
    used = windows = fallbacks = truncated = 0
    for messages in conversations:
        if not any(m.get("role") == "assistant" for m in messages):
            continue
        used += 1
        head = list(messages[:1]) if messages and messages[0].get("role") == "system" else []
        body = list(messages[len(head) :])
        if _masked(tokenizer, messages) is None:  # not prefix-stable: one example per assistant turn
            fallbacks += 1
            for k, message in enumerate(messages):
                if message.get("role") != "assistant":
                    continue
                prompt = _render(tokenizer, messages[:k], generation_prompt=True)
                full = _render(tokenizer, messages[: k + 1])
                ids, mask, cut = _truncate(full, [0] * len(prompt) + [1] * (len(full) - len(prompt)), max_length)
                examples.append(TokenisedExample(tuple(ids), tuple(mask)))
                truncated += cut
            continue
        # Exchanges: a run of non-assistant messages followed by the assistant reply.
        exchanges: list[list[Message]] = [[]]
        for message in body:
            exchanges[-1].append(message)
            if message.get("role") == "assistant":
                exchanges.append([])
        exchanges = [x for x in exchanges if any(m.get("role") == "assistant" for m in x)]
        start = 0
        while start < len(exchanges):
            end = start + 1
            best = _masked(tokenizer, head + [m for x in exchanges[start:end] for m in x])
            while end < len(exchanges):
                candidate = _masked(tokenizer, head + [m for x in exchanges[start : end + 1] for m in x])
                if candidate is None or len(candidate[0]) > max_length:
                    break
                best, end = candidate, end + 1
            assert best is not None  # the whole conversation is prefix-stable, so each window is
            ids, mask, cut = _truncate(best[0], best[1], max_length)
            examples.append(TokenisedExample(tuple(ids), tuple(mask)))
            windows += 1
            truncated += cut
            start = end
    return TokenisedConversations(tuple(examples), used, windows, fallbacks, truncated)


def prompt_completion_examples(conversations: Sequence[Sequence[Message]]) -> list[dict[str, Any]]:
    """One example per assistant turn: {"prompt": messages before it, "completion": [that message]} (TRL's
    conversational prompt-completion format; kept for callers that train per turn)."""
    examples = []
    for messages in conversations:
        for index, message in enumerate(messages):
            if message.get("role") == "assistant" and index > 0:
                examples.append({"prompt": [dict(m) for m in messages[:index]], "completion": [dict(message)]})
    return examples


def load_lora_model(
    base_model_dir: Path,
    lora: LoraSettings,
    init_adapter_dir: Path | None = None,
    bf16: bool = False,
    compute: ComputeSettings | None = None,
) -> tuple[Any, Any]:
    """The base model (bf16 weights when `bf16`, else fp32) with a trainable LoRA adapter
    (`init_adapter_dir`'s, else a new one shaped by `lora`; adapter weights stay fp32), and its tokenizer,
    on `compute`'s device (CUDA when present by default) with its attention kernel and, when configured,
    gradient checkpointing. Seed torch first for a reproducible new adapter."""
    from peft import PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from models.training.device import enable_gradient_checkpointing, load_kwargs, select_device

    compute = compute or ComputeSettings()
    device = select_device(compute.device)
    tokenizer = AutoTokenizer.from_pretrained(base_model_dir)
    model = AutoModelForCausalLM.from_pretrained(base_model_dir, **load_kwargs(compute, bf16, device))
    if init_adapter_dir is not None:
        model = PeftModel.from_pretrained(model, init_adapter_dir, is_trainable=True)
    else:
        model = get_peft_model(model, lora.peft_config())
    if compute.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    return model.to(device), tokenizer


StepCallback = Callable[[dict[str, float]], None]


def _step_logger(total_steps: int, on_step: StepCallback | None) -> Any:
    from transformers import TrainerCallback

    class StepLog(TrainerCallback):
        """One concise progress line per optimiser step, and the step's metrics to `on_step`. Tokens are the
        trainer's count of the tokens it was fed (packed rows differ in length, so an epoch average misleads)."""

        def __init__(self) -> None:
            self.last = time.perf_counter()
            self.seen = 0
            self.losses: list[float] = []
            self.evaluations: dict[int, tuple[int, float]] = {}
            """step -> (tokens fed so far, held-out loss), from the trainer's evaluations between steps."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "eval_loss" in logs and state.global_step > 0 and state.global_step not in self.evaluations:
                self.evaluations[state.global_step] = (state.num_input_tokens_seen, float(logs["eval_loss"]))
                log.info("SFT step %d/%d  held-out loss %.3f", state.global_step, total_steps, logs["eval_loss"])
                if on_step is not None:
                    on_step({"step": float(state.global_step), "eval_loss": float(logs["eval_loss"])})
            if not logs or "loss" not in logs:
                return
            now = time.perf_counter()
            seconds, self.last = now - self.last, now
            tokens, self.seen = state.num_input_tokens_seen - self.seen, state.num_input_tokens_seen
            loss = float(logs["loss"])
            self.losses.append(loss)
            metrics = {
                "loss": loss,
                "learning_rate": float(logs.get("learning_rate", math.nan)),
                "seconds": seconds,
                "tokens": float(tokens),
            }
            log.info(
                "SFT step %d/%d  loss %.3f  %.0f tok/s",
                state.global_step,
                total_steps,
                loss,
                tokens / seconds if seconds > 0 else 0.0,
            )
            if on_step is not None:
                on_step({"step": float(state.global_step), **metrics})

    return StepLog()


def trainer_class(trained_positions_only: bool) -> Any:
    """TRL's SFTTrainer, or (for `SFTSettings.trained_positions_only`) a subclass whose loss runs the LM head
    at the trained positions only."""
    from trl import SFTTrainer

    if not trained_positions_only:
        return SFTTrainer

    class TrainedPositionsSFTTrainer(SFTTrainer):
        """Ours, on top of TRL: where Triton is missing (the CPU), TRL's fused LM head scores every position of a
        packed row, over the whole vocabulary and in fp32, to keep tile shapes fixed for compilers; only the
        assistant tokens (about a quarter of a conversation) carry the loss. This loss runs the head on those
        positions alone and is the same quantity: summed negative log-likelihood of the trained tokens over the
        trainer's item count (`num_items_in_batch`, or the step's trained tokens). Entropy and token accuracy
        are logged as TRL logs them, on the same positions."""

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            import torch

            if return_outputs:  # the logits-for-metrics path: TRL's own
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            mode = "train" if self.model.training else "eval"
            causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
            features = {k: v for k, v in inputs.items() if k != "labels"}
            hidden = causal_lm.model(**features, use_cache=False).last_hidden_state[:, :-1]
            labels = inputs["labels"][:, 1:]
            mask = labels != -100
            logits = causal_lm.lm_head(hidden[mask]).float()
            targets = labels[mask]
            total = torch.nn.functional.cross_entropy(logits, targets, reduction="sum")
            count = num_items_in_batch if num_items_in_batch is not None else mask.sum()
            loss = total / torch.as_tensor(count, device=total.device).clamp(min=1)
            with torch.no_grad():
                logp = torch.log_softmax(logits, dim=-1)
                entropy = -(logp.exp() * logp).sum(-1)
                trained = max(int(mask.sum()), 1)
                self._metrics[mode]["entropy"].append(float(entropy.sum()) / trained)
                correct = (logits.argmax(-1) == targets).sum()
                self._metrics[mode]["mean_token_accuracy"].append(float(correct) / trained)
            return loss

    return TrainedPositionsSFTTrainer


def trainer_config(settings: SFTSettings, output_dir: Path, on_cpu: bool, has_eval: bool = False) -> Any:
    """TRL's SFTConfig for `settings`: packed (BFD) windows, loss on completions only, gradient checkpointing
    only when `settings.compute` asks for it; inside the trainer, evaluation of the held-out windows and an
    adapter checkpoint every `checkpoint_every` steps (none when 0); bf16 only where the device has it natively."""
    from trl import SFTConfig

    from models.training.device import train_in_bf16

    every = settings.checkpoint_every
    return SFTConfig(
        output_dir=str(output_dir / "trainer"),
        learning_rate=settings.learning_rate,
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps,
        per_device_train_batch_size=settings.batch_size,
        per_device_eval_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.grad_accumulation,
        max_length=settings.max_length,
        packing=settings.packing,
        packing_strategy="bfd",
        completion_only_loss=True,
        bf16=train_in_bf16(settings.bf16, "cpu" if on_cpu else "cuda"),
        use_cpu=on_cpu,
        # TRL turns checkpointing on by default, recomputing every layer's forward during the backward.
        gradient_checkpointing=settings.compute.gradient_checkpointing,
        seed=settings.seed,
        data_seed=settings.seed,
        logging_steps=1,
        save_strategy="steps" if every else "no",
        save_steps=every or 500,
        save_only_model=True,  # the adapter only: a checkpoint is a point of the learning curve
        eval_strategy="steps" if every and has_eval else "no",
        eval_steps=every or None,
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
        include_num_input_tokens_seen="all",  # packed padding-free rows: every token fed is real
    )


def _log_data(train: TokenisedConversations) -> None:
    log.info(
        "SFT data: %d conversations -> %d examples (%d windows, %d per-turn fallbacks, %d truncated), "
        "%d tokens, %d of them trained",
        train.conversations,
        len(train.examples),
        train.windows,
        train.per_turn_fallbacks,
        train.truncated,
        train.tokens,
        train.loss_tokens,
    )


def _sft_trainer(
    model: Any,
    tokenizer: Any,
    settings: SFTSettings,
    output_dir: Path,
    train: TokenisedConversations,
    eval_rows: list[dict[str, list[int]]],
    on_step: StepCallback | None,
) -> tuple[Any, Any]:
    """The trainer of `run_sft` and its step logger, attached (it collects the losses and the held-out
    evaluations; its step count comes from the packed rows)."""
    from datasets import Dataset
    from transformers import PrinterCallback

    config = trainer_config(
        settings, output_dir, on_cpu=next(model.parameters()).device.type == "cpu", has_eval=bool(eval_rows)
    )
    trainer = trainer_class(settings.trained_positions_only)(
        model=model,
        args=config,
        train_dataset=Dataset.from_list([e.as_row() for e in train.examples]),
        eval_dataset=Dataset.from_list(eval_rows) if eval_rows else None,
        processing_class=tokenizer,
    )
    packed_rows = len(trainer.train_dataset)
    steps_per_epoch = max(1, math.ceil(packed_rows / (settings.batch_size * settings.grad_accumulation)))
    total_steps = settings.max_steps if settings.max_steps > 0 else math.ceil(steps_per_epoch * settings.epochs)
    step_log = _step_logger(total_steps, on_step)
    trainer.add_callback(step_log)
    # With tqdm off the trainer prints every log dict; the step line above is the console's one line per step.
    trainer.remove_callback(PrinterCallback)
    return trainer, step_log


def _saved_checkpoints(output_dir: Path, step_log: Any) -> tuple[SFTCheckpoint, ...]:
    """The trainer's checkpoints under output_dir/trainer, each with its tokens fed and held-out loss."""
    checkpoints = []
    for step in sorted(int(p.name.removeprefix("checkpoint-")) for p in (output_dir / "trainer").glob("checkpoint-*")):
        tokens, eval_loss = step_log.evaluations.get(step, (0, None))
        checkpoints.append(SFTCheckpoint(step, tokens, eval_loss, output_dir / "trainer" / f"checkpoint-{step}"))
    return tuple(checkpoints)


def run_sft(
    base_model_dir: Path,
    train_conversations: Sequence[Sequence[Message]],
    output_dir: Path,
    settings: SFTSettings | None = None,
    eval_conversations: Sequence[Sequence[Message]] = (),
    init_adapter_dir: Path | None = None,
    on_step: StepCallback | None = None,
) -> SFTResult:
    """Train a LoRA adapter on the assistant turns of `train_conversations`; save it to output_dir/adapter.
    `on_step` receives each optimiser step's metrics (step, loss, learning_rate, seconds).

    1. load the model with its adapter and tokenise both conversation sets; 2. build the trainer;
    3. train between two held-out evaluations; 4. save the adapter and list the checkpoints."""
    import torch

    settings = settings or SFTSettings()
    start = time.perf_counter()
    torch.manual_seed(settings.seed)
    model, tokenizer = load_lora_model(
        base_model_dir, settings.lora, init_adapter_dir, bf16=settings.bf16, compute=settings.compute
    )
    train = tokenise_conversations(train_conversations, tokenizer, settings.max_length)
    if not train.examples:
        raise ValueError("no assistant turns in the training conversations")
    held_out = tokenise_conversations(eval_conversations, tokenizer, settings.max_length)
    eval_rows = [e.as_row() for e in held_out.examples[: settings.eval_windows]]
    _log_data(train)
    trainer, step_log = _sft_trainer(model, tokenizer, settings, output_dir, train, eval_rows, on_step)
    before = trainer.evaluate()["eval_loss"] if eval_rows else None
    train_start = time.perf_counter()
    outcome = trainer.train()
    train_seconds = time.perf_counter() - train_start
    # The trainer evaluated the last step already where it is a checkpoint step: the same adapter, the same rows.
    last = step_log.evaluations.get(int(outcome.global_step))
    after = last[1] if last is not None else trainer.evaluate()["eval_loss"] if eval_rows else None
    adapter_dir = output_dir / "adapter"
    trainer.model.save_pretrained(adapter_dir, save_embedding_layers=False)
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
        examples=len(train.examples),
        wall_seconds=time.perf_counter() - start,
        train_tokens=int(trainer.state.num_input_tokens_seen),
        train_seconds=train_seconds,
        loss_curve=tuple(step_log.losses),
        loss_tokens=train.loss_tokens,
        checkpoints=_saved_checkpoints(output_dir, step_log),
        pass_tokens=train.tokens,
    )
