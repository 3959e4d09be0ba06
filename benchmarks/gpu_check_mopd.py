"""MOPD's GPU check: the MOPD learner (models/training/mopd_learner.py) trains a LoRA student on CUDA.

On a machine with only torch, transformers, peft and accelerate (no vLLM, TRL, Dagster, MLflow, DuckDB or
network), from the repository root:

    PYTHONPATH=. python benchmarks/gpu_check_mopd.py

It writes a tiny random-weight Llama (LlamaConfig, a word-level tokenizer; nothing downloaded) to a temporary
folder, loads it with a LoRA adapter through models.training.sft.load_lora_model (as MOPD's `_start_learner`
does: bf16 base weights, fp32 adapter, on the selected device), and runs `--steps` MOPD updates on synthetic
teacher top-k targets built on the CPU (as the engine's scores are). It records the device of every tensor
passed to the student's forward, of every parameter and of the optimiser's moments, and whether bf16 autocast
was on for the device during the forward. Prints one JSON line and writes it to $OUT/mopd_gpu.json when OUT is
set (or to --output). Falls back to the CPU where torch sees no GPU (`--device auto`); exits 1 when a check
fails.

It imports models.training.mopd_learner, not models.training.mopd: the loop module imports the engine client
(httpx) and the table store (duckdb), which such a machine lacks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from models.training.config import ComputeSettings, LoraSettings
from models.training.mopd_config import MOPDConfig
from models.training.mopd_learner import MOPDLearner, ScoredSegment
from models.training.segments import Segment

SERVICES = ("vllm", "trl", "dagster", "mlflow", "duckdb", "httpx")
"""Packages the check must not import (absent on the GPU machine)."""


def write_tiny_llama(directory: Path, vocab: int = 512, hidden: int = 64, seed: int = 0) -> Path:
    """A random-weight two-layer Llama and a word-level tokenizer (pad id 0) in `directory`."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    words = {f"w{i}": i for i in range(4, vocab)} | {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3}
    backend = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    ).save_pretrained(directory)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def synthetic_batch(
    vocab: int, segments: int = 4, length: int = 48, agent: int = 16, top_k: int = 8, seed: int = 0
) -> list[ScoredSegment]:
    """Segments whose last `agent` tokens are the student's, each scored by a fixed random teacher: its top-k
    ids and log-probs at every agent position plus the sampled token (padded, `valid` marking real entries),
    on the CPU, shaped as models.training.mopd.score_segment returns them. Lengths differ (padding is used)."""
    rng = torch.Generator().manual_seed(seed)
    batch = []
    for s in range(segments):
        n = length - 4 * s
        ids = torch.randint(4, vocab, (n,), generator=rng).tolist()
        positions = list(range(n - agent, n))
        teacher = torch.log_softmax(3.0 * torch.randn(len(positions), vocab, generator=rng), dim=-1)
        top = torch.topk(teacher, top_k, dim=-1).indices
        teacher_ids = torch.zeros((len(positions), top_k + 1), dtype=torch.long)
        valid = torch.zeros_like(teacher_ids, dtype=torch.bool)
        for row, p in enumerate(positions):
            row_ids = top[row].tolist() + ([ids[p]] if ids[p] not in top[row].tolist() else [])
            teacher_ids[row, : len(row_ids)] = torch.tensor(row_ids)
            valid[row, : len(row_ids)] = True
        logprobs = torch.where(valid, teacher.gather(-1, teacher_ids), torch.zeros(()))
        sampled = teacher[torch.arange(len(positions)), torch.tensor([ids[p] for p in positions])]
        segment = Segment(ids, positions, [0.0] * len(positions))
        batch.append(
            ScoredSegment(
                domain="synthetic-v0",
                segment=segment,
                teacher_ids=teacher_ids,
                teacher_logprobs=logprobs,
                valid=valid,
                positions=positions,
                sampled_teacher_logprob=sampled,
            )
        )
    return batch


class DeviceLog:
    """A forward pre-hook on the student: the device of every tensor passed to forward, and whether bf16
    autocast was on for the student's device type then."""

    def __init__(self) -> None:
        self.devices: set[str] = set()
        self.autocast: list[bool] = []

    def __call__(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        device = next(module.parameters()).device
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.Tensor):
                self.devices.add(str(value.device))
        self.autocast.append(
            torch.is_autocast_enabled(device.type) and torch.get_autocast_dtype(device.type) == torch.bfloat16
        )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_check(device_name: str, steps: int, bf16: bool) -> dict[str, Any]:
    """Build the student, run `steps` MOPD updates on one synthetic batch, and report."""
    import peft
    import transformers

    from models.training.device import train_in_bf16
    from models.training.sft import load_lora_model

    start = time.perf_counter()
    lora = LoraSettings(r=8, alpha=16)
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = write_tiny_llama(Path(scratch) / "tiny-llama")
        torch.manual_seed(0)
        student, tokenizer = load_lora_model(model_dir, lora, bf16=bf16, compute=ComputeSettings(device=device_name))
    learner = MOPDLearner(student, MOPDConfig(steps=steps, bf16=bf16, learning_rate=1e-2), tokenizer.pad_token_id)
    device = learner.device
    log = DeviceLog()
    student.register_forward_pre_hook(log, with_kwargs=True)
    batch = synthetic_batch(student.config.vocab_size)
    before = {n: p.detach().float().cpu().clone() for n, p in student.named_parameters() if p.requires_grad}
    _sync(device)
    updates, step_s = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        updates.append(learner.update(batch))
        _sync(device)
        step_s.append(time.perf_counter() - t0)
    after = {n: p.detach().float().cpu() for n, p in student.named_parameters() if p.requires_grad}
    moments = [
        v for state in learner.optimizer.state.values() for k, v in state.items() if k in ("exp_avg", "exp_avg_sq")
    ]
    losses = [u["reverse_kl"] for u in updates]
    checks = {
        "parameters_on_device": all(p.device == device for p in student.parameters()),
        "forward_inputs_on_device": log.devices == {str(device)},
        "optimizer_state_on_device": bool(moments) and all(m.device == device for m in moments),
        # bf16 autocast where asked for and the device has it natively (models/hardware.py), else none
        "autocast_in_forward": bool(log.autocast) and all(a == train_in_bf16(bf16, device) for a in log.autocast),
        "adapter_moved": any(not torch.equal(before[n], after[n]) for n in before),
        "losses_finite": all(torch.isfinite(torch.tensor(v)).item() for u in updates for v in u.values()),
        "teacher_targets_stay_on_cpu": all(b.teacher_ids.device.type == "cpu" for b in batch),
    }
    return {
        "check": "mopd_gpu",
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__},
        "bf16": bf16,
        "steps": steps,
        "losses": losses,
        "loss_decreased": losses[-1] < losses[0],
        "grad_norms": [u["grad_norm"] for u in updates],
        "scored_tokens": int(updates[0]["scored_tokens"]),
        "forward_input_devices": sorted(log.devices),
        **checks,
        "all_on_cuda": device.type == "cuda" and all(checks[k] for k in checks if k.endswith("on_device")),
        "services_imported": sorted(m for m in SERVICES if m in sys.modules),
        "step_s": step_s,
        "wall_s": time.perf_counter() - start,
        "ok": all(checks.values()) and not any(m in sys.modules for m in SERVICES),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto (CUDA when present, else the CPU), cpu, cuda, cuda:N")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--no-bf16", action="store_true", help="fp32 weights and compute (default: bf16 autocast)")
    parser.add_argument("--output", type=Path, help="JSON file (default: $OUT/mopd_gpu.json when OUT is set)")
    args = parser.parse_args(argv)
    result = run_check(args.device, args.steps, bf16=not args.no_bf16)
    line = json.dumps(result)
    print(line)
    output = args.output or (Path(os.environ["OUT"]) / "mopd_gpu.json" if os.environ.get("OUT") else None)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(line + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
