"""Multi-turn PPO specialists: rollouts through the engine and proxy, updates by models/training/ppo_learner.py.

One iteration:
1. rollout: the current adapter (served by vLLM under `<run>-v<i>`) plays `episodes_per_iteration`
   episodes in the learning seat against the configured code-agent counterparts, through the rollout
   proxy, which records every call with the engine's token ids and log-probs;
2. batch: the proxy's rows of this iteration (joined on episode and seat) plus each episode's terminal
   reward become the batch; no text is re-tokenised;
3. update: PPO epochs over minibatches (critic only during the warm-up iterations);
4. sync: the new adapter is saved and hot-loaded into the engine under `<run>-v<i+1>` (the previous one is
   unloaded), so the proxy records which version produced each call.

Every `checkpoint_every` iterations the adapter, critic, optimiser and RNG states and the metric history
are written atomically to `<output>/checkpoints/it<k>`; `train_ppo` resumes from the newest one. Rollout
scenarios and sampling seeds depend only on (seed, iteration), so a resumed run repeats what the killed
run would have done (up to the engine's numerical noise under different batching). Each `train_ppo` call
names its episodes with its own attempt token (`rollout_tag`): an iteration the killed attempt had already
played keeps that attempt's recorded calls apart, and the resumed iteration trains on its own calls only.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import math
import os
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from environments.core.runtime import EpisodeResult, progress_logger, run_episodes
from models.display import interval_text
from models.evaluation.stats import mean_estimate
from models.records import rows_for
from models.serving.adapters import advance_adapter
from models.serving.engine import EngineClient
from models.serving.proxy import flush_recorded_calls
from models.storage import TableStore
from models.training.config import PPOConfig, PPOResult, Services, adapter_name, learning_seat
from models.training.distributed import DataParallelLearner, distributed_rollouts
from models.training.ppo_learner import PPOLearner, ValueModel
from models.training.rollouts import rollout_specs, rollout_tag
from models.training.segments import EpisodeSample, RecordedTurn, episode_samples
from models.training.sft import load_lora_model

log = logging.getLogger("socialrl.ppo")


@dataclass
class PPOState:
    """What a checkpoint holds besides the tensors."""

    iteration: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


def flush_proxy(proxy_base_url: str, api_key: str | None = None) -> None:
    """Wait for the proxy to write every call it has received (`flush_recorded_calls`) before the batch is read.
    A call still in flight after the proxy's wait (its client gave up on it; the upstream has not answered) may
    be missing from the batch: logged, not fatal."""
    answer = flush_recorded_calls(proxy_base_url, api_key)
    if answer.get("in_flight"):
        log.warning(
            "the proxy still had %d calls in flight after its flush wait; their rows may be missing from this batch",
            answer["in_flight"],
        )


def load_recorded_turns(store: TableStore, episode_ids: list[str], seat: str) -> dict[str, list[RecordedTurn]]:
    """The seat's successful recorded calls per episode, in call order."""
    frame = store.query(
        """SELECT episode_id, prompt_token_ids, completion_token_ids, completion_logprobs
           FROM recorded_calls
           WHERE agent_id = ? AND list_contains(?, episode_id) AND error IS NULL
           ORDER BY episode_id, turn_index, attempt, created_at""",
        [seat, episode_ids],
    )
    turns: dict[str, list[RecordedTurn]] = {}
    for row in frame.itertuples(index=False):
        if row.completion_token_ids is None or len(row.completion_token_ids) == 0:
            continue
        turns.setdefault(row.episode_id, []).append(
            RecordedTurn(
                tuple(int(t) for t in row.prompt_token_ids),
                tuple(int(t) for t in row.completion_token_ids),
                tuple(float(x) for x in row.completion_logprobs),
            )
        )
    return turns


def recorded_call_errors(store: TableStore, episode_ids: list[str], seat: str) -> list[str]:
    """The error of every failed recorded call of the seat in these episodes (e.g. the engine's HTTP 400)."""
    frame = store.query(
        """SELECT error FROM recorded_calls
           WHERE agent_id = ? AND list_contains(?, episode_id) AND error IS NOT NULL
           ORDER BY episode_id, turn_index, attempt, created_at""",
        [seat, episode_ids],
    )
    return [str(e) for e in frame.error]


def training_samples(
    config: PPOConfig, results: list[EpisodeResult], recorded: dict[str, list[RecordedTurn]], seat: str
) -> tuple[list[EpisodeSample], dict[str, Any]]:
    """The iteration's batch: one sample per episode with recorded calls of the learning seat. Its reward is
    the outcome's minus `invalid_action_penalty` per invalid action (training only); with group advantages
    its baseline is the mean training reward of the other episodes of its group (results are in spec order,
    `group_size` consecutive episodes per group). Episodes without a recorded call cannot be trained on: they
    are counted (and still count in their group's baseline)."""
    rewards = [
        r.outcome.roles[seat].reward - config.invalid_action_penalty * r.outcome.roles[seat].invalid_actions
        for r in results
    ]
    samples, skipped = [], []
    for index, result in enumerate(results):
        turns = recorded.get(result.episode_id)
        if not turns:
            skipped.append(result.episode_id)
            continue
        sample = episode_samples(result.episode_id, turns, rewards[index], pack=config.pack_episodes)
        if config.hyper.advantage == "group":
            start = index - index % config.group_size
            others = [rewards[j] for j in range(start, start + config.group_size) if j != index]
            sample.baseline = sum(others) / len(others)
        samples.append(sample)
    stats = {
        "episodes_without_calls": len(skipped),
        "training_reward_mean": sum(rewards) / len(rewards) if rewards else math.nan,
    }
    return samples, stats


def _save_checkpoint(output: Path, state: PPOState, learner: PPOLearner, generator: torch.Generator, keep: int) -> Path:
    checkpoints = output / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    final = checkpoints / f"it{state.iteration:05d}"
    build = Path(tempfile.mkdtemp(prefix=".tmp-", dir=checkpoints))
    # The adapters never resize the vocabulary: "auto" would look the base model's config up on the Hub
    # (offline here, a warning on the console at every save).
    learner.actor.save_pretrained(build / "adapter", selected_adapters=["default"], save_embedding_layers=False)
    # Tensors and plain containers only, so resuming can load with weights_only=True (no arbitrary pickles).
    torch.save(
        {
            "critic": learner.critic.state_dict(),
            "actor_optimizer": learner.actor_optimizer.state_dict(),
            "critic_optimizer": learner.critic_optimizer.state_dict(),
            "generator": generator.get_state(),
            "torch_rng": torch.get_rng_state(),
        },
        build / "trainer_state.pt",
    )
    version, internal, gauss = random.getstate()
    (build / "python_rng.json").write_text(json.dumps([version, list(internal), gauss]))
    (build / "state.json").write_text(json.dumps(asdict(state), indent=2))
    if final.exists():
        shutil.rmtree(final)
    os.replace(build, final)
    for old in sorted(checkpoints.glob("it*"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(output: Path) -> Path | None:
    candidates = sorted(p for p in (output / "checkpoints").glob("it*") if (p / "state.json").is_file())
    return candidates[-1] if candidates else None


def checkpoint_iteration(output: Path) -> int | None:
    """The iteration `train_ppo` would resume from in `output` (its newest checkpoint's), None when it starts over."""
    checkpoint = latest_checkpoint(output)
    if checkpoint is None:
        return None
    return int(json.loads((checkpoint / "state.json").read_text())["iteration"])


def _restore_checkpoint(checkpoint: Path, learner: PPOLearner, generator: torch.Generator) -> PPOState:
    saved = torch.load(checkpoint / "trainer_state.pt", weights_only=True)
    learner.critic.load_state_dict(saved["critic"])
    learner.actor_optimizer.load_state_dict(saved["actor_optimizer"])
    learner.critic_optimizer.load_state_dict(saved["critic_optimizer"])
    generator.set_state(saved["generator"])
    torch.set_rng_state(saved["torch_rng"])
    version, internal, gauss = json.loads((checkpoint / "python_rng.json").read_text())
    random.setstate((version, tuple(internal), gauss))
    return PPOState(**json.loads((checkpoint / "state.json").read_text()))


def _build_learner(
    config: PPOConfig,
    base_model_dir: Path,
    critic_model_dir: Path,
    policy_adapter: Path | None,
    reference_adapter: Path | None,
) -> tuple[PPOLearner, Any]:
    """The learner: the policy adapter (a checkpoint's, the warm-start's, or a new one) on the base model,
    the critic (a separate model or a head on the actor), and the KL reference (the warm-start adapter,
    else the base model)."""
    torch.manual_seed(config.seed)
    actor, tokenizer = load_lora_model(
        base_model_dir, config.lora, policy_adapter, bf16=config.bf16, compute=config.compute
    )
    critic = ValueModel.from_pretrained(critic_model_dir, config.compute) if config.hyper.critic == "separate" else None
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    learner = PPOLearner(
        actor,
        critic,
        config.hyper,
        pad_id=pad_id,
        bf16=config.bf16,
        temperature=config.temperature,
        allowed_token_ids=config.sampling_extra.get("allowed_token_ids"),
        progress_interval_s=config.progress_interval_s,
    )
    if reference_adapter is not None and config.hyper.kl_coef > 0:
        learner.load_reference(reference_adapter)
    return learner, tokenizer


def _progress(config: PPOConfig, m: dict[str, Any]) -> str:
    """One line per iteration: what a person watching the run wants to see."""
    line = (
        f"PPO {config.run_name} it {m['iteration'] + 1}/{config.iterations}"
        f"{' (critic warm-up)' if not m['actor_trained'] else ''}  "
        f"reward {interval_text(m['reward_mean'], m['reward_ci_low'], m['reward_ci_high'])}  "
        f"agree {m['agreement_rate']:.2f}  invalid/ep {m['invalid_actions_per_episode']:.2f}  "
        f"kl {m.get('kl', math.nan):.4f}  vloss {m['value_loss']:.4f}  "
        f"ent {m['entropy']:.2f}  rollout {m['time_rollout_s']:.0f}s ({m['rollout_tokens_per_s']:.0f} tok/s)  "
        f"train {m['time_train_s']:.0f}s ({m['update_tokens_per_s']:.0f} tok/s)  sync {m['time_sync_s']:.1f}s"
    )
    if m.get("failed_calls") or m.get("episodes_without_calls"):
        line += f"  failed calls {m['failed_calls']}, episodes left out {m['episodes_without_calls']}"
    return line.replace("nan", "-")


def train_ppo(
    config: PPOConfig,
    base_model_dir: Path,
    services: Services,
    output: Path,
    critic_model_dir: Path | None = None,
    init_adapter: Path | None = None,
    on_iteration: Callable[[dict[str, Any]], None] | None = None,
) -> PPOResult:
    """Train (or resume) a PPO specialist; see the module docstring. `init_adapter` (the SFT warm-start)
    is both where the policy starts and the KL reference."""
    output.mkdir(parents=True, exist_ok=True)
    checkpoint = latest_checkpoint(output)
    build = functools.partial(
        _build_learner,
        config,
        base_model_dir,
        critic_model_dir or base_model_dir,
        checkpoint / "adapter" if checkpoint else init_adapter,
        init_adapter,
    )
    learner, tokenizer = build()
    if config.data_parallel.workers > 1:  # rank 0 stays here; the other ranks are Ray actors built alike
        learner = DataParallelLearner(learner, config.data_parallel, build)
    generator = torch.Generator().manual_seed(config.seed)
    state = PPOState()
    resumed_from = None
    if checkpoint is not None:
        state = _restore_checkpoint(checkpoint, learner, generator)
        resumed_from = state.iteration
        log.info("PPO %s: resumed from iteration %d (%s)", config.run_name, state.iteration, checkpoint)
    served = _sync_adapter(config, learner, services.engine, output, state.iteration, previous=None)
    attempt = uuid.uuid4().hex[:8]  # this process's episode ids (rollout_tag): a killed attempt's calls stay apart
    while state.iteration < config.iterations:
        metrics = _iteration(config, learner, services, state.iteration, served, generator, attempt)
        start = time.perf_counter()
        served = _sync_adapter(config, learner, services.engine, output, state.iteration + 1, previous=served)
        metrics["time_sync_s"] = time.perf_counter() - start
        state.history.append(metrics)
        state.iteration += 1
        if state.iteration % config.checkpoint_every == 0 or state.iteration == config.iterations:
            _save_checkpoint(output, state, learner, generator, config.keep_checkpoints)
        log.info(_progress(config, metrics))
        if on_iteration is not None:
            on_iteration(metrics)
    final = output / "adapter"
    learner.actor.save_pretrained(final, selected_adapters=["default"], save_embedding_layers=False)
    tokenizer.save_pretrained(final)
    if isinstance(learner, DataParallelLearner):
        learner.close()
    return PPOResult(final, served, state.history, resumed_from)


def _rollouts(config: PPOConfig, services: Services, iteration: int, served: str, attempt: str) -> list[EpisodeResult]:
    """Step 1: the iteration's episodes played by the served adapter through the proxy, recorded and stored
    (episode ids and run id under `rollout_tag(run, iteration, attempt)`)."""
    if config.data_parallel.rollout_workers > 1:  # episodes spread over Ray tasks, recorded by the same proxy
        results: list[EpisodeResult] = distributed_rollouts(
            config, iteration, services.proxy_base_url, served, config.data_parallel, services.proxy_api_key, attempt
        )
    else:
        specs = rollout_specs(config, iteration, services.proxy_base_url, served, services.proxy_api_key, attempt)
        # One line per ended episode (a rollout is minutes on CPU), headed apart from the iteration's own lines
        # ("PPO <run> it i/n ..."), which say when the rollout ended and what the update did.
        label = f"PPO {config.run_name} rollout {iteration + 1}/{config.iterations}"
        results = asyncio.run(
            run_episodes(
                specs,
                concurrency=config.concurrency,
                turn_timeout=config.turn_timeout_s,
                on_result=progress_logger(log, label, len(specs)),
            )
        )
    flush_proxy(services.proxy_base_url, services.proxy_api_key)
    services.store.append_all(rows_for(results, run_id=rollout_tag(config.run_name, iteration, attempt)))
    return results


def _batch(
    config: PPOConfig, services: Services, iteration: int, results: list[EpisodeResult]
) -> tuple[list[EpisodeSample], dict[str, list[RecordedTurn]], dict[str, Any]]:
    """Step 2: the batch from the proxy's recorded calls (what failed or was left out is counted and logged)."""
    seat = learning_seat(config)
    episode_ids = [r.episode_id for r in results]
    recorded = load_recorded_turns(services.store, episode_ids, seat)
    errors = recorded_call_errors(services.store, episode_ids, seat)
    samples, stats = training_samples(config, results, recorded, seat)
    stats["failed_calls"] = len(errors)
    if errors or stats["episodes_without_calls"]:
        log.warning(
            "PPO %s it %d: %d failed calls (first: %s), %d episodes without a recorded call left out",
            config.run_name, iteration + 1, len(errors), errors[0][:300] if errors else "-",
            stats["episodes_without_calls"],
        )  # fmt: skip
    if not samples:
        raise RuntimeError(f"iteration {iteration}: the proxy recorded no calls of seat {seat!r}")
    return samples, recorded, stats


def _iteration(
    config: PPOConfig,
    learner: PPOLearner,
    services: Services,
    iteration: int,
    served: str,
    generator: torch.Generator,
    attempt: str,
) -> dict[str, Any]:
    """One iteration's rollout, batch and update (the sync is the caller's); its metrics."""
    seat = learning_seat(config)
    start = time.perf_counter()
    results = _rollouts(config, services, iteration, served, attempt)
    rollout_s = time.perf_counter() - start
    rewards = [r.outcome.roles[seat].reward for r in results]
    curve = mean_estimate(rewards, [r.outcome.scenario_id for r in results], (0.0, 1.0), seed=iteration)
    log.info(
        "PPO %s it %d/%d rollout: %d episodes, reward %.3f [%.3f, %.3f], %.0fs",
        config.run_name, iteration + 1, config.iterations, len(results), curve.mean, curve.ci_low, curve.ci_high,
        rollout_s,
    )  # fmt: skip
    start = time.perf_counter()
    samples, recorded, batch_stats = _batch(config, services, iteration, results)
    prepared, prepare_stats = learner.prepare(samples)
    train_actor = iteration >= config.critic_warmup_iterations
    update_start = time.perf_counter()
    update = learner.update(prepared, train_actor=train_actor, generator=generator)
    update_s = time.perf_counter() - update_start
    rollout_tokens = sum(len(t.prompt_ids) + len(t.completion_ids) for turns in recorded.values() for t in turns)
    return {
        "iteration": iteration,
        "adapter": served,
        "rollout_tag": rollout_tag(config.run_name, iteration, attempt),  # where its episodes and calls are
        "time_rollout_s": rollout_s,
        "time_update_s": update_s,
        "time_train_s": time.perf_counter() - start,
        "reward_mean": curve.mean,
        "reward_ci_low": curve.ci_low,
        "reward_ci_high": curve.ci_high,
        "episodes": len(results),
        "agreement_rate": sum(r.outcome.agreement for r in results) / len(results),
        "invalid_actions_per_episode": sum(r.outcome.roles[seat].invalid_actions for r in results) / len(results),
        "packed_fraction": sum(s.packed for s in samples) / len(samples),
        "agent_tokens": sum(len(seg.agent_positions) for s in samples for seg in s.segments),
        "rollout_tokens": rollout_tokens,
        "rollout_tokens_per_s": rollout_tokens / rollout_s,
        "update_tokens_per_s": update["update_tokens"] / update_s,
        "actor_trained": train_actor,
        **batch_stats,
        **prepare_stats,
        **update,
    }


def _sync_adapter(
    config: PPOConfig, learner: PPOLearner, engine: EngineClient, output: Path, iteration: int, previous: str | None
) -> str:
    """Step 4: save the current adapter and hot-load it into the engine; unload the previous version."""
    name = adapter_name(config, iteration)
    directory = output / "adapters" / name
    if directory.exists():
        shutil.rmtree(directory)
    learner.actor.save_pretrained(directory, selected_adapters=["default"], save_embedding_layers=False)
    return advance_adapter(engine, name, directory, previous)


def main(argv: list[str] | None = None) -> int:
    """Run PPO as its own process (what a Dagster run worker or a test starts)."""
    parser = argparse.ArgumentParser(description="Train a PPO specialist against a running engine and proxy.")
    parser.add_argument("--config", type=Path, required=True, help="JSON of PPOConfig fields")
    parser.add_argument("--base-model", type=Path, required=True)
    parser.add_argument("--critic-model", type=Path, default=None)
    parser.add_argument("--init-adapter", type=Path, default=None)
    parser.add_argument("--engine-url", required=True, help="the engine's OpenAI base URL (…/v1)")
    parser.add_argument("--proxy-url", required=True, help="the rollout proxy's OpenAI base URL (…/v1)")
    parser.add_argument("--table-root", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    config = PPOConfig.from_dict(json.loads(args.config.read_text()))
    # Tokens come from the environment, never from the command line (where `ps` would show them).
    engine = EngineClient(args.engine_url, api_key=os.environ.get("SOCIALRL_ENGINE_API_KEY") or None)
    proxy_key = os.environ.get("SOCIALRL_PROXY_API_KEY") or None
    services = Services(engine, args.proxy_url, TableStore(args.table_root), proxy_api_key=proxy_key)
    result = train_ppo(
        config,
        args.base_model,
        services,
        args.output,
        critic_model_dir=args.critic_model,
        init_adapter=args.init_adapter,
        on_iteration=lambda m: print(
            json.dumps({k: v for k, v in m.items() if isinstance(v, int | float | str)}), flush=True
        ),
    )
    print(
        json.dumps(
            {"adapter": str(result.adapter_dir), "served": result.served_name, "resumed_from": result.resumed_from}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
