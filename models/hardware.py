"""What this machine computes natively, read once, for the settings that only pay where it does.

bf16 is a speed setting here, never a numerical requirement: the profiles ask for it (half the memory, and on
AVX512-BF16/AMX CPUs and on GPUs the faster kernels), but a CPU without native bf16 emulates every bf16 matmul.
On this project's 2-core AVX2 machine (`python -m benchmarks.bench_bf16`, benchmarks/results/bf16_cpu.json,
fp32 against bf16 side by side): a 256x576 @ 576x1536 matmul 104 against 1.2 GFLOP/s, a SmolLM2-135M LoRA
training step 94 against 4.3 tokens/s (22x; a yoao format warm-up step took 16 min in bf16), the vLLM engine
37 against 13 generated tokens/s. `bf16_or_fp32` is the one rule the trainers (models/training/device.py)
and the engine (models/serving/engine.py) apply.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

log = logging.getLogger("socialrl.hardware")

_CPUINFO = Path("/proc/cpuinfo")


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux /proc/cpuinfo; empty elsewhere)."""
    try:
        text = _CPUINFO.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def native_bf16(device_type: str = "cpu") -> bool:
    """Whether `device_type` ("cpu" or "cuda") multiplies bf16 natively: a GPU torch reports bf16 support for,
    or a CPU with AVX512-BF16 or AMX-BF16 (torch's own check where this torch build has it, else the flags)."""
    import torch

    if device_type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device_type != "cpu":
        raise ValueError(f"unknown device type {device_type!r}")
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    if all(check is not None for check in checks):
        return any(bool(check()) for check in checks)
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


@functools.cache
def _say_fp32(device_type: str, what: str) -> None:
    log.warning(
        "%s: bf16 asked for, but this %s has no native bf16 (AVX512-BF16 or AMX): using fp32; emulated bf16 "
        "trains about 20x slower here (benchmarks/results/bf16_cpu.json)",
        what,
        device_type.upper(),
    )


def bf16_or_fp32(requested: bool, device_type: str, what: str) -> bool:
    """`requested` where `device_type` computes bf16 natively, else False, said once per (device, `what`); a
    device that computes nothing (`meta`, for shapes) keeps `requested`."""
    if requested and device_type in ("cpu", "cuda") and not native_bf16(device_type):
        _say_fp32(device_type, what)
        return False
    return requested
