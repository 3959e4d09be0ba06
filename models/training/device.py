"""Which device and dtype the training stages use, and the model-loading options that follow from them.

| setting | CPU (the embedded default) | CUDA |
| --- | --- | --- |
| device | `auto` picks the CPU when torch sees no GPU | `auto` picks `cuda` (the current device) |
| base weights | bf16 when the stage says bf16 and the CPU has native bf16 (AVX512-BF16 or AMX), else fp32 (`models.hardware.bf16_or_fp32`: emulated bf16 is ~40x slower) | bf16 when the stage says bf16 and the GPU supports it; the paper profile says bf16 |
| trained weights | LoRA adapters and a separate critic keep fp32 master weights (AdamW steps of lr 1e-5 vanish in bf16) | the same |
| compute | bf16 autocast under the same rule | the same, on the GPU's tensor cores |
| attention | `sdpa` | `sdpa` (flash / memory-efficient kernels) |

Imports torch only: a GPU box with torch, transformers and peft runs it (no TRL).
"""

from __future__ import annotations

from typing import Any

import torch

from models.hardware import bf16_or_fp32
from models.training.config import ComputeSettings


def select_device(preference: str = "auto") -> torch.device:
    """The device a stage trains on: `preference` ('auto', 'cpu', 'cuda', 'cuda:N'); 'auto' is CUDA when
    torch sees a GPU, else the CPU. Asking for CUDA on a machine without one is an error, not a silent CPU run."""
    if preference == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(preference)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"device {preference!r} asked for, but torch sees no CUDA GPU")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise RuntimeError(f"device {preference!r} asked for, but torch sees {torch.cuda.device_count()} GPU(s)")
    elif device.type != "cpu":
        raise ValueError(f"unsupported training device {preference!r}")
    return device


def train_in_bf16(bf16: bool, device: torch.device | str) -> bool:
    """Whether a stage that asks for bf16 (`bf16`) gets it on `device`: only where it computes bf16 natively."""
    return bf16_or_fp32(bf16, torch.device(device).type, "training")


def weights_dtype(bf16: bool, device: torch.device | str = "cpu") -> torch.dtype:
    """dtype of frozen base weights on `device`: bf16 when the stage trains in bf16 there, else fp32."""
    return torch.bfloat16 if train_in_bf16(bf16, device) else torch.float32


def load_kwargs(compute: ComputeSettings, bf16: bool, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Keyword arguments of `from_pretrained` for a frozen base model that will sit on `device`."""
    return {"dtype": weights_dtype(bf16, device), "attn_implementation": compute.attn_implementation}


def autocast(device: torch.device | str, bf16: bool) -> torch.autocast:
    """The learners' compute context: bf16 autocast on `device`'s type where the stage asks for bf16 and the
    device has it natively (else a no-op). Follows the device the model sits on: a CPU autocast around a CUDA
    model would leave its matmuls in fp32."""
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=train_in_bf16(bf16, device))


def enable_gradient_checkpointing(model: Any) -> None:
    """Recompute activations in the backward pass (non-reentrant: works with frozen inputs and PEFT adapters,
    no `enable_input_require_grads` needed). The KV cache is off in training anyway (use_cache=False)."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
