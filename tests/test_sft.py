"""SFT warm-start: assistant-only examples, and training lowers the loss on held-out traces."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from models.training.config import LoraSettings, SFTSettings
from models.training.sft import prompt_completion_examples, run_sft, tokenise_conversations


def _conversation(rng: random.Random) -> list[dict[str, str]]:
    price = rng.randint(50, 200)
    return [
        {"role": "system", "content": "You are a buyer. End with OFFER $<price>."},
        {"role": "user", "content": f"The seller asks ${price}."},
        {"role": "assistant", "content": f"That is too much for me.\nOFFER ${price // 2}"},
        {"role": "user", "content": "No way."},
        {"role": "assistant", "content": f"My final word.\nOFFER ${price // 2 + 5}"},
    ]


def test_each_assistant_turn_is_one_completion_with_its_history() -> None:
    examples = prompt_completion_examples([_conversation(random.Random(0))])
    assert len(examples) == 2
    assert [m["role"] for m in examples[0]["prompt"]] == ["system", "user"]
    assert [m["role"] for m in examples[1]["prompt"]] == ["system", "user", "assistant", "user"]
    assert examples[1]["completion"][0]["content"].startswith("My final word.")
    assert prompt_completion_examples([[{"role": "user", "content": "hi"}]]) == []


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_a_conversation_is_one_example_with_every_assistant_turn_in_the_loss(tokenizer) -> None:
    conversation = _conversation(random.Random(0))
    built = tokenise_conversations([conversation], tokenizer, max_length=2048)
    assert (len(built.examples), built.windows, built.per_turn_fallbacks, built.truncated) == (1, 1, 0, 0)
    example = built.examples[0]
    whole = tokenizer.apply_chat_template(conversation, tokenize=True, return_dict=False)
    assert list(example.input_ids) == list(whole)
    trained = tokenizer.decode([t for t, m in zip(example.input_ids, example.completion_mask, strict=True) if m])
    # Exactly the two assistant messages (each with its end-of-turn marker), nothing of the prompts.
    assert "too much for me" in trained and "My final word" in trained
    assert "seller asks" not in trained and "No way" not in trained and "You are a buyer" not in trained
    assert trained.count("<|im_end|>") == 2
    # The per-turn alternative trains the same tokens but re-reads the shared prefix.
    per_turn = sum(
        len(tokenizer.apply_chat_template([*e["prompt"], *e["completion"]], tokenize=True, return_dict=False))
        for e in prompt_completion_examples([conversation])
    )
    assert per_turn > len(example.input_ids)


def test_long_conversations_are_split_into_windows_that_start_with_the_system_prompt(tokenizer) -> None:
    rng = random.Random(1)
    long = _conversation(rng)
    for k in range(30):
        long += [{"role": "user", "content": f"Round {k}: no."}, {"role": "assistant", "content": f"OFFER ${k}"}]
    whole = len(tokenizer.apply_chat_template(long, tokenize=True, return_dict=False))
    built = tokenise_conversations([long], tokenizer, max_length=whole // 3)
    assert built.windows >= 3 and built.truncated == 0
    system = tokenizer.apply_chat_template(long[:1], tokenize=True, return_dict=False)
    for example in built.examples:
        assert len(example.input_ids) <= whole // 3
        assert list(example.input_ids[: len(system)]) == list(system)
    # Every assistant turn is trained exactly once across the windows.
    trained = "".join(
        tokenizer.decode([t for t, m in zip(e.input_ids, e.completion_mask, strict=True) if m]) for e in built.examples
    )
    assert trained.count("<|im_end|>") == 32


def test_packed_sequences_do_not_attend_across_their_boundaries(tiny_model_dir: Path) -> None:
    """What packing relies on: with position ids restarting at 0 and no attention mask, transformers masks
    attention per packed sequence, so each sequence's logits equal those of the sequence alone."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32, attn_implementation="sdpa")
    a, b = torch.randint(5, 1000, (1, 17)), torch.randint(5, 1000, (1, 23))
    packed = torch.cat([a, b], dim=1)
    positions = torch.cat([torch.arange(17), torch.arange(23)]).unsqueeze(0)
    with torch.no_grad():
        together = model(input_ids=packed, position_ids=positions, use_cache=False).logits
        alone = model(input_ids=b).logits
        leaking = model(input_ids=packed).logits  # one causal sequence: b attends to a
    assert torch.allclose(together[:, 17:], alone, atol=1e-4)
    assert not torch.allclose(leaking[:, 17:], alone, atol=1e-4)


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="max_steps"):
        SFTSettings(max_steps=0)
    with pytest.raises(ValueError, match="LoRA r"):
        LoraSettings(r=0)


@pytest.mark.slow
def test_sft_lowers_the_held_out_loss_and_saves_a_loadable_adapter(
    tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    rng = random.Random(0)
    train = [_conversation(rng) for _ in range(24)]
    held_out = [_conversation(rng) for _ in range(6)]
    # The LM head at the trained positions (the cpu profile's loss; TRL's is checked equal to it below).
    settings = SFTSettings(
        learning_rate=3e-3,
        max_steps=15,
        grad_accumulation=2,
        trained_positions_only=True,
        lora=LoraSettings(r=8, alpha=16),
    )
    steps: list[dict[str, float]] = []
    with caplog.at_level("INFO", logger="socialrl.sft"):
        result = run_sft(tiny_model_dir, train, tmp_path, settings, eval_conversations=held_out, on_step=steps.append)
    # Progress: one line per optimiser step with its loss and rate, and one for the held-out loss measured
    # after the last step.
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("SFT step")]
    step_lines = [line for line in progress if "tok/s" in line]
    assert len(step_lines) == 15 and all(" loss " in line for line in step_lines)
    assert progress[-1] == f"SFT step 15/15  held-out loss {result.eval_loss_after:.3f}"
    assert "{'loss'" not in capsys.readouterr().out  # the trainer's own log dicts stay off the console
    assert result.examples == 24 and result.steps == 15  # one example per conversation
    assert result.eval_loss_after < result.eval_loss_before - 0.3
    evaluations = [s for s in steps if "eval_loss" in s]
    steps = [s for s in steps if "loss" in s]
    assert [s["step"] for s in steps] == list(range(1, 16)) and len(result.loss_curve) == 15
    assert evaluations == [{"step": 15.0, "eval_loss": result.eval_loss_after}]
    # Tokens are counted as fed: the steps' counts add up to the result's, and 15 steps of 2 packed rows
    # cannot hold more than 30 rows' worth.
    assert sum(s["tokens"] for s in steps) == result.train_tokens > 0 and result.tokens_per_second > 0
    assert result.train_tokens <= 15 * 2 * settings.max_length
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    adapted = PeftModel.from_pretrained(base, result.adapter_dir)
    assert adapted.peft_config["default"].r == 8


def test_the_trainer_checkpoints_gradients_only_when_the_settings_ask(tmp_path: Path) -> None:
    """TRL's SFTConfig defaults to gradient checkpointing; on CPU it only costs time, so it follows
    ComputeSettings (off by default)."""
    from models.training.config import ComputeSettings
    from models.training.sft import trainer_config

    default = trainer_config(SFTSettings(bf16=False), tmp_path, on_cpu=True)
    asked = trainer_config(
        SFTSettings(bf16=False, compute=ComputeSettings(gradient_checkpointing=True)), tmp_path, on_cpu=True
    )
    assert default.gradient_checkpointing is False and asked.gradient_checkpointing is True
    assert default.packing and default.completion_only_loss and default.eval_strategy == "no"


@pytest.mark.slow
def test_checkpoints_every_k_steps_carry_their_held_out_loss_and_a_loadable_adapter(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """SFTSettings.checkpoint_every: the learning curve's points (held-out loss and adapter per k steps)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    rng = random.Random(1)
    train = [_conversation(rng) for _ in range(16)]
    held_out = [_conversation(rng) for _ in range(4)]
    settings = SFTSettings(
        learning_rate=3e-3,
        max_steps=10,
        grad_accumulation=2,
        checkpoint_every=5,
        trained_positions_only=True,
        lora=LoraSettings(r=8, alpha=16),
    )
    steps: list[dict[str, float]] = []
    result = run_sft(tiny_model_dir, train, tmp_path, settings, eval_conversations=held_out, on_step=steps.append)
    assert [c.step for c in result.checkpoints] == [5, 10]
    first, last = result.checkpoints
    assert 0 < first.tokens < last.tokens == result.train_tokens
    assert last.eval_loss == pytest.approx(result.eval_loss_after, rel=1e-4)  # the same windows, the same weights
    assert last.eval_loss < first.eval_loss < result.eval_loss_before
    assert [s["eval_loss"] for s in steps if "eval_loss" in s] == [first.eval_loss, last.eval_loss]
    assert result.loss_tokens > 0
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), first.adapter_dir)
    assert adapted.peft_config["default"].r == 8


def test_the_trained_positions_loss_equals_trls_loss_and_gradients(tiny_model_dir: Path, tmp_path: Path) -> None:
    """SFTSettings.trained_positions_only runs the LM head at the trained positions only; on the same packed
    batch its loss and its gradients are TRL's (which scores every position on the CPU)."""
    import torch
    from datasets import Dataset

    from models.training.sft import load_lora_model, trainer_class, trainer_config

    rng = random.Random(3)
    settings = SFTSettings(max_steps=1, bf16=False, lora=LoraSettings(r=8, alpha=16))
    model, tokenizer = load_lora_model(tiny_model_dir, settings.lora)
    rows = [e.as_row() for e in tokenise_conversations([_conversation(rng) for _ in range(4)], tokenizer, 256).examples]
    results = {}
    for compact in (False, True):
        torch.manual_seed(0)
        model, tokenizer = load_lora_model(tiny_model_dir, settings.lora)
        trainer = trainer_class(compact)(
            model=model,
            args=trainer_config(settings, tmp_path / str(compact), on_cpu=True),
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
        )
        batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
        assert int((batch["labels"] != -100).sum()) < batch["labels"].numel() // 2  # most positions are context
        loss = trainer.compute_loss(model, batch)
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters() if p.requires_grad]
        results[compact] = (float(loss), grads, trainer._metrics["train"]["mean_token_accuracy"][-1])
    (trl_loss, trl_grads, trl_accuracy), (our_loss, our_grads, our_accuracy) = results[False], results[True]
    assert our_loss == pytest.approx(trl_loss, rel=1e-4)
    assert all(torch.allclose(a, b, rtol=1e-3, atol=1e-6) for a, b in zip(trl_grads, our_grads, strict=True))
    assert our_accuracy == pytest.approx(trl_accuracy)


@pytest.mark.slow
def test_epochs_feed_that_many_passes_of_the_training_tokens(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The ToM students train by passes (`ToMSettings.passes` -> `epochs`) and report passes made as
    train_tokens / pass_tokens: two epochs must feed every token of one pass twice."""
    rng = random.Random(2)
    train = [_conversation(rng) for _ in range(10)]
    settings = SFTSettings(
        learning_rate=1e-3,
        epochs=2.0,
        grad_accumulation=2,
        trained_positions_only=True,
        lora=LoraSettings(r=8, alpha=16),
    )
    result = run_sft(tiny_model_dir, train, tmp_path, settings)
    assert result.pass_tokens > 0 and result.train_tokens == pytest.approx(2 * result.pass_tokens, rel=0.01)
