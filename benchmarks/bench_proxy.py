"""Rollout-proxy overhead: completion tokens per second through the proxy vs straight to vLLM.

Starts one vLLM engine and one recording proxy (a subprocess, as in production) in front of it, then
sends the same requests (fixed chat prompts, greedy, `max_tokens` tokens each with `ignore_eos`, so every
request generates exactly as many tokens on every path) at concurrency 1 and 32, to three targets:

* `direct`: the engine, plain requests (what a client without the proxy sends);
* `direct_fields`: the engine, with the fields the proxy adds (`logprobs`, `return_token_ids`): the
  engine-side cost of recording, which any recorder pays;
* `proxy`: the same plain requests through the proxy (hop + recording + that engine-side cost).

On CPU, vLLM binds its model worker to every core but the last one (VLLM_CPU_OMP_THREADS_BIND=auto
reserves one core for its front end); unless `--no-pin`, this benchmark's client and the proxy are pinned
to that reserved core too, so they never preempt the model's core (as a deployment would keep them off it).

The targets rotate order in every repeat so that drift and background load hit all of them alike; each
repeat gives paired ratios and the medians over repeats are reported: `overhead_pct` = 1 - proxy/direct
(the headline), split into `fields_overhead_pct` = 1 - direct_fields/direct (engine side) and
`hop_overhead_pct` = 1 - proxy/direct_fields (the proxy itself). Writes benchmarks/results/proxy.json.

    python -m benchmarks.bench_proxy [--model tiny-random-llama|smollm2-135m-instruct] [--repeats 7]
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
from typing import Any

import httpx

from models.serving.engine import EngineConfig, VLLMEngine
from models.serving.model_store import TINY, resolve_model
from models.serving.proxy import ProxyConfig, ProxyServer
from models.settings import DataPaths
from models.storage import TableStore

RESULTS = Path(__file__).resolve().parent / "results" / "proxy.json"
ITEMS = ("bike", "sofa", "phone", "lamp", "desk", "guitar", "camera", "kettle")
NAMES = ("direct", "direct_fields", "proxy")
RECORDING_FIELDS = {"logprobs": True, "return_token_ids": True}


def bodies(n: int, max_tokens: int) -> list[dict[str, Any]]:
    return [
        {
            "model": "bench",
            "messages": [{"role": "user", "content": f"Write an ad for a used {ITEMS[i % len(ITEMS)]}, number {i}."}],
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "ignore_eos": True,
        }
        for i in range(n)
    ]


async def run_batch(
    base_url: str, requests: list[dict[str, Any]], concurrency: int, extra: dict[str, Any] | None = None
) -> tuple[int, float]:
    """Send `requests` with at most `concurrency` in flight; return (completion tokens, seconds)."""
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits) as client:

        async def one(body: dict[str, Any], i: int) -> int:
            async with gate:
                headers = {"X-Episode-Id": "bench", "X-Agent-Id": "a", "X-Turn-Index": str(i), "X-Attempt": "0"}
                response = await client.post("/chat/completions", json=body | (extra or {}), headers=headers)
                response.raise_for_status()
                return int(response.json()["usage"]["completion_tokens"])

        await one(requests[0], -1)  # open a connection outside the timed part
        start = time.perf_counter()
        tokens = await asyncio.gather(*(one(b, i) for i, b in enumerate(requests)))
        return sum(tokens), time.perf_counter() - start


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def median_loss_pct(numerator: list[float], denominator: list[float]) -> float:
    """Median over repeats of 1 - a/b, in percent (positive: `a` is slower)."""
    return round(100.0 * statistics.median(1.0 - a / b for a, b in zip(numerator, denominator, strict=True)), 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=TINY, help="model reference (models.serving.model_store.resolve_model)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--requests-per-slot", type=int, default=4, help="requests per batch = this x concurrency")
    parser.add_argument("--min-requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--no-pin", action="store_true", help="do not pin the client and proxy to the last CPU")
    args = parser.parse_args(argv)

    model_path = resolve_model(args.model, DataPaths.from_env().models)
    work = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    engine_config = EngineConfig(
        model_path=model_path, served_model_name="bench", max_model_len=1024, enable_lora=False
    )
    samples: dict[int, dict[str, list[float]]] = {c: {n: [] for n in NAMES} for c in args.concurrency}
    pinned: set[int] | None = None
    proxy_cpu: dict[int, list[float]] = {c: [] for c in args.concurrency}  # CPU ms per proxied call
    started = time.time()
    with VLLMEngine(engine_config, log_path=work / "vllm.log") as engine:
        proxy_config = ProxyConfig(upstreams=(engine.base_url,), table_root=work / "tables", flush_every=256, port=0)
        with ProxyServer(proxy_config, log_path=work / "proxy.log") as proxy:
            if not args.no_pin and (os.cpu_count() or 1) > 1:
                pinned = {(os.cpu_count() or 1) - 1}
                os.sched_setaffinity(0, pinned)
                os.sched_setaffinity(proxy.process.pid, pinned)
            targets = {
                "direct": (engine.base_url, None),
                "direct_fields": (engine.base_url, RECORDING_FIELDS),
                "proxy": (proxy.base_url, None),
            }
            for c in args.concurrency:  # warm-up: prefix cache, connection pools, first-call costs
                for url, extra in targets.values():
                    asyncio.run(run_batch(url, bodies(max(c, 4), args.max_tokens), c, extra))
            for repeat in range(args.repeats):
                order = NAMES[repeat % 3 :] + NAMES[: repeat % 3]
                if repeat % 6 >= 3:
                    order = order[::-1]
                for c in args.concurrency:
                    requests = bodies(max(args.min_requests, args.requests_per_slot * c), args.max_tokens)
                    for name in order:
                        url, extra = targets[name]
                        cpu_before = process_cpu_s(proxy.process.pid)
                        tokens, seconds = asyncio.run(run_batch(url, requests, c, extra))
                        if name == "proxy":
                            spent = process_cpu_s(proxy.process.pid) - cpu_before
                            proxy_cpu[c].append(1000.0 * spent / (len(requests) + 1))
                        assert tokens == len(requests) * args.max_tokens, (tokens, len(requests))
                        samples[c][name].append(tokens / seconds)
                        print(f"repeat {repeat} c={c:<3d} {name:13s} {tokens / seconds:8.1f} tok/s", flush=True)
        recorded = int(TableStore(work / "tables").query("SELECT count(*) AS n FROM recorded_calls").n[0])

    rows = []
    for c in args.concurrency:
        got = samples[c]
        rows.append(
            {
                "concurrency": c,
                "requests_per_batch": max(args.min_requests, args.requests_per_slot * c),
                **{f"{n}_tok_per_s": round(statistics.median(got[n]), 1) for n in NAMES},
                "overhead_pct": median_loss_pct(got["proxy"], got["direct"]),
                "fields_overhead_pct": median_loss_pct(got["direct_fields"], got["direct"]),
                "hop_overhead_pct": median_loss_pct(got["proxy"], got["direct_fields"]),
                "proxy_cpu_ms_per_call": round(statistics.median(proxy_cpu[c]), 2),
                "samples_tok_per_s": {n: [round(x, 1) for x in got[n]] for n in NAMES},
            }
        )
    result = {
        "model": args.model,
        "max_tokens": args.max_tokens,
        "repeats": args.repeats,
        "recorded_rows": recorded,
        "wall_s": round(time.time() - started, 1),
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "engine": "vllm-cpu 0.32.0, --enforce-eager",
        "client_and_proxy_pinned_to_cpus": sorted(pinned) if pinned else None,
        "rows": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    header = (
        f"{'conc':>4s} {'direct':>9s} {'+fields':>9s} {'proxy':>9s} {'overhead':>9s} {'fields':>8s} {'hop':>8s}"
        f" {'proxy CPU/call':>15s}"
    )
    print("\ntok/s (medians) and overheads (median of paired ratios)\n" + header)
    for r in rows:
        print(
            f"{r['concurrency']:4d} {r['direct_tok_per_s']:9.1f} {r['direct_fields_tok_per_s']:9.1f} "
            f"{r['proxy_tok_per_s']:9.1f} {r['overhead_pct']:8.2f}% {r['fields_overhead_pct']:7.2f}% "
            f"{r['hop_overhead_pct']:7.2f}% {r['proxy_cpu_ms_per_call']:12.2f} ms"
        )
    print(f"recorded rows: {recorded}; written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
