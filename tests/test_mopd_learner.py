"""The MOPD learner on the student's device (models/training/mopd_learner.py): every tensor its update builds
follows the student's parameters, the bf16 autocast follows their device type, and the metrics come back as
floats. Runs on whatever device models.training.device picks (CUDA where present, else the CPU); no engine.

On a CPU-only machine inputs and model cannot sit apart, so the autocast tests below check the device type the
learner would use for a CUDA student as a pure function of its device."""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from models.training.config import ComputeSettings, LoraSettings
from models.training.device import autocast, select_device
from models.training.mopd_config import MOPDConfig
from models.training.mopd_learner import MOPDLearner, student_log_distributions, topk_reverse_kl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.gpu_check_mopd import synthetic_batch  # noqa: E402

DEVICES = sorted({"cpu", str(select_device("auto"))})


@pytest.fixture(autouse=True)
def _bf16_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about where tensors and autocast go, whatever this CPU's bf16 support (models/hardware.py)."""
    monkeypatch.setattr("models.hardware.native_bf16", lambda device_type="cpu": True)


"""The CPU, and the GPU where torch sees one."""


class DeviceRecorder(nn.Module):
    """A tiny causal LM (embedding + linear head, transformers' forward signature) that records the device of
    every tensor passed to forward, and whether bf16 autocast was on for its parameters' device type then."""

    def __init__(self, vocab: int = 64, hidden: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.head = nn.Linear(hidden, vocab)
        self.seen: list[tuple[str, torch.device]] = []
        self.autocast: list[bool] = []

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: torch.Tensor
    ) -> SimpleNamespace:
        device = self.head.weight.device
        named = {"input_ids": input_ids, "attention_mask": attention_mask, "logits_to_keep": logits_to_keep}
        self.seen += [(name, t.device) for name, t in named.items()]
        assert all(t.device == device for t in named.values()), f"inputs on {self.seen}, parameters on {device}"
        self.autocast.append(
            torch.is_autocast_enabled(device.type) and torch.get_autocast_dtype(device.type) == torch.bfloat16
        )
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return SimpleNamespace(logits=self.head(hidden[:, logits_to_keep]))


# ------------------------------------------------------------------------------------------- autocast
def test_autocast_follows_the_device_type_it_is_given() -> None:
    """A pure function of the device: the old learner's hard-coded CPU autocast would leave a CUDA student's
    matmuls in fp32 (and cast nothing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that CUDA autocast is disabled where it sees no GPU
        for name, kind in (("cpu", "cpu"), ("cuda", "cuda"), ("cuda:1", "cuda"), (torch.device("cuda", 0), "cuda")):
            context = autocast(name, True)
            assert context.device == kind and context.fast_dtype == torch.bfloat16, name
    with autocast("cpu", True):
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    with autocast("cpu", False):
        assert not torch.is_autocast_enabled("cpu")


def test_the_mopd_learner_autocasts_on_the_device_of_its_student() -> None:
    learner = MOPDLearner(DeviceRecorder(), MOPDConfig(steps=1, bf16=True), pad_id=0)
    assert learner.device == torch.device("cpu")
    assert learner._autocast().device == "cpu"
    learner.device = torch.device("cuda", 0)  # as a student loaded on a GPU sets it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert learner._autocast().device == "cuda"


# ------------------------------------------------------------------------------------------- one update
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bf16", [False, True])
def test_an_update_feeds_the_student_only_tensors_on_its_device(device: str, bf16: bool) -> None:
    """The teacher targets arrive on the CPU (as score_segment builds them); the update moves what it needs,
    leaves the caller's batch where it was, and returns floats."""
    torch.manual_seed(0)
    model = DeviceRecorder().to(device)
    learner = MOPDLearner(model, MOPDConfig(steps=1, bf16=bf16, micro_batch_tokens=64), pad_id=0)
    batch = synthetic_batch(vocab=64, segments=3, length=32, agent=6, top_k=4)
    before = model.head.weight.detach().cpu().clone()
    out = learner.update(batch)
    assert len(model.autocast) == 2  # rows of 32, 28 and 24 tokens in micro-batches of <= 64 padded tokens
    assert {name for name, _ in model.seen} == {"input_ids", "attention_mask", "logits_to_keep"}
    assert {d for _, d in model.seen} == {torch.device(device)}
    assert model.autocast == [bf16] * len(model.autocast)
    assert all(isinstance(v, float) and math.isfinite(v) for v in out.values())
    assert out["scored_tokens"] == 18.0 and out["reverse_kl"] > 0
    assert not torch.equal(before, model.head.weight.detach().cpu())
    assert all(b.teacher_ids.device.type == "cpu" and b.valid.device.type == "cpu" for b in batch)


@pytest.mark.parametrize("device", DEVICES)
def test_one_update_of_the_tiny_lora_student_on_the_selected_device(device: str, tiny_model_dir: Path) -> None:
    """The tiny test model with a LoRA adapter, loaded as MOPD loads it, on `device`: every tensor passed to
    its forward is on the parameters' device, the reported loss is the mean top-k reverse KL of the batch
    before the step, and the step moves the adapter (its optimiser state on the same device)."""
    from models.training.sft import load_lora_model

    torch.manual_seed(0)
    student, tokenizer = load_lora_model(
        tiny_model_dir, LoraSettings(r=8, alpha=16), compute=ComputeSettings(device=device)
    )
    learner = MOPDLearner(student, MOPDConfig(steps=1, learning_rate=1e-2), tokenizer.pad_token_id)
    assert learner.device == torch.device(device) == next(student.parameters()).device
    seen: list[torch.device] = []

    def record(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen.extend(t.device for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor))

    student.register_forward_pre_hook(record, with_kwargs=True)
    batch = synthetic_batch(vocab=student.config.vocab_size, segments=2, length=24, agent=5, top_k=4)
    with torch.no_grad():
        logps = student_log_distributions(
            student, [b.segment for b in batch], [b.positions for b in batch], tokenizer.pad_token_id
        )
        on = [b.to(learner.device) for b in batch]
        expected = sum(
            float(topk_reverse_kl(lp, b.teacher_ids, b.teacher_logprobs, b.valid).sum())
            for lp, b in zip(logps, on, strict=True)
        ) / sum(len(b.positions) for b in batch)
    trained = {n: p.detach().cpu().clone() for n, p in student.named_parameters() if p.requires_grad}
    seen.clear()
    out = learner.update(batch)
    assert seen and set(seen) == {torch.device(device)}
    assert out["reverse_kl"] == pytest.approx(expected, rel=1e-4)
    assert any(not torch.equal(trained[n], p.detach().cpu()) for n, p in student.named_parameters() if n in trained)
    moments = [s["exp_avg"] for s in learner.optimizer.state.values()]
    assert moments and {m.device for m in moments} == {torch.device(device)}


# ----------------------------------------------------------------------------------- the GPU check script
def test_the_gpu_check_script_runs_with_torch_transformers_and_peft_only(tmp_path: Path) -> None:
    """benchmarks/gpu_check_mopd.py on the CPU with the GPU box's packages only (no httpx or duckdb either:
    models.training.mopd needs them, the learner does not), writing $OUT/mopd_gpu.json."""
    from tests.test_gpu_path import GPU_BOX_ABSENT, _run_without

    code = (
        "import os, runpy, sys\n"
        f"os.environ['OUT'] = {str(tmp_path)!r}\n"
        "sys.argv = ['gpu_check_mopd.py', '--device', 'cpu', '--steps', '2']\n"
        "runpy.run_path('benchmarks/gpu_check_mopd.py', run_name='__main__')\n"
    )
    out = _run_without((*GPU_BOX_ABSENT, "httpx"), code, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    line = json.loads(out.stdout.strip().splitlines()[-1])
    assert line == json.loads((tmp_path / "mopd_gpu.json").read_text())
    assert line["ok"] and line["device"] == "cpu" and not line["all_on_cuda"] and line["services_imported"] == []
    assert len(line["losses"]) == 2 and line["forward_input_devices"] == ["cpu"] and line["autocast_in_forward"]
