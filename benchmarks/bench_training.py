"""Training-loop throughput against this machine's own limits, side by side in one run.

On the cpu profile's model (SmolLM2-135M-Instruct, bf16 base weights, LoRA r=16 on all projections) and
the Craigslist teacher traces (the data `make run` trains on):

| key | what is measured |
| --- | --- |
| `raw_tokens_per_s` | a plain loop: forward + backward of packed 2048-token rows (position ids restart per conversation), bf16 autocast: the box's roofline for this model |
| `sft_tokens_per_s` | models/training/sft.py `run_sft` (TRL SFTTrainer, whole conversations, best-fit packing) on the same conversations, tokens fed (the trainer's count) / optimisation-loop seconds |
| `ppo_update_tokens_per_s` | `PPOLearner.update` (shared value head, the cpu default: one forward + backward for policy and values) on the same conversations as packed episodes; `ppo_update_separate_critic_tokens_per_s` with the paper's separate critic |
| `ppo_prepare_tokens_per_s` | `PPOLearner.prepare` (forward only: old values, the reference policy's log-probs) on the same batch |
| `rollout_tokens_per_s` | prompt + completion tokens of every recorded call of a PPO rollout (16 Craigslist episodes, concurrency 16, through the proxy) / rollout seconds |
| `engine_tokens_per_s_same_concurrency` | a sample of the same calls (`--replay-calls`, default 64: four waves) replayed straight to the engine (same prompt token ids, same completion lengths, ignore_eos, 16 in flight, in recorded order so prefix caching sees the same reuse) |
| `sync_share` | adapter save + hot-load into vLLM as a share of the PPO iteration |

Ratios: `sft_over_raw`, `ppo_update_over_raw`, `rollout_over_engine`. The engine part runs once eager
(`--enforce-eager`, the cpu profile's engine) and once compiled, with start-up times, under `engine_modes`.
Results go to benchmarks/results/training.json; `--skip-engine` re-measures the trainers and keeps the
previous file's engine figures, dated under `engine_figures_from`.

    python -m benchmarks.bench_training [--rows 6] [--sft-steps 6] [--episodes 16] [--replay-calls 64] [--skip-engine] [--skip-compiled]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import platform
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

RESULTS = Path(__file__).resolve().parent / "results" / "training.json"
ENV = "craigslist-v0"
log = logging.getLogger("socialrl.bench")
ENGINE_KEYS = ("rollout_tokens_per_s", "engine_tokens_per_s_same_concurrency", "rollout_over_engine", "sync_share")
"""The engine run's top-level figures (its details are under `engine_modes`)."""


def _conversations() -> list[list[dict[str, str]]]:
    from agents.traces import filter_traces
    from models.profiles import get_profile
    from models.socialrl import stage1

    profile = dataclasses.replace(get_profile("cpu"), scenario_source="dataset")
    return [t.messages for t in filter_traces(stage1.teacher_traces(ENV, profile), profile.trace_min_reward)]


def _packed_rows(examples, length: int) -> list[tuple[list[int], list[int]]]:
    rows, ids, positions = [], [], []
    for example in examples:
        if ids and len(ids) + len(example.input_ids) > length:
            rows.append((ids, positions))
            ids, positions = [], []
        ids = ids + list(example.input_ids)
        positions = positions + list(range(len(example.input_ids)))
    if ids:
        rows.append((ids, positions))
    return rows


def measure_raw(base: Path, examples, rows_wanted: int) -> float:
    """Forward + backward tokens/s of a plain loop over packed rows (the roofline)."""
    import torch

    from models.training.config import LoraSettings
    from models.training.sft import load_lora_model

    torch.manual_seed(0)
    model, _ = load_lora_model(base, LoraSettings(), None, bf16=True)
    model.train()
    rows = _packed_rows(examples, 2048)

    def step(ids: list[int], positions: list[int]) -> None:
        input_ids = torch.tensor([ids])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(input_ids=input_ids, position_ids=torch.tensor([positions]), labels=input_ids, use_cache=False)
        out.loss.backward()

    step(*rows[0])  # warm-up
    start, tokens = time.perf_counter(), 0
    for ids, positions in rows[1 : 1 + rows_wanted]:
        step(ids, positions)
        tokens += len(ids)
    return tokens / (time.perf_counter() - start)


def measure_sft(base: Path, conversations, steps: int, output: Path):
    from models.training.config import SFTSettings
    from models.training.sft import run_sft

    settings = SFTSettings(learning_rate=3e-4, max_steps=steps, grad_accumulation=1, bf16=True, eval_windows=0)
    return run_sft(base, conversations, output, settings)


def _episodes(examples, seed: int = 0):
    """The conversations as PPO episodes: assistant spans are the agent's turns (one-token log-probs 0)."""
    from models.training.segments import RecordedTurn, episode_samples

    rng = random.Random(seed)
    samples = []
    for index, example in enumerate(examples):
        ids, mask = list(example.input_ids), list(example.completion_mask)
        turns, start = [], None
        for j, bit in enumerate([*mask, 0]):
            if bit and start is None:
                start = j
            elif not bit and start is not None:
                turns.append(RecordedTurn(tuple(ids[:start]), tuple(ids[start:j]), (0.0,) * (j - start)))
                start = None
        if turns:
            samples.append(episode_samples(f"bench{index}", turns, float(rng.random() < 0.5)))
    return samples


def measure_ppo(base: Path, examples, critic: str) -> dict[str, float]:
    import torch

    from models.training.config import LoraSettings, PPOHyper
    from models.training.ppo_learner import PPOLearner, ValueModel
    from models.training.sft import load_lora_model

    torch.manual_seed(0)
    actor, tokenizer = load_lora_model(base, LoraSettings(), None, bf16=True)
    hyper = PPOHyper(
        actor_lr=2e-5, critic_lr=1e-4, minibatch_episodes=4, kl_coef=0.01, critic=critic, micro_batch_tokens=4096
    )
    separate = ValueModel.from_pretrained(base) if critic == "separate" else None
    learner = PPOLearner(actor, separate, hyper, pad_id=tokenizer.pad_token_id or 0, bf16=True, temperature=0.7)
    samples = _episodes(examples)[:16]
    tokens = sum(len(seg.input_ids) for s in samples for seg in s.segments)
    start = time.perf_counter()
    prepared, _ = learner.prepare(samples)
    prepare_s = time.perf_counter() - start
    start = time.perf_counter()
    stats = learner.update(prepared, train_actor=True, generator=torch.Generator().manual_seed(0))
    update_s = time.perf_counter() - start
    return {
        "update_tokens_per_s": stats["update_tokens"] / update_s,
        "prepare_tokens_per_s": tokens / prepare_s,
        "episodes": len(samples),
        "tokens": tokens,
    }


async def _replay(base_url: str, model: str, calls: list[tuple[list[int], int]], concurrency: int) -> float:
    """The recorded calls straight to the engine, `concurrency` in flight, in recorded order: tokens/s.

    A rate needs only a sample: the caller passes a few waves of calls, not the whole iteration, which
    would take as long as the rollout itself on this machine.
    """
    gate = asyncio.Semaphore(concurrency)
    done = 0
    async with httpx.AsyncClient(timeout=600) as client:

        async def one(prompt: list[int], n: int) -> int:
            async with gate:
                body = {
                    "model": model,
                    "prompt": prompt,
                    "max_tokens": n,
                    "min_tokens": n,
                    "ignore_eos": True,
                    "temperature": 0.7,
                }
                response = await client.post(f"{base_url}/completions", json=body)
                response.raise_for_status()
                usage = response.json()["usage"]
                nonlocal done
                done += 1
                if done % concurrency == 0 or done == len(calls):
                    log.info("replay %d/%d calls, %.0f s", done, len(calls), time.perf_counter() - start)
                return int(usage["prompt_tokens"]) + int(usage["completion_tokens"])

        start = time.perf_counter()
        total = sum(await asyncio.gather(*(one(p, n) for p, n in calls)))
        return total / (time.perf_counter() - start)


def measure_engine(
    base: Path, sft_adapter: Path, episodes: int, eager: bool, work: Path, replay_calls: int
) -> dict[str, Any]:
    """One PPO iteration (rollout, update, sync) from the SFT adapter, then the replay of its calls."""
    from models.profiles import get_profile
    from models.serving.engine import EngineConfig, VLLMEngine
    from models.serving.proxy import ProxyConfig, ProxyServer
    from models.storage import TableStore
    from models.training.config import Services
    from models.training.ppo import train_ppo

    profile = get_profile("cpu")
    started = time.perf_counter()
    config = EngineConfig(
        model_path=base,
        served_model_name="base",
        max_model_len=profile.engine.max_model_len,
        kv_cache_gib=profile.engine.kv_cache_gib,
        enforce_eager=eager,
    )
    with VLLMEngine(config, log_path=work / f"vllm-{'eager' if eager else 'compiled'}.log") as engine:
        startup_s = time.perf_counter() - started
        tables = work / f"tables-{'eager' if eager else 'compiled'}"
        with ProxyServer(
            ProxyConfig(upstreams=(engine.base_url,), table_root=tables, base_models=("base",)),
            log_path=work / "proxy.log",
        ) as proxy:
            ppo = dataclasses.replace(
                profile.ppo_for(ENV),
                iterations=1,
                critic_warmup_iterations=0,
                episodes_per_iteration=episodes,
                concurrency=episodes,
                scenario_source="dataset",
                run_name=f"bench-{'eager' if eager else 'compiled'}",
            )
            result = train_ppo(
                ppo,
                base,
                Services(engine.client, proxy.base_url, TableStore(tables)),
                work / f"ppo-{'eager' if eager else 'compiled'}",
                init_adapter=sft_adapter,
            )
            it = result.history[0]
            calls = TableStore(tables).query(
                "SELECT prompt_token_ids, completion_token_ids FROM recorded_calls "
                "WHERE error IS NULL ORDER BY created_at"
            )
            replay = [
                (list(map(int, p)), len(c))
                for p, c in zip(calls.prompt_token_ids, calls.completion_token_ids, strict=True)
            ]
            recorded_calls = len(replay)
            replay = replay[:replay_calls]
            engine_rate = asyncio.run(_replay(engine.base_url, result.served_name, replay, episodes))
    iteration_s = it["time_rollout_s"] + it["time_train_s"] + it["time_sync_s"]
    return {
        "startup_s": startup_s,
        "rollout_tokens_per_s": it["rollout_tokens_per_s"],
        "engine_tokens_per_s_same_concurrency": engine_rate,
        "rollout_over_engine": it["rollout_tokens_per_s"] / engine_rate,
        "sync_share": it["time_sync_s"] / iteration_s,
        "time_rollout_s": it["time_rollout_s"],
        "time_train_s": it["time_train_s"],
        "time_sync_s": it["time_sync_s"],
        "rollout_tokens": it["rollout_tokens"],
        "calls": recorded_calls,
        "replayed_calls": len(replay),
        "update_tokens_per_s_in_iteration": it["update_tokens_per_s"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=6, help="packed 2048-token rows for the raw loop")
    parser.add_argument("--sft-steps", type=int, default=6)
    parser.add_argument("--episodes", type=int, default=16, help="rollout episodes, all in flight")
    parser.add_argument("--replay-calls", type=int, default=64, help="recorded calls replayed for the engine rate")
    parser.add_argument(
        "--skip-engine",
        action="store_true",
        help="measure the trainers only; the engine figures of the previous results file are kept (and dated)",
    )
    parser.add_argument("--skip-compiled", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    from transformers import AutoTokenizer

    from models.serving.model_store import resolve_model
    from models.settings import DataPaths
    from models.training.sft import tokenise_conversations

    base = resolve_model("smollm2-135m-instruct", DataPaths.from_env().models)
    conversations = _conversations()
    examples = tokenise_conversations(conversations, AutoTokenizer.from_pretrained(base), 2048).examples
    work = Path(tempfile.mkdtemp(prefix="bench-training-"))
    result: dict[str, Any] = {
        "model": "smollm2-135m-instruct (bf16 base, LoRA r=16 all projections)",
        "data": f"{len(conversations)} Craigslist teacher conversations",
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    log.info("raw forward+backward ...")
    result["raw_tokens_per_s"] = measure_raw(base, examples, args.rows)
    log.info("raw %.0f tok/s; SFT ...", result["raw_tokens_per_s"])
    sft = measure_sft(base, conversations, args.sft_steps, work / "sft")
    result["sft_tokens_per_s"] = sft.tokens_per_second
    log.info("SFT %.0f tok/s; PPO update (shared critic) ...", sft.tokens_per_second)
    shared = measure_ppo(base, examples, "shared")
    result["ppo_update_tokens_per_s"] = shared["update_tokens_per_s"]
    result["ppo_prepare_tokens_per_s"] = shared["prepare_tokens_per_s"]
    log.info("PPO update %.0f tok/s; PPO update (separate critic) ...", shared["update_tokens_per_s"])
    separate = measure_ppo(base, examples, "separate")
    result["ppo_update_separate_critic_tokens_per_s"] = separate["update_tokens_per_s"]
    result["sft_over_raw"] = result["sft_tokens_per_s"] / result["raw_tokens_per_s"]
    result["ppo_update_over_raw"] = result["ppo_update_tokens_per_s"] / result["raw_tokens_per_s"]
    result["ppo_update_separate_critic_over_raw"] = separate["update_tokens_per_s"] / result["raw_tokens_per_s"]
    if not args.skip_engine:
        modes = {}
        for eager in (True,) if args.skip_compiled else (True, False):
            name = "eager" if eager else "compiled"
            log.info("engine %s: one PPO iteration of %d episodes + replay ...", name, args.episodes)
            modes[name] = measure_engine(base, sft.adapter_dir, args.episodes, eager, work, args.replay_calls)
            log.info("engine %s: %s", name, json.dumps({k: round(v, 3) for k, v in modes[name].items()}))
        result["engine_modes"] = modes
        chosen = modes["eager"]  # the cpu profile's engine
        for key in ENGINE_KEYS:
            result[key] = chosen[key]
    elif RESULTS.exists():
        # Every ratio still compares figures of one run: the engine's with its own replay, the trainers' with raw.
        previous = json.loads(RESULTS.read_text())
        for key in ("engine_modes", *ENGINE_KEYS):
            if key in previous:
                result[key] = previous[key]
        written = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(RESULTS.stat().st_mtime))
        result["engine_figures_from"] = previous.get("engine_figures_from", previous.get("measured_at", written))
    result["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result["load_average_end"] = os.getloadavg()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    keys = [k for k in result if k.endswith(("_per_s", "_over_raw", "_over_engine", "share"))]
    print(json.dumps({k: round(result[k], 3) for k in keys}, indent=2))
    print(f"written to {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
