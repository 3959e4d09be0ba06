"""SFT warm-start: assistant-only examples, and training lowers the loss on held-out traces."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from models.training.config import LoraSettings, SFTSettings
from models.training.sft import prompt_completion_examples, run_sft


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


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="max_steps"):
        SFTSettings(max_steps=0)
    with pytest.raises(ValueError, match="LoRA r"):
        LoraSettings(r=0)


@pytest.mark.slow
def test_sft_lowers_the_held_out_loss_and_saves_a_loadable_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    rng = random.Random(0)
    train = [_conversation(rng) for _ in range(24)]
    held_out = [_conversation(rng) for _ in range(6)]
    settings = SFTSettings(learning_rate=3e-3, max_steps=15, batch_size=8, lora=LoraSettings(r=8, alpha=16))
    result = run_sft(tiny_model_dir, train, tmp_path, settings, eval_conversations=held_out)
    assert result.examples == 48 and result.steps == 15
    assert result.eval_loss_after < result.eval_loss_before - 0.3
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    adapted = PeftModel.from_pretrained(base, result.adapter_dir)
    assert adapted.peft_config["default"].r == 8
